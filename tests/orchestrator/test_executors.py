"""Packs on a real local Ray: long-lived actors, one task per pack, fractional GPUs.

The local Ray advertises one (fake) GPU, so fractional-GPU scheduling runs for real on a
CPU machine; workers then find no CUDA device and train on the CPU.
"""

from __future__ import annotations

import io

import polars as pl
import pytest
import ray
from rich.console import Console

from attnsweep.orchestrator import RayExecutor, RunError, parse_spec, run_sweep
from attnsweep.results import ResultsStore
from attnsweep.workers import train_pack

SPEC = """
name: ex
seeds: 4
grid: {T: [8, 16], m: [16, 32]}
fixed: {task: and, s: 2, d: 8, heads: 2, max_epochs: 20, n_test: 100}
execution: {pack_size: 2, flush_rows: 5}
"""


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def _run(spec_text, tmp_path):
    spec = parse_spec(spec_text)
    executor = RayExecutor(spec.execution, None, spec.resources)
    store = ResultsStore(tmp_path / "store")
    try:
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
        infos = [ray.get(a.info.remote()) for a in executor._actors]
        described = executor.describe()
    finally:
        executor.shutdown()
    return spec, summary, store.scan_trials().collect(), infos, described


def _alone(spec, rows):
    """Each trial trained alone in this process: what every backend must reproduce."""
    out = {}
    for c in spec.trials():
        (row,) = train_pack([c], device="cpu")
        out[(c.T, c.m, c.seed)] = row
    return out


@pytest.mark.slow
def test_actors_stay_warm_and_match_training_alone(local_ray, tmp_path):
    spec, summary, rows, infos, described = _run(SPEC, tmp_path)
    assert summary.counts == {"done": 16} and rows.height == 16 and rows["trial_id"].n_unique() == 16
    assert "2 actors" in described
    # Two actors trained all 8 packs, each in one process that lived through the sweep.
    assert len(infos) == 2 and len({i["pid"] for i in infos}) == 2
    assert sum(i["packs"] for i in infos) == 8 and all(i["packs"] >= 1 for i in infos)
    assert all(i["threads"] == 1 for i in infos)
    alone = _alone(spec, rows)
    for r in rows.iter_rows(named=True):
        a = alone[(r["T"], r["m"], r["seed"])]
        assert r["epochs"] == a["epochs"] and r["support"] == a["support"]
        assert r["test_acc"] == pytest.approx(a["test_acc"], abs=1e-6)
        assert r["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4, abs=1e-6)


@pytest.mark.slow
def test_one_task_per_pack_gives_the_same_rows(local_ray, tmp_path):
    _, _, actors, _, _ = _run(SPEC, tmp_path / "a")
    _, summary, tasks_rows, infos, described = _run(
        SPEC.replace("flush_rows: 5", "flush_rows: 5, workers: tasks"), tmp_path / "t"
    )
    assert infos == [] and "tasks" in described and summary.counts == {"done": 16}
    cols = ["trial_id", "status", "epochs", "test_acc"]
    assert tasks_rows.select(cols).sort("trial_id").equals(actors.select(cols).sort("trial_id"))


@pytest.mark.slow
def test_fractional_gpus_put_four_workers_on_one_gpu(local_ray, tmp_path):
    spec_text = SPEC + "resources: {gpus_per_worker: 0.25, cpus_per_worker: 0.5}\n"
    spec = parse_spec(spec_text)
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        infos = [ray.get(a.info.remote()) for a in executor._actors]
        assert len(infos) == 4  # min(2 CPUs / 0.5, 1 GPU / 0.25)
        assert ray.available_resources().get("GPU", 0) == 0  # the four quarters hold the GPU
        ids = ray.get([a.__ray_call__.remote(lambda self: ray.get_gpu_ids()) for a in executor._actors])
        assert all(len(g) == 1 for g in ids)  # each worker sees the shared GPU
        store = ResultsStore(tmp_path / "store")
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
    finally:
        executor.shutdown()
    assert summary.counts == {"done": 16}
    assert store.scan_trials().select(pl.col("device").unique()).collect()["device"].to_list() == ["cpu"]


@pytest.mark.slow
def test_more_workers_than_the_local_ray_holds_is_refused(local_ray):
    spec = parse_spec(SPEC + "resources: {num_workers: 5}\n")
    with pytest.raises(RunError, match="resources.num_workers"):
        RayExecutor(spec.execution, None, spec.resources)
    assert ray.is_initialized()  # the caller's Ray is left running
