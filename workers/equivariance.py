"""How far a seq2seq function is from orthogonal and permutation equivariance (docs/claims.md 1b).

For f mapping X ``(b, n, d)`` and K ``(b, k, d)`` to ``(b, n, d)``:

* orthogonal: E(Q) = ||f(X Q^T, K Q^T) - f(X, K) Q^T||_F / ||f(X, K)||_F over Haar-random
  Q in O(d) (the equivariance of Ma & Ying, arXiv 2210.06741);
* permutation: E(P) = ||f(P X, K) - P f(X, K)||_F / ||f(X, K)||_F over uniformly random
  permutations P of the n input rows.

Norms run over the whole batch, so one E per group element. The computation follows the
dtype of X: with float64 inputs and a float64 model, an exactly equivariant f gives E near
1e-15, which separates round-off (about 1e-7 in float32) from a real violation.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attnsweep.tasks.seeding import derive_seed
from attnsweep.tasks.seeding import generator as seeded_generator

SeqFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def haar_orthogonal(d: int, count: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``count`` Haar-distributed orthogonal matrices: ``(count, d, d)`` of ``dtype``.

    Q comes from the QR decomposition of a matrix of i.i.d. N(0, 1) entries, with each
    column multiplied by the sign of the matching diagonal entry of R. Without that fix the
    distribution depends on the QR routine's sign convention and is not Haar (Mezzadri 2007,
    "How to generate random matrices from the classical compact groups", Notices AMS). The
    Gaussian is drawn in float64 on the generator's device whatever ``dtype`` is, so the
    same generator state gives the same rotations in every dtype.

    Raises:
        ValueError: d < 1 or count < 0.
    """
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    Z = torch.randn((count, d, d), generator=generator, dtype=torch.float64, device=generator.device)
    Q, R = torch.linalg.qr(Z)
    # An exact zero on R's diagonal has probability 0; mapping it to +1 keeps Q orthogonal.
    signs = torch.where(torch.diagonal(R, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(Q.dtype)
    return (Q * signs[..., None, :]).to(dtype)


@torch.no_grad()
def orthogonal_equivariance_error(
    f: SeqFn,
    X: torch.Tensor,
    K: torch.Tensor,
    n_q: int = 8,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """E(Q) = ||f(X Q^T, K Q^T) - f(X, K) Q^T||_F / ||f(X, K)||_F for n_q Haar-random Q.

    Args:
        f: callable (X ``(b, n, d)``, K ``(b, k, d)``) -> ``(b, n, d)``.
        X: ``(b, n, d)`` floating inputs; the computation runs in their dtype.
        K: ``(b, k, d)`` knowledge rows, same dtype and device.
        n_q: number of rotations.
        generator: source of the rotations; None uses a fixed-seed CPU generator, so the
            result is reproducible and never touches the global RNG.

    Returns:
        ``(n_q,)`` relative errors, dtype of X.

    Raises:
        ValueError: shapes that are not ``(b, n, d)`` / ``(b, k, d)``, or f(X, K) = 0
            (the relative error is undefined).
    """
    _check_inputs(X, K)
    g = generator if generator is not None else _default_generator("orthogonal")
    Qs = haar_orthogonal(X.shape[-1], n_q, g, X.dtype).to(X.device)
    base, scale = _reference(f, X, K)
    errors = [_relative(f(X @ Q.T, K @ Q.T), base @ Q.T, scale) for Q in Qs]
    return _stack(errors, X)


@torch.no_grad()
def permutation_equivariance_error(
    f: SeqFn,
    X: torch.Tensor,
    K: torch.Tensor,
    n_perm: int = 8,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """E(P) = ||f(P X, K) - P f(X, K)||_F / ||f(X, K)||_F for n_perm random permutations.

    Each P is uniform over all n! orderings of the input rows (the identity included, which
    gives E = 0 for any f) and is applied to every batch item alike; K is left as it is.

    Args:
        f: callable (X ``(b, n, d)``, K ``(b, k, d)``) -> ``(b, n, d)``.
        X: ``(b, n, d)`` floating inputs; the computation runs in their dtype.
        K: ``(b, k, d)`` knowledge rows.
        n_perm: number of permutations.
        generator: CPU source of the permutations; None uses a fixed-seed one.

    Returns:
        ``(n_perm,)`` relative errors, dtype of X.

    Raises:
        ValueError: bad shapes, or f(X, K) = 0.
    """
    _check_inputs(X, K)
    g = generator if generator is not None else _default_generator("permutation")
    n = X.shape[1]
    perms = [torch.randperm(n, generator=g, device=g.device).to(X.device) for _ in range(n_perm)]
    base, scale = _reference(f, X, K)
    errors = [_relative(f(X[:, p], K), base[:, p], scale) for p in perms]
    return _stack(errors, X)


def summarize(errors: torch.Tensor) -> tuple[float, float]:
    """(median, max) of ``(N,)`` errors; an even N gives the mean of the two middle values.

    Raises:
        ValueError: no errors.
    """
    if errors.numel() == 0:
        raise ValueError("summarize needs at least one error")
    flat = errors.detach().reshape(-1).to(torch.float64)
    return float(flat.quantile(0.5)), float(flat.max())


def _reference(f: SeqFn, X: torch.Tensor, K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """f(X, K) and its Frobenius norm over the whole batch."""
    base = f(X, K)
    scale = torch.linalg.vector_norm(base)
    if scale == 0:
        raise ValueError("f(X, K) is zero everywhere: the relative equivariance error is undefined")
    return base, scale


def _relative(moved: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(moved - expected) / scale


def _stack(errors: list[torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    if not errors:
        return torch.empty(0, dtype=X.dtype, device=X.device)
    return torch.stack(errors)


def _default_generator(purpose: str) -> torch.Generator:
    return seeded_generator(derive_seed("equivariance-check", purpose))


def _check_inputs(X: torch.Tensor, K: torch.Tensor) -> None:
    if X.dim() != 3 or K.dim() != 3:
        raise ValueError(f"X and K must be (b, n, d) and (b, k, d), got {tuple(X.shape)} and {tuple(K.shape)}")
    if X.shape[0] != K.shape[0] or X.shape[2] != K.shape[2]:
        raise ValueError(f"X and K must share b and d, got {tuple(X.shape)} and {tuple(K.shape)}")
