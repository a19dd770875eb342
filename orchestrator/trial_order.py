"""The order a sweep submits its trials in: the smallest cells first, so that the first rows
come back at once.

A grid block's trials come in runs of one combination of its outer axes (every axis but the
per-trial ones, :data:`orchestrator.spec.INNER_AXES`, and the seed): one shape key per run,
one or more packs each. :func:`smallest_first` yields those runs cheapest first, by one
trial's estimated memory (:func:`trial_cost`, the experiment's ``memory_bytes``, which grows
with m, T and the model), ties in grid order, and each run's trials in grid order (seeds
fastest), so packs are cut exactly as in grid order, only sooner for the small cells. The
rows are the same in any order: each trial is seeded by its own config.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from attnsweep.orchestrator.spec import INNER_AXES

if TYPE_CHECKING:
    from attnsweep.orchestrator.spec import SweepSpec

SORT_LIMIT = 20_000
"""Most runs sorted; a grid with more keeps grid order (sorting holds one config per run)."""


def trial_cost(spec: SweepSpec) -> Callable[[Any], int]:
    """What orders trials of ``spec``: one trial's estimated training memory in bytes."""
    return spec.family.memory_bytes


def smallest_first(spec: SweepSpec, limit: int = SORT_LIMIT) -> Iterator[Any]:
    """The trials of grid spec ``spec`` (as :meth:`SweepSpec.trials`), the runs of its cheapest
    shapes first; in grid order when it has more than ``limit`` runs."""
    blocks = []
    for i in range(len(spec.grids)):
        axes = spec.axes(i)
        outer = {k: v for k, v in axes.items() if k not in INNER_AXES and k != "seed"}
        inner = {k: v for k, v in axes.items() if k in INNER_AXES or k == "seed"}
        blocks.append((outer, inner))
    if sum(math.prod(len(v) for v in outer.values()) for outer, _ in blocks) > limit:
        yield from spec.trials()
        return
    cost, family = trial_cost(spec), spec.family
    runs: list[tuple[int, int, dict[str, Any], dict[str, list[Any]]]] = []
    for outer, inner in blocks:
        first = {k: v[0] for k, v in inner.items()}
        for values in itertools.product(*outer.values()):
            settings = dict(zip(outer, values, strict=True))
            runs.append((cost(family.config(**spec.fixed, **settings, **first)), len(runs), settings, inner))
    runs.sort(key=lambda run: run[:2])
    for _, _, settings, inner in runs:
        for values in itertools.product(*inner.values()):
            yield family.config(**spec.fixed, **settings, **dict(zip(inner, values, strict=True)))
