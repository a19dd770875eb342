"""Tests of the Parquet results store, its writer and its read-only queries."""

from __future__ import annotations

import math
import subprocess
import sys

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import attnsweep.results.atomic_write as atomic_write
from attnsweep.results import (
    QueryError,
    ResultsStore,
    StoreError,
    TrialWriter,
    rows_to_table,
    run_query,
)

SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("m", pa.int64()),
        ("status", pa.string()),
        ("support", pa.list_(pa.int64())),
        ("test_acc", pa.float64()),  # nullable
    ]
)
RUN_A = "20261130-010203-abcdef"
RUN_B = "20261130-040506-0a1b2c"


def rows_for(run: int, n: int) -> list[dict]:
    out = []
    for i in range(n):
        seed = 100 * run + i
        out.append(
            dict(
                seed=seed,
                m=10 * (i + 1),
                status="failed" if i == 1 else "done",
                support=[i, i + 3 + run],
                test_acc=None if i == 1 else 0.5 + 0.01 * seed % 0.5,
            )
        )
    return out


def expected_records() -> list[tuple]:
    recs = []
    for run, run_id, n in ((0, RUN_A, 3), (1, RUN_B, 4)):
        for r in rows_for(run, n):
            recs.append(("sw", run_id, r["seed"], r["m"], r["status"], r["support"], r["test_acc"]))
    return sorted(recs, key=lambda t: t[2])


COLS = ["sweep", "run_id", "seed", "m", "status", "support", "test_acc"]


@pytest.fixture()
def filled(tmp_path):
    store = ResultsStore(tmp_path / "store")
    store.write_trials("sw", RUN_A, rows_to_table(rows_for(0, 3), SCHEMA))
    store.write_trials("sw", RUN_B, rows_to_table(rows_for(1, 4), SCHEMA))
    return store


def as_records(columns: dict) -> list[tuple]:
    recs = list(zip(*(columns[c] for c in COLS), strict=True))
    return sorted(recs, key=lambda t: t[2])


def test_layout(filled):
    files = sorted(p.relative_to(filled.root).as_posix() for p in filled.root.rglob("*") if p.is_file())
    assert len(files) == 2
    assert files[0].startswith(f"trials/sweep=sw/run_id={RUN_A}/part-") and files[0].endswith(".parquet")
    assert files[1].startswith(f"trials/sweep=sw/run_id={RUN_B}/part-")
    # The partition columns live in the paths only.
    assert pq.read_schema(filled.root / files[0]).names == SCHEMA.names


