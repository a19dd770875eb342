"""What ``attnsweep query`` reads and writes besides the store: ``--output`` writes only what
the user named (every kind of file tried, the file system checked afterwards), the SQL it
reads is bounded, DuckDB gets our memory limit and spills only into a folder of its own that
goes with the query, and files a compaction removes under a query are retried or named."""

import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from attnsweep.cli import app
from attnsweep.results import QueryError, ResultsStore, TrialWriter, stream_query
from attnsweep.results.query import MAX_SQL_BYTES
from attnsweep.results.query_limits import DEFAULT_MEMORY_LIMIT

ROOT = Path(__file__).resolve().parents[1]
SQL = "SELECT seed FROM trials ORDER BY seed"
CSV = "seed\n0\n1\n2\n"
RUN = "20261130-010203-abcdef"


def _store(root: Path, parts: int = 1) -> Path:
    schema = pa.schema([("trial_id", pa.string()), ("seed", pa.int64())])
    writer = TrialWriter(ResultsStore(root), "sw", RUN, schema, flush_rows=100, flush_s=60)
    for p in range(parts):
        writer.append([dict(trial_id=f"t{p}-{i}", seed=i) for i in range(3)])
        writer.flush()
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return _store(tmp_path_factory.mktemp("io") / "store")


def _query(store, *args, input=None):
    return CliRunner().invoke(app, ["query", *args, "--store", str(store)], input=input)


def _csv_to(store, output: Path):
    return _query(store, SQL, "--format", "csv", "--output", str(output))


def _no_partials(folder: Path) -> None:
    assert not [p for p in folder.iterdir() if p.name.endswith(".partial")]


