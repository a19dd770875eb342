"""Symmetry teachers other packages add, found through Python entry points: the extension point
that lets a user's own package add a seq2seq function Y = f(X, K) for the symmetry experiment
(docs/claims.md 1b) without editing attnsweep.

A package names each of its teachers in its ``pyproject.toml``::

    [project.entry-points."attnsweep.teachers"]
    knowledge_mean = "my_teachers:KNOWLEDGE_MEAN"

where ``my_teachers.KNOWLEDGE_MEAN`` is a :class:`Teacher`. Installed beside attnsweep (also on
every Ray worker), the teacher is valid in a spec (``teacher: knowledge_mean``), its data are
drawn like a built-in teacher's (same seeds, inputs, rows), and the analysis reads its
:attr:`Teacher.symmetries` to know which side of claim S2 it stands on. The built-in teachers
(``equivariant``, ``control``, ``positional``; tasks/seq2seq.py) are :class:`Teacher` values too
and go through the same lookup, :func:`attnsweep.tasks.seq2seq.teacher_of`.

No torch here: spec validation reads names, and the analysis the built-ins' symmetries, alone.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.plugins import installed_names, load_one

if TYPE_CHECKING:  # torch loads only where a teacher computes
    import torch

ENTRY_POINTS = "attnsweep.teachers"
"""The entry-point group a package names its :class:`Teacher` values in."""
SYMMETRIES = ("orthogonal", "permutation")
"""What a teacher may be equivariant under: ``orthogonal``, f(X Q^T, K Q^T) = f(X, K) Q^T for
every Q in O(d); ``permutation``, f(P X, K) = P f(X, K) for every permutation P of X's rows."""
BUILT_IN_SYMMETRIES: dict[str, frozenset[str]] = {
    "equivariant": frozenset({"orthogonal", "permutation"}),
    "control": frozenset({"permutation"}),
    "positional": frozenset({"orthogonal"}),
}
"""attnsweep's own teachers (tasks/seq2seq.py) and their symmetries, readable without torch."""
BUILT_IN = tuple(BUILT_IN_SYMMETRIES)
"""The built-in teachers' names; no package may add a teacher by these names."""


@dataclass(frozen=True)
class Teacher:
    """A seq2seq function with knowledge, Y = f(X, K), drawn afresh for every trial's seed.

    Attributes:
        name: what a spec writes in ``teacher`` (lower-case letters, digits, ``_``, at most 32).
        params: ``(n, k, d, generator) -> dict[str, Tensor]``: the teacher's fixed parameters,
            drawn from ``generator`` alone (a CPU ``torch.Generator`` that attnsweep seeds from
            (teacher, n, k, d, seed), so the draw is deterministic); float64 CPU tensors.
        outputs: ``(params, X, K) -> Y``: X ``(..., n, d)`` and K ``(..., k, d)`` float64 CPU
            tensors (entries i.i.d. N(0, 1/d)) to Y ``(..., n, d)`` float64, with no randomness.
            attnsweep fails a trial whose Y has another shape or dtype or is not finite.
        symmetries: which of :data:`SYMMETRIES` f has exactly. The analysis reads them: a teacher
            with both stands beside ``equivariant`` in claim S2 (the inner-product student should
            win), one with ``permutation`` alone beside ``control`` (it should not); others are
            in the m* table only.
        description: one line for the docs.
    """

    name: str
    params: Callable[[int, int, int, torch.Generator], dict[str, torch.Tensor]]
    outputs: Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor]
    symmetries: frozenset[str] = frozenset()
    description: str = ""


def teacher_names() -> list[str]:
    """The names a spec may give ``teacher``: the built-in ones, then the entry points' names,
    read without loading them (and without torch).

    Raises:
        TaskError: an entry point's name is not a valid teacher name or is a built-in one.
    """
    return installed_names(entry_points, ENTRY_POINTS, BUILT_IN, "teacher")


@functools.cache
def plugin_teacher(name: str) -> Teacher:
    """The teacher an installed package names ``name``, loaded on its own: a broken entry point
    fails only the trials that use its teacher.

    Raises:
        TaskError: no entry point has that name, two do, or it does not load, is not a
            :class:`Teacher`, names another teacher or claims a symmetry not in
            :data:`SYMMETRIES`. The message names the entry point.
    """
    teacher = load_one(entry_points(group=ENTRY_POINTS), ENTRY_POINTS, name, Teacher, "teacher")
    assert isinstance(teacher, Teacher)  # load_one checked it; for the type checker
    unknown = sorted(set(teacher.symmetries) - set(SYMMETRIES))
    if unknown or not isinstance(teacher.symmetries, (frozenset, set)):
        raise TaskError(
            f"entry point {name!r} of group {ENTRY_POINTS!r}: teacher {name!r} gives symmetries "
            f"{teacher.symmetries!r}; a teacher's symmetries are a frozenset of {list(SYMMETRIES)}"
        )
    return teacher


def teacher_symmetries(name: str) -> frozenset[str] | None:
    """The symmetries of the teacher called ``name``: the built-ins' from
    :data:`BUILT_IN_SYMMETRIES` (no torch), a package's from its entry point; None where no
    installed package adds it or its entry point is broken (the rows of such a teacher are
    analysed, but no claim reads them, and a warning gives the entry point's error)."""
    if name in BUILT_IN_SYMMETRIES:
        return BUILT_IN_SYMMETRIES[name]
    try:
        return frozenset(plugin_teacher(name).symmetries)
    except TaskError as exc:
        warnings.warn(f"teacher {name!r} enters no claim: {exc}", UserWarning, stacklevel=2)
        return None
