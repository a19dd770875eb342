"""Every DuckDB result type through every ``attnsweep query --format``: written (as text where
the format has no such type) or refused in one line naming the column, never a traceback or a
Rust panic (property test over a list of SQL expressions that covers every type DuckDB lists)."""

import contextlib
import io
import json

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnsweep.cli import app
from attnsweep.presentation.query_output import FORMATS, head, write_batches
from attnsweep.results import QueryError, ResultsStore, TrialWriter

# One expression per row: every DuckDB type, alone, nested in lists, structs, maps and unions,
# with its edge values (NULL, NaN, infinities, the widest integers, out-of-polars-range dates).
EXPRESSIONS = [
    "true",
    "NULL",
    "NULL::INTEGER",
    "1::TINYINT",
    "1::SMALLINT",
    "1::INTEGER",
    "1::BIGINT",
    "255::UTINYINT",
    "1::USMALLINT",
    "1::UINTEGER",
    "18446744073709551615::UBIGINT",
    "170141183460469231731687303715884105727::HUGEINT",
    "(-170141183460469231731687303715884105727)::HUGEINT",
    "1::HUGEINT * 10 ** 30",
    "340282366920938463463374607431768211455::UHUGEINT",
    "1::UHUGEINT",
    "1.5::FLOAT",
    "'nan'::DOUBLE",
    "'inf'::DOUBLE",
    "'-inf'::FLOAT",
    "-0.0::DOUBLE",
    "1.5::DECIMAL(4,1)",
    "99999999999999999999999999999999999999::DECIMAL(38,0)",
    "1.5::DECIMAL(38,10)",
    "'x'",
    "''",
    "'a,b\"c' || chr(10) || 'd'",
    "'a' || chr(0)",
    "'🙂'",
    "'{\"a\": 1}'::JSON",
    "'\\xAA'::BLOB",
    "''::BLOB",
    "'101'::BIT",
    "1::VARINT",
    "'123456789012345678901234567890123456789012345678901234567890'::VARINT",
    "DATE '2024-01-01'",
    "'infinity'::DATE",
    "'-infinity'::DATE",
    "'5877642-06-25 (BC)'::DATE",
    "TIME '12:00:00'",
    "TIME '24:00:00'",
    "'12:00:00.123456789'::TIME_NS",
    "TIMETZ '12:00:00+02'",
    "TIMESTAMP '2024-01-01 00:00:00'",
    "'infinity'::TIMESTAMP",
    "'294247-01-10 04:00:54'::TIMESTAMP",
    "TIMESTAMP_S '2024-01-01 00:00:00'",
    "'-infinity'::TIMESTAMP_S",
    "TIMESTAMP_MS '2024-01-01 00:00:00'",
    "'infinity'::TIMESTAMP_MS",
    "TIMESTAMP_NS '2024-01-01 00:00:00'",
    "'infinity'::TIMESTAMP_NS",
    "TIMESTAMPTZ '2024-01-01 00:00:00+00'",
    "'-infinity'::TIMESTAMPTZ",
    "'2024-01-01 00:00:00.123456789+00'::TIMESTAMPTZ_NS",
    "INTERVAL 1 DAY",
    "INTERVAL 14 MONTH",
    "'00000000-0000-0000-0000-000000000001'::UUID",
    "NULL::UUID",
    "'a'::ENUM('a', 'b')",
    "NULL::ENUM('a', 'b')",
    "'it''s'::ENUM('it''s')",
    "union_value(k := 1)",
    "union_value(s := 'x')::UNION(k INT, s VARCHAR)",
    "[1, 2]",
    "[]",
    "[NULL]",
    "[[1, 2], [3]]",
    "['a', NULL, 'b c']",
    "[1, 2]::INTEGER[2]",
    "{'a': 1}",
    "{'a': NULL}",
    "{'a': [1, 2], 'b': {'c': 'x'}}",
    "{'my \"f': 1}",
    "(1, 'a')",
    "MAP([1], [2])",
    "MAP {'a': [1]}",
    "MAP([], [])",
    "MAP([1.5], [2])",
    "MAP([DATE '2024-01-01'], [1])",
    "MAP(['a'], [INTERVAL 1 DAY])",
    "[MAP([1], [2])]",
    "[INTERVAL 1 DAY]",
    "[[INTERVAL 1 DAY]]",
    "{'i': INTERVAL 1 DAY}",
    "['101'::BIT]",
    "['\\xAA'::BLOB]",
    "[NULL::BLOB]",
    "[1::HUGEINT]",
    "[340282366920938463463374607431768211455::UHUGEINT]",
    "['a'::ENUM('a', 'b')]",
    "{'t': TIMETZ '12:00:00+02'}",
    "[union_value(k := 1)]",
    "{'a': {'b': union_value(k := 1)}}",
    "['infinity'::DATE]",
    "{'d': 'infinity'::TIMESTAMP}",
    "['nan'::DOUBLE, 'inf'::DOUBLE]",
    "{'e': 'a'::ENUM('a', 'b'), 'i': INTERVAL 1 DAY}",
    "'POINT(1 2)'::GEOMETRY",
    "['POINT(1 2)'::GEOMETRY]",
    "1::VARIANT",
    "{'a': 1}::VARIANT",
    "[1::VARIANT]",
    "'INTEGER'::TYPE",
    "['INTEGER'::TYPE]",
]
NOT_IN_A_RESULT = {"type"}  # duckdb_types() lists it; no Arrow form (written as text here, still covered)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("types") / "store"
    writer = TrialWriter(
        ResultsStore(root),
        "sw",
        "20261130-010203-abcdef",
        pa.schema([("seed", pa.int64())]),
        flush_rows=100,
        flush_s=60,
    )
    writer.append([dict(seed=1)])
    writer.flush()
    return root


