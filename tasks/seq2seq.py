"""Seq2seq functions with knowledge, Y = f(X, K) (Ma & Ying, arXiv 2210.06741; docs/claims.md 1b).

X holds n input rows (tokens) in R^d and K holds k knowledge rows in the same space; the
output Y has one row per input row. Ma & Ying show that an orthogonally equivariant f,
f(X Q^T, K Q^T) = f(X, K) Q^T for every Q in O(d), has the form Y = G1 X + G2 K with G1
``(n, n)`` and G2 ``(n, k)`` functions of the inner products X X^T, X K^T, K K^T only;
Villar et al. (NeurIPS 2021, "Scalars are universal") give the same form for O(d)-equivariant
vector functions in general. Three teachers probe the two symmetries:

* ``equivariant``: Y = alpha softmax(beta_xk X K^T) K + gamma softmax(beta_xx X X^T) X, which
  is of that form, O(d)-equivariant, and permutation-equivariant over the rows of X.
* ``control``: Y = alpha softmax(X A K^T) K B + gamma softmax(beta_xx X X^T) X C with fixed
  random d x d matrices A, B, C. The matrices break O(d) equivariance; the rows of X are
  still treated alike, so permutation equivariance holds.
* ``positional``: the equivariant teacher plus diag(c) X with a fixed random scalar c_i per
  position. Scalars commute with Q, so O(d) equivariance holds; the term depends on where a
  row sits, so permutation equivariance does not.

Softmax is over the last axis (over the keys). Inputs have i.i.d. N(0, 1/d) entries, so a
row has squared norm about 1 (chi-square_d / d) and inner products between distinct rows are
about N(0, 1/d): the softmax logits stay O(1) whatever d is.

A teacher's parameters depend on (teacher, n, k, d, seed) only; training inputs also depend
on m, test inputs do not, so trials that differ only in m share their teacher and test set.
Everything is drawn and computed on the CPU in float64, then cast and moved, so a trial's
data do not depend on the device it runs on.

The three are :class:`~attnsweep.tasks.teachers.Teacher` values (:data:`EQUIVARIANT`,
:data:`CONTROL`, :data:`POSITIONAL`), looked up by name in :func:`teacher_of` beside the teachers
other packages add (tasks/teachers.py); a package's teacher is drawn and sampled the same way,
and its outputs are checked (shape, dtype, finite) before a trial trains on them.
"""

from __future__ import annotations

import functools

import torch

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.seeding import derive_seed, generator
from attnsweep.tasks.teachers import BUILT_IN, BUILT_IN_SYMMETRIES, Teacher, plugin_teacher, teacher_names

TEACHERS = BUILT_IN
"""The built-in teachers' names (tasks/teachers.py ``BUILT_IN``); :func:`teacher_of` finds
those of installed packages too."""
SPLITS = ("train", "test")

# Ranges of the teacher's scalars: temperatures keep the softmax neither uniform nor one-hot
# for O(1) logits, and mixing weights keep both terms of Y of comparable size.
_TEMPERATURE_RANGE = (0.5, 2.0)
_MIXING_RANGE = (0.5, 1.5)
# Position coefficients c_i of the positional teacher: as large as the mixing weights, so
# the position-dependent part is not a small perturbation.
_POSITION_RANGE = (-1.0, 1.0)

_PARAM_NAMES = {
    "equivariant": ("alpha", "gamma", "beta_xk", "beta_xx"),
    "control": ("alpha", "gamma", "beta_xx", "A", "B", "C"),
    "positional": ("alpha", "gamma", "beta_xk", "beta_xx", "c"),
}


def teacher_params(teacher: str, n: int, k: int, d: int, seed: int) -> dict[str, torch.Tensor]:
    """The fixed parameters of a trial's teacher, drawn from its own seeded stream.

    Scalars (0-d tensors): ``alpha``, ``gamma`` ~ U[0.5, 1.5] (mixing weights) for every
    teacher; ``beta_xx`` ~ U[0.5, 2] (temperature of X X^T) for every teacher; ``beta_xk``
    ~ U[0.5, 2] (temperature of X K^T) for ``equivariant`` and ``positional``.
    Matrices: ``A``, ``B``, ``C`` ``(d, d)`` with N(0, 1/d) entries for ``control``, so that
    x^T A k and k^T B are as large as the inner products they replace. ``c`` ``(n,)`` ~
    U[-1, 1] for ``positional``. Formulas: module docstring (docs/claims.md 1b).

    Args:
        teacher: a name of :func:`teacher_of` (a package's teacher draws its own, from the
            same seeded generator).
        n, k, d: input rows, knowledge rows, embedding dimension.
        seed: the trial's seed.

    Returns:
        dict of float64 CPU tensors, keyed as above.

    Raises:
        TaskError: unknown teacher (the message lists those there are), a package's entry
            point that does not load or a draw that is not a dict of tensors, n < 1, k < 1
            or d < 2.
    """
    target = teacher_of(teacher)
    _check_sizes(n, k, d)
    g = generator(derive_seed("teacher", teacher, n, k, d, seed))
    params = target.params(n, k, d, g)
    if teacher not in BUILT_IN_TEACHERS:  # a package's draw is held to what outputs() is given
        _check_params(teacher, params)
    return params


