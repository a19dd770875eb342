"""A stacked pack's trials are scored together (workers/stacked_boolean.py ``score_stacked``);
what each gets must be what scoring it alone measures: the per-trial scorer of
workers/train_boolean.py, the path that scored every trial before, is the reference."""

from __future__ import annotations

import math

import pytest
import torch

from attnsweep import tasks
from attnsweep.workers import BooleanTrialConfig, one_layer
from attnsweep.workers.stacked_boolean import score_stacked
from attnsweep.workers.train_boolean import _evaluate, _model, _Trial, eval_chunk, trained, trial_input

CPU = torch.device("cpu")
MODELS = {
    "one layer, hand-written step": dict(model="transformer", d=16, heads=2),
    "one layer, bfloat16 (table form)": dict(model="transformer", d=16, heads=2, precision="bfloat16"),
    "two layers (general forward)": dict(model="transformer", d=16, heads=2, layers=2),
    "MLP": dict(model="mlp", mlp_width=32),
}


def _alone(c: BooleanTrialConfig, model, x, y, support) -> tuple[float, float, float, float, float]:
    trial = _Trial(c, x, y, CPU, model)
    chunk = eval_chunk(c)
    train_loss, train_acc, logits = _evaluate(trial, [(trial.x, y)], chunk, keep=True)
    test = tasks.test_chunks(c.task, c.T, c.s, [c.seed], support[None], c.n_test, chunk, "cpu")
    test_loss, test_acc, _ = _evaluate(trial, ((trial_input(trial, tx[0]), ty[0]) for tx, ty in test), None)
    return train_loss, train_acc, test_loss, test_acc, float(((2 * y.double() - 1) * logits.double()).min())


def _setup(settings: dict, seeds: range, widen: float = 1.0):
    configs = [BooleanTrialConfig(task="and", T=24, s=3, m=40, seed=i, n_test=700, **settings) for i in seeds]
    batch, ok, _ = tasks.sample_training_sets("and", 24, 3, 40, list(seeds))
    assert ok == list(range(len(configs)))
    models = [_model(c, CPU) for c in configs]
    if widen != 1.0:  # scores spread past the float32 form's range (workers/models.py)
        with torch.no_grad():
            for name, p in models[0].named_parameters():
                if name.endswith(("attn.q.weight", "attn.k.weight")):
                    p.mul_(widen)
    names = {k for k, _ in models[0].named_parameters() if trained(configs[0], k)}
    return configs, batch, models, names


@pytest.mark.parametrize("name", MODELS)
def test_each_trial_scored_in_a_pack_gets_what_scoring_it_alone_measures(name):
    torch.set_num_threads(1)
    configs, batch, models, names = _setup(MODELS[name], range(3))
    got = score_stacked(configs, models, names, batch.x, batch.y, batch.support, eval_chunk(configs[0]), CPU)
    for j, c in enumerate(configs):
        want = _alone(c, models[j], batch.x[j], batch.y[j], batch.support[j])
        train_loss, train_acc, test_loss, test_acc, margin = got[j]
        # The accuracies count samples (exact unless a logit sits on 0); the losses are means of
        # the same function computed by another kernel, so equal to float32 round-off.
        assert (train_acc, test_acc) == (want[1], want[3])
        assert math.isclose(train_loss, want[0], rel_tol=1e-5)
        assert math.isclose(test_loss, want[2], rel_tol=1e-5)
        assert math.isclose(margin, want[4], rel_tol=1e-4, abs_tol=1e-6)


def test_a_trial_whose_scores_pass_the_float32_range_is_scored_in_float64_as_alone():
    torch.set_num_threads(1)
    configs, batch, models, names = _setup(MODELS["one layer, hand-written step"], range(2), widen=40.0)
    trial = _Trial(configs[0], batch.x[0], batch.y[0], CPU, models[0])
    with torch.no_grad():
        wide = one_layer.tables(trial.tensors, configs[0].heads).score_range
    assert 60 < wide < 489, wide  # the float64 form's range, not the float32 one's
    got = score_stacked(configs, models, names, batch.x, batch.y, batch.support, eval_chunk(configs[0]), CPU)
    want = _alone(configs[0], models[0], batch.x[0], batch.y[0], batch.support[0])
    assert (got[0][1], got[0][3]) == (want[1], want[3])
    assert math.isclose(got[0][0], want[0], rel_tol=1e-5) and math.isclose(got[0][2], want[2], rel_tol=1e-5)
