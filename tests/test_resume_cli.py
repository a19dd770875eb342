"""`run --resume` and `resume` through the CLI (in-process executor, so no Ray start-up):
nothing doubled, the wrong spec or run refused, a run held by another driver refused."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest

from attnsweep.results import ResultsStore
from attnsweep.results.locks import RunLock

pytestmark = pytest.mark.slow  # every test runs sweeps through the CLI

SPEC = "name: rs\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\nfixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 5}\n"


def _cli(*args, cwd):
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args, "--local", "--no-analyze"]
        if args[0] in ("run", "resume")
        else [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _first_run(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    assert _cli("run", "spec.yaml", cwd=tmp_path).returncode == 0
    store = ResultsStore(tmp_path / "results-store")
    return store, store.latest_run()[1]


def test_resuming_a_finished_run_runs_nothing(tmp_path):
    store, run_id = _first_run(tmp_path)
    before = store.scan_trials().collect().sort("trial_id")
    proc = _cli("run", "spec.yaml", "--resume", run_id, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to resume" in proc.stderr
    after = ResultsStore(store.root).scan_trials().collect().sort("trial_id")
    assert after.height == 4 and after.equals(before)
    record = store.read_run("rs", run_id)
    assert [a["n_skipped"] for a in record["attempts"]] == [0] and record["n_done"] == 4


def test_resuming_after_lost_rows_runs_only_the_missing_trials(tmp_path):
    store, run_id = _first_run(tmp_path)
    files = sorted((store.root / "trials").rglob("*.parquet"))
    full = store.scan_trials().collect()
    # Keep two of the four rows, as if the driver had died after writing them.
    keep = full.head(2).drop("sweep", "run_id")
    for f in files:
        f.unlink()
    keep.write_parquet(files[0])
    proc = _cli("resume", run_id, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = ResultsStore(store.root).scan_trials().collect()
    assert after.height == 4 and after["trial_id"].n_unique() == 4
    record = store.read_run("rs", run_id)
    assert [a["n_skipped"] for a in record["attempts"]] == [0, 2] and record["attempts"][1]["n_run"] == 2


def test_resume_refuses_a_changed_spec_an_unknown_run_and_a_held_run(tmp_path):
    store, run_id = _first_run(tmp_path)
    (tmp_path / "other.yaml").write_text(SPEC.replace("max_epochs: 5", "max_epochs: 6"))
    proc = _cli("run", "other.yaml", "--resume", run_id, cwd=tmp_path)
    assert proc.returncode == 2 and "differ from the run's" in proc.stderr
    proc = _cli("resume", "20990101-000000-abcdef", cwd=tmp_path)
    assert proc.returncode == 2 and "no run" in proc.stderr
    with RunLock(store, "rs", run_id):
        proc = _cli("resume", run_id, cwd=tmp_path)
    assert proc.returncode == 2 and f"pid {os.getpid()}" in proc.stderr
    # None of the refused attempts wrote anything.
    assert ResultsStore(store.root).scan_trials().collect().height == 4
    assert len(store.read_run("rs", run_id)["attempts"]) == 1


def test_store_compact_then_check_through_the_cli(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC + "execution: {pack_size: 1, flush_rows: 1}\n")
    assert _cli("run", "spec.yaml", cwd=tmp_path).returncode == 0
    store = ResultsStore(tmp_path / "results-store")
    before = store.scan_trials().collect().sort("trial_id")
    proc = _cli("store", "compact", cwd=tmp_path)
    assert proc.returncode == 0 and "4 files -> 1" in proc.stdout
    assert ResultsStore(store.root).scan_trials().collect().sort("trial_id").equals(before)
    check = _cli("store", "check", cwd=tmp_path)
    assert check.returncode == 0 and "ok" in check.stdout and "4 rows" in check.stdout
    assert pl.read_parquet(next((store.root / "trials").rglob("*.parquet"))).height == 4
    unknown = _cli("store", "compact", "--run", "20990101-000000-abcdef", cwd=tmp_path)
    assert unknown.returncode == 2 and "no trials of run" in unknown.stderr
