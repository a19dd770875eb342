"""Tests of the pack training loop (workers.train_boolean.train_pack), on CPU with tiny settings."""

from __future__ import annotations

import math

import pytest

from attnsweep import tasks
from attnsweep.workers import BooleanTrialConfig, train_pack
from attnsweep.workers import train_boolean as train_module

BASE = dict(task="and", T=8, s=1, m=64, heads=4, lr=3e-3, max_epochs=200, n_test=500)
SEEDS = [0, 1, 2]


def cfg(**kw) -> BooleanTrialConfig:
    return BooleanTrialConfig(**{**BASE, **kw})


@pytest.fixture(scope="module")
def pack_rows():
    return train_pack([cfg(seed=s) for s in SEEDS], device="cpu")


def test_pack_trains_easy_task(pack_rows):
    assert len(pack_rows) == 3
    for seed, row in zip(SEEDS, pack_rows, strict=True):
        assert row["status"] == "done"
        assert row["error_type"] is None and row["error"] is None
        assert row["test_acc"] >= 0.95  # s = 1 AND on 8 bits with 64 samples is easy
        assert row["converged"] is True
        assert row["train_acc"] == 1.0  # converged means it fit the training set
        assert 0 < row["epochs"] < 200
        assert row["diverged_epoch"] is None
        assert row["support"] == tasks.draw_support("and", 8, 1, seed).tolist()
        assert row["redraws"] == 0
        assert row["pack_size"] == 3 and row["device"] == "cpu"
        assert row["norm_hidden"] is None  # a transformer has no hidden MLP matrices
        for k in ("train_loss", "test_loss", "norm_qk", "norm_v", "norm_readout", "wall_s"):
            assert isinstance(row[k], float) and math.isfinite(row[k]), k


def test_packed_equals_alone(pack_rows):
    for seed, packed in zip(SEEDS, pack_rows, strict=True):
        (alone,) = train_pack([cfg(seed=seed)], device="cpu")
        assert alone["status"] == "done" and alone["pack_size"] == 1
        assert alone["epochs"] == packed["epochs"]
        assert alone["converged"] == packed["converged"]
        assert alone["support"] == packed["support"]
        for k in ("test_acc", "train_acc", "train_loss", "test_loss"):
            assert alone[k] == pytest.approx(packed[k], abs=1e-4), k


@pytest.mark.parametrize("batch_size", [None, 16])
def test_trials_that_finish_early_leave_the_pack_without_changing_the_others(batch_size):
    # Different seeds and norm bounds fit their training sets after different numbers of
    # epochs; each trial's result must equal its result alone.
    configs = [
        cfg(seed=s, norm_bound=b, batch_size=batch_size, max_epochs=150)
        for s, b in [(0, None), (1, 2.0), (2, None), (3, 0.7)]
    ]
    rows = train_pack(configs, device="cpu")
    assert len({r["epochs"] for r in rows}) > 1
    for c, packed in zip(configs, rows, strict=True):
        (alone,) = train_pack([c], device="cpu")
        assert (alone["status"], alone["epochs"], alone["converged"]) == (
            packed["status"],
            packed["epochs"],
            packed["converged"],
        )
        for k in ("test_acc", "train_acc", "train_loss", "test_loss", "norm_qk", "norm_v"):
            assert alone[k] == pytest.approx(packed[k], abs=1e-4), k


def test_raise_fault_fails_only_its_trial(pack_rows):
    rows = train_pack([cfg(seed=0), cfg(seed=1, fault="raise"), cfg(seed=2)], device="cpu")
    assert [r["status"] for r in rows] == ["done", "failed", "done"]
    assert rows[1]["error_type"] == "TrialFault"
    assert "fault" in rows[1]["error"]
    assert rows[1]["test_acc"] is None and rows[1]["epochs"] is None
    # The other trials are exactly what they were in the clean pack.
    for j in (0, 2):
        assert rows[j]["epochs"] == pack_rows[j]["epochs"]
        assert rows[j]["test_acc"] == pytest.approx(pack_rows[j]["test_acc"], abs=1e-4)
        assert rows[j]["train_loss"] == pytest.approx(pack_rows[j]["train_loss"], abs=1e-4)


