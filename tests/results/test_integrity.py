"""Store integrity: quarantine of unreadable files, schema evolution read by polars,
pyarrow and DuckDB, `check` and `compact`, and the run lock."""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from attnsweep.results import ResultsStore
from attnsweep.results.atomic_write import write_parquet_atomic
from attnsweep.results.defensive_reads import StoreWarning
from attnsweep.results.integrity import check_store, compact_store
from attnsweep.results.locks import RunLock, RunLockedError


def _part(store, run, name, table):
    return write_parquet_atomic(table, store.run_dir("trials", "sw", run) / name)


@pytest.fixture()
def evolved(tmp_path):
    """Three files of one sweep written by 'different versions': the second adds a column,
    turns the int column `epochs` into a float, and holds an all-null column."""
    store = ResultsStore(tmp_path)
    _part(
        store,
        "r1",
        "part-1.parquet",
        pa.table(
            {
                "trial_id": ["a", "b"],
                "epochs": pa.array([1, 2], pa.int64()),
                "test_acc": [0.5, 0.75],
            }
        ),
    )
    _part(
        store,
        "r2",
        "part-1.parquet",
        pa.table(
            {
                "trial_id": ["c"],
                "epochs": pa.array([2.5], pa.float64()),
                "test_acc": pa.nulls(1, pa.null()),
                "new_col": ["x"],
            }
        ),
    )
    _part(
        store,
        "r2",
        "part-2.parquet",
        pa.table(
            {
                "trial_id": ["d"],
                "epochs": pa.array([4], pa.int64()),
                "test_acc": [1.0],
                "new_col": pa.nulls(1, pa.string()),
            }
        ),
    )
    for run in ("r1", "r2"):  # a run record's columns (results/store.py RUN_COLUMNS)
        store.write_run(
            "sw",
            run,
            {
                "status": "finished",
                "started_at": 1.0,
                "n_trials": 2,
                "spec_hash": "h",
                "spec_yaml": "name: sw",
            },
        )
    return store


def _expected():
    return pl.DataFrame(
        {
            "trial_id": ["a", "b", "c", "d"],
            "epochs": [1.0, 2.0, 2.5, 4.0],
            "test_acc": [0.5, 0.75, None, 1.0],
            "new_col": [None, None, "x", None],
        }
    )


def test_evolved_schemas_read_as_one_table_in_polars(evolved):
    df = evolved.scan_trials().collect().sort("trial_id")
    assert df.select(_expected().columns).equals(_expected())
    assert df["run_id"].to_list() == ["r1", "r1", "r2", "r2"] and df["sweep"].unique().to_list() == ["sw"]


def test_evolved_schemas_read_as_one_table_in_pyarrow(evolved):
    t = evolved.arrow_dataset("trials").to_table()
    df = pl.from_arrow(t).sort("trial_id")
    assert df.select(_expected().columns).equals(_expected())
    assert t.schema.field("epochs").type == pa.float64()


def test_evolved_schemas_read_as_one_table_in_duckdb(evolved):
    glob = str(evolved.root / "trials" / "**" / "*.parquet")
    df = duckdb.sql(
        f"select trial_id, epochs::double as epochs, test_acc, new_col, run_id from "
        f"read_parquet('{glob}', hive_partitioning = true, union_by_name = true) order by trial_id"
    ).pl()
    assert df.select(_expected().columns).equals(_expected())


