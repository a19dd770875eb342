"""The hand-written one-layer forward and backward (workers/one_layer.py) against the model's
general forward and autograd, in float64: the same logits, loss and every parameter gradient."""

from __future__ import annotations

import pytest
import torch

from workers import one_layer
from workers.models import CLSTransformer


def _model(T: int, d: int, heads: int, seed: int, scale: float = 1.0) -> CLSTransformer:
    torch.manual_seed(seed)
    model = CLSTransformer(T, d, 1, heads).double()
    with torch.no_grad():  # weights far from their small initial values, so every term matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5 * scale)
    return model


@pytest.mark.parametrize("T, d, heads, m, scale", [(8, 8, 1, 5, 1.0), (16, 16, 4, 12, 1.0), (64, 32, 4, 33, 1.0),
                                                   (300, 16, 2, 7, 3.0), (1024, 32, 4, 40, 2.0)])
def test_logits_loss_and_every_gradient_match_autograd_in_float64(T, d, heads, m, scale):
    model = _model(T, d, heads, seed=T + m, scale=scale)
    g = torch.Generator().manual_seed(m)
    x = torch.randint(0, 2, (m, T), generator=g)
    y = torch.randint(0, 2, (m,), generator=g).double()
    logits = model.forward_general(x)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
    loss.backward()
    params = {n: p.detach() for n, p in model.named_parameters()}
    assert tuple(params) == one_layer.NAMES
    both = CLSTransformer.encode(x).double()
    got_loss, got_logits, grads, score_range = one_layer.loss_and_grads(params, heads, both, y)
    torch.testing.assert_close(got_logits, logits.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_loss, loss.detach(), rtol=1e-12, atol=1e-12)
    assert set(grads) == set(one_layer.NAMES)
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-10, atol=1e-12, msg=name)
    assert score_range >= 0


def test_a_wide_score_range_is_reported_for_the_caller_to_fall_back():
    # Scaled query and key weights: scores spread by hundreds, beyond the float32 matmul form.
    model = _model(64, 16, 2, seed=1)
    with torch.no_grad():
        model.blocks[0].attn.q.weight.mul_(30)
        model.blocks[0].attn.k.weight.mul_(30)
    params = {n: p.detach().float() for n, p in model.named_parameters()}
    assert one_layer.tables(params, 2).score_range > 60