def test_three_readers_agree(filled):
    expected = expected_records()
    assert len(expected) == 7

    df = filled.scan_trials().collect()
    assert df.height == 7
    assert df.schema["support"] == pl.List(pl.Int64)
    assert df.schema["test_acc"] == pl.Float64
    polars_recs = as_records({c: df[c].to_list() for c in COLS})

    table = ds.dataset(filled.root / "trials", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 7
    arrow_recs = as_records({c: table.column(c).to_pylist() for c in COLS})

    glob = (filled.root / "trials" / "**" / "*.parquet").as_posix()
    rel = duckdb.sql(f"SELECT {', '.join(COLS)} FROM read_parquet('{glob}', hive_partitioning = true)")
    duck_rows = rel.fetchall()
    assert len(duck_rows) == 7
    duck_recs = sorted((tuple(r) for r in duck_rows), key=lambda t: t[2])

    for recs in (polars_recs, arrow_recs, duck_recs):
        assert len(recs) == len(expected)
        for got, exp in zip(recs, expected, strict=True):
            assert tuple(got[:6]) == exp[:6]
            if exp[6] is None:
                assert got[6] is None
            else:
                assert got[6] == pytest.approx(exp[6], abs=1e-12)
    assert {r[1] for r in polars_recs} == {RUN_A, RUN_B}
    assert {r[0] for r in duck_recs} == {"sw"}


def tmp_files(root):
    return [p for p in root.rglob("*") if p.name.startswith(atomic_write.TMP_PREFIX)]


def test_no_temp_files_after_writes(filled):
    assert tmp_files(filled.root) == []
    filled.write_run("sw", RUN_A, {"started_at": 1.0, "note": "x"})
    assert tmp_files(filled.root) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftover_temp_file_is_ignored_and_cleaned(filled):
    folder = filled.run_dir("trials", "sw", RUN_A)
    # A killed writer's file (its pid runs no more on this host), and one of a name without a writer.
    leftover = folder / f".tmp-{_dead_pid()}@{atomic_write.host_tag()}~0123abcd-part-x.parquet.partial"
    unknown = folder / ".tmp-xyz-part.parquet"
    # Complete parquet files, so that reading them by mistake would change the row count.
    for path in (leftover, unknown):
        pq.write_table(rows_to_table(rows_for(5, 5), SCHEMA), path)
    assert filled.scan_trials().collect().height == 7
    assert ds.dataset(filled.root / "trials", format="parquet", partitioning="hive").count_rows() == 7
    removed = filled.clean_temp_files()
    assert removed == [leftover]
    assert not leftover.exists() and unknown.exists()  # no writer named: never removed automatically
    assert filled.scan_trials().collect().height == 7


def test_readers_never_see_a_file_being_written(filled, monkeypatch):
    """The module's promise: a file is written under a temporary name in its final folder
    and renamed, and the documented readers (polars scan, pyarrow dataset, DuckDB's
    ``read_parquet('.../**/*.parquet', hive_partitioning = true)``) skip temporary names,
    so a concurrent reader sees only whole, committed files."""
    seen = {}
    real_write = pq.write_table

    def write_then_read(table, where, *args, **kwargs):
        real_write(table, where, *args, **kwargs)
        # Here the new part file exists under its temporary name only.
        seen["polars"] = filled.scan_trials().collect().height
        seen["pyarrow"] = ds.dataset(filled.root / "trials", format="parquet", partitioning="hive").count_rows()
        glob = (filled.root / "trials" / "**" / "*.parquet").as_posix()
        seen["duckdb"] = duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true)"
        ).fetchall()[0][0]

    monkeypatch.setattr(atomic_write.pq, "write_table", write_then_read)
    filled.write_trials("sw", RUN_A, rows_to_table(rows_for(2, 5), SCHEMA))
    monkeypatch.undo()
    assert seen == {"polars": 7, "pyarrow": 7, "duckdb": 7}
    assert filled.scan_trials().collect().height == 12


@pytest.mark.parametrize("bad", ["../x", "", "a/b", ".hidden", "x" * 101, "sp ace"])
def test_bad_names_raise(tmp_path, bad):
    store = ResultsStore(tmp_path)
    table = rows_to_table(rows_for(0, 1), SCHEMA)
    with pytest.raises(StoreError):
        store.write_trials(bad, RUN_A, table)
    with pytest.raises(StoreError):
        store.write_trials("sw", bad, table)
    assert not (tmp_path / "trials").exists()


def test_empty_store_raises(tmp_path):
    store = ResultsStore(tmp_path / "nothing")
    with pytest.raises(StoreError):
        store.scan_trials()
    with pytest.raises(StoreError):
        store.scan_runs()
    assert store.clean_temp_files() == []


def store_with_only_a_temp_file(root) -> ResultsStore:
    """A writer killed before its first rename leaves only a temporary file: that is not
    a trial file, so the store has no trials."""
    store = ResultsStore(root)
    folder = store.run_dir("trials", "sw", RUN_A)
    folder.mkdir(parents=True)
    pq.write_table(rows_to_table(rows_for(0, 2), SCHEMA), folder / ".tmp-dead-part.parquet")
    return store


def test_a_store_with_only_a_temp_file_holds_no_trial_file(tmp_path):
    assert store_with_only_a_temp_file(tmp_path)._files("trials") == []


def test_only_a_temp_file_scan_raises_store_error(tmp_path):
    store = store_with_only_a_temp_file(tmp_path)
    with pytest.raises(StoreError):  # documented: "StoreError: the store holds no trial files"
        store.scan_trials().collect()


def test_write_run_and_latest(tmp_path):
    store = ResultsStore(tmp_path)
    store.write_run("sw", RUN_A, {"started_at": 10.0})
    store.write_run("other", RUN_B, {"started_at": 20.0})
    store.write_run("sw", RUN_A, {"started_at": 5.0})  # replaces the first record
    assert store.latest_run() == ("other", RUN_B)
    assert store.sweep_of(RUN_A) == "sw"
    assert store.scan_runs().collect().height == 2
    with pytest.raises(StoreError):
        store.sweep_of("no-such-run")


