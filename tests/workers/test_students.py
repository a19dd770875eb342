"""Tests of the seq2seq students (workers.students) and equivariance measures (workers.equivariance).

The symmetry of each student is checked directly, in float64, with rotations from
scipy.stats.ortho_group and permutations from numpy, independently of
workers.equivariance; that module is then checked against the same direct computation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group
from torch.func import functional_call, stack_module_state

from attnsweep.workers.builtin_students import build_student
from attnsweep.workers.equivariance import (
    haar_orthogonal,
    orthogonal_equivariance_error,
    permutation_equivariance_error,
    summarize,
)
from attnsweep.workers.students import InnerProductStudent, SeqMLP, SeqTransformer

B, N, K_ROWS, D = 6, 5, 3, 4


def inputs(dtype=torch.float64, b: int = B, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(b, N, D, generator=g, dtype=dtype) / D**0.5
    K = torch.randn(b, K_ROWS, D, generator=g, dtype=dtype) / D**0.5
    return X, K


def make(cls, seed: int = 0, **kwargs):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(N, K_ROWS, D, **kwargs)


@torch.no_grad()
def direct_orth_errors(f, X, K, count: int = 5) -> list[float]:
    """||f(X Q^T, K Q^T) - f(X, K) Q^T|| / ||f(X, K)|| for scipy Haar Q."""
    Y = f(X, K)
    Qs = ortho_group.rvs(D, size=count, random_state=np.random.default_rng(7))
    out = []
    for q in Qs:
        Q = torch.from_numpy(q).to(X.dtype)
        out.append(float((f(X @ Q.T, K @ Q.T) - Y @ Q.T).norm() / Y.norm()))
    return out


@torch.no_grad()
def direct_perm_errors(f, X, K, count: int = 5) -> list[float]:
    """||f(P X, K) - P f(X, K)|| / ||f(X, K)|| for numpy permutations with no fixed point."""
    Y = f(X, K)
    rng = np.random.default_rng(8)
    out = []
    while len(out) < count:
        perm = rng.permutation(N)
        if (perm == np.arange(N)).any():  # a moved row is needed for a violation to show
            continue
        p = torch.from_numpy(perm)
        out.append(float((f(X[:, p], K) - Y[:, p]).norm() / Y.norm()))
    return out


# -- shapes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model,equivariance,cls",
    [
        ("transformer", "none", SeqTransformer),
        ("transformer", "augment", SeqTransformer),
        ("transformer", "permutation", SeqTransformer),
        ("mlp", "none", SeqMLP),
        ("mlp", "augment", SeqMLP),
        ("transformer", "orthogonal", InnerProductStudent),
        ("mlp", "orthogonal", InnerProductStudent),
    ],
)
def test_build_student_and_output_shape(model, equivariance, cls):
    torch.manual_seed(0)
    student = build_student(model, equivariance, N, K_ROWS, D, width=16, heads=4)
    assert type(student) is cls
    X, K = inputs(torch.float32)
    Y = student(X, K)
    assert Y.shape == (B, N, D) and Y.dtype == torch.float32
    assert torch.isfinite(Y).all()
    if equivariance == "permutation":
        assert student.pos is None
    elif cls is SeqTransformer:
        assert student.pos.shape == (N, 16)


@pytest.mark.parametrize(
    "args,match",
    [
        (("cnn", "none"), "model must be one of"),
        (("transformer", "rotation"), "equivariance must be one of"),
        (("cnn", "orthogonal"), "model must be one of"),
        (("mlp", "permutation"), "model must be 'transformer' when equivariance='permutation'"),
    ],
)
def test_build_student_errors(args, match):
    with pytest.raises(ValueError, match=match):
        build_student(*args, N, K_ROWS, D, width=16, heads=4)


def test_transformer_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="width must be divisible by heads"):
        build_student("transformer", "none", N, K_ROWS, D, width=10, heads=4)


# -- symmetries, checked directly ------------------------------------------------------------


def test_inner_product_student_is_exactly_equivariant():
    student = make(InnerProductStudent).double()
    with torch.no_grad():  # non-trivial weights, so the check is not of an averaging map
        student.identity.fill_(0.7)
        student.a.copy_(torch.tensor([1.3, -0.4, 0.8, 2.0]))
    X, K = inputs()
    assert max(direct_orth_errors(student, X, K)) < 1e-10
    assert max(direct_perm_errors(student, X, K)) < 1e-10


def test_transformer_without_positions_is_permutation_but_not_orthogonally_equivariant():
    student = make(SeqTransformer, positional=False).double()
    X, K = inputs()
    assert max(direct_perm_errors(student, X, K)) < 1e-10
    assert min(direct_orth_errors(student, X, K)) > 1e-3


def test_transformer_with_positions_is_not_permutation_equivariant():
    student = make(SeqTransformer, positional=True).double()
    X, K = inputs()
    assert min(direct_perm_errors(student, X, K)) > 1e-3


def test_mlp_has_neither_symmetry():
    student = make(SeqMLP).double()
    X, K = inputs()
    assert min(direct_perm_errors(student, X, K)) > 1e-3
    assert min(direct_orth_errors(student, X, K)) > 1e-3


# -- vmap over stacked parameters --------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (SeqTransformer, {"width": 16, "heads": 4}),
        (SeqTransformer, {"width": 16, "heads": 2, "positional": False}),
        (SeqMLP, {"width": 32}),
        (InnerProductStudent, {"heads": 3, "hidden": 8}),
    ],
)
def test_students_run_under_vmap_over_stacked_params(cls, kwargs):
    models = [make(cls, seed=s, **kwargs) for s in range(3)]
    params, buffers = stack_module_state(models)
    params = {name: p.detach().requires_grad_() for name, p in params.items()}
    base = make(cls, **kwargs).to("meta")

    def call(p, b, X, K):
        return functional_call(base, (p, b), (X, K))

    batches = [inputs(torch.float32, b=4, seed=10 + s) for s in range(3)]
    X = torch.stack([x for x, _ in batches])  # (3, 4, n, d): one batch per trial
    K = torch.stack([k for _, k in batches])
    Y = torch.func.vmap(call)(params, buffers, X, K)
    assert Y.shape == (3, 4, N, D)
    for i, model in enumerate(models):
        torch.testing.assert_close(Y[i], model(X[i], K[i]), rtol=0, atol=1e-5)
    Y.square().mean().backward()  # the training loop differentiates through the vmap
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params.values())


# -- Haar rotations ----------------------------------------------------------------------------


def test_haar_orthogonal_matrices_are_orthogonal():
    Q = haar_orthogonal(6, 50, torch.Generator().manual_seed(0))
    assert Q.shape == (50, 6, 6) and Q.dtype == torch.float64
    eye = torch.eye(6, dtype=torch.float64)
    assert (Q @ Q.transpose(-1, -2) - eye).abs().max() < 1e-12
    assert (torch.linalg.det(Q).abs() - 1).abs().max() < 1e-12
    assert haar_orthogonal(3, 2, torch.Generator().manual_seed(0), torch.float32).dtype == torch.float32


def test_haar_orthogonal_has_haar_moments():
    d = 3
    Q = haar_orthogonal(d, 4000, torch.Generator().manual_seed(1))
    q00 = Q[:, 0, 0]
    # Under Haar measure a column is uniform on the sphere: E q = 0, E q^2 = 1/d.
    assert abs(float(q00.mean())) < 0.05
    assert abs(float((q00**2).mean()) - 1 / d) < 0.03
    # Both components of O(d) are hit about equally (det = -1 half the time).
    assert abs(float((torch.linalg.det(Q) < 0).double().mean()) - 0.5) < 0.05
    # Without the sign fix, LAPACK's Householder QR makes every Q_ii negative (mean about
    # -0.5 for d=3) and det(Q) the same for all samples; these checks would fail.
    assert abs(float(Q[:, 1, 1].mean())) < 0.05


def test_haar_orthogonal_is_deterministic_and_validates():
    a = haar_orthogonal(4, 3, torch.Generator().manual_seed(5))
    b = haar_orthogonal(4, 3, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="d must be"):
        haar_orthogonal(0, 3, torch.Generator())


# -- the equivariance measures ---------------------------------------------------------------


def test_orthogonal_error_matches_direct_computation():
    student = make(SeqTransformer).double()
    X, K = inputs()
    errors = orthogonal_equivariance_error(student, X, K, n_q=4, generator=torch.Generator().manual_seed(3))
    Qs = haar_orthogonal(D, 4, torch.Generator().manual_seed(3))
    Y = student(X, K)
    expected = [(student(X @ Q.T, K @ Q.T) - Y @ Q.T).norm() / Y.norm() for Q in Qs]
    assert errors.shape == (4,) and errors.dtype == torch.float64
    torch.testing.assert_close(errors, torch.stack(expected).detach(), rtol=1e-12, atol=0)


def test_error_measures_separate_round_off_from_violation():
    X, K = inputs()
    exact = make(InnerProductStudent).double()
    generic = make(SeqTransformer).double()
    assert summarize(orthogonal_equivariance_error(exact, X, K))[1] < 1e-12
    assert summarize(permutation_equivariance_error(exact, X, K))[1] < 1e-12
    assert summarize(orthogonal_equivariance_error(generic, X, K))[0] > 1e-3
    assert summarize(permutation_equivariance_error(generic, X, K))[1] > 1e-3
    # float32 inputs and model: round-off level, far below the violation above.
    X32, K32 = inputs(torch.float32)
    errors32 = orthogonal_equivariance_error(make(InnerProductStudent), X32, K32)
    assert errors32.dtype == torch.float32 and errors32.max() < 1e-5


def test_permutation_error_matches_direct_computation():
    student = make(SeqTransformer).double()
    X, K = inputs()
    errors = permutation_equivariance_error(student, X, K, n_perm=5, generator=torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    Y = student(X, K)
    expected = []
    for _ in range(5):
        p = torch.randperm(N, generator=g)
        expected.append((student(X[:, p], K) - Y[:, p]).norm() / Y.norm())
    torch.testing.assert_close(errors, torch.stack(expected).detach(), rtol=1e-12, atol=0)


def test_default_generator_is_fixed():
    student = make(SeqTransformer).double()
    X, K = inputs()
    assert torch.equal(orthogonal_equivariance_error(student, X, K), orthogonal_equivariance_error(student, X, K))


def test_summarize():
    assert summarize(torch.tensor([3.0, 1.0, 2.0])) == (2.0, 3.0)
    assert summarize(torch.tensor([4.0, 1.0, 2.0, 3.0])) == (2.5, 4.0)
    with pytest.raises(ValueError, match="at least one"):
        summarize(torch.tensor([]))


def test_error_measures_validate_inputs():
    student = make(InnerProductStudent).double()
    X, K = inputs()
    with pytest.raises(ValueError, match="share b and d"):
        orthogonal_equivariance_error(student, X, K[:2])
    with pytest.raises(ValueError, match=r"\(b, n, d\)"):
        permutation_equivariance_error(student, X[0], K)
    with pytest.raises(ValueError, match="zero"):
        orthogonal_equivariance_error(lambda X, K: torch.zeros_like(X), X, K)


def _pair_scores_naive(score, U, V):
    """The pair-score MLP as written in its definition: per pair, w2 . gelu(w1 . (u.v, |u|^2, |v|^2) + b1)."""
    b, p, q, H = U.shape[0], U.shape[1], V.shape[1], score.w1.shape[0]
    out = torch.empty(b, H, p, q, dtype=U.dtype)
    for s in range(b):
        for i in range(p):
            for j in range(q):
                x = torch.stack([U[s, i] @ V[s, j], U[s, i] @ U[s, i], V[s, j] @ V[s, j]])  # (3,)
                for h in range(H):
                    out[s, h, i, j] = torch.nn.functional.gelu(x @ score.w1[h] + score.b1[h]) @ score.w2[h]
    return out


def test_pair_scores_equal_the_definition_in_float64_values_and_gradients():
    from attnsweep.workers.students import PairScore

    torch.manual_seed(3)
    score = PairScore(heads=3, hidden=5).double()
    U, V = torch.randn(2, 4, 6, dtype=torch.float64), torch.randn(2, 3, 6, dtype=torch.float64)
    fast, naive = score(U, V), _pair_scores_naive(score, U, V)
    torch.testing.assert_close(fast, naive, rtol=1e-12, atol=1e-12)
    weights = torch.randn_like(fast)
    grads = [torch.autograd.grad((f * weights).sum(), list(score.parameters())) for f in (fast, naive)]
    for g_fast, g_naive in zip(*grads, strict=True):
        torch.testing.assert_close(g_fast, g_naive, rtol=1e-10, atol=1e-12)
