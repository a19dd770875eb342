"""``attnsweep validate`` states what a trial's learning curve holds in its worker, and refuses a
``max_points`` beyond the byte ceiling naming the field, the allowed range and the bytes
(workers/memory.py: 320 bytes a point, measured; 16 MiB a trial)."""

from __future__ import annotations

import os
import subprocess
import sys

SPEC = """
name: c
seeds: 2
grid:
  m: [8, 16]
fixed: {{task: and, T: 8, s: 1, max_epochs: 300}}
{execution}
"""


def _validate(tmp_path, execution: str) -> subprocess.CompletedProcess:
    (tmp_path / "c.yaml").write_text(SPEC.format(execution=execution))
    env = dict(os.environ, COLUMNS="300")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "validate", "c.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


def test_validate_states_the_curve_bytes_of_a_trial(tmp_path):
    proc = _validate(tmp_path, "execution:\n  curves: {every: 1, max_points: 200}")
    assert proc.returncode == 0, proc.stderr
    # max_epochs 300 and max_points 200: stride ceil(299 / 199) = 2, epochs 0, 2, ..., 298 and
    # 299: 151 points, 151 x 320 = 48,320 bytes, 47 KiB.
    assert (
        "  learning curves: at most 151 points a trial, up to 47 KiB of curve buffer a trial in its worker "
        "(320 bytes a point), counted in the pack sizes; the ceiling is 16 MiB a trial (max_points up to 52,428)"
    ) in proc.stdout.splitlines()


def test_validate_says_nothing_of_curves_a_run_does_not_keep(tmp_path):
    proc = _validate(tmp_path, "")
    assert proc.returncode == 0, proc.stderr
    assert "learning curves" not in proc.stdout


def test_validate_refuses_max_points_beyond_the_byte_ceiling(tmp_path):
    proc = _validate(tmp_path, "execution:\n  curves: {max_points: 60000}")
    assert proc.returncode == 2 and proc.stdout == ""
    # 60,000 x 320 = 19,200,000 bytes, 18.3 MiB
    assert (
        "execution.curves.max_points: value 60000: must be from 2 to 52,428: a trial's curve holds up to 320 bytes "
        "a point in its worker until its pack ends, 18.3 MiB at 60,000 points, and the ceiling is 16 MiB a trial"
    ) in " ".join(proc.stderr.split())
