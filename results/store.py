"""The results store: a directory of Parquet files, hive-partitioned by sweep and run, and
the one object through which runs are written and read (:class:`ResultsStore`).

Its parts: the layout of runs and trials and their names (:mod:`results.layout`); where a
store can live, a local folder or an fsspec URI, and how its folders are listed
(:mod:`results.roots`); how a file is written whole or not at all, through a temporary file
and a rename (:mod:`results.atomic_write`); and how a read checks every file it uses and
leaves damaged or foreign ones out (:mod:`results.defensive_reads`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.atomic_write import (
    TMP_PREFIX,
    TempFile,
    temp_file_state,
    temp_name,
    write_parquet_atomic,
)
from attnsweep.results.defensive_reads import RACY_S, DefensiveReader  # noqa: F401 - bench/store.py imports RACY_S from here
from attnsweep.results.errors import StoreError
from attnsweep.results.layout import CURVES_KEY, NAME_RE, PARTITION_SCHEMA, RUN_COLUMNS, RUN_FILE
from attnsweep.results.parquet_check import os_reason  # noqa: F401 - orchestrator/driver.py imports it from here
from attnsweep.results.record_text import check_record
from attnsweep.results.roots import listing, store_root
from attnsweep.results.schemas import POLARS_CASTS

VALID_POINT = pl.col("trial_id").is_not_null() & pl.col("epoch").is_not_null() & (pl.col("epoch") >= 0)
"""A curve point reads can place: a trial id and an epoch of 0 or more (a point without them
is hand-made; store check names it, store compact drops it)."""


class ResultsStore(DefensiveReader):
    """A store rooted at a local directory or an fsspec URI (created on first write).

    Args:
        root: the store's directory, or a URI such as ``s3://bucket/store``.

    Raises:
        StoreError: a URI whose scheme cannot hold a store (:data:`results.roots.STORE_SCHEMES`) or no
            installed fsspec backend handles, or an ``ATTNSWEEP_MAX_FILE_MB`` that is not a
            whole number of MiB in range (:func:`~results.file_limits.max_file_bytes`).
    """

    def __init__(self, root: str | os.PathLike, check_every_file: bool = False):
        self.uri = str(root)
        super().__init__(*store_root(root), check_every_file)

    # -- paths -------------------------------------------------------------------------
    def run_dir(self, table: str, sweep: str, run_id: str) -> Path:
        """Folder of one run's files of ``table`` ("trials", "curves" or "runs").

        Raises:
            StoreError: a sweep name or run id that is not a safe path component.
        """
        for label, value in (("sweep", sweep), ("run_id", run_id)):
            if not NAME_RE.match(value):
                raise StoreError(
                    f"{label} {value!r} must start with a letter or digit and hold only letters, "
                    "digits, '_', '.', '-' (at most 100)"
                )
        return self.root / table / f"sweep={sweep}" / f"run_id={run_id}"

    def holds(self, path: str | os.PathLike) -> bool:
        """Whether ``path``, its links followed, is inside this store's folder (or is it), for
        a local store. Folders are compared by device and inode, so another path to the store
        (a link to a folder above it, a bind mount) is inside too; a path in a store that does
        not exist yet, or in a remote one, is not.

        Args:
            path: a file or folder; for a descriptor of this process (``/dev/stdout``) the file
                it is open on.
        """
        if not self.local:
            return False
        try:
            root = os.stat(self.root)
        except OSError:
            return False
        real = Path(os.path.realpath(path))
        for folder in (real, *real.parents):
            try:
                st = os.stat(folder)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino):
                return True
        return False

    # -- writing -----------------------------------------------------------------------
    def check_writable(self, sweep: str, run_id: str) -> None:
        """Check, before a run trains anything, that its rows and record can be written:
        ``trials``, ``runs`` and ``locks`` are folders (or absent), and a probe file can be
        written and removed in the run's trial folder.

        Raises:
            StoreError: naming the path and what is wrong with it.
        """
        for table in ("trials", "runs", "locks"):
            path = self.root / table
            if path.exists() and not path.is_dir():
                raise StoreError(
                    f"the store at {self.root} is not laid out as a store: {path} is a file, not a "
                    "folder; move it away or give another --store"
                )
        folder = self.run_dir("trials", sweep, run_id)
        probe = folder / temp_name("probe")  # named as a writer's temporary file: a kill leaves nothing unknown
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreError(f"cannot write to the store at {self.root}: {folder}: {exc.strerror or exc}") from exc

    def write_trials(self, sweep: str, run_id: str, table: pa.Table, curves: Path | None = None) -> Path:
        """Write one part file of trial rows atomically; returns its path.

        Args:
            curves: the part file of these rows' learning-curve points (:meth:`write_curves`,
                written just before): the trial file takes its name and commits it
                (:data:`~results.layout.CURVES_KEY` in its metadata). Until the trial file is
                renamed into place the points are not read; a kill between the two renames
                leaves a curves file no read sees, and the trials its rows held are trained
                again on resume.
        """
        folder = self.run_dir("trials", sweep, run_id)
        name = curves.name if curves is not None else part_name()
        committed = [curves.name] if curves is not None else []
        meta = {**(table.schema.metadata or {}), CURVES_KEY: json.dumps(committed).encode()}
        return write_parquet_atomic(table.replace_schema_metadata(meta), folder / name)

    def write_curves(self, sweep: str, run_id: str, table: pa.Table) -> Path:
        """Write one part file of learning-curve points (results/curves_table.py) atomically;
        returns its path. Its points are read only once the part file of their trials'
        rows commits it (:meth:`write_trials` with ``curves=`` this path)."""
        folder = self.run_dir("curves", sweep, run_id)
        return write_parquet_atomic(table, folder / part_name())

    def write_run(self, sweep: str, run_id: str, record: dict, schema: pa.Schema | None = None) -> Path:
        """Write (or replace) the one-row ``runs`` record of a run atomically."""
        folder = self.run_dir("runs", sweep, run_id)
        return write_parquet_atomic(pa.Table.from_pylist([record], schema=schema), folder / RUN_FILE)

    # -- reading -----------------------------------------------------------------------
    def schema(self, table: str, files: list[Path] | None = None) -> pa.Schema:
        """The unified Arrow schema of ``table``'s files (without the partition columns),
        by :func:`results.schemas.unify`.

        Raises:
            StoreError: ``files`` (given) include ones whose column types cannot join.
        """
        files = self._files(table) if files is None else files
        schema, conflicts = self._unify(files)
        if conflicts:
            path, conflict = next(iter(conflicts.items()))
            raise StoreError(f"the {table} file {path} does not fit the others: {conflict}")
        return schema

    def scan_trials(self) -> pl.LazyFrame:
        """All trial rows as a lazy frame, with ``sweep`` and ``run_id`` columns.

        Raises:
            StoreError: the store holds no trial files.
        """
        return self._scan("trials")

    def scan_runs(self) -> pl.LazyFrame:
        """All run records as a lazy frame.

        Raises:
            StoreError: the store holds no run records.
        """
        return self._scan("runs")

    def _scan(self, table: str, folder: Path | None = None, file_column: str | None = None) -> pl.LazyFrame:
        """``table``'s rows (or one run ``folder``'s) as a lazy frame; ``file_column``: a column
        of that name holding the name of each row's file (names sort in writing order)."""
        files = self._files(table, folder)
        if not files:
            where = f"run folder {folder}" if folder is not None else f"store at {self.root}"
            raise StoreError(f"no {table} in the {where}: run a sweep first")
        if not self.local:
            if file_column is None:
                return pl.scan_pyarrow_dataset(self._dataset(table, files, partitioned=folder is None))
            return pl.concat(  # a dataset scan does not say which file a row came from
                [
                    pl.scan_pyarrow_dataset(self._dataset(table, [p], partitioned=folder is None)).with_columns(
                        pl.lit(p.name).alias(file_column)
                    )
                    for p in files
                ],
                how="diagonal_relaxed",
            )
        schema = _frame(self.schema(table, files).empty_table()).schema
        scan = pl.scan_parquet(  # glob=False: a '[', '*' or '?' in a path is part of the name
            files,
            glob=False,
            schema=schema,
            hive_partitioning=folder is None,
            hive_schema={"sweep": pl.String, "run_id": pl.String} if folder is None else None,
            try_parse_hive_dates=False,
            missing_columns="insert",
            extra_columns="ignore",
            cast_options=pl.ScanCastOptions(**POLARS_CASTS),
            include_file_paths=file_column,
        )
        if file_column is not None:  # the name alone: the folder may hold characters that sort oddly
            scan = scan.with_columns(pl.col(file_column).str.split("/").list.last())
        return scan

    def arrow_dataset(self, table: str = "trials"):
        """``table`` as one ``pyarrow.dataset.Dataset`` over the readable files, with the
        unified schema and the ``sweep``/``run_id`` partition columns.

        Raises:
            StoreError: no files, or incompatible column types.
        """
        files = self._files(table)
        if not files:
            raise StoreError(f"no {table} in the store at {self.root}: run a sweep first")
        return self._dataset(table, files)

    def _dataset(self, table: str, files: list[Path], partitioned: bool = True):
        import pyarrow.dataset as ds

        schema = self.schema(table, files)
        fs = None if self.local else self.root.fs
        paths = [str(p) if self.local else p.path for p in files]
        base = self.root / table
        if not partitioned:
            return ds.dataset(paths, schema=schema, format="parquet", filesystem=fs)
        return ds.dataset(
            paths,
            schema=pa.unify_schemas([schema, PARTITION_SCHEMA]),
            format="parquet",
            filesystem=fs,
            partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
            partition_base_dir=str(base) if self.local else base.path,
        )

    def scan_run_trials(self, sweep: str, run_id: str, once: bool = True) -> pl.LazyFrame:
        """The trial rows of one run, with ``sweep`` and ``run_id`` columns.

        Args:
            once: one row per trial id: a run writes each trial once, so a repeated id is a
                file copied in or restored twice; the row of the latest file is kept.
                ``False``: every stored row (what ``store check`` and the completeness
                check count).

        Raises:
            StoreError: the run has no trial files.
        """
        folder = self.run_dir("trials", sweep, run_id)
        try:
            scan = self._scan("trials", folder)
        except StoreError:
            raise StoreError(f"run {run_id} of sweep {sweep} has no trials in the store at {self.root}") from None
        if (
            once and "trial_id" in scan.collect_schema()
        ):  # files are read in name order; part names start with their write time
            scan = scan.unique(subset="trial_id", keep="last", maintain_order=True)
        return scan.with_columns(sweep=pl.lit(sweep), run_id=pl.lit(run_id))

    def scan_run_curves(
        self,
        sweep: str,
        run_id: str,
        trial_ids: Iterable[str] | None = None,
        with_file: bool = False,
        once: bool = True,
    ) -> pl.LazyFrame | None:
        """The learning-curve points of one run (results/curves_table.py: ``trial_id``,
        ``epoch``, ``train_loss``, ``train_acc``, ``train_error``), with ``sweep`` and ``run_id``
        columns: only points of files the run's trial files commit (results/curve_commits.py),
        each ``(trial_id, epoch)`` once (the copy of the later file), in file order; a point
        without a trial id or with no epoch or a negative one (no writer makes one) is never
        read (:data:`VALID_POINT`). None when the run kept none.

        Args:
            trial_ids: only these trials' points (read lazily: the rest is never decoded).
            with_file: instead of ``sweep`` and ``run_id``, a column :data:`FILE_COLUMN` naming
                each point's part file (``store compact`` rewrites the files by it).
            once: each ``(trial_id, epoch)`` once. ``False`` leaves a point stored twice twice
                (only a file copied or edited by hand holds one), and saves the memory of the
                distinct points (~150 bytes a point): the figure thins its lines first, then
                drops the copies.
        """
        folder = self.run_dir("curves", sweep, run_id)
        try:
            scan = self._scan("curves", folder, file_column=FILE_COLUMN)
        except StoreError:
            return None
        scan = scan.filter(VALID_POINT)
        if trial_ids is not None:
            scan = scan.filter(pl.col("trial_id").is_in(list(trial_ids)))
        if once:  # files in name order, the writing order: a point's later copy wins
            scan = scan.unique(subset=["trial_id", "epoch"], keep="last", maintain_order=True)
        if with_file:
            return scan
        return scan.drop(FILE_COLUMN).with_columns(sweep=pl.lit(sweep), run_id=pl.lit(run_id))

    def run_trial_ids(self, sweep: str, run_id: str) -> set[str]:
        """The trial ids one run already holds (empty if none)."""
        try:
            return set(self.scan_run_trials(sweep, run_id).select("trial_id").collect()["trial_id"].to_list())
        except StoreError:
            return set()

    def read_run(self, sweep: str, run_id: str) -> dict:
        """The ``runs`` record of one run, as a dict.

        Raises:
            StoreError: no such run, or a record whose text fields are beyond the sizes and
                depths a run writes (:func:`results.record_text.check_record`, naming the
                file and the field).
        """
        path = self.run_dir("runs", sweep, run_id) / RUN_FILE
        if not path.exists() and path not in self.set_aside:
            raise StoreError(f"no run {run_id!r} of sweep {sweep!r} in the store at {self.root}")
        if self.metadata(path) is None:
            raise StoreError(f"the record of run {run_id!r} of sweep {sweep!r} is {self.set_aside.get(path, 'gone')}")
        if self.metadata(path).num_rows != 1:
            raise StoreError(
                f"the record of run {run_id!r} of sweep {sweep!r} ({path}) is not a run record: it holds "
                f"{self.metadata(path).num_rows} rows, a run record one"
            )
        lacking = [c for c in RUN_COLUMNS if c not in self._arrow_schema(path).names]
        if lacking:
            raise StoreError(
                f"the record of run {run_id!r} of sweep {sweep!r} ({path}) is not a run record: it lacks "
                f"the column(s) {', '.join(lacking)}"
            )
        with path.open("rb") as fh:
            record = _frame(pq.read_table(fh)).row(0, named=True)
        # Its JSON and YAML held to the sizes and depths a run writes before any reader parses them.
        check_record(record, str(path.relative_to(self.root)) if self.local else str(path))
        return record

    def latest_run(self) -> tuple[str, str]:
        """``(sweep, run_id)`` of the run that started last.

        Raises:
            StoreError: the store holds no runs.
        """
        runs = self.scan_runs().select("sweep", "run_id", "started_at").sort("started_at").collect()
        return runs["sweep"][-1], runs["run_id"][-1]

    def resolve_run(self, name: str) -> tuple[str, int]:
        """``name`` as a run id, and how many runs its sweep has when it named a sweep: a run
        id is itself (count 0); a sweep's name means that sweep's latest run by start; a
        name that is neither comes back as it is (count 0), for the caller's own message."""
        try:
            runs = self.scan_runs().select("sweep", "run_id", "started_at").collect()
        except StoreError:
            return name, 0
        if name in set(runs["run_id"].to_list()):
            return name, 0
        mine = runs.filter(pl.col("sweep") == name).sort("started_at")
        return (name, 0) if mine.is_empty() else (mine["run_id"][-1], mine.height)

    def sweep_of(self, run_id: str) -> str:
        """The sweep a run belongs to.

        Raises:
            StoreError: no run with that id.
        """
        found = self.scan_runs().filter(pl.col("run_id") == run_id).select("sweep").collect()
        if found.is_empty():
            raise StoreError(f"no run {run_id!r} in the store at {self.root}")
        return found["sweep"][0]

    def temp_files(self, folder: Path | None = None) -> list[TempFile]:
        """Temporary files in the run folders of ``trials``, ``curves`` and ``runs`` (or in one
        ``folder``), each with its writer and whether that writer is alive
        (:func:`results.atomic_write.temp_file_state`): a file in progress, or one left by a killed writer."""
        if not self.local:
            return []  # an object store has no temporary files: each file is one PUT
        if folder is not None:
            found = listing(folder, f"{TMP_PREFIX}*") if folder.is_dir() else []
        else:
            found = [
                p
                for table in ("trials", "curves", "runs")
                if (self.root / table).is_dir()
                for p in listing(self.root / table, f"sweep=*/run_id=*/{TMP_PREFIX}*")
            ]
        return [temp_file_state(p) for p in sorted(found, key=str)]

    def clean_temp_files(self, folder: Path | None = None) -> list[Path]:
        """Delete the temporary files (of the whole store, or of one ``folder``) whose
        writer is provably gone, and only those; returns them. A file another process is
        writing (another run's, a compaction's) is never touched, nor is one whose writer
        cannot be checked from here (another host's, an older attnsweep's): ``store check``
        lists those."""
        removed = []
        for temp in self.temp_files(folder):
            if temp.state == "gone":
                try:
                    temp.path.unlink()
                except FileNotFoundError:
                    continue
                except OSError:  # a store this user cannot write: left for its owner
                    continue
                removed.append(temp.path)
        return removed


FILE_COLUMN = "__attnsweep_file"
"""The column naming each curve point's part file while the points of one run are chosen."""


def part_name() -> str:
    """A new part file's name: ``part-<write time, ns>-<8 hex>.parquet``; names sort in the
    order files were written (readers keep the later file's copy of a row)."""
    return f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) as an Arrow table with exactly ``schema``'s columns and types."""
    return pa.Table.from_pylist(list(rows), schema=schema)


def _frame(table: pa.Table) -> pl.DataFrame:
    """``table`` as a polars frame (``pl.from_arrow`` gives a Series only for an Arrow array)."""
    df = pl.from_arrow(table)
    if not isinstance(df, pl.DataFrame):
        raise TypeError(f"expected a table, got {type(df).__name__}")
    return df
