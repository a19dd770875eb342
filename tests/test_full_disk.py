"""A store whose disk fills mid-run, on local Ray (issue 23): the run ends recorded `failed`
with the real reason (ENOSPC), the rows the store refused are in a rescue file named on the
terminal and in the record, and `store check` reports both; when the record itself cannot be
written, the terminal says so and what the record should have said.

The full disk is injected where the store writes its files (``results.store.
write_parquet_atomic``, called for every part file and run record): a small file system of
its own needs mount rights the tests do not have. The rescue file is written by the real
code, to a real folder.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

import attnsweep.results.store as store_module
import attnsweep.results.writer as writer_module
from attnsweep.orchestrator import RayExecutor, parse_spec, run_sweep
from attnsweep.results import ResultsStore, StoreError
from attnsweep.results.integrity import check_store

pytestmark = pytest.mark.slow  # sweeps on a real local Ray

ROOT = Path(__file__).resolve().parents[1]
SPEC = (
    "name: full\nseeds: 3\ngrid: {T: [8], m: [16, 32]}\nfixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, "
    "max_epochs: 5}\nexecution: {pack_size: 1, flush_rows: 2, flush_s: 3600}\n"
)  # 6 trials, two rows per part file (never one by time, on a loaded machine)

# `attnsweep run` with a store whose disk is full after its first part file: part files
# (and, with "all", run records too) are refused with ENOSPC.
FULL_DISK_CLI = """
import errno, sys
from pathlib import Path
import attnsweep.results.store as st

import attnsweep.results.writer
attnsweep.results.writer.RESCUE_DIR = Path(sys.argv.pop(1))  # the system temp dir's folder, moved into the test's
real, parts, mode = st.write_parquet_atomic, [], sys.argv.pop(1)

def full(table, path):
    table_name = Path(path).parent.parent.parent.name
    if table_name == "trials":
        parts.append(path)
    if len(parts) > 1 and (table_name == "trials" or mode == "all"):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(table, path)

st.write_parquet_atomic = full
from attnsweep.cli import main
sys.argv = ["attnsweep", *sys.argv[1:]]
main()
"""


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_full_disk_mid_run_is_recorded_failed_with_its_rescue_file_and_store_check_says_so(
    tmp_path,
):
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", COLUMNS="250")
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            FULL_DISK_CLI,
            str(tmp_path / "tmp" / "attnsweep-unsaved"),
            "parts",
            "run",
            "spec.yaml",
            "--no-analyze",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = _flat(run.stderr)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    rescued = list((tmp_path / "tmp" / "attnsweep-unsaved").glob("*.parquet"))
    assert len(rescued) == 1, run.stderr[-3000:]
    rescue = rescued[0]
    assert "No space left on device (ENOSPC)" in said and str(rescue) in said
    store = ResultsStore(tmp_path / "results-store")
    (run_id,) = [p.name.removeprefix("run_id=") for p in (store.root / "runs" / "sweep=full").iterdir()]
    record = store.read_run("full", run_id)
    assert record["status"] == "failed" and record["attempts"][-1]["status"] == "failed"
    assert "No space left on device (ENOSPC)" in record["error"] and record["rescue_file"] == str(rescue)
    stored, kept = store.scan_run_trials("full", run_id).collect(), pl.read_parquet(rescue)
    # The first part file was written (its rows or those of a flush on time), the next refused: the run stopped.
    assert stored.height >= 1 and kept.height >= 1 and stored.height + kept.height <= 6
    assert set(stored["trial_id"]).isdisjoint(kept["trial_id"])
    check = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "store", "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    shown = _flat(check.stdout)
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"failed run: run {run_id} of sweep full" in shown and "ENOSPC" in shown and str(rescue) in shown
    assert "ok" not in check.stdout.split()


def test_when_the_record_cannot_be_written_either_the_terminal_says_what_it_should_say(tmp_path, monkeypatch):
    """Every store write after the first part file is refused, the run record's too, and the
    system temp dir cannot take the rescue file: it goes to the current folder."""
    monkeypatch.setattr(writer_module, "RESCUE_DIR", tmp_path / "tmp-full")
    (tmp_path / "tmp-full").write_text("a file where the rescue folder would go: it cannot be made")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    real, parts = store_module.write_parquet_atomic, []

    def full(table, path):
        if Path(path).parent.parent.parent.name == "trials":
            parts.append(path)
        if len(parts) > 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(table, path)

    monkeypatch.setattr(store_module, "write_parquet_atomic", full)
    spec = parse_spec(SPEC)
    store = ResultsStore(tmp_path / "store")
    terminal = io.StringIO()
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        with pytest.raises(StoreError, match=r"No space left on device \(ENOSPC\)") as info:
            run_sweep(
                spec,
                store,
                executor,
                run_id="20261201-000000-cccccc",
                console=Console(file=terminal, width=100_000),
            )
    finally:
        executor.shutdown()
    (rescue,) = (work / "attnsweep-unsaved").glob("*.parquet")
    assert str(rescue) in str(info.value)  # the real error, naming the rescue file, not the record's failure
    said = _flat(terminal.getvalue())
    assert (
        "the record of run 20261201-000000-cccccc" in said
        and "could not be written: No space left on device (ENOSPC); it still says 'running'" in said
    )
    assert "It should say: status failed; error: cannot write trial rows" in said
    assert f"rescue file: {rescue}" in said and "trials stored: done 2," in said
    monkeypatch.undo()  # space again
    assert store.read_run("full", "20261201-000000-cccccc")["status"] == "running"  # what the disk kept
    report = check_store(ResultsStore(store.root))
    assert report.died_runs == [("full", "20261201-000000-cccccc")] and not report.ok
