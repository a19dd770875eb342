"""attnsweep query streams its result: memory bounded by a batch, every row written, the
table format capped and saying so."""

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from attnsweep.cli import app
from attnsweep.presentation.query_output import converter, write_batches
from attnsweep.results import ResultsStore, TrialWriter, stream_query

ROOT = Path(__file__).resolve().parents[1]
# The peak is the query process's own (VmHWM, bytes): ru_maxrss would be at least the peak of
# the pytest process it was forked from, which Linux carries across exec.
_PEAK = """
import re, sys
from attnsweep.cli import main
sys.argv = ["attnsweep", "query", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024, file=sys.stderr)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("q") / "store"
    schema = pa.schema([("seed", pa.int64()), ("support", pa.list_(pa.int64()))])
    writer = TrialWriter(ResultsStore(root), "sw", "20261130-010203-abcdef", schema, flush_rows=100, flush_s=60)
    writer.append([dict(seed=i, support=[i, i + 1]) for i in range(3)])
    writer.flush()
    return root


def _peak(store, sql, fmt, out):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _PEAK,
            sql,
            "--store",
            str(store),
            "--format",
            fmt,
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stderr.split()[-1])


@pytest.mark.slow
def test_a_large_result_streams_in_bounded_memory(store, tmp_path):
    # 20 million rows: 320 MB as one Arrow table and more as CSV text; streamed, a batch at a
    # time, the process grows by a few tens of MB.
    small = _peak(store, "SELECT seed FROM trials LIMIT 1", "csv", tmp_path / "small.csv")
    big = _peak(
        store,
        "SELECT t.seed, r.range AS i FROM trials t, range(20000000) r WHERE t.seed = 0",
        "csv",
        tmp_path / "big.csv",
    )
    assert big - small < 150 * 2**20, (small, big)
    with open(tmp_path / "big.csv") as fh:
        assert fh.readline() == "seed,i\n" and sum(1 for _ in fh) == 20_000_000


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_every_row_of_a_many_batch_result_is_written_once(store, tmp_path, fmt):
    out = tmp_path / f"r.{fmt}"
    sql = "SELECT t.seed, t.support, r.range AS i FROM trials t, range(50000) r ORDER BY seed, i"
    schema, batches = stream_query(ResultsStore(store), sql, batch_rows=10_000, convert=converter(fmt))
    with out.open("wb") as fh:
        assert write_batches(schema, batches, fmt, fh) == 150_000
    df = {"csv": pl.read_csv, "parquet": pl.read_parquet}.get(
        fmt, lambda p: pl.DataFrame(json.loads(Path(p).read_text()))
    )(out)
    assert df.height == 150_000 and df.select(pl.struct("seed", "i").n_unique()).item() == 150_000
    first = df.row(0, named=True)
    assert first["seed"] == 0 and first["i"] == 0
    assert first["support"] == ("[0,1]" if fmt == "csv" else [0, 1])  # CSV: a list as its JSON text


def test_an_empty_result_is_a_header_or_an_empty_array(store, tmp_path):
    for fmt, expected in (("csv", "seed\n"), ("json", "[]\n")):
        schema, batches = stream_query(ResultsStore(store), "SELECT seed FROM trials WHERE seed < 0")
        out = tmp_path / fmt
        with out.open("wb") as fh:
            write_batches(schema, batches, fmt, fh)
        assert out.read_text() == expected


def test_the_table_format_shows_at_most_200_rows_and_says_so(store):
    result = CliRunner().invoke(app, ["query", "SELECT r.range FROM range(1000) r", "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "shape: (200, 1)" in result.output and "first 200 rows shown" in result.output


def test_the_sql_comes_from_an_argument_stdin_or_a_file(store, tmp_path):
    runner = CliRunner()
    sql = "SELECT count(*) AS n, max(seed) FROM trials"
    argument = runner.invoke(app, ["query", sql, "--store", str(store), "--format", "csv"])
    stdin = runner.invoke(app, ["query", "-", "--store", str(store), "--format", "csv"], input=sql)
    (tmp_path / "q.sql").write_text("-- a comment line, as a file would have\n" + sql + "\n")
    file = runner.invoke(app, ["query", "--file", str(tmp_path / "q.sql"), "--store", str(store), "--format", "csv"])
    for result in (argument, stdin, file):
        assert result.exit_code == 0, result.output
        assert result.stdout.split() == ["n,max(seed)", "3,2"]  # columns named as SQL names them
    both = runner.invoke(app, ["query", sql, "--file", str(tmp_path / "q.sql"), "--store", str(store)])
    neither = runner.invoke(app, ["query", "--store", str(store)])
    assert both.exit_code == 2 and neither.exit_code == 2


def test_schema_lists_the_tables_and_errors_take_one_line(store):
    runner = CliRunner()
    listed = runner.invoke(app, ["query", "--schema", "--store", str(store)])
    assert listed.exit_code == 0
    assert "trials (4 columns)" in listed.stdout and "  support: list<item: int64>" in listed.stdout
    assert "  run_id: string" in listed.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            "SELECT nope FROM trials",
            "--store",
            str(store),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "COLUMNS": "400"},
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert 'Referenced column "nope" not found' in bad.stderr and "Candidate bindings" in bad.stderr


def test_a_sql_file_that_cannot_be_read_is_one_error(store, tmp_path):
    result = CliRunner().invoke(app, ["query", "--file", str(tmp_path / "none.sql"), "--store", str(store)])
    assert result.exit_code == 2 and "--file: cannot read" in result.output


def test_the_table_format_off_a_terminal_shows_every_column_and_character(store):
    columns = ", ".join(f"seed AS column_{i}" for i in range(40))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            f"SELECT repeat('x', 300) AS long, {columns} FROM trials",
            "--store",
            str(store),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )  # stdout a pipe, not a terminal
    assert proc.returncode == 0, proc.stderr
    assert "x" * 300 in proc.stdout and "column_39" in proc.stdout and "…" not in proc.stdout


@pytest.mark.parametrize(
    "sql, header",
    [
        ("SELECT count(*) FROM trials", "count_star()"),
        ("SELECT 1 AS a_name_much_longer_than_its_value", "a_name_much_longer_than_its_value"),
        (
            "SELECT max(seed) AS largest_seed_of_all, min(seed) AS s FROM trials",
            "largest_seed_of_all",
        ),
    ],
)
def test_a_narrow_result_keeps_its_whole_header(store, sql, header):
    proc = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "query", sql, "--store", str(store)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )  # off a terminal
    assert proc.returncode == 0, proc.stderr
    assert f"│ {header} " in proc.stdout and "…" not in proc.stdout, proc.stdout