def test_truncated_and_empty_files_are_quarantined_and_the_rest_reads(evolved):
    good = evolved.root / "trials" / "sweep=sw" / "run_id=r1" / "part-1.parquet"
    data = good.read_bytes()
    bad = good.with_name("part-2.parquet")
    bad.write_bytes(data[: len(data) // 2])  # truncated mid-file
    empty = good.with_name("part-3.parquet")
    empty.write_bytes(b"")
    fresh = ResultsStore(evolved.root)
    with pytest.warns(StoreWarning, match="quarantine"):
        df = fresh.scan_trials().collect()
    assert df.height == 4  # the two readable runs' rows, nothing from the broken files
    assert not bad.exists() and not empty.exists()
    report = check_store(ResultsStore(evolved.root))
    assert not report.ok
    assert sorted(report.quarantined) == [
        "quarantine/trials/sweep=sw/run_id=r1/part-2.parquet",
        "quarantine/trials/sweep=sw/run_id=r1/part-3.parquet",
    ]


def test_check_reports_duplicates_and_temp_files(evolved):
    _part(
        evolved,
        "r1",
        "part-9.parquet",
        pa.table({"trial_id": ["a"], "epochs": [7], "test_acc": [0.1]}),
    )
    tmp = evolved.run_dir("trials", "sw", "r1") / ".tmp-dead-part.parquet.partial"
    tmp.write_bytes(b"half")
    report = check_store(evolved)
    assert report.duplicates == [("sw", "r1", "a", 2)]
    assert [p for p, *_ in report.temp_files] == ["trials/sweep=sw/run_id=r1/.tmp-dead-part.parquet.partial"]
    assert not report.ok and report.rows["trials"] == 5


def test_a_clean_store_checks_ok(evolved):
    report = check_store(evolved)
    assert report.ok and report.files == {"trials": 3, "runs": 2} and report.rows["trials"] == 4


def test_compact_merges_files_without_changing_a_row(evolved):
    before = evolved.scan_trials().collect().sort("trial_id")
    report = compact_store(evolved)
    assert (report.runs, report.files_before, report.files_after, report.rows) == (1, 2, 1, 2)
    after_store = ResultsStore(evolved.root)
    assert len(list((evolved.root / "trials" / "sweep=sw" / "run_id=r2").glob("*.parquet"))) == 1
    assert after_store.scan_trials().collect().sort("trial_id").equals(before)
    assert check_store(after_store).ok


def test_a_compaction_interrupted_before_deleting_leaves_no_duplicates(evolved):
    folder = evolved.root / "trials" / "sweep=sw" / "run_id=r2"
    olds = {p.name: p.read_bytes() for p in folder.glob("*.parquet")}
    before = evolved.scan_trials().collect().sort("trial_id")
    compact_store(evolved)
    for name, data in olds.items():  # as if the driver died between the rename and the deletes
        (folder / name).write_bytes(data)
    fresh = ResultsStore(evolved.root)
    assert fresh.scan_trials().collect().sort("trial_id").equals(before)
    report = check_store(fresh)
    assert report.duplicates == [] and len(report.superseded) == 2
    assert compact_store(fresh).deleted_superseded == 2
    assert len(list(folder.glob("*.parquet"))) == 1


def test_a_second_writer_of_a_run_is_refused(tmp_path):
    store = ResultsStore(tmp_path)
    with RunLock(store, "sw", "r1"):
        with pytest.raises(RunLockedError, match=r"pid \d+ on host"), RunLock(store, "sw", "r1"):
            pass
        with RunLock(store, "sw", "r2"):  # another run is not blocked
            pass
    with RunLock(store, "sw", "r1"):  # released on exit
        pass


def test_check_reports_trials_without_a_run_record(evolved):
    (evolved.run_dir("runs", "sw", "r2") / "run.parquet").unlink()
    report = check_store(evolved)
    assert report.orphans == [("sw", "r2")] and not report.ok


def test_check_tells_a_store_from_other_folders(tmp_path):
    from attnsweep.results import StoreError

    with pytest.raises(StoreError, match="no such folder"):
        check_store(ResultsStore(tmp_path / "nothing"))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreError, match="is a file, not a store's folder"):
        check_store(ResultsStore(tmp_path / "a-file"))
    with pytest.raises(StoreError, match="an empty store path"):
        check_store(ResultsStore(""))
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)  # another tool's runs/, with a user's files beside it
    (home / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match=r"is not an attnsweep store: .*\(notes.txt\)"):
        check_store(ResultsStore(home))
    for empty in (tmp_path / "new", tmp_path / "fresh"):
        empty.mkdir()
    (tmp_path / "fresh" / "trials").mkdir()  # a run refused before it wrote anything leaves this
    (tmp_path / "fresh" / "locks").mkdir()
    for empty in (tmp_path / "new", tmp_path / "fresh"):
        report = check_store(ResultsStore(empty))
        assert report.empty and report.ok and report.files == {"trials": 0, "runs": 0}


@pytest.mark.slow
def test_store_check_and_compact_refuse_what_is_not_a_store(tmp_path, evolved):
    import os
    import subprocess
    import sys

    (tmp_path / "empty").mkdir()

    def cli(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "attnsweep.cli", "store", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, COLUMNS="250"),
        )
        return proc.returncode, " ".join((proc.stdout + proc.stderr).split())

    for path in ("/", "/proc"):
        for command in ("check", "compact"):
            code, said = cli(command, "--store", path)
            assert code == 2 and f"{path} is not an attnsweep store" in said and "ok" not in said.split(), said
    assert cli("check", "--store", "") == (
        2,
        "error: --store: an empty path; give the store's folder (default results-store)",
    )
    code, said = cli("check", "--store", "nowhere")
    assert code == 2 and "no store at nowhere: no such folder" in said
    code, said = cli("check", "--store", "empty")
    assert code == 0 and said == "empty: the store at empty holds no runs yet (nothing to check)"
    code, said = cli("check", "--store", str(evolved.root))
    assert code == 0 and said.endswith(" ok")
