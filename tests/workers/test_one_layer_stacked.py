"""The stacked one-layer step (workers/one_layer_stacked.py) against each slot's own model: in
float64 the same loss, logits and every parameter gradient as autograd through the model's
exact table path, slot by slot; float32 within float32 rounding of float64; and a slot's
numbers the same bit for bit wherever it sits in stacks of other sizes and packmates."""

from __future__ import annotations

import pytest
import torch
from torch.func import stack_module_state

from attnsweep.workers import one_layer
from attnsweep.workers.models import CLSTransformer
from attnsweep.workers.one_layer_stacked import loss_and_grads_stacked


def _model(T: int, d: int, heads: int, positions: str, seed: int) -> CLSTransformer:
    """A float64 model with weights moved far from their small initial values (each slot its
    own scale, so the slots' score ranges differ), so that every term of the step matters."""
    torch.manual_seed(seed)
    model = CLSTransformer(T, d, 1, heads, positions).double()
    scale = 0.2 + 0.8 * torch.rand(()).item()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)
    return model


def _stacked(models: list[CLSTransformer]) -> dict[str, torch.Tensor]:
    params, buffers = stack_module_state(models)
    p = {
        **{k: v.detach() for k, v in params.items()},
        **buffers,
    }  # "pos" is a buffer for untrained codes
    assert set(p) == set(one_layer.NAMES)
    return p


def _data(S: int, m: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, 2, (S, m, T), generator=g).double(),
        torch.randint(0, 2, (S, m), generator=g).double(),
    )


@pytest.mark.parametrize(
    "T, d, heads, m, positions",
    [
        (8, 8, 1, 5, "learned"),
        (16, 16, 2, 12, "learned"),
        (16, 16, 2, 64, "fixed"),
        (64, 32, 4, 33, "learned"),
        (64, 32, 4, 20, "fixed"),
        (300, 16, 2, 7, "learned"),
    ],
)
def test_every_slot_matches_autograd_through_its_own_model_in_float64(T, d, heads, m, positions):
    S = 32
    models = [_model(T, d, heads, positions, seed=1000 * T + s) for s in range(S)]
    x, y = _data(S, m, T, seed=T + m)
    loss, logits, grads, score_range = loss_and_grads_stacked(_stacked(models), heads, x, y)
    assert loss.shape == (S,) and logits.shape == (S, m) and score_range.shape == (S,)
    assert set(grads) == set(one_layer.NAMES)
    for s, model in enumerate(models):
        want_logits = model.forward_table(x[s])  # the softmax per sample: no shift, no one-hot product
        want_loss = torch.nn.functional.binary_cross_entropy_with_logits(want_logits, y[s])
        want_loss.backward()
        torch.testing.assert_close(logits[s], want_logits.detach(), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(loss[s], want_loss.detach(), rtol=1e-10, atol=1e-12)
        for name, param in model.named_parameters():
            assert grads[name].shape[1:] == param.shape, name
            torch.testing.assert_close(grads[name][s], param.grad, rtol=1e-10, atol=1e-12, msg=f"slot {s}: {name}")
        with torch.no_grad():
            _, want_range = model.forward_matmul(x[s])
        torch.testing.assert_close(score_range[s], want_range, rtol=1e-12, atol=1e-12)
    assert (score_range.max() - score_range.min()) > 0.1  # the slots really differ


@pytest.mark.parametrize("T, d, heads, m", [(16, 16, 2, 64), (64, 32, 4, 33)])
def test_float32_stays_within_float32_rounding_of_float64(T, d, heads, m):
    S = 32
    p64 = _stacked([_model(T, d, heads, "learned", seed=7 * T + s) for s in range(S)])
    x, y = _data(S, m, T, seed=5)
    want = loss_and_grads_stacked(p64, heads, x, y)
    got = loss_and_grads_stacked({k: v.float() for k, v in p64.items()}, heads, x.float(), y.float())
    assert all(t.dtype == torch.float32 for t in (got[0], got[1], got[3], *got[2].values()))
    torch.testing.assert_close(got[0].double(), want[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1].double(), want[1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[3].double(), want[3], rtol=1e-4, atol=1e-5)
    for name in one_layer.NAMES:
        for s in range(S):  # each slot against its own largest gradient entry
            scale = float(want[2][name][s].abs().max())
            torch.testing.assert_close(
                got[2][name][s].double(),
                want[2][name][s],
                rtol=1e-4,
                atol=1e-4 * scale,
                msg=f"slot {s}: {name}",
            )


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T, d, heads, m", [(16, 16, 2, 64), (64, 32, 4, 33), (1024, 32, 4, 128)])
def test_a_slot_gives_the_same_bits_wherever_it_sits_among_any_packmates(T, d, heads, m, dtype):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = _stacked([_model(T, d, heads, "learned", seed=1)])
        x1, y1 = _data(1, m, T, seed=2)
        runs = []
        for S, where, mates_seed in [
            (32, 0, 10),
            (32, 13, 20),
            (32, 31, 30),
            (64, 0, 40),
            (64, 40, 50),
            (64, 63, 60),
        ]:
            p = _stacked([_model(T, d, heads, "learned", seed=mates_seed + s) for s in range(S)])
            x, y = _data(S, m, T, seed=mates_seed)
            for k in p:
                p[k][where] = one[k][0]
            x[where], y[where] = x1[0], y1[0]
            loss, logits, grads, score_range = loss_and_grads_stacked(
                {k: v.to(dtype) for k, v in p.items()}, heads, x.to(dtype), y.to(dtype)
            )
            runs.append(
                (
                    loss[where],
                    logits[where],
                    score_range[where],
                    {k: g[where] for k, g in grads.items()},
                )
            )
        first = runs[0]
        for run in runs[1:]:
            for a, b in zip(run[:3], first[:3], strict=True):
                assert torch.equal(a, b)
            for name in one_layer.NAMES:
                assert torch.equal(run[3][name], first[3][name]), name
    finally:
        torch.set_num_threads(threads)