# -- --output, for every kind of file ------------------------------------------------------
def test_a_regular_file_is_replaced_whole_keeping_its_permissions(store, tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("old\n")
    out.chmod(0o640)
    inode = out.stat().st_ino
    result = _csv_to(store, out)
    assert result.exit_code == 0, result.output
    assert out.read_text() == CSV and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.stat().st_ino != inode  # written aside and renamed over it
    _no_partials(tmp_path)


def test_a_new_path_is_created(store, tmp_path):
    result = _csv_to(store, tmp_path / "new.csv")
    assert result.exit_code == 0 and (tmp_path / "new.csv").read_text() == CSV
    _no_partials(tmp_path)


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_stays_a_link_and_its_target_is_written(store, tmp_path, dangling):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.csv"
    if not dangling:
        target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    result = _csv_to(store, link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == CSV and not target.is_symlink()
    _no_partials(tmp_path)
    _no_partials(tmp_path / "real")  # the temporary file went beside the target, not the link


def test_a_fifo_is_written_through(store, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    result = _csv_to(store, fifo)
    reader.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert got == [CSV] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("device", ["/dev/null", "link-to-null"])
def test_a_character_device_is_written_through_and_stays_a_device(store, tmp_path, device):
    before = os.stat("/dev/null")
    path = Path(device)
    if device == "link-to-null":
        path = tmp_path / device
        path.symlink_to("/dev/null")
    result = _csv_to(store, path)
    assert result.exit_code == 0, result.output
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino,
        before.st_rdev,
    )
    assert not list(Path("/dev").glob(".null*"))  # no temporary file beside the device
    assert path.is_symlink() or path == Path("/dev/null")


def test_a_character_device_that_refuses_writes_is_one_error(store):
    result = _csv_to(store, Path("/dev/full"))
    assert result.exit_code == 2 and "cannot write /dev/full: No space left on device" in result.stderr
    assert result.stderr.count("\n") == 1 and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def _block_device(path: Path) -> bool:
    try:
        os.mknod(path, 0o600 | stat.S_IFBLK, os.makedev(0, 0))  # no driver behind it: nothing could be written
    except (PermissionError, OSError):
        return False
    return True


@pytest.mark.parametrize("kind", ["folder", "link-to-folder", "socket", "block device"])
def test_a_folder_a_socket_or_a_block_device_is_refused_and_left_alone(store, tmp_path, kind):
    path = tmp_path / "x"
    if kind == "folder":
        path.mkdir()
        (path / "inside").write_text("keep")
    elif kind == "link-to-folder":
        (tmp_path / "d").mkdir()
        path.symlink_to(tmp_path / "d")
    elif kind == "socket":
        path = Path(tempfile.mkdtemp()) / "s"  # a socket's path is at most 108 bytes
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    elif not _block_device(path):
        pytest.skip("making a block device needs CAP_MKNOD")
    before = os.lstat(path)
    result = _csv_to(store, path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert f"--output: {path} is a " in result.stderr and "nothing was written" in result.stderr
    after = os.lstat(path)
    assert (stat.S_IFMT(after.st_mode), after.st_ino, after.st_rdev) == (
        stat.S_IFMT(before.st_mode),
        before.st_ino,
        before.st_rdev,
    )
    if kind == "folder":
        assert [p.name for p in path.iterdir()] == ["inside"]
    _no_partials(path.parent)


def test_a_missing_folder_or_a_file_as_folder_is_one_error(store, tmp_path):
    (tmp_path / "file").write_text("")
    for path, message in (
        (tmp_path / "none" / "r.csv", f"the folder {tmp_path / 'none'} does not exist"),
        (tmp_path / "file" / "r.csv", "Not a directory"),
        (tmp_path / "loop", "Too many levels of symbolic links"),
    ):
        if path.name == "loop":
            path.symlink_to(path)
        result = _csv_to(store, path)
        assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "loop"]


def test_a_query_that_fails_midway_leaves_the_file_as_it_was(store, tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("old\n")
    sql = "SELECT CASE WHEN r.range < 100000 THEN r.range ELSE error('boom') END AS x FROM range(200000) r"
    result = _query(store, sql, "--format", "csv", "--output", str(out))
    assert result.exit_code == 2 and "boom" in result.stderr
    assert out.read_text() == "old\n"
    _no_partials(tmp_path)


def test_an_interrupt_leaves_the_file_and_removes_the_spill_folder(store, tmp_path, monkeypatch):
    import attnsweep.presentation.query_output as query_output

    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    real = query_output.write_batches

    def interrupted(schema, batches, fmt, out):
        real(schema, iter([next(batches)]), fmt, out)
        raise KeyboardInterrupt

    monkeypatch.setattr(query_output, "write_batches", interrupted)
    out = tmp_path / "r.csv"
    out.write_text("old\n")
    result = _query(store, "SELECT r.range FROM range(200000) r", "--format", "csv", "--output", str(out))
    assert result.exit_code == 130 and "interrupted" in result.stderr
    assert out.read_text() == "old\n" and list(spill.iterdir()) == []
    _no_partials(tmp_path)


def test_ctrl_c_in_duckdb_exits_130_and_removes_the_spill_folder(store, tmp_path):
    import signal

    spill, out = tmp_path / "tmp", tmp_path / "big.csv"
    spill.mkdir()
    out.write_text("old\n")
    sql = "SELECT r.range % 10000000 AS k, count(*) AS n FROM range(60000000) r GROUP BY k ORDER BY k"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            sql,
            "--store",
            str(store),
            "--format",
            "csv",
            "--memory-limit",
            "100MB",
            "--output",
            str(out),
        ],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(spill)},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(len(list(d.iterdir())) > 1 for d in spill.iterdir()):
        time.sleep(0.1)  # until DuckDB spills
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130 and stderr.strip() == f"interrupted: {out} is as it was"
    assert list(spill.iterdir()) == [] and out.read_text() == "old\n"
    _no_partials(tmp_path)


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "attnsweep.cli", "query", *args], cwd=ROOT, timeout=300, **kw)


