"""Tests of the models (workers.models) and the norm projections (workers.norms).

Norms are recomputed with numpy from the weights; projected weights are compared with
W * min(1, B / ||W||) computed here (sqrt of the factor on W_Q,h and W_K,h).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.func import stack_module_state

from attnsweep.workers import MLP, CLSTransformer, build_model, matrix_norm
from attnsweep.workers.norms import project_mlp, project_transformer

KINDS = ["frobenius", "spectral", "l21"]


def np_norm(w: np.ndarray, kind: str) -> float:
    w = np.asarray(w, dtype=np.float64)
    if kind == "frobenius":
        return float(np.linalg.norm(w, "fro"))
    if kind == "spectral":
        return float(np.linalg.norm(w, 2))  # largest singular value
    if kind == "l21":
        return float(np.sqrt((w**2).sum(axis=1)).sum())  # sum of row Euclidean norms
    raise AssertionError(kind)


def random_bits(n: int, T: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (n, T), generator=g, dtype=torch.uint8)


# -- shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize("layers,heads", [(1, 1), (1, 4), (2, 2), (3, 8)])
def test_transformer_output_shape(layers, heads):
    torch.manual_seed(0)
    model = CLSTransformer(T=12, d=16, layers=layers, heads=heads)
    out = model(random_bits(7, 12))
    assert out.shape == (7,)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("layers", [1, 2])
def test_mlp_output_shape(layers):
    torch.manual_seed(0)
    model = MLP(T=12, width=20, layers=layers)
    out = model(random_bits(9, 12))
    assert out.shape == (9,)
    assert torch.isfinite(out).all()


def test_build_model():
    assert isinstance(build_model("transformer", 8, 16, 1, 2, 32), CLSTransformer)
    assert isinstance(build_model("mlp", 8, 16, 1, 2, 32), MLP)
    with pytest.raises(ValueError):
        build_model("rnn", 8, 16, 1, 2, 32)


def test_mlp_maps_bits_to_plus_minus_one():
    # With identity-like first layer weights the MLP sees 2x - 1.
    model = MLP(T=3, width=3, layers=1)
    with torch.no_grad():
        lin = model.hidden[0][0]
        lin.weight.copy_(torch.eye(3))
        lin.bias.zero_()
        model.readout.weight.copy_(torch.tensor([[1.0, 10.0, 100.0]]))
        model.readout.bias.zero_()
    x = torch.tensor([[1, 0, 1]], dtype=torch.uint8)
    gelu = lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))  # noqa: E731
    expected = gelu(1.0) + 10 * gelu(-1.0) + 100 * gelu(1.0)
    assert float(model(x).detach()[0]) == pytest.approx(expected, rel=1e-6)


# -- the one-layer paths: table and matmul against the general forward -------------------


def _randomised(T: int, heads: int, d: int = 16, seed: int = 0, std: float = 0.5) -> CLSTransformer:
    torch.manual_seed(seed)
    model = CLSTransformer(T=T, d=d, layers=1, heads=heads).double()
    with torch.no_grad():  # non-trivial values for every parameter, LayerNorms included
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


def _grads(model: CLSTransformer, x: torch.Tensor, path: str) -> tuple[torch.Tensor, dict]:
    model.zero_grad()
    out = model.forward_matmul(x)[0] if path == "matmul" else getattr(model, f"forward_{path}")(x)
    # A loss that weights samples differently, so every per-sample term enters the gradient.
    (out * torch.linspace(-1.0, 2.0, out.shape[0], dtype=out.dtype)).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("T", [2, 5, 33, 257, 2048])
@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("path", ["table", "matmul"])
def test_one_layer_paths_equal_general_in_value_and_gradient(T, heads, path):
    model = _randomised(T, heads, seed=T * 10 + heads)
    x = random_bits(25, T, seed=T)
    ref, ref_grads = _grads(model, x, "general")
    out, grads = _grads(model, x, path)
    assert out.shape == ref.shape == (25,)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, atol=1e-12, rtol=1e-10, msg=name)
    torch.testing.assert_close(model(x), ref, atol=1e-12, rtol=1e-10)


def _widen_scores(model: CLSTransformer, factor: float) -> float:
    """Scale W_Q and W_K by sqrt(factor) (scores by factor); returns the new score range."""
    with torch.no_grad():
        model.blocks[0].attn.q.weight.mul_(math.sqrt(factor))
        model.blocks[0].attn.k.weight.mul_(math.sqrt(factor))
    return float(model.forward_matmul(random_bits(1, model.pos.shape[0] - 1))[1])


@pytest.mark.parametrize("T", [64, 1024])
def test_matmul_path_in_float32_stays_exact_up_to_the_safe_score_range(T):
    # Scores spread over ~55 nats: a sample whose bits pick low scores has all its
    # exponentials near exp(-50), which the affine form e0 + x (e1 - e0) would lose to
    # cancellation in float32; the float64 general forward is the reference.
    from attnsweep.workers.models import score_range_safe

    model = _randomised(T, heads=4, seed=3)
    base = _widen_scores(model, 1.0)
    score_range = _widen_scores(model, 55.0 / base)
    assert 50 < score_range < score_range_safe(torch.float32)
    # Samples from all ones to all zeros, through random ones.
    x = torch.cat([torch.ones(1, T), torch.zeros(1, T), random_bits(30, T, seed=1).double()]).to(torch.uint8)
    ref = model.forward_general(x)
    fast, _ = model.float().forward_matmul(x)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast.double(), ref, atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_score_range_falls_back_to_an_exact_finite_result(dtype):
    from attnsweep.workers.models import score_range_safe

    T = 200
    model = _randomised(T, heads=2, seed=5)
    score_range = _widen_scores(model, 4000.0)
    ref = model.forward_general(random_bits(40, T, seed=2))
    x = random_bits(40, T, seed=2)
    model = model.to(dtype)
    assert score_range > score_range_safe(dtype)
    out = model(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref, atol=1e-3 if dtype == torch.float32 else 1e-9, rtol=1e-4)
    if dtype == torch.float32:  # a trainer's step takes the same decision per trial (workers/train_boolean.py)
        from attnsweep.workers import BooleanTrialConfig
        from attnsweep.workers.train_boolean import _Trial

        c = BooleanTrialConfig(task="and", T=T, s=3, m=40, seed=0, d=16, heads=2, n_test=100)
        trial = _Trial(c, x.to(torch.uint8), torch.zeros(40), torch.device("cpu"))
        trial.model.load_state_dict(model.state_dict())
        torch.testing.assert_close(trial.scorer()(trial.x).double(), ref, atol=1e-3, rtol=1e-4)


def test_unknown_forward_path_is_an_error():
    with pytest.raises(ValueError, match="path"):
        CLSTransformer(T=4, d=8)(random_bits(2, 4), path="fast")
    with pytest.raises(ValueError, match="path"):
        CLSTransformer(T=4, d=8, layers=2, heads=2)(random_bits(2, 4), path="matmul")


def test_transformer_depends_on_its_input():
    # Changing the bits changes the logits (the model reads its input).
    torch.manual_seed(1)
    model = CLSTransformer(T=6, d=8, layers=2, heads=2).double()
    x = random_bits(30, 6, seed=3)
    out = model(x)
    assert not torch.allclose(out, model(1 - x))


# -- norms -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 3), (1, 8)])
def test_matrix_norm_matches_numpy(kind, shape):
    rng = np.random.default_rng(sum(shape))
    w = rng.normal(size=shape)
    got = float(matrix_norm(torch.from_numpy(w), kind))
    assert got == pytest.approx(np_norm(w, kind), rel=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_matrix_norm_batched(kind):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(2, 3, 4, 5))
    got = matrix_norm(torch.from_numpy(w), kind).numpy()
    assert got.shape == (2, 3)
    expected = np.array([[np_norm(w[i, j], kind) for j in range(3)] for i in range(2)])
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_matrix_norm_hand_values():
    w = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    assert float(matrix_norm(w, "frobenius")) == pytest.approx(5.0)
    assert float(matrix_norm(w, "spectral")) == pytest.approx(5.0)
    assert float(matrix_norm(w, "l21")) == pytest.approx(5.0)
    w = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert float(matrix_norm(w, "frobenius")) == pytest.approx(math.sqrt(5.0))
    assert float(matrix_norm(w, "spectral")) == pytest.approx(2.0)
    assert float(matrix_norm(w, "l21")) == pytest.approx(3.0)


def test_matrix_norm_unknown_kind():
    with pytest.raises(ValueError):
        matrix_norm(torch.ones(2, 2), "nuclear")


# -- projection onto the norm ball -----------------------------------------------------

T_, D_, H_ = 10, 8, 2
DH_ = D_ // H_


def stacked_transformers(scale: float):
    torch.manual_seed(42)
    models = [CLSTransformer(T=T_, d=D_, layers=1, heads=H_) for _ in range(3)]
    params, _ = stack_module_state(models)
    with torch.no_grad():
        for v in params.values():
            v.mul_(scale)
    return params


def snapshot(params):
    return {k: v.detach().clone() for k, v in params.items()}


def head_rows(w: np.ndarray, h: int) -> np.ndarray:
    return w[h * DH_ : (h + 1) * DH_]


@pytest.mark.parametrize("kind", KINDS)
def test_project_transformer(kind):
    params = stacked_transformers(10.0)
    before = snapshot(params)
    bound = torch.tensor([0.5, 2.0, math.inf])
    project_transformer(params, bound, heads=H_, kind=kind)
    after = snapshot(params)
    prefix = "blocks.0.attn."
    projected = {prefix + "q.weight", prefix + "k.weight", prefix + "v.weight", "readout.weight"}

    for t, B in enumerate([0.5, 2.0]):
        wq0, wk0, wv0 = (before[prefix + n + ".weight"][t].double().numpy() for n in "qkv")
        wq1, wk1, wv1 = (after[prefix + n + ".weight"][t].double().numpy() for n in "qkv")
        for h in range(H_):
            m0 = head_rows(wq0, h).T @ head_rows(wk0, h)  # W_Q,h^T W_K,h, (d, d)
            m1 = head_rows(wq1, h).T @ head_rows(wk1, h)
            n0 = np_norm(m0, kind)
            assert n0 > B  # the scaled-up weights start outside the ball
            assert np_norm(m1, kind) <= B * (1 + 1e-5)
            assert np_norm(m1, kind) == pytest.approx(B, rel=1e-5)  # radial: onto the sphere
            f = math.sqrt(min(1.0, B / n0))
            np.testing.assert_allclose(head_rows(wq1, h), head_rows(wq0, h) * f, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(head_rows(wk1, h), head_rows(wk0, h) * f, rtol=1e-5, atol=1e-7)
            v0 = np_norm(head_rows(wv0, h), kind)
            assert np_norm(head_rows(wv1, h), kind) <= B * (1 + 1e-5)
            np.testing.assert_allclose(head_rows(wv1, h), head_rows(wv0, h) * min(1.0, B / v0), rtol=1e-5, atol=1e-7)
        r0 = before["readout.weight"][t].double().numpy()
        r1 = after["readout.weight"][t].double().numpy()
        assert np_norm(r1, kind) <= B * (1 + 1e-5)
        np.testing.assert_allclose(r1, r0 * min(1.0, B / np_norm(r0, kind)), rtol=1e-5, atol=1e-7)

    for name in params:
        # The unbounded trial is untouched, and so is everything the bound does not cover.
        assert torch.equal(after[name][2], before[name][2]), name
        if name not in projected:
            assert torch.equal(after[name], before[name]), name


@pytest.mark.parametrize("kind", KINDS)
def test_project_transformer_inside_ball_is_unchanged(kind):
    params = stacked_transformers(1.0)
    before = snapshot(params)
    project_transformer(params, torch.tensor([1e3, 1e4, math.inf]), heads=H_, kind=kind)
    for name in params:
        assert torch.equal(params[name], before[name]), name


def stacked_mlps(scale: float):
    torch.manual_seed(7)
    models = [MLP(T=10, width=16, layers=2) for _ in range(3)]
    params, _ = stack_module_state(models)
    with torch.no_grad():
        for v in params.values():
            v.mul_(scale)
    return params


@pytest.mark.parametrize("kind", KINDS)
def test_project_mlp(kind):
    params = stacked_mlps(10.0)
    before = snapshot(params)
    weights = [n for n in params if n.endswith("weight")]
    assert len(weights) == 3  # two hidden layers and the readout
    project_mlp(params, torch.tensor([0.5, 2.0, math.inf]), kind=kind)
    for t, B in enumerate([0.5, 2.0]):
        for name in weights:
            w0 = before[name][t].double().numpy()
            w1 = params[name][t].detach().double().numpy()
            n0 = np_norm(w0, kind)
            assert n0 > B
            assert np_norm(w1, kind) <= B * (1 + 1e-5)
            np.testing.assert_allclose(w1, w0 * min(1.0, B / n0), rtol=1e-5, atol=1e-7)
    for name in params:
        assert torch.equal(params[name][2], before[name][2]), name
        if not name.endswith("weight"):  # biases are not bounded
            assert torch.equal(params[name], before[name]), name


@pytest.mark.parametrize("kind", KINDS)
def test_project_mlp_inside_ball_is_unchanged(kind):
    params = stacked_mlps(1.0)
    before = snapshot(params)
    project_mlp(params, torch.tensor([1e4, 1e5, math.inf]), kind=kind)
    for name in params:
        assert torch.equal(params[name], before[name]), name
