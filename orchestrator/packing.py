"""Grouping trials into packs: trials with equal ``shape_key()`` trained in one call.

Trials arrive in grid order with seeds (and norm bounds) varying fastest, so runs of
consecutive trials share a shape key; a pack is cut from such a run, at most its pack
size long. This streams: no list of all trials is ever held.

Pack size is the spec's ``execution.pack_size``, or with ``auto`` (the default) the number
of trials whose estimated training memory (:mod:`workers.memory`, learning-curve buffers included) fits
``execution.pack_memory_mb``, between 1 and :data:`AUTO_PACK_MAX`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from attnsweep.workers import EXPERIMENTS
from attnsweep.workers.memory import STACKED_SLOTS, CurveSetting, curve_bytes, pack_bytes

if TYPE_CHECKING:  # the spec imports this module
    from attnsweep.orchestrator.spec import SweepSpec

# Beyond about 256 tiny trials a pack no longer gets faster per trial (BENCHMARKS.md,
# packed vs unpacked), and a lost worker would take more trials with it.
AUTO_PACK_MAX = 256


@dataclass(frozen=True)
class Pack:
    """Trials of one experiment trained together: ``ids[i]`` is the trial id of ``configs[i]``."""

    ids: tuple[str, ...]
    configs: tuple[BaseModel, ...]
    experiment: str = "sparse_boolean"

    def __len__(self) -> int:
        return len(self.ids)


def auto_pack_size(
    config: BaseModel,
    experiment: str,
    budget_bytes: float,
    group: int = STACKED_SLOTS,
    curves: CurveSetting | None = None,
) -> int:
    """Trials like ``config`` that fit ``budget_bytes`` of training memory, in [1, AUTO_PACK_MAX]:
    one trial's working set and each trial's share (workers/memory.py; with ``curves``, the
    spec's ``execution.curves``, its learning curve's buffer too) within the budget, or for
    a stacked pack (workers/stacking.py) whole groups of ``group`` slots (32 lanes on a CPU; on a
    GPU ``execution.device_group``), at least one (a lone trial fills one anyway; on a CPU the
    rule keeps a group under 1 GiB).

    Raises:
        KeyError: unknown experiment.
    """
    exp = EXPERIMENTS[experiment]
    per_trial, working = exp.memory_bytes(config), exp.working_bytes(config)
    per_trial += curve_bytes(getattr(config, "max_epochs", 1), curves)
    if exp.stacks(config):  # every slot holds a working set: whole lane groups that fit, at least one
        groups = budget_bytes // pack_bytes(per_trial, working, group, stacked=True)
        return int(min(AUTO_PACK_MAX, max(1, groups) * group))
    return int(max(1, min(AUTO_PACK_MAX, (budget_bytes - working) // max(per_trial, 1))))


def pack_sizer(
    pack_size: int | str,
    experiment: str,
    pack_memory_mb: float,
    share: int | None = None,
    group: int = STACKED_SLOTS,
    curves: CurveSetting | None = None,
) -> Callable[[BaseModel], int]:
    """The pack size of a trial's pack: ``pack_size`` itself, or with ``"auto"`` from the
    memory budget ``pack_memory_mb`` (MiB) for stacked groups of ``group`` slots, each trial
    with its learning curve's buffer (``curves``: the spec's ``execution.curves``), computed once
    per shape key, and at most ``share`` (the sweep's trials divided over its workers, so that no
    worker idles while one trains a pack that holds the whole sweep)."""
    if pack_size != "auto":
        return lambda _config: int(pack_size)
    cache: dict[tuple, int] = {}

    def size(config: BaseModel) -> int:
        key = config.shape_key()
        if key not in cache:
            budget = pack_memory_mb * 2**20
            cache[key] = min(auto_pack_size(config, experiment, budget, group, curves), share or AUTO_PACK_MAX)
        return cache[key]

    return size


def make_packs(
    trials: Iterable[tuple[str, BaseModel]],
    pack_size: int | Callable[[BaseModel], int],
    experiment: str = "sparse_boolean",
) -> Iterator[Pack]:
    """Cut ``(trial_id, config)`` pairs into packs of equal shape key.

    Args:
        trials: the trials in grid order.
        pack_size: the most trials per pack, or a function of a pack's first config giving it.
        experiment: the experiment the trials belong to.
    """
    size_of = pack_size if callable(pack_size) else (lambda _config: pack_size)
    ids: list[str] = []
    configs: list[BaseModel] = []
    key, limit = None, 0
    for tid, cfg in trials:
        k = cfg.shape_key()
        if configs and (k != key or len(configs) == limit):
            yield Pack(tuple(ids), tuple(configs), experiment)
            ids, configs = [], []
        if not configs:
            key, limit = k, size_of(cfg)
        ids.append(tid)
        configs.append(cfg)
    if configs:
        yield Pack(tuple(ids), tuple(configs), experiment)


PER_TRIAL_AXES = ("seed", "norm_bound", "fault")
"""Axes that vary inside a pack (not in any experiment's ``shape_key``)."""


def shape_groups(
    spec, limit: int = 20_000, sample: int = 2_000, seed: int = 0
) -> tuple[Iterator[tuple[BaseModel, int]], int, bool]:
    """The runs of consecutive trials of a grid spec that share a shape key, without
    listing the trials: ``(groups, n_groups, exact)``.

    ``groups`` yields ``(config, n)``: the first trial of a run and its length. The axes
    that vary inside a pack (:data:`PER_TRIAL_AXES`) are the innermost of each grid block
    (:meth:`orchestrator.spec.SweepSpec.axes`), so a run is one combination of the other
    axes and ``n`` is the product of those axes' lengths. With more than ``limit`` runs,
    ``groups`` yields a uniform random sample of ``sample`` of them (``exact`` False).
    """
    import random

    blocks = []
    for i in range(len(spec.grids)):
        axes = spec.axes(i)
        shape = {k: v for k, v in axes.items() if k not in PER_TRIAL_AXES}
        inner = {k: v[0] for k, v in axes.items() if k in PER_TRIAL_AXES}
        per_run = math.prod(len(v) for k, v in axes.items() if k in PER_TRIAL_AXES)
        blocks.append((shape, inner, per_run, math.prod(len(v) for v in shape.values())))
    total = sum(b[3] for b in blocks)

    def config(shape: dict, inner: dict, index: int) -> BaseModel:
        values = {}
        for name in reversed(list(shape)):  # the last axis varies fastest
            index, j = divmod(index, len(shape[name]))
            values[name] = shape[name][j]
        return spec.family.config(**spec.fixed, **values, **inner)

    def every() -> Iterator[tuple[BaseModel, int]]:
        for shape, inner, per_run, _ in blocks:
            for values in itertools.product(*shape.values()):
                yield spec.family.config(**spec.fixed, **dict(zip(shape, values)), **inner), per_run

    def sampled() -> Iterator[tuple[BaseModel, int]]:
        rng = random.Random(seed)
        for g in sorted(rng.sample(range(total), min(sample, total))):
            for shape, inner, per_run, n in blocks:
                if g < n:
                    yield config(shape, inner, g), per_run
                    break
                g -= n

    return (every() if total <= limit else sampled()), total, total <= limit


def count_packs(
    spec, size_of: Callable[[BaseModel], int], limit: int = 20_000, sample: int = 2_000
) -> tuple[int, bool]:
    """How many packs :func:`make_packs` cuts a grid spec's trials into, without listing
    them: ``(n_packs, exact)``; beyond ``limit`` runs of one shape, an estimate from a
    sample of them (``exact`` False).

    Args:
        size_of: the pack size of a run's first trial (e.g. :func:`pack_sizer`'s).
    """
    groups, total, exact = shape_groups(spec, limit, sample)
    if exact:
        n, key, run, size = 0, None, 0, 1
        for cfg, per_run in groups:  # runs next to each other with one shape key are one run
            k = cfg.shape_key()
            if k != key and run:
                n += -(-run // size)
                run = 0
            if not run:
                key, size = k, size_of(cfg)
            run += per_run
        return n + (-(-run // size) if run else 0), True
    packs = [-(-per_run // size_of(cfg)) for cfg, per_run in groups]
    return round(total * sum(packs) / len(packs)), False


def spec_pack_sizer(spec: SweepSpec, workers: int | None = None):
    """The pack-size rule of a spec on ``workers`` workers (see :func:`pack_sizer`)."""
    share = -(-spec.n_trials() // workers) if workers else None
    ex = spec.execution
    return pack_sizer(ex.pack_size, spec.experiment, ex.pack_memory_mb, share, group_of(spec), ex.curves)


def group_of(spec: SweepSpec) -> int:
    """The slots of a stacked group the spec's workers train in: ``execution.device_group`` when
    they ask for a GPU (workers/stacked.py pads every group to it there), else the CPU's lane
    groups the memory rule counts (:data:`workers.memory.STACKED_SLOTS`)."""
    return spec.execution.device_group if spec.resources.gpus_per_worker > 0 else STACKED_SLOTS
