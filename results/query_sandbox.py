"""The DuckDB connection a query runs on, and the one statement it may run there.

Read-only is the engine's guarantee, not a filter on the text. The connection is in memory
with external access disabled (no file system, network or extension access) and its
configuration locked (a ``SET`` in the statement cannot turn access back on); the store's
tables are registered before the lock, and the connection's memory limit, threads and spill
folder are set from :mod:`results.query_limits`. DuckDB's parser then decides what the
statement is: exactly one SELECT (``WITH`` included).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from attnsweep.results.errors import QueryError
from attnsweep.results.query_limits import (
    MIN_MEMORY_BYTES,
    SPILL_PREFIX,
    check_spill_limit,
    engine_limit,
    engine_threads,
    memory_bytes,
    remove_stale_spill,
)

LOCKED = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
"""The DuckDB settings of a query connection (the last one freezes the others). The first
and the last are set after the connection opens (``enable_external_access`` would refuse the
spill folder), before the statement is read."""


def connect(tables: dict[str, object], memory_limit: str, spill_bytes: int | None = None):
    """A locked in-memory connection with ``tables`` registered and a spill folder of its own,
    DuckDB's memory limit :func:`engine_limit` of ``memory_limit`` and its spill at most
    ``spill_bytes`` (None: :func:`check_spill_limit`'s default).

    Returns:
        ``(connection, spill_folder)``; the caller removes the folder after closing.

    Raises:
        QueryError: too little memory, or no spill folder (its parent, ``TMPDIR``, not UTF-8
            or not writable).
    """
    import duckdb

    remove_stale_spill()
    limit_bytes = memory_bytes(memory_limit)
    if limit_bytes < MIN_MEMORY_BYTES:
        raise QueryError(
            f"--memory-limit {memory_limit} is too little for DuckDB to start a query (it needs at "
            f"least {MIN_MEMORY_BYTES >> 20} MiB with the result's batches): give more, e.g. 256MB"
        )
    base = tempfile.gettempdir()
    try:
        base.encode("utf-8")
    except UnicodeEncodeError:  # DuckDB takes its spill folder as UTF-8 (std::bad_cast otherwise)
        shown = os.fsencode(base).decode("utf-8", "backslashreplace")
        raise QueryError(
            f"DuckDB's spill folder would be in {shown}, which is not UTF-8 text (TMPDIR names the folder): "
            "set TMPDIR to a folder whose path is UTF-8"
        ) from None
    try:
        spill = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-")
        spill_bytes = check_spill_limit(None, spill) if spill_bytes is None else spill_bytes
    except OSError as exc:
        raise QueryError(
            f"cannot make DuckDB's spill folder in {base}: {exc.strerror or exc} (TMPDIR names the folder)"
        ) from None
    con = None
    try:
        config = {k: v for k, v in LOCKED.items() if k not in ("enable_external_access", "lock_configuration")}
        con = duckdb.connect(
            ":memory:",
            config={
                **config,
                "memory_limit": f"{engine_limit(limit_bytes)}B",
                "threads": engine_threads(limit_bytes),
                "temp_directory": spill,
                "max_temp_directory_size": f"{spill_bytes}B",
            },
        )
        # A TIMESTAMPTZ reads the same on every machine, whatever its local time zone; without the
        # ICU extension, time zones are UTC already.
        with contextlib.suppress(duckdb.Error):
            con.execute("SET TimeZone = 'UTC'")
        for name, dataset in tables.items():
            con.register(name, dataset)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        settings = dict(
            con.execute(
                f"SELECT name, value FROM duckdb_settings() WHERE name IN ({', '.join('?' * len(LOCKED))})",
                list(LOCKED),
            ).fetchall()
        )
        if any(settings.get(k) != str(v).lower() for k, v in LOCKED.items()):  # never expected: refuse, not run open
            raise QueryError(f"the query engine did not take its read-only settings ({settings}): not run")
        return con, spill
    except duckdb.OutOfMemoryException as exc:
        release(con, spill)
        raise QueryError(
            f"--memory-limit {memory_limit} is too little for DuckDB to start a query "
            f"({engine_reason(exc)}): give more, e.g. 256MB"
        ) from None
    except BaseException:
        release(con, spill)
        raise


def release(con, spill: str) -> None:
    """Close ``con`` (if any) and remove its spill folder."""
    try:
        if con is not None:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def engine_reason(exc: Exception) -> str:
    """DuckDB's first line, without its advice: it suggests PRAGMA and SET commands that the
    locked connection of a query refuses."""
    return str(exc).strip().splitlines()[0].strip() if str(exc).strip() else type(exc).__name__


def one_line(exc: Exception) -> str:
    """DuckDB's message on one line: its lines joined, the caret under the query left out."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    return "; ".join(lines)


def statement(con, sql: str) -> str:
    """The one SELECT statement of ``sql``, as DuckDB's parser reads it.

    Raises:
        QueryError: not exactly one statement, not a SELECT, or not valid SQL.
    """
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {one_line(exc)}") from exc
    if len(statements) != 1:
        raise QueryError(
            "query runs one statement: remove the ';' between statements"
            if statements
            else "query runs one read-only statement: it must start with SELECT or WITH"
        )
    if statements[0].type != duckdb.StatementType.SELECT:
        raise QueryError(
            "query runs one read-only statement: it must start with SELECT or WITH "
            f"(this one is {statements[0].type.name})"
        )
    return statements[0].query
