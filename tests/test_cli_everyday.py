"""Everyday gaps a new user hit (issue 27): --version, `runs`, a sweep's name for its latest
run, `query` on a store that is not there, `analyze --format csv|json`, and the summary
after a resume counting the whole run. In-process executor, so no Ray start-up."""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import os
import subprocess
import sys

import pytest

from attnsweep.results import ResultsStore

SPEC = "name: rs\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\nfixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 5}\n"


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A store with two runs of sweep ``rs``; the second lost two of its four rows and was
    resumed by the sweep's name."""
    folder = tmp_path_factory.mktemp("everyday")
    (folder / "spec.yaml").write_text(SPEC)
    for _ in range(2):
        proc = _cli("run", "spec.yaml", "--local", "--no-analyze", cwd=folder)
        assert proc.returncode == 0, proc.stderr
    store = ResultsStore(folder / "results-store")
    first, second = store.scan_runs().sort("started_at").collect()["run_id"].to_list()
    files = sorted((store.root / "trials" / "sweep=rs" / f"run_id={second}").glob("*.parquet"))
    rows = store.scan_run_trials("rs", second).collect()
    for f in files:
        f.unlink()
    rows.head(2).drop("sweep", "run_id", strict=False).write_parquet(files[0])
    resumed = _cli("resume", "rs", "--local", "--no-analyze", cwd=folder)
    assert resumed.returncode == 0, resumed.stderr
    return folder, first, second, resumed