def test_trial_writer_flushes_every_flush_rows(tmp_path):
    store = ResultsStore(tmp_path)
    writer = TrialWriter(store, "sw", RUN_A, SCHEMA, flush_rows=4, flush_s=1e9)
    rows = rows_for(0, 10)
    for r in rows[:3]:
        writer.append([r])
    assert writer.files == [] and writer.rows_written == 0  # 3 < 4 rows buffered
    writer.append(rows[3:10])  # 10 rows: two full files, 2 rows buffered
    assert len(writer.files) == 2 and writer.rows_written == 8
    writer.flush()
    assert len(writer.files) == 3 and writer.rows_written == 10
    assert [pq.read_metadata(f).num_rows for f in writer.files] == [4, 4, 2]
    parts = list(store.run_dir("trials", "sw", RUN_A).glob("part-*.parquet"))
    assert len(parts) == 3
    df = store.scan_trials().collect()
    assert df.height == 10
    assert sorted(df["seed"].to_list()) == [r["seed"] for r in rows]
    writer.flush()  # nothing buffered: no new file
    assert len(writer.files) == 3


def test_trial_writer_flushes_old_rows(tmp_path):
    store = ResultsStore(tmp_path)
    writer = TrialWriter(store, "sw", RUN_A, SCHEMA, flush_rows=1000, flush_s=0.0)
    writer.append(rows_for(0, 2))  # flush_s = 0: every buffered row is already old
    assert len(writer.files) == 1 and writer.rows_written == 2


def test_run_query_select(filled):
    df = run_query(filled, "SELECT count(*) AS n FROM trials")
    assert df["n"].to_list() == [7]
    df = run_query(filled, "SELECT seed FROM trials WHERE status = 'failed' ORDER BY seed;")
    assert df["seed"].to_list() == [1, 101]
    df = run_query(
        filled,
        "-- comment\nWITH t AS (SELECT * FROM trials WHERE run_id = '20261130-010203-abcdef') "
        "SELECT count(*) AS n FROM t",
    )
    assert df["n"].to_list() == [3]


@pytest.mark.parametrize(
    "sql",
    [
        "DROP TABLE trials",
        "DELETE FROM trials",
        "SELECT 1; DROP TABLE x",
        "INSERT INTO trials VALUES (1)",
        "/* SELECT */ UPDATE trials SET m = 0",
        "",
    ],
)
def test_run_query_refuses_non_select(filled, sql):
    with pytest.raises(QueryError):
        run_query(filled, sql)


def test_run_query_bad_sql(filled):
    with pytest.raises(QueryError):
        run_query(filled, "SELECT no_such_column FROM trials")


def test_rows_to_table_keeps_schema():
    t = rows_to_table([{"seed": 1, "m": 2, "status": "done", "support": [], "test_acc": math.nan}], SCHEMA)
    assert t.schema == SCHEMA
    assert t.column("support").to_pylist() == [[]]


def test_run_query_refuses_reading_files_outside_the_store(filled, tmp_path):
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    for sql in (
        f"SELECT * FROM read_csv('{outside}')",
        f"SELECT * FROM \"read_csv\"('{outside}')",
        f"SELECT * FROM READ_CSV /* c */ ('{outside}')",
        f"WITH x AS (SELECT * FROM read_parquet('{outside}')) SELECT * FROM x",
    ):
        with pytest.raises(QueryError, match="only the store's tables"):
            run_query(filled, sql)


@pytest.mark.parametrize("literal", ["/**/", "a -- b", "a; b", "read_csv(", "it''s"])
def test_string_literals_with_comment_or_statement_characters_are_left_alone(filled, literal):
    df = run_query(filled, f"SELECT '{literal}' AS s FROM trials LIMIT 1")
    assert df["s"].to_list() == [literal.replace("''", "'")]


def test_a_second_statement_after_a_semicolon_is_refused(filled):
    with pytest.raises(QueryError, match="one statement"):
        run_query(filled, "SELECT 1 AS a FROM trials; SELECT 2 AS b FROM trials")


def test_runs_can_be_queried_before_any_trial_is_written(tmp_path):
    store = ResultsStore(tmp_path / "store")
    store.write_run("sw", "20261130-000000-aaaaaa", {"status": "running", "n_trials": 3})
    df = run_query(store, "SELECT status, n_trials FROM runs")
    assert df.rows() == [("running", 3)]
    with pytest.raises(QueryError):
        run_query(store, "SELECT * FROM trials")
