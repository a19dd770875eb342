"""How much memory a pack needs while it trains: what sizes packs.

A pack that trains its trials one after the other (workers/train_boolean.py,
workers/train_symmetry.py) needs one trial's working set plus what every trial of the pack
holds for the whole pack (its drawn training set); a stacked pack (workers/stacked.py), every
slot's working set and share at once, padding slots included:

    pack bytes = working_bytes(config) + trials x trial_bytes(config)
    stacked:     slots(trials) x (working_bytes(config) + trial_bytes(config))

The estimate is deliberately simple and errs high; it only has to rank settings and keep a
pack inside its budget (``execution.pack_memory_mb``), not predict an allocator's peak:

* parameters: counted exactly, in closed form from the layers the models are made of
  (:func:`boolean_param_count`, :func:`symmetry_param_count`; no torch, so ``validate``
  stays light); each costs 4 float32 values in training: the weight, its gradient and
  AdamW's two moments;
* data: the training set as the pack draws it;
* activations: per training sample, a count of float32 values per layer that the forward
  pass keeps for the backward pass (below), for one batch;
* evaluation: chunks of at most :data:`workers.train_boolean.EVAL_BUDGET_BYTES` (256 MiB) of one
  trial at a time, after its training: the working set is the larger of the two;
* learning curves (``execution.curves``): each trial's kept points, held until its pack ends, a
  share of the trial's (:func:`curve_bytes`, measured bytes a point).
"""

from __future__ import annotations

from typing import Protocol

from attnsweep.workers.config import BooleanTrialConfig, SymmetryTrialConfig
from attnsweep.workers.curves import CurvePlan
from attnsweep.workers.student_registry import plugin_activations, plugin_param_count

FLOAT_BYTES = 4
# Weight, gradient and two AdamW moments.
PARAM_COPIES = 4
# Activations kept for backward, in units of one (position x width) float per layer:
# layer-norm, q/k/v, attention weights and the 4x-wide feed-forward layer.
TRANSFORMER_ACTS_PER_TOKEN = 16
# A package's student that says nothing of its size is sized as this many generic transformer
# blocks at max(width, d): an unknown model must err high, never low (docs/decisions.md).
PLUGIN_DEFAULT_BLOCKS = 4
EVAL_BUDGET_BYTES = 256 * 2**20
"""As :data:`workers.train_boolean.EVAL_BUDGET_BYTES` (kept here so that ``validate`` imports no torch)."""


STACKED_SLOTS = 32
"""The most slots a stacked pack pads its trials to (workers/stacked.py's lanes: 16 with AVX2,
32 with AVX-512); memory is sized for 32, so it errs high on AVX2."""


CURVE_POINT_BYTES = 320
"""Worker memory of one kept learning-curve point (bytes), held until its trial's pack ends
(workers/curves.py): a tuple of the epoch and three values, the values as floats (a CPU loop's
tensors are read as they are noted; a stacked loop reads its slots' to the host together), then
the point's share of the curve's columns and of the row pickled for Ray. Measured as the growth
of a worker's peak resident memory with curves against without: 206 bytes a point in a real
pack of two one-layer transformer trials (T = 300, 4,000 epochs each), 227 in two unstacked MLP
trials (width 2,048, 5,000 epochs), 212 in a stacked pack of 32 MLP trials (4,000 epochs); in
Ray workers (issue 48) 281 and 252 (+180 MB for 32 trials of 20,000 points, +323 MB for 64).
The largest, rounded up."""
CURVE_MAX_BYTES = 16 * 2**20
"""The most a trial's curve may hold in its worker (bytes): ``execution.curves.max_points`` is
refused beyond :data:`CURVE_MAX_POINTS`, at :data:`CURVE_POINT_BYTES` a point."""
CURVE_MAX_POINTS = CURVE_MAX_BYTES // CURVE_POINT_BYTES
"""The largest ``execution.curves.max_points``: 52,428 (:data:`CURVE_MAX_BYTES`)."""


class CurveSetting(Protocol):
    """What a curve setting says (the spec's ``execution.curves``, a :class:`workers.curves.CurvePlan`)."""

    every: int
    max_points: int


