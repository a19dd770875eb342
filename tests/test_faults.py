"""Faults for real on local Ray: trials that raise, diverge or kill their worker; a worker
killed with SIGKILL; a node lost from a multi-node cluster; a driver killed with SIGKILL
and the run resumed; a truncated store file.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import threading
import time

import polars as pl
import pytest
import ray
from rich.console import Console

from attnsweep.orchestrator import RayExecutor, parse_spec, run_sweep
from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # sweeps on a real local Ray

ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
TINY = "fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 100, lr: 3e-3}\n"


def _cli(*args, cwd, **kw):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
        **kw,
    )


def _quiet():
    return Console(file=io.StringIO())


def test_raise_nan_and_exit_end_failed_diverged_lost_and_the_rest_completes(tmp_path):
    spec = parse_spec(
        "name: faults\nseeds: 2\ngrid: {T: [8], m: [32], fault: [null, raise, nan, exit]}\n"
        "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 100, lr: 3e-3}\n"
        "execution: {max_retries: 1, pack_size: 8}\n"
    )  # one pack: every trial shares it with the killers
    store = ResultsStore(tmp_path)
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        summary = run_sweep(spec, store, executor, console=_quiet())
    finally:
        executor.shutdown()
    rows = store.scan_trials().collect()
    assert rows.height == 8 and rows["trial_id"].n_unique() == 8
    by_fault = {f: rows.filter(pl.col("fault").eq_missing(f)) for f in (None, "raise", "nan", "exit")}
    assert by_fault[None]["status"].to_list() == ["done"] * 2 and by_fault[None]["test_acc"].is_not_null().all()
    assert by_fault["raise"]["status"].to_list() == ["failed"] * 2
    assert set(by_fault["raise"]["error_type"]) == {"TrialFault"}
    assert by_fault["nan"]["status"].to_list() == ["diverged"] * 2
    assert by_fault["nan"]["diverged_epoch"].to_list() == [0, 0]
    lost = by_fault["exit"]
    assert lost["status"].to_list() == ["lost"] * 2
    # Its pack was tried twice (1 + max_retries), then it alone twice more.
    assert lost["attempts"].to_list() == [4, 4]
    assert all("worker died" in e for e in lost["error"])
    # Pack-mates of the killers lost one pack's attempts, then finished alone.
    for f in (None, "raise", "nan"):
        assert by_fault[f]["attempts"].to_list() == [3, 3], f
    assert summary.counts == {"done": 2, "failed": 2, "diverged": 2, "lost": 2}
    record = store.read_run("faults", summary.run_id)
    assert (record["n_done"], record["n_failed"], record["n_diverged"], record["n_lost"]) == (
        2,
        2,
        2,
        2,
    )


SWEEP = "name: kills\nseeds: 4\ngrid: {T: [8, 16], m: [32, 64, 128]}\n" + TINY.replace("}", ", max_epochs: 300}")


def test_a_worker_killed_with_sigkill_mid_sweep_is_retried(tmp_path):
    spec = parse_spec(SWEEP + "execution: {pack_size: 2}\n")
    store = ResultsStore(tmp_path)
    executor = RayExecutor(spec.execution, None, spec.resources)
    killed = {}

    def kill_one():
        pid = ray.get(executor._actors[0].info.remote())["pid"]
        time.sleep(2.0)  # let it get into its packs
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        summary = run_sweep(spec, store, executor, console=_quiet())
        killer.join()
        new_pid = ray.get(executor._actors[0].info.remote())["pid"]
    finally:
        executor.shutdown()
    assert killed and new_pid != killed["pid"]  # it really died and came back
    rows = store.scan_trials().collect()
    assert rows.height == spec.n_trials() == 24 and rows["trial_id"].n_unique() == 24
    assert set(rows["status"]) == {"done"} and summary.status == "finished"


def test_losing_a_node_mid_sweep_finishes_on_the_others(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=1, include_dashboard=False))
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    spec = parse_spec(SWEEP + "execution: {pack_size: 2}\nresources: {num_workers: 2}\n")
    store = ResultsStore(tmp_path)
    try:
        executor = RayExecutor(spec.execution, None, spec.resources)
        where = ray.get(
            [a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in executor._actors]
        )
        victim = next(n for n in nodes if n.node_id in where)  # a worker node running a worker

        def remove():
            time.sleep(2.0)
            cluster.remove_node(victim)

        remover = threading.Thread(target=remove)
        remover.start()
        summary = run_sweep(spec, store, executor, console=_quiet())
        remover.join()
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert victim.node_id not in alive
    finally:
        ray.shutdown()
        cluster.shutdown()
    rows = store.scan_trials().collect()
    assert rows.height == 24 and rows["trial_id"].n_unique() == 24
    assert set(rows["status"]) == {"done"} and summary.status == "finished"


def test_driver_killed_with_sigkill_then_resumed_equals_an_uninterrupted_run(tmp_path):
    (tmp_path / "spec.yaml").write_text(SWEEP + "execution: {pack_size: 2, flush_rows: 2, flush_s: 0.1}\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            "spec.yaml",
            "--store",
            "cut",
            "--no-analyze",
        ],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    trials = tmp_path / "cut" / "trials"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(trials.rglob("*.parquet"))) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started, mid-sweep
    proc.wait()
    store = ResultsStore(tmp_path / "cut")
    partial = store.scan_trials().collect()
    assert 0 < partial.height < 24, "the kill should land mid-sweep"
    (run_id,) = partial["run_id"].unique().to_list()
    assert store.read_run("kills", run_id)["status"] == "running"  # it never got to record its end

    resumed = _cli("resume", run_id, "--store", "cut", "--no-analyze", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = _cli("run", "spec.yaml", "--store", "whole", "--no-analyze", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]

    cut = ResultsStore(tmp_path / "cut").scan_trials().collect()
    ref = ResultsStore(tmp_path / "whole").scan_trials().collect()
    assert cut.height == 24 and cut["trial_id"].n_unique() == 24  # exactly one row per trial
    cols = ["trial_id", "status", "epochs", "support"]
    assert cut.select(cols).sort("trial_id").equals(ref.select(cols).sort("trial_id"))
    both = cut.join(ref, on="trial_id", suffix="_ref")
    assert (both["test_acc"] - both["test_acc_ref"]).abs().max() < 1e-6
    assert (both["train_loss"] - both["train_loss_ref"]).abs().max() < 1e-5
    record = ResultsStore(tmp_path / "cut").read_run("kills", run_id)
    assert record["status"] == "finished" and record["n_done"] == 24
    assert [a["attempt"] for a in record["attempts"]] == [1, 2]
    assert record["attempts"][1]["n_skipped"] == partial.height
    killed = record["attempts"][0]
    assert killed["status"] == "died" and killed["n_run"] == partial.height  # the killed attempt, closed by resume


def test_a_truncated_file_is_reported_and_queries_still_run(tmp_path):
    (tmp_path / "spec.yaml").write_text(
        "name: trunc\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\n"
        + TINY.replace("}", ", max_epochs: 5}")
        + "execution: {pack_size: 1, flush_rows: 1}\n"
    )
    assert _cli("run", "spec.yaml", "--local", "--no-analyze", cwd=tmp_path).returncode == 0
    files = sorted((tmp_path / "results-store" / "trials").rglob("*.parquet"))
    assert len(files) == 4
    files[0].write_bytes(files[0].read_bytes()[:100])
    check = _cli("store", "check", cwd=tmp_path)
    assert check.returncode == 1 and "unreadable" in check.stdout and "quarantine" in check.stdout
    query = _cli("query", "SELECT count(*) AS n FROM trials", "--format", "csv", cwd=tmp_path)
    assert query.returncode == 0 and query.stdout.split() == ["n", "3"]


def test_the_embedded_ray_dying_under_a_sweep_fails_it_instead_of_hanging(tmp_path):
    from attnsweep.orchestrator import RunError

    # Trials stop when they fit their training set, so only a step too small to fit in any
    # number of epochs makes the sweep outlast the kill 2 s in on every machine (256 trials that
    # could fit finished first in CI): 24 trials of 5000 epochs each, none of which can stop early.
    spec = parse_spec(
        SWEEP.replace("lr: 3e-3", "lr: 1e-12").replace("max_epochs: 300", "max_epochs: 5000")
        + "execution: {pack_size: 1}\n"
    )
    assert spec.fixed["lr"] == 1e-12 and spec.fixed["max_epochs"] == 5000
    store = ResultsStore(tmp_path)
    executor = RayExecutor(spec.execution, None, spec.resources)
    node = ray._private.worker._global_node
    gcs = node.all_processes["gcs_server"][0].process

    def kill_gcs():
        time.sleep(2.0)
        gcs.kill()  # as `ray stop --force` or the OOM killer would

    killer = threading.Thread(target=kill_gcs)
    killer.start()
    t0 = time.time()
    try:
        with pytest.raises(RunError, match="the local Ray died"):
            run_sweep(spec, store, executor, console=_quiet())
    finally:
        killer.join()
        executor.shutdown()
    assert time.time() - t0 < 120
    (run_id,) = [p.name.removeprefix("run_id=") for p in (tmp_path / "runs" / "sweep=kills").iterdir()]
    assert store.read_run("kills", run_id)["status"] == "failed"


def test_a_run_whose_every_trial_is_lost_exits_1_even_without_analysis(tmp_path):
    # Cron and CI read the exit code: a run in which no trial trained is a failed run.
    spec = tmp_path / "lost.yaml"
    spec.write_text(
        "name: all-lost\nseeds: 1\ngrid: {T: [8], m: [16], fault: [exit]}\n"
        "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 5}\n"
        "execution: {max_retries: 0}\nresources: {num_workers: 1}\n"
    )
    out = _cli("run", str(spec), "--store", str(tmp_path / "store"), "--no-analyze", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "every trial was lost" in out.stderr and "Traceback" not in out.stderr
    rows = ResultsStore(tmp_path / "store").scan_trials().collect()
    assert rows["status"].to_list() == ["lost"]


def test_a_run_with_failed_trials_ends_with_the_query_that_shows_why(tmp_path):
    import shlex

    spec = tmp_path / "some-fail.yaml"
    spec.write_text(
        "name: some-fail\nseeds: 1\ngrid: {T: [8], m: [16], fault: [null, raise]}\n"
        "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 5}\n"
        "resources: {num_workers: 1}\n"
    )
    store = tmp_path / "my store"
    out = _cli("run", str(spec), "--store", str(store), "--no-analyze", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    pointer = [line for line in out.stderr.splitlines() if line.startswith("1 failed: each row's error column")]
    assert len(pointer) == 1, out.stderr
    # The command it gives, as a user pastes it, lists the failed trial and its error.
    command = shlex.split(pointer[0].split("says why: ", 1)[1])
    assert command[:2] == ["attnsweep", "query"]
    shown = _cli(*command[1:], "--format", "csv", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert [r["status"] for r in rows] == ["failed"] and "TrialFault" in rows[0]["error"]
