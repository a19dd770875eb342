"""Moving a run to another machine (presentation/transfer.py): `store export` writes its rows,
record and search journals into a folder; `store import` writes them into another store; a run
killed mid-way and moved that way resumes there with every trial once and its earlier rows
unchanged. The refusals: an export over an existing one, an import into a store that holds the
run, a damaged export."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from attnsweep.results import ResultsStore

SPEC = (
    "name: moved\nseeds: 25\ngrid: {T: [8, 16], m: [4, 8, 12, 16, 24, 32, 48, 64]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 40}\nexecution: {pack_size: 1}\n"
)
TRIALS = 25 * 2 * 8


def _cli(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        **kw,
    )


def _killed_run(machine: Path) -> str:
    """Start the sweep on ``machine`` and kill its driver (SIGKILL, no clean-up) once some rows
    are in the store and before all are; the run's id."""
    (machine / "spec.yaml").write_text(SPEC)
    env = dict(os.environ, COLUMNS="200", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", "run", "spec.yaml", "--local", "--no-analyze"],
        cwd=machine,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    trials = machine / "results-store" / "trials"
    deadline = time.monotonic() + 300
    while not any(trials.rglob("part-*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    store = ResultsStore(machine / "results-store")
    return store.latest_run()[1]


@pytest.mark.slow  # trains a few hundred tiny trials
def test_a_killed_run_moved_to_a_fresh_checkout_resumes_there_with_every_trial_once(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    run_id = _killed_run(first)
    before = ResultsStore(first / "results-store").scan_trials().collect()
    assert 0 < before.height < TRIALS, "the driver was killed before any row, or after the last"
    assert ResultsStore(first / "results-store").read_run("moved", run_id)["status"] == "running"

    exported = _cli("store", "export", run_id, "--out", "parts/moved", cwd=first)
    assert exported.returncode == 0, exported.stderr
    # What a commit carries: the exported folder alone, into another checkout.
    shutil.copytree(first / "parts", second / "parts")
    imported = _cli("store", "import", "parts/moved", cwd=second)
    assert imported.returncode == 0, imported.stderr
    resumed = _cli("resume", run_id, "--local", "--no-analyze", cwd=second)
    assert resumed.returncode == 0, resumed.stderr

    store = ResultsStore(second / "results-store")
    after = store.scan_trials().collect()
    assert after.height == TRIALS and after["trial_id"].n_unique() == TRIALS
    # The rows made before the kill came over unchanged, and were not run again.
    moved = after.filter(pl.col("trial_id").is_in(before["trial_id"].implode())).sort("trial_id")
    assert moved.select(before.columns).equals(before.sort("trial_id"))
    record = store.read_run("moved", run_id)
    assert record["status"] == "finished" and record["n_done"] + record.get("n_failed", 0) <= TRIALS
    assert record["attempts"][-1]["n_skipped"] == before.height
    assert record["attempts"][-1]["n_run"] == TRIALS - before.height


def _small_run(tmp_path: Path) -> ResultsStore:
    import pyarrow as pa
    from boolean_rows import boolean_row

    from attnsweep.orchestrator.trials_table import run_schema, trial_schema

    store = ResultsStore(tmp_path / "store")
    rows = [boolean_row(8, m, seed, m >= 16) for m in (8, 16, 32) for seed in range(2)]
    schema = trial_schema()
    store.write_trials(
        "sw", "r1", pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    )
    store.write_run(
        "sw",
        "r1",
        dict(
            status="interrupted",
            n_trials=len(rows),
            n_done=len(rows),
            spec_name="sw",
            spec_yaml="name: sw\n",
            attempts=[],
        ),
        run_schema(),
    )
    return store


def test_export_and_import_refuse_what_would_lose_or_double_rows(tmp_path):
    n_rows = _small_run(tmp_path).scan_trials().collect().height
    ok = _cli("store", "export", "r1", "--out", "out", "--store", "store", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["SHA256SUMS", "runs.parquet", "trials.parquet"]
    # The same run again writes over its earlier export (the next part of a long sweep).
    again = _cli("store", "export", "r1", "--out", "out", "--store", "store", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    unknown = _cli("store", "export", "r9", "--out", "other", "--store", "store", cwd=tmp_path)
    assert unknown.returncode == 2 and "r9" in unknown.stderr and not (tmp_path / "other" / "trials.parquet").exists()

    held = _cli("store", "import", "out", "--store", "store", cwd=tmp_path)
    assert held.returncode == 2 and "already holds run(s) r1" in held.stderr
    assert ResultsStore(tmp_path / "store").scan_trials().collect().height == n_rows

    moved = _cli("store", "import", "out", "--store", "fresh", cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert (
        ResultsStore(tmp_path / "fresh")
        .scan_trials()
        .collect()
        .sort("trial_id")
        .equals(ResultsStore(tmp_path / "store").scan_trials().collect().sort("trial_id"))
    )

    with open(tmp_path / "out" / "trials.parquet", "r+b") as f:  # one byte changed: its checksum no longer holds
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0xFF]))
    damaged = _cli("store", "import", "out", "--store", "third", cwd=tmp_path)
    assert damaged.returncode == 2 and "SHA256SUMS" in damaged.stderr
    assert not (tmp_path / "third" / "trials").exists()


def test_an_import_that_fails_half_way_leaves_the_store_as_it_was_and_a_retry_works(tmp_path):
    _small_run(tmp_path)
    assert _cli("store", "export", "r1", "--out", "out", "--store", "store", cwd=tmp_path).returncode == 0
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / "runs").write_text("not a folder")  # the record cannot be written
    failed = _cli("store", "import", "out", "--store", "fresh", cwd=tmp_path)
    assert failed.returncode != 0
    assert not (tmp_path / "fresh" / "trials" / "sweep=sw" / "run_id=r1").exists()  # the rows it wrote are gone
    (tmp_path / "fresh" / "runs").unlink()
    retried = _cli("store", "import", "out", "--store", "fresh", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    rows = ResultsStore(tmp_path / "fresh").scan_trials().collect()
    assert rows.height == 6 and rows["trial_id"].n_unique() == 6


def test_trial_rows_without_a_record_count_as_held_and_messages_name_the_import(tmp_path):
    store = _small_run(tmp_path)
    assert _cli("store", "export", "r1", "--out", "out", "--store", "store", cwd=tmp_path).returncode == 0
    shutil.rmtree(store.run_dir("runs", "sw", "r1"))  # rows left behind without their record
    held = _cli("store", "import", "out", "--store", "store", cwd=tmp_path)
    assert held.returncode == 2 and "already holds run(s) r1 (a record or trial rows)" in held.stderr
    missing = _cli("store", "import", "nowhere", "--store", "fresh", cwd=tmp_path)
    assert missing.returncode == 2 and "no folder nowhere" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = _cli("store", "import", "empty", "--store", "fresh", cwd=tmp_path)
    assert empty.returncode == 2 and "store import:" in empty.stderr and "--from" not in empty.stderr
    (tmp_path / "afile").write_text("x")
    into_file = _cli("store", "import", "out", "--store", "afile", cwd=tmp_path)
    assert into_file.returncode == 2 and "is a file, not a store folder" in into_file.stderr


def test_the_next_part_exports_over_the_last_export_of_the_same_runs_only(tmp_path):
    _small_run(tmp_path)
    assert _cli("store", "export", "r1", "--out", "parts/r1", "--store", "store", cwd=tmp_path).returncode == 0
    again = _cli("store", "export", "r1", "--out", "parts/r1", "--store", "store", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    (tmp_path / "findings").mkdir()
    for name in ("runs.parquet", "trials.parquet", "SHA256SUMS"):
        shutil.copy(tmp_path / "parts" / "r1" / name, tmp_path / "findings" / name)
    (tmp_path / "findings" / "findings.md").write_text("published")
    over_findings = _cli("store", "export", "r1", "--out", "findings", "--store", "store", cwd=tmp_path)
    assert over_findings.returncode == 2 and "of other runs or of findings" in over_findings.stderr
    assert (tmp_path / "findings" / "findings.md").read_text() == "published"
