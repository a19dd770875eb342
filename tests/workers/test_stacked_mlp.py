"""The stacked MLP's hand-written step (workers/stacked_mlp.py): its loss, logits and every
gradient against a naive float64 reference (the model's own module, slot by slot, through
autograd); against autograd through the stacked forward bit for bit on the sweeps' MLP shapes;
and a slot's numbers the same bit for bit wherever it sits, in stacks of other sizes and
packmates, with and without kept buffers."""

from __future__ import annotations

import pytest
import torch
from torch.func import stack_module_state

from attnsweep.workers.models import MLP, logistic_loss
from attnsweep.workers.stacked_mlp import hidden_layers, mlp_logits, mlp_step


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread, as a stacked pack trains (workers/stacked.py, ``reproducible``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _stack(T: int, width: int, layers: int, slots: int, seed: int) -> dict[str, torch.Tensor]:
    """Stacked float32 parameters of ``slots`` MLPs, moved off their initial values."""
    torch.manual_seed(seed)
    models = [MLP(T, width, layers) for _ in range(slots)]
    params, _ = stack_module_state(models)
    return {k: (v.detach() + 0.3 * torch.randn_like(v)).contiguous() for k, v in params.items()}


def _data(slots: int, m: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (slots, m, T), generator=g).float(), torch.randint(0, 2, (slots, m), generator=g).float()


def _naive64(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, layers: int):
    """One MLP's loss, logits ``(m,)`` and gradients in float64, sample by sample, from the
    formulas: h_0 = 2x - 1, z = W h + b, h = z Phi(z) (Phi by erf); logit r.h + c; the loss's
    derivative (sigmoid(logit) - y) / m; GELU's derivative Phi(z) + z phi(z)."""
    p = {k: v.double() for k, v in p.items()}
    m = x.shape[0]
    grads = {k: torch.zeros_like(v) for k, v in p.items()}
    logits, losses = torch.zeros(m, dtype=torch.float64), torch.zeros(m, dtype=torch.float64)
    for i in range(m):
        hs, zs = [2.0 * x[i].double() - 1.0], []
        for j in range(layers):
            zs.append(p[f"hidden.{j}.0.weight"] @ hs[-1] + p[f"hidden.{j}.0.bias"])
            hs.append(zs[-1] * 0.5 * (1.0 + torch.erf(zs[-1] / 2**0.5)))
        f = (p["readout.weight"][0] @ hs[-1] + p["readout.bias"][0]).item()
        logits[i] = f
        losses[i] = (
            max(f, 0.0) - f * y[i].item() + torch.log1p(torch.exp(torch.tensor(-abs(f), dtype=torch.float64))).item()
        )
        d = (torch.sigmoid(torch.tensor(f, dtype=torch.float64)).item() - y[i].item()) / m
        grads["readout.weight"][0] += d * hs[-1]
        grads["readout.bias"][0] += d
        dh = d * p["readout.weight"][0]
        for j in reversed(range(layers)):
            z = zs[j]
            dz = dh * (0.5 * (1.0 + torch.erf(z / 2**0.5)) + z * torch.exp(-0.5 * z * z) / (2 * torch.pi) ** 0.5)
            grads[f"hidden.{j}.0.weight"] += torch.outer(dz, hs[j])
            grads[f"hidden.{j}.0.bias"] += dz
            dh = p[f"hidden.{j}.0.weight"].T @ dz
    return losses.mean(), logits, grads


def _autograd(params, x, y):
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    logits = mlp_logits(leaves, x)
    loss = logistic_loss(logits, y)
    loss.sum().backward()
    return loss.detach(), logits.detach(), {k: v.grad for k, v in leaves.items()}


@pytest.mark.parametrize("T, width, layers, m", [(16, 64, 1, 40), (5, 7, 1, 3), (13, 50, 2, 37), (8, 16, 3, 9)])
def test_every_slot_matches_its_own_model_in_float64(T, width, layers, m):
    slots = 16
    params = _stack(T, width, layers, slots, seed=T + width)
    x, y = _data(slots, m, T, seed=m)
    loss, logits, grads = mlp_step(params, x, y)
    assert set(grads) == set(params) and all(grads[k].shape == params[k].shape for k in params)
    assert all(g.is_contiguous() and g.dtype == torch.float32 for g in grads.values())
    for s in range(slots):
        ref_loss, ref_logits, ref_grads = _naive64({k: v[s] for k, v in params.items()}, x[s], y[s], layers)
        assert torch.allclose(logits[s].double(), ref_logits, rtol=1e-5, atol=1e-5)
        assert torch.allclose(loss[s].double(), ref_loss, rtol=1e-5, atol=1e-6)
        for k, g in ref_grads.items():
            scale = g.abs().max().item() + 1e-12
            assert (grads[k][s].double() - g).abs().max().item() <= 1e-5 * scale, k


@pytest.mark.parametrize("T, m", [(8, 8), (16, 64), (16, 91), (32, 203), (64, 40), (64, 512), (256, 23)])
def test_the_sweeps_mlp_shapes_match_autograd_bit_for_bit(T, m):
    """The sweeps' MLP (width 256, one hidden layer): the step gives what autograd through the
    stacked forward gave, so rows trained either way are the same (module docstring)."""
    params = _stack(T, 256, 1, 32, seed=T)
    x, y = _data(32, m, T, seed=m)
    mine, theirs = mlp_step(params, x, y), _autograd(params, x, y)
    assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1])
    for k in params:
        assert torch.equal(mine[2][k], theirs[2][k]), k


