"""Untrained position codes (issue 25): the same codes for every trial of a cell, never
changed by training, the hand-written step exact with them, and trial ids of the default
unchanged."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import torch

from attnsweep import tasks
from attnsweep.orchestrator.spec import trial_id
from attnsweep.workers import one_layer
from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.models import CLSTransformer, position_codes
from attnsweep.workers.norms import transformer_norms
from attnsweep.workers.train_boolean import _Trial, train_pack


def _trial(seed: int, m: int = 32, **settings) -> tuple[_Trial, torch.Tensor]:
    c = BooleanTrialConfig(
        task="and",
        T=64,
        s=3,
        m=m,
        seed=seed,
        d=16,
        heads=2,
        lr=3e-3,
        n_test=100,
        positions="fixed",
        **settings,
    )
    batch, ok, _ = tasks.sample_training_sets(
        c.task,
        c.T,
        c.s,
        c.m,
        [seed],
        reject_ambiguous=False,
        max_redraws=1,
        device=torch.device("cpu"),
    )
    return _Trial(c, batch.x[0], batch.y[0], torch.device("cpu")), batch.y[0]


def test_fixed_codes_are_one_draw_per_T_and_d_shared_by_every_trial_and_never_trained():
    want = torch.randn(
        65,
        16,
        generator=torch.Generator().manual_seed(tasks.derive_seed("positions", "fixed", 64, 16)),
    )
    trials = [_trial(seed, m) for seed, m in ((0, 32), (1, 32), (2, 64))]
    for trial, y in trials:
        assert "pos" not in trial.params  # not a parameter: no gradient, no optimiser state
        torch.testing.assert_close(trial.model.pos, want, rtol=0, atol=0)
        for _ in range(5):
            trial.step(trial.x, y)
        torch.testing.assert_close(trial.model.pos, want, rtol=0, atol=0)
    trained = [dict(t.params) for t, _ in trials]
    assert not torch.equal(trained[0]["tok.weight"], trained[1]["tok.weight"])  # the rest did train
    assert not torch.equal(position_codes(64, 16, "fixed"), position_codes(128, 16, "fixed")[:65])


def test_sinusoidal_codes_are_the_textbook_ones():
    pe = position_codes(10, 6, "sinusoidal")
    for t in (0, 1, 7):
        for i in range(3):
            angle = t / 10000 ** (2 * i / 6)
            assert pe[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert pe[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-7)
    assert position_codes(9, 5, "sinusoidal").shape == (10, 5)  # odd d: the last column is a sine
    with pytest.raises(ValueError, match="positions must be"):
        position_codes(8, 4, "rotary")


@pytest.mark.parametrize("kind", ["fixed", "sinusoidal"])
def test_the_hand_written_step_matches_autograd_with_untrained_codes_in_float64(kind):
    torch.manual_seed(0)
    model = CLSTransformer(48, 16, 1, 2, positions=kind).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.15)
    g = torch.Generator().manual_seed(1)
    x, y = (
        torch.randint(0, 2, (20, 48), generator=g),
        torch.randint(0, 2, (20,), generator=g).double(),
    )
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model.forward_general(x), y)
    loss.backward()
    tensors = {**dict(model.named_parameters()), "pos": model.pos}
    got_loss, _, grads, _ = one_layer.loss_and_grads(
        {k: v.detach() for k, v in tensors.items()}, 2, one_layer.bits_as_float(x, torch.float64), y
    )
    torch.testing.assert_close(got_loss, loss.detach(), rtol=1e-12, atol=1e-12)
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-10, atol=1e-12, msg=name)


def test_the_bound_holds_after_every_step_for_every_bounded_matrix():
    trial, y = _trial(3, norm_bound=0.5)
    trial.project()
    for _ in range(12):
        trial.step(trial.x, y)
        trial.project()
        norms = transformer_norms({k: v.detach()[None].double() for k, v in trial.params.items()}, 2, "frobenius")
        for name in (
            "norm_qk",
            "norm_v",
            "norm_readout",
        ):  # W_Q,h^T W_K,h and W_V,h per head; the readout
            assert norms[name].item() <= 0.5 * (1 + 1e-6), name


@pytest.mark.parametrize("kind", ["frobenius", "spectral", "l21"])
def test_the_bound_holds_after_every_step_in_float64(kind):
    # The trial's own step and projection, on a float64 copy of its model: every bounded matrix
    # (W_Q,h^T W_K,h and W_V,h per head, the readout) within B to float64 round-off, after
    # every step, while the LayerNorm before the head keeps gain 1 and bias 0.
    from attnsweep.workers.norms import project_transformer

    trial, y = _trial(5, norm_bound=0.5, ln_affine=False)
    model = trial.model.double()
    tensors = {**dict(model.named_parameters()), "pos": model.pos}
    trained = {k: v for k, v in tensors.items() if k in trial.params}
    opt = torch.optim.AdamW(list(trained.values()), lr=3e-2)
    x, y = trial.x.double(), y.double()
    bound = torch.tensor([0.5], dtype=torch.float64)
    stacked = {k: v.data[None] for k, v in trained.items()}
    project_transformer(stacked, bound, 2, kind)
    at_bound = 0
    for _ in range(15):
        _, _, grads, _ = one_layer.loss_and_grads({k: v.detach() for k, v in tensors.items()}, 2, x, y)
        for k, v in trained.items():
            v.grad = grads[k]
        opt.step()
        project_transformer(stacked, bound, 2, kind)
        norms = transformer_norms({k: v.detach()[None] for k, v in trained.items()}, 2, kind)
        for name in ("norm_qk", "norm_v", "norm_readout"):
            assert norms[name].item() <= 0.5 * (1 + 1e-12), (name, norms[name].item())
        at_bound += int(norms["norm_qk"].item() >= 0.5 * (1 - 1e-9))
        assert torch.equal(tensors["blocks.0.ln1.weight"], torch.ones(16, dtype=torch.float64))
    assert at_bound > 0  # the bound was reached, so the projection did work


def test_a_row_of_untrained_codes_says_so_and_trains():
    rows = train_pack(
        [
            BooleanTrialConfig(
                task="and",
                T=32,
                s=3,
                m=64,
                seed=0,
                n_test=100,
                d=16,
                heads=2,
                lr=3e-3,
                max_epochs=30,
                positions="sinusoidal",
            )
        ],
        "cpu",
    )
    assert rows[0]["status"] == "done" and rows[0]["epochs"] > 0


def test_the_default_keeps_the_trial_ids_of_rows_stored_before_the_setting_existed():
    c = BooleanTrialConfig(task="and", T=64, s=3, m=32, seed=5)
    before = {
        k: v
        for k, v in c.model_dump(mode="json").items()
        if k not in ("positions", "ln_affine", "restart", "stop", "margin_target")
    }  # old code's
    assert trial_id(c) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    assert trial_id(c.model_copy(update={"positions": "fixed"})) != trial_id(c)
    assert trial_id(c.model_copy(update={"ln_affine": False})) != trial_id(c)
    assert trial_id(c.model_copy(update={"restart": 1})) != trial_id(c)
    assert trial_id(c.model_copy(update={"stop": "budget"})) != trial_id(c)
    margin = trial_id(c.model_copy(update={"stop": "margin", "margin_target": 0.1}))
    assert margin not in (trial_id(c), trial_id(c.model_copy(update={"stop": "margin", "margin_target": 0.2})))


def test_the_mlp_has_no_position_codes_to_set():
    with pytest.raises(ValueError, match="setting of the transformer"):
        BooleanTrialConfig(task="and", T=64, s=3, m=32, seed=0, model="mlp", positions="fixed")
    with pytest.raises(ValueError, match="ln_affine is a setting of the transformer"):
        BooleanTrialConfig(task="and", T=64, s=3, m=32, seed=0, model="mlp", ln_affine=False)


@pytest.mark.parametrize("norm_bound", [None, 0.5])
def test_without_ln_affine_the_heads_inputs_keep_norm_sqrt_d_through_training(norm_bound):
    trial, y = _trial(4, ln_affine=False, norm_bound=norm_bound)
    ln1 = {k for k in trial.tensors if ".ln1." in k}
    assert ln1 == {"blocks.0.ln1.weight", "blocks.0.ln1.bias"} and not ln1 & trial.params.keys()
    before = {k: v.detach().clone() for k, v in trial.params.items()}
    for _ in range(8):
        assert trial.step(trial.x, y) == "stepped"
        trial.project()
    assert torch.equal(trial.tensors["blocks.0.ln1.weight"], torch.ones(16))
    assert torch.equal(trial.tensors["blocks.0.ln1.bias"], torch.zeros(16))
    assert all(not torch.equal(before[k], v) for k, v in trial.params.items())  # everything else trained
    # Every input the head reads: LayerNorm(tok[b] + pos[t]) and LayerNorm(cls + pos[0]), in float64.
    m = trial.model.double().requires_grad_(False)
    rows = torch.cat([(m.tok.weight[:, None, :] + m.pos[None, 1:]).reshape(-1, 16), (m.cls + m.pos[0])[None]])
    centred = rows - rows.mean(-1, keepdim=True)
    var = centred.pow(2).mean(-1, keepdim=True)
    inputs = m.blocks[0].ln1(rows)
    torch.testing.assert_close(inputs, centred / (var + one_layer.EPS).sqrt(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(inputs.norm(dim=-1), (16 * var / (var + one_layer.EPS)).sqrt().squeeze(-1))
    assert float((inputs.norm(dim=-1) - 4.0).abs().max()) < 1e-3  # sqrt(d), up to LayerNorm's eps
