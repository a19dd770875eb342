"""A run checks that it can write before anything trains, and a write the store refuses
mid-run stops the run at once, recorded failed, with the refused rows saved."""

import io
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.executors import LocalExecutor
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore, StoreError

pytestmark = pytest.mark.slow  # sweeps on a real local Ray

ROOT = Path(__file__).resolve().parents[1]
SPEC = (
    "name: w\nseeds: 3\ngrid: {T: [8], m: [16, 32]}\nfixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, "
    "max_epochs: 5}\nexecution: {pack_size: 1, flush_rows: 2}\n"
)


def test_a_store_whose_trials_is_a_file_is_refused_before_anything_trains(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "trials").write_text("not a folder")
    (tmp_path / "spec.yaml").write_text(SPEC)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            "spec.yaml",
            "--store",
            "store",
            "--local",
            "--no-analyze",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "store/trials is a file, not a folder" in " ".join(proc.stderr.split())
    assert not (tmp_path / "store" / "runs").exists()  # no run recorded as running


class RefusingStore(ResultsStore):
    """A store whose disk fills after its first part file."""

    def write_trials(self, sweep, run_id, table, curves=None):
        if getattr(self, "written", 0) >= 1:
            raise OSError(28, "No space left on device")
        self.written = getattr(self, "written", 0) + 1
        return super().write_trials(sweep, run_id, table, curves=curves)


def test_a_refused_write_stops_the_run_records_it_failed_and_keeps_the_rows(tmp_path, monkeypatch):
    import attnsweep.results.writer as writer_module

    monkeypatch.setattr(writer_module, "RESCUE_DIR", tmp_path / "rescue")
    spec = parse_spec(SPEC)
    store = RefusingStore(tmp_path / "store")
    with pytest.raises(StoreError, match="No space left on device") as info:
        run_sweep(
            spec,
            store,
            LocalExecutor(spec.execution),
            run_id="20261201-000000-aaaaaa",
            console=Console(file=io.StringIO()),
        )
    rescued = list((tmp_path / "rescue").glob("*.parquet"))
    assert len(rescued) == 1 and str(rescued[0]) in str(info.value)
    stored = store.scan_run_trials("w", "20261201-000000-aaaaaa").collect()
    kept = pl.read_parquet(rescued[0])
    # 6 trials, one per pack, two rows per file: the first file was written, the second refused,
    # and the run stopped there: 2 trials never ran
    assert stored.height == 2 and kept.height == 2 and spec.n_trials() == 6
    assert set(stored["trial_id"]).isdisjoint(kept["trial_id"])
    assert store.read_run("w", "20261201-000000-aaaaaa")["status"] == "failed"
