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
"""

from __future__ import annotations

import torch

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.seeding import derive_seed, generator

TEACHERS = ("equivariant", "control", "positional")
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
        teacher: one of :data:`TEACHERS`.
        n, k, d: input rows, knowledge rows, embedding dimension.
        seed: the trial's seed.

    Returns:
        dict of float64 CPU tensors, keyed as above.

    Raises:
        TaskError: unknown teacher, n < 1, k < 1 or d < 2.
    """
    _check_teacher(teacher)
    _check_sizes(n, k, d)
    g = generator(derive_seed("teacher", teacher, n, k, d, seed))
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
        teacher: one of :data:`TEACHERS`.
        params: as returned by :func:`teacher_params` for this teacher.
        X: ``(..., n, d)`` floating input rows.
        K: ``(..., k, d)`` knowledge rows, same dtype as X, leading dims broadcastable.

    Returns:
        ``(..., n, d)`` in the dtype and on the device of X (params are cast to it).

    Raises:
        TaskError: unknown teacher, params missing a key, or shapes that do not fit
            (X and K of different d, d unlike the control matrices', n unlike len(c)).
    """
    _check_teacher(teacher)
    missing = [name for name in _PARAM_NAMES[teacher] if name not in params]
    if missing:
        raise TaskError(f"params of teacher {teacher!r} lack {missing}; use teacher_params()")
    if X.shape[-1] != K.shape[-1]:
        raise TaskError(f"X and K must have the same d, got {X.shape[-1]} and {K.shape[-1]}")
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
        teacher: one of :data:`TEACHERS`.
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
        TaskError: unknown teacher or split, n < 1, k < 1, d < 2 or m < 1.
    """
    _check_teacher(teacher)
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


def _check_teacher(teacher: str) -> None:
    if teacher not in TEACHERS:
        raise TaskError(f"teacher must be one of {list(TEACHERS)}, got {teacher!r}")


def _check_sizes(n: int, k: int, d: int) -> None:
    if n < 1:
        raise TaskError(f"n (input rows) must be an integer >= 1, got {n!r}")
    if k < 1:
        raise TaskError(f"k (knowledge rows) must be an integer >= 1 (every teacher uses K), got {k!r}")
    if d < 2:
        raise TaskError(f"d (embedding dimension) must be an integer >= 2, got {d!r}")
