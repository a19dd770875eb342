"""Curves exactly once: a curves part file is read only once the trial part file of its rows
commits it (results/curve_commits.py); store check names uncommitted files, second copies of
points and files that are not curve points; store compact repairs all three."""

from __future__ import annotations

import datetime as dt
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnsweep.results import ResultsStore
from attnsweep.results.curves_table import CURVE_SCHEMA
from attnsweep.results.defensive_reads import StoreWarning
from attnsweep.results.integrity import check_store, compact_store
from attnsweep.results.writer import TrialWriter

SWEEP, RUN = "s", "20261205-100000-aaaaaa"
SCHEMA = pa.schema([("trial_id", pa.string()), ("status", pa.string()), ("m", pa.int64())])
EPOCHS = (0, 2, 4)


def _rows(ids: list[str]) -> list[dict]:
    """Rows as a pack returns them: each with its curve (epochs 0, 2, 4; loss = a function of
    the trial and the epoch, so every point is told apart by its value too)."""
    return [
        {
            "trial_id": t,
            "status": "done",
            "m": 16,
            "curve": {
                "epoch": list(EPOCHS),
                "train_loss": [hash((t, e)) % 1000 / 1000 for e in EPOCHS],
                "train_acc": [0.5 + e / 10 for e in EPOCHS],
                "train_error": [None] * len(EPOCHS),
            },
        }
        for t in ids
    ]


def _expected(ids: list[str]) -> pl.DataFrame:
    rows = _rows(ids)
    return pl.DataFrame(
        {
            "trial_id": [r["trial_id"] for r in rows for _ in EPOCHS],
            "epoch": [e for _ in rows for e in EPOCHS],
            "train_loss": [x for r in rows for x in r["curve"]["train_loss"]],
            "train_acc": [x for r in rows for x in r["curve"]["train_acc"]],
        }
    ).sort("trial_id", "epoch")


def _points(store: ResultsStore) -> pl.DataFrame:
    scan = store.scan_run_curves(SWEEP, RUN)
    return scan.select("trial_id", "epoch", "train_loss", "train_acc").collect().sort("trial_id", "epoch")


def _record(store: ResultsStore, n: int) -> None:
    t0 = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    store.write_run(
        SWEEP,
        RUN,
        dict(status="finished", started_at=t0, n_trials=n, spec_hash="x", spec_yaml="name: s\n", n_done=n),
    )


def _write(store: ResultsStore, ids: list[str]) -> TrialWriter:
    writer = TrialWriter(store, SWEEP, RUN, SCHEMA, flush_rows=2)
    writer.append(_rows(ids))
    writer.flush()
    return writer


@pytest.fixture
def store(tmp_path) -> ResultsStore:
    s = ResultsStore(tmp_path / "store")
    _write(s, ["a", "b", "c", "d"])
    _record(s, 4)
    return s


def test_points_are_read_once_the_rows_commit_them(store):
    assert _points(store).equals(_expected(["a", "b", "c", "d"]))
    assert check_store(ResultsStore(store.root)).ok


def test_a_kill_between_the_curves_and_the_rows_leaves_points_no_read_sees(store, tmp_path):
    # What a kill at the rename of a trials part file leaves: the curves file of e and f in
    # place, their rows not; the resume then trains e and f again and writes both anew.
    writer = TrialWriter(store, SWEEP, RUN, SCHEMA)
    rows = _rows(["e", "f"])
    from attnsweep.results.curves_table import split_curves

    orphan = store.write_curves(SWEEP, RUN, split_curves(rows))
    fresh = ResultsStore(store.root)
    assert _points(fresh).equals(_expected(["a", "b", "c", "d"]))
    report = check_store(ResultsStore(store.root))
    assert report.uncommitted_curves == [str(orphan.relative_to(store.root))] and not report.ok
    writer.append(_rows(["e", "f"]))  # the resume
    writer.flush()
    _record(store, 6)
    want = _expected(list("abcdef"))
    assert _points(ResultsStore(store.root)).equals(want)
    # the query's curves table holds committed files only: each point once
    from attnsweep.results.query import run_query

    counted = run_query(
        ResultsStore(store.root), "select count(*) as n, count(distinct (trial_id, epoch)) as d from curves"
    )
    assert counted["n"][0] == counted["d"][0] == want.height
    compacted = compact_store(ResultsStore(store.root))
    assert compacted.deleted_uncommitted_curves == 1 and not orphan.exists()
    after = ResultsStore(store.root)
    assert check_store(after).ok
    assert _points(after).equals(want)
    raw = pl.read_parquet(list((store.root / "curves").rglob("*.parquet")))
    assert raw.height == want.height


