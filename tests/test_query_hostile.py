"""A hostile tester's second pass at ``attnsweep query`` (issue 23): ``--output`` never writes
into the store, however the path reaches it; bad input (a huge memory limit, a closed stdin or
stdout, bytes that are not UTF-8, a store URI no store can live at) is one line and exit 2;
HUGEINT's 39-digit values come out whole in every format; the table off a terminal shows every
character it can; a path ending in '/' is never written as a file; Ctrl-C stops DuckDB at once."""

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from csv import DictReader as csv_reader
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnsweep.cli import app
from attnsweep.presentation.query_output import QUERY_TABLE_WIDTH
from attnsweep.results import QueryError, ResultsStore, TrialWriter, stream_query
from attnsweep.results.query_limits import MAX_MEMORY_BYTES, check_memory_limit
from attnsweep.results.roots import STORE_SCHEMES

ROOT = Path(__file__).resolve().parents[1]
RUN = "20261130-010203-abcdef"
SWEEP = "tiny"


def _one_run_store(root: Path) -> Path:
    """A store of one run: three trials and the run's record."""
    store = ResultsStore(root)
    schema = pa.schema([("trial_id", pa.string()), ("seed", pa.int64())])
    writer = TrialWriter(store, SWEEP, RUN, schema, flush_rows=100, flush_s=60)
    writer.append([dict(trial_id=f"t{i}", seed=i) for i in range(3)])
    writer.flush()
    store.write_run(SWEEP, RUN, {"status": "done", "started_at": 1.0, "n_trials": 3})
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return _one_run_store(tmp_path_factory.mktemp("hostile") / "store")


def _query(store, *args, env=None):
    return CliRunner().invoke(app, ["query", *args, "--store", str(store)], env=env)


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def _files(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links included, as links) and what it holds."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = "link to " + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# -- 1. --output never writes into the store --------------------------------------------------
def _inside(case: str, root: Path, work: Path) -> tuple[Path, Path]:
    """``(store as named, output)`` for one way of naming a path inside the store ``root``."""
    run_dir, trial_dir = (
        root / "runs" / f"sweep={SWEEP}" / f"run_id={RUN}",
        root / "trials" / f"sweep={SWEEP}",
    )
    part = next((trial_dir / f"run_id={RUN}").glob("part-*.parquet"))
    if case == "the run's record":
        return root, run_dir / "run.parquet"
    if case == "an existing part file":
        return root, part
    if case == "a new part file":
        return root, trial_dir / f"run_id={RUN}" / "part-99.parquet"
    if case == "a new file at the store's top":
        return root, root / "out.csv"
    if case == "a link elsewhere to a folder in the store":
        (work / "link").symlink_to(trial_dir)
        return root, work / "link" / f"run_id={RUN}" / "part-98.parquet"
    if case == "a link elsewhere to the run's record":
        (work / "record.parquet").symlink_to(run_dir / "run.parquet")
        return root, work / "record.parquet"
    if case == "a dangling link elsewhere into the store":
        (work / "new.parquet").symlink_to(trial_dir / f"run_id={RUN}" / "part-97.parquet")
        return root, work / "new.parquet"
    if case == "a path through '..'":
        (work / "elsewhere").mkdir()
        return root, work / "elsewhere" / ".." / ".." / root.name / "runs" / "x.csv"
    if case == "the store named through a link":
        (work / "store-link").symlink_to(root)
        return work / "store-link", run_dir / "run.parquet"
    if case == "a link to a folder above the store":
        (work / "up").symlink_to(root.parent)
        return root, work / "up" / root.name / "trials" / "x.parquet"
    if case == "a relative path":
        return root, Path(os.path.relpath(run_dir / "run.parquet"))
    raise AssertionError(case)


INSIDE = [
    "the run's record",
    "an existing part file",
    "a new part file",
    "a new file at the store's top",
    "a link elsewhere to a folder in the store",
    "a link elsewhere to the run's record",
    "a dangling link elsewhere into the store",
    "a path through '..'",
    "the store named through a link",
    "a link to a folder above the store",
    "a relative path",
]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_output_inside_the_store_is_refused_however_it_is_reached(tmp_path, fmt):
    root = _one_run_store(tmp_path / "store")
    before = _files(root)
    for case in INSIDE:
        work = tmp_path / "work"
        work.mkdir()
        named, output = _inside(case, root, work)
        result = _query(named, "SELECT 1 AS x", "--format", fmt, "--output", str(output))
        _one_line_error(result, f"--output: {output} is inside the results store", "nothing was written")
        assert _files(root) == before, case  # not a byte of the store changed, no file added
        for path in list(work.rglob("*")):
            assert path.is_symlink() or path.is_dir(), (
                case,
                path,
            )  # and nothing written beside it either
        shutil.rmtree(work)
    record = _query(root, "SELECT run_id, status FROM runs", "--format", "csv")
    trials = _query(root, "SELECT count(*) AS n FROM trials", "--format", "csv")
    assert record.stdout == f"run_id,status\n{RUN},done\n" and trials.stdout == "n\n3\n"