def _builtin_params(teacher: str, n: int, k: int, d: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """A built-in teacher's parameters, drawn from ``g`` in this order (:func:`teacher_params`)."""
    params = {
        "alpha": _uniform((), _MIXING_RANGE, g),
        "gamma": _uniform((), _MIXING_RANGE, g),
        "beta_xx": _uniform((), _TEMPERATURE_RANGE, g),
    }
    if teacher in ("equivariant", "positional"):
        params["beta_xk"] = _uniform((), _TEMPERATURE_RANGE, g)
    if teacher == "control":
        for name in ("A", "B", "C"):
            params[name] = _gaussian((d, d), d, g)
    if teacher == "positional":
        params["c"] = _uniform((n,), _POSITION_RANGE, g)
    return params


def teacher_outputs(teacher: str, params: dict[str, torch.Tensor], X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """The teacher's output Y = f(X, K) (formulas: module docstring, docs/claims.md 1b).

    Args:
        teacher: a name of :func:`teacher_of`.
        params: as returned by :func:`teacher_params` for this teacher.
        X: ``(..., n, d)`` floating input rows.
        K: ``(..., k, d)`` knowledge rows, same dtype as X, leading dims broadcastable.

    Returns:
        ``(..., n, d)`` in the dtype and on the device of X (params are cast to it).

    Raises:
        TaskError: unknown teacher, params missing a key, or shapes that do not fit
            (X and K of different d, d unlike the control matrices', n unlike len(c)); a
            package's teacher whose Y is not finite or has another shape or dtype than X
            (the message names the teacher).
    """
    target = teacher_of(teacher)
    if X.shape[-1] != K.shape[-1]:
        raise TaskError(f"X and K must have the same d, got {X.shape[-1]} and {K.shape[-1]}")
    Y = target.outputs(params, X, K)
    if teacher not in BUILT_IN_TEACHERS:  # a package's teacher is held to what training reads
        _check_outputs(teacher, Y, X)
    return Y


def _builtin_outputs(teacher: str, params: dict[str, torch.Tensor], X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """A built-in teacher's Y (:func:`teacher_outputs`)."""
    missing = [name for name in _PARAM_NAMES[teacher] if name not in params]
    if missing:
        raise TaskError(f"params of teacher {teacher!r} lack {missing}; use teacher_params()")
    if teacher == "positional" and params["c"].shape[0] != X.shape[-2]:
        raise TaskError(
            f"the positional teacher was drawn for n={params['c'].shape[0]}, got X with n={X.shape[-2]} rows"
        )
    p = {name: t.to(dtype=X.dtype, device=X.device) for name, t in params.items()}
    if teacher == "control":
        return _control(p, X, K)
    Y = _equivariant(p, X, K)
    if teacher == "positional":
        Y = Y + p["c"][:, None] * X  # diag(c) X, one scalar per position
    return Y


def sample_dataset(
    teacher: str,
    n: int,
    k: int,
    d: int,
    m: int,
    seed: int,
    split: str = "train",
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """m samples (X, K, Y) of a trial's teacher.

    Inputs come from the stream ``derive_seed(split, teacher, n, k, d, m, seed)`` for
    ``train`` and ``derive_seed(split, teacher, n, k, d, seed)`` for ``test`` (no m, so
    trials that differ only in m are scored on the same samples); the teacher depends on
    (teacher, n, k, d, seed) only, so both splits share it. X is drawn before K.

    Args:
        teacher: a name of :func:`teacher_of`.
        n, k, d: input rows, knowledge rows, embedding dimension.
        m: number of samples.
        seed: the trial's seed.
        split: ``"train"`` or ``"test"``.
        dtype: floating dtype of the returned tensors (Y is computed in float64 first).
        device: where the returned tensors live.

    Returns:
        ``X`` ``(m, n, d)``, ``K`` ``(m, k, d)``, ``Y`` ``(m, n, d)``, all ``dtype``. Entries
        of X and K are i.i.d. N(0, 1/d).

    Raises:
        TaskError: unknown teacher or split, n < 1, k < 1, d < 2 or m < 1; a package's
            teacher that does not load or breaks its contract (:func:`teacher_outputs`).
    """
    teacher_of(teacher)
    _check_sizes(n, k, d)
    if split not in SPLITS:
        raise TaskError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if m < 1:
        raise TaskError(f"m must be an integer >= 1, got {m!r}")
    params = teacher_params(teacher, n, k, d, seed)
    parts = (split, teacher, n, k, d, m, seed) if split == "train" else (split, teacher, n, k, d, seed)
    g = generator(derive_seed(*parts))
    X = _gaussian((m, n, d), d, g)
    K = _gaussian((m, k, d), d, g)
    Y = teacher_outputs(teacher, params, X, K)
    return tuple(t.to(device=device, dtype=dtype) for t in (X, K, Y))


def _equivariant(p: dict[str, torch.Tensor], X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """alpha softmax(beta_xk X K^T) K + gamma softmax(beta_xx X X^T) X: ``(..., n, d)``."""
    to_knowledge = torch.softmax(p["beta_xk"] * (X @ K.transpose(-1, -2)), dim=-1)  # (..., n, k)
    to_inputs = torch.softmax(p["beta_xx"] * (X @ X.transpose(-1, -2)), dim=-1)  # (..., n, n)
    return p["alpha"] * (to_knowledge @ K) + p["gamma"] * (to_inputs @ X)


def _control(p: dict[str, torch.Tensor], X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """alpha softmax(X A K^T) K B + gamma softmax(beta_xx X X^T) X C: ``(..., n, d)``."""
    d = X.shape[-1]
    if p["A"].shape != (d, d):
        raise TaskError(f"the control teacher was drawn for d={p['A'].shape[0]}, got d={d}")
    to_knowledge = torch.softmax(X @ p["A"] @ K.transpose(-1, -2), dim=-1)  # (..., n, k)
    to_inputs = torch.softmax(p["beta_xx"] * (X @ X.transpose(-1, -2)), dim=-1)  # (..., n, n)
    return p["alpha"] * (to_knowledge @ K @ p["B"]) + p["gamma"] * (to_inputs @ X @ p["C"])


def _uniform(shape: tuple[int, ...], bounds: tuple[float, float], g: torch.Generator) -> torch.Tensor:
    lo, hi = bounds
    return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float64)


def _gaussian(shape: tuple[int, ...], d: int, g: torch.Generator) -> torch.Tensor:
    """Entries i.i.d. N(0, 1/d), float64."""
    return torch.randn(shape, generator=g, dtype=torch.float64) / d**0.5


def _check_params(teacher: str, params: object) -> None:
    if not isinstance(params, dict) or not all(isinstance(v, torch.Tensor) for v in params.values()):
        raise TaskError(f"teacher {teacher!r}: its params function gave {type(params).__name__}, not a dict of tensors")


def _check_outputs(teacher: str, Y: object, X: torch.Tensor) -> None:
    if not isinstance(Y, torch.Tensor) or Y.shape != X.shape or Y.dtype != X.dtype:
        got = f"{tuple(Y.shape)} {Y.dtype}" if isinstance(Y, torch.Tensor) else type(Y).__name__
        raise TaskError(
            f"teacher {teacher!r}: its outputs function gave {got}, not a {X.dtype} tensor of X's shape "
            f"{tuple(X.shape)} (its package)"
        )
    if not bool(torch.isfinite(Y).all()):
        raise TaskError(f"teacher {teacher!r}: its outputs function gave values that are not finite (its package)")


EQUIVARIANT = Teacher(
    "equivariant",
    functools.partial(_builtin_params, "equivariant"),
    functools.partial(_builtin_outputs, "equivariant"),
    BUILT_IN_SYMMETRIES["equivariant"],
    "alpha softmax(beta_xk X K^T) K + gamma softmax(beta_xx X X^T) X",
)
CONTROL = Teacher(
    "control",
    functools.partial(_builtin_params, "control"),
    functools.partial(_builtin_outputs, "control"),
    BUILT_IN_SYMMETRIES["control"],
    "alpha softmax(X A K^T) K B + gamma softmax(beta_xx X X^T) X C (random A, B, C break O(d))",
)
POSITIONAL = Teacher(
    "positional",
    functools.partial(_builtin_params, "positional"),
    functools.partial(_builtin_outputs, "positional"),
    BUILT_IN_SYMMETRIES["positional"],
    "the equivariant teacher plus diag(c) X (a scalar per position breaks permutations)",
)
BUILT_IN_TEACHERS: dict[str, Teacher] = {t.name: t for t in (EQUIVARIANT, CONTROL, POSITIONAL)}
"""attnsweep's own teachers, by name (tasks/teachers.py ``BUILT_IN`` names them)."""


def teacher_of(name: str) -> Teacher:
    """The teacher called ``name``; a package's teacher is loaded alone, so another package's
    broken entry point does not stop this one.

    Raises:
        TaskError: no teacher has that name (the message lists those that do), or its package's
            entry point does not load (the message names the entry point).
    """
    if name in BUILT_IN_TEACHERS:
        return BUILT_IN_TEACHERS[name]
    names = teacher_names()
    if name not in names:
        raise TaskError(f"teacher must be one of {names}, got {name!r}")
    return plugin_teacher(name)


def _check_sizes(n: int, k: int, d: int) -> None:
    if n < 1:
        raise TaskError(f"n (input rows) must be an integer >= 1, got {n!r}")
    if k < 1:
        raise TaskError(f"k (knowledge rows) must be an integer >= 1 (every teacher uses K), got {k!r}")
    if d < 2:
        raise TaskError(f"d (embedding dimension) must be an integer >= 2, got {d!r}")