def test_version_is_the_installed_distributions(tmp_path):
    proc = _cli("--version", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"attnsweep {importlib.metadata.version('attnsweep')}"


@pytest.mark.slow
def test_resume_by_sweep_name_takes_its_latest_run_and_counts_the_whole_run(two_runs):
    _, _, second, resumed = two_runs
    assert f"rs is a sweep: its latest run is {second}" in resumed.stderr
    # The summary counts the run's four trials, and says the attempt ran two of them.
    assert f"run {second} of sweep rs: done 4 (this attempt: done 2)" in " ".join(resumed.stderr.split())


@pytest.mark.slow
def test_runs_lists_every_run_with_its_counts_and_times(two_runs):
    folder, first, second, _ = two_runs
    proc = _cli("runs", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    lines = {run: next(line for line in proc.stdout.splitlines() if run in line) for run in (first, second)}
    for line in lines.values():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        assert cells[0] == "rs" and cells[2] == "finished", cells
        assert cells[3:8] == ["4", "4", "0", "0", "0"], cells  # trials; done, failed, diverged, lost
        assert cells[8][:2] == "20" and cells[9][:2] == "20"  # started, ended
    assert proc.stdout.index(first) < proc.stdout.index(second)
    assert _cli("runs", "nope", cwd=folder).returncode == 2
    missing = _cli("runs", "--store", "no-such-store", cwd=folder)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_query_on_a_store_that_does_not_exist_says_so(tmp_path):
    for args in (["SELECT 1"], ["--schema"]):
        proc = _cli("query", *args, "--store", str(tmp_path / "missing"), cwd=tmp_path)
        assert proc.returncode == 2
        assert "does not exist" in proc.stderr and "empty" not in proc.stderr, proc.stderr
    assert not (tmp_path / "missing").exists()


@pytest.mark.slow
def test_analyze_writes_the_m_star_table_as_csv_or_json_for_scripts(two_runs):
    folder, _, second, _ = two_runs
    as_csv = _cli("analyze", "rs", "--format", "csv", cwd=folder)
    assert as_csv.returncode == 0, as_csv.stderr
    assert f"its latest run is {second}" in as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert rows and {r["run_id"] for r in rows} == {second}
    assert {"T", "m_star", "ci_lo", "ci_hi", "bound"} <= set(rows[0])
    as_json = _cli("analyze", second, "--format", "json", cwd=folder)
    assert as_json.returncode == 0, as_json.stderr
    table = json.loads(as_json.stdout)
    assert [r["T"] for r in table] == [int(r["T"]) for r in rows]
    assert not (folder / "figures").exists()  # csv and json write no figures unless asked


KILL_RAY = """
import sys, threading, time
from pathlib import Path
import ray
from attnsweep.cli import main

def kill_gcs():  # once the run is under way (its record written, the first packs out)
    for _ in range(3000):
        node = getattr(ray._private.worker, "_global_node", None)
        if node is not None and node.all_processes.get("gcs_server") and any(Path("s/trials").glob("*/*/*.parquet")):
            break
        time.sleep(0.1)
    node.all_processes["gcs_server"][0].process.kill()  # as `ray stop --force` or the OOM killer would

threading.Thread(target=kill_gcs, daemon=True).start()
sys.argv = ["attnsweep", *sys.argv[1:]]
main()
"""
# 96 trials: long enough (tens of seconds even on an idle machine) that Ray is killed mid-run,
# after the first part file (at most half a second of rows).
KILLS = (
    "name: kills\nseeds: 8\ngrid: {T: [128, 256, 512], m: [64, 128, 256, 512]}\nexecution: {pack_size: 1, flush_s: 0.5}\n"
    "fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 100, lr: 3e-3, max_epochs: 1000}\n"
)


@pytest.mark.slow
def test_when_the_embedded_ray_dies_the_error_names_the_run_to_resume(tmp_path):
    (tmp_path / "spec.yaml").write_text(KILLS)
    proc = subprocess.run(
        [sys.executable, "-c", KILL_RAY, "run", "spec.yaml", "--no-analyze", "--store", "s"],
        cwd=tmp_path,
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr
    (run_id,) = ResultsStore(tmp_path / "s").scan_runs().collect()["run_id"].to_list()
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert errors == [
        f"error: the local Ray died under this sweep (gcs_server exited); finished trials are saved: "
        f"resume the run with: attnsweep resume {run_id} --store s"
    ], proc.stderr
    assert "Traceback" not in proc.stderr
    # Resumed (here without Ray), the summary counts all 96 trials, not only this attempt's.
    resumed = _cli("resume", run_id, "--store", "s", "--local", "--no-analyze", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} of sweep kills: done 96 (this attempt: " in " ".join(resumed.stderr.split())


@pytest.mark.slow
def test_runs_counts_a_running_runs_rows_not_its_starting_record(two_runs, tmp_path):
    # A run still running has the counts of its start in its record (0 done): `runs` counts
    # the rows it holds so far instead.
    import shutil

    import polars as pl

    from attnsweep.orchestrator.trials_table import run_schema

    folder, first, _, _ = two_runs
    copy = tmp_path / "store"
    shutil.copytree(folder / "results-store", copy)
    store = ResultsStore(copy)
    record = store.scan_runs().filter(pl.col("run_id") == first).collect().row(0, named=True)
    record = {k: v for k, v in record.items() if k not in ("sweep", "run_id")}
    store.write_run(
        "rs",
        first,
        {
            **record,
            "status": "running",
            "ended_at": None,
            "n_done": 0,
            "n_failed": 0,
            "n_diverged": 0,
            "n_lost": 0,
        },
        run_schema(),
    )
    proc = _cli("runs", "--store", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cells = [
        c.strip() for c in next(line for line in proc.stdout.splitlines() if first in line).split("│") if c.strip()
    ]
    assert cells[2:8] == ["running", "4 so far", "4", "0", "0", "0"], cells


@pytest.mark.slow
def test_runs_and_analyze_refuse_paths_that_cannot_work(two_runs, tmp_path):
    folder, first, _, _ = two_runs
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    for store in (str(tmp_path / "notes"), ""):
        proc = _cli("runs", "--store", store, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "is not an attnsweep store" in _cli("runs", "--store", str(tmp_path / "notes"), cwd=tmp_path).stderr
    # --figures that cannot be made: exit 2 before any analysis, not a warning after it
    proc = _cli("analyze", first, "--figures", "/proc/attnsweep-nope", cwd=folder)
    assert proc.returncode == 2 and "--figures: cannot make /proc/attnsweep-nope" in proc.stderr, proc.stderr
    assert proc.stdout == ""


@pytest.mark.slow
def test_the_api_takes_a_sweeps_name_for_its_latest_run_as_the_cli_does(two_runs, tmp_path):
    import attnsweep

    folder, first, second, _ = two_runs
    store = attnsweep.open_store(folder / "results-store")
    assert store.analyze("rs", figures=tmp_path / "f").run_id == second
    assert store.analyze(first, figures=tmp_path / "g").run_id == first