def test_output_beside_the_store_is_written(tmp_path):
    root = _one_run_store(tmp_path / "store")
    (tmp_path / "store-copy").mkdir()
    for output in (tmp_path / "store.csv", tmp_path / "store-copy" / "x.csv", tmp_path / "storex"):
        result = _query(root, "SELECT 1 AS x", "--format", "csv", "--output", str(output))
        assert result.exit_code == 0, result.output
        assert output.read_text() == "x\n1\n"


def test_dev_stdout_open_on_a_file_in_the_store_is_refused(tmp_path):
    store = _one_run_store(tmp_path / "store")
    record = store / "runs" / f"sweep={SWEEP}" / f"run_id={RUN}" / "run.parquet"
    before = record.read_bytes()
    with open(record, "ab") as fh:  # a shell's `>> store/.../run.parquet`, which does not truncate
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "attnsweep.cli",
                "query",
                "SELECT 1 AS x",
                "--store",
                str(store),
                "--format",
                "csv",
                "--output",
                "/dev/stdout",
            ],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 2 and "is inside the results store" in proc.stderr and proc.stderr.count("\n") == 1
    assert record.read_bytes() == before


# -- 2. one line and exit 2, never a traceback ------------------------------------------------
def _bytes_of(size: str) -> Fraction:
    """What a size means in bytes, from the units' definitions (1 KB = 1000 B, 1 KiB = 1024 B)."""
    number, unit = re.fullmatch(r"(.*?)([KMGT]i?B|B)", size).groups()
    powers = {
        "B": 1,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
        "KiB": 2**10,
        "MiB": 2**20,
        "GiB": 2**30,
        "TiB": 2**40,
    }
    return Fraction(number) * powers[unit]


@pytest.mark.parametrize("unit", ["B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"])
def test_every_memory_limit_accepted_is_one_duckdb_takes_and_one_past_the_bound_is_refused(unit):
    exact = Fraction(10**18) / _bytes_of("1" + unit)  # 10^18 bytes in this unit: a finite decimal (2s and 5s)
    with localcontext() as ctx:
        ctx.prec = 100
        bound = format(Decimal(exact.numerator) / Decimal(exact.denominator), "f")
    largest = 10**18 // _bytes_of("1" + unit)  # the most whole units at or under 10^18 bytes
    inside = [
        f"{bound}{unit}",
        f"{largest}{unit}",
        f"{largest // 2}{unit}",
        f"{largest}.0{unit}",
        f"1{unit}",
    ]
    above = bound + ("" if "." in bound else ".") + "0" * 30 + "1"
    outside = [f"{above}{unit}", f"{largest + 1}{unit}", f"{10**40}{unit}", f"{'9' * 400}{unit}"]
    for size in inside:
        assert _bytes_of(size) <= MAX_MEMORY_BYTES == 10**18
        limit = check_memory_limit(size)
        if _bytes_of(size) >= 2**20:  # DuckDB takes it (smaller ones are too little to start: a separate error)
            duckdb.connect(config={"memory_limit": limit}).close()
    for size in outside:
        assert _bytes_of(size) > 10**18
        with pytest.raises(
            QueryError,
            match=r"--memory-limit \(ATTNSWEEP_QUERY_MEMORY\) .* is out of range: at most "
            r"1,000,000TB \(10\^18 bytes\)",
        ):
            check_memory_limit(size)


@pytest.mark.parametrize(
    "value",
    ["99999999999TB", "18446744073709551616B", "20000000TB", "1000001TB", "\u0662GB", "\uff11GB"],
)  # the last two: an Arabic-Indic and a full-width digit
def test_a_memory_limit_out_of_range_or_not_in_ascii_is_one_error(store, value):
    for result in (
        _query(store, "SELECT 1", "--memory-limit", value),
        _query(store, "SELECT 1", env={"ATTNSWEEP_QUERY_MEMORY": value}),
    ):
        _one_line_error(result, "--memory-limit (ATTNSWEEP_QUERY_MEMORY)")
        assert "out of range" in result.stderr or "is not a memory limit" in result.stderr