def test_a_pack_whose_every_trial_diverges_ends_with_diverged_rows():
    rows = train_pack([cfg(seed=s, fault="nan") for s in (0, 1)], device="cpu")
    assert [(r["status"], r["diverged_epoch"]) for r in rows] == [("diverged", 0), ("diverged", 0)]


def test_nan_fault_diverges_only_its_trial(pack_rows):
    rows = train_pack([cfg(seed=0), cfg(seed=1), cfg(seed=2, fault="nan")], device="cpu")
    assert [r["status"] for r in rows] == ["done", "done", "diverged"]
    d = rows[2]["diverged_epoch"]
    assert isinstance(d, int) and 0 <= d < 200
    assert rows[2]["converged"] is False
    for j in (0, 1):
        assert rows[j]["diverged_epoch"] is None
        assert rows[j]["epochs"] == pack_rows[j]["epochs"]
        assert rows[j]["test_acc"] == pytest.approx(pack_rows[j]["test_acc"], abs=1e-4)
        assert rows[j]["train_loss"] == pytest.approx(pack_rows[j]["train_loss"], abs=1e-4)


def test_mismatched_shape_keys_raise():
    with pytest.raises(ValueError):
        train_pack([cfg(seed=0), cfg(seed=1, T=9)], device="cpu")
    with pytest.raises(ValueError):
        train_pack([cfg(seed=0), cfg(seed=1, lr=1e-2)], device="cpu")


def test_empty_pack():
    assert train_pack([], device="cpu") == []


def test_failed_draw_is_a_failed_row():
    # Parity, s = 2, m = 1, T = 64 can never be drawn unambiguously (see test_boolean).
    (row,) = train_pack(
        [BooleanTrialConfig(task="parity", T=64, s=2, m=1, seed=0, max_redraws=1, max_epochs=2, n_test=100)],
        device="cpu",
    )
    assert row["status"] == "failed"
    assert row["error_type"] == "AmbiguousTrainingSetError"


@pytest.mark.parametrize("kind", ["frobenius", "spectral", "l21"])
def test_norm_bound_is_respected(kind):
    B = 0.5
    rows = train_pack(
        [
            cfg(seed=0, norm_bound=B, norm_kind=kind, max_epochs=15),
            cfg(seed=1, norm_kind=kind, max_epochs=15),
        ],
        device="cpu",
    )
    bounded = rows[0]
    assert bounded["status"] == "done"
    for k in ("norm_qk", "norm_v", "norm_readout"):
        assert bounded[k] is not None and bounded[k] <= B * (1 + 1e-5), k
    assert rows[1]["status"] == "done"


def test_long_context_uses_chunked_evaluation():
    c = BooleanTrialConfig(task="and", T=2048, s=1, m=16, max_epochs=2, n_test=20_000, seed=0)
    # A one-layer test sample holds its one-hot, 2 (T+1) floats, and its bits: about 20 kB,
    # so the 256 MiB budget holds ~13000 samples: the 20000 come in two chunks.
    assert train_module.eval_chunk(c) < c.n_test
    (row,) = train_pack([c], device="cpu")
    assert row["status"] == "done"
    assert 0.0 <= row["test_acc"] <= 1.0
    assert row["epochs"] <= 2