def test_dev_stdout_is_the_callers_descriptor_as_it_was_opened(store, tmp_path):
    args = (SQL, "--store", str(store), "--format", "csv", "--output", "/dev/stdout")
    piped = _cli(*args, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stdout == CSV, piped.stderr
    log = tmp_path / "log.txt"
    log.write_text("before\n")
    with open(log, "a") as fh:  # a shell's >>: the result is appended, the file not replaced
        appended = _cli(*args, stdout=fh, stderr=subprocess.PIPE, text=True)
    assert appended.returncode == 0, appended.stderr
    assert log.read_text() == "before\n" + CSV


# -- the SQL read is bounded ----------------------------------------------------------------
def test_sql_from_an_endless_file_or_stdin_is_refused_at_once(store, tmp_path):
    result = _query(store, "--file", "/dev/zero")
    assert result.exit_code == 2 and f"more than {MAX_SQL_BYTES:,} bytes" in result.stderr
    # The peak of this process's own memory (VmHWM): ru_maxrss would also count the pytest
    # process it was forked from, which Linux carries across exec.
    peak = (
        "import re, sys\nfrom attnsweep.cli import main\nsys.argv = ['attnsweep', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
        "print(code, int(hwm) * 1024, file=sys.stderr)\n"
    )
    with open("/dev/zero", "rb") as zero:
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", peak, "query", "-", "--store", str(store)],
            stdin=zero,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - start
    code, rss = proc.stderr.split()[-2:]
    assert code == "2" and f"stdin: more than {MAX_SQL_BYTES:,} bytes" in proc.stderr
    assert int(rss) < 1024 * 2**20 and took < 60  # bounded: the process reads 1 MB, not the stream


def test_sql_too_long_or_not_text_is_one_error(store, tmp_path):
    long = _query(store, "SELECT 1" + " " * MAX_SQL_BYTES)
    assert long.exit_code == 2 and f"longer than {MAX_SQL_BYTES:,} bytes" in long.stderr
    (tmp_path / "bad.sql").write_bytes(b"SELECT '\xff'")
    bad = _query(store, "--file", str(tmp_path / "bad.sql"))
    assert bad.exit_code == 2 and "not UTF-8 text" in bad.stderr
    folder = _query(store, "--file", str(tmp_path))
    assert folder.exit_code == 2 and "--file: cannot read" in folder.stderr
    stdin = _query(store, "-", "--format", "csv", input=b"SELECT 1 AS a")
    assert stdin.exit_code == 0 and stdin.stdout == "a\n1\n"


# -- DuckDB's memory and spill folder ---------------------------------------------------------
def _setting(store, name: str, *args, env=None) -> str:
    result = CliRunner().invoke(
        app,
        [
            "query",
            f"SELECT current_setting('{name}') AS v",
            "--store",
            str(store),
            "--format",
            "csv",
            *args,
        ],
        env=env,
    )
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[1]


def test_duckdb_gets_our_memory_limit_and_its_own_spill_folder(store, tmp_path, monkeypatch):
    def duckdb_says(limit: str) -> str:
        con = duckdb.connect(config={"memory_limit": limit})
        return con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]

    from attnsweep.results.query_limits import engine_limit, memory_bytes

    def ours(limit: str) -> str:  # DuckDB's part of the limit: the result's batches count too
        return duckdb_says(f"{engine_limit(memory_bytes(limit))}B")

    assert _setting(store, "memory_limit") == ours(DEFAULT_MEMORY_LIMIT) != ours("80%")
    assert _setting(store, "memory_limit", "--memory-limit", "123MB") == ours("123MB") != ours("1GiB")
    assert _setting(store, "memory_limit", env={"ATTNSWEEP_QUERY_MEMORY": "1GiB"}) == ours("1GiB")
    assert _setting(store, "max_temp_directory_size", "--spill-limit", "3GiB") == "3.0 GiB"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spill = Path(_setting(store, "temp_directory"))
    assert spill.parent == tmp_path and spill.name.startswith("attnsweep-query-") and not spill.exists()
    assert _setting(store, "lock_configuration") == "true" and _setting(store, "enable_external_access") == "false"


@pytest.mark.parametrize("value", ["abc", "2XB", "-1", "0GB", "150%", "0%", "", "1e3GB", "2 G B"])
def test_a_bad_memory_limit_is_one_error_naming_the_option(store, value):
    results = [_query(store, SQL, "--memory-limit", value)]
    if value:  # an empty variable is an unset one, as for every option of the CLI
        results.append(
            CliRunner().invoke(app, ["query", SQL, "--store", str(store)], env={"ATTNSWEEP_QUERY_MEMORY": value})
        )
    for result in results:
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
        assert "--memory-limit (ATTNSWEEP_QUERY_MEMORY)" in result.stderr and "25%" in result.stderr


def test_a_memory_limit_too_small_to_start_is_one_error(store):
    result = _query(store, SQL, "--memory-limit", "1KB")
    assert result.exit_code == 2 and "--memory-limit 1KB is too little" in result.stderr


def test_a_large_sort_spills_into_its_folder_and_never_the_current_one(store, tmp_path, monkeypatch):
    spill_root, cwd = tmp_path / "tmp", tmp_path / "cwd"
    spill_root.mkdir()
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    monkeypatch.chdir(cwd)
    sql = "SELECT r.range AS k, repeat('x', 20) AS s FROM range(3000000) r ORDER BY hash(k)"
    schema, batches = stream_query(ResultsStore(store), sql, memory_limit="64MB")
    with batches:
        (folder,) = spill_root.iterdir()
        assert any(p.name.endswith(".tmp") for p in folder.iterdir())  # DuckDB spilled, there
        assert sum(b.num_rows for b in batches) == 3_000_000
    assert list(spill_root.iterdir()) == [] and list(cwd.iterdir()) == []


