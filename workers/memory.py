"""How much memory a pack needs while it trains: what sizes packs.

A pack that trains its trials one after the other (workers/train_boolean.py,
workers/train_symmetry.py) needs one trial's working set plus what every trial of the pack
holds for the whole pack (its drawn training set); a stacked pack (workers/stacked.py), every
slot's working set and share at once, padding slots included:

    pack bytes = working_bytes(config) + trials x trial_bytes(config)
    stacked:     slots(trials) x (working_bytes(config) + trial_bytes(config))

The estimate is deliberately simple and errs high; it only has to rank settings and keep a
pack inside its budget (``execution.pack_memory_mb``), not predict an allocator's peak:

* parameters: counted exactly, in closed form from the layers the models are made of, each
  model's in its own registry entry (workers/builtin_models.py for the sparse-Boolean models,
  workers/builtin_students.py for the symmetry students; no torch, so ``validate`` stays
  light); each costs 4 float32 values in training: the weight, its gradient and AdamW's two
  moments;
* data: the training set as the pack draws it;
* activations: per training sample, a count of float32 values that the forward pass keeps for
  the backward pass, for one batch, as each model's entry gives it;
* evaluation: chunks of at most :data:`workers.train_boolean.EVAL_BUDGET_BYTES` (256 MiB) of one
  trial at a time, after its training: the working set is the larger of the two;
* learning curves (``execution.curves``): each trial's kept points, held until its pack ends, a
  share of the trial's (:func:`curve_bytes`, measured bytes a point).
"""

from __future__ import annotations

from typing import Protocol

from attnsweep.workers.curves import CurvePlan

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


class BooleanSizes(Protocol):
    """What this module reads of a sparse-Boolean trial's config (workers/config.py
    ``BooleanTrialConfig``; named by what it reads, since the configs read the registries that
    read this module's constants)."""

    m: int
    T: int
    s: int
    batch_size: int | None


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


def boolean_trial_bytes(cfg: BooleanSizes) -> int:
    """What one sparse-Boolean trial holds for its whole pack (bytes): its training set as
    drawn, ``m T`` uint8 bits, ``m`` float32 labels, ``s`` int64 positions."""
    return cfg.m * (cfg.T + FLOAT_BYTES) + 8 * cfg.s


def working_set_bytes(n_params: int, train_floats: int, n_test: int, eval_floats: int) -> int:
    """The most memory one trial uses while it trains or is scored (bytes), from a model's own
    counts: training holds its ``n_params`` parameters (:data:`PARAM_COPIES` float32 values
    each: weight, gradient, AdamW's two moments) and ``train_floats`` more float32 values (its
    data, tables, a batch's activations); scoring holds the parameters and ``eval_floats``
    float32 values a test sample, ``n_test`` samples in chunks of at most
    :data:`EVAL_BUDGET_BYTES`. The larger of the two."""
    train = FLOAT_BYTES * (PARAM_COPIES * n_params + train_floats)
    scoring = FLOAT_BYTES * PARAM_COPIES * n_params + min(EVAL_BUDGET_BYTES, n_test * FLOAT_BYTES * eval_floats)
    return max(train, scoring)


def boolean_batch(cfg: BooleanSizes) -> int:
    """Samples of a sparse-Boolean trial's minibatch: ``batch_size``, or all ``m`` (full batch)."""
    return min(cfg.m, cfg.batch_size or cfg.m)


def symmetry_trial_bytes(cfg: object) -> int:
    """What one symmetry trial holds for its whole pack (bytes): nothing but its row; its
    data are drawn when it trains (:func:`workers.builtin_students.working_bytes`). A kilobyte, to count it."""
    return 1024
