"""A stacked pack's epochs read nothing back to the host (workers/slot_book.py): every
tensor-to-host read (``.item``, ``.tolist``, ``.cpu``, ``bool`` of a tensor...) is counted
through a torch function mode, between one optimiser step and the next, and only the gaps where
the loop reads its book (every ``every`` epochs) may hold any. The same counter finds the reads
of a loop that reads every epoch (``every=1``), so it is not blind. And a trial's results are
the same bit for bit whatever the read interval, the one-layer step's float32 range exceeded
mid-window included (the window is run again, reading every epoch). The same holds for a pack of
symmetry students (workers/stacked_symmetry.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.overrides import TorchFunctionMode

from attnsweep import tasks
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers import slot_book as slot_book_module
from attnsweep.workers.curves import Curve
from attnsweep.workers.stacked_boolean import fit_stacked
from attnsweep.workers.train_boolean import _model, eval_chunk, trained

CPU = torch.device("cpu")

READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__"}
READS |= {"nonzero", "argwhere", "masked_select", "unique", "nonzero_static"}  # shapes set by values


def _mask_index(args) -> bool:
    """Whether a ``__getitem__``/``__setitem__`` indexes by a bool tensor (its shape depends on
    the values: on a GPU, a read)."""
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class StepGaps(TorchFunctionMode):
    """Counts host reads between consecutive fused AdamW steps (one per full-batch epoch, one
    per minibatch): ``gaps[i]`` the reads after step i (``gaps[0]``: after step 0 ...)."""

    def __init__(self):
        super().__init__()
        self.gaps = [0]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("_fused_adamw_", "_fused_adamw"):
            self.gaps.append(0)
        elif name in READS or (name in ("__getitem__", "__setitem__") and _mask_index(args)):
            self.gaps[-1] += 1
        return func(*args, **(kwargs or {}))


MODELS = {
    "one layer, hand-written step": dict(),
    "two layers, general forward": dict(layers=2),
    "MLP": dict(model="mlp", lr=1e-2),
    "one layer, minibatches": dict(batch_size=12),
}


def _pack(settings: dict, n: int, widen: float = 1.0):
    configs = [
        BooleanTrialConfig(**{**dict(task="and", T=24, s=3, m=48, n_test=100), **settings}, seed=i) for i in range(n)
    ]
    c = configs[0]
    batch, ok, _ = tasks.sample_training_sets(c.task, c.T, c.s, c.m, [x.seed for x in configs])
    assert ok == list(range(n))
    models = [_model(x, CPU) for x in configs]
    if widen != 1.0:  # the first trial's scores spread past the float32 form's range (workers/models.py)
        with torch.no_grad():
            for name, p in models[0].named_parameters():
                if name.endswith(("attn.q.weight", "attn.k.weight")):
                    p.mul_(widen)
    names = {k for k, _ in models[0].named_parameters() if trained(c, k)}
    return configs, batch, models, names


def _gaps(settings: dict, every: int, epochs: int) -> tuple[list[int], int]:
    configs, batch, models, names = _pack({**settings, "stop": "budget", "max_epochs": epochs}, 3)
    curves = [Curve(1) for _ in configs]
    mode = StepGaps()
    torch.set_num_threads(1)
    with mode:
        fit_stacked(configs, models, names, batch.x, batch.y, eval_chunk(configs[0]), CPU, curves, every=every)
    c = configs[0]
    steps_per_epoch = -(-c.m // c.batch_size) if c.batch_size and c.batch_size < c.m else 1
    return mode.gaps[1 : epochs * steps_per_epoch], steps_per_epoch


@pytest.mark.parametrize("name", MODELS)
def test_no_epoch_reads_the_device_between_two_reads_of_the_book(name):
    every, epochs = 8, 24
    gaps, steps = _gaps(MODELS[name], every, epochs)
    # Gap i follows step i + 1; the book is read after epochs 8 and 16, between their last step
    # and the next epoch's first.
    reading = {e * steps - 1 for e in range(every, epochs, every)}
    assert [i for i, n in enumerate(gaps) if n] == sorted(reading)


def test_the_counter_finds_a_loop_that_reads_every_epoch():
    gaps, _ = _gaps(MODELS["one layer, hand-written step"], 1, 12)
    assert all(n > 0 for n in gaps) and len(gaps) == 11


def _run(settings: dict, n: int, every: int, widen: float = 1.0):
    configs, batch, models, names = _pack(settings, n, widen)
    curves = [Curve(1) for _ in configs]
    torch.set_num_threads(1)
    ends = fit_stacked(configs, models, names, batch.x, batch.y, eval_chunk(configs[0]), CPU, curves, every=every)
    return ends, [c.columns() for c in curves]


def _same(a: list[dict], b: list[dict]) -> bool:
    return all(
        (x["epochs"], x["converged"], x["diverged_epoch"]) == (y["epochs"], y["converged"], y["diverged_epoch"])
        and all(torch.equal(x["params"][k], y["params"][k]) for k in x["params"])
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize(
    "settings",
    [
        dict(norm_bound=1.0, lr=3e-3, max_epochs=150),
        dict(model="mlp", batch_size=16, max_epochs=40),
        dict(stop="margin", margin_target=0.03, norm_bound=1.0, lr=3e-3, max_epochs=200),
    ],
    ids=["bounded, 40 trials", "MLP minibatches, 40 trials", "margin stop"],
)
def test_a_trial_s_results_do_not_depend_on_the_read_interval(settings):
    n = 40 if "stop" not in settings else 5  # 40: past one lane group, so the pack compacts
    ends, curves = _run(settings, n, every=1)
    assert any(e["converged"] for e in ends) and len({e["epochs"] for e in ends}) > 1
    for every in (3, 8, 1000):
        got, got_curves = _run(settings, n, every)
        assert _same(ends, got) and curves == got_curves


def test_a_window_whose_step_left_the_float32_range_is_run_again_reading_every_epoch(monkeypatch):
    restored = []
    restore = slot_book_module.Snapshot.restore

    def spy(self, book, gens):
        restored.append(self.epoch)
        return restore(self, book, gens)

    monkeypatch.setattr(slot_book_module.Snapshot, "restore", spy)
    settings = dict(max_epochs=80, lr=3e-2)  # unbounded: some trials' scores outgrow float32's range
    ends, curves = _run(settings, 20, every=1)
    for every in (5, 8):
        restored.clear()
        got, got_curves = _run(settings, 20, every)
        assert len(restored) == 1 and restored[0] > 0 and restored[0] % every == 0  # mid-training
        assert _same(ends, got) and curves == got_curves


def _symmetry(settings: dict, n: int, every: int, mode: StepGaps | None = None):
    from attnsweep.workers import SymmetryTrialConfig
    from attnsweep.workers.stacked_symmetry import fit_stacked as fit_symmetry
    from attnsweep.workers.train_symmetry import FIT_ERROR, _student, sample_dataset

    base = dict(teacher="equivariant", n=4, k=2, d=4, m=4, width=8, heads=2, mlp_width=16, n_test=16, n_q=2, lr=1e-2)
    configs = [SymmetryTrialConfig(**{**base, **settings}, seed=i) for i in range(n)]
    data = [sample_dataset(c.teacher, c.n, c.k, c.d, c.m, c.seed, "train", device=CPU) for c in configs]
    X, K, Y = (torch.stack(t) for t in zip(*data, strict=True))
    curves = [Curve(1) for _ in configs]
    torch.set_num_threads(1)
    with mode if mode is not None else contextlib.nullcontext():
        ends = fit_symmetry(configs, [_student(c) for c in configs], X, K, Y, FIT_ERROR, CPU, curves, every=every)
    return ends, [c.columns() for c in curves]


@pytest.mark.parametrize("equivariance", ["none", "augment"])
def test_a_symmetry_pack_reads_nothing_between_two_reads_of_its_book(equivariance):
    mode = StepGaps()
    _symmetry(dict(model="transformer", equivariance=equivariance, max_epochs=24), 3, 8, mode)
    assert [i for i, n in enumerate(mode.gaps[1:24]) if n] == [7, 15]


def test_a_symmetry_trial_s_results_do_not_depend_on_the_read_interval():
    settings = dict(model="mlp", equivariance="none", max_epochs=300)  # 40 trials: they fit and the pack compacts
    ends, curves = _symmetry(settings, 40, 1)
    assert sum(e["converged"] for e in ends) == 40 and len({e["epochs"] for e in ends}) > 1
    for every in (3, 8):
        got, got_curves = _symmetry(settings, 40, every)
        assert _same(ends, got) and curves == got_curves


def test_a_window_run_again_starts_from_the_projected_weights_and_skips_left_slots(monkeypatch):
    # A bounded pack whose NaN-faulted trial's scores leave every range: the watched trial gets
    # alone exactly what it gets beside it (a window run again restarts from the weights as the
    # norm ball left them, and a slot that already left sets no flag).
    from attnsweep.workers import train_pack

    restored = []
    restore = slot_book_module.Snapshot.restore
    monkeypatch.setattr(
        slot_book_module.Snapshot, "restore", lambda s, b, g: restored.append(s.epoch) or restore(s, b, g)
    )
    settings = dict(task="and", T=16, s=2, m=24, n_test=100, lr=1e-2, max_epochs=25, d=16, heads=2)
    settings |= dict(positions="fixed", ln_affine=False, norm_bound=1.0)
    configs = [BooleanTrialConfig(**settings, seed=i, fault="nan" if i == 5 else None) for i in range(8)]
    torch.set_num_threads(1)
    alone = train_pack([configs[3]], device="cpu")[0]
    pack = train_pack(configs, device="cpu")
    assert pack[5]["status"] == "diverged" and restored == []
    keys = ("train_loss", "test_loss", "margin", "epochs", "norm_qk", "norm_readout")
    assert [pack[3][k] for k in keys] == [alone[k] for k in keys]
