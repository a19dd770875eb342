"""How much memory one trial of a pack needs while it trains: what sizes packs.

The estimate is deliberately simple and errs high; it only has to rank settings and keep a
pack inside its budget (``execution.pack_memory_mb``), not predict an allocator's peak:

* parameters: counted exactly, in closed form from the layers the models are made of
  (:func:`boolean_param_count`, :func:`symmetry_param_count`; no torch, so ``validate``
  stays light); each costs 5 float32 values in training: the weight, its gradient, AdamW's
  two moments, and the copy :func:`workers.pack.masked_step` keeps of a finished trial;
* data: the training set, as float32;
* activations: per training sample, a count of float32 values per layer that the forward
  pass keeps for the backward pass (below), for one batch.

Evaluation runs in chunks under its own budget (:data:`workers.train.EVAL_BUDGET_BYTES`),
so it does not enter.
"""

from __future__ import annotations

from workers.config import BooleanTrialConfig, SymmetryTrialConfig

FLOAT_BYTES = 4
# Weight, gradient, two AdamW moments, and masked_step's frozen copy.
PARAM_COPIES = 5
# Activations kept for backward, in units of one (position x width) float per layer:
# layer-norm, q/k/v, attention weights and the 4x-wide feed-forward layer.
TRANSFORMER_ACTS_PER_TOKEN = 16


def boolean_trial_bytes(cfg: BooleanTrialConfig) -> int:
    """Training memory of one sparse-Boolean trial (bytes), as described in the module doc.

    A one-layer transformer trains on the matmul path
    (:meth:`workers.models.CLSTransformer.forward_matmul`): its data is the bits (uint8)
    and their float32 one-hot ``(m, 2T)``, held twice (the backward's transposed copy),
    plus the uint8 copy made while encoding: ``19 T`` bytes per sample; its per-trial
    tables (LayerNorm, values, exponentials and their gradients) about ``16 d`` floats for
    each of the ``2 (T+1)`` (position, bit) rows; per sample ``32 d + 8 H (1 + d/H)`` floats.
    A deeper transformer keeps ``16 (T+1) d`` floats per sample and layer, the MLP
    ``4 max(T, mlp_width)``; their data is the training set as float32. Measured against
    the peak RSS of real packs in tests/workers/test_memory.py.
    """
    n_params = boolean_param_count(cfg.model, cfg.T, cfg.d, cfg.layers, cfg.heads, cfg.mlp_width)
    batch = min(cfg.m, cfg.batch_size or cfg.m)
    if cfg.model == "transformer" and cfg.layers == 1:
        acts = 32 * cfg.d + 8 * cfg.heads * (1 + cfg.d // cfg.heads)
        tables = 2 * (cfg.T + 1) * 16 * cfg.d
        return FLOAT_BYTES * (PARAM_COPIES * n_params + tables + batch * acts) + cfg.m * 19 * cfg.T
    if cfg.model == "transformer":
        acts = TRANSFORMER_ACTS_PER_TOKEN * (cfg.T + 1) * cfg.d * cfg.layers
    else:
        acts = 4 * max(cfg.T, cfg.mlp_width) * cfg.layers
    data = cfg.m * (cfg.T + 1)
    return FLOAT_BYTES * (PARAM_COPIES * n_params + data + batch * acts)


def symmetry_trial_bytes(cfg: SymmetryTrialConfig) -> int:
    """Training memory of one symmetry trial (bytes), as described in the module doc.

    Data: X, K and Y of m samples, ``(2n + k) d`` floats each (augmentation holds a rotated
    copy and one ``d x d`` rotation per sample). Activations per sample: the transformer
    keeps ``16 (n + k) width`` floats (one block), the MLP ``4 mlp_width``, the inner-product
    student its ``(n + k)^2`` Gram matrices over 16 hidden units.
    """
    width = cfg.mlp_width if cfg.model == "mlp" and cfg.equivariance in ("none", "augment") else cfg.width
    n_params = symmetry_param_count(cfg.model, cfg.equivariance, cfg.n, cfg.k, cfg.d, width, cfg.heads)
    data = (2 * cfg.n + cfg.k) * cfg.d
    if cfg.equivariance == "augment":
        data = 2 * data + cfg.d * cfg.d
    if cfg.equivariance == "orthogonal":
        acts = 16 * (cfg.n + cfg.k) ** 2 * cfg.heads
    elif cfg.model == "transformer":
        acts = TRANSFORMER_ACTS_PER_TOKEN * (cfg.n + cfg.k) * cfg.width
    else:
        acts = 4 * cfg.mlp_width
    return FLOAT_BYTES * (PARAM_COPIES * n_params + cfg.m * (data + acts))


def boolean_param_count(model: str, T: int, d: int, layers: int, heads: int, mlp_width: int) -> int:
    """Exact parameter count of a sparse-Boolean model of workers/models.py, in closed form.

    :class:`~workers.models.CLSTransformer`: token table ``2d``, positions ``(T + 1) d``,
    [CLS] ``d``, per block W_Q, W_K, W_V ``3 d^2`` (no biases), two LayerNorms ``4d`` and
    the feed-forward layer ``d x 4d x d`` with biases ``8 d^2 + 5d``; final LayerNorm ``2d``
    and readout ``d + 1``. :class:`~workers.models.MLP`: ``(T + 1) w``, then ``w^2 + w`` per
    further hidden layer, then ``w + 1``. ``heads`` does not enter (heads split d). Checked
    against built models in tests/workers/test_memory.py.

    Raises:
        ValueError: unknown model name.
    """
    if model == "transformer":
        return (T + 1) * d + 6 * d + layers * (11 * d * d + 9 * d) + 1
    if model == "mlp":
        w = mlp_width
        return (T + 1) * w + (layers - 1) * (w * w + w) + w + 1
    raise ValueError(f"model must be 'transformer' or 'mlp', got {model!r}")


def symmetry_param_count(model: str, equivariance: str, n: int, k: int, d: int, width: int, heads: int,
                         hidden: int = 16) -> int:
    """Exact parameter count of the symmetry student of workers/students.py, in closed form.

    :class:`~workers.students.SeqTransformer` (width w): input projection ``d w + w``,
    positions ``n w`` (not for ``equivariance="permutation"``), five LayerNorms ``10 w``,
    self- and cross-attention ``2 x 4 w^2`` (no biases), feed-forward ``8 w^2 + 5 w``,
    readout ``w d + d``. :class:`~workers.students.SeqMLP` (two hidden layers of width w):
    ``(n + k) d w + w``, ``w^2 + w``, ``w n d + n d``.
    :class:`~workers.students.InnerProductStudent`: two pair-score MLPs of ``5 H hidden``
    each, the head weights a and c ``2H`` and lambda: ``10 H hidden + 2 H + 1``, whatever
    n, k and d. Checked against built students in tests/workers/test_memory.py.
    """
    if equivariance == "orthogonal":
        return 10 * heads * hidden + 2 * heads + 1
    w = width
    if model == "transformer":
        positions = 0 if equivariance == "permutation" else n * w
        return 16 * w * w + 2 * d * w + 16 * w + d + positions
    return (n + k) * d * w + w + (w * w + w) + w * n * d + n * d
