"""Damage the store cannot be fooled by: every single-byte change of a part file, anywhere in
it, either leaves the rows it returns unchanged or sets the file aside, with its path and the
reason; and files whose column types cannot join the others' are set aside by name."""

from __future__ import annotations

import datetime as dt
import warnings

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnsweep.results import ResultsStore, StoreError
from attnsweep.results.atomic_write import write_parquet_atomic
from attnsweep.results.defensive_reads import StoreWarning
from attnsweep.results.integrity import check_store
from attnsweep.results.schemas import merge_type, unify

TS = pa.timestamp("us", tz="UTC")


def _table(n: int = 3) -> pa.Table:
    return pa.table(
        {
            "trial_id": [f"t{i}" for i in range(n)],
            "T": pa.array([8 * (i + 1) for i in range(n)], pa.int64()),
            "test_acc": [0.5 + i / 10 for i in range(n)],
            "support": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int64())),
            "status": ["done"] * n,
            "finished_at": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * n, TS),
        }
    )


def _read(root) -> tuple[pl.DataFrame | None, ResultsStore]:
    store = ResultsStore(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        try:
            return store.scan_trials().collect().drop("sweep", "run_id"), store
        except StoreError:
            return None, store


@pytest.mark.slow
def test_every_single_byte_change_is_caught_or_changes_no_row(tmp_path):
    store = ResultsStore(tmp_path / "store")
    path = write_parquet_atomic(_table(), store.run_dir("trials", "sw", "r1") / "part-1.parquet")
    original = path.read_bytes()
    expected = pl.from_arrow(_table())
    assert _read(store.root)[0].equals(expected)
    caught = 0
    for pos in range(len(original)):
        damaged = bytearray(original)
        damaged[pos] ^= 0xFF
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(damaged))
        rows, reader = _read(store.root)
        if rows is None:  # set aside: named, with a reason, and gone from the read
            assert list(reader.set_aside) == [path] and str(reader.set_aside[path])
            caught += 1
        else:
            assert rows.equals(expected), f"byte {pos}: the store returned changed rows"
        (store.root / "quarantine").exists() and __import__("shutil").rmtree(store.root / "quarantine")
    assert caught > len(original) // 2  # most bytes matter; the rest (padding, statistics) change no row


def test_a_file_written_without_checksums_is_still_decoded_in_full(tmp_path):
    """Old files (no page checksums, no digest) get the other checks: a page that does not
    decode sets the file aside (a changed byte that still decodes cannot be seen in them)."""
    store = ResultsStore(tmp_path)
    folder = store.run_dir("trials", "sw", "r1")
    folder.mkdir(parents=True)
    pq.write_table(_table(2000), folder / "part-1.parquet")
    pq.write_table(_table(5), folder / "part-2.parquet")
    data = bytearray((folder / "part-1.parquet").read_bytes())
    meta = pq.read_metadata(folder / "part-1.parquet")
    col = next(
        meta.row_group(0).column(i)
        for i in range(meta.num_columns)
        if meta.row_group(0).column(i).path_in_schema == "trial_id"
    )
    start = col.data_page_offset + col.total_compressed_size // 2
    data[start : start + 64] = b"\xff" * 64
    (folder / "part-1.parquet").write_bytes(bytes(data))
    with pytest.warns(StoreWarning, match="part-1.parquet left out: damaged"):
        rows = store.scan_trials().collect()
    assert rows.height == 5


def test_the_types_most_rows_have_win_and_the_odd_file_is_named(tmp_path):
    store = ResultsStore(tmp_path)
    good = _table(4)
    odd = good.slice(0, 1).set_column(2, "test_acc", pa.array(["0.5"]))
    for name, t in (
        ("part-1.parquet", good),
        ("part-0.parquet", odd),
        ("part-2.parquet", good.slice(0, 2)),
    ):
        write_parquet_atomic(t, store.run_dir("trials", "sw", "r1") / name)
    with pytest.warns(StoreWarning, match=r"part-0.parquet left out: its column test_acc is string, but double"):
        rows = store.scan_trials().collect()
    assert rows.height == 6 and rows.schema["test_acc"] == pl.Float64
    with pytest.warns(StoreWarning, match="part-0.parquet"):
        report = check_store(ResultsStore(tmp_path))
    assert not report.ok and len(report.schema_problems) == 1
    assert "part-0.parquet" in report.schema_problems[0] and "test_acc is string" in report.schema_problems[0]
    assert store.arrow_dataset("trials").to_table().num_rows == 6


