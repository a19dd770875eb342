"""Streaming trial rows into the store as they finish, in bounded memory."""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

from attnsweep.results.atomic_write import write_parquet_atomic
from attnsweep.results.curves_table import split_curves
from attnsweep.results.errors import StoreError
from attnsweep.results.parquet_check import os_reason
from attnsweep.results.store import ResultsStore, rows_to_table

RESCUE_DIR = Path(tempfile.gettempdir()) / "attnsweep-unsaved"
"""Where rows go that the store refused (a failed write), so that none is lost; when it
cannot be written either (the same full disk), ``attnsweep-unsaved`` in the current folder,
then in the home folder (:func:`rescue_dirs`)."""


def rescue_dirs() -> list[Path]:
    """The folders a rescue file may go to, in the order they are tried."""
    dirs = [RESCUE_DIR, Path.cwd() / "attnsweep-unsaved", Path.home() / "attnsweep-unsaved"]
    return list(dict.fromkeys(d.absolute() for d in dirs))


class TrialWriter:
    """Buffers rows and writes a Parquet part file every ``flush_rows`` rows or
    ``flush_s`` seconds, whichever comes first; memory holds at most one buffer.

    Rows that carry a learning curve (a run with ``execution.curves``) lose it here: its
    points go to a part file of ``curves`` (results/curves_table.py), written just before the
    part file of their rows, which commits it: a stored row always has its curve stored, and
    a curve whose rows were not stored is never read.

    Args:
        store: the results store.
        sweep, run_id: the partition the rows belong to.
        schema: Arrow schema every row is cast to (stable types across part files).
        flush_rows: rows per part file at most.
        flush_s: seconds a finished row may wait in the buffer.
    """

    def __init__(
        self,
        store: ResultsStore,
        sweep: str,
        run_id: str,
        schema: pa.Schema,
        flush_rows: int = 5000,
        flush_s: float = 10.0,
    ):
        self.store, self.sweep, self.run_id, self.schema = store, sweep, run_id, schema
        self.flush_rows, self.flush_s = flush_rows, flush_s
        self._buffer: list[dict] = []
        self._last_flush = time.monotonic()
        self.rows_written = 0
        self.files: list[Path] = []
        self.curve_files: list[Path] = []
        self.failed: StoreError | None = None
        """The error of a write the store refused; later rows go to the rescue file."""
        self.rescue_path: Path | None = None
        """The file holding the rows the store refused (None: none refused, or none could be saved)."""
        self.rescue_error: str | None = None
        """Why refused rows could be saved nowhere (every folder of :func:`rescue_dirs` refused them)."""
        self._rescued: pa.Table | None = None

    def append(self, rows: list[dict]) -> None:
        """Add finished rows; flushes when the buffer is full or old."""
        self._buffer.extend(rows)
        while len(self._buffer) >= self.flush_rows:
            chunk, self._buffer = self._buffer[: self.flush_rows], self._buffer[self.flush_rows :]
            self._write(chunk)
        self.maybe_flush()

    def maybe_flush(self) -> None:
        """Flush if the oldest buffered row has waited ``flush_s`` seconds."""
        if self._buffer and time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write whatever is buffered (after a failed write, to the rescue file, silently:
        the failure was raised already)."""
        if self._buffer:
            chunk, self._buffer = self._buffer, []
            if self.failed is not None:  # the rows are rescued; their curves are not (the run stopped)
                self._rescue(rows_to_table(chunk, self.schema))
            else:
                self._write(chunk)
        self._last_flush = time.monotonic()

    def _write(self, rows: list[dict]) -> None:
        """Write ``rows`` as one part file.

        Raises:
            StoreError: the store refused the write; the rows were saved to a file under
                :data:`RESCUE_DIR` (named in the message) and left the buffer.
        """
        curves = split_curves(rows)  # before the rows become a table: trials never holds them
        table = rows_to_table(rows, self.schema)
        try:
            curve_file = None
            if curves is not None:
                curve_file = self.store.write_curves(self.sweep, self.run_id, curves)
                self.curve_files.append(curve_file)
            self.files.append(self.store.write_trials(self.sweep, self.run_id, table, curves=curve_file))
        except OSError as exc:
            rescue = self._rescue(table)
            saved = (
                f"its {len(rows)} unwritten finished rows are saved in {rescue}"
                if rescue is not None
                else f"its {len(rows)} unwritten finished rows could not be saved anywhere ({self.rescue_error}); "
                f"attnsweep resume {self.run_id} computes them again"
            )
            self.failed = StoreError(
                f"cannot write trial rows to the store at {self.store.root}: {os_reason(exc)}; the run stops; "
                f"{saved} (the {self.rows_written} rows before them are in the store)"
            )
            raise self.failed from exc
        self.rows_written += len(rows)
        self._last_flush = time.monotonic()

    def _rescue(self, table: pa.Table) -> Path | None:
        """Add ``table`` to this run's rescue file (one per writer, rewritten whole and
        atomically) in the first folder of :func:`rescue_dirs` that takes it; returns its
        path, or None (:attr:`rescue_error` says why) when no folder does."""
        self._rescued = table if self._rescued is None else pa.concat_tables([self._rescued, table])
        name = (
            self.rescue_path.name
            if self.rescue_path is not None
            else f"{self.sweep}-{self.run_id}-{uuid.uuid4().hex[:8]}.parquet"
        )
        folders = [self.rescue_path.parent] if self.rescue_path is not None else []
        tried = []
        for folder in dict.fromkeys([*folders, *rescue_dirs()]):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path = write_parquet_atomic(self._rescued, folder / name)
            except OSError as exc:
                tried.append(f"{folder}: {os_reason(exc)}")
                continue
            if self.rescue_path is not None and self.rescue_path != path:
                self.rescue_path.unlink(missing_ok=True)  # its rows are all in the new file
            self.rescue_path, self.rescue_error = path, None
            return path
        self.rescue_error = "; ".join(tried)
        return None
