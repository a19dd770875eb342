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
   (:func:`_footer_chunks`), not through pyarrow's Python metadata objects, which abort the
   whole process on some damaged column chunk metadata instead of raising; pyarrow's objects
   are used only once pyarrow's reader has accepted the file;
3. the size: on disk, and what the footer says the file decodes to (pages uncompressed plus
   :data:`VALUE_BYTES` a value: :func:`decoded_estimate`), within one limit,
   :func:`max_file_bytes` (``ATTNSWEEP_MAX_FILE_MB``, :data:`FILE_MAX_MB` by default), which
   bounds a check's memory at a few times it; and each column chunk inside the file's data
   (:func:`check_sizes`);
4. every page header (:func:`_check_pages`): the pages must tile their column chunk, claim no
   more uncompressed bytes than the footer and exactly its values, so a footer that
   understates its pages is damage before anything is decompressed;
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
Parquet files, not the store's layout (:mod:`results.store`, which uses it).
"""

from __future__ import annotations

import errno
import inspect
import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.errors import StoreError

PARQUET_MAGIC = b"PAR1"
FOOTER_MAX = 8 * 2**20
"""The largest footer a store file may claim (bytes): the store's footers are a few KB per
row group (one row group per 1 Mi rows, so one or two in a file within :data:`FILE_MAX_MB`),
and a footer is read whole and parsed: pyarrow takes about 9 bytes of memory per footer byte
(a 21 MB footer of 200,000 column chunks took 186 MB), so 8 MiB bounds that at about 75 MB."""
FILE_MAX_MB = 256
"""The most a store file may hold, in MiB (``ATTNSWEEP_MAX_FILE_MB`` changes it): its size on
disk, and what it decodes to (:func:`decoded_estimate` from the footer before any page is
read; the strings it expands to once decoded). Checking a file holds its bytes and one decoded
copy in memory (pyarrow's, then polars'), so this bounds a check's memory at a few times it. A
part file of 5,000 trials (the writer's ``flush_rows``) decodes to about 6 MiB, 10,000 failed
trials with long tracebacks to about 40 MiB; ``store compact`` writes files of at most a
quarter of it."""
FILE_MAX_ENV = "ATTNSWEEP_MAX_FILE_MB"


class Unreadable(Exception):
    """The file system refused to read a file (no permission, an I/O error, gone midway):
    no evidence that the file is damaged, so it is skipped where it is, never moved."""


class TooLarge(Exception):
    """A file holds more than :func:`max_file_bytes` (on disk, or decoded): not evidence of
    damage (a store may hold a file made under a larger limit), so it is skipped where it is,
    never moved, and reads again under a limit that takes it."""


def os_reason(exc: OSError) -> str:
    """An OS error as people and scripts read it: ``No space left on device (ENOSPC)``. Here
    because the reads below name a refusal by it; :mod:`results.store` uses it too."""
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
        where = " and ".join(w for w, ok in (("start", head == PARQUET_MAGIC), ("end", tail[4:] == PARQUET_MAGIC))
                             if not ok)
        raise StoreError(f"not a Parquet file: no {PARQUET_MAGIC.decode()} magic bytes at its {where}")
    (footer,) = struct.unpack("<I", tail[:4])
    if footer > size - 12:
        raise StoreError(f"its footer length ({footer:,} bytes) does not fit in the file ({size:,} bytes)")
    if footer > FOOTER_MAX:
        raise StoreError(f"its footer claims {footer:,} bytes; a store file's is a few KB (at most {FOOTER_MAX:,} "
                         "are read)")
    return footer


def max_file_bytes() -> int:
    """The most a store file may hold on disk and decoded, in bytes: ``ATTNSWEEP_MAX_FILE_MB``
    MiB if set, else :data:`FILE_MAX_MB`.

    Raises:
        StoreError: the variable is not a whole number of MiB from 1 to 1,048,576 (1 TiB).
    """
    text = os.environ.get(FILE_MAX_ENV)
    if text is None or not text.strip():
        return FILE_MAX_MB * 2**20
    try:
        mb = int(text.strip())
    except ValueError:
        mb = 0
    if not 1 <= mb <= 2**20:
        raise StoreError(f"{FILE_MAX_ENV}={text.strip()[:40]!r}: give the most a store file may hold as a whole "
                         f"number of MiB from 1 to {2**20:,} (default {FILE_MAX_MB})")
    return mb * 2**20


VALUE_BYTES = 16
"""Bytes a decoded value may take beyond its page bytes: 8 for a number, 16 for a string
(polars keeps each as a 16-byte view; pyarrow as an offset and a validity bit)."""

# Parquet's enums (parquet.thrift) as the footer stores them, and pyarrow's names for them.
BYTE_ARRAY = 6  # Type
ENCODINGS = {"PLAIN": 0, "PLAIN_DICTIONARY": 2, "RLE": 3, "BIT_PACKED": 4, "DELTA_BINARY_PACKED": 5,
             "DELTA_LENGTH_BYTE_ARRAY": 6, "DELTA_BYTE_ARRAY": 7, "RLE_DICTIONARY": 8, "BYTE_STREAM_SPLIT": 9}
TYPES = {"BOOLEAN": 0, "INT32": 1, "INT64": 2, "INT96": 3, "FLOAT": 4, "DOUBLE": 5, "BYTE_ARRAY": 6,
         "FIXED_LEN_BYTE_ARRAY": 7}
DICTIONARY_ENCODINGS = frozenset({2, 8})
PREFIX_ENCODING = 7  # DELTA_BYTE_ARRAY: a value is a prefix of the one before it and a suffix
NO_DICTIONARY_FORM = frozenset({6, 7})
"""String encodings (DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY) pyarrow cannot decode into a
dictionary (``Not yet implemented``): a column using one is decoded as plain strings by
:func:`read_checked`."""


@dataclass(frozen=True)
class _Chunk:
    """What a footer says of one column chunk: where its pages lie and what they hold."""

    group: int
    column: int
    path: str
    physical: int | None  # Type
    width: int  # the fixed length of a FIXED_LEN_BYTE_ARRAY value, else 0
    start: int  # offset of its first page (dictionary page, if any)
    compressed: int  # bytes of its pages as stored, headers included
    uncompressed: int  # bytes of its pages uncompressed, headers included
    values: int
    encodings: frozenset[int]

    @property
    def where(self) -> str:
        return f"column {self.path} of row group {self.group}"


def _chunks_of(meta: pq.FileMetaData) -> list[_Chunk]:
    """The column chunks of a footer pyarrow has already read pages under (:func:`read_checked`
    passed on it): pyarrow aborts the process on some damaged chunk metadata when Python asks
    for it (``ColumnChunkMetaData``), so an unchecked footer is parsed by :func:`_footer_chunks`."""
    widths = [meta.schema.column(j).length or 0 for j in range(meta.num_columns)]
    out = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            cc = rg.column(j)
            start = [o for o in (cc.dictionary_page_offset if cc.has_dictionary_page else None, cc.data_page_offset)
                     if o is not None and o > 0]
            out.append(_Chunk(i, j, cc.path_in_schema, TYPES.get(cc.physical_type), widths[j],
                              min(start) if start else cc.data_page_offset, cc.total_compressed_size,
                              cc.total_uncompressed_size, cc.num_values,
                              frozenset(ENCODINGS.get(e, -1) for e in cc.encodings)))
    return out


def _plain_strings(chunks: list[_Chunk]) -> set[int]:
    """The string columns :func:`read_checked` decodes as plain strings (not as dictionaries)."""
    return {c.column for c in chunks if c.physical == BYTE_ARRAY and NO_DICTIONARY_FORM & c.encodings}


def decoded_estimate(meta: pq.FileMetaData | list[_Chunk]) -> int:
    """What a file decodes to at most, in bytes, from its footer alone (``meta``, of a file
    :func:`read_checked` passed, or its chunks): each column chunk's pages uncompressed
    (``total_uncompressed_size``, which :func:`read_checked` holds its page headers to) plus
    :data:`VALUE_BYTES` (or the fixed length, if longer) per value. Strings from a dictionary
    can expand beyond this; :func:`read_checked` keeps them as dictionaries and measures them
    before any reader expands them, except in a column it cannot (a :data:`NO_DICTIONARY_FORM`
    encoding), where a chunk with dictionary or prefix-encoded strings is counted at its values
    times its bytes: no value is longer than the bytes its chunk holds."""
    chunks = _chunks_of(meta) if isinstance(meta, pq.FileMetaData) else meta
    plain = _plain_strings(chunks)
    total = 0
    for c in chunks:
        pages, values = max(c.uncompressed, 0), max(c.values, 0)
        total += pages + values * max(VALUE_BYTES, c.width)
        if c.column in plain and c.encodings & (DICTIONARY_ENCODINGS | {PREFIX_ENCODING}):
            total += values * pages
    return total


def check_sizes(chunks: list[_Chunk], rows: int, size: int, footer: int, limit: int, decoded: bool = True) -> None:
    """Check, before any page is read, that a file of ``size`` bytes whose footer (of
    ``footer`` bytes) lists ``chunks`` and ``rows`` is within ``limit`` bytes (on disk, and,
    if ``decoded``, by :func:`decoded_estimate`), and that each chunk lies in the file's data
    (between the leading magic and the footer).

    Raises:
        TooLarge: beyond ``limit`` (not damage: skipped in place).
        StoreError: a column chunk outside the data (damage).
    """
    data_end = size - footer - 8
    for c in chunks:
        if c.compressed == 0:
            continue  # nothing stored (pyarrow writes a chunk of no rows of a null column so, at offset 0)
        if c.start < 4 or c.compressed < 0 or c.start + c.compressed > data_end:
            raise StoreError(f"its footer puts {c.where} at bytes {c.start:,} to {c.start + c.compressed:,}, "
                             f"outside its data (bytes 4 to {data_end:,})")
    limit_mb = f"{limit // 2**20:,} MiB"
    if size > limit:
        raise TooLarge(f"it is {size:,} bytes on disk, more than the {limit_mb} a store file may hold")
    estimate = decoded_estimate(chunks) if decoded else 0
    if estimate > limit:
        pages = sum(max(c.uncompressed, 0) for c in chunks)
        raise TooLarge(f"its footer says it decodes to about {estimate:,} bytes (pages of {pages:,} bytes "
                       f"uncompressed, {_rows(rows)}), more than the {limit_mb} a store file may hold")


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
    check_sizes(_chunks_of(meta), meta.num_rows, size, footer, limit)
    return meta


def read_checked(path: Path, limit: int | None = None) -> pq.FileMetaData:
    """Read every page of the Parquet file at ``path`` and return its footer, reading and
    decoding at most ``limit`` bytes (default :func:`max_file_bytes`).

    In order: :func:`check_format` looks at the file's first and last 12 bytes, so a large
    file that is no Parquet file is refused at once; the footer is read and parsed from its own
    bytes (:func:`_footer_chunks`), and :func:`check_sizes` refuses a file larger than
    ``limit`` on disk. Then the file is held in memory (at most ``limit`` bytes) and every page
    header is parsed (:func:`_check_pages`): pages must tile each column chunk and claim no
    more bytes and values than the footer says, so the footer's sizes bound what
    decompression allocates; and :func:`check_sizes` refuses a file whose footer says it
    decodes to more than ``limit``, before any page is decompressed.
    Pages written with a CRC checksum (every file this store writes: see
    :func:`write_parquet_atomic`) are verified against it; every page is decompressed and
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
        chunks, rows = _footer_chunks(_read_at(opened.fh, opened.size - footer - 8, footer))
        check_sizes(chunks, rows, opened.size, footer, limit, decoded=False)
        data = _read_at(opened.fh, 0, opened.size)
    # The page headers first: a footer its pages contradict is damage, whatever it claims.
    _check_pages(data, chunks)
    check_sizes(chunks, rows, len(data), footer, limit)
    # Every string column as a dictionary (pyarrow ignores it where the column is no string
    # or binary, e.g. a decimal, whose values are fixed width); extension types such as JSON are
    # read as their strings, so that they too stay dictionaries. The rest is bounded in
    # decoded_estimate.
    plain = _plain_strings(chunks)
    strings = sorted({c.column for c in chunks if c.physical == BYTE_ARRAY} - plain)
    pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True, read_dictionary=strings,
                        **_NO_EXTENSIONS)
    meta = pf.metadata
    decoded = expanded = 0
    for i in range(meta.num_row_groups):
        table = pf.read_row_group(i)
        table.validate(full=True)  # dictionary indices in range: kept as dictionaries, they are not looked up
        decoded += table.num_rows
        expanded += sum(_plain_nbytes(chunk) for column in table.columns for chunk in column.chunks)
        del table
        if expanded > limit:
            raise TooLarge(f"it expands to at least {expanded:,} bytes when read ({_rows(meta.num_rows)}: strings "
                           f"of a dictionary repeated row after row), more than the {limit // 2**20:,} MiB a store "
                           "file may hold")
    if decoded != meta.num_rows:
        raise StoreError(f"its pages hold {decoded} rows, its footer says {meta.num_rows}")
    # polars parses the footer and pages itself (local reads are polars'), and more strictly.
    if pl.read_parquet(io.BytesIO(data), use_statistics=False).height != decoded:
        raise StoreError(f"polars reads another row count than its footer's {meta.num_rows}")
    return meta