@pytest.mark.parametrize(
    ("a", "b", "merged"),
    [
        (pa.int32(), pa.int64(), pa.int64()),
        (pa.uint32(), pa.int64(), pa.int64()),
        (pa.uint64(), pa.int64(), None),
        (pa.int64(), pa.float32(), pa.float64()),
        (pa.float32(), pa.float64(), pa.float64()),
        (pa.null(), pa.string(), pa.string()),
        (pa.large_string(), pa.string(), pa.string()),
        (pa.dictionary(pa.int32(), pa.string()), pa.string(), pa.string()),
        (pa.list_(pa.int32()), pa.large_list(pa.int64()), pa.list_(pa.int64())),
        (pa.string(), pa.float64(), None),
        (pa.bool_(), pa.int64(), None),
        (TS, pa.timestamp("ns", tz="UTC"), None),
    ],
)
def test_merge_type(a, b, merged):
    assert merge_type(a, b) == merged and merge_type(b, a) == merged


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (pa.int32(), pa.int64()),
        (pa.float32(), pa.int64()),
        (pa.uint8(), pa.int16()),
        (pa.dictionary(pa.int8(), pa.string()), pa.large_string()),
        (pa.list_(pa.int32()), pa.list_(pa.int64())),
        (pa.null(), TS),
    ],
)
def test_what_merges_reads_in_polars_and_pyarrow(tmp_path, a, b):
    """Every promotion merge_type accepts is one both scans make."""
    values = {
        "int": [1, None],
        "flo": [1.5, None],
        "str": ["x", None],
        "lis": [[1], None],
        "nul": [None, None],
        "tim": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None],
    }

    def column(t):
        kind = (
            "lis"
            if pa.types.is_list(t)
            else "str"
            if pa.types.is_dictionary(t) or pa.types.is_large_string(t)
            else "nul"
            if pa.types.is_null(t)
            else "tim"
            if pa.types.is_timestamp(t)
            else "flo"
            if pa.types.is_floating(t)
            else "int"
        )
        return (
            pa.array(values[kind]).cast(t)
            if kind != "str" or not pa.types.is_dictionary(t)
            else pa.array(values[kind]).dictionary_encode().cast(t)
        )

    store = ResultsStore(tmp_path)
    for i, t in enumerate((a, b)):
        write_parquet_atomic(
            pa.table({"trial_id": ["x", "y"], "v": column(t)}),
            store.run_dir("trials", "sw", f"r{i}") / "part.parquet",
        )
    schema, conflicts = unify([(i, pa.schema([("v", t)]), 2) for i, t in enumerate((a, b))])
    assert not conflicts
    rows = store.scan_trials().collect()
    assert rows.height == 4 and rows["v"].null_count() == sum(2 if pa.types.is_null(t) else 1 for t in (a, b))
    assert rows.schema["v"] == pl.from_arrow(schema.empty_table()).schema["v"]
    table = store.arrow_dataset("trials").to_table()
    assert table.num_rows == 4 and table.schema.field("v").type == schema.field("v").type


