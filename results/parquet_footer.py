"""The footer and page headers of a Parquet file, read from its bytes: the column chunks a
footer lists (where their pages lie, what they hold) and a check that the page headers agree.

A footer (FileMetaData) and a page header (PageHeader) are Thrift structs in the compact
protocol (parquet.thrift), parsed here by a small reader of our own, not through pyarrow's
Python metadata objects, which abort the whole process on some damaged column chunk metadata
instead of raising; pyarrow's objects are read (:func:`chunks_of`) only once pyarrow's reader
has accepted the file.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from attnsweep.results.errors import StoreError

# Parquet's enums (parquet.thrift) as the footer stores them, and pyarrow's names for them.
BYTE_ARRAY = 6  # Type
ENCODINGS = {
    "PLAIN": 0,
    "PLAIN_DICTIONARY": 2,
    "RLE": 3,
    "BIT_PACKED": 4,
    "DELTA_BINARY_PACKED": 5,
    "DELTA_LENGTH_BYTE_ARRAY": 6,
    "DELTA_BYTE_ARRAY": 7,
    "RLE_DICTIONARY": 8,
    "BYTE_STREAM_SPLIT": 9,
}
TYPES = {
    "BOOLEAN": 0,
    "INT32": 1,
    "INT64": 2,
    "INT96": 3,
    "FLOAT": 4,
    "DOUBLE": 5,
    "BYTE_ARRAY": 6,
    "FIXED_LEN_BYTE_ARRAY": 7,
}
DICTIONARY_ENCODINGS = frozenset({2, 8})
PREFIX_ENCODING = 7  # DELTA_BYTE_ARRAY: a value is a prefix of the one before it and a suffix
NO_DICTIONARY_FORM = frozenset({6, 7})
"""String encodings (DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY) pyarrow cannot decode into a
dictionary (``Not yet implemented``): a column using one is decoded as plain strings by
:func:`results.parquet_check.read_checked`."""


@dataclass(frozen=True)
class Chunk:
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


def chunks_of(meta: pq.FileMetaData) -> list[Chunk]:
    """The column chunks of a footer pyarrow has already read pages under (:func:`results.parquet_check.read_checked`
    passed on it): pyarrow aborts the process on some damaged chunk metadata when Python asks
    for it (``ColumnChunkMetaData``), so an unchecked footer is parsed by :func:`footer_chunks`."""
    widths = [meta.schema.column(j).length or 0 for j in range(meta.num_columns)]
    out = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            cc = rg.column(j)
            start = [
                o
                for o in (
                    cc.dictionary_page_offset if cc.has_dictionary_page else None,
                    cc.data_page_offset,
                )
                if o is not None and o > 0
            ]
            out.append(
                Chunk(
                    i,
                    j,
                    cc.path_in_schema,
                    TYPES.get(cc.physical_type),
                    widths[j],
                    min(start) if start else cc.data_page_offset,
                    cc.total_compressed_size,
                    cc.total_uncompressed_size,
                    cc.num_values,
                    frozenset(ENCODINGS.get(e, -1) for e in cc.encodings),
                )
            )
    return out


def plain_strings(chunks: list[Chunk]) -> set[int]:
    """The string columns :func:`results.parquet_check.read_checked` decodes as plain strings (not as dictionaries)."""
    return {c.column for c in chunks if c.physical == BYTE_ARRAY and NO_DICTIONARY_FORM & c.encodings}


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
    return bytes(b[i : i + n]).decode("utf-8", "replace"), i + n


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
    n, elem, i = (
        b[i] >> 4,
        b[i] & 15,
        i + 1,
    )  # size and element type in one byte; size 15: a varint follows
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


_PAGE_HEADER = {
    1: _int,
    2: _int,
    3: _int,
    5: _struct_of({1: _int}),
    7: _struct_of({1: _int}),
    8: _struct_of({1: _int}),
}
"""PageHeader: type, uncompressed and compressed size; the number of values of a data page
(v1, v2) or a dictionary page."""
_DICTIONARY_PAGE = 2  # PageType
_COLUMN_META = {
    1: _int,
    2: _list_of(_int),
    3: _list_of(_text),
    5: _int,
    6: _int,
    7: _int,
    9: _int,
    11: _int,
}
"""ColumnMetaData: type, encodings, path, values, uncompressed and compressed size, data and
dictionary page offsets."""
_FILE_META = {
    1: _int,
    2: _list_of(_struct_of({1: _int, 2: _int, 5: _int})),
    3: _int,
    4: _list_of(_struct_of({1: _list_of(_struct_of({3: _struct_of(_COLUMN_META)})), 3: _int})),
}
"""FileMetaData: version, the schema (type, fixed length, children), rows, row groups (their
chunks, rows); all four are required by the format."""


def footer_chunks(footer: bytes) -> tuple[list[Chunk], int]:
    """The column chunks a footer lists, and its row count, parsed here (the footer's bytes
    only, without the trailing length and magic).

    Raises:
        StoreError: the footer does not parse, or its chunks do not match its schema (damage).
    """
    try:
        meta, _ = _fields(memoryview(footer), 0, 0, _FILE_META)
    except _Thrift as exc:
        raise StoreError(f"its footer does not parse: {exc}") from None
    lacking = [
        name for fid, name in ((1, "version"), (2, "schema"), (3, "num_rows"), (4, "row_groups")) if fid not in meta
    ]
    if lacking or not meta[2] or any(1 not in g or 3 not in g for g in meta[4]):
        raise StoreError(f"its footer is no Parquet footer: it lacks {', '.join(lacking) or 'a required field'}")
    schema = meta[2]
    leaves = [e for e in schema[1:] if not e.get(5)]  # the root and groups have children
    chunks = []
    for g, group in enumerate(meta[4]):
        columns = group[1]
        if len(columns) != len(leaves):
            raise StoreError(
                f"its footer lists {len(columns)} column chunks in row group {g}, its schema {len(leaves)} columns"
            )
        for j, (column, leaf) in enumerate(zip(columns, leaves, strict=True)):
            cm = column.get(3)
            if cm is None or any(k not in cm for k in (5, 6, 7, 9)):
                raise StoreError(f"its footer lacks the sizes of column {j} of row group {g}")
            offsets = [o for o in (cm.get(11), cm[9]) if o is not None and o > 0]
            chunks.append(
                Chunk(
                    g,
                    j,
                    ".".join(cm.get(3) or []) or str(j),
                    cm.get(1, leaf.get(1)),
                    leaf.get(2) or 0,
                    min(offsets) if offsets else cm[9],
                    cm[7],
                    cm[6],
                    cm[5],
                    frozenset(cm.get(2) or ()),
                )
            )
    return chunks, meta[3]


def check_pages(data: bytes, chunks: list[Chunk]) -> None:
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
            raise StoreError(
                f"the pages of {c.where} decompress to {uncompressed:,} bytes, its footer says {c.uncompressed:,}"
            )
        if values != c.values:
            raise StoreError(f"the pages of {c.where} hold {values:,} values, its footer says {c.values:,}")