def test_store_check_catches_a_planted_duplicate_and_compact_removes_it(store):
    # a committed file rewritten with one trial's points twice (same name: still committed)
    path = sorted((store.root / "curves").rglob("part-*.parquet"))[0]
    table = pq.read_table(path)
    doubled = pa.concat_tables([table, table.slice(0, 2)])
    pq.write_table(doubled, path)
    fresh = ResultsStore(store.root)
    assert _points(fresh).equals(_expected(["a", "b", "c", "d"]))  # reads keep one copy
    report = check_store(ResultsStore(store.root))
    assert report.curve_duplicates == [(SWEEP, RUN, 2)] and not report.ok
    done = compact_store(ResultsStore(store.root))
    assert done.curve_points_dropped == 2
    after = ResultsStore(store.root)
    assert check_store(after).ok and _points(after).equals(_expected(["a", "b", "c", "d"]))


def test_a_copied_curves_file_is_not_read_and_is_named(store):
    path = sorted((store.root / "curves").rglob("part-*.parquet"))[-1]
    copy = path.with_name("part-99999999999999999999-ffffffff.parquet")  # newer than any: would win a read
    shutil.copy(path, copy)
    assert _points(ResultsStore(store.root)).equals(_expected(["a", "b", "c", "d"]))
    report = check_store(ResultsStore(store.root))
    assert report.uncommitted_curves == [str(copy.relative_to(store.root))]


def test_a_curves_file_of_the_wrong_schema_is_named_and_quarantined(store):
    folder = store.run_dir("curves", SWEEP, RUN)
    bad = folder / "part-00000000000000000001-00000000.parquet"
    pq.write_table(pa.table({"trial_id": ["a"], "epoch": ["zero"], "train_loss": [1.0]}), bad)
    # committed by a trial file of its own name, so that only its schema is wrong
    rows = pa.Table.from_pylist([{"trial_id": "z", "status": "done", "m": 16}], schema=SCHEMA)
    store.write_trials(SWEEP, RUN, rows, curves=bad)
    with pytest.warns(StoreWarning, match="not a file of curve points"):
        assert _points(ResultsStore(store.root)).equals(_expected(["a", "b", "c", "d"]))
    with pytest.warns(StoreWarning):
        report = check_store(ResultsStore(store.root))
    assert any("not a file of curve points" in p and bad.name in p for p in report.schema_problems)
    with pytest.warns(StoreWarning):
        done = compact_store(ResultsStore(store.root))
    assert done.quarantined_curves == 1 and not bad.exists()
    assert (store.root / "quarantine" / bad.relative_to(store.root)).exists()


def test_compacting_the_trials_keeps_their_curves_committed(store):
    before = _points(store)
    done = compact_store(ResultsStore(store.root))
    assert done.files_before == 2 and done.files_after == 1  # two part files of rows: flush_rows=2
    assert done.curve_files_before == 2 and done.curve_files_after == 1
    after = ResultsStore(store.root)
    assert _points(after).equals(before)
    assert check_store(after).ok
    compact_store(ResultsStore(store.root))  # again: nothing lost
    assert _points(ResultsStore(store.root)).equals(before)


def test_curves_of_a_trial_file_written_before_commits_still_read(tmp_path):
    # An older attnsweep wrote curves just before their rows, with no commit key.
    from attnsweep.results.curves_table import split_curves

    store = ResultsStore(tmp_path / "store")
    rows = _rows(["a", "b"])
    store.write_curves(SWEEP, RUN, split_curves(rows))
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    folder = store.run_dir("trials", SWEEP, RUN)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "part-99999999999999999998-00000000.parquet")  # no metadata key
    _record(store, 2)
    assert _points(ResultsStore(store.root)).equals(_expected(["a", "b"]))
    compact_store(ResultsStore(store.root))
    assert _points(ResultsStore(store.root)).equals(_expected(["a", "b"]))
    assert check_store(ResultsStore(store.root)).ok


def test_a_list_of_commits_nested_too_deep_commits_nothing():
    from attnsweep.results.curve_commits import committed_names
    from attnsweep.results.layout import CURVES_KEY

    deep = b"[" * 200_000 + b"]" * 200_000
    assert committed_names([("part-2.parquet", {CURVES_KEY: deep})], ["part-1.parquet"]) == set()
    named = committed_names(
        [("part-2.parquet", {CURVES_KEY: b'["part-1.parquet", "../x.parquet"]'})], ["part-1.parquet"]
    )
    assert named == {"part-1.parquet"}
    assert CURVE_SCHEMA.names[0] == "trial_id"
