"""One terminal rule (issue 48, item 3): text from the store reaches a terminal only with its
control characters, escape sequences and bidirectional overrides written out
(presentation/console_text.py), in every format of ``query`` (the table on a terminal or off
it; CSV and JSON on a terminal; Parquet refused there), as ``runs`` already did. The CLI runs
in a real process whose stdout is a real terminal (a pseudo-terminal in raw mode, so the
terminal adds no carriage returns of its own)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import tty
from pathlib import Path

import pyarrow as pa
import pytest

from attnsweep.results import ResultsStore, TrialWriter

SWEEP, RUN = "tiny", "20261130-010203-abcdef"
HOSTILE = {
    "osc": "\x1b]0;pwned\x07",  # sets the terminal's title
    "clear": "\x1b[2J\x1b[H",  # clears the screen
    "cr": "good\rEVIL",  # overwrites the start of the line
    "bidi": "abc\u202edef",  # shows what follows reversed
}
# What console_text.visible writes for each, derived by hand from its rule.
SHOWN = {
    "osc": "\\x1b]0;pwned\\x07",
    "clear": "\\x1b[2J\\x1b[H",
    "cr": "good\\rEVIL",
    "bidi": "abc\\u202edef",
}
RAW = ("\x1b", "\x07", "\r", "\u202e")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("terminal") / "store"
    results = ResultsStore(root)
    schema = pa.schema([("trial_id", pa.string()), *((k, pa.string()) for k in HOSTILE)])
    writer = TrialWriter(results, SWEEP, RUN, schema, flush_rows=10, flush_s=60)
    writer.append([dict(trial_id="t0", **HOSTILE)])
    writer.flush()
    results.write_run(SWEEP, RUN, {"status": "done", "started_at": 1.0, "n_trials": 1})
    return root


def _on_terminal(*args: str) -> tuple[int, str, str]:
    """``attnsweep ARGS`` in a process whose stdout is a terminal: exit code, what reached the
    terminal, stderr."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no output processing: every byte the process writes arrives as it is
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))  # room for the whole table
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, err = proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8"), err.decode()


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_query_on_a_terminal_writes_control_characters_out(store, fmt):
    code, shown, err = _on_terminal("query", "select * from trials", "--store", str(store), "--format", fmt)
    assert code == 0, err
    for raw in RAW:
        assert raw not in shown, (fmt, raw, shown)
    for key, text in SHOWN.items():
        # JSON writes a backslash as \\ and its own \u001b for ESC; the visible forms still show.
        expected = text if fmt != "json" else text.replace("\\x1b", "\\u001b").replace("\\x07", "\\u0007")
        assert expected in shown, (fmt, key, shown)


def test_query_table_off_a_terminal_is_escaped_too(store):
    done = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "query", "select * from trials", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for raw in RAW:
        assert raw not in done.stdout
    for text in SHOWN.values():
        assert text in done.stdout


def test_query_csv_into_a_pipe_is_the_data_whole(store):
    done = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "query", "select osc, bidi from trials", "--store", str(store)]
        + ["--format", "csv"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"osc,bidi\n{HOSTILE['osc']},{HOSTILE['bidi']}\n"


def test_query_parquet_is_refused_on_a_terminal(store):
    code, shown, err = _on_terminal("query", "select * from trials", "--store", str(store), "--format", "parquet")
    assert code == 2
    assert shown == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "terminal" in err and "--output" in err


def test_for_stream_escapes_for_a_terminal_only():
    """analyze --format csv|json writes through console_text.for_stream: escaped on a terminal,
    whole into a pipe."""
    from attnsweep.presentation.console_text import for_stream

    master, slave = pty.openpty()
    read_end, write_end = os.pipe()
    try:
        with open(slave, "w", closefd=False) as terminal, open(write_end, "w", closefd=False) as pipe:
            assert for_stream(HOSTILE["osc"] + "\n", terminal) == SHOWN["osc"] + "\n"
            assert for_stream(HOSTILE["osc"] + "\n", pipe) == HOSTILE["osc"] + "\n"
    finally:
        for fd in (master, slave, read_end, write_end):
            os.close(fd)
