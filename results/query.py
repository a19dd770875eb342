"""Read-only SQL over the store's ``trials`` and ``runs`` tables, with DuckDB.

Read-only is the engine's guarantee, not a filter on the text. The statement runs on an
in-memory DuckDB connection with external access disabled (no file system, network or
extension access: ``read_csv``, ``read_text``, ``glob``, ``COPY``, ``ATTACH`` and
``INSTALL`` all fail with a permission error, however they are quoted) and its configuration
locked (a ``SET`` in the statement cannot turn access back on). The two tables are the
store's own Arrow datasets (:meth:`results.store.ResultsStore.arrow_dataset`), registered
before the lock and read by pyarrow, so only the store's checked files are read. DuckDB's
parser then decides what the statement is: exactly one SELECT (``WITH`` included).

Before the lock the connection also gets a memory limit of ours (:data:`DEFAULT_MEMORY_LIMIT`,
not DuckDB's 80% of the machine) and a spill folder of its own, made for the query under the
system's temporary folder and removed with the connection (never DuckDB's default ``.tmp``
in the current folder).

Results stream: :func:`stream_query` yields Arrow record batches, so a large result is
never held whole (the CLI writes CSV, JSON and Parquet batch by batch).

Ctrl-C stops DuckDB within about a second: while DuckDB works on a query in the main thread,
Python's signal handler cannot run, and DuckDB looks at Python's signals only between its
tasks (70 s apart in a sort of 10^9 rows that spills; never while it streams a scan), so
during each DuckDB call the signal's wakeup descriptor is a pipe that a thread of ours reads,
and that thread calls DuckDB's ``interrupt()`` (:func:`_interruptible`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction

import polars as pl
import pyarrow as pa

from attnsweep.results.errors import QueryError, StoreError
from attnsweep.results.roots import listing
from attnsweep.results.store import ResultsStore

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

BATCH_ROWS = 65_536
"""Rows per batch of a streamed result, at most (fewer where its bytes reach the batch budget)."""

READ_ROWS = 256
"""Rows DuckDB hands over at a time: small, so that wide values (a 30 kB string, a list of
4,000 numbers) cannot make one hand-over larger than the batch budget; the batches given out
are made of several (:class:`QueryBatches`)."""

DEFAULT_SPILL_SHARE = 0.5
"""Unless a spill limit is given, DuckDB may spill at most this share of the space free in the
temporary folder when the query starts (DuckDB's own default is 90%: a query could fill it)."""

SPILL_PREFIX = "attnsweep-query-"

MAX_SQL_BYTES = 1_000_000
"""The longest SQL text a query takes, in bytes of UTF-8 (as a spec file: 1 MB)."""

DEFAULT_MEMORY_LIMIT = "25%"
"""DuckDB's memory limit for a query unless one is given: a quarter of this machine's memory
as DuckDB reads it (DuckDB's own default is 80%). Beyond it DuckDB spills to its spill folder."""

_MEMORY_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|B|[KMGT]i?B)\s*", re.IGNORECASE | re.ASCII)
MEMORY_HELP = ("a number with a unit (B, KB, MB, GB, TB for powers of 1000; KiB, MiB, GiB, TiB for powers "
               "of 1024) or a percentage of this machine's memory, e.g. 2GB, 512MiB, 25%")
