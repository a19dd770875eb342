"""Curves exactly once through real kills: ``attnsweep run --local`` of a sweep with curves is
SIGKILLed at each rename and unlink it makes, then resumed (and the resume killed once more at a
moment of its own); ``store compact`` is killed at each of its renames and unlinks, then run
again. Each time every (trial_id, epoch) is read once, with the values of an uninterrupted
run, and after a compaction store check is ok."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from attnsweep.results import ResultsStore
from attnsweep.results.integrity import check_store
from attnsweep.results.query import run_query

pytestmark = pytest.mark.slow  # about 40 CLI runs that train: a few minutes

SPEC = """
name: cv
seeds: 3
grid:
  m: [16, 32]
fixed: {task: and, T: 8, s: 2, d: 8, heads: 1, max_epochs: 12, n_test: 100}
execution:
  pack_size: 2
  flush_rows: 2
  curves: {every: 3}
"""

# The CLI, signalling itself at the Nth rename or unlink of a file (argument 1: N; 0 never; the
# count of steps goes to the file of argument 2): a real SIGKILL at a moment chosen exactly.
KILL_AT = """
import atexit, os, signal, sys
n, count_file = int(sys.argv.pop(1)), sys.argv.pop(1)
steps = [0]
def wrap(fn):
    def wrapped(*a, **kw):
        steps[0] += 1
        if steps[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **kw)
    return wrapped
os.replace, os.rename, os.unlink = wrap(os.replace), wrap(os.rename), wrap(os.unlink)
atexit.register(lambda: open(count_file, "w").write(str(steps[0])))
from attnsweep.cli import main
sys.argv = ["attnsweep", *sys.argv[1:]]
main()
"""


def _cli(cwd: Path, n: int, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-c", KILL_AT, str(n), str(cwd / "steps"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _run_id(store: Path) -> str | None:
    runs = [p.parent for p in (store / "runs" / "sweep=cv").glob("run_id=*/run.parquet")]
    return runs[0].name.removeprefix("run_id=") if runs else None


def _points(store: Path) -> pl.DataFrame:
    s = ResultsStore(store)
    scan = s.scan_run_curves("cv", _run_id(store))
    return scan.select("trial_id", "epoch", "train_loss", "train_acc").collect().sort("trial_id", "epoch")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """An uninterrupted run: its curves, and how many renames and unlinks it makes."""
    root = tmp_path_factory.mktemp("clean")
    (root / "spec.yaml").write_text(SPEC)
    proc = _cli(root, 0, "run", "spec.yaml", "--store", "store", "--local", "--no-analyze")
    assert proc.returncode == 0, proc.stderr[-3000:]
    points = _points(root / "store")
    assert points.height >= 6 * 2 and points.select("trial_id").n_unique() == 6
    return points, int((root / "steps").read_text())


def _resume(root: Path, kill_at: int = 0) -> subprocess.CompletedProcess | None:
    run_id = _run_id(root / "store")
    if run_id is None:
        return None  # killed before its record: nothing to resume
    return _cli(root, kill_at, "resume", run_id, "--store", "store", "--local", "--no-analyze")


def test_a_run_killed_at_any_rename_or_unlink_then_resumed_reads_each_point_once(clean, tmp_path):
    want, steps = clean
    assert steps >= 8  # three part files of rows and three of curves, the run record's writes
    for n in range(1, steps + 1):
        root = tmp_path / f"kill-{n}"
        root.mkdir()
        (root / "spec.yaml").write_text(SPEC)
        killed = _cli(root, n, "run", "spec.yaml", "--store", "store", "--local", "--no-analyze")
        assert killed.returncode == -9, (n, killed.stderr[-2000:])
        if n % 3 == 0:  # the resume killed too, at its second step, then resumed again
            again = _resume(root, kill_at=2)
            assert again is None or again.returncode in (0, -9), (n, again.stderr[-2000:])
        done = _resume(root)
        if done is None:
            continue
        assert done.returncode == 0, (n, done.stderr[-3000:])
        got = _points(root / "store")
        assert got.equals(want), n
        assert got.select("trial_id", "epoch").is_duplicated().sum() == 0, n
        queried = run_query(ResultsStore(root / "store"), "select count(*) as n from curves")
        assert queried["n"][0] == want.height, n  # a query sees each point once too
        proc = _cli(root, 0, "store", "compact", "--store", "store")
        assert proc.returncode == 0, (n, proc.stderr[-2000:])
        assert check_store(ResultsStore(root / "store")).ok, n
        raw = pl.read_parquet(list((root / "store" / "curves").rglob("*.parquet")))
        assert raw.height == want.height, n  # compact left each point once on disk too


def test_a_compaction_killed_at_any_rename_or_unlink_loses_and_doubles_no_point(clean, tmp_path):
    want, _ = clean
    root = tmp_path / "compact"
    root.mkdir()
    (root / "spec.yaml").write_text(SPEC)
    assert _cli(root, 0, "run", "spec.yaml", "--store", "store", "--local", "--no-analyze").returncode == 0
    import shutil

    pristine = tmp_path / "pristine"
    shutil.copytree(root / "store", pristine)
    assert _cli(root, 0, "store", "compact", "--store", "store").returncode == 0
    steps = int((root / "steps").read_text())
    assert steps >= 4  # at least: the trials' new file and the curves' new file, two deletes
    for n in range(1, steps + 1):
        shutil.rmtree(root / "store")
        shutil.copytree(pristine, root / "store")
        killed = _cli(root, n, "store", "compact", "--store", "store")
        assert killed.returncode == -9, (n, killed.stderr[-2000:])
        assert _points(root / "store").equals(want), n
        assert _cli(root, 0, "store", "compact", "--store", "store").returncode == 0, n
        assert _points(root / "store").equals(want), n
        assert check_store(ResultsStore(root / "store")).ok, n
