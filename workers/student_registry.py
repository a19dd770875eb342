"""Symmetry students other packages add, found through Python entry points: the extension point
that lets a user's own package add a model for the symmetry experiment (docs/claims.md 1b)
without editing attnsweep.

A package names each of its students in its ``pyproject.toml``::

    [project.entry-points."attnsweep.students"]
    deepsets = "my_students:DEEPSETS"

where ``my_students.DEEPSETS`` is a :class:`Student`. Installed beside attnsweep (also on every
Ray worker), the student is valid in a spec (``model: deepsets``, with ``equivariance`` ``none``
or ``augment``), is initialised, trained and scored like a built-in one (stacked under
``torch.func.vmap`` where built-ins are), and the memory estimate reads its
:attr:`Student.param_count` and :attr:`Student.activations`. The built-in students
(``transformer``, ``mlp``; workers/builtin_students.py, their modules in workers/students.py)
are :class:`Student` values too and go through the same lookup,
:func:`attnsweep.workers.builtin_students.student_of`.

No torch at import: spec validation reads names alone. Counting a package's parameters on
torch's meta device (:func:`plugin_param_count`) imports torch then; inside
:func:`without_loading` (``attnsweep validate``) no package is imported and its student is
sized by the callers' err-high defaults.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.plugins import installed_names, load_one

if TYPE_CHECKING:  # torch loads only where a student is built
    from torch import nn

ENTRY_POINTS = "attnsweep.students"
"""The entry-point group a package names its :class:`Student` values in."""
BUILT_IN = ("transformer", "mlp")
"""attnsweep's own students (workers/builtin_students.py); no package may add a student by these names."""

Sizes = Callable[[int, int, int, int, int], int]
"""``(n, k, d, width, heads) -> int``: a count of a student of these sizes."""
Config = Any
"""A :class:`workers.config.SymmetryTrialConfig` (not imported: the config imports this module)."""


@dataclass(frozen=True)
class BuiltInForms:
    """What attnsweep declares of its own students beside the contract: which setting is their
    width, which equivariances they take and what else a config must satisfy. Spec validation
    reads it (workers/config.py); a package's student has none (:attr:`Student.forms` None) and
    is built at the spec's ``width``, with ``equivariance`` none or augment (orthogonal picks
    the inner-product student whatever the model), since validation does not load it.

    Attributes:
        width: the trial config's setting its build is given as ``width``: ``"width"`` or
            ``"mlp_width"``.
        permutation: its permutation-equivariant form, built and sized for ``equivariance:
            permutation``; None: it has none, and that equivariance is refused for it.
        check: ``cfg -> str | None``: what is wrong with a symmetry trial config for it (one
            line), or None.
    """

    width: str = "width"
    permutation: Student | None = None
    check: Callable[[Config], str | None] | None = None


@dataclass(frozen=True)
class Student:
    """A model for the symmetry experiment: X ``(b, n, d)`` and K ``(b, k, d)`` to Y ``(b, n, d)``.

    Attributes:
        name: what a spec writes in ``model`` (lower-case letters, digits, ``_``, at most 32).
        build: ``(n, k, d, width, heads) -> nn.Module``: a freshly initialised student, its
            weights drawn from torch's global CPU generator (attnsweep seeds it per trial, so
            the draw is the trial's). ``width`` and ``heads`` are the spec's (the MLP is given
            ``mlp_width``). The module's ``forward(X, K)`` takes X ``(b, n, d)`` and K ``(b, k,
            d)`` of one floating dtype (float32 in training, float64 and float32 when the
            equivariance errors are measured) and returns Y ``(b, n, d)`` in that dtype. To
            train stacked (on a GPU; workers/stacked.py) it runs under ``torch.func.vmap`` over
            ``functional_call``: no in-place changes of parameters, buffers or inputs, no
            Python branches on tensor values, no ``.item()``. attnsweep fails a trial whose
            student is no ``nn.Module``, has no parameters, or whose Y has another shape or
            dtype, naming the student.
        param_count: its parameter count, for the memory estimate (workers/memory.py). None:
            counted by building it on torch's meta device (exact, no memory).
        activations: float32 values its forward pass keeps for the backward pass, per training
            sample. None: four times the generic transformer's, ``64 (n + k) max(width, d)``.
        description: one line for the docs.
        forms: the built-ins' own declarations (:class:`BuiltInForms`); a package leaves it None.
    """

    name: str
    build: Callable[[int, int, int, int, int], nn.Module]
    param_count: Sizes | None = None
    activations: Sizes | None = None
    description: str = ""
    forms: BuiltInForms | None = None


