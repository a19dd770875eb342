"""Tasks other packages add, found through Python entry points: the extension point that lets
a user's own package add a sparse Boolean task without editing attnsweep.

A package names each of its tasks in its ``pyproject.toml``::

    [project.entry-points."attnsweep.tasks"]
    majority = "my_tasks:MAJORITY"

where ``my_tasks.MAJORITY`` is a :class:`BooleanTask`. Installed beside attnsweep (in the same
environment, so also on every Ray worker), the task is then valid in a spec (``task:
majority``), generates its data like a built-in one, and its rows are analysed like any other
(m* per cell, the fits of m* against T). The built-in tasks (``and``, ``parity``,
tasks/boolean.py) are :class:`BooleanTask` values too and go through the same lookup,
:func:`attnsweep.tasks.boolean.boolean_tasks`. docs/extending.md walks through an example
package (examples/attnsweep-majority).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from attnsweep.tasks.errors import AmbiguityCheckTooLargeError
from attnsweep.tasks.plugins import NAME as NAME  # the name rule, where it was first defined
from attnsweep.tasks.plugins import installed_names, load_one

if TYPE_CHECKING:  # torch loads only where a task computes: spec validation reads names alone
    import numpy as np
    import torch

ENTRY_POINTS = "attnsweep.tasks"
"""The entry-point group a package names its :class:`BooleanTask` values in."""
BUILT_IN = ("and", "parity")
"""attnsweep's own tasks (tasks/boolean.py); no package may add a task by these names."""


@dataclass(frozen=True)
class BooleanTask:
    """An s-sparse Boolean function of T bits: its label depends only on the bits at s
    positions (the support, drawn by the trial's seed, tasks/boolean.py ``draw_support``).

    Attributes:
        name: what a spec writes in ``task`` (:data:`NAME`).
        bit_probability: ``s -> P(bit = 1)``, the bits being i.i.d. Bernoulli; choose it so
            that the labels are balanced (``and``: 2^(-1/s), so P(y = 1) = 1/2).
        label: the labels from the support's bits: ``(..., n, s)`` int64 in {0, 1}, the
            support's positions in increasing order, to ``(..., n)`` float32 in {0, 1}.
        is_ambiguous: ``(x, y, support) -> bool`` with ``x`` ``(m, T)`` bool, ``y`` ``(m,)``
            bool and ``support`` the sorted positions: whether another s-subset explains
            every sample too (training sets that are ambiguous are redrawn). None: the
            check tries every other s-subset (:func:`ambiguous_by_enumeration`).
        description: one line for ``validate --show`` and the docs.
    """

    name: str
    bit_probability: Callable[[int], float]
    label: Callable[[torch.Tensor], torch.Tensor]
    is_ambiguous: Callable[[np.ndarray, np.ndarray, tuple[int, ...]], bool] | None = None
    description: str = ""


def task_names() -> list[str]:
    """The names a spec may give ``task``: the built-in ones, then the entry points' names,
    read without loading them (and without torch), for spec validation.

    Raises:
        TaskError: an entry point's name is not a valid task name or is a built-in one.
    """
    return installed_names(entry_points, ENTRY_POINTS, BUILT_IN, "task")


@functools.cache
def plugin_task(name: str) -> BooleanTask:
    """The task an installed package names ``name``, loaded on its own: a broken entry point
    breaks only the sweeps that use its task.

    Raises:
        TaskError: no entry point has that name, two do, or it does not load, is not a
            :class:`BooleanTask` or names another task.
    """
    task = load_one(entry_points(group=ENTRY_POINTS), ENTRY_POINTS, name, BooleanTask, "task")
    assert isinstance(task, BooleanTask)  # load_one checked it; for the type checker
    return task


def plugin_tasks() -> dict[str, BooleanTask]:
    """Every task installed packages add, by name (each loaded by :func:`plugin_task`).

    Raises:
        TaskError: as :func:`task_names` and :func:`plugin_task`, for any of them.
    """
    return {name: plugin_task(name) for name in task_names() if name not in BUILT_IN}


MAX_SUBSETS = 2_000_000
"""Most s-subsets :func:`ambiguous_by_enumeration` tries before it gives up."""


def ambiguous_by_enumeration(task: BooleanTask, x: np.ndarray, y: np.ndarray, support: tuple[int, ...]) -> bool:
    """Whether an s-subset other than ``support`` gives ``task``'s labels on every sample,
    found by trying each one: exact for any task, at most :data:`MAX_SUBSETS` subsets.

    Args:
        x: ``(m, T)`` bool bits; y: ``(m,)`` bool labels; support: the sorted positions.

    Raises:
        AmbiguityCheckTooLargeError: C(T, s) exceeds :data:`MAX_SUBSETS`.
    """
    import numpy as np
    import torch

    m, T = x.shape
    s = len(support)
    if math.comb(T, s) > MAX_SUBSETS:
        raise AmbiguityCheckTooLargeError(
            f"the uniqueness check of task {task.name!r} for T={T}, s={s} would try {math.comb(T, s)} supports "
            f"(limit {MAX_SUBSETS}); give the task an is_ambiguous check, or set reject_ambiguous: false"
        )
    bits = torch.from_numpy(x.astype(np.int64)).T  # (T, m)
    want = torch.from_numpy(y)
    combos = itertools.combinations(range(T), s)
    chunk = max(1, 2**22 // max(1, m * s))  # about 32 MB of int64 bits per step
    while block := list(itertools.islice(combos, chunk)):
        block = [c for c in block if c != support]
        if not block:
            continue
        idx = torch.tensor(block, dtype=torch.int64)  # (k, s)
        labels = task.label(bits[idx].permute(0, 2, 1))  # (k, m, s) -> (k, m)
        if bool(((labels > 0.5) == want).all(dim=1).any()):
            return True
    return False
