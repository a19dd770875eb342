"""Every parser bounded (issue 48, item 5): the JSON and YAML a run record holds are held to a
size in bytes and a nesting depth before anything parses them (results/record_text.py), and
each refusal is one line, exit 2, naming the record's file and the field. Before: 200,000
nested brackets in ``cell_counts`` ended analyze in a RecursionError traceback, and a
``spec_yaml`` of any size was parsed (50 MB took 99 s). The records are written by the
store's own writer into a real store, and the commands run as real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnsweep.orchestrator.trials_table import run_schema
from attnsweep.results import ResultsStore
from attnsweep.results.record_text import MAX_DEPTH, MAX_SPEC_YAML_BYTES, RECORD_TEXT_BYTES, json_depth, yaml_depth

ROOT = Path(__file__).resolve().parents[1]
RUN_FILE = "runs/sweep=tiny/run_id={run}/run.parquet"

DEEP = "[" * 200_000 + "]" * 200_000
HOSTILE = {
    "deep cell_counts": ("cell_counts", DEEP, "nested more than"),
    "deep packages": ("packages", '{"a": ' + DEEP + "}", "nested more than"),
    "deep spec_yaml": ("spec_yaml", "name: tiny\nseeds: " + "[" * 500 + "]" * 500 + "\n", "nested more than"),
    "deeper than libyaml goes": (
        "spec_yaml",
        "name: tiny\nseeds: " + "[" * 5_000 + "]" * 5_000 + "\n",
        "nested more than",
    ),
    "huge spec_yaml": ("spec_yaml", "name: tiny\n# " + "x" * (2 * MAX_SPEC_YAML_BYTES) + "\n", "bytes"),
    "huge trial_fields": ("trial_fields", "m," * RECORD_TEXT_BYTES["trial_fields"], "bytes"),
}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def _store_with(root: Path, field: str, value: str) -> str:
    """A store of one finished run (tests/test_guarantees.py's) whose record's ``field`` is
    ``value``, written again by the store's own writer; returns the run id."""
    from test_guarantees import MINE, make_store

    store = make_store(root / "store", MINE)
    path = root / "store" / RUN_FILE.format(run=MINE)
    record = pq.read_table(path).to_pylist()[0]
    record[field] = value
    ResultsStore(root / "store").write_run("tiny", MINE, record, run_schema())
    assert store is not None
    return MINE


def _refused(done: subprocess.CompletedProcess, field: str, words: str, run: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: "), done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and len(done.stderr.splitlines()) <= 2, done.stderr  # one line (a warning may precede)
    assert RUN_FILE.format(run=run) in lines[0] and f": {field} " in lines[0] and words in lines[0], lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_analyze_refuses_a_record_beyond_its_bounds_naming_file_and_field(tmp_path, case):
    field, value, words = HOSTILE[case]
    run = _store_with(tmp_path, field, value)
    start = time.monotonic()
    done = _cli("analyze", run, "--store", "store", "--format", "json", cwd=tmp_path)
    _refused(done, field, words, run)
    assert done.stdout == ""
    assert time.monotonic() - start < 60  # refused before any parse, not after one


@pytest.mark.slow
def test_report_and_store_check_refuse_it_too(tmp_path):
    field, value, words = HOSTILE["deep cell_counts"]
    run = _store_with(tmp_path, field, value)
    done = _cli("report", run, "--store", "store", "--out", "out", cwd=tmp_path)
    _refused(done, field, words, run)
    assert not (tmp_path / "out").exists()
    checked = _cli("store", "check", "--store", "store", cwd=tmp_path)
    assert "Traceback" not in checked.stderr, checked.stderr[-3000:]
    assert (
        RUN_FILE.format(run=run) in checked.stdout + checked.stderr and "cell_counts" in checked.stdout + checked.stderr
    )


@pytest.mark.slow
def test_a_published_folder_whose_record_is_too_deep_is_refused(tmp_path):
    from test_guarantees import MINE, make_store

    from attnsweep.presentation.publish import write_sums

    make_store(tmp_path / "store", MINE)
    done = _cli("report", MINE, "--store", "store", "--out", "pub", "--publish", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = tmp_path / "pub" / "runs.parquet"
    table = pq.read_table(runs)
    i = table.schema.get_field_index("cell_counts")
    table = table.set_column(i, "cell_counts", pa.array([DEEP] * table.num_rows, pa.string()))
    pq.write_table(table, runs)
    write_sums(tmp_path / "pub")  # the digests match: the contents themselves are checked
    done = _cli("report", "--from", "pub", "--out", "again", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.count("\n") == 1 and "runs.parquet" in done.stderr and "cell_counts" in done.stderr
    assert not (tmp_path / "again").exists()


def test_the_depths_and_sizes_of_what_runs_write_are_far_within_the_bounds():
    """The bounds sit far above every record in the repository's published stores and every
    spec in sweeps/ (the numbers results/record_text.py and docs/store.md state)."""
    deepest = {"json": 0, "yaml": 0}
    largest: dict[str, int] = {}
    for runs in sorted((ROOT / "docs" / "findings").rglob("runs.parquet")):
        for record in pq.read_table(runs).to_pylist():
            for field in RECORD_TEXT_BYTES:
                text = record.get(field) or ""
                largest[field] = max(largest.get(field, 0), len(text.encode()))
            deepest["json"] = max(deepest["json"], json_depth(record.get("cell_counts") or ""))
            deepest["yaml"] = max(deepest["yaml"], yaml_depth(record.get("spec_yaml") or ""))
    for spec in (ROOT / "sweeps").glob("*.yaml"):
        largest["spec_yaml"] = max(largest["spec_yaml"], spec.stat().st_size)
        deepest["yaml"] = max(deepest["yaml"], yaml_depth(spec.read_text()))
    assert 0 < deepest["json"] <= 4 and 0 < deepest["yaml"] <= 4 and MAX_DEPTH >= 8 * 4
    for field, size in largest.items():
        assert size > 0 and size * 100 < RECORD_TEXT_BYTES[field], (field, size)


def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth('{"fields": ["T"], "cells": [[8, 3], ["[[{", 1]]}') == 3
    assert json_depth('"[[[["') == 0 and json_depth("") == 0 and json_depth(DEEP) == 200_000
    assert yaml_depth("grid:\n  m: {start: 8, stop: 256}\n") == 3  # the top mapping counts
    # An unterminated string is read to the end, as a parser reads it: its brackets do not count.
    assert json_depth('[["x", "[[[') == 2 and json_depth('["a\\\\"]') == 1


def test_json_depth_of_a_string_that_never_closes_is_counted_in_one_pass():
    # A record field of 1 MB: a quote, then escaped quotes, never closed. Counted by rescanning
    # from each quote it took hours (20 s at 80 KB); one pass takes milliseconds. The thread's
    # wait only keeps a regression from hanging the suite.
    import threading

    text, got = '"' + '\\"' * 500_000, []
    counting = threading.Thread(target=lambda: got.append(json_depth(text)), daemon=True)
    counting.start()
    counting.join(120)
    assert got == [0]


def test_a_lock_holder_file_too_deep_to_parse_names_another_process(tmp_path):
    """The run lock's holder file (locks/SWEEP/RUN.holder.json, in the store) is JSON read for
    the message of a second driver: 64 KiB of '[' made that message a RecursionError."""
    from test_guarantees import MINE, make_store

    from attnsweep.results.locks import RunLock, RunLockedError

    store = make_store(tmp_path / "store", MINE)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom attnsweep.results import ResultsStore\nfrom attnsweep.results.locks import RunLock\n"
            f"with RunLock(ResultsStore(sys.argv[1]), 'tiny', {MINE!r}):\n    print('held', flush=True)\n"
            "    time.sleep(120)\n",
            str(tmp_path / "store"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        lock = RunLock(store, "tiny", MINE)
        lock.holder_path.write_text("[" * 64 * 1024)  # the most the holder file is read
        with pytest.raises(RunLockedError, match="is being written by another process"):
            lock.__enter__()
    finally:
        holder.kill()
        holder.wait()


def test_a_compacted_files_list_too_deep_to_parse_is_ignored_not_a_traceback(tmp_path):
    """A part file's metadata naming the files it replaces (what store compact writes, JSON) is
    read bounded: 200,000 nested brackets there ended every read of the store in a
    RecursionError traceback. The file's rows still read; it replaces nothing."""
    from test_guarantees import MINE, make_store

    from attnsweep.results.atomic_write import write_parquet_atomic

    make_store(tmp_path / "store", MINE)
    folder = tmp_path / "store" / "trials" / "sweep=tiny" / f"run_id={MINE}"
    (part,) = folder.glob("*.parquet")
    table = pq.read_table(part)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"attnsweep.replaces": DEEP.encode()})
    write_parquet_atomic(table.slice(0, 1), folder / "part-deep.parquet")
    done = _cli("query", "select count(*) as n from trials", "--store", "store", "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout == "n\n9\n"  # 8 rows and the deep file's one: it replaces nothing


@pytest.mark.slow
@pytest.mark.parametrize(
    "value", ['{"fields": 5, "cells": "x"}', '{"fields": ["m"], "cells": [[' + "1" * 100_000 + ", 2]]}", '"x"', "[1]"]
)
def test_a_cell_count_record_of_another_shape_is_no_traceback(tmp_path, value):
    # The run's rows are all there; the per-cell counts only explain a gap, so a record of another shape
    # (made by hand: within the bounds, but not what a run writes) is left unread, not a crash.
    run = _store_with(tmp_path, "cell_counts", value)
    done = _cli("analyze", run, "--store", "store", "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.splitlines()[0].startswith("run_id,")
