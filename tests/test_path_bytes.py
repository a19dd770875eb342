"""Paths are bytes until proven text (issue 48, item 4): a path argument whose bytes are not
UTF-8 (here b"\\xff", which Python's command line reads as the lone surrogate "\\udcff") is
refused in one line, exit 2, naming the argument, before anything is read or written, by every
command. Before, every command that reached the store ended in a UnicodeEncodeError traceback,
and ``run`` had first written a run record, leaving a dead "running" run. Each command runs
as a real process, given the bytes as the shell would give them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from attnsweep.results import ResultsStore, TrialWriter

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "specs" / "rep.yaml"
BAD = b"st\xffore"


def _attnsweep(*args: bytes | str, cwd: bytes | Path | None = None) -> subprocess.CompletedProcess:
    argv = [os.fsencode(sys.executable), b"-m", b"attnsweep.cli", *(os.fsencode(a) for a in args)]
    return subprocess.run(argv, capture_output=True, timeout=300, cwd=cwd)


def _refused(done: subprocess.CompletedProcess, name: str) -> None:
    err = done.stderr.decode("utf-8")  # the message itself is UTF-8 text
    assert done.returncode == 2, (done.returncode, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert err.startswith(f"error: {name}: "), err
    assert "\\xff" in err and "not UTF-8" in err, err
    assert done.stdout == b""


def _tree(root: bytes) -> list[bytes]:
    return sorted(os.path.join(d, f) for d, dirs, files in os.walk(root) for f in [*dirs, *files])


@pytest.fixture
def work(tmp_path) -> bytes:
    """A folder holding a store of one run at a path whose bytes are not UTF-8 (b"st\\xffore"),
    and the spec, both written through byte paths."""
    here = os.fsencode(tmp_path)
    store = os.path.join(here, BAD)
    results = ResultsStore(os.fsdecode(store))
    schema = pa.schema([("trial_id", pa.string()), ("seed", pa.int64())])
    writer = TrialWriter(results, "tiny", "20261130-010203-abcdef", schema, flush_rows=10, flush_s=60)
    writer.append([dict(trial_id="t0", seed=0)])
    writer.flush()
    results.write_run("tiny", "20261130-010203-abcdef", {"status": "done", "started_at": 1.0, "n_trials": 1})
    shutil.copyfile(SPEC, os.path.join(here, b"sp\xffec.yaml"))
    return here


def test_run_refuses_the_store_path_and_writes_nothing(work):
    new_store = os.path.join(work, b"new\xffstore")
    done = _attnsweep("run", str(SPEC), "--local", "--store", new_store)
    _refused(done, "--store")
    assert not os.path.exists(new_store)  # no record of a run that never ran
    before = _tree(work)
    _refused(_attnsweep("run", str(SPEC), "--local", "--store", os.path.join(work, BAD)), "--store")
    assert _tree(work) == before


@pytest.mark.parametrize(
    "args, name",
    [
        (("query", "select count(*) from trials", "--store", "{store}"), "--store"),
        (("report", "--store", "{store}"), "--store"),
        (("store", "check", "--store", "{store}"), "--store"),
        (("runs", "--store", "{store}"), "--store"),
        (("analyze", "--store", "{store}"), "--store"),
        (("validate", "{spec}"), "SPEC"),
        (("init", "{new}"), "[PATH]"),
        (("query", "select 1", "--store", "{good}", "--output", "{new}"), "--output"),
    ],
)
def test_every_command_refuses_a_path_that_is_not_utf8(work, args, name):
    paths = {
        "{store}": os.path.join(work, BAD),
        "{spec}": os.path.join(work, b"sp\xffec.yaml"),
        "{new}": os.path.join(work, b"ne\xffw.yaml"),
        "{good}": os.path.join(work, b"good-store"),
    }
    if "{good}" in args:
        shutil.copytree(paths["{store}"], paths["{good}"])
    before = _tree(work)
    done = _attnsweep(*(paths.get(a, a) for a in args))
    _refused(done, name)
    assert _tree(work) == before


def test_a_store_path_from_the_environment_is_refused_too(work):
    env = {**os.environb, b"ATTNSWEEP_STORE": os.path.join(work, BAD)}
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"attnsweep.cli", b"runs"], capture_output=True, timeout=300, env=env
    )
    _refused(done, "--store")


def test_a_relative_store_in_a_folder_that_is_not_utf8_is_refused(work):
    folder = os.path.join(work, b"fo\xffld")
    os.mkdir(folder)
    done = _attnsweep("run", str(SPEC), "--local", "--store", "results-store", cwd=folder)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and "current folder" in err and "\\xff" in err, err
    assert os.listdir(folder) == []


@pytest.mark.parametrize("command", [("run", str(SPEC), "--local", "--no-analyze"), ("store", "check"), ("runs",)])
def test_a_utf8_store_path_through_a_link_to_a_folder_that_is_not_is_refused(work, command):
    # run trained every trial and wrote the store, then ended in a traceback (found by a hostile pass).
    target = os.path.join(work, b"di\xffr")
    os.mkdir(target)
    os.symlink(target, os.path.join(work, b"link"))
    store = os.path.join(work, b"link", b"fresh-store")
    before = _tree(work)
    done = _attnsweep(*command, "--store", store)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("error: --store: ") and "resolves to" in err and "\\xff" in err, err
    assert _tree(work) == before and done.stdout == b""


@pytest.mark.slow
def test_a_file_in_the_store_whose_name_is_not_utf8_is_set_aside_not_a_traceback(tmp_path):
    from test_guarantees import MINE, make_store

    make_store(tmp_path / "store", MINE)
    folder = os.fsencode(tmp_path / "store" / "trials" / "sweep=tiny" / f"run_id={MINE}")
    good = next(n for n in os.listdir(folder) if n.endswith(b".parquet"))
    shutil.copy(os.path.join(folder, good), os.path.join(folder, b"part-\xff\x9b2J.parquet"))
    for args in (
        ("store", "check", "--store", "store"),
        ("analyze", MINE, "--store", "store", "--format", "csv"),
        ("report", MINE, "--store", "store", "--out", "rep"),
        ("query", "select count(*) as n from trials", "--store", "store", "--format", "csv"),
    ):
        done = _attnsweep(*args, cwd=tmp_path)
        assert b"Traceback" not in done.stderr, (args, done.stderr[-2000:])
        assert b"\x9b" not in done.stdout + done.stderr, args  # the byte is written out, not sent
        if args[0] == "store":
            assert done.returncode == 1 and b"not UTF-8" in done.stdout and b"\\xff\\x9b2J" in done.stdout, done.stdout
        else:
            assert done.returncode == 0, (args, done.stderr[-2000:])
    assert _attnsweep(
        "query", "select count(*) as n from trials", "--store", "store", "--format", "csv", cwd=tmp_path
    ).stdout.split() == [b"n", b"8"]


def test_query_with_a_tmpdir_that_is_not_utf8_is_one_line(work, tmp_path):
    # DuckDB spills under TMPDIR and takes the folder as UTF-8: it raised std::bad_cast (a traceback).
    good = os.path.join(work, b"good-store")
    shutil.copytree(os.path.join(work, BAD), good)
    tmp = os.path.join(work, b"tm\xffp")
    os.mkdir(tmp)
    env = {**os.environb, b"TMPDIR": tmp}
    argv = [os.fsencode(sys.executable), b"-m", b"attnsweep.cli", b"query", b"select count(*) AS n FROM trials"]
    done = subprocess.run([*argv, b"--store", good, b"--format", b"csv"], capture_output=True, timeout=300, env=env)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "spill folder" in err and "\\xff" in err and "TMPDIR" in err, err
    assert os.listdir(tmp) == []
