"""The hand-written one-layer forward and backward (workers/one_layer.py) against the model's
general forward and autograd, in float64: the same logits, loss and every parameter gradient,
in both forms of the sums over the samples (over the T bits, and the one-hot's two products)."""

from __future__ import annotations

import pytest
import torch

from attnsweep.workers import one_layer
from attnsweep.workers.models import CLSTransformer


def _model(T: int, d: int, heads: int, seed: int, scale: float = 1.0) -> CLSTransformer:
    torch.manual_seed(seed)
    model = CLSTransformer(T, d, 1, heads).double()
    with torch.no_grad():  # weights far from their small initial values, so every term matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5 * scale)
    return model


def _data(m: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (m, T), generator=g), torch.randint(0, 2, (m,), generator=g).double()


@pytest.mark.parametrize(
    "T, d, heads, m, scale",
    [
        (8, 8, 1, 5, 1.0),
        (16, 16, 4, 12, 0.5),
        (64, 32, 4, 33, 0.3),
        (300, 16, 2, 7, 0.3),
        (1024, 32, 4, 40, 0.3),
    ],
)
def test_the_t_bit_form_matches_autograd_in_float64(T, d, heads, m, scale):
    _matches_autograd(T, d, heads, m, scale, t_bit=True)


@pytest.mark.parametrize(
    "T, d, heads, m, scale",
    [
        (8, 8, 1, 5, 1.0),
        (16, 16, 4, 12, 1.0),
        (64, 32, 4, 33, 1.0),
        (300, 16, 2, 7, 3.0),
        (1024, 32, 4, 40, 2.0),
    ],
)
def test_the_one_hot_form_matches_autograd_in_float64_at_extreme_scores(T, d, heads, m, scale, monkeypatch):
    monkeypatch.setattr(one_layer, "KAPPA_MAX", 0.0)  # every call takes the two products
    _matches_autograd(T, d, heads, m, scale, t_bit=False)


def _matches_autograd(T: int, d: int, heads: int, m: int, scale: float, t_bit: bool) -> None:
    model = _model(T, d, heads, seed=T + m, scale=scale)
    x, y = _data(m, T, m)
    logits = model.forward_general(x)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
    loss.backward()
    params = {n: p.detach() for n, p in model.named_parameters()}
    assert tuple(params) == one_layer.NAMES
    assert (one_layer.tables(params, heads).kappa <= one_layer.KAPPA_MAX) == t_bit  # the form under test
    got_loss, got_logits, grads, score_range = one_layer.loss_and_grads(
        params, heads, one_layer.bits_as_float(x, torch.float64), y
    )
    torch.testing.assert_close(got_logits, logits.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_loss, loss.detach(), rtol=1e-12, atol=1e-12)
    assert set(grads) == set(one_layer.NAMES)
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-10, atol=1e-12, msg=name)
    assert score_range >= 0


@pytest.mark.parametrize("T", [4096, 16384, 65536])
def test_the_logits_match_the_exact_table_path_at_large_T_in_float64(T):
    model = _model(T, 16, 2, seed=T, scale=0.3)
    x, _ = _data(6, T, T)
    params = {n: p.detach() for n, p in model.named_parameters()}
    t = one_layer.tables(params, 2)
    assert t.kappa <= one_layer.KAPPA_MAX  # the T-bit form is the one under test
    with torch.no_grad():
        want = model.forward_table(x)  # the softmax per sample, no shared shift or product
    torch.testing.assert_close(
        one_layer.head(params, t, one_layer.bits_as_float(x, torch.float64)).logits,
        want,
        rtol=1e-11,
        atol=1e-11,
    )


def _spread(T: int, width: float) -> dict[str, torch.Tensor]:
    """float64 parameters of a small random model whose key weights are scaled so that its
    scores over the 2T (position, bit) pairs span ``width``: kappa grows with the width (at
    T = 4096: about 12 at 20, 67 at 40, 1.4e5 at 160)."""
    model = _model(T, 8, 1, seed=3, scale=0.3)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    t = one_layer.tables(params, 1)
    s = t.proj[:1] @ t.tab.t()  # (1, 2T) scores
    params["blocks.0.attn.k.weight"] = params["blocks.0.attn.k.weight"] * (width / float(s.max() - s.min()))
    return params


@pytest.mark.parametrize("width", [2.0, 20.0, 40.0, 160.0])
def test_the_float32_step_stays_within_float32_rounding_of_float64_at_any_kappa(width):
    """Whichever form head() takes, float32 logits and gradients stay within float32's
    rounding of the float64 reference, from kappa near 1 to far beyond KAPPA_MAX."""
    T = 4096
    p64 = _spread(T, width)
    x, y = _data(64, T, 7)
    _, want_logits, want_grads, _ = one_layer.loss_and_grads(p64, 1, one_layer.bits_as_float(x, torch.float64), y)
    p32 = {k: v.float() for k, v in p64.items()}
    _, logits, grads, _ = one_layer.loss_and_grads(p32, 1, one_layer.bits_as_float(x), y.float())
    assert (one_layer.tables(p32, 1).kappa > one_layer.KAPPA_MAX) == (width >= 40)  # both regimes exercised
    torch.testing.assert_close(logits.double(), want_logits, rtol=1e-5, atol=1e-5)
    for name in one_layer.NAMES:
        scale = float(want_grads[name].abs().max())
        torch.testing.assert_close(grads[name].double(), want_grads[name], rtol=1e-3, atol=1e-4 * scale, msg=name)


def test_past_kappa_max_the_t_bit_form_would_lose_the_small_denominators():
    """Why the bound exists: at kappa ~1e5 the T-bit form's float32 denominators drift from
    their exact sums many times further than the one-hot form's."""
    T = 4096
    p32 = {k: v.float() for k, v in _spread(T, 160.0).items()}
    x, _ = _data(64, T, 7)
    t = one_layer.tables(p32, 1)
    assert t.kappa > 1e4
    x32 = one_layer.bits_as_float(x)
    w0, w1 = t.w[:, :T], t.w[:, T:]
    t_bit = torch.addmm(w0.sum(1), x32, (w1 - w0).t())[:, 0]
    one_hot = torch.addmm(x32 @ w1.t(), 1 - x32, w0.t())[:, 0]
    exact = t.e_cls[0].double() + (1 - x.double()) @ w0[0].double() + x.double() @ w1[0].double()
    err_t_bit = float(((t.e_cls[0] + t_bit).double() / exact - 1).abs().max())
    err_one_hot = float(((t.e_cls[0] + one_hot).double() / exact - 1).abs().max())
    assert err_one_hot < 1e-6 < err_t_bit and err_t_bit > 10 * err_one_hot


def test_a_wide_score_range_is_reported_for_the_caller_to_fall_back():
    # Scaled query and key weights: scores spread by hundreds, beyond the float32 matmul form.
    model = _model(64, 16, 2, seed=1)
    with torch.no_grad():
        model.blocks[0].attn.q.weight.mul_(30)
        model.blocks[0].attn.k.weight.mul_(30)
    params = {n: p.detach().float() for n, p in model.named_parameters()}
    assert one_layer.tables(params, 2).score_range > 60
