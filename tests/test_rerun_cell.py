"""scripts/rerun_cell.py: one cell of an adaptive run, rerun as a grid at every m its search
tried, comes back row for row and with the same m*; a changed row is reported."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # published cells rerun

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}

SPEC = """
name: small-theory
seeds: 4
grid: {T: [8, 16], norm_bound: [1.0]}
fixed: {task: and, s: 2, d: 16, heads: 2, n_test: 200, lr: 0.01, max_epochs: 300, positions: fixed,
        ln_affine: false}
search:
  mode: adaptive
  m: {min: 8, max: 256}
  rel_tol: 0.3
  budget_check: false
"""


def _run(*args, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def test_a_cell_rerun_as_a_grid_comes_back_row_for_row(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    first = _run(
        "-m",
        "attnsweep.cli",
        "run",
        "spec.yaml",
        "--store",
        "s",
        "--local",
        "--no-analyze",
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    store = ResultsStore(tmp_path / "s")
    (run_id,) = store.scan_trials().select("run_id").unique().collect()["run_id"].to_list()
    script = str(ROOT / "scripts" / "rerun_cell.py")
    spec = _run(script, "spec", run_id, "--store", "s", "--where", "T=16", cwd=tmp_path)
    assert spec.returncode == 0, spec.stderr[-2000:]
    (tmp_path / "rerun.yaml").write_text(spec.stdout)
    searched = store.scan_trials().filter(pl.col("T") == 16).collect()
    assert f"m: {sorted(set(searched['m']))}" in spec.stdout and "positions: fixed" in spec.stdout
    again = _run(
        "-m",
        "attnsweep.cli",
        "run",
        "rerun.yaml",
        "--store",
        "r",
        "--local",
        "--no-analyze",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    (rerun_id,) = ResultsStore(tmp_path / "r").scan_trials().select("run_id").unique().collect()["run_id"].to_list()
    same = _run(script, "compare", run_id, "--store", "s", rerun_id, "--rerun-store", "r", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr[-2000:]
    assert f"{searched.height} rows of run {rerun_id} found" in same.stdout and "0 differ" in same.stdout
    assert "m* the same" in same.stdout

    # The rerun is a grid run (no search phase): its one cell makes a spec too, by sweep name.
    again_spec = _run(script, "spec", "small-theory-rerun", "--store", "r", cwd=tmp_path)
    assert again_spec.returncode == 0 and f"m: {sorted(set(searched['m']))}" in again_spec.stdout, again_spec.stderr
    # What it cannot serve exits 2 with a message, not a traceback (1 means rows differ).
    for args, needle in (
        (("--where", "T=17"), "no row left with T = 17 (values there: 8, 16)"),
        (("--where", "norm_bound=one"), "'one' is not a value norm_bound can take"),
        (("--where", "T"), "give NAME=VALUE"),
        (("--where", "T="), "give NAME=VALUE"),
    ):
        bad = _run(script, "spec", run_id, "--store", "s", *args, cwd=tmp_path)
        assert bad.returncode == 2 and needle in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    missing = _run(script, "spec", run_id, "--store", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere: no such store" in missing.stderr
    several = _run(script, "spec", run_id, "--store", "s", cwd=tmp_path)
    assert several.returncode == 2 and "leave 2 cells" in several.stderr and "T" in several.stderr

    # One row changed in the first run's store: the comparison says so and fails.
    part = next((tmp_path / "s" / "trials").rglob("*.parquet"))
    rows = pl.read_parquet(part)
    hit = rows.filter(pl.col("T") == 16).head(1)["trial_id"][0] if (rows["T"] == 16).any() else None
    if hit is None:
        part = next(p for p in (tmp_path / "s" / "trials").rglob("*.parquet") if (pl.read_parquet(p)["T"] == 16).any())
        rows = pl.read_parquet(part)
        hit = rows.filter(pl.col("T") == 16)["trial_id"][0]
    rows.with_columns(
        epochs=pl.when(pl.col("trial_id") == hit).then(pl.col("epochs") + 1).otherwise(pl.col("epochs"))
    ).write_parquet(part)
    changed = _run(script, "compare", run_id, "--store", "s", rerun_id, "--rerun-store", "r", cwd=tmp_path)
    assert changed.returncode == 1 and "1 differ" in changed.stdout


RESTARTS = """
name: small-restarts
seeds: 2
grid: {T: [8], m: [16, 32], restart: [0, 1]}
fixed: {task: and, s: 2, d: 16, heads: 2, n_test: 200, lr: 0.01, max_epochs: 100, positions: fixed,
        norm_bound: 1.0, ln_affine: false}
"""


def test_a_restart_runs_cell_is_rerun_with_every_restart(tmp_path):
    # The learners of a restart cell read all its restarts together, so one cell is every
    # restart of its training sets: the spec grids them beside m, and all rows come back.
    (tmp_path / "spec.yaml").write_text(RESTARTS)
    first = _run(
        "-m",
        "attnsweep.cli",
        "run",
        "spec.yaml",
        "--store",
        "s",
        "--local",
        "--no-analyze",
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    script = str(ROOT / "scripts" / "rerun_cell.py")
    spec = _run(script, "spec", "small-restarts", "--store", "s", "--where", "T=8", cwd=tmp_path)
    assert spec.returncode == 0, spec.stderr[-2000:]
    assert "restart: [0, 1]" in spec.stdout and "m: [16, 32]" in spec.stdout
    (tmp_path / "rerun.yaml").write_text(spec.stdout)
    again = _run(
        "-m",
        "attnsweep.cli",
        "run",
        "rerun.yaml",
        "--store",
        "r",
        "--local",
        "--no-analyze",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    same = _run(
        script,
        "compare",
        "small-restarts",
        "--store",
        "s",
        "small-restarts-rerun",
        "--rerun-store",
        "r",
        cwd=tmp_path,
    )
    assert same.returncode == 0, same.stdout + same.stderr[-2000:]
    assert "8 rows of run" in same.stdout and "0 differ" in same.stdout  # 2 m x 2 restarts x 2 seeds
