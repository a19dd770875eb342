"""Curves exactly once: a curves part file is read only once the trial part file of its rows
commits it (results/curve_commits.py); store check names uncommitted files, second copies of
points and files that are not curve points; store compact repairs all three."""

from __future__ import annotations

import datetime as dt
import json
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


def test_a_key_that_is_not_a_list_of_names_commits_by_age_and_its_own_name():
    from attnsweep.results.curve_commits import committed_names, unreadable_keys
    from attnsweep.results.layout import CURVES_KEY

    names = ["part-1.parquet", "part-2.parquet", "part-3.parquet"]
    for bad in (b"[" * 200_000 + b"]" * 200_000, b'{"x": 1}', b"[" + b"1" * 100_000 + b"]", b'["../x.parquet"]'):
        trial = [("part-2.parquet", {CURVES_KEY: bad})]
        assert committed_names(trial, names) == {"part-1.parquet", "part-2.parquet"}  # never part-3: newer
        assert unreadable_keys(trial) == ["part-2.parquet"]
    named = committed_names([("part-9.parquet", {CURVES_KEY: b'["part-1.parquet"]'})], names)
    assert named == {"part-1.parquet"}  # a compacted file: what it lists (and its own name, absent here)
    assert CURVE_SCHEMA.names[0] == "trial_id"


@pytest.mark.parametrize(
    "damage",
    [
        b"[" * 300_000 + b"]" * 300_000,
        b'{"x": 1}',
        b"[" + b"1" * 100_000 + b"]",
        b'["../../../trials/x.parquet", "/etc/passwd"]',
        None,  # the metadata dropped: a tool rewrote the file
    ],
)
def test_a_trial_files_damaged_commit_loses_no_point_to_reads_or_compact(store, damage):
    want = _points(store)
    for path in sorted((store.root / "trials").rglob("part-*.parquet")):
        table = pq.read_table(path)
        meta = dict(table.schema.metadata or {})
        meta.pop(b"attnsweep.curves", None)
        if damage is not None:
            meta[b"attnsweep.curves"] = damage
        pq.write_table(table.replace_schema_metadata(meta), path)
    assert _points(ResultsStore(store.root)).equals(want)
    compact_store(ResultsStore(store.root))
    after = ResultsStore(store.root)
    assert _points(after).equals(want)
    assert check_store(after).ok


def test_an_uncommitted_file_holding_the_only_points_of_stored_rows_is_kept_not_deleted(store):
    # What a lost commit leaves: rows stored, their points in a file no trial file names.
    from attnsweep.results.curves_table import split_curves

    rows = _rows(["e"])
    only = store.write_curves(SWEEP, RUN, split_curves(rows))
    table = pa.Table.from_pylist([{k: r[k] for k in SCHEMA.names} for r in rows], schema=SCHEMA)
    store.write_trials(SWEEP, RUN, table)  # named apart from the curves file, committing none
    done = compact_store(ResultsStore(store.root))
    assert done.kept_uncommitted_curves == 1 and done.deleted_uncommitted_curves == 0 and only.exists()
    assert str(only.relative_to(store.root)) in check_store(ResultsStore(store.root)).uncommitted_curves


def test_a_committed_curves_file_with_a_column_of_its_own_compacts_and_keeps_it(store):
    path = sorted((store.root / "curves").rglob("part-*.parquet"))[0]
    table = pq.read_table(path)
    pq.write_table(table.append_column("note", pa.array(["x"] * table.num_rows)), path)
    want = _points(ResultsStore(store.root))
    done = compact_store(ResultsStore(store.root))
    assert done.curve_files_after == 1
    after = ResultsStore(store.root)
    assert _points(after).equals(want) and check_store(after).ok
    (merged,) = list((store.root / "curves").rglob("part-*.parquet"))
    assert pq.read_table(merged).column("note").null_count == want.height - table.num_rows


def test_store_check_names_a_trial_file_whose_commit_list_is_damaged(store):
    path = sorted((store.root / "trials").rglob("part-*.parquet"))[0]
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"attnsweep.curves": b'{"x": 1}'}), path)
    report = check_store(ResultsStore(store.root))
    assert report.curve_keys == [str(path.relative_to(store.root))] and not report.ok
    compact_store(ResultsStore(store.root))
    assert check_store(ResultsStore(store.root)).ok