MAX_MEMORY_BYTES = 10**18
"""The largest memory limit a query takes: 1,000,000 TB (DuckDB refuses sizes from 2^64 bytes,
about 18,447,000 TB, with a parser error, and reads 2^64 - 1 as no limit at all)."""
_UNIT_BYTES = {"b": 1, **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
               **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")}}

Convert = Callable[[object, str], "str | None"]
"""``convert(duckdb_type, column)``: the SQL expression a result column of that DuckDB type
is given as (``column`` is its positional reference, e.g. ``#1``), or None to keep it."""


def check_memory_limit(text: str) -> str:
    """``text`` checked as a DuckDB memory limit (see :data:`MEMORY_HELP`).

    Returns:
        The limit as DuckDB reads it (spaces removed).

    Raises:
        QueryError: not a size with a unit or a percentage (ASCII digits), zero, a percentage
            over 100, or a size over :data:`MAX_MEMORY_BYTES`.
    """
    match = _MEMORY_RE.fullmatch(str(text))
    number = Fraction(match[1]) if match else None  # exact: no float rounds 1000000.0000001TB down to the bound
    if match is None or number <= 0 or (match[2] == "%" and number > 100):
        raise QueryError(f"--memory-limit (ATTNSWEEP_QUERY_MEMORY) {text!r} is not a memory limit: give {MEMORY_HELP}; "
                         "a percentage is above 0 and at most 100")
    if match[2] != "%" and number * _UNIT_BYTES[match[2].lower()] > MAX_MEMORY_BYTES:
        raise QueryError(f"--memory-limit (ATTNSWEEP_QUERY_MEMORY) {text!r} is out of range: at most "
                         f"{MAX_MEMORY_BYTES // 10**12:,}TB (10^18 bytes); give {MEMORY_HELP}")
    return match[1] + match[2]


def memory_bytes(limit: str) -> int:
    """A limit as :func:`check_memory_limit` returns it, in bytes (a percentage of this
    machine's physical memory)."""
    match = _MEMORY_RE.fullmatch(limit)
    number = Fraction(match[1])
    if match[2] == "%":
        return int(number * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 100)
    return int(number * _UNIT_BYTES[match[2].lower()])


def batch_budget(limit_bytes: int) -> int:
    """The most bytes one batch of a result may hold under a memory limit of ``limit_bytes``:
    a sixteenth of it, between 1 MiB and 64 MiB. The query's process holds at most about four
    (DuckDB's hand-over, the batch being made, the batch given out and the output's text of
    it), so DuckDB's own limit is the memory limit less four budgets (:func:`engine_limit`)."""
    return max(2**20, min(64 * 2**20, limit_bytes // 16))


ENGINE_SHARE = 0.75
"""The share of a query's memory limit (less the batches') that DuckDB's own limit is set to:
DuckDB counts the blocks of its buffer manager, not the chunks of 2,048 rows that its threads
hold in flight nor the vectors it converts to Arrow, which measured up to a third of a query's
limit and more (wide strings, lists turned into JSON text: see tests/test_guarantees.py)."""


MIN_MEMORY_BYTES = 32 * 2**20
"""The least memory limit a query starts under."""


def engine_limit(limit_bytes: int) -> int:
    """DuckDB's memory limit, in bytes, for a query under ``limit_bytes`` in all (at least 8 MiB)."""
    return max(8 * 2**20, int((limit_bytes - 4 * batch_budget(limit_bytes)) * ENGINE_SHARE))


THREAD_BYTES = 256 * 2**20
"""Memory a DuckDB thread is given under a query's limit: each holds chunks of 2,048 rows in
flight whose values DuckDB's own limit does not count (2,048 rows of 90 kB strings are 184 MB),
so a small limit gets few threads."""


def engine_threads(limit_bytes: int) -> int:
    """DuckDB's threads for a query under a memory limit of ``limit_bytes``: one per
    :data:`THREAD_BYTES`, at least one, at most this machine's processors."""
    return max(1, min(os.cpu_count() or 1, limit_bytes // THREAD_BYTES))


def check_spill_limit(text: str | None, folder: str | None = None) -> int:
    """``text`` (a size, as :data:`MEMORY_HELP`; a percentage is of the space free in the
    temporary folder) as the most bytes a query may spill; None: :data:`DEFAULT_SPILL_SHARE`
    of the space free now.

    Raises:
        QueryError: not a size or percentage, or zero.
    """
    free = shutil.disk_usage(folder or tempfile.gettempdir()).free
    if text is None:
        return max(2**20, int(free * DEFAULT_SPILL_SHARE))
    match = _MEMORY_RE.fullmatch(str(text))
    number = Fraction(match[1]) if match else None
    if match is None or number <= 0 or (match[2] == "%" and number > 100):
        raise QueryError(f"--spill-limit (ATTNSWEEP_QUERY_SPILL) {text!r} is not a size: give {MEMORY_HELP} (a "
                         "percentage is of the space free in the temporary folder); above 0")
    if match[2] == "%":
        return max(2**20, int(number * free / 100))
    return min(int(number * _UNIT_BYTES[match[2].lower()]), MAX_MEMORY_BYTES)


def remove_stale_spill(folder: str | None = None) -> list[str]:
    """Remove the spill folders of queries whose process is gone (killed: SIGKILL, a power cut),
    named :data:`SPILL_PREFIX` with the process id; returns them."""
    base = folder or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(re.escape(SPILL_PREFIX) + r"(\d+)-[A-Za-z0-9_]+", name)
        if m is None or int(m[1]) == os.getpid():
            continue
        try:
            os.kill(int(m[1]), 0)
            continue  # alive (or another user's: EPERM below)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        removed.append(os.path.join(base, name))
    return removed


def hugeint_as_text(convert: Convert | None) -> Convert:
    """``convert`` with HUGEINT columns (alone, or in a list, array, struct or map) given as
    DuckDB's text of the value first. Arrow has no 128-bit integer: DuckDB exports a HUGEINT
    as a 38-digit decimal, which cannot hold its 39-digit values (-2^127 .. 2^127 - 1), so a
    Parquet file of one fails pyarrow's validation and DuckDB's own reading of it. DuckDB's
    ``sum`` of integers is a HUGEINT; ``CAST(... AS BIGINT)`` in the query keeps it a number."""
    import duckdb

    def wrapped(kind, column: str) -> str | None:
        text = _hugeint_to_varchar(kind)
        if text is None:
            return convert(kind, column) if convert is not None else None
        expr = f"CAST({column} AS {text})"
        outer = convert(duckdb.sqltype(text), f"({expr})") if convert is not None else None
        return outer or expr

    return wrapped


def _hugeint_to_varchar(kind) -> str | None:
    """``kind``'s DuckDB type with each HUGEINT in it made VARCHAR, or None when it holds none
    (a UNION is left whole: every format writes one as its text already)."""
    tid = kind.id
    if tid == "hugeint":
        return "VARCHAR"
    if tid in ("list", "array"):
        inner = _hugeint_to_varchar(kind.children[0][1])
        if inner is None:
            return None
        return f"{inner}[]" if tid == "list" else f"{inner}[{kind.children[1][1]}]"
    if tid == "struct":
        fields = [(name, child, _hugeint_to_varchar(child)) for name, child in kind.children]
        if all(text is None for *_, text in fields):
            return None
        return "STRUCT(" + ", ".join(f"{quote_identifier(n)} {text or child}" for n, child, text in fields) + ")"
    if tid == "map":
        (_, key), (_, value) = kind.children
        key_text, value_text = _hugeint_to_varchar(key), _hugeint_to_varchar(value)
        if key_text is None and value_text is None:
            return None
        return f"MAP({key_text or key}, {value_text or value})"
    return None


# -- Ctrl-C during a DuckDB call ---------------------------------------------------------------
_running: set = set()  # the connections in a DuckDB call now, in the main thread
_wakeup: list[int] = []  # the write end of the pipe the watcher reads, once made
_wakeup_lock = threading.Lock()


def _wakeup_fd() -> int:
    """The write end of a pipe that a daemon thread reads: a SIGINT written to it interrupts
    every connection in :data:`_running` (made on first use)."""
    with _wakeup_lock:
        if not _wakeup:
            r, w = os.pipe()
            os.set_blocking(w, False)  # signal.set_wakeup_fd needs it so

            def watch() -> None:
                while data := os.read(r, 64):  # the numbers of the signals that came
                    if signal.SIGINT in data or signal.SIGTERM in data:
                        for con in list(_running):
                            try:
                                con.interrupt()
                            except Exception:  # noqa: BLE001 - closed meanwhile: nothing to interrupt
                                pass

            threading.Thread(target=watch, name="attnsweep-query-ctrl-c", daemon=True).start()
            _wakeup.append(w)
        return _wakeup[0]


@contextmanager
def _interruptible(con):
    """Within the block, a SIGINT interrupts DuckDB's work on ``con`` at once (DuckDB then
    raises its InterruptException, and Python its KeyboardInterrupt). Only where Ctrl-C means
    KeyboardInterrupt (Python's own SIGINT handler) in the main thread, and where no one else
    (asyncio) has the signal wakeup descriptor; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    fd = _wakeup_fd()
    old = signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    if old not in (-1, fd):
        signal.set_wakeup_fd(old)
        yield
        return
    _running.add(con)
    try:
        yield
    finally:
        _running.discard(con)
        signal.set_wakeup_fd(old)


ATTEMPTS = 3
"""How many times a query starts when files of the store vanish under it (a compaction
replaces a run's files by one): the store is listed again and the query run again, as long as
no batch has been given out yet."""


def _datasets(store: ResultsStore) -> dict[str, object]:
    """The store's ``trials`` and ``runs`` as Arrow datasets (those it holds), listed again
    when a file vanishes between listing and reading (:data:`ATTEMPTS` in all).

    Raises:
        StoreError: the store is empty.
        QueryError: files kept vanishing, or a file cannot be read (naming it and why).
    """
    attempt = 1
    while True:
        before = _listing(store) if store.local else None  # a remote listing costs; see below
        try:
            return _listed(store)
        except FileNotFoundError as exc:
            vanished = _os_path(exc)
        except AttributeError:
            # results.defensive_reads reads the footer of a file that vanished after it was listed as None,
            # and a later step of its listing fails on that; anything else is a fault to see.
            if before is None or _listing(store) == before:
                raise
            vanished = "a file of the store"
        except QueryError:
            raise
        except StoreError:  # empty, or only seemed so: every file listed vanished before it was read
            if not before and not (store.local and _listing(store)):
                raise
            vanished = "the files of the store"
        if attempt == ATTEMPTS:
            raise QueryError(f"{vanished} vanished during the query (a compaction?): run it again") from None
        attempt += 1


def _listing(store: ResultsStore) -> list[str]:
    """The names of the store's table files, to tell whether the store changed."""
    try:
        return sorted(str(p) for table in ("trials", "runs")
                      for p in listing(store.root / table, "sweep=*/run_id=*/*.parquet"))
    except OSError:
        return []


def _listed(store: ResultsStore) -> dict[str, object]:
    tables = {}
    for name in ("trials", "runs"):
        try:
            tables[name] = store.arrow_dataset(name)
        except StoreError:
            pass
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise QueryError(f"cannot read {_os_path(exc)}: {exc.strerror or exc}") from None
    if not tables:
        raise StoreError(f"the store at {store.root} is empty: run a sweep first")
    return tables


def _os_path(exc: OSError) -> str:
    """The path an OSError is about (pyarrow raises ``FileNotFoundError(path)``, with the
    path as its message and no ``filename``)."""
    return str(exc.filename or (exc.args[0] if len(exc.args) == 1 else exc))


def _vanished(tables: dict[str, object]) -> list[str]:
    """The files of ``tables`` that no longer exist."""
    from pyarrow import fs as pafs

    gone = []
    for dataset in tables.values():
        for path in dataset.files:
            try:
                if dataset.filesystem.get_file_info(path).type == pafs.FileType.NotFound:
                    gone.append(path)
            except OSError:
                gone.append(path)
    return gone


def _connect(tables: dict[str, object], memory_limit: str, spill_bytes: int | None = None):
    """A locked in-memory connection with ``tables`` registered and a spill folder of its own,
    DuckDB's memory limit :func:`engine_limit` of ``memory_limit`` and its spill at most
    ``spill_bytes`` (None: :func:`check_spill_limit`'s default).

    Returns:
        ``(connection, spill_folder)``; the caller removes the folder after closing.
    """
    import duckdb

    remove_stale_spill()
    limit_bytes = memory_bytes(memory_limit)
    if limit_bytes < MIN_MEMORY_BYTES:
        raise QueryError(f"--memory-limit {memory_limit} is too little for DuckDB to start a query (it needs at "
                         f"least {MIN_MEMORY_BYTES >> 20} MiB with the result's batches): give more, e.g. 256MB")
    try:
        spill = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-")
        spill_bytes = check_spill_limit(None, spill) if spill_bytes is None else spill_bytes
    except OSError as exc:
        raise QueryError(f"cannot make DuckDB's spill folder in {tempfile.gettempdir()}: {exc.strerror or exc} "
                         "(TMPDIR names the folder)") from None
    con = None
    try:
        config = {k: v for k, v in LOCKED.items() if k not in ("enable_external_access", "lock_configuration")}
        con = duckdb.connect(":memory:", config={**config, "memory_limit": f"{engine_limit(limit_bytes)}B",
                                                 "threads": engine_threads(limit_bytes),
                                                 "temp_directory": spill,
                                                 "max_temp_directory_size": f"{spill_bytes}B"})
        try:  # a TIMESTAMPTZ reads the same on every machine, whatever its local time zone
            con.execute("SET TimeZone = 'UTC'")
        except duckdb.Error:  # no ICU extension: time zones are UTC already
            pass
        for name, dataset in tables.items():
            con.register(name, dataset)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        settings = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                                    f"({', '.join('?' * len(LOCKED))})", list(LOCKED)).fetchall())
        if any(settings.get(k) != str(v).lower() for k, v in LOCKED.items()):  # never expected: refuse, not run open
            raise QueryError(f"the query engine did not take its read-only settings ({settings}): not run")
        return con, spill
    except duckdb.OutOfMemoryException as exc:
        _release(con, spill)
        raise QueryError(f"--memory-limit {memory_limit} is too little for DuckDB to start a query "
                         f"({_engine_reason(exc)}): give more, e.g. 256MB") from None
    except BaseException:
        _release(con, spill)
        raise


def _release(con, spill: str) -> None:
    """Close ``con`` (if any) and remove its spill folder."""
    try:
        if con is not None:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _engine_reason(exc: Exception) -> str:
    """DuckDB's first line, without its advice: it suggests PRAGMA and SET commands that the
    locked connection of a query refuses."""
    return str(exc).strip().splitlines()[0].strip() if str(exc).strip() else type(exc).__name__


def _memory_message(exc: Exception, memory_limit: str, spill: str) -> str:
    """What a user can do when DuckDB runs out of memory or of spill space, in our options."""
    reason = _engine_reason(exc)
    if "max_temp_directory_size" in str(exc) or "offload" in reason:
        return (f"query's spill reached its limit in {os.path.dirname(spill)} ({reason}): give a larger "
                "--spill-limit (ATTNSWEEP_QUERY_SPILL; default half the free space there) or more --memory-limit "
                "(ATTNSWEEP_QUERY_MEMORY), or make the query smaller (filter or aggregate before sorting or joining)")
    return (f"query ran out of memory under --memory-limit {memory_limit} (ATTNSWEEP_QUERY_MEMORY; {reason}): give it "
            "more, or make the query smaller")


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


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (a ``"`` in it doubled)."""
    return '"' + name.replace('"', '""') + '"'


def _projected(rel, convert: Convert | None):
    """``rel`` with unique column names (:func:`unique_names`) and each column given as
    ``convert`` says.

    Raises:
        QueryError: a column DuckDB cannot convert, naming it and its type.
    """
    names = unique_names(rel.columns)
    converted = [convert(kind, f"#{i}") if convert is not None else None for i, kind in enumerate(rel.types, start=1)]
    if names == rel.columns and not any(converted):
        return rel  # as it is: DuckDB's messages then point at the lines of the statement as written
    exprs = [f"{expr or f'#{i}'} AS {quote_identifier(name)}"
             for i, (name, expr) in enumerate(zip(names, converted), start=1)]
    try:
        return rel.project(", ".join(exprs))
    except Exception:  # noqa: BLE001 - find the column, then say it in one line
        import duckdb

        for name, expr, kind in zip(names, exprs, rel.types):
            try:
                rel.project(expr)
            except duckdb.Error as exc:
                raise QueryError(f"column {name!r} of type {kind} cannot be written: {_one_line(exc)}") from None
        raise


def _reader(rel, batch_rows: int):
    to_reader = getattr(rel, "to_arrow_reader", None)  # DuckDB 2; fetch_record_batch before
    return to_reader(batch_rows) if to_reader is not None else rel.fetch_record_batch(batch_rows)


class QueryBatches(Iterator[pa.RecordBatch]):
    """The record batches of one running query. It owns the DuckDB connection and its spill
    folder and releases both when the batches run out, on an error, on :meth:`close` (or
    ``with``), and at the latest when it is garbage collected or the interpreter exits.

    A file of the store that vanishes before the first batch (a compaction replaced it) makes
    the query run again, on the files there are then (:data:`ATTEMPTS` in all).
    """

    def __init__(self, store: ResultsStore, sql: str, batch_rows: int, memory_limit: str, convert: Convert | None,
                 spill_bytes: int | None = None):
        self._args = (store, sql, batch_rows, memory_limit, convert, spill_bytes)
        self._batch_bytes = batch_budget(memory_bytes(memory_limit))
        self._yielded = False
        self._starts = 1
        self._release = None
        self._start()

    def _start(self) -> None:
        store, sql, batch_rows, memory_limit, convert, spill_bytes = self._args
        self._tables = _datasets(store)
        con, spill = _connect(self._tables, memory_limit, spill_bytes)
        self._con, self._spill = con, spill
        self._release = weakref.finalize(self, _release, con, spill)
        try:
            rel = _projected(con.sql(_statement(con, sql)), convert)
            with _interruptible(con):
                self._reader = _reader(rel, min(batch_rows, READ_ROWS))
            self.schema = self._reader.schema
        except BaseException as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException):
        """Release everything and raise ``exc`` as the error a user reads; a vanished store
        file before the first batch starts the query again instead (:data:`ATTEMPTS`)."""
        import duckdb

        gone = _vanished(self._tables) if isinstance(exc, (duckdb.Error, pa.ArrowException, OSError)) else []
        self.close()
        if isinstance(exc, duckdb.InterruptException) or (isinstance(exc, RuntimeError) and
                                                          str(exc).strip().lower() == "query interrupted"):
            raise KeyboardInterrupt from None  # Ctrl-C, however DuckDB reports it
        if gone and not self._yielded and self._starts < ATTEMPTS:
            self._starts += 1
            self._start()
            return
        if gone:
            raise QueryError(f"{gone[0]} vanished during the query (a compaction?): run it again") from None
        if isinstance(exc, duckdb.PermissionException):
            raise QueryError("query reads only the store's tables 'trials' and 'runs', not files or the network "
                             f"({_one_line(exc)})") from exc
        # DuckDB's errors reach us as its own exceptions, or (while batches are read through
        # Arrow's stream) as an OSError or ArrowException carrying its text.
        engine = isinstance(exc, (duckdb.Error, pa.ArrowException, OSError))
        if isinstance(exc, duckdb.OutOfMemoryException) or (engine and (
                "Out of Memory Error" in str(exc) or "max_temp_directory_size" in str(exc))):
            raise QueryError(_memory_message(exc, self._args[3], self._spill)) from None
        if engine and "No space left" in str(exc):
            raise QueryError(f"query's spill folder {self._spill} filled its disk ({_engine_reason(exc)}): free "
                             "space there, set TMPDIR to a folder on a larger disk, give a smaller --spill-limit "
                             "(ATTNSWEEP_QUERY_SPILL), or make the query smaller") from None
        if isinstance(exc, (duckdb.Error, pa.ArrowException)):
            raise QueryError(f"query failed: {_one_line(exc)}") from exc
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            # from the engine (a store file it could not read), not from the output: said as the query's
            raise QueryError(f"query failed: {_one_line(exc)}") from None
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
                with _interruptible(self._con):
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


def stream_query(store: ResultsStore, sql: str, batch_rows: int = BATCH_ROWS, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                 convert: Convert | None = None, spill_bytes: int | None = None) -> tuple[pa.Schema, QueryBatches]:
    """Run one SELECT over ``trials`` and ``runs`` and stream its result.

    Args:
        store: the results store.
        sql: DuckDB SQL, at most :data:`MAX_SQL_BYTES` bytes; the tables are named
            ``trials`` and ``runs``.
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
            anything but the two tables, or DuckDB rejects it (also while batches are read); a bad memory
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
    does not hold yet are left out.

    Raises:
        QueryError: a file vanished twice while the tables were listed, or cannot be read.
    """
    try:
        return {name: dataset.schema for name, dataset in _datasets(store).items()}
    except QueryError:
        raise
    except StoreError:
        return {}


def run_query(store: ResultsStore, sql: str) -> pl.DataFrame:
    """Run one SELECT over ``trials`` and ``runs`` and return the whole result.

    Args and errors as :func:`stream_query`; use that for results too large to hold.
    """
    schema, batches = stream_query(store, sql)
    with batches:
        return pl.from_arrow(pa.Table.from_batches(list(batches), schema=schema))