def _type_ids(kind) -> set[str]:
    out = {kind.id}
    if kind.id in ("list", "array", "struct", "map", "union"):
        for _, child in kind.children:
            if not isinstance(child, int):  # an ARRAY lists its size
                out |= _type_ids(child)
    return out


def _run(store, args, capfd):
    result = CliRunner().invoke(app, ["query", *args, "--store", str(store)])
    captured = capfd.readouterr()  # the process's own stderr: where a Rust panic prints
    return result, result.stderr + captured.err


def test_the_expressions_cover_every_type_duckdb_lists():
    con = duckdb.connect()
    listed = {row[0].lower() for row in con.sql("SELECT DISTINCT logical_type FROM duckdb_types()").fetchall()}
    covered = set()
    for expr in EXPRESSIONS:
        with contextlib.suppress(
            duckdb.Error
        ):  # a type this DuckDB lacks (the expression then has to fail in one line)
            covered |= _type_ids(con.sql(f"SELECT {expr} AS x").types[0])
    assert listed - covered - NOT_IN_A_RESULT == set(), "add an expression of each missing type to EXPRESSIONS"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_type_is_written_or_refused_in_one_line(store, fmt, tmp_path, capfd):
    failures = []
    for expr in EXPRESSIONS:
        out = tmp_path / f"r.{fmt}"
        args = [f"SELECT {expr} AS x, seed FROM trials", "--format", fmt]
        result, text = _run(store, [*args, "--output", str(out)] if fmt == "parquet" else args, capfd)
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if result.exit_code not in (0, 2) or crashed or "Traceback" in text + result.stdout or "panicked" in text:
            failures.append(f"{expr}: exit {result.exit_code} {result.exception!r} {text[-300:]}")
        elif result.exit_code == 2 and text.count("\n") != 1:
            failures.append(f"{expr}: refused in more than one line: {text}")
        elif result.exit_code == 0 and fmt == "parquet":
            assert pq.read_table(out).num_rows == 1, expr
        elif result.exit_code == 0 and fmt == "json":
            assert len(json.loads(result.stdout)) == 1, expr
    assert not failures, "\n".join(failures)


def _csv(store, expr, capfd) -> str:
    result, text = _run(store, [f"SELECT {expr} AS x FROM trials", "--format", "csv"], capfd)
    assert result.exit_code == 0, text
    return result.stdout.split("\n", 1)[1].rstrip("\n")