def _cli(store, *args, preexec=None, **kw):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "query", *args, "--store", str(store)],
        cwd=ROOT,
        timeout=300,
        preexec_fn=preexec,
        **kw,
    )


def test_sql_from_a_closed_stdin_is_one_error(store):
    proc = _cli(store, "-", preexec=lambda: os.close(0), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == (
        "error: query -: stdin is closed; give the SQL as an argument or with --file FILE\n"
    )


def test_a_closed_stdout_is_one_error_unless_output_names_a_file(store, tmp_path):
    def closed_stdout():
        os.close(1)

    proc = _cli(store, "SELECT 1 AS x", preexec=closed_stdout, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and proc.stderr == "error: query: stdout is closed; give --output FILE\n"
    out = tmp_path / "r.csv"
    proc = _cli(
        store,
        "SELECT 1 AS x",
        "--format",
        "csv",
        "--output",
        str(out),
        preexec=closed_stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == "" and out.read_text() == "x\n1\n"


# Bytes that are not UTF-8: a lone continuation byte, a cut sequence, an overlong form, an
# encoded surrogate, a byte no UTF-8 has.
NOT_UTF8 = [b"\x80", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff"]


def test_sql_that_is_not_utf8_is_one_error_from_the_argument_a_file_or_stdin(store, tmp_path):
    for bad in NOT_UTF8:
        sql = b"SELECT 1 AS a -- " + bad
        as_argv = sql.decode("utf-8", "surrogateescape")  # what Python makes of such bytes in sys.argv
        first = len("SELECT 1 AS a -- ") + 1
        _one_line_error(
            _query(store, as_argv),
            f"the SQL is not UTF-8 text: character {first} is the byte 0x{bad[0]:02x}",
        )
        (tmp_path / "bad.sql").write_bytes(sql)
        _one_line_error(_query(store, "--file", str(tmp_path / "bad.sql")), "not UTF-8 text")
        _one_line_error(
            CliRunner().invoke(app, ["query", "-", "--store", str(store)], input=sql),
            "stdin: not UTF-8",
        )
    with pytest.raises(QueryError, match="the SQL is not UTF-8 text: character 10 is the lone surrogate U\\+D800"):
        stream_query(ResultsStore(store), "SELECT 1 \ud800")


def test_sql_not_utf8_in_the_real_argv_is_one_error(store):
    proc = _cli(store, b"SELECT 1 -- \xff", capture_output=True)
    assert proc.returncode == 2 and proc.stderr == b"error: the SQL is not UTF-8 text: character 13 is the byte 0xff\n"


@pytest.mark.parametrize(
    "uri",
    [
        "data://abc",
        "data:text/plain,x://",
        "http://127.0.0.1:9/store",
        "zip://x",
        "github://o/r",
        "simplecache::s3://b/x",
        "DATA://abc",
    ],
)
def test_a_store_uri_no_store_can_live_at_is_one_error_naming_the_schemes(uri):
    for result in (
        CliRunner().invoke(app, ["query", "SELECT 1"], env={"ATTNSWEEP_STORE": uri}),
        CliRunner().invoke(app, ["query", "SELECT 1", "--store", uri]),
    ):
        scheme = uri.split("://")[0]
        _one_line_error(
            result,
            f"--store {uri!r}: a store cannot live at a {scheme}:// URI",
            ", ".join(f"{s}://" for s in STORE_SCHEMES),
        )


def test_the_store_uris_a_store_has_still_work(store):
    result = _query(f"file://{store}", "SELECT count(*) AS n FROM trials", "--format", "csv")
    assert result.exit_code == 0 and result.stdout == "n\n3\n", result.output
    _one_line_error(_query("memory://attnsweep-hostile-empty/store", "SELECT 1"), "is empty")


# -- 3. what comes out is true ----------------------------------------------------------------
HUGE = [
    -(2**127),
    2**127 - 1,
    10**38,
    -(10**38),
    10**38 - 1,
    12,
    0,
    None,
]  # HUGEINT's extremes, 39 and 38 digits


def _huge_sql() -> str:
    rows = ", ".join(f"({i}, {'NULL' if v is None else repr(str(v))})" for i, v in enumerate(HUGE))
    return (
        "SELECT i, v::HUGEINT AS h, [v::HUGEINT] AS l, {'a': v::HUGEINT} AS s "
        f"FROM (VALUES {rows}) t(i, v) ORDER BY i"
    )


def test_hugeint_comes_out_with_every_digit_in_every_format(store, tmp_path):
    digits = [None if v is None else str(v) for v in HUGE]
    text = _query(store, _huge_sql(), "--format", "csv")
    assert text.exit_code == 0, text.output
    rows = list(csv_reader(io.StringIO(text.stdout)))
    assert [r["h"] for r in rows] == [d or "" for d in digits]
    assert [r["l"] for r in rows] == [f'["{d}"]' if d else "[null]" for d in digits]  # CSV: nested as JSON text
    assert [r["s"] for r in rows] == [f'{{"a":"{d}"}}' if d else '{"a":null}' for d in digits]
    rows = json.loads(_query(store, _huge_sql(), "--format", "json").stdout)
    assert [r["h"] for r in rows] == digits and [r["l"] for r in rows] == [[d] for d in digits]
    assert [r["s"] for r in rows] == [{"a": d} for d in digits]
    table = _query(store, _huge_sql())
    assert table.exit_code == 0 and all(d in table.stdout for d in digits if d is not None)
    out = tmp_path / "h.parquet"
    assert _query(store, _huge_sql(), "--format", "parquet", "--output", str(out)).exit_code == 0
    written = pq.read_table(out)
    written.validate(full=True)  # every value fits its type
    assert written.column("h").to_pylist() == digits and written.column("l").to_pylist() == [[d] for d in digits]
    assert duckdb.sql(f"SELECT h FROM read_parquet('{out}') ORDER BY i").fetchall() == [(d,) for d in digits]


def test_a_sum_cast_to_bigint_stays_a_number_in_parquet(store, tmp_path):
    out = tmp_path / "s.parquet"
    result = _query(
        store,
        "SELECT CAST(sum(seed) AS BIGINT) AS total, sum(seed) AS text FROM trials",
        "--format",
        "parquet",
        "--output",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert pq.read_table(out).to_pylist() == [{"total": 3, "text": "3"}]


@pytest.mark.parametrize("length", [1, 15, 61, 10_000, 10_001, 12_000, 30_000])
def test_the_table_off_a_terminal_shows_every_character_of_a_value_that_fits(store, length):
    value = "".join(chr(ord("a") + i % 26) for i in range(length))
    result = _query(store, f"SELECT '{value}' AS s, range(10) AS l, 'tail' AS t")
    assert result.exit_code == 0, result.output
    assert value in result.stdout and "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in result.stdout and "…" not in result.stdout


def test_a_table_too_wide_for_a_line_cuts_its_widest_values_and_says_so(store):
    start = time.monotonic()
    result = _query(store, "SELECT repeat('x', 1000000) AS s, repeat('y', 30000) AS t, 'short' AS u")
    assert result.exit_code == 0 and time.monotonic() - start < 60, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= QUERY_TABLE_WIDTH and "short" in result.stdout
    note = [line for line in lines if line.startswith("(values wider than")]
    assert len(note) == 1 and "--format csv, json or parquet writes them whole" in note[0]
    cap = int(note[0].split()[3].replace(",", ""))
    assert "x" * cap + "…" in result.stdout and "x" * (cap + 1) not in result.stdout
    assert cap > 30_000 and "y" * 30_000 in result.stdout  # only what must be cut is: the narrower value is whole


@pytest.mark.parametrize("form", ["new/", "new//", "file/", "file/.", "new/."])
def test_output_ending_in_a_slash_is_never_written_as_a_file(store, tmp_path, form):
    (tmp_path / "file").write_text("keep\n")
    before = _files(tmp_path)
    result = _query(store, "SELECT 1 AS x", "--format", "csv", "--output", f"{tmp_path}/{form}")
    tail = "/." if form.endswith("/.") else "/"
    _one_line_error(result, f"names a folder (it ends in '{tail}')", "nothing was written")
    assert _files(tmp_path) == before and not (tmp_path / "new").exists()


def test_output_naming_an_existing_folder_with_a_slash_is_refused_as_a_folder(store, tmp_path):
    result = _query(store, "SELECT 1 AS x", "--output", f"{tmp_path}/")
    _one_line_error(result, f"--output: {tmp_path} is a folder")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_stops_duckdb_at_once(store, tmp_path):
    # A scan of 10^10 rows that yields nothing: DuckDB works on the first batch for a minute,
    # without once giving Python's signal handler a chance to run.
    spill = tmp_path / "tmp"
    spill.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            "SELECT range FROM range(10000000000) WHERE hash(range) = 42",
            "--store",
            str(store),
            "--format",
            "csv",
            "--output",
            str(tmp_path / "r.csv"),
        ],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(spill)},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(spill.iterdir()):
        time.sleep(0.05)  # until the query has its connection
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("Ctrl-C took more than 10 s to stop the query")
    assert time.monotonic() - sent < 10
    assert proc.returncode == 130 and stderr.strip().startswith("interrupted")
    assert list(spill.iterdir()) == [] and not (tmp_path / "r.csv").exists()


# The query's process measures the peak at exit: its own (VmHWM) and its child's, which runs the
# query (ru_maxrss of its waited-for children; that of this process itself would count the pytest
# process it was forked from too). entry_point runs atexit handlers before it ends.
_PEAK = """
import atexit, re, resource, sys
atexit.register(lambda: print("peak", max(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read())[1]),
                                          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024, file=sys.stderr))
sys.argv = ["attnsweep", "query", *sys.argv[1:]]
from attnsweep.cli import entry_point
entry_point()
"""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT repeat('y', 1500000000) AS s",  # one value of 1.5 GB
        "SELECT repeat('x', 1000000000) AS s",  # one value of 1 GB: 1.2 GB resident before the child's cap
        "SELECT length(repeat('x', 1000000000)) AS n",  # the same inside an expression: polars aborted (SIGABRT)
        "SELECT range(200000000) AS l",  # one list of 200 million numbers
    ],
)
def test_one_value_larger_than_the_memory_limit_is_refused_not_allocated(store, tmp_path, sql):
    out = tmp_path / "out.csv"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _PEAK,
            sql,
            "--store",
            str(store),
            "--memory-limit",
            "100MB",
            "--format",
            "csv",
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "memory" in proc.stderr.splitlines()[0] and "--memory-limit 100MB" in proc.stderr
    peak = int(re.search(r"^peak (\d+)$", proc.stderr, re.M)[1])
    # The query's child holds what it had after its warm-up (about 110 MiB resident: Python, DuckDB,
    # pyarrow, polars) and at most 632 MiB more than its limit (results/query_limits.py
    # bound_address_space); without a cap the first query reached 10.9 GB, with the in-process
    # RLIMIT_DATA cap of 2 GiB beyond the limit 1.2 GB.
    assert peak < 850 * 2**20, peak
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "sql, limit, fmt, rows",
    [
        # a sort of 3 million rows of 200 bytes that spills
        (
            "SELECT i, repeat('x', 200) || i::VARCHAR AS s FROM range(3000000) t(i) ORDER BY s DESC, i",
            "100MB",
            "csv",
            3_000_000,
        ),
        # 70,000 rows of 16 kB (a list of 1,000 doubles and an 8 kB blob): the most the cap's headroom was measured on
        (
            "SELECT i, range(i, i + 1000)::DOUBLE[] AS v, repeat('ab', 4000)::BLOB AS b FROM range(70000) t(i)",
            "400MB",
            "csv",
            70_000,
        ),
        (
            "SELECT i, range(i, i + 1000)::DOUBLE[] AS v, repeat('ab', 4000)::BLOB AS b FROM range(70000) t(i)",
            "1GB",
            "json",
            70_000,
        ),
    ],
    ids=["sort-spills", "wide-csv", "wide-json"],
)
def test_a_large_query_within_its_limit_runs_under_the_childs_cap(store, tmp_path, sql, limit, fmt, rows):
    out = tmp_path / f"out.{fmt}"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _PEAK,
            sql,
            "--store",
            str(store),
            "--memory-limit",
            limit,
            "--format",
            fmt,
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with out.open() as fh:
        written = sum(1 for _ in fh) - 1 if fmt == "csv" else len(json.load(fh))
    assert written == rows


_CAP = """
import resource
from attnsweep.results.query_limits import address_space, bound_address_space
held = address_space()
cap = bound_address_space(100 * 10**6)
print(held, cap, resource.getrlimit(resource.RLIMIT_AS)[0])
for size in (cap - held - 64 * 2**20, cap - held + 16 * 2**20):  # just within what the cap left, just past it
    try:
        block = bytearray(size)
    except MemoryError:
        print("refused", end=" ")
    else:
        print("allocated", end=" ")
        del block
"""


def test_the_cap_is_the_address_space_held_plus_the_limit_and_its_headroom():
    proc = subprocess.run([sys.executable, "-c", _CAP], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    numbers, answer = proc.stdout.splitlines()
    held, cap, soft = map(int, numbers.split())
    # 100 MB, half of it again, 512 MiB, and one DuckDB thread (one per 256 MB) of 72 MiB.
    expected = 100 * 10**6 + 50 * 10**6 + 512 * 2**20 + 72 * 2**20
    assert soft == cap and 0 <= cap - held - expected < 2**20, (held, cap)
    assert answer.split() == ["allocated", "refused"]
