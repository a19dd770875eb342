"""The results store: a directory of Parquet files, hive-partitioned by sweep and run.

Layout under the store root::

    trials/sweep=<name>/run_id=<id>/part-<seq>-<uid>.parquet   one row per trial
    runs/sweep=<name>/run_id=<id>/run.parquet                   one row per run

The partition columns (``sweep``, ``run_id``) live in the paths only, as hive
partitioning expects, so the files read as they are with ``polars.scan_parquet``,
``pyarrow.dataset`` (``partitioning="hive"``) and DuckDB (``read_parquet(...,
hive_partitioning = true)``). Every file is written to a hidden temporary name in its
final folder and renamed into place (atomic on POSIX), so a reader never sees half a
file: temporary names start with a dot and end in ``.partial``, so neither ``*.parquet``
globs (polars, DuckDB) nor pyarrow's discovery pick them up.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from results.errors import StoreError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
TMP_PREFIX = ".tmp-"


class ResultsStore:
    """A store rooted at a local directory (created on first write).

    Args:
        root: the store's directory.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    # -- paths -------------------------------------------------------------------------
    def run_dir(self, table: str, sweep: str, run_id: str) -> Path:
        """Folder of one run's files of ``table`` ("trials" or "runs").

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

    # -- writing -----------------------------------------------------------------------
    def write_trials(self, sweep: str, run_id: str, table: pa.Table) -> Path:
        """Write one part file of trial rows atomically; returns its path."""
        folder = self.run_dir("trials", sweep, run_id)
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        return write_parquet_atomic(table, folder / name)

    def write_run(self, sweep: str, run_id: str, record: dict, schema: pa.Schema | None = None) -> Path:
        """Write (or replace) the one-row ``runs`` record of a run atomically."""
        folder = self.run_dir("runs", sweep, run_id)
        return write_parquet_atomic(pa.Table.from_pylist([record], schema=schema), folder / "run.parquet")

    # -- reading -----------------------------------------------------------------------
    def has_trials(self) -> bool:
        """Whether any trial file exists."""
        return bool(self._files("trials"))

    def _files(self, table: str) -> list[Path]:
        """The finished Parquet files of ``table`` (temporary files excluded)."""
        return sorted(p for p in (self.root / table).glob("*/*/*.parquet") if not p.name.startswith("."))

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

    def _scan(self, table: str) -> pl.LazyFrame:
        if not self._files(table):
            raise StoreError(f"no {table} in the store at {self.root}: run a sweep first")
        return pl.scan_parquet(
            self.root / table / "**" / "*.parquet", hive_partitioning=True,
            hive_schema={"sweep": pl.String, "run_id": pl.String}, try_parse_hive_dates=False,
            hidden_file_prefix=".", missing_columns="insert", extra_columns="ignore",
        )

    def scan_run_trials(self, sweep: str, run_id: str) -> pl.LazyFrame:
        """The trial rows of one run, with ``sweep`` and ``run_id`` columns.

        Raises:
            StoreError: the run has no trial files.
        """
        folder = self.run_dir("trials", sweep, run_id)
        if not [p for p in folder.glob("*.parquet") if not p.name.startswith(".")]:
            raise StoreError(f"run {run_id} of sweep {sweep} has no trials in the store at {self.root}")
        return pl.scan_parquet(folder / "*.parquet", hidden_file_prefix=".").with_columns(
            sweep=pl.lit(sweep), run_id=pl.lit(run_id)
        )

    def read_run(self, sweep: str, run_id: str) -> dict:
        """The ``runs`` record of one run, as a dict.

        Raises:
            StoreError: no such run.
        """
        path = self.run_dir("runs", sweep, run_id) / "run.parquet"
        if not path.exists():
            raise StoreError(f"no run {run_id!r} of sweep {sweep!r} in the store at {self.root}")
        return pl.read_parquet(path).row(0, named=True)

    def latest_run(self) -> tuple[str, str]:
        """``(sweep, run_id)`` of the run that started last.

        Raises:
            StoreError: the store holds no runs.
        """
        runs = self.scan_runs().select("sweep", "run_id", "started_at").sort("started_at").collect()
        return runs["sweep"][-1], runs["run_id"][-1]

    def sweep_of(self, run_id: str) -> str:
        """The sweep a run belongs to.

        Raises:
            StoreError: no run with that id.
        """
        found = self.scan_runs().filter(pl.col("run_id") == run_id).select("sweep").collect()
        if found.is_empty():
            raise StoreError(f"no run {run_id!r} in the store at {self.root}")
        return found["sweep"][0]

    def clean_temp_files(self) -> list[Path]:
        """Delete temporary files left by a writer that was killed; returns them."""
        stale = list(self.root.glob(f"*/*/*/{TMP_PREFIX}*")) if self.root.exists() else []
        for path in stale:
            path.unlink(missing_ok=True)
        return stale


def write_parquet_atomic(table: pa.Table, path: Path) -> Path:
    """Write ``table`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Hidden and not ending in .parquet: no reader's glob or discovery picks it up.
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex[:8]}-{path.name}.partial")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) as an Arrow table with exactly ``schema``'s columns and types."""
    return pa.Table.from_pylist(list(rows), schema=schema)
