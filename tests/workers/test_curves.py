"""Learning curves (workers/curves.py): which epochs a curve keeps, that keeping them changes
no trial's row, that a curve's last point is the row's training score where both are of the
same epoch, and that a trial's curve, like its row, is its own in any pack (bit for bit on
the CPU with one thread), on every training path of both experiments."""

from __future__ import annotations

import pytest
import torch

from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig, train_pack
from attnsweep.workers.curves import CurvePlan
from attnsweep.workers.train_symmetry import train_symmetry_pack

PACK = ("wall_s", "pack_size", "worker_host")
"""Fields that describe the pack, not the trial."""

BOOLEAN = {
    "one-layer stacked (hand-written step)": dict(model="transformer", d=16, heads=2),
    "one-layer alone (T > 256: hand-written step one by one)": dict(model="transformer", d=16, heads=2, T=300),
    "two layers, stacked": dict(model="transformer", d=16, heads=2, layers=2),
    "MLP, minibatches, stacked": dict(model="mlp", mlp_width=32, batch_size=8),
    "one-layer, minibatches, alone": dict(model="transformer", d=16, heads=2, T=300, batch_size=8),
}


def _boolean(seed: int, **settings) -> BooleanTrialConfig:
    base = dict(task="and", T=16, s=2, m=24, n_test=100, lr=1e-2, max_epochs=25, seed=seed)
    return BooleanTrialConfig(**{**base, **settings})


def _symmetry(seed: int, **settings) -> SymmetryTrialConfig:
    base = dict(teacher="equivariant", n=4, k=2, d=4, m=8, width=8, heads=2, mlp_width=16, max_epochs=15)
    return SymmetryTrialConfig(**{**base, "n_test": 16, "n_q": 2, "seed": seed, **settings})


def _expected_epochs(measured: int, stride: int) -> list[int]:
    """Epochs 0 .. measured - 1 a loop measured: every stride-th, and the last."""
    return sorted({e for e in range(measured) if e % stride == 0} | {measured - 1})


def _same_row(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key not in PACK:
            assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), (key, a[key], b[key])


def test_the_stride_widens_so_that_max_points_holds_with_the_last_epoch():
    for every, points, max_epochs in [(1, 200, 1000), (5, 6, 40), (3, 2, 10), (7, 100, 20), (1, 2, 1)]:
        stride = CurvePlan(every, points).stride(max_epochs)
        assert stride >= every
        kept = _expected_epochs(max_epochs, stride)
        assert len(kept) <= points
        if stride > every:  # widened no more than needed
            assert len(_expected_epochs(max_epochs, stride - 1)) > points
    assert CurvePlan(5, 6).stride(40) == 8 and CurvePlan(1, 200).stride(100) == 1
    with pytest.raises(ValueError, match="every"):
        CurvePlan.from_wire({"every": 0, "max_points": 10})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOOLEAN))
def test_boolean_curves_keep_every_kth_epoch_and_the_last_and_leave_the_rows_alone(name):
    torch.set_num_threads(1)
    configs = [_boolean(seed, **BOOLEAN[name]) for seed in range(4)]
    configs.append(_boolean(5, fault="nan", **BOOLEAN[name]))  # diverges after its first epoch
    plan = CurvePlan(every=4, max_points=5)
    stride = plan.stride(25)
    assert stride == 6
    off = train_pack(configs, device="cpu")
    on = train_pack(configs, device="cpu", curves=plan)
    for config, a, b in zip(configs, off, on, strict=True):
        curve = b.pop("curve")
        _same_row(a, b)
        assert "curve" not in a
        # A loop measures the training set before each epoch's step: epochs 0 .. epochs when the
        # trial fit or diverged at a check, 0 .. epochs - 1 when it ran out of epochs or its
        # weights exploded after a step.
        if b["converged"]:
            measured = b["epochs"] + 1
        elif b["status"] == "diverged":
            measured = b["diverged_epoch"] + 1
        else:
            measured = b["epochs"]
        assert curve["epoch"] == _expected_epochs(measured, stride), (config.seed, b["epochs"], b["status"])
        assert len(curve["epoch"]) <= plan.max_points
        assert curve["train_error"] == [None] * len(curve["epoch"])
        if b["converged"]:  # the last point is of the weights the row scores: the same numbers
            assert curve["epoch"][-1] == b["epochs"]
            assert curve["train_acc"][-1] == b["train_acc"] == 1.0
            # the loop's logits come from the training step's forward, the row's from the
            # scorer's (workers/train_boolean.py, score): the same function, not the same kernels
            assert curve["train_loss"][-1] == pytest.approx(b["train_loss"], rel=1e-5)
        if b["status"] == "diverged":
            assert config.fault == "nan" and curve["epoch"][-1] == b["diverged_epoch"]


@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("student", [dict(model="transformer", equivariance="none"), dict(model="mlp")])
def test_symmetry_curves_hold_the_loss_and_relative_error_and_leave_the_rows_alone(student, stacked):
    torch.set_num_threads(1)
    configs = [_symmetry(seed, **student) for seed in range(3)]
    plan = CurvePlan(every=2, max_points=100)
    off = train_symmetry_pack(configs, device="cpu", stacked=stacked)
    on = train_symmetry_pack(configs, device="cpu", stacked=stacked, curves=plan)
    for a, b in zip(off, on, strict=True):
        curve = b.pop("curve")
        _same_row(a, b)
        measured = b["epochs"] + 1 if b["converged"] or b["status"] == "diverged" else b["epochs"]
        assert curve["epoch"] == _expected_epochs(measured, 2)
        assert curve["train_acc"] == [None] * len(curve["epoch"])
        assert all(v is not None and v >= 0 for v in curve["train_error"] + curve["train_loss"])
        assert curve["train_error"][-1] < curve["train_error"][0]  # it trains


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOOLEAN))
def test_a_trials_boolean_curve_is_its_own_in_any_pack(name):
    # As tests/workers/test_pack_invariance.py for rows: alone, and in packs of other sizes and
    # packmates (stacked where the settings stack, one by one where not), the same points.
    torch.set_num_threads(1)
    configs = [_boolean(seed, **BOOLEAN[name]) for seed in range(40)]
    plan = CurvePlan(every=3, max_points=50)
    alone = train_pack([configs[3]], device="cpu", curves=plan)[0]
    for pack, slot in (
        ([configs[3], configs[9]], 0),
        (configs[20:27] + [configs[3]], 7),
        (configs[:3] + configs[4:] + [configs[3]], 39),
    ):
        row = train_pack(pack, device="cpu", curves=plan)[slot]
        assert row["curve"] == alone["curve"]
        _same_row({k: v for k, v in alone.items() if k != "curve"}, {k: v for k, v in row.items() if k != "curve"})


@pytest.mark.parametrize("student", [dict(model="transformer", equivariance="none"), dict(model="mlp")])
def test_a_trials_symmetry_curve_is_its_own_in_a_stacked_pack(student):
    torch.set_num_threads(1)
    configs = [_symmetry(seed, **student) for seed in range(20)]
    plan = CurvePlan(every=2, max_points=50)
    alone = train_symmetry_pack([configs[3]], device="cpu", stacked=True, curves=plan)[0]
    for pack, slot in (([configs[3], configs[9]], 0), (configs[:3] + configs[4:] + [configs[3]], 19)):
        assert train_symmetry_pack(pack, device="cpu", stacked=True, curves=plan)[slot]["curve"] == alone["curve"]
