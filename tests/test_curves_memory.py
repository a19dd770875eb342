"""``attnsweep report`` on a run with about a million learning-curve points needs about the memory
of the same run without curves (issue 48: it grew by about 0.9 KB a point, 988 MB at 0.64M
points against 357 MB without): the figure reads only the points it draws."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from boolean_rows import boolean_row
from curve_runs import with_curve, write_run

from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # two reports in subprocesses and a million points written: about 20 s

TS = list(range(8, 72, 4))  # 16 cells
MS = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
SEEDS = 6
POINTS = 900
"""16 x 12 x 6 = 1,152 trials of 900 points: 1,036,800 points; the figure draws 4 cells x 6 m."""


LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    fh.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""
"""Runs a command and writes its peak resident memory (KiB). A child's maxrss starts at its
parent's resident memory when forked (Linux copies the high-water mark with the address space),
so the CLI is started from this small process, not from pytest, which holds the test's points."""


def _peak_rss_mb(*args: str, cwd) -> tuple[float, subprocess.CompletedProcess]:
    """Run the CLI and return its peak resident memory (MiB) and how it ended."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    command = [sys.executable, "-m", "attnsweep.cli", *args]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(cwd / "maxrss"), *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    return int((cwd / "maxrss").read_text()) / 1024, done


def test_report_memory_does_not_grow_with_curve_points(tmp_path):
    store = ResultsStore(tmp_path / "store")
    rng = np.random.default_rng(0)
    plain = [
        boolean_row(T, m, seed, rng.random() < min(1.0, m / (3 * T))) for T in TS for m in MS for seed in range(SEEDS)
    ]
    epochs = list(range(POINTS))
    curved = [
        with_curve(row, epochs, np.minimum(1.0, 0.5 + np.arange(POINTS) / POINTS + rng.random(POINTS) / 100).tolist())
        for row in plain
    ]
    write_run(store, "plain", "r0", plain)
    write_run(store, "curved", "r1", curved)
    del curved
    points = store.scan_run_curves("curved", "r1")
    assert points is not None and points.select("trial_id").collect().height == len(plain) * POINTS > 1_000_000

    peaks = {}
    for run_id in ("r0", "r1"):
        peaks[run_id], proc = _peak_rss_mb("report", run_id, "--store", "store", "--out", f"rep-{run_id}", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "rep-r1" / "figures" / "r1" / "learning_curves.png").exists()
    assert not (tmp_path / "rep-r0" / "figures" / "r0" / "learning_curves.png").exists()
    assert peaks["r1"] <= 1.5 * peaks["r0"], peaks
