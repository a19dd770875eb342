"""A sweep of thousands of tiny trials on a real local Ray: exactly one row per trial, and a
part file per ``flush_rows`` rows, never one per trial or per pack.

(bench/scale.py runs the same spec at 100,000 trials and measures the driver's memory.)
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from attnsweep.orchestrator import RayExecutor, load_spec, run_sweep
from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # three thousand trials on a real local Ray: most of a minute

ROOT = Path(__file__).resolve().parents[1]


def test_three_thousand_tiny_trials_one_row_each(tmp_path):
    text = (ROOT / "sweeps" / "tiny-100k.yaml").read_text().replace("seeds: 2500", "seeds: 75")
    text = text.replace("  pack_size: auto\n", "  pack_size: auto\n  flush_rows: 1000\n  flush_s: 3600\n")
    spec_path = tmp_path / "tiny.yaml"
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    assert spec.n_trials() == 3000
    store = ResultsStore(tmp_path / "store")
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
    finally:
        executor.shutdown()
    rows = store.scan_trials().select("trial_id", "status", "pack_size").collect()
    assert summary.status == "finished" and sum(summary.counts.values()) == 3000
    assert rows.height == 3000 and rows["trial_id"].n_unique() == 3000
    assert set(rows["status"]) == {"done"}
    assert rows["pack_size"].max() > 1  # packed, not one trial per call
    files = sorted((tmp_path / "store" / "trials").rglob("*.parquet"))
    assert len(files) == 3  # 3000 rows / flush_rows 1000, no per-trial or per-pack files
    assert not list((tmp_path / "store").rglob("*.partial"))