def test_the_spill_folder_goes_on_an_error_and_on_close(store, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(QueryError):
        stream_query(ResultsStore(store), "SELECT nope FROM trials")
    schema, batches = stream_query(ResultsStore(store), SQL)
    assert len(list(tmp_path.iterdir())) == 1
    batches.close()  # never read
    assert list(tmp_path.iterdir()) == []


# -- files a compaction removes under a query ---------------------------------------------------
def test_a_file_that_vanishes_before_reading_is_listed_again(tmp_path, monkeypatch):
    root = _store(tmp_path / "store", parts=2)
    store = ResultsStore(root)
    real = store.arrow_dataset
    calls = []

    def vanishing(table="trials"):
        dataset = real(table)
        calls.append(table)
        if table == "trials" and len(calls) == 1:
            os.unlink(dataset.files[0])  # gone between the listing and the scan
        return dataset

    monkeypatch.setattr(store, "arrow_dataset", vanishing)
    schema, batches = stream_query(store, "SELECT count(*) AS n FROM trials")
    assert [b.to_pylist() for b in batches] == [[{"n": 3}]]  # the query ran again on the file left


def test_files_that_keep_vanishing_are_named_with_the_reason(tmp_path, monkeypatch):
    root = _store(tmp_path / "store", parts=4)
    store = ResultsStore(root)
    real = store.arrow_dataset

    def vanishing(table="trials"):
        dataset = real(table)
        if table == "trials":
            os.unlink(dataset.files[0])
        return dataset

    monkeypatch.setattr(store, "arrow_dataset", vanishing)
    vanished = r"part-.*\.parquet vanished during the query \(a compaction\?\): run it again"
    with pytest.raises(QueryError, match=vanished):
        list(stream_query(store, "SELECT count(*) AS n FROM trials")[1])


@pytest.mark.slow
def test_a_query_during_compaction_answers_or_names_the_vanished_file(tmp_path):
    root = _store(tmp_path / "store", parts=1)
    stop = threading.Event()

    def compact_again_and_again():
        from attnsweep.results.integrity import compact_store

        n = 0
        schema = pa.schema([("trial_id", pa.string()), ("seed", pa.int64())])
        while not stop.is_set():
            writer = TrialWriter(ResultsStore(root), "sw", RUN, schema, flush_rows=10, flush_s=60)
            writer.append([dict(trial_id=f"c{n}-{i}", seed=i) for i in range(3)])
            writer.flush()
            n += 1
            compact_store(ResultsStore(root))
            stop.wait(0.2)  # a compaction again and again, but not back to back: some query must fit between

    compactor = threading.Thread(target=compact_again_and_again, daemon=True)
    compactor.start()
    outcomes = []
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            result = _query(root, "SELECT count(*) AS n FROM trials", "--format", "csv")
            outcomes.append(result.exit_code)
            if result.exit_code:
                assert result.exit_code == 2 and isinstance(result.exception, (SystemExit, type(None)))
                assert "vanished during the query (a compaction?): run it again" in result.stderr, result.output
    finally:
        stop.set()
        compactor.join(timeout=60)
    assert 0 in outcomes


def test_a_reader_that_stops_early_ends_the_query_quietly(store):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            "SELECT r.range FROM range(3000000) r",
            "--store",
            str(store),
            "--format",
            "csv",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline() == b"range\n"
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(timeout=300) == 141 and proc.stderr.read() == b""


def test_sigterm_stops_a_query_started_with_ctrl_c_ignored(store, tmp_path):
    # A script's `query ... &` starts with SIGINT ignored: SIGTERM (kill, timeout) must still
    # stop DuckDB at once, the ignored Ctrl-C staying ignored. A scan of 10^10 rows streams
    # through a filter: DuckDB looks at Python's signals only between tasks, never in it.
    import signal

    spill = tmp_path / "tmp"
    spill.mkdir()
    sql = "SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range::VARCHAR || b.range::VARCHAR LIKE '%x%'"
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", "query", sql, "--store", str(store), "--format", "csv"],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(spill)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - no thread here
    )
    try:
        time.sleep(8)  # started, scanning
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)  # the query alone runs for hours
    finally:
        if proc.poll() is None:  # a regression: the query and its child run on
            for child in _children(proc.pid):
                os.kill(child, signal.SIGKILL)
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and stderr.strip() == "interrupted", stderr
    assert list(spill.iterdir()) == []


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.parent.name))
    return out


def test_a_query_child_killed_from_outside_is_not_blamed_on_the_memory_limit(store, tmp_path):
    import signal

    sql = "SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range::VARCHAR || b.range::VARCHAR LIKE '%x%'"
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", "query", sql, "--store", str(store), "--format", "csv"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _children(proc.pid):
            time.sleep(0.2)
        time.sleep(3)  # the child scanning
        (child,) = _children(proc.pid)
        os.kill(child, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, stderr
    assert (
        stderr.startswith("error: query's process was killed by SIGKILL: from outside")
        and "--memory-limit" not in stderr
    )