def test_a_newer_file_holding_part_of_a_trials_curve_hides_and_loses_none_of_the_rest(store):
    # a committed file (a key edited by hand) holding only epoch 0 of trial a, with another value
    from attnsweep.results.curves_table import split_curves

    want = _points(store)
    extra = split_curves(_rows(["a"]))
    extra = extra.filter(pa.compute.equal(extra["epoch"], 0)).set_column(2, "train_loss", pa.array([0.123]))
    newer = store.write_curves(SWEEP, RUN, extra)
    trial = sorted((store.root / "trials").rglob("part-*.parquet"))[-1]
    table = pq.read_table(trial)
    names = [trial.name, newer.name]
    pq.write_table(table.replace_schema_metadata({b"attnsweep.curves": json.dumps(names).encode()}), trial)
    got = _points(ResultsStore(store.root))
    assert got.height == want.height  # every (trial, epoch) once: a's epochs 2 and 4 still read
    assert got.filter((pl.col("trial_id") == "a") & (pl.col("epoch") == 0))["train_loss"].to_list() == [0.123]
    compact_store(ResultsStore(store.root))
    assert _points(ResultsStore(store.root)).equals(got)


def test_curves_of_a_quarantined_trial_file_are_kept_by_compact(store):
    trial = sorted((store.root / "trials").rglob("part-*.parquet"))[0]
    curves = store.run_dir("curves", SWEEP, RUN) / trial.name
    trial.write_bytes(b"PAR1 not parquet")  # read as damaged: moved to quarantine, its rows gone from reads
    with pytest.warns(StoreWarning):
        done = compact_store(ResultsStore(store.root))
    assert curves.exists() and done.deleted_uncommitted_curves == 0 and done.kept_uncommitted_curves == 1


def test_a_curves_file_of_a_writers_own_encoding_or_without_a_measure_is_read():
    from attnsweep.results.curves_table import schema_problem

    dictionary = pa.schema([("trial_id", pa.dictionary(pa.int32(), pa.string())), ("epoch", pa.int64())])
    assert schema_problem(dictionary) is None
    assert (
        schema_problem(pa.schema([("trial_id", pa.string()), ("epoch", pa.int32()), ("train_acc", pa.float32())]))
        is None
    )
    assert "lacks the column(s) epoch" in schema_problem(pa.schema([("trial_id", pa.string())]))
    assert "its column epoch is double" in schema_problem(
        pa.schema([("trial_id", pa.string()), ("epoch", pa.float64())])
    )


def test_text_holding_a_byte_of_a_name_that_is_not_utf8_is_written(tmp_path):
    from attnsweep.results.outputs import write_text

    path = write_text(tmp_path / "r.md", "file part-\udcff.parquet")
    assert path.read_text() == "file part-\\udcff.parquet"


@pytest.mark.parametrize("epoch", [None, -1])
def test_a_point_with_no_epoch_or_a_negative_one_is_never_read_named_and_dropped(store, epoch):
    # Planted in a committed file (same name, so still committed): a hostile pass found check
    # said ok and compact kept it.
    path = sorted((store.root / "curves").rglob("part-*.parquet"))[0]
    table = pq.read_table(path)
    odd = table.slice(0, 1).to_pylist()[0] | {"epoch": epoch}
    pq.write_table(pa.concat_tables([table, pa.Table.from_pylist([odd], schema=table.schema)]), path)
    assert _points(ResultsStore(store.root)).equals(_expected(["a", "b", "c", "d"]))
    report = check_store(ResultsStore(store.root))
    assert report.curve_bad_points == [(SWEEP, RUN, 1)] and not report.ok
    done = compact_store(ResultsStore(store.root))
    assert done.curve_points_dropped == 1
    after = ResultsStore(store.root)
    assert check_store(after).ok and _points(after).equals(_expected(["a", "b", "c", "d"]))
    assert pl.concat([pl.read_parquet(p) for p in (store.root / "curves").rglob("part-*.parquet")])["epoch"].min() >= 0
