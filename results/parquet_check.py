"""Whether a file is a readable Parquet file of bounded size, decided before it is read.

A store's folder may hold any file under a store file's name: one damaged on disk or in a
copy, another program's, or one made to hurt its reader (a few KB of zstd that decode to
gigabytes, a sparse file of gigabytes with ``PAR1`` at both ends, a footer whose sizes lie).
Reading such a file must neither crash the process nor take memory without bound, so
:func:`read_checked` decides, in this order and with the file system read only here:

1. the format: the magic bytes ``PAR1`` at both ends and a footer length that fits the file
   and :data:`FOOTER_MAX` (:func:`check_format`, 12 bytes read), so a large file that is no
   Parquet file is refused at once;
2. the footer, parsed from its own bytes by a small reader of Thrift's compact protocol
   (:func:`results.parquet_footer.footer_chunks`), not through pyarrow's Python metadata
   objects, which abort the whole process on some damaged column chunk metadata instead of
   raising; pyarrow's objects are used only once pyarrow's reader has accepted the file;
3. the size: on disk, and what the footer says the file decodes to (pages uncompressed plus
   :data:`VALUE_BYTES` a value: :func:`decoded_estimate`), within one limit,
   :func:`max_file_bytes` (``ATTNSWEEP_MAX_FILE_MB``, :data:`FILE_MAX_MB` by default), which
   bounds a check's memory at a few times it; and each column chunk inside the file's data
   (:func:`check_sizes`; these limits and checks are :mod:`results.file_limits`);
4. every page header (:func:`results.parquet_footer.check_pages`): the pages must tile their
   column chunk, claim no more uncompressed bytes than the footer and exactly its values, so
   a footer that understates its pages is damage before anything is decompressed;
5. every page decompressed and decoded by pyarrow, its CRC checked, strings kept as
   dictionaries and the bytes they expand to counted before any reader expands them (a
   short dictionary string repeated row after row passes every size in the footer); then
   polars decodes it all, and the row counts must agree with the footer's.

Every read of the file system is made here (:func:`_read_at`) and the parsing only from
memory, so a file system's refusal (:class:`Unreadable`) is told apart from damage, which
pyarrow reports alike as ``OSError``. A file beyond the limit is :class:`TooLarge`: a size,
not damage (it reads under a larger limit), so the store skips it where it is; damage raises
:class:`results.errors.StoreError` or whatever the readers raise, and the store quarantines
the file. A file version checked before is read again by :func:`read_footer`: its footer
and sizes only, as the limit may have been lowered since.

Why each step: docs/decisions.md, "Second hostile trial (store)". This module knows
Parquet files, not the store's layout (:mod:`results.defensive_reads`, which uses it).
"""

from __future__ import annotations

import errno
import inspect
import io
import os
import struct
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.errors import StoreError
from attnsweep.results.file_limits import (
    FOOTER_MAX,
    TooLarge,
    check_sizes,
    max_file_bytes,
    rows_text,
)
from attnsweep.results.parquet_footer import (
    BYTE_ARRAY,
    check_pages,
    chunks_of,
    footer_chunks,
    plain_strings,
)

PARQUET_MAGIC = b"PAR1"


class Unreadable(Exception):
    """The file system refused to read a file (no permission, an I/O error, gone midway):
    no evidence that the file is damaged, so it is skipped where it is, never moved."""


def os_reason(exc: OSError) -> str:
    """An OS error as people and scripts read it: ``No space left on device (ENOSPC)``. Here
    because the reads below name a refusal by it; the store's other modules use it too."""
    name = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    text = exc.strerror or str(exc) or type(exc).__name__
    return f"{text} ({name})" if name and name not in text else text


