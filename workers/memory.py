"""How much memory one trial of a pack needs while it trains: what sizes packs.

The estimate is deliberately simple and errs high; it only has to rank settings and keep a
pack inside its budget (``execution.pack_memory_mb``), not predict an allocator's peak:

* parameters: counted exactly, by building the trial's model on the ``meta`` device (no
  memory, no compute); each costs 5 float32 values in training: the weight, its gradient,
  AdamW's two moments, and the copy :func:`workers.pack.masked_step` keeps of a finished
  trial;
* data: the training set, as float32;
* activations: per training sample, a count of float32 values per layer that the forward
  pass keeps for the backward pass (below), for one batch.

Evaluation runs in chunks under its own budget (:data:`workers.train.EVAL_BUDGET_BYTES`),
so it does not enter.
"""

from __future__ import annotations

import functools

import torch

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
    n_params = _param_count("symmetry", cfg.model, cfg.equivariance, cfg.n, cfg.k, cfg.d, width, cfg.heads)
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
    """Exact parameter count of a sparse-Boolean model (workers/models.py) at context length T.

    T enters both models only through one layer whose size is linear in T (the transformer's
    ``(T + 1, d)`` position table, the MLP's first ``(T, width)`` weight), so the count is
    affine in T: it is read off two models built at T = 2 and T = 3 (cached per architecture)
    instead of one built at every T. tests/workers/test_memory.py checks it against models
    built at the T asked for.
    """
    at2 = _param_count("boolean", model, 2, d, layers, heads, mlp_width)
    at3 = _param_count("boolean", model, 3, d, layers, heads, mlp_width)
    return at2 + (T - 2) * (at3 - at2)


SMALL_MODEL_FLOATS = 4_000_000
"""Models with at most about this many parameters are built on the CPU to be counted (a
millisecond); larger ones on the meta device (no storage, but some 20 ms each)."""


@functools.lru_cache(maxsize=4096)
def _param_count(family: str, *args) -> int:
    """Exact parameter count of a model, built on the CPU when it is surely small, else on
    the meta device (no storage)."""
    if family == "boolean":
        from workers.models import build_model as build

        _, T, d, layers, _, width = args
        wide = max(d, width)
        small = 4 * (T + 2) * wide + 16 * layers * wide * wide <= SMALL_MODEL_FLOATS
    else:
        from workers.students import build_student as build

        small = False
    if small:  # no device context: it intercepts every op, which costs more than the allocations
        model = build(*args)
    else:
        with torch.device("meta"):
            model = build(*args)
    return sum(p.numel() for p in model.parameters())
