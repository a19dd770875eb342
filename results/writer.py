"""Streaming trial rows into the store as they finish, in bounded memory."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from results.store import ResultsStore, rows_to_table


class TrialWriter:
    """Buffers rows and writes a Parquet part file every ``flush_rows`` rows or
    ``flush_s`` seconds, whichever comes first; memory holds at most one buffer.

    Args:
        store: the results store.
        sweep, run_id: the partition the rows belong to.
        schema: Arrow schema every row is cast to (stable types across part files).
        flush_rows: rows per part file at most.
        flush_s: seconds a finished row may wait in the buffer.
    """

    def __init__(self, store: ResultsStore, sweep: str, run_id: str, schema: pa.Schema,
                 flush_rows: int = 5000, flush_s: float = 10.0):
        self.store, self.sweep, self.run_id, self.schema = store, sweep, run_id, schema
        self.flush_rows, self.flush_s = flush_rows, flush_s
        self._buffer: list[dict] = []
        self._last_flush = time.monotonic()
        self.rows_written = 0
        self.files: list[Path] = []

    def append(self, rows: list[dict]) -> None:
        """Add finished rows; flushes when the buffer is full or old."""
        self._buffer.extend(rows)
        while len(self._buffer) >= self.flush_rows:
            self._write(self._buffer[: self.flush_rows])
            self._buffer = self._buffer[self.flush_rows:]
        self.maybe_flush()

    def maybe_flush(self) -> None:
        """Flush if the oldest buffered row has waited ``flush_s`` seconds."""
        if self._buffer and time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write whatever is buffered."""
        if self._buffer:
            self._write(self._buffer)
            self._buffer = []
        self._last_flush = time.monotonic()

    def _write(self, rows: list[dict]) -> None:
        self.files.append(self.store.write_trials(self.sweep, self.run_id, rows_to_table(rows, self.schema)))
        self.rows_written += len(rows)
        self._last_flush = time.monotonic()
