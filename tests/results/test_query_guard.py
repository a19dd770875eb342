"""The query guard is the engine's: no quoting, casing, comment or nesting of a file-reading
function reads a file outside the store (property test against a canary file)."""

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnsweep.results import QueryError, ResultsStore, TrialWriter, run_query

SCHEMA = pa.schema([("seed", pa.int64()), ("m", pa.int64()), ("status", pa.string())])

CANARY = "canary-7f3a9c-never-printed"

# Every table function of DuckDB and polars SQL that reads a file or lists a folder.
READERS = [
    "read_csv",
    "read_csv_auto",
    "read_parquet",
    "parquet_scan",
    "read_json",
    "read_json_auto",
    "read_ndjson",
    "read_ndjson_auto",
    "read_json_objects",
    "read_text",
    "read_blob",
    "glob",
    "sniff_csv",
    "parquet_metadata",
    "parquet_schema",
    "parquet_file_metadata",
    "parquet_kv_metadata",
    "read_ipc",
    "read_delta",
    "iceberg_scan",
    "delta_scan",
    "read_xlsx",
    "sqlite_scan",
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    store = ResultsStore(root / "store")
    writer = TrialWriter(store, "sw", "20261130-010203-abcdef", SCHEMA, flush_rows=100, flush_s=60)
    writer.append([dict(seed=i, m=8, status="done") for i in range(3)])
    writer.flush()
    canary = root / "canary.csv"
    canary.write_text(f"secret\n{CANARY}\n")
    return store, canary


def _case(name: str) -> st.SearchStrategy[str]:
    return st.builds(
        lambda flips: "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True)),
        st.lists(st.booleans(), min_size=len(name), max_size=len(name)),
    )


def _call(path: str) -> st.SearchStrategy[str]:
    name = st.sampled_from(READERS).flatmap(_case)
    quoted = name.flatmap(
        lambda n: st.sampled_from([n, f'"{n}"', f"`{n}`", f"[{n}]", f"main.{n}", f'"main"."{n}"', f"main.`{n}`"])
    )
    space = st.sampled_from(["", " ", "\n", " /* c */ ", "\t", "--x\n"])
    lit = st.sampled_from(
        [
            f"'{path}'",
            f"'{path}'::VARCHAR",
            f"['{path}']",
            "'" + path.replace("/", "//") + "'",
            f"concat('{path[:3]}', '{path[3:]}')",
            f"E'{path}'",
        ]
    )
    return st.tuples(quoted, space, lit, space).map(lambda t: f"{t[0]}{t[1]}({t[2]}{t[3]})")


def _statement(path: str) -> st.SearchStrategy[str]:
    call = _call(path)
    forms = st.sampled_from(
        [
            "SELECT * FROM {c}",
            "select * from {c} limit 5",
            "WITH x AS (SELECT * FROM {c}) SELECT * FROM x",
            "SELECT (SELECT count(*) FROM {c}) AS n FROM trials",
            "SELECT * FROM trials, {c}",
            "SELECT * FROM (SELECT * FROM (SELECT * FROM {c}))",
            "SELECT * FROM trials WHERE seed IN (SELECT 1 FROM {c})",
            "SELECT * FROM '{p}'",
            'SELECT * FROM "{p}"',
            "SELECT * FROM trials UNION ALL SELECT * FROM {c}",
            "SELECT '\\', * FROM {c} -- '",
            "SELECT E'\\'', * FROM {c} -- '",
        ]
    )
    return st.tuples(forms, call).map(lambda t: t[0].format(c=t[1], p=path))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_statement_reads_the_canary(setup, data):
    store, canary = setup
    st_ = os.stat(canary)
    os.utime(canary, (st_.st_mtime - 3600, st_.st_mtime))  # atime before mtime: any read moves it (relatime)
    before = os.stat(canary).st_atime_ns
    sql = data.draw(_statement(str(canary)))
    try:
        out = run_query(store, sql)
        text = str(out.to_dicts())
    except QueryError as exc:
        text = str(exc)
    assert CANARY not in text, sql
    assert os.stat(canary).st_atime_ns == before, sql


@pytest.mark.parametrize(
    "sql",
    [
        "SET enable_external_access = true",
        "PRAGMA enable_external_access=true",
        "SELECT 1; SET lock_configuration=false",
        "COPY trials TO '/tmp/x.csv'",
        "ATTACH '/tmp/x.db' AS x",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE TABLE t AS SELECT 1",
        "EXPORT DATABASE '/tmp/x'",
        "CALL read_text('/etc/hostname')",
    ],
)
def test_statements_that_would_change_the_engine_or_write_are_refused(setup, sql):
    store, _ = setup
    with pytest.raises(QueryError):
        run_query(store, sql)


def test_asking_for_curves_of_a_store_that_kept_none_says_how_to_keep_them(setup):
    store, _ = setup
    with pytest.raises(QueryError, match=r"no 'curves' table: no run in it kept learning curves \(execution\.curves"):
        run_query(store, "SELECT count(*) FROM curves")
    assert run_query(store, "SELECT count(*) AS n FROM trials")["n"].to_list() == [3]