def student_names() -> list[str]:
    """The names a spec may give ``model`` in the symmetry experiment: the built-in ones, then
    the entry points' names, read without loading them (and without torch).

    Raises:
        TaskError: an entry point's name is not a valid student name or is a built-in one.
    """
    return installed_names(entry_points, ENTRY_POINTS, BUILT_IN, "student")


@functools.cache
def plugin_student(name: str) -> Student:
    """The student an installed package names ``name``, loaded on its own: a broken entry point
    fails only the trials that use its student.

    Raises:
        TaskError: no entry point has that name, two do, or it does not load, is not a
            :class:`Student`, names another student or declares built-in forms. The message
            names the entry point.
    """
    student = load_one(entry_points(group=ENTRY_POINTS), ENTRY_POINTS, name, Student, "student")
    assert isinstance(student, Student)  # load_one checked it; for the type checker
    if student.forms is not None:
        raise TaskError(
            f"student {name!r} (entry point of group {ENTRY_POINTS!r}) sets forms, which only built-ins have"
        )
    return student


_NAMES_ONLY = contextvars.ContextVar("attnsweep_students_names_only", default=False)


@contextlib.contextmanager
def without_loading() -> Iterator[None]:
    """Within it :func:`plugin_param_count` and :func:`plugin_activations` (and, for the
    sparse-Boolean models, :func:`workers.builtin_models.loaded_or_none`) give None without
    importing any package (the memory estimate then errs high, workers/memory.py): spec
    validation checks a student's name from its entry point's metadata alone, so a package
    that is slow, hangs or exits at import cannot stop ``validate``."""
    token = _NAMES_ONLY.set(True)
    try:
        yield
    finally:
        _NAMES_ONLY.reset(token)


def names_only() -> bool:
    """Whether this is inside :func:`without_loading`: then no package's student or
    sparse-Boolean model (workers/builtin_models.py) is imported, and their sizes err high."""
    return _NAMES_ONLY.get()


def plugin_param_count(name: str, n: int, k: int, d: int, width: int, heads: int) -> int | None:
    """A package's student's parameter count: its own :attr:`Student.param_count`, else its
    parameters counted on torch's meta device (no memory, no random draw); None where neither
    works or inside :func:`without_loading` (the caller then errs high). Raises nothing: a
    broken entry point fails its trials on the worker, not the sizing of packs."""
    return None if _NAMES_ONLY.get() else _param_count(name, n, k, d, width, heads)


@functools.cache
def _param_count(name: str, n: int, k: int, d: int, width: int, heads: int) -> int | None:
    try:
        student = plugin_student(name)
        if student.param_count is not None:
            return int(student.param_count(n, k, d, width, heads))
        import torch

        with torch.device("meta"):
            return sum(p.numel() for p in student.build(n, k, d, width, heads).parameters())
    except BaseException as exc:  # noqa: BLE001 - sys.exit() too: reported where the trial runs
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None


def plugin_activations(name: str, n: int, k: int, d: int, width: int, heads: int) -> int | None:
    """A package's student's :attr:`Student.activations` at these sizes; None where it gives
    none, its entry point is broken, or inside :func:`without_loading` (the caller then errs
    high). Raises nothing."""
    if _NAMES_ONLY.get():
        return None
    try:
        student = plugin_student(name)
        return None if student.activations is None else int(student.activations(n, k, d, width, heads))
    except BaseException as exc:  # noqa: BLE001 - sys.exit() too: reported where the trial runs
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None
