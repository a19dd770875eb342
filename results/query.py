"""Read-only SQL over the store's ``trials`` and ``runs`` tables, with polars SQL."""

from __future__ import annotations

import re

import polars as pl

from results.errors import QueryError, StoreError
from results.store import ResultsStore

_COMMENTS = re.compile(r"(--[^\n]*)|(/\*.*?\*/)", re.S)
# polars SQL table functions that would read any file on disk.
_FILE_READERS = re.compile(r"\bread_(csv|parquet|ipc|json|ndjson|delta)\s*\(", re.I)


def run_query(store: ResultsStore, sql: str) -> pl.DataFrame:
    """Run one SELECT (or WITH ... SELECT) statement over ``trials`` and ``runs``.

    Args:
        store: the results store.
        sql: polars SQL; the tables are named ``trials`` and ``runs``.

    Returns:
        The result as a DataFrame.

    Raises:
        QueryError: the statement is not a single SELECT/WITH, or polars rejects it.
        StoreError: the store is empty.
    """
    text = _COMMENTS.sub(" ", sql).strip().rstrip(";").strip()
    first = text.split(None, 1)[0].upper() if text else ""
    if first not in ("SELECT", "WITH") or ";" in text:
        raise QueryError("query runs one read-only statement: it must start with SELECT or WITH")
    if _FILE_READERS.search(text):
        raise QueryError("query reads only the store's tables 'trials' and 'runs', not files (read_* functions)")
    tables = {}
    for name, scan in (("trials", store.scan_trials), ("runs", store.scan_runs)):
        try:
            tables[name] = scan()
        except StoreError:
            pass
    if not tables:
        raise StoreError(f"the store at {store.root} is empty: run a sweep first")
    try:
        return pl.SQLContext(frames=tables).execute(text, eager=True)
    except Exception as exc:  # polars raises several types for bad SQL
        raise QueryError(f"query failed: {exc}") from exc