def curve_points(max_epochs: int, curves: CurveSetting | None) -> int:
    """The most points a trial of ``max_epochs`` keeps under ``curves`` (0 when None): the
    regular points and the last, ``ceil((max_epochs - 1) / stride) + 1`` at the stride of
    :meth:`workers.curves.CurvePlan.stride`, within ``max_points``."""
    if curves is None:
        return 0
    stride = CurvePlan(curves.every, curves.max_points).stride(max_epochs)
    return min(curves.max_points, -(-(max(max_epochs, 1) - 1) // stride) + 1)


def curve_bytes(max_epochs: int, curves: CurveSetting | None) -> int:
    """What a trial's learning curve holds in its worker until its pack ends (bytes): its
    :func:`curve_points` at :data:`CURVE_POINT_BYTES` a point; 0 without curves. Part of what a
    trial holds for its whole pack."""
    return curve_points(max_epochs, curves) * CURVE_POINT_BYTES


def stacked_slots(trials: int) -> int:
    """Slots a stacked pack of ``trials`` trials is sized for: whole groups of ``STACKED_SLOTS``."""
    return max(1, -(-trials // STACKED_SLOTS)) * STACKED_SLOTS


def pack_bytes(trial_bytes: int, working_bytes: int, trials: int, stacked: bool = False) -> int:
    """Memory of a pack of ``trials`` trials (bytes): one working set and every trial's share, or
    stacked (workers/stacked.py) a working set and a share for every slot, padding included
    (:func:`stacked_slots`)."""
    if stacked:
        return stacked_slots(trials) * (working_bytes + trial_bytes)
    return working_bytes + trials * trial_bytes


def boolean_trial_bytes(cfg: BooleanTrialConfig) -> int:
    """What one sparse-Boolean trial holds for its whole pack (bytes): its training set as
    drawn, ``m T`` uint8 bits, ``m`` float32 labels, ``s`` int64 positions."""
    return cfg.m * (cfg.T + FLOAT_BYTES) + 8 * cfg.s


def boolean_working_bytes(cfg: BooleanTrialConfig) -> int:
    """The most memory one sparse-Boolean trial uses while it trains or is scored (bytes).

    Training: its parameters (4 float32 values each) and, for the one-layer transformer, its
    training set's bits as float32 ``(m, T)`` twice (``1 - X`` where the step takes the
    one-hot form) and the rows gathered from it per minibatch, the
    hand-written step's tables (about 12 arrays of ``2T x (H + d)`` floats: LayerNorm input
    and output, scores and values, exponentials, and their gradients;
    workers/one_layer.py) and per sample ``16 d + 4 (H + d)`` floats; a deeper transformer
    keeps ``16 (T+1) d`` floats per sample and layer, the MLP ``4 max(T, mlp_width)``, and
    their data is the bits as float32. A one-layer step whose scores spread beyond the float32
    matmul form (range above 60, workers/train_boolean.py) holds the minibatch's bits in float64 twice
    (``x`` and ``1 - x``) while it runs: ``16 b (T + 1)`` bytes more for a minibatch of ``b``,
    counted for every one-layer trial, since whether its scores will spread is not known before
    it trains. Scoring: chunks of at most ``EVAL_BUDGET_BYTES``.
    Measured against the peak RSS of real packs in tests/workers/test_memory.py.
    """
    n_params = boolean_param_count(cfg.model, cfg.T, cfg.d, cfg.layers, cfg.heads, cfg.mlp_width)
    batch = min(cfg.m, cfg.batch_size or cfg.m)
    if cfg.model == "transformer" and cfg.layers == 1:
        rows = 2 * (cfg.T + 1)
        tables = 12 * rows * (cfg.heads + cfg.d)
        acts = 16 * cfg.d + 4 * (cfg.heads + cfg.d)
        data = (2 * cfg.m + batch) * (cfg.T + 1)  # the bits as floats, 1 - X (one-hot form), a minibatch
        data += 4 * batch * (cfg.T + 1)  # a float64 step's x and 1 - x: 16 b (T + 1) bytes, 4 float32 each
        train = FLOAT_BYTES * (PARAM_COPIES * n_params + tables + data + batch * acts)
        n_eval = rows + 16 * cfg.d
    else:
        acts = (
            TRANSFORMER_ACTS_PER_TOKEN * (cfg.T + 1) * cfg.d * cfg.layers
            if cfg.model == "transformer"
            else 4 * max(cfg.T, cfg.mlp_width) * cfg.layers
        )
        train = FLOAT_BYTES * (PARAM_COPIES * n_params + cfg.m * (cfg.T + 1) + batch * acts)
        n_eval = acts // max(cfg.layers, 1) // 2
    scoring = FLOAT_BYTES * PARAM_COPIES * n_params + min(EVAL_BUDGET_BYTES, cfg.n_test * FLOAT_BYTES * n_eval)
    return max(train, scoring)


def symmetry_trial_bytes(cfg: SymmetryTrialConfig) -> int:
    """What one symmetry trial holds for its whole pack (bytes): nothing but its row; its
    data are drawn when it trains (:func:`symmetry_working_bytes`). A kilobyte, to count it."""
    return 1024


def symmetry_working_bytes(cfg: SymmetryTrialConfig) -> int:
    """The most memory one symmetry trial uses while it trains (bytes).

    Data: X, K and Y of m training and ``n_test`` test samples, ``(2n + k) d`` floats each
    (augmentation holds a rotated copy and one ``d x d`` rotation per sample). Activations
    per sample: the transformer keeps ``16 (n + k) width`` floats (one block), the MLP
    ``4 mlp_width``, the inner-product student its ``(n + k)^2`` Gram matrices over 16
    hidden units, a package's student what :func:`student_activations` says.
    """
    width = cfg.mlp_width if cfg.model == "mlp" and cfg.equivariance in ("none", "augment") else cfg.width
    n_params = symmetry_param_count(cfg.model, cfg.equivariance, cfg.n, cfg.k, cfg.d, width, cfg.heads)
    data = (2 * cfg.n + cfg.k) * cfg.d
    if cfg.equivariance == "augment":
        data = 2 * data + cfg.d * cfg.d
    if cfg.equivariance == "orthogonal":
        acts = 16 * (cfg.n + cfg.k) ** 2 * cfg.heads
    else:
        acts = student_activations(cfg.model, cfg.n, cfg.k, cfg.d, width, cfg.heads)
    return FLOAT_BYTES * (PARAM_COPIES * n_params + cfg.m * (data + acts) + cfg.n_test * (2 * cfg.n + cfg.k) * cfg.d)


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


def symmetry_param_count(
    model: str, equivariance: str, n: int, k: int, d: int, width: int, heads: int, hidden: int = 16
) -> int:
    """Exact parameter count of the symmetry student of workers/students.py, in closed form.

    :class:`~workers.students.SeqTransformer` (width w): input projection ``d w + w``,
    positions ``n w`` (not for ``equivariance="permutation"``), five LayerNorms ``10 w``,
    self- and cross-attention ``2 x 4 w^2`` (no biases), feed-forward ``8 w^2 + 5 w``,
    readout ``w d + d``. :class:`~workers.students.SeqMLP` (two hidden layers of width w):
    ``(n + k) d w + w``, ``w^2 + w``, ``w n d + n d``.
    :class:`~workers.students.InnerProductStudent`: two pair-score MLPs of ``5 H hidden``
    each, the head weights a and c ``2H`` and lambda: ``10 H hidden + 2 H + 1``, whatever
    n, k and d. A package's student (workers/student_registry.py): its own ``param_count``,
    else its parameters counted on torch's meta device, else (it does not load or build there)
    :data:`PLUGIN_DEFAULT_BLOCKS` transformers at ``max(width, d)``, to err high. Checked
    against built students in tests/workers/test_memory.py.
    """
    if equivariance == "orthogonal":
        return 10 * heads * hidden + 2 * heads + 1
    w = width
    if model == "transformer":
        positions = 0 if equivariance == "permutation" else n * w
        return 16 * w * w + 2 * d * w + 16 * w + d + positions
    if model == "mlp":
        return (n + k) * d * w + w + (w * w + w) + w * n * d + n * d
    counted = plugin_param_count(model, n, k, d, width, heads)
    if counted is not None:
        return counted
    big = max(width, d)
    return PLUGIN_DEFAULT_BLOCKS * symmetry_param_count("transformer", "none", n, k, d, big, heads)


def student_activations(model: str, n: int, k: int, d: int, width: int, heads: int) -> int:
    """Float32 values one training sample keeps for the backward pass in the student ``model``
    (``equivariance`` none, augment or permutation): the transformer ``16 (n + k) width`` (one
    block), the MLP ``4 width`` (its ``mlp_width``), a package's student its own
    ``activations`` (workers/student_registry.py), or where it gives none or does not load
    :data:`PLUGIN_DEFAULT_BLOCKS` transformer blocks at ``max(width, d)``."""
    if model == "transformer":
        return TRANSFORMER_ACTS_PER_TOKEN * (n + k) * width
    if model == "mlp":
        return 4 * width
    given = plugin_activations(model, n, k, d, width, heads)
    if given is not None:
        return given
    return PLUGIN_DEFAULT_BLOCKS * TRANSFORMER_ACTS_PER_TOKEN * (n + k) * max(width, d)
