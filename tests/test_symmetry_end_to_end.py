"""A small symmetry sweep through the CLI on an embedded local Ray: store rows, verdicts, figures."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

pytestmark = pytest.mark.slow  # sweeps on a real local Ray

SPEC = (Path(__file__).parent / "specs" / "symtiny.yaml").read_text()


def test_symmetry_sweep_end_to_end(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "run", "spec.yaml", "--store", "store"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = pl.scan_parquet(tmp_path / "store/trials/**/*.parquet", hive_partitioning=True).collect()
    # 2 teachers x 2 m x 3 students x 2 seeds.
    assert trials.height == trials["trial_id"].n_unique() == 24
    assert set(trials["experiment"]) == {"symmetry"}
    assert trials["T"].null_count() == 24  # sparse-Boolean columns stay empty
    orth = trials.filter(pl.col("equivariance") == "orthogonal")
    assert (orth["status"] == "done").all() and orth["eq_error_max"].max() < 1e-10
    for claim in ("S1:", "S2:", "S3:", "S4:"):
        assert claim in proc.stdout
    assert "S1: the inner-product student is exactly O(d)-equivariant; the generic one is not: supported" in proc.stdout
    assert len(list((tmp_path / "figures").rglob("*.png"))) == 3


def test_a_symmetry_run_that_varies_a_setting_within_its_cells_is_named_by_analyze(tmp_path):
    # Symmetry cells are keyed by teacher, student, n, k, d: a calibration grid over
    # max_epochs pools both budgets in one cell, and analyze must say so; the same trials
    # in two runs of one budget each must not.
    grid = "{teacher: [equivariant], d: [4], m: [2, 8], model: [transformer], equivariance: [none], max_epochs: %s}"
    fixed = "fixed: {n: 3, k: 2, width: 8, heads: 2, n_test: 64, n_q: 2}\nanalysis: {target_error: 0.05, n_boot: 20}\n"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="400")
    for name, epochs in (("pooled", "[3, 5]"), ("one", "[3]")):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nexperiment: symmetry\nseeds: 1\ngrid:\n  - {grid % epochs}\n{fixed}"
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "attnsweep.cli",
                "run",
                f"{name}.yaml",
                "--local",
                "--store",
                "store",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        warned = "varies max_epochs (3, 5) within its symmetry cells" in " ".join((proc.stdout + proc.stderr).split())
        assert warned == (name == "pooled"), proc.stdout + proc.stderr
        check = subprocess.run(
            [sys.executable, "-m", "attnsweep.cli", "validate", f"{name}.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert check.returncode == 0
        assert ("warning: the grid varies max_epochs" in check.stderr) == (name == "pooled"), check.stderr


def test_a_symmetry_run_with_its_budget_check_is_reported_and_published(tmp_path):
    # The symmetry budget check re-runs each cell's deciding m (no m* at twice the epochs),
    # and the report's m* table once asked every checked run for that column.
    (tmp_path / "spec.yaml").write_text(
        "name: sym-checked\nexperiment: symmetry\nseeds: 2\ngrid: {equivariance: [orthogonal, none]}\n"
        "fixed: {teacher: equivariant, n: 3, k: 2, d: 4, max_epochs: 60, lr: 1e-2, n_q: 2, n_test: 64}\n"
        "search: {mode: adaptive, m: {min: 2, max: 16}, rel_tol: 0.5, smallest_first: true}\n"
        "analysis: {target_error: 0.05, n_boot: 50}\n"
    )
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            "spec.yaml",
            "--local",
            "--store",
            "store",
            "--no-analyze",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = pl.scan_parquet(tmp_path / "store/trials/**/*.parquet", hive_partitioning=True).collect()
    assert "budget" in set(rows["search_phase"])
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "report",
            "sym-checked",
            "--store",
            "store",
            "--out",
            "pub",
            "--publish",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    table = pl.read_csv(tmp_path / "pub" / "m_star_symmetry.csv")
    assert set(table["budget"]) <= {"ok", "budget-limited"} and table.height == 2
    html = (tmp_path / "pub" / "report.html").read_text()
    assert ">budget</th>" in html  # the m* table has the budget column
