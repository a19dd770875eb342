"""`attnsweep replicate`: a run replicated against itself passes; a planted broken data
generator (training labels flipped, behind a test-only variable) fails, naming the cells."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from attnsweep.results import ResultsStore
from attnsweep.tasks.boolean import PLANTED_NOISE_ENV

SPEC = """name: repl
seeds: 6
grid: {T: [8, 16, 32], m: [4, 8, 16, 32, 64]}
fixed: {task: and, s: 1, d: 8, heads: 2, lr: 3e-3, max_epochs: 150, n_test: 300}
analysis: {n_boot: 200}
"""


def _cli(*args, cwd, env=None):
    base = {k: v for k, v in os.environ.items() if k != PLANTED_NOISE_ENV}
    env = {**base, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    root = tmp_path_factory.mktemp("repl")
    (root / "spec.yaml").write_text(SPEC)
    proc = _cli("run", "spec.yaml", "--local", "--no-analyze", cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, ResultsStore(root / "results-store").latest_run()[1]


@pytest.mark.slow
def test_replicating_a_run_against_itself_passes(baseline):
    root, run_id = baseline
    proc = _cli("replicate", "spec.yaml", "--baseline", run_id, "--local", "--report", "same", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "passed" in proc.stdout
    report = (root / "same" / "report.md").read_text()
    assert "PASSED" in report and "FAILED" not in report
    assert "| m* |" in report and "test_acc distribution" in report
    assert (root / "same" / "figures" / "baseline" / "m_star_vs_T.png").stat().st_size > 0
    assert (root / "same" / "figures" / "new" / "m_star_vs_T.png").stat().st_size > 0


@pytest.mark.slow
def test_a_broken_data_generator_is_a_regression_naming_the_cells(baseline):
    root, run_id = baseline
    proc = _cli(
        "replicate",
        "spec.yaml",
        "--baseline",
        run_id,
        "--local",
        "--report",
        "broken",
        cwd=root,
        env={PLANTED_NOISE_ENV: "0.3"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "REGRESSION" in proc.stdout
    report = (root / "broken" / "report.md").read_text()
    moved = report.split("## What moved")[1].split("## Every comparison")[0]
    assert "**m***" in moved and "T=" in moved


@pytest.mark.slow
def test_a_baseline_from_another_spec_is_refused(baseline):
    root, run_id = baseline
    (root / "other.yaml").write_text(SPEC.replace("seeds: 6", "seeds: 5"))
    proc = _cli("replicate", "other.yaml", "--baseline", run_id, "--local", cwd=root)
    assert proc.returncode == 2 and "another spec" in proc.stderr