@pytest.mark.slow
def test_a_checked_version_is_remembered_and_a_changed_one_is_checked_again(tmp_path, monkeypatch):
    import os
    import time

    from attnsweep.results.checked import CheckedFiles

    monkeypatch.setenv("ATTNSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    store = ResultsStore(tmp_path / "store")
    path = write_parquet_atomic(_table(), store.run_dir("trials", "sw", "r1") / "part-1.parquet")
    assert _read(store.root)[0] is not None
    assert not CheckedFiles().known(path, path.stat())  # too young to be remembered (racy)
    time.sleep(2.1)
    assert _read(store.root)[0] is not None
    assert CheckedFiles().known(path, path.stat())
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same size and mtime: ctime still moves
    assert not CheckedFiles().known(path, path.stat())
    rows, reader = _read(store.root)
    assert rows is None and list(reader.set_aside) == [path]


def test_the_record_can_be_turned_off(tmp_path, monkeypatch):
    from attnsweep.results.checked import CheckedFiles

    monkeypatch.setenv("ATTNSWEEP_CACHE_DIR", "off")
    record = CheckedFiles()
    record.add(tmp_path, tmp_path.stat())
    record.commit()
    assert not record.known(tmp_path, tmp_path.stat())


def _run_files(store, run, n=3):
    return [
        write_parquet_atomic(_table().slice(i, 1), store.run_dir("trials", "sw", run) / f"part-{i}.parquet")
        for i in range(n)
    ]


def test_a_compacted_file_replaces_only_files_whose_rows_it_holds_and_only_beside_it(tmp_path):
    import json

    from attnsweep.results.integrity import compact_store
    from attnsweep.results.layout import REPLACES_KEY

    store = ResultsStore(tmp_path / "store")
    files = _run_files(store, "r1")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    claim = [p.name for p in files[1:]] + ["../../../../victim.txt", str(victim), ".hidden.parquet"]
    t = pq.read_table(files[0])
    pq.write_table(
        t.replace_schema_metadata({**(t.schema.metadata or {}), REPLACES_KEY: json.dumps(claim).encode()}),
        files[0],
        write_page_checksum=True,
    )
    rows = ResultsStore(store.root).scan_trials().collect()
    assert rows.height == 3  # it holds one row: it replaces nothing
    assert check_store(ResultsStore(store.root)).superseded == []
    compact_store(ResultsStore(store.root))
    assert victim.read_text() == "precious" and ResultsStore(store.root).scan_trials().collect().height == 3


def test_a_compaction_left_half_done_still_skips_the_files_it_holds(tmp_path):
    from attnsweep.results.integrity import compact_store

    store = ResultsStore(tmp_path / "store")
    files = _run_files(store, "r1")
    olds = {p.name: p.read_bytes() for p in files}
    compact_store(store)
    for name, data in olds.items():  # the old files back, as after a crash before their deletion
        (store.run_dir("trials", "sw", "r1") / name).write_bytes(data)
    fresh = ResultsStore(store.root)
    assert fresh.scan_trials().collect().height == 3 and len(fresh.superseded) == 3


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_part_name_that_is_not_a_regular_file_is_never_opened(tmp_path, kind):
    import os

    store = ResultsStore(tmp_path / "store")
    _run_files(store, "r1")
    odd = store.run_dir("trials", "sw", "r1") / "part-odd.parquet"
    {
        "fifo": lambda: os.mkfifo(odd),
        "device": lambda: odd.symlink_to("/dev/zero"),
        "directory": odd.mkdir,
    }[kind]()
    rows, reader = _read(store.root)  # a FIFO would block here, /dev/zero fill the memory
    assert rows.height == 3 and "not a regular file" in str(reader.set_aside[odd])


def test_folders_no_run_writes_are_not_read_and_store_check_names_them(tmp_path):
    store = ResultsStore(tmp_path / "store")
    files = _run_files(store, "r1")
    for folder in (
        "junk/junk",
        "sweep=sw/run_id=%72%31",
    ):  # %72%31 would decode to r1 and join that run
        (store.root / "trials" / folder).mkdir(parents=True)
        (store.root / "trials" / folder / "part-0.parquet").write_bytes(files[0].read_bytes())
    assert ResultsStore(store.root).scan_trials().collect().height == 3
    report = check_store(ResultsStore(store.root))
    assert sorted(report.stray) == [
        "trials/junk/junk/part-0.parquet",
        "trials/sweep=sw/run_id=%72%31/part-0.parquet",
    ]
    assert not report.ok


def test_a_run_record_that_is_not_one_is_set_aside_and_named(tmp_path):
    from attnsweep.orchestrator.trials_table import run_schema

    store = ResultsStore(tmp_path / "store")
    _run_files(store, "r1")
    _run_files(store, "r2")
    record = {
        "status": "finished",
        "started_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "n_trials": 3,
        "spec_hash": "x",
        "spec_yaml": "name: sw",
    }
    store.write_run("sw", "r1", record, run_schema())
    store.write_run("sw", "r2", record, run_schema())
    bad = store.run_dir("runs", "sw", "r1") / "run.parquet"
    pq.write_table(_table(), bad)  # trial rows over a run record: 3 rows, the "majority"
    fresh = ResultsStore(store.root)
    assert fresh.read_run("sw", "r2")["status"] == "finished"
    with pytest.warns(StoreWarning, match="not a run record"):
        assert fresh.latest_run() == (
            "sw",
            "r2",
        )  # the good record is not outvoted in the runs table
    with pytest.raises(StoreError, match="not a run record"):
        fresh.read_run("sw", "r1")
    pq.write_table(pa.table({"x": [1]}), bad)
    with pytest.raises(StoreError, match="lacks the column"):
        ResultsStore(store.root).read_run("sw", "r1")
    assert not check_store(ResultsStore(store.root)).ok
