"""A trial's training margin and its normalised margin (workers/margins.py) against a naive
float64 computation from the weights the trial trained to: the model's general forward
(every position embedded, no table, no hand-written step) in float64, and the norms the
capacity bound counts written out head by head in numpy."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from attnsweep import tasks
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers.stacked_boolean import fit_stacked, score_stacked
from attnsweep.workers.train_boolean import _fit, _model, eval_chunk, fill_row, trained

CPU = torch.device("cpu")
THEORY = dict(task="and", T=24, s=3, m=48, d=16, heads=2, positions="fixed", ln_affine=False, lr=3e-3, n_test=200)


def _naive(model: torch.nn.Module, bits: torch.Tensor, y: torch.Tensor, heads: int) -> tuple[float, float]:
    """(margin, normalised margin) in float64 from the model's weights: the margin over the
    training set from the general forward, C = ||w|| ||W_V|| B_X (1 + ||W_QK|| B_X^2 / sqrt(d_h))
    with Frobenius norms, each the largest over heads, and B_X = sqrt(d) (no LayerNorm gain)."""
    m64 = copy.deepcopy(model).double()
    with torch.no_grad():
        logits = m64.forward_general(bits).numpy()
    signs = 2 * y.double().numpy() - 1
    margin = float(np.min(signs * logits))
    attn = m64.blocks[0].attn
    d = attn.q.weight.shape[0]
    dh = d // heads
    wq, wk, wv = (getattr(attn, n).weight.detach().numpy() for n in "qkv")
    qk = max(np.linalg.norm(wq[h * dh : (h + 1) * dh].T @ wk[h * dh : (h + 1) * dh]) for h in range(heads))
    v = max(np.linalg.norm(wv[h * dh : (h + 1) * dh]) for h in range(heads))
    w = np.linalg.norm(m64.readout.weight.detach().numpy())
    b_x = math.sqrt(d)
    return margin, margin / (w * v * b_x * (1 + qk * b_x**2 / math.sqrt(dh)))


@pytest.mark.parametrize("bound", [1.0, None])
@pytest.mark.parametrize("stop", [dict(), dict(stop="margin", margin_target=0.03), dict(stop="budget", max_epochs=150)])
def test_a_trial_trained_alone_records_the_margin_its_weights_give(bound, stop):
    torch.set_num_threads(1)
    c = BooleanTrialConfig(**{**THEORY, "max_epochs": 600, **stop}, seed=3, norm_bound=bound)
    batch, ok, _ = tasks.sample_training_sets(c.task, c.T, c.s, c.m, [c.seed])
    row: dict = {}
    trial = _fit(c, row, batch.x[0], batch.y[0], batch.support[0], 0, CPU)
    margin, normalised = _naive(trial.model, batch.x[0], batch.y[0], c.heads)
    assert row["status"] == "done"
    assert math.isclose(row["margin"], margin, rel_tol=1e-4, abs_tol=1e-5)
    assert math.isclose(row["margin_normalised"], normalised, rel_tol=1e-4, abs_tol=1e-7)
    assert row["input_norm"] == pytest.approx(math.sqrt(c.d), rel=1e-6)
    if c.stop == "margin":  # converged: it stopped at the target, fitting every sample
        assert row["converged"] == (row["epochs"] < c.max_epochs)
        assert row["converged"] == (bound is not None)  # unbounded, the norms outgrow the margin
        if row["converged"]:
            assert row["train_acc"] == 1.0 and row["margin_normalised"] >= 0.03
    if c.stop == "budget":
        assert row["epochs"] == 150


def test_a_stacked_pack_records_each_trial_s_margin_from_its_own_weights():
    torch.set_num_threads(1)
    configs = [
        BooleanTrialConfig(**{**THEORY, "model": "transformer", "layers": 2, "max_epochs": 200}, seed=i, norm_bound=1.0)
        for i in range(3)
    ]
    batch, ok, _ = tasks.sample_training_sets("and", 24, 3, 48, [c.seed for c in configs])
    models = [_model(c, CPU) for c in configs]
    names = {k for k, _ in models[0].named_parameters() if trained(configs[0], k)}
    ends = fit_stacked(configs, models, names, batch.x, batch.y, eval_chunk(configs[0]), CPU)
    with torch.no_grad():
        for model, end in zip(models, ends, strict=True):
            every = dict(model.named_parameters())
            for k, v in end["params"].items():
                every[k].copy_(v)
    got = score_stacked(configs, models, names, batch.x, batch.y, batch.support, eval_chunk(configs[0]), CPU)
    for j, c in enumerate(configs):
        with torch.no_grad():
            logits = copy.deepcopy(models[j]).double().forward_general(batch.x[j]).numpy()
        want = float(np.min((2 * batch.y[j].double().numpy() - 1) * logits))
        assert math.isclose(got[j][4], want, rel_tol=1e-4, abs_tol=1e-5)
        row: dict = {}
        params = {k: v for k, v in models[j].named_parameters() if trained(c, k)}
        fill_row(c, params, row, batch.support[j], 0, ends[j]["epochs"], ends[j]["converged"], None, got[j])
        # Two layers: the largest ||W_QK||, ||W_V|| over layers and heads enter C.
        assert row["margin"] == got[j][4] and row["margin_normalised"] is not None


def test_the_margin_rule_needs_its_target_and_a_transformer():
    with pytest.raises(ValueError, match="margin_target"):
        BooleanTrialConfig(**THEORY, seed=0, stop="margin")
    with pytest.raises(ValueError, match="margin_target"):
        BooleanTrialConfig(**THEORY, seed=0, margin_target=0.1)
    with pytest.raises(ValueError, match="stop"):
        BooleanTrialConfig(**THEORY, seed=0, stop="sometimes")
    mlp = {k: v for k, v in THEORY.items() if k not in ("positions", "ln_affine", "heads")}
    with pytest.raises(ValueError, match="model 'transformer'"):
        BooleanTrialConfig(**mlp, model="mlp", seed=0, stop="margin", margin_target=0.1)


def test_an_mlp_row_has_a_margin_and_no_normalised_one():
    from attnsweep.workers.train_boolean import train_pack

    mlp = {k: v for k, v in THEORY.items() if k not in ("positions", "ln_affine", "heads")}
    row = train_pack([BooleanTrialConfig(**mlp, model="mlp", mlp_width=32, seed=1, max_epochs=50)], device="cpu")[0]
    assert row["status"] == "done" and row["margin"] is not None
    assert row["margin_normalised"] is None and row["input_norm"] is None
