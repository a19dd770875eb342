"""Read-only SQL over the store's ``trials``, ``runs`` and ``curves`` tables, with DuckDB.

Read-only is the engine's guarantee, not a filter on the text: the statement runs on an
in-memory DuckDB connection with external access disabled (no file system, network or
extension access: ``read_csv``, ``read_text``, ``glob``, ``COPY``, ``ATTACH`` and
``INSTALL`` all fail with a permission error, however they are quoted) and its configuration
locked (a ``SET`` in the statement cannot turn access back on): :mod:`results.query_sandbox`.
The tables are the store's own Arrow datasets
(:meth:`results.store.ResultsStore.arrow_dataset`, :mod:`results.query_tables`), registered
before the lock and read by pyarrow, so only the store's checked files are read. The query's
memory, threads and spill are bounded (:mod:`results.query_limits`), and Ctrl-C stops DuckDB
within about a second (:mod:`results.query_interrupt`).

Results stream: :func:`stream_query` yields Arrow record batches, so a large result is
never held whole (the CLI writes CSV, JSON and Parquet batch by batch).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator

import polars as pl
import pyarrow as pa

from attnsweep.results.errors import QueryError
from attnsweep.results.query_columns import Convert, projected
from attnsweep.results.query_interrupt import interruptible
from attnsweep.results.query_limits import (
    DEFAULT_MEMORY_LIMIT,
    batch_budget,
    check_memory_limit,
    memory_bytes,
)
from attnsweep.results.query_sandbox import connect, engine_reason, one_line, release, statement
from attnsweep.results.query_tables import ATTEMPTS, datasets, vanished
from attnsweep.results.store import ResultsStore

BATCH_ROWS = 65_536
"""Rows per batch of a streamed result, at most (fewer where its bytes reach the batch budget)."""

READ_ROWS = 256
"""Rows DuckDB hands over at a time: small, so that wide values (a 30 kB string, a list of
4,000 numbers) cannot make one hand-over larger than the batch budget; the batches given out
are made of several (:class:`QueryBatches`)."""

MAX_SQL_BYTES = 1_000_000
"""The longest SQL text a query takes, in bytes of UTF-8 (as a spec file: 1 MB)."""


def _memory_message(exc: Exception, memory_limit: str, spill: str) -> str:
    """What a user can do when DuckDB runs out of memory or of spill space, in our options."""
    reason = engine_reason(exc)
    if "max_temp_directory_size" in str(exc) or "offload" in reason:
        return (
            f"query's spill reached its limit in {os.path.dirname(spill)} ({reason}): give a larger "
            "--spill-limit (ATTNSWEEP_QUERY_SPILL; default half the free space there) or more --memory-limit "
            "(ATTNSWEEP_QUERY_MEMORY), or make the query smaller (filter or aggregate before sorting or joining)"
        )
    return (
        f"query ran out of memory under --memory-limit {memory_limit} (ATTNSWEEP_QUERY_MEMORY; {reason}): give it "
        "more, or make the query smaller"
    )


def _reader(rel, batch_rows: int):
    to_reader = getattr(rel, "to_arrow_reader", None)  # DuckDB 2; fetch_record_batch before
    return to_reader(batch_rows) if to_reader is not None else rel.fetch_record_batch(batch_rows)


def _missing_table(exc: Exception) -> str | None:
    """The table name a DuckDB catalog error says does not exist (None: another error)."""
    import re

    found = re.search(r"Table with name (.*?) does not exist", str(exc))
    return found.group(1) if found else None


def _missing_table_message(name: str, held: dict[str, object]) -> str:
    """What a query naming a table the store lacks is told. DuckDB's own answer suggests its
    catalog's tables ("Did you mean pg_tables?"), or a store table close in spelling that is
    not the one asked for: ours names the store's tables, and for one of them that the store
    does not hold yet, why."""
    from attnsweep.results.query_tables import TABLES

    holds = ", ".join(t for t in TABLES if t in held) or "none"
    if name.lower() == "curves":
        return (
            "query failed: this store has no 'curves' table: no run in it kept learning curves "
            "(execution.curves in the spec, docs/spec.md)"
        )
    if name.lower() == "trials":  # a run has begun (its record is written) and no trial has finished
        return (
            "query failed: this store holds no trials yet: no trial of its runs has finished (attnsweep "
            "runs lists them); run a sweep first, or query again once a run has stored some"
        )
    if name.lower() == "runs":
        return (
            "query failed: this store holds no run records, only trial rows (attnsweep store check "
            "says which runs lack theirs)"
        )
    return (
        f"query failed: there is no table '{name}': a query reads the tables trials, runs and curves "
        f"(this store holds: {holds})"
    )


class QueryBatches(Iterator[pa.RecordBatch]):
    """The record batches of one running query. It owns the DuckDB connection and its spill
    folder and releases both when the batches run out, on an error, on :meth:`close` (or
    ``with``), and at the latest when it is garbage collected or the interpreter exits.

    A file of the store that vanishes before the first batch (a compaction replaced it) makes
    the query run again, on the files there are then (:data:`ATTEMPTS` in all).
    """

    def __init__(
        self,
        store: ResultsStore,
        sql: str,
        batch_rows: int,
        memory_limit: str,
        convert: Convert | None,
        spill_bytes: int | None = None,
    ):
        self._args = (store, sql, batch_rows, memory_limit, convert, spill_bytes)
        self._batch_bytes = batch_budget(memory_bytes(memory_limit))
        self._yielded = False
        self._starts = 1
        self._release = None
        self._start()

    def _start(self) -> None:
        store, sql, batch_rows, memory_limit, convert, spill_bytes = self._args
        self._tables = datasets(store)
        con, spill = connect(self._tables, memory_limit, spill_bytes)
        self._con, self._spill = con, spill
        self._release = weakref.finalize(self, release, con, spill)
        try:
            rel = projected(con.sql(statement(con, sql)), convert)
            with interruptible(con):
                self._reader = _reader(rel, min(batch_rows, READ_ROWS))
            self.schema = self._reader.schema
        except BaseException as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException):
        """Release everything and raise ``exc`` as the error a user reads; a vanished store
        file before the first batch starts the query again instead (:data:`ATTEMPTS`)."""
        import duckdb

        gone = vanished(self._tables) if isinstance(exc, (duckdb.Error, pa.ArrowException, OSError)) else []
        self.close()
        if isinstance(exc, duckdb.InterruptException) or (
            isinstance(exc, RuntimeError) and str(exc).strip().lower() == "query interrupted"
        ):
            raise KeyboardInterrupt from None  # Ctrl-C, however DuckDB reports it
        if gone and not self._yielded and self._starts < ATTEMPTS:
            self._starts += 1
            self._start()
            return
        if gone:
            raise QueryError(f"{gone[0]} vanished during the query (a compaction?): run it again") from None
        if isinstance(exc, duckdb.PermissionException):
            raise QueryError(
                f"query reads only the store's tables 'trials', 'runs' and 'curves', not files or the network "
                f"({one_line(exc)})"
            ) from exc
        # DuckDB's errors reach us as its own exceptions, or (while batches are read through
        # Arrow's stream) as an OSError or ArrowException carrying its text.
        engine = isinstance(exc, (duckdb.Error, pa.ArrowException, OSError))
        if isinstance(exc, duckdb.OutOfMemoryException) or (
            engine and ("Out of Memory Error" in str(exc) or "max_temp_directory_size" in str(exc))
        ):
            raise QueryError(_memory_message(exc, self._args[3], self._spill)) from None
        if engine and "No space left" in str(exc):
            raise QueryError(
                f"query's spill folder {self._spill} filled its disk ({engine_reason(exc)}): free "
                "space there, set TMPDIR to a folder on a larger disk, give a smaller --spill-limit "
                "(ATTNSWEEP_QUERY_SPILL), or make the query smaller"
            ) from None
        missing = _missing_table(exc) if isinstance(exc, duckdb.CatalogException) else None
        if missing is not None:
            raise QueryError(_missing_table_message(missing, self._tables)) from None
        if isinstance(exc, (duckdb.Error, pa.ArrowException)):
            raise QueryError(f"query failed: {one_line(exc)}") from exc
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            # from the engine (a store file it could not read), not from the output: said as the query's
            raise QueryError(f"query failed: {one_line(exc)}") from None
        raise exc

    def __next__(self) -> pa.RecordBatch:
        """The next batch: DuckDB's hand-overs (:data:`READ_ROWS` rows each) joined until it
        holds ``batch_rows`` rows or :func:`batch_budget` bytes, so its memory is bounded by
        bytes whatever the width of a row."""
        if self._release is None or not self._release.alive:
            raise StopIteration
        pieces, rows, size = [], 0, 0
        while rows < self._args[2] and size < self._batch_bytes:
            try:
                with interruptible(self._con):
                    piece = self._reader.read_next_batch()
            except StopIteration:
                if pieces:
                    break
                self.close()
                raise
            except BaseException as exc:
                pieces.clear()
                self._fail(exc)
                return next(self)  # the query started again
            pieces.append(piece)
            rows += piece.num_rows
            size += piece.nbytes
        self._yielded = True
        if len(pieces) == 1:
            return pieces[0]
        batch = pa.concat_batches(pieces)
        pieces.clear()
        return batch

    def close(self) -> None:
        """Close the connection and remove its spill folder (again: nothing)."""
        if self._release is not None:
            self._release()

    def __enter__(self) -> QueryBatches:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


WARM_UP_SQL = "SELECT 1 AS i, 'x' AS s, [0.5] AS l, {'a': 1} AS r, DATE '2000-01-01' AS d"
"""The statement :func:`warm_up` runs: a column of each kind the output writers convert."""


def warm_up(memory_limit: str, convert: Convert | None = None, spill_bytes: int | None = None) -> pa.Table:
    """Run :data:`WARM_UP_SQL` on a connection of its own, with ``memory_limit``'s threads, and
    return its result (close the connection, remove its spill folder): what the engine, Arrow
    and the allocators map once per process is then mapped, so that what the process maps
    after it (:func:`results.query_limits.address_space`) is its baseline for a query.

    Raises:
        QueryError: as :func:`stream_query` (a memory limit too small to start DuckDB).
    """
    con, spill = connect({}, check_memory_limit(memory_limit), spill_bytes)
    try:
        reader = _reader(projected(con.sql(WARM_UP_SQL), convert), READ_ROWS)
        return reader.read_all()
    finally:
        release(con, spill)


def stream_query(
    store: ResultsStore,
    sql: str,
    batch_rows: int = BATCH_ROWS,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    convert: Convert | None = None,
    spill_bytes: int | None = None,
) -> tuple[pa.Schema, QueryBatches]:
    """Run one SELECT over ``trials``, ``runs`` and ``curves`` and stream its result.

    Args:
        store: the results store.
        sql: DuckDB SQL, at most :data:`MAX_SQL_BYTES` bytes; the tables are named
            ``trials``, ``runs`` and (where a run kept learning curves) ``curves``.
        batch_rows: the most rows per batch.
        memory_limit: the query's memory limit (:func:`check_memory_limit`): DuckDB's own
            (:func:`engine_limit`) and the result's batches (:func:`batch_budget` bytes each)
            together; beyond it DuckDB spills to a folder of its own under the system's
            temporary folder.
        spill_bytes: the most DuckDB may spill, in bytes (:func:`check_spill_limit`; None:
            half the space free in the temporary folder). The spill folder is removed when
            the batches are released, and the next query removes those of killed processes.
        convert: how to give columns of some DuckDB types (:data:`Convert`), e.g. as text for
            a format that cannot hold them; None keeps DuckDB's Arrow export.

    Returns:
        ``(schema, batches)``: the result's Arrow schema and an iterator of record batches
        (at most ``batch_rows`` rows each, and about :func:`batch_budget` bytes) that owns the connection (:class:`QueryBatches`;
        close it, or exhaust it, to release the connection and its spill folder). Repeated
        column names get a suffix (:func:`unique_names`).

    Raises:
        QueryError: the statement is too long, not UTF-8 text, not a single SELECT, reads
            anything but the store's tables, or DuckDB rejects it (also while batches are read); a bad memory
            limit; a store file that vanished twice.
        StoreError: the store is empty.
    """
    if len(sql.encode("utf-8", "surrogatepass")) > MAX_SQL_BYTES:
        raise QueryError(f"the SQL is longer than {MAX_SQL_BYTES:,} bytes, the most a query takes")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # a byte that was not UTF-8 (Python keeps it in sys.argv as a lone surrogate)
        bad = ord(sql[exc.start])
        what = f"the byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"the lone surrogate U+{bad:04X}"
        raise QueryError(f"the SQL is not UTF-8 text: character {exc.start + 1} is {what}") from None
    batches = QueryBatches(store, sql, batch_rows, check_memory_limit(memory_limit), convert, spill_bytes)
    return batches.schema, batches


def run_query(store: ResultsStore, sql: str) -> pl.DataFrame:
    """Run one SELECT over ``trials``, ``runs`` and ``curves`` and return the whole result.

    Args and errors as :func:`stream_query`; use that for results too large to hold.
    """
    schema, batches = stream_query(store, sql)
    with batches:
        return pl.from_arrow(pa.Table.from_batches(list(batches), schema=schema))
