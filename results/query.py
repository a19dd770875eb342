"""Read-only SQL over the store's ``trials`` and ``runs`` tables, with polars SQL."""

from __future__ import annotations

import re

import polars as pl

from results.errors import QueryError, StoreError
from results.store import ResultsStore

# String literals, quoted identifiers, comments, or one other character, in SQL order.
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|.", re.S)
# polars SQL table functions that would read any file on disk (quoted or not).
_FILE_READERS = re.compile(r"\bread_(csv|parquet|ipc|json|ndjson|delta)\s*\(", re.I)


def _code(sql: str) -> str:
    """The statement as the checks must see it: comments dropped, string literals blanked,
    quoted identifiers unquoted (``"read_csv"(...)`` is still a call). The query itself
    goes to polars unchanged."""
    out = []
    for tok in _TOKENS.findall(sql):
        if tok.startswith("'"):
            out.append("''")
        elif tok.startswith('"'):
            out.append(tok[1:-1].replace('""', '"'))
        elif tok.startswith("--") or tok.startswith("/*"):
            out.append(" ")
        else:
            out.append(tok)
    return "".join(out)


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
    code = _code(sql).strip().rstrip(";").strip()
    first = code.split(None, 1)[0].upper() if code else ""
    if first not in ("SELECT", "WITH"):
        raise QueryError("query runs one read-only statement: it must start with SELECT or WITH")
    if ";" in code:
        raise QueryError("query runs one statement: remove the ';' between statements")
    if _FILE_READERS.search(code):
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
        return pl.SQLContext(frames=tables).execute(sql.strip().rstrip(";"), eager=True)
    except Exception as exc:  # polars raises several types for bad SQL
        raise QueryError(f"query failed: {exc}") from exc
