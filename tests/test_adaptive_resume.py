"""A crash in the middle of an adaptive search (driver and its Ray killed with SIGKILL) resumes
without repeating a finished trial, and the Optuna studies end with exactly their trials."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import polars as pl
import pytest

from attnsweep.orchestrator.adaptive import study_dir
from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # an adaptive search on Ray, killed and resumed: over a minute

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}

SPEC = """
name: adaptive-crash
seeds: 4
grid: {T: [8, 16]}
fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 256, max_epochs: 150}
search:
  mode: adaptive
  m: {min: 8, max: 128}
  rel_tol: 0.25
  tune: {n_trials: 4, batch: 2, seeds: 2, m: 32}
execution: {pack_size: 2, flush_rows: 2, flush_s: 0.1}
"""


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_killed_adaptive_search_resumes_without_repeating_trials(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", "run", "spec.yaml", "--store", "s", "--no-analyze"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    trials, studies = tmp_path / "s" / "trials", tmp_path / "s" / "studies"
    deadline = time.time() + 300
    # Tuning starts once a cell's search with the spec's settings is done (its journal
    # appears); kill after a few more files, in the middle of tuning.
    while time.time() < deadline and not list(studies.rglob("*.journal")):
        time.sleep(0.05)
    files = len(list(trials.rglob("*.parquet")))
    while time.time() < deadline and len(list(trials.rglob("*.parquet"))) < files + 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    store = ResultsStore(tmp_path / "s")
    partial = store.scan_trials().collect()
    (run_id,) = partial["run_id"].unique().to_list()
    assert store.read_run("adaptive-crash", run_id)["status"] == "running"
    assert partial["search_round"].max() >= 1 and partial.height > 0

    resumed = _cli("resume", run_id, "--store", "s", "--no-analyze", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = ResultsStore(tmp_path / "s").scan_trials().collect()
    assert rows["trial_id"].n_unique() == rows.height  # no trial twice
    assert rows.height > partial.height
    # the rows from before the crash are the same rows: nothing was rerun
    before = partial.select("trial_id", "finished_at", "test_acc")
    assert before.join(rows.select("trial_id", "finished_at", "test_acc"), on="trial_id").height == before.height
    kept = before.join(rows.select("trial_id", "finished_at"), on="trial_id", suffix="_after")
    assert (kept["finished_at"] == kept["finished_at_after"]).all()

    record = ResultsStore(tmp_path / "s").read_run("adaptive-crash", run_id)
    assert record["status"] == "finished"
    assert [a["status"] for a in record["attempts"]] == ["died", "finished"]
    assert record["attempts"][1]["n_skipped"] == partial.height
    assert record["n_trials"] == rows.height

    # each cell's study holds its 4 trials, all complete: none asked twice, none left open
    journals = sorted(study_dir(store, "adaptive-crash", run_id).glob("*.journal"))
    assert len(journals) == 2
    for path in journals:
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
        (summary,) = optuna.get_all_study_summaries(storage)
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 4
    tune = rows.filter(pl.col("search_phase") == "tune")
    assert set(tune["m"]) == {32}
    assert tune.filter(pl.col("lr") != 1e-3).height == 2 * 4 * 2  # cells x Optuna trials x seeds
    # the spec's settings run at the probe too, where the search did not already try it
    default = tune.filter(pl.col("lr") == 1e-3)
    searched = rows.filter((pl.col("search_phase") == "search") & (pl.col("m") == 32))
    assert default.join(searched, on="trial_id").is_empty()
    assert rows.filter(pl.col("search_phase") == "search")["m"].min() == 8

    again = _cli("resume", run_id, "--store", "s", "--no-analyze", cwd=tmp_path)
    assert again.returncode == 0 and "nothing to resume" in again.stderr