def test_a_slot_gets_the_same_numbers_in_any_stack_with_or_without_kept_buffers():
    """T and the width multiples of 16 floats (64 bytes), as the sweeps' are: then every slot's
    matrices start 64-byte aligned. With a width of 50, MKL's products gave a slot other
    last bits at other positions, through autograd as through this step (not fixed here)."""
    T, width, m = 16, 64, 37
    big = _stack(T, width, 2, 64, seed=1)
    x, y = _data(64, m, T, seed=2)
    whole = mlp_step(big, x, y)
    work: dict = {}
    for order in (list(range(32)), list(range(63, 31, -1)), [5] * 16 + list(range(40, 56))):
        idx = torch.tensor(order)
        for _ in range(2):  # the second call reuses the first's buffers
            part = mlp_step({k: v[idx] for k, v in big.items()}, x[idx], y[idx], work)
            for i, s in enumerate(order):
                assert torch.equal(part[0][i], whole[0][s]) and torch.equal(part[1][i], whole[1][s])
                for k in big:
                    assert torch.equal(part[2][k][i], whole[2][k][s]), k
    assert work, "buffers kept"


def test_returned_tensors_do_not_alias_the_kept_buffers():
    params = _stack(16, 32, 1, 16, seed=3)
    x, y = _data(16, 20, 16, seed=4)
    work: dict = {}
    first = mlp_step(params, x, y, work)
    kept = (first[1].clone(), {k: v.clone() for k, v in first[2].items()})
    mlp_step(params, 1 - x, 1 - y, work)
    assert torch.equal(first[1], kept[0]) and all(torch.equal(first[2][k], kept[1][k]) for k in params)


@pytest.mark.parametrize("T, n", [(8, 2000), (16, 2000), (64, 300), (256, 129), (32, 191), (16, 128), (16, 127)])
def test_scoring_in_runs_of_samples_gives_the_forwards_logits_bit_for_bit(T, n):
    params = _stack(T, 256, 1, 32, seed=T)
    x, _ = _data(32, n, T, seed=n)
    whole = mlp_logits(params, x)  # grad enabled: one run
    with torch.no_grad():
        assert torch.equal(mlp_logits(params, x), whole)


def test_hidden_layers():
    assert hidden_layers(_stack(4, 8, 3, 16, seed=0)) == 3