def test_evaluation_does_not_depend_on_chunk_size(monkeypatch):
    c = cfg(seed=0, max_epochs=5, n_test=300)
    (whole,) = train_pack([c], device="cpu")
    # A budget that fits a handful of samples per chunk.
    per_sample = 4 * (2 * (c.T + 1) + 16 * c.d) + 2 * (c.T + 1)  # one-layer matmul path, see eval_chunk
    monkeypatch.setattr(train_module, "EVAL_BUDGET_BYTES", per_sample * 7)
    assert train_module.eval_chunk(c) == 7
    (chunked,) = train_pack([c], device="cpu")
    assert chunked["test_acc"] == pytest.approx(whole["test_acc"], abs=1e-9)
    assert chunked["test_loss"] == pytest.approx(whole["test_loss"], rel=1e-5)


def test_bfloat16_mixed_precision_trains_and_differs_from_float32(pack_rows):
    rows = train_pack([cfg(seed=s, precision="bfloat16") for s in SEEDS], device="cpu")
    for r32, r16 in zip(pack_rows, rows, strict=True):
        assert r16["status"] == "done" and r16["test_acc"] >= 0.95
        # Same data and init; only the training arithmetic differs, so the losses are close
        # but not bit-equal (autocast was really on).
        assert r16["support"] == r32["support"]
        assert r16["train_loss"] == pytest.approx(r32["train_loss"], rel=0.5, abs=0.02)
    assert any(r16["train_loss"] != r32["train_loss"] for r32, r16 in zip(pack_rows, rows, strict=True))


@pytest.mark.parametrize(
    "value, bad",
    [
        (0.5, False),
        (2.0, True),
        (math.inf, True),
        (-math.inf, True),
        (math.nan, True),
        (-2.0, True),
    ],
)
def test_exploded_weights_are_flagged(value, bad):
    import torch

    from attnsweep.workers.pack import EXPLODED_WEIGHT, exploded

    params = {"w": torch.zeros(3, 2), "b": torch.ones(5)}
    params["b"][4] = value * EXPLODED_WEIGHT if math.isfinite(value) else value
    assert exploded(params.values()) is bad


def test_scores_too_wide_for_float32_take_the_hand_written_step_in_float64(monkeypatch):
    """A score range between the float32 and float64 limits of the matmul form (60 and 489)
    trains on the hand-written step in float64, not on the table path: its gradients are the
    float64 autograd gradients of the model's general forward, rounded to float32, and the
    scorer gives that forward's logits."""
    import torch

    from attnsweep.workers import one_layer
    from attnsweep.workers.models import CLSTransformer, score_range_safe

    c = cfg(T=64, s=3, m=40, d=16, seed=5)
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2, (c.m, c.T), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 2, (c.m,), generator=g).float()
    trial = train_module._Trial(c, bits, y, torch.device("cpu"))
    with torch.no_grad():  # query and key weights scaled until the scores spread past float32's limit
        trial.model.blocks[0].attn.q.weight.mul_(15.0)
        trial.model.blocks[0].attn.k.weight.mul_(15.0)
    with torch.no_grad():
        t = one_layer.tables(trial.tensors, c.heads)
    assert score_range_safe(torch.float32) < t.score_range <= score_range_safe(torch.float64)

    def table_path(*_a, **_k):
        raise AssertionError("the table path was taken")

    monkeypatch.setattr(CLSTransformer, "forward_table", table_path)
    reference = CLSTransformer(c.T, c.d, 1, c.heads).double()
    reference.load_state_dict({k: v.double() for k, v in trial.model.state_dict().items()})
    logits = reference.forward_general(bits)
    torch.nn.functional.binary_cross_entropy_with_logits(logits, y.double()).backward()
    want = {n: p.grad for n, p in reference.named_parameters()}

    monkeypatch.setattr(trial.opt, "step", lambda: None)  # keep the weights the reference saw
    assert trial.step(trial.x, trial.y) == "stepped"
    for name, p in trial.params.items():
        assert p.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, want[name].float(), rtol=1e-5, atol=1e-7, msg=name)
    torch.testing.assert_close(trial.scorer()(trial.x).double(), logits.detach(), rtol=1e-5, atol=1e-5)