_NO_EXTENSIONS = ({"arrow_extensions_enabled": False}
                  if "arrow_extensions_enabled" in inspect.signature(pq.ParquetFile).parameters else {})
"""pyarrow 20 reads JSON columns as an extension type, and keeps no dictionary for them; older ones as strings."""


def _rows(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


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


# -- Thrift ---------------------------------------------------------------------------------
# A footer (FileMetaData) and a page header (PageHeader) are Thrift structs in the compact
# protocol (parquet.thrift). The sizes, offsets and counts in them are read here, so that no
# page is decompressed on the word of a footer that its pages contradict, and no footer is
# handed to pyarrow's Python metadata objects before pyarrow's reader has accepted it (some
# damaged chunk metadata aborts the process there instead of raising).

class _Thrift(ValueError):
    """Bytes that are no Thrift compact struct (a damaged footer or page header)."""


def _varint(b, i: int) -> tuple[int, int]:
    if i < len(b) and b[i] < 0x80:  # most numbers in a footer take one byte
        return b[i], i + 1
    out = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise _Thrift("it runs past its end")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7


def _int(b, i: int, kind: int, depth: int = 0) -> tuple[int, int]:
    """An integer of compact type ``kind`` (byte, i16, i32, i64) at ``i``."""
    if kind == 3:
        if i >= len(b):
            raise _Thrift("it runs past its end")
        return (b[i] ^ 0x80) - 0x80, i + 1
    if kind not in (4, 5, 6):
        raise _Thrift(f"a number is of Thrift type {kind}")
    raw, i = _varint(b, i)
    return (raw >> 1) ^ -(raw & 1), i


def _text(b, i: int, kind: int, depth: int = 0) -> tuple[str, int]:
    if kind != 8:
        raise _Thrift(f"a string is of Thrift type {kind}")
    n, i = _varint(b, i)
    if i + n > len(b):
        raise _Thrift("it runs past its end")
    return bytes(b[i:i + n]).decode("utf-8", "replace"), i + n


def _skip(b, i: int, kind: int, depth: int) -> int:
    """The offset after a value of compact type ``kind`` at ``i`` (a bool field's value is in
    its header: see :func:`_element` for a bool in a collection)."""
    if kind in (4, 5, 6):  # the most frequent first
        return _varint(b, i)[1]
    if depth > 16:
        raise _Thrift("it nests too deep")
    if kind in (1, 2):
        return i
    if kind == 3:
        return i + 1
    if kind == 7:
        return i + 8
    if kind == 8:
        return _text(b, i, kind)[1]
    if kind in (9, 10, 11):
        return _collection(b, i, kind, depth, None)[1]
    if kind == 12:
        return _fields(b, i, depth + 1, {})[1]
    raise _Thrift(f"it holds an unknown Thrift type {kind}")


def _element(b, i: int, kind: int, depth: int) -> int:
    """The offset after an element of a list or map: a bool there takes a byte of its own."""
    i = i + 1 if kind in (1, 2) else _skip(b, i, kind, depth + 1)
    if i > len(b):
        raise _Thrift("it runs past its end")
    return i


def _collection(b, i: int, kind: int, depth: int, each) -> tuple[list, int]:
    """A list or set (``each(b, i, elem kind, depth) -> (value, i)`` reads an element; None
    skips them), or a map (skipped)."""
    if kind == 11:
        n, i = _varint(b, i)
        if n:
            _room(b, i, 2 * n)
            kv, i = b[i], i + 1
            for _ in range(n):
                i = _element(b, _element(b, i, kv >> 4, depth), kv & 15, depth)
        return [], i
    if i >= len(b):
        raise _Thrift("it runs past its end")
    n, elem, i = b[i] >> 4, b[i] & 15, i + 1  # size and element type in one byte; size 15: a varint follows
    if n == 15:
        n, i = _varint(b, i)
    _room(b, i, n)
    out = []
    for _ in range(n):
        if each is None:
            i = _element(b, i, elem, depth)
        else:
            value, i = each(b, i, elem, depth + 1)
            out.append(value)
    return out, i


def _room(b, i: int, n: int) -> None:
    """Refuse a collection of ``n`` elements that cannot fit in the bytes left (each takes one
    at least), before looping over them."""
    if n > len(b) - i:
        raise _Thrift(f"it claims {n:,} elements in {len(b) - i:,} bytes")


def _fields(b, i: int, depth: int, read: dict) -> tuple[dict, int]:
    """The struct at ``i``: the fields in ``read`` (field id -> reader of its value, called as
    ``reader(b, i, kind, depth)``), the others skipped; and the offset after it."""
    if depth > 16:
        raise _Thrift("it nests too deep")
    got: dict = {}
    fid = 0
    while True:
        if i >= len(b):
            raise _Thrift("it runs past its end")
        head, i = b[i], i + 1
        if head == 0:
            return got, i
        kind, delta = head & 15, head >> 4
        if delta:
            fid += delta
        else:
            fid, i = _int(b, i, 4)
        if fid in read and kind not in (1, 2):
            got[fid], i = read[fid](b, i, kind, depth)
        else:
            i = _skip(b, i, kind, depth)


def _struct_of(read: dict):
    def reader(b, i: int, kind: int, depth: int) -> tuple[dict, int]:
        if kind != 12:
            raise _Thrift(f"a struct is of Thrift type {kind}")
        return _fields(b, i, depth + 1, read)
    return reader


def _list_of(each):
    def reader(b, i: int, kind: int, depth: int) -> tuple[list, int]:
        if kind not in (9, 10):
            raise _Thrift(f"a list is of Thrift type {kind}")
        return _collection(b, i, kind, depth, each)
    return reader


_PAGE_HEADER = {1: _int, 2: _int, 3: _int, 5: _struct_of({1: _int}), 7: _struct_of({1: _int}),
                8: _struct_of({1: _int})}
"""PageHeader: type, uncompressed and compressed size; the number of values of a data page
(v1, v2) or a dictionary page."""
_DICTIONARY_PAGE = 2  # PageType
_COLUMN_META = {1: _int, 2: _list_of(_int), 3: _list_of(_text), 5: _int, 6: _int, 7: _int, 9: _int, 11: _int}
"""ColumnMetaData: type, encodings, path, values, uncompressed and compressed size, data and
dictionary page offsets."""
_FILE_META = {1: _int, 2: _list_of(_struct_of({1: _int, 2: _int, 5: _int})), 3: _int,
              4: _list_of(_struct_of({1: _list_of(_struct_of({3: _struct_of(_COLUMN_META)})), 3: _int}))}
"""FileMetaData: version, the schema (type, fixed length, children), rows, row groups (their
chunks, rows); all four are required by the format."""


def _footer_chunks(footer: bytes) -> tuple[list[_Chunk], int]:
    """The column chunks a footer lists, and its row count, parsed here (the footer's bytes
    only, without the trailing length and magic).

    Raises:
        StoreError: the footer does not parse, or its chunks do not match its schema (damage).
    """
    try:
        meta, _ = _fields(memoryview(footer), 0, 0, _FILE_META)
    except _Thrift as exc:
        raise StoreError(f"its footer does not parse: {exc}") from None
    lacking = [name for fid, name in ((1, "version"), (2, "schema"), (3, "num_rows"), (4, "row_groups"))
               if fid not in meta]
    if lacking or not meta[2] or any(1 not in g or 3 not in g for g in meta[4]):
        raise StoreError(f"its footer is no Parquet footer: it lacks {', '.join(lacking) or 'a required field'}")
    schema = meta[2]
    leaves = [e for e in schema[1:] if not e.get(5)]  # the root and groups have children
    chunks = []
    for g, group in enumerate(meta[4]):
        columns = group[1]
        if len(columns) != len(leaves):
            raise StoreError(f"its footer lists {len(columns)} column chunks in row group {g}, its schema "
                             f"{len(leaves)} columns")
        for j, (column, leaf) in enumerate(zip(columns, leaves)):
            cm = column.get(3)
            if cm is None or any(k not in cm for k in (5, 6, 7, 9)):
                raise StoreError(f"its footer lacks the sizes of column {j} of row group {g}")
            offsets = [o for o in (cm.get(11), cm[9]) if o is not None and o > 0]
            chunks.append(_Chunk(g, j, ".".join(cm.get(3) or []) or str(j), cm.get(1, leaf.get(1)), leaf.get(2) or 0,
                                 min(offsets) if offsets else cm[9], cm[7], cm[6], cm[5],
                                 frozenset(cm.get(2) or ())))
    return chunks, meta[3]


def _check_pages(data: bytes, chunks: list[_Chunk]) -> None:
    """Parse every page header of every column chunk: the pages must tile the chunk, their
    uncompressed sizes (with headers) add up to no more than the footer's
    ``total_uncompressed_size``, and their values to the footer's ``num_values``, so the
    footer's sizes (:func:`check_sizes`) bound what decoding allocates.

    Raises:
        StoreError: a page header that does not parse, or pages that contradict the footer.
    """
    for c in chunks:
        pos, end = c.start, c.start + c.compressed
        chunk = memoryview(data)[:end]  # a header may not run past its chunk
        uncompressed = values = 0
        while pos < end:
            try:
                header, after = _fields(chunk, pos, 0, _PAGE_HEADER)
            except _Thrift as exc:
                raise StoreError(f"a page header of {c.where} at byte {pos:,} does not parse: {exc}") from None
            size, packed = header.get(2), header.get(3)
            if size is None or packed is None or size < 0 or packed < 0 or after + packed > end:
                raise StoreError(f"the page at byte {pos:,} of {c.where} does not fit its column chunk")
            uncompressed += after - pos + size
            if header.get(1) != _DICTIONARY_PAGE:
                values += (header.get(5) or {}).get(1) or (header.get(8) or {}).get(1) or 0
            pos = after + packed
        if uncompressed > c.uncompressed:
            raise StoreError(f"the pages of {c.where} decompress to {uncompressed:,} bytes, its footer says "
                             f"{c.uncompressed:,}")
        if values != c.values:
            raise StoreError(f"the pages of {c.where} hold {values:,} values, its footer says {c.values:,}")
