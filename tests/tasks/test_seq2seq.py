"""Tests of the seq2seq-with-knowledge teachers (tasks.seq2seq).

Rotations and permutations are drawn here with numpy (QR of a Gaussian with the signs of
R's diagonal fixed, and ``Generator.permutation``), independently of workers.equivariance;
the equivariant teacher is also recomputed from its formula with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.seq2seq import TEACHERS, sample_dataset, teacher_outputs, teacher_params

N, K_ROWS, D = 5, 3, 4


# -- independent references -------------------------------------------------------------


def np_haar(d: int, count: int, seed: int) -> np.ndarray:
    """``(count, d, d)`` Haar orthogonal matrices, numpy QR with R's diagonal made positive."""
    z = np.random.default_rng(seed).standard_normal((count, d, d))
    q, r = np.linalg.qr(z)
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]


def np_softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def orth_errors(teacher: str, X: torch.Tensor, K: torch.Tensor, count: int = 6) -> list[float]:
    p = teacher_params(teacher, X.shape[1], K.shape[1], X.shape[2], seed=0)
    Y = teacher_outputs(teacher, p, X, K)
    out = []
    for q in np_haar(X.shape[2], count, seed=1):
        Q = torch.from_numpy(q)
        out.append(rel(teacher_outputs(teacher, p, X @ Q.T, K @ Q.T), Y @ Q.T))
    return out


def perm_errors(teacher: str, X: torch.Tensor, K: torch.Tensor, count: int = 6) -> list[float]:
    p = teacher_params(teacher, X.shape[1], K.shape[1], X.shape[2], seed=0)
    Y = teacher_outputs(teacher, p, X, K)
    rng = np.random.default_rng(2)
    out = []
    for _ in range(count):
        perm = torch.from_numpy(rng.permutation(X.shape[1]))
        out.append(rel(teacher_outputs(teacher, p, X[:, perm], K), Y[:, perm]))
    return out


def inputs64(teacher: str, m: int = 16):
    return sample_dataset(teacher, N, K_ROWS, D, m, seed=0, split="test", dtype=torch.float64)


# -- shapes, dtypes, determinism ---------------------------------------------------------