def _json(store, expr, capfd):
    result, text = _run(store, [f"SELECT {expr} AS x FROM trials", "--format", "json"], capfd)
    assert result.exit_code == 0, text
    return json.loads(result.stdout)[0]["x"]


def test_types_a_format_lacks_are_written_as_duckdbs_text(store, capfd):
    assert _csv(store, "INTERVAL 14 MONTH", capfd) == "1 year 2 months"
    assert _csv(store, "'101'::BIT", capfd) == "101"
    assert _csv(store, "'\\xAA'::BLOB", capfd) == "\\xAA"
    widest = "340282366920938463463374607431768211455"  # UHUGEINT's largest: Arrow's decimal128 would wrap it
    assert _csv(store, f"{widest}::UHUGEINT", capfd) == widest
    assert (
        _csv(store, "'123456789012345678901234567890123456789012345678901234567890'::VARINT", capfd)
        == "123456789012345678901234567890123456789012345678901234567890"
    )
    assert _csv(store, "TIMETZ '12:00:00+02'", capfd) == "12:00:00+02"
    assert _csv(store, "'infinity'::DATE", capfd) == "infinity"
    assert _csv(store, "TIMESTAMPTZ '2024-01-01 00:00:00+00'", capfd) == "2024-01-01 00:00:00+00"  # in UTC
    assert _csv(store, "union_value(k := 7)", capfd) == "7"
    assert _csv(store, "{'a': [1, NULL], 'b': MAP([1], ['x'])}", capfd) == '"{""a"":[1,null],""b"":{""1"":""x""}}"'
    assert _csv(store, "[NULL]", capfd) == "[null]"
    assert _json(store, "MAP([1], [INTERVAL 1 DAY])", capfd) == {"1": "1 day"}
    assert _json(store, "[union_value(k := 1)]", capfd) == ["1"]
    assert _json(store, "'nan'::DOUBLE", capfd) is None  # JSON has no NaN
    assert _json(store, "{'b': '\\xAA'::BLOB}", capfd) == {"b": "\\xAA"}


def test_parquet_keeps_the_types_parquet_has(store, tmp_path, capfd):
    out = tmp_path / "t.parquet"
    sql = (
        "SELECT DATE '2024-01-01' AS d, TIMESTAMP_S '2024-01-01 00:00:01' AS s, '\\xAA'::BLOB AS b, "
        "[1.5::DECIMAL(4,1)] AS l, MAP([1], [2]) AS m, INTERVAL 1 DAY AS i, 'a'::ENUM('a') AS e FROM trials"
    )
    result, text = _run(store, [sql, "--format", "parquet", "--output", str(out)], capfd)
    assert result.exit_code == 0, text
    df = pl.read_parquet(out)
    assert df.schema["d"] == pl.Date and df.schema["s"] == pl.Datetime("us") and df.schema["b"] == pl.Binary
    assert df["i"].to_list() == ["1 day"] and df["b"].to_list() == [b"\xaa"] and df["l"].to_list()[0][0] == 1.5


def test_a_column_a_writer_cannot_take_unconverted_is_named_with_its_type():
    nested = pa.RecordBatch.from_pydict({"ok": [1], "x": [{"a": 1}]})
    with pytest.raises(QueryError, match=r"--format csv cannot write column 'x' of type struct<a: int64>"):
        write_batches(nested.schema, iter([nested]), "csv", io.BytesIO())
    union = pa.UnionArray.from_sparse(pa.array([0], type=pa.int8()), [pa.array([1])], ["k"])
    odd = pa.RecordBatch.from_arrays([pa.array([1]), union], names=["ok", "u"])
    with pytest.raises(QueryError, match=r"--format parquet cannot write column 'u' of type sparse_union"):
        write_batches(odd.schema, iter([odd]), "parquet", io.BytesIO())
    with pytest.raises(QueryError, match=r"--format table cannot write column 'u' of type sparse_union"):
        head(odd.schema, iter([odd]))
