"""Read-only SQL over the store's ``trials`` and ``runs`` tables, with DuckDB.

Read-only is the engine's guarantee, not a filter on the text. The statement runs on an
in-memory DuckDB connection opened with external access disabled (no file system, network
or extension access: ``read_csv``, ``read_text``, ``glob``, ``COPY``, ``ATTACH`` and
``INSTALL`` all fail with a permission error, however they are quoted) and its configuration
locked (a ``SET`` in the statement cannot turn access back on). The two tables are the
store's own Arrow datasets (:meth:`results.store.ResultsStore.arrow_dataset`), registered
before the lock and read by pyarrow, so only the store's checked files are read. DuckDB's
parser then decides what the statement is: exactly one SELECT (``WITH`` included).

Results stream: :func:`stream_query` yields Arrow record batches, so a large result is
never held whole (the CLI writes CSV, JSON lines and Parquet batch by batch).
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pyarrow as pa

from results.errors import QueryError, StoreError
from results.store import ResultsStore

LOCKED = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
"""The DuckDB settings of a query connection (the last one freezes the others)."""

BATCH_ROWS = 65_536
"""Rows per batch of a streamed result."""


def _connect(store: ResultsStore):
    import duckdb

    tables = {}
    for name in ("trials", "runs"):
        try:
            tables[name] = store.arrow_dataset(name)
        except StoreError:
            pass
    if not tables:
        raise StoreError(f"the store at {store.root} is empty: run a sweep first")
    con = duckdb.connect(":memory:", config=dict(LOCKED))
    for name, dataset in tables.items():
        con.register(name, dataset)
    return con


def _one_line(exc: Exception) -> str:
    """DuckDB's message on one line: its lines joined, the caret under the query left out."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    return "; ".join(lines)


def _statement(con, sql: str) -> str:
    """The one SELECT statement of ``sql``, as DuckDB's parser reads it.

    Raises:
        QueryError: not exactly one statement, not a SELECT, or not valid SQL.
    """
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {_one_line(exc)}") from exc
    if len(statements) != 1:
        raise QueryError("query runs one statement: remove the ';' between statements" if statements
                         else "query runs one read-only statement: it must start with SELECT or WITH")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise QueryError("query runs one read-only statement: it must start with SELECT or WITH "
                         f"(this one is {statements[0].type.name})")
    return statements[0].query


def stream_query(store: ResultsStore, sql: str, batch_rows: int = BATCH_ROWS) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Run one SELECT over ``trials`` and ``runs`` and stream its result.

    Args:
        store: the results store.
        sql: DuckDB SQL; the tables are named ``trials`` and ``runs``.
        batch_rows: the most rows per batch.

    Returns:
        ``(schema, batches)``: the result's Arrow schema and an iterator of record batches
        (at most ``batch_rows`` rows each); the connection closes when it is exhausted.
        Repeated column names get a suffix (:func:`unique_names`).

    Raises:
        QueryError: the statement is not a single SELECT, reads anything but the two
            tables, or DuckDB rejects it.
        StoreError: the store is empty.
    """
    import duckdb

    con = _connect(store)
    try:
        reader = con.sql(_statement(con, sql)).fetch_record_batch(batch_rows)
    except duckdb.PermissionException as exc:
        con.close()
        raise QueryError("query reads only the store's tables 'trials' and 'runs', not files or the network "
                         f"({_one_line(exc)})") from exc
    except duckdb.Error as exc:
        con.close()
        raise QueryError(f"query failed: {_one_line(exc)}") from exc
    except BaseException:
        con.close()
        raise

    names = unique_names(reader.schema.names)

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except (duckdb.Error, pa.ArrowException) as exc:
                    raise QueryError(f"query failed: {_one_line(exc)}") from exc
                yield batch.rename_columns(names)
        finally:
            con.close()

    schema = pa.schema([f.with_name(n) for f, n in zip(reader.schema, names)], metadata=reader.schema.metadata)
    return schema, batches()


def unique_names(names: list[str]) -> list[str]:
    """Result column names made unique for the output formats (``SELECT 1 AS a, 2 AS a``
    gives ``a`` and ``a_2``)."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, i = name, 1
        while candidate in seen:
            i += 1
            candidate = f"{name}_{i}"
        seen.add(candidate)
        out.append(candidate)
    return out


def table_schemas(store: ResultsStore) -> dict[str, pa.Schema]:
    """The Arrow schema of each table a query can read (``trials``, ``runs``), as the query
    sees them (the store's unified schema plus ``sweep`` and ``run_id``); tables the store
    does not hold yet are left out."""
    out = {}
    for name in ("trials", "runs"):
        try:
            out[name] = store.arrow_dataset(name).schema
        except StoreError:
            pass
    return out


def run_query(store: ResultsStore, sql: str) -> pl.DataFrame:
    """Run one SELECT over ``trials`` and ``runs`` and return the whole result.

    Args and errors as :func:`stream_query`; use that for results too large to hold.
    """
    schema, batches = stream_query(store, sql)
    return pl.from_arrow(pa.Table.from_batches(list(batches), schema=schema))