def _reason(exc: Exception) -> str:
    """:func:`os_reason` of an OS error; another error (an object store client's) by its type and message."""
    return os_reason(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _read_at(fh, offset: int, n: int) -> bytes:
    """``n`` bytes of ``fh`` from ``offset``; file system errors raise :class:`Unreadable`."""
    try:
        fh.seek(offset)
        data = fh.read(n)
    except Exception as exc:  # noqa: BLE001 - only bytes are read here: whatever fails is the file system's
        # An object store's client raises its own errors too (botocore's EndpointConnectionError
        # when the server is out of reach): a refusal, not damage, so the file is never moved.
        raise Unreadable(_reason(exc)) from exc
    if len(data) != n:
        raise Unreadable(f"it changed while it was read ({len(data)} of {n} bytes at {offset})")
    return data


class _Opened:
    """``path`` opened for reading, its size known; file system errors raise :class:`Unreadable`."""

    def __init__(self, path: Path):
        try:
            self.fh = path.open("rb")
            self.size = self.fh.seek(0, os.SEEK_END)
        except Exception as exc:  # noqa: BLE001 - an object store's client errors too (see _read_at)
            raise Unreadable(_reason(exc)) from exc

    def __enter__(self) -> _Opened:
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def check_format(opened: _Opened) -> int:
    """Check that an opened file can be a Parquet file before reading it: the magic bytes
    ``PAR1`` at both ends, and a footer that fits in the file (and in :data:`FOOTER_MAX`).
    Reads 12 bytes. Returns the footer's length.

    Raises:
        StoreError: it cannot be a Parquet file (the file is damaged, or another file).
        Unreadable: the file system refused the read.
    """
    size = opened.size
    if size < 12:
        raise StoreError(f"{size} bytes: too short to be a Parquet file (12 at least)")
    head, tail = _read_at(opened.fh, 0, 4), _read_at(opened.fh, size - 8, 8)
    if head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC:
        where = " and ".join(
            w for w, ok in (("start", head == PARQUET_MAGIC), ("end", tail[4:] == PARQUET_MAGIC)) if not ok
        )
        raise StoreError(f"not a Parquet file: no {PARQUET_MAGIC.decode()} magic bytes at its {where}")
    (footer,) = struct.unpack("<I", tail[:4])
    if footer > size - 12:
        raise StoreError(f"its footer length ({footer:,} bytes) does not fit in the file ({size:,} bytes)")
    if footer > FOOTER_MAX:
        raise StoreError(
            f"its footer claims {footer:,} bytes; a store file's is a few KB (at most {FOOTER_MAX:,} are read)"
        )
    return footer


def read_footer(path: Path, limit: int | None = None) -> pq.FileMetaData:
    """The Parquet footer of a file :func:`read_checked` passed before, parsed from its own
    bytes after :func:`check_format`, and :func:`check_sizes` against ``limit`` bytes (default
    :func:`max_file_bytes`: it may be lower now); reads the footer only.

    Raises:
        Unreadable: the file system refused a read.
        TooLarge: the file holds more than ``limit`` bytes, on disk or decoded.
        Exception: the file is damaged (see :func:`read_checked`).
    """
    limit = max_file_bytes() if limit is None else limit
    with _Opened(path) as opened:
        footer = check_format(opened)
        tail = _read_at(opened.fh, opened.size - footer - 8, footer + 8)
        size = opened.size
    meta = pq.read_metadata(pa.BufferReader(tail))
    check_sizes(chunks_of(meta), meta.num_rows, size, footer, limit)
    return meta


def read_checked(path: Path, limit: int | None = None) -> pq.FileMetaData:
    """Read every page of the Parquet file at ``path`` and return its footer, reading and
    decoding at most ``limit`` bytes (default :func:`max_file_bytes`).

    In order: :func:`check_format` looks at the file's first and last 12 bytes, so a large
    file that is no Parquet file is refused at once; the footer is read and parsed from its own
    bytes (:func:`footer_chunks`), and :func:`check_sizes` refuses a file larger than
    ``limit`` on disk. Then the file is held in memory (at most ``limit`` bytes) and every page
    header is parsed (:func:`check_pages`): pages must tile each column chunk and claim no
    more bytes and values than the footer says, so the footer's sizes bound what
    decompression allocates; and :func:`check_sizes` refuses a file whose footer says it
    decodes to more than ``limit``, before any page is decompressed.
    Pages written with a CRC checksum (every file this store writes: see
    :func:`results.atomic_write.write_parquet_atomic`) are verified against it; every page is decompressed and
    decoded by pyarrow, strings kept as dictionaries, so the bytes they expand to in a reader
    (a short dictionary repeated over many rows) are counted (:func:`_plain_nbytes`) before
    anything expands them; then polars decodes it all (local reads are polars', and it parses
    the footer more strictly); the rows decoded must add up to the footer's count. Files
    written before page checksums get the decoding only. Every read of the file system is made
    here, and the parsing only from memory, so a file system error (:class:`Unreadable`) is
    told apart from damage: pyarrow reports both as ``OSError``.

    A single changed byte anywhere in a file this store wrote either fails this or changes
    no row a read returns (tests/results/test_damage.py tries every byte).

    Raises:
        Unreadable: the file system refused a read (no permission, an I/O error).
        TooLarge: the file holds more than ``limit`` bytes, on disk or decoded.
        Exception: the file is damaged (any error the Parquet readers raise on it:
            ``OSError``, ``pyarrow.ArrowException``, ``UnicodeDecodeError``, polars'
            ``ComputeError``...), or :class:`StoreError` when it is no Parquet file, its
            footer or a page header does not parse, its pages disagree with its footer, or
            the row counts disagree.
    """
    limit = max_file_bytes() if limit is None else limit
    with _Opened(path) as opened:
        footer = check_format(opened)
        chunks, rows = footer_chunks(_read_at(opened.fh, opened.size - footer - 8, footer))
        check_sizes(chunks, rows, opened.size, footer, limit, decoded=False)
        data = _read_at(opened.fh, 0, opened.size)
    # The page headers first: a footer its pages contradict is damage, whatever it claims.
    check_pages(data, chunks)
    check_sizes(chunks, rows, len(data), footer, limit)
    # Every string column as a dictionary (pyarrow ignores it where the column is no string
    # or binary, e.g. a decimal, whose values are fixed width); extension types such as JSON are
    # read as their strings, so that they too stay dictionaries. The rest is bounded in
    # decoded_estimate.
    plain = plain_strings(chunks)
    strings = sorted({c.column for c in chunks if c.physical == BYTE_ARRAY} - plain)
    pf = pq.ParquetFile(
        pa.BufferReader(data),
        page_checksum_verification=True,
        read_dictionary=strings,
        **_NO_EXTENSIONS,
    )
    meta = pf.metadata
    decoded = expanded = 0
    for i in range(meta.num_row_groups):
        table = pf.read_row_group(i)
        table.validate(full=True)  # dictionary indices in range: kept as dictionaries, they are not looked up
        decoded += table.num_rows
        expanded += sum(_plain_nbytes(chunk) for column in table.columns for chunk in column.chunks)
        del table
        if expanded > limit:
            raise TooLarge(
                f"it expands to at least {expanded:,} bytes when read ({rows_text(meta.num_rows)}: strings "
                f"of a dictionary repeated row after row), more than the {limit // 2**20:,} MiB a store "
                "file may hold"
            )
    if decoded != meta.num_rows:
        raise StoreError(f"its pages hold {decoded} rows, its footer says {meta.num_rows}")
    # polars parses the footer and pages itself (local reads are polars'), and more strictly.
    if pl.read_parquet(io.BytesIO(data), use_statistics=False).height != decoded:
        raise StoreError(f"polars reads another row count than its footer's {meta.num_rows}")
    return meta


_NO_EXTENSIONS = (
    {"arrow_extensions_enabled": False}
    if "arrow_extensions_enabled" in inspect.signature(pq.ParquetFile).parameters
    else {}
)
"""pyarrow 20 reads JSON columns as an extension type, and keeps no dictionary for them; older ones as strings."""


def _plain_nbytes(arr: pa.Array) -> int:
    """Bytes ``arr`` takes once its dictionaries are expanded, as a reader that keeps no
    dictionary (pyarrow's default, DuckDB through it) makes it: a dictionary array's
    values looked up per row, lists and structs through their children."""
    import pyarrow.compute as pc  # here: 50 ms of import that the light commands' start-up need not pay

    t = arr.type
    if pa.types.is_dictionary(t):
        lengths = pc.binary_length(arr.dictionary)
        return int(pc.sum(pc.take(lengths, arr.indices)).as_py() or 0) + 8 * len(arr)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_fixed_size_list(t):
        return 8 * len(arr) + _plain_nbytes(arr.values)
    if pa.types.is_struct(t):
        return len(arr) // 8 + sum(_plain_nbytes(arr.field(k)) for k in range(t.num_fields))
    return arr.nbytes
