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


# --- analyze refuses a linked figure folder, as report does -------------------------------------


@pytest.mark.slow
def test_analyze_refuses_a_figure_folder_that_is_a_link(tmp_path):
    _store(tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "figs").symlink_to(elsewhere, target_is_directory=True)
    proc = _cli("analyze", RUN, "--store", "store", "--figures", "figs", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"error: --figures: figs is a link to {elsewhere}; files are written only inside {tmp_path}" in (
        proc.stderr
    ), proc.stderr
    assert list(elsewhere.iterdir()) == [] and proc.stdout == ""  # nothing written, nothing analysed


@pytest.mark.slow
@pytest.mark.parametrize("link", ["figures", "figures/tiny", f"figures/tiny/{RUN}"])
def test_analyze_without_figures_writes_nothing_through_a_link_where_they_once_went(tmp_path, link):
    # analyze writes figures only into a folder --figures names (issue 49): the folder they
    # once went to by default is not touched, a link there included.
    _store(tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / link).symlink_to(elsewhere, target_is_directory=True)
    proc = _cli("analyze", RUN, "--store", "store", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "critical sample size m*" in proc.stdout
    assert list(elsewhere.iterdir()) == []


# --- a full stdout is stdout's fault -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_a_full_stdout_is_said_to_be_stdout(tmp_path, fmt):
    _store(tmp_path / "store")
    with open("/dev/full", "w") as full:
        proc = _cli("analyze", RUN, "--store", "store", "--figures", "figs", "--format", fmt, cwd=tmp_path, stdout=full)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "error: stdout could not be written: No space left on device" in proc.stderr, proc.stderr
    assert "no figures" not in proc.stderr, proc.stderr  # the figure folder is fine ...
    if fmt == "table":
        assert (tmp_path / "figs" / "m_star_vs_T.png").stat().st_size > 0  # ... and holds the figures


# --- SIGTERM as a run ends ---------------------------------------------------------------------

RUN_SPEC = (
    "name: ends\nseeds: 2\ngrid: {m: [8, 16]}\n"
    "fixed: {task: and, T: 8, s: 1, d: 8, heads: 2, max_epochs: 20, n_test: 100}\nanalysis: {n_boot: 50}\n"
)
"""4 trials (2 seeds x 2 widths), a few seconds with --local."""

# `attnsweep run` that sends itself a real SIGTERM at one moment of a run's end: as its record
# is written at the end (the second write of the run's record; the first is its start), as its
# executor stops, right after the run returns to the command, as the analysis prints.
SIGTERM_AT = """
import os, signal, sys
where = sys.argv.pop(1)

def term(fn, after=False):
    def wrapped(*a, **kw):
        wrapped.calls += 1
        if wrapped.calls == wrapped.at and not after:
            os.kill(os.getpid(), signal.SIGTERM)
        out = fn(*a, **kw)
        if after:
            os.kill(os.getpid(), signal.SIGTERM)
        return out
    wrapped.calls, wrapped.at = 0, 1
    return wrapped

if where == "record":
    from attnsweep.results.store import ResultsStore
    ResultsStore.write_run = term(ResultsStore.write_run)
    ResultsStore.write_run.at = 2
elif where == "shutdown":
    import attnsweep.orchestrator.executors as ex
    ex.LocalExecutor.shutdown = term(ex.LocalExecutor.shutdown)
elif where == "returned":
    import attnsweep.api as api
    api.run = term(api.run, after=True)
elif where == "analysis":
    import attnsweep.presentation.terminal as terminal
    terminal.print_analysis = term(terminal.print_analysis)
from attnsweep.cli import main
sys.argv = ["attnsweep", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["record", "shutdown", "returned", "analysis"])
def test_sigterm_as_a_run_ends_still_prints_its_summary(tmp_path, moment):
    (tmp_path / "spec.yaml").write_text(RUN_SPEC)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-c", SIGTERM_AT, moment, "run", "spec.yaml", "--local", "--store", "store"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    store = ResultsStore(tmp_path / "store")
    sweep, run_id = store.latest_run()
    record = store.read_run(sweep, run_id)
    # The run ended before the signal acted: its record says so, with its 4 trials.
    assert (record["status"], record["n_done"]) == ("finished", 4), record
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(("progress:", "warning:"))]
    if moment == "analysis":  # the summary came first, then the analysis was cut
        assert any(line.startswith(f"run {run_id} of sweep ends: done 4; ") for line in lines), lines
        assert f"interrupted: the analysis stopped; run {run_id} is saved: attnsweep analyze {run_id}" in (
            proc.stderr
        ), lines
    else:
        assert (
            f"run {run_id} of sweep ends: done 4; finished; interrupted as it ended, before its analysis: "
            f"attnsweep analyze {run_id} --store store; store store"
        ) in lines, lines


def test_run_refuses_a_linked_figure_folder_before_the_sweep_starts(tmp_path):
    (tmp_path / "spec.yaml").write_text(RUN_SPEC)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "figures").symlink_to(elsewhere, target_is_directory=True)
    proc = _cli("run", "spec.yaml", "--local", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"error: --figures: figures is a link to {elsewhere}" in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "store" / "runs").exists()  # no run began