@pytest.mark.parametrize("teacher", TEACHERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shapes_and_dtypes(teacher, dtype):
    X, K, Y = sample_dataset(teacher, N, K_ROWS, D, 7, seed=0, dtype=dtype)
    assert X.shape == (7, N, D) and K.shape == (7, K_ROWS, D) and Y.shape == (7, N, D)
    assert X.dtype == K.dtype == Y.dtype == dtype
    assert torch.isfinite(Y).all()
    for t in teacher_params(teacher, N, K_ROWS, D, seed=0).values():
        assert t.dtype == torch.float64


def test_teacher_outputs_keep_batch_dims_and_dtype():
    p = teacher_params("equivariant", N, K_ROWS, D, seed=0)
    X = torch.randn(2, 3, N, D, generator=torch.Generator().manual_seed(0))
    K = torch.randn(2, 3, K_ROWS, D, generator=torch.Generator().manual_seed(1))
    Y = teacher_outputs("equivariant", p, X, K)
    assert Y.shape == X.shape and Y.dtype == torch.float32


@pytest.mark.parametrize("teacher", TEACHERS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_same_arguments_give_identical_tensors(teacher, split):
    a = sample_dataset(teacher, N, K_ROWS, D, 9, seed=3, split=split)
    b = sample_dataset(teacher, N, K_ROWS, D, 9, seed=3, split=split)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


@pytest.mark.parametrize("teacher", TEACHERS)
def test_train_and_test_share_the_teacher(teacher):
    p = teacher_params(teacher, N, K_ROWS, D, seed=4)
    for split, m in [("train", 6), ("train", 11), ("test", 6)]:
        X, K, Y = sample_dataset(teacher, N, K_ROWS, D, m, seed=4, split=split, dtype=torch.float64)
        assert torch.allclose(teacher_outputs(teacher, p, X, K), Y, rtol=0, atol=1e-15)


@pytest.mark.parametrize("teacher", TEACHERS)
def test_streams_differ_where_they_should(teacher):
    train = sample_dataset(teacher, N, K_ROWS, D, 8, seed=0, split="train")
    assert not torch.equal(train[0], sample_dataset(teacher, N, K_ROWS, D, 8, seed=1, split="train")[0])
    assert not torch.equal(train[0], sample_dataset(teacher, N, K_ROWS, D, 8, seed=0, split="test")[0])
    # Training inputs depend on m; test inputs do not.
    assert not torch.equal(train[0], sample_dataset(teacher, N, K_ROWS, D, 9, seed=0, split="train")[0][:8])
    test_small = sample_dataset(teacher, N, K_ROWS, D, 8, seed=0, split="test")[0]
    assert torch.equal(test_small, sample_dataset(teacher, N, K_ROWS, D, 12, seed=0, split="test")[0][:8])
    p0, p1 = teacher_params(teacher, N, K_ROWS, D, 0), teacher_params(teacher, N, K_ROWS, D, 1)
    assert any(not torch.equal(p0[name], p1[name]) for name in p0)


# -- symmetries ------------------------------------------------------------------------


def test_equivariant_teacher_is_orthogonally_and_permutation_equivariant():
    X, K, _ = inputs64("equivariant")
    assert max(orth_errors("equivariant", X, K)) < 1e-12
    assert max(perm_errors("equivariant", X, K)) < 1e-12


def test_control_teacher_breaks_orthogonal_equivariance_only():
    X, K, _ = inputs64("control")
    assert min(orth_errors("control", X, K)) > 1e-2
    assert max(perm_errors("control", X, K)) < 1e-12


def test_positional_teacher_breaks_permutation_equivariance_only():
    X, K, _ = inputs64("positional")
    assert max(orth_errors("positional", X, K)) < 1e-12
    errors = perm_errors("positional", X, K)
    # A random permutation can be the identity (E = 0), so the largest error is checked.
    assert max(errors) > 1e-2


# -- values ------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [4, 32])
def test_input_scale_is_one_over_d(d):
    X, K, _ = sample_dataset("equivariant", 8, 4, d, 2000, seed=0, split="test", dtype=torch.float64)
    for t in (X, K):
        assert abs(float((t**2).mean()) * d - 1.0) < 0.1


def test_equivariant_teacher_matches_numpy_formula():
    p = {name: float(v) for name, v in teacher_params("equivariant", N, K_ROWS, D, seed=5).items()}
    X, K, Y = sample_dataset("equivariant", N, K_ROWS, D, 1, seed=5, dtype=torch.float64)
    x, kn = X[0].numpy(), K[0].numpy()
    expected = (
        p["alpha"] * np_softmax(p["beta_xk"] * x @ kn.T) @ kn + p["gamma"] * np_softmax(p["beta_xx"] * x @ x.T) @ x
    )
    np.testing.assert_allclose(Y[0].numpy(), expected, rtol=1e-12, atol=1e-14)


def test_positional_teacher_adds_diag_c_times_x():
    pos = teacher_params("positional", N, K_ROWS, D, seed=6)
    equi = {name: pos[name] for name in ("alpha", "gamma", "beta_xk", "beta_xx")}
    X, K, _ = inputs64("positional", m=3)
    expected = teacher_outputs("equivariant", equi, X, K) + pos["c"][:, None] * X
    assert torch.allclose(teacher_outputs("positional", pos, X, K), expected, rtol=0, atol=1e-15)


def test_parameter_ranges():
    p = teacher_params("positional", 200, K_ROWS, D, seed=0)
    assert 0.5 <= p["alpha"] <= 1.5 and 0.5 <= p["gamma"] <= 1.5
    assert 0.5 <= p["beta_xk"] <= 2.0 and 0.5 <= p["beta_xx"] <= 2.0
    assert p["c"].shape == (200,) and p["c"].abs().max() <= 1.0
    c = teacher_params("control", N, K_ROWS, 64, seed=0)
    assert c["A"].shape == (64, 64)
    assert abs(float((c["A"] ** 2).mean()) * 64 - 1.0) < 0.1


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"teacher": "rotating"}, "teacher"),
        ({"n": 0}, "n (input rows)"),
        ({"k": 0}, "k (knowledge rows)"),
        ({"d": 1}, "d (embedding dimension)"),
        ({"m": 0}, "m must"),
        ({"split": "valid"}, "split"),
    ],
)
def test_bad_arguments_raise_task_error(kwargs, word):
    args = {"teacher": "equivariant", "n": N, "k": K_ROWS, "d": D, "m": 4, "seed": 0} | kwargs
    with pytest.raises(TaskError, match=word.replace("(", r"\(").replace(")", r"\)")):
        sample_dataset(**args)


def test_teacher_params_validates_too():
    with pytest.raises(TaskError, match="teacher must be one of"):
        teacher_params("nope", N, K_ROWS, D, 0)
    with pytest.raises(TaskError, match="d "):
        teacher_params("control", N, K_ROWS, 1, 0)


def test_teacher_outputs_rejects_mismatched_shapes():
    X, K, _ = inputs64("positional", m=2)
    with pytest.raises(TaskError, match="n=5"):
        teacher_outputs("positional", teacher_params("positional", N + 1, K_ROWS, D, 0), X, K)
    with pytest.raises(TaskError, match="d=5"):
        teacher_outputs("control", teacher_params("control", N, K_ROWS, D + 1, 0), X, K)
    with pytest.raises(TaskError, match="same d"):
        teacher_outputs("equivariant", teacher_params("equivariant", N, K_ROWS, D, 0), X, K[..., :2])
    with pytest.raises(TaskError, match="lack"):
        teacher_outputs("control", teacher_params("equivariant", N, K_ROWS, D, 0), X, K)
