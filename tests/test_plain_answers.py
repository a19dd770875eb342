"""The low items of issue 48, each through the real command line on a real store: the answers a
user reads say what happened (a query before any trial is stored, a mistyped table, a compaction
that deleted files, a full stdout), a running run's published text counts the trials stored,
``analyze`` refuses a linked figure folder as ``report`` does, and SIGTERM as a run ends still
prints its summary."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from attnsweep.orchestrator.spec import parse_spec, trial_id
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore
from attnsweep.workers import BooleanTrialConfig

SPEC = "name: tiny\nseeds: 4\ngrid: {m: [16, 32]}\nfixed: {task: and, T: 8, s: 3, n_test: 100}\n"
RUN = "20261205-090000-aaaaaa"


def _cli(*args, cwd, stdout=None, timeout=600):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )


def _rows(seeds=range(4)) -> list[dict]:
    rows = []
    for m in (16, 32):
        for seed in seeds:
            cfg = BooleanTrialConfig(task="and", T=8, s=3, m=m, seed=seed, n_test=100)
            rows.append(
                {
                    **cfg.model_dump(),
                    "trial_id": trial_id(cfg),
                    "experiment": "sparse_boolean",
                    "status": "done",
                    "test_acc": 1.0,
                    "train_acc": 1.0,
                    "converged": True,
                }
            )
    return rows


def _record(status: str, n_done: int) -> dict:
    spec = parse_spec(SPEC)
    t0 = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    return dict(
        status=status,
        started_at=t0,
        ended_at=None if status == "running" else t0,
        wall_s=None if status == "running" else 1.0,
        n_trials=8,
        n_done=n_done,
        n_failed=0,
        n_diverged=0,
        n_lost=0,
        spec_name=spec.name,
        spec_hash=spec.spec_hash(),
        spec_yaml=SPEC,
        executor="x",
        host="x",
        code_version="x",
        packages="{}",
        experiment="sparse_boolean",
        trial_fields=None,
        cell_counts=None,
        attempts=[],
    )


def _store(root: Path, status: str = "finished", parts: int = 1, trials: bool = True) -> ResultsStore:
    """A store at ``root`` with run :data:`RUN` of :data:`SPEC`: its 8 trial rows in ``parts``
    part files (none with ``trials`` false) and its record as the driver writes it: counts
    of none while ``running`` (the record of its start), of every row once ended."""
    store = ResultsStore(root)
    schema = trial_schema()
    rows = _rows()
    if trials:
        for k in range(parts):
            part = rows[k::parts]
            table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in part], schema=schema)
            store.write_trials("tiny", RUN, table)
    store.write_run("tiny", RUN, _record(status, 0 if status == "running" or not trials else len(rows)), run_schema())
    return store


# --- a query names what is missing ----------------------------------------------------------


def test_a_query_before_any_trial_is_stored_says_so(tmp_path):
    _store(tmp_path / "store", status="running", trials=False)  # a run has begun; no trial has finished
    proc = _cli("query", "SELECT count(*) FROM trials", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "holds no trials yet" in proc.stderr and "run a sweep first" in proc.stderr, proc.stderr
    assert "pg_tables" not in proc.stderr and "Did you mean" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("typo", ["curvez", "trialz", "Runs_"])
def test_an_unknown_table_is_named_and_the_tables_listed(tmp_path, typo):
    _store(tmp_path / "store")
    proc = _cli("query", f"SELECT * FROM {typo}", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert f"there is no table '{typo}'" in line, line
    assert "trials, runs and curves" in line and "(this store holds: trials, runs)" in line, line
    assert "no 'curves' table" not in line and "Did you mean" not in line, line


def test_the_curves_table_of_a_store_without_curves_is_still_explained(tmp_path):
    _store(tmp_path / "store")
    proc = _cli("query", "SELECT * FROM curves", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2 and "no run in it kept learning curves" in proc.stderr, proc.stderr


# --- a compaction says what it deleted --------------------------------------------------------

# `attnsweep store compact` killed (SIGKILL) at its first deletion of a part file: the new
# file is written, the files it replaces are all still there.
KILLED_AT_UNLINK = """
import os, pathlib, signal, sys
unlink = pathlib.Path.unlink
def killing(self, *a, **kw):
    if self.name.startswith("part-") and "trials" in self.parts:
        os.kill(os.getpid(), signal.SIGKILL)
    return unlink(self, *a, **kw)
pathlib.Path.unlink = killing
from attnsweep.cli import main
sys.argv = ["attnsweep", "store", "compact", "--store", sys.argv[1]]
main()
"""


def test_a_compaction_that_deletes_files_left_by_a_killed_one_says_how_many(tmp_path):
    store = _store(tmp_path / "store", parts=3)
    folder = store.run_dir("trials", "tiny", RUN)
    assert len(list(folder.glob("part-*.parquet"))) == 3
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_UNLINK, "store"], cwd=tmp_path, timeout=300)
    assert killed.returncode == -9
    left = sorted(folder.glob("part-*.parquet"))
    assert len(left) == 4  # the 3 parts and the file that replaces them
    proc = _cli("store", "compact", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(list(folder.glob("part-*.parquet"))) == 1
    assert "3 superseded file(s) deleted" in proc.stdout, proc.stdout
    assert ResultsStore(tmp_path / "store").scan_run_trials("tiny", RUN).collect().height == 8


# --- a running run's published text counts what is stored --------------------------------------


@pytest.mark.slow
def test_publishing_a_running_run_states_the_trials_stored(tmp_path):
    _store(tmp_path / "store", status="running")  # the 8 rows stored, the record of the run's start
    proc = _cli("report", RUN, "--store", "store", "--out", "pub", "--publish", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "8 of 8 trials stored" in proc.stderr, proc.stderr  # the warning
    findings = (tmp_path / "pub" / "findings.md").read_text()
    assert "(8 trials stored of at most 8 planned: 8 done; running;" in findings, findings[:1500]
    assert "0 trials stored" not in findings
    page = (tmp_path / "pub" / "report.html").read_text()
    assert "running: 8 trials (done 8, failed 0, diverged 0, lost 0)" in page
