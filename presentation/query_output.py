"""The input and output of ``attnsweep query``: the SQL read with a bound, each result column
given in a form its ``--format`` can hold, the result written batch by batch (memory stays
bounded by one batch whatever the result's size), and ``--output`` written only where the
user pointed it.

Formats and DuckDB types: every DuckDB type comes out through every format. What a format
cannot hold is given as DuckDB's own text of the value (``CAST(x AS VARCHAR)``: an
``INTERVAL`` as ``1 day``, a ``BIT`` as ``101``, a ``BLOB`` as ``\\xAA``, a ``UNION`` as its
value), inside lists, structs and maps too; CSV has no nested types, so a list, struct or map
is written as its JSON text (``[1,2]``, ``{"a":1}``). The text formats (table, CSV, JSON) give
dates and timestamps as DuckDB's text too: DuckDB's ``infinity`` and years beyond 9999 have no
polars form. JSON writes NaN and infinity as null (JSON has neither) and decimals as strings.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import stat
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.console_text import visible
from attnsweep.results.errors import QueryError
from attnsweep.results.query import MAX_SQL_BYTES
from attnsweep.results.query_columns import quote_identifier

TABLE_ROWS = 200
"""The most rows ``--format table`` shows."""

FORMATS = ("table", "csv", "json", "parquet")

POLARS_TYPES = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "hugeint",
        "float",
        "double",
        "decimal",
        "varchar",
        "time",
        "time_ns",
        "uuid",
        "enum",
        "null",
    }
)
"""DuckDB scalar types (``DuckDBPyType.id``) whose Arrow export polars reads, shows and
writes as they are (HUGEINT comes as a 38-digit decimal; UHUGEINT would not fit, and wraps)."""

PARQUET_TYPES = POLARS_TYPES | {
    "blob",
    "date",
    "timestamp",
    "timestamp_ms",
    "timestamp_ns",
    "timestamp with time zone",
    "timestamptz_ns",
}
"""DuckDB scalar types Parquet keeps as they are (typed, not as text)."""

_PARQUET_CASTS = {"timestamp_s": "TIMESTAMP"}  # pyarrow writes seconds as milliseconds, overflowing at +-infinity
_NESTED = ("list", "array", "struct", "map")

# What a format's writer raises on a column it cannot write (polars' Rust panics included).
_WRITE_ERRORS = (pl.exceptions.PolarsError, pa.ArrowException, pl.exceptions.PanicException)


def _cast(kind, scalars: frozenset[str], text_keys: bool) -> str | None:
    """The DuckDB type to cast a value of type ``kind`` to so that a format whose scalar types
    are ``scalars`` holds it, or None when it does as it is: another scalar type becomes
    VARCHAR (DuckDB's text of the value), a list, array, struct or map keeps its shape around
    its members' casts, a map's keys become VARCHAR when ``text_keys`` (JSON object keys are
    strings) or when they have no type (an empty map)."""
    tid = kind.id
    if tid in ("list", "array"):
        inner = _cast(kind.children[0][1], scalars, text_keys)
        if inner is None:
            return None
        return f"{inner}[]" if tid == "list" else f"{inner}[{kind.children[1][1]}]"
    if tid == "struct":
        fields = [(name, child, _cast(child, scalars, text_keys)) for name, child in kind.children]
        if all(cast is None for *_, cast in fields):
            return None
        return "STRUCT(" + ", ".join(f"{quote_identifier(n)} {cast or child}" for n, child, cast in fields) + ")"
    if tid == "map":
        (_, key), (_, value) = kind.children
        key_cast = (
            "VARCHAR" if key.id == "null" or (text_keys and key.id != "varchar") else _cast(key, scalars, text_keys)
        )
        value_cast = _cast(value, scalars, text_keys)
        if key_cast is None and value_cast is None:
            return None
        return f"MAP({key_cast or key}, {value_cast or value})"
    if tid in scalars:
        return None
    return _PARQUET_CASTS.get(tid, "VARCHAR") if scalars is PARQUET_TYPES else "VARCHAR"


def converter(fmt: str) -> Callable[[object, str], str | None]:
    """How ``fmt`` gets each result column (``results.query_columns.Convert``): the SQL expression of a
    column of a DuckDB type the format cannot hold as it is, or None to keep it (see the
    module's docstring).

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: {', '.join(FORMATS)}")
    scalars = PARQUET_TYPES if fmt == "parquet" else POLARS_TYPES

    def convert(kind, column: str) -> str | None:
        if fmt == "csv" and kind.id in _NESTED:
            return f"to_json({column})"
        target = _cast(kind, scalars, text_keys=fmt != "parquet")
        return None if target is None else f"CAST({column} AS {target})"

    return convert


def _culprit(schema: pa.Schema, fmt: str, exc: BaseException, attempt: Callable[[int], object]) -> QueryError:
    """The error to show when ``fmt`` cannot write a result: naming the first column that
    ``attempt(i)`` (writing column ``i`` alone) fails on, and its type."""
    reason = " ".join(str(exc).split())[:300] or type(exc).__name__
    for i, field in enumerate(schema):
        try:
            attempt(i)
        except _WRITE_ERRORS:
            return QueryError(f"--format {fmt} cannot write column {field.name!r} of type {field.type}: {reason}")
    return QueryError(f"--format {fmt} cannot write this result: {reason}")


def _column_text(batch: pa.RecordBatch, fmt: str, i: int) -> bytes:
    """Column ``i`` of ``batch`` alone, as :func:`_text` writes it (with its header)."""
    return _text(batch.select([i]), fmt, True)


def _frame(data: pa.RecordBatch | pa.Table) -> pl.DataFrame:
    """``data`` as a polars frame (``pl.from_arrow`` gives a Series only for an Arrow array)."""
    df = pl.from_arrow(data)
    if not isinstance(df, pl.DataFrame):
        raise TypeError(f"expected a table, got {type(df).__name__}")
    return df


def _text(batch: pa.RecordBatch, fmt: str, header: bool) -> bytes:
    """One batch as CSV (with its header if ``header``) or as the rows of a JSON array
    (without the brackets)."""
    df = _frame(batch)
    if fmt == "csv":
        return df.write_csv(include_header=header).encode()
    return df.write_json()[1:-1].encode()


def write_batches(schema: pa.Schema, batches: Iterator[pa.RecordBatch], fmt: str, out: BinaryIO) -> int:
    """Write ``batches`` to ``out`` as ``csv`` (header once), ``json`` (one array of row
    objects) or ``parquet``; returns the rows written. Columns should come converted for the
    format (:func:`converter`).

    Raises:
        ValueError: an unknown format.
        QueryError: a column the format cannot write, naming it and its type.
        OSError: ``out`` cannot be written.
    """
    if fmt == "parquet":
        return _write_parquet(schema, batches, out)
    if fmt not in ("csv", "json"):
        raise ValueError(f"unknown format {fmt!r}: csv, json or parquet")
    rows, first = 0, True
    if fmt == "json":
        out.write(b"[")
    for batch in batches:
        if batch.num_rows == 0:
            continue
        try:
            text = _text(batch, fmt, header=first)
        except _WRITE_ERRORS as exc:
            raise _culprit(batch.schema, fmt, exc, functools.partial(_column_text, batch, fmt)) from None
        out.write(text if first or fmt == "csv" else b"," + text)
        first = False
        rows += batch.num_rows
    if fmt == "csv" and first:  # no rows: the header alone
        empty = pa.RecordBatch.from_pylist([], schema=schema)
        try:
            out.write(_text(empty, fmt, header=True))
        except _WRITE_ERRORS as exc:
            raise _culprit(schema, fmt, exc, lambda i: _text(empty.select([i]), fmt, True)) from None
    if fmt == "json":
        out.write(b"]\n")
    return rows


def _write_parquet(schema: pa.Schema, batches: Iterator[pa.RecordBatch], out: BinaryIO) -> int:
    def alone(i: int) -> None:
        pq.ParquetWriter(io.BytesIO(), pa.schema([schema.field(i)])).close()

    try:
        writer = pq.ParquetWriter(out, schema)
    except _WRITE_ERRORS as exc:
        raise _culprit(schema, "parquet", exc, alone) from None
    rows = 0
    with writer:
        for batch in batches:
            try:
                writer.write_batch(batch)
            except _WRITE_ERRORS as exc:

                def one(i: int, batch=batch) -> None:
                    with pq.ParquetWriter(io.BytesIO(), pa.schema([schema.field(i)])) as w:
                        w.write_batch(batch.select([i]))

                raise _culprit(schema, "parquet", exc, one) from None
            rows += batch.num_rows
    return rows


def head(schema: pa.Schema, batches: Iterator[pa.RecordBatch], n: int = TABLE_ROWS) -> tuple[pl.DataFrame, bool]:
    """The first ``n`` rows of a result, and whether it has more (the rest is not read).

    Raises:
        QueryError: a column polars cannot read, naming it and its type.
    """
    taken, count = [], 0
    for batch in batches:
        taken.append(batch)
        count += batch.num_rows
        if count > n:
            break
    table = pa.Table.from_batches(taken, schema=schema)
    try:
        df = _frame(table)
    except _WRITE_ERRORS as exc:
        raise _culprit(schema, "table", exc, lambda i: pl.from_arrow(table.select([i]))) from None
    return df.head(n), df.height > n


NAME_CHARS = 200
"""Characters of a column name a table shows at most, however narrow its values."""
QUERY_TABLE_WIDTH = 65_535
"""The widest table polars prints on a line (its limit is a u16); a wider one it wraps, cell by
cell, in time that grows with the square of the width."""


def table_text(schema: pa.Schema, batches: Iterator[pa.RecordBatch], terminal: bool) -> str:
    """The first :data:`TABLE_ROWS` rows of a result as polars prints a table, and a line
    saying so when there are more. On a ``terminal`` polars fits it to the width; otherwise
    (:func:`_full_table`) every column, every item of a list and every character of a value
    is shown, as long as the table fits :data:`QUERY_TABLE_WIDTH`. The table is text to read,
    on a terminal or off it: control characters, escape sequences and bidirectional overrides
    in values and column names are written out (``\\x1b``, ``\\r``, ``\\u202e``;
    :func:`~attnsweep.presentation.console_text.visible`), string values before polars pads
    them, so their columns stay aligned.

    Raises:
        QueryError: a column polars cannot show, naming it and its type.
    """
    df, more = head(schema, batches)
    df = df.with_columns(pl.col(pl.String).map_elements(visible, return_dtype=pl.String))
    text = _printed(schema, df, tbl_cols=30, fmt_str_lengths=60) if terminal else _full_table(schema, df)
    if more:
        text += f"\n(first {TABLE_ROWS} rows shown; --format csv, json or parquet writes them all)"
    return visible(text)  # what the values left: column names, strings inside lists and structs


class EscapedStream:
    """A binary stream that writes the :func:`~attnsweep.presentation.console_text.visible`
    text of what it is given to ``raw``: the CSV or JSON of a query bound for a terminal.
    Each write must be whole UTF-8 text (:func:`write_batches` writes a batch's text at once)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw

    def write(self, data: bytes) -> int:
        self.raw.write(visible(data.decode("utf-8")).encode("utf-8"))
        return len(data)


def _full_table(schema: pa.Schema, df: pl.DataFrame) -> str:
    """``df`` as polars prints a table, off a terminal: every column, every item of a list and
    every character of a value (floats as polars shows them, 6 significant digits), as long as
    the table fits :data:`QUERY_TABLE_WIDTH`; in a wider one the widest values are cut with '…'
    to fit, and a line under the table says so."""
    heads, widths, longest = [], [], 8  # polars squeezes a table whose fmt_str_lengths is below 2
    # polars cuts column names at fmt_str_lengths too: the cap is never below the longest name
    # (within reason), so a 1 x 1 result keeps its header ("count_star()", not "count_st…").
    name_room = min(max((len(name) for name in df.columns), default=0), NAME_CHARS)
    for column in df.get_columns():
        texts = [v if isinstance(v, str) else str(v) for v in column.to_list()]
        heads.append(max(len(column.name), len(str(column.dtype))))
        widths.append(max([heads[-1], *(len(line) for t in texts for line in t.split("\n"))]))
        longest = max([longest, name_room, *map(len, texts)])
    room = QUERY_TABLE_WIDTH - 3 * df.width - 1  # '│ ', ' ┆ ' between columns, ' │'
    cap, items = longest, -1
    if sum(widths) > room:  # the largest cap on a value's width that fits (headers are never cut)
        low, high = 1, max(widths)
        while low < high:
            mid = (low + high + 1) // 2
            fits = sum(max(min(w, mid), h) for w, h in zip(widths, heads, strict=True)) <= room
            low, high = (mid, high) if fits else (low, mid - 1)
        cap, items = max(low, 8, name_room), max(1, low // 3)
    text = _printed(
        schema,
        df,
        tbl_cols=-1,
        fmt_str_lengths=cap,
        fmt_table_cell_list_len=items,
        tbl_width_chars=QUERY_TABLE_WIDTH,
    )
    if items != -1:
        text += (
            f"\n(values wider than {cap:,} characters cut with '…', to fit the {QUERY_TABLE_WIDTH:,} characters "
            "polars prints on a line; --format csv, json or parquet writes them whole)"
        )
    return text


def _printed(schema: pa.Schema, df: pl.DataFrame, **config) -> str:
    """``df`` as polars prints it under ``config`` (``pl.Config`` settings) and
    :data:`TABLE_ROWS` rows.

    Raises:
        QueryError: a column polars cannot show, naming it and its type.
    """
    try:
        with pl.Config(tbl_rows=TABLE_ROWS, **config):
            return str(df)
    except _WRITE_ERRORS as exc:
        raise _culprit(schema, "table", exc, lambda i: str(df[:, i])) from None


# -- the SQL ------------------------------------------------------------------------------
def read_sql(source: BinaryIO, name: str) -> str:
    """At most :data:`results.query.MAX_SQL_BYTES` bytes of UTF-8 SQL from ``source``: one
    byte more is read and refused, so an endless source (``/dev/zero``) ends at once.

    Args:
        source: a binary stream (a file, stdin).
        name: what the stream is, for the messages (``--file q.sql``, ``stdin``).

    Raises:
        AttnsweepError: longer than the limit, not UTF-8, or unreadable.
    """
    try:
        data = source.read(MAX_SQL_BYTES + 1)
    except OSError as exc:
        raise AttnsweepError(f"{name}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_SQL_BYTES:
        raise AttnsweepError(f"{name}: more than {MAX_SQL_BYTES:,} bytes of SQL, the most a query takes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AttnsweepError(f"{name}: not UTF-8 text") from None


def read_sql_file(path: Path) -> str:
    """The SQL in the file ``path`` (:func:`read_sql`).

    Raises:
        AttnsweepError: the file cannot be read, is too long or is not UTF-8.
    """
    try:
        with open(path, "rb") as fh:
            return read_sql(fh, f"--file {path}")
    except OSError as exc:
        raise AttnsweepError(f"--file: cannot read {path}: {exc.strerror or exc}") from None


# -- --output -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    """Where ``--output`` writes.

    Attributes:
        path: the path as given.
        target: the file written: for a regular file (or a new one) the real file behind any
            links, written aside in its folder and renamed over it; for a character device or
            a FIFO the path itself, written through.
        through: written straight through (no temporary file, no rename).
        fd: the descriptor of this process the path names (``/dev/stdout``, ``/dev/fd/3``),
            written through as the caller opened it; None otherwise.
    """

    path: Path
    target: Path
    through: bool
    fd: int | None = None


_REFUSED = {stat.S_IFDIR: "a folder", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def _descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/1``), or None. Links are followed one at a time until one sits in this
    process's descriptor folder under ``/proc`` (whose links name pipes and sockets, not
    paths)."""
    here = re.compile(rf"/proc/(?:self|thread-self|{os.getpid()})(?:/task/\d+)?/fd")
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links in a path
        folder, name = os.path.split(current)
        folder = os.path.realpath(folder)
        if here.fullmatch(folder) and name.isdigit():
            return int(name)
        link = os.path.join(folder, name)
        if not os.path.islink(link):
            return None
        current = os.path.normpath(os.path.join(folder, os.readlink(link)))
    return None


def resolve_output(path: Path) -> Output:
    """How ``--output PATH`` is written, decided from what ``path`` is, before any query runs:
    a regular file or a new path (also behind a symlink, whose target is written and which
    stays a link): written aside in the target's folder and renamed over it, so a failed
    query leaves the old file as it was; a character device (``/dev/null``), a FIFO, or a
    descriptor of this process (``/dev/stdout``): written straight through.

    Raises:
        AttnsweepError: ``path`` is a folder, a block device, a socket or another kind of
            file; its folder does not exist; or it cannot be looked at (naming why).
    """
    fd = _descriptor(path)
    if fd is not None:
        import fcntl

        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            raise AttnsweepError(f"--output: {path} names descriptor {fd}, which is not open") from None
        if flags & os.O_ACCMODE not in (os.O_WRONLY, os.O_RDWR):
            raise AttnsweepError(f"--output: {path} names descriptor {fd}, which is not open for writing")
        return Output(path, path, through=True, fd=fd)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:  # a new file, or a link to one
        target = Path(os.path.realpath(path))
        if not target.parent.is_dir():
            raise AttnsweepError(
                f"--output: the folder {target.parent} does not exist (for {path}); make it first"
            ) from None
        return Output(path, target, through=False)
    except OSError as exc:
        raise AttnsweepError(f"--output: {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return Output(path, Path(os.path.realpath(path)), through=False)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Output(path, path, through=True)
    what = _REFUSED.get(stat.S_IFMT(mode), "neither a regular file, a character device nor a FIFO")
    raise AttnsweepError(
        f"--output: {path} is {what}; give a file (new, or replaced whole), a character device "
        "or a FIFO; nothing was written"
    )


@contextmanager
def open_output(out: Output) -> Iterator[BinaryIO]:
    """A binary stream to write the result to, as :func:`resolve_output` decided. A regular
    file appears only when the ``with`` block ends without an error (then synced and renamed
    over the target, keeping the permissions of the file it replaces); on an error or an
    interrupt the temporary file is removed and the target is untouched.

    Raises:
        AttnsweepError: the target cannot be opened or written (naming it and why), or a
            device or FIFO was replaced by another kind of file meanwhile.
    """
    try:
        if out.fd is not None:
            sys.stdout.flush()
            with os.fdopen(os.dup(out.fd), "wb") as fh:
                yield fh
        elif out.through:
            fd = os.open(out.target, os.O_WRONLY | os.O_NOCTTY)  # never created, never truncated
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
                os.close(fd)
                raise AttnsweepError(f"--output: {out.path} changed while the query ran; nothing was written")
            with os.fdopen(fd, "wb") as fh:
                yield fh
        else:
            with _aside(out.target) as fh:
                yield fh
    except OSError as exc:
        raise AttnsweepError(f"--output: cannot write {out.path}: {exc.strerror or exc}") from None


@contextmanager
def _aside(target: Path) -> Iterator[BinaryIO]:
    """Write to a temporary file in ``target``'s folder, then sync it and rename it over
    ``target``; the temporary file is removed on any error."""
    tmp = target.with_name(f".{target.name[:200]}.{uuid.uuid4().hex[:8]}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        with open(fd, "wb", closefd=False) as fh:
            yield fh
        os.fsync(fd)
        os.replace(tmp, target)
    finally:
        os.close(fd)
        tmp.unlink(missing_ok=True)
