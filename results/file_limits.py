"""The most a store file may hold, on disk and decoded, and the checks that hold a file to it
from its footer before any page is decompressed (:func:`check_sizes`).
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from attnsweep.results.errors import StoreError
from attnsweep.results.parquet_footer import (
    DICTIONARY_ENCODINGS,
    PREFIX_ENCODING,
    Chunk,
    chunks_of,
    plain_strings,
)

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


class TooLarge(Exception):
    """A file holds more than :func:`max_file_bytes` (on disk, or decoded): not evidence of
    damage (a store may hold a file made under a larger limit), so it is skipped where it is,
    never moved, and reads again under a limit that takes it."""


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
        raise StoreError(
            f"{FILE_MAX_ENV}={text.strip()[:40]!r}: give the most a store file may hold as a whole "
            f"number of MiB from 1 to {2**20:,} (default {FILE_MAX_MB})"
        )
    return mb * 2**20


VALUE_BYTES = 16
"""Bytes a decoded value may take beyond its page bytes: 8 for a number, 16 for a string
(polars keeps each as a 16-byte view; pyarrow as an offset and a validity bit)."""


def decoded_estimate(meta: pq.FileMetaData | list[Chunk]) -> int:
    """What a file decodes to at most, in bytes, from its footer alone (``meta``, of a file
    :func:`results.parquet_check.read_checked` passed, or its chunks): each column chunk's pages uncompressed
    (``total_uncompressed_size``, which :func:`results.parquet_check.read_checked` holds its page headers to) plus
    :data:`VALUE_BYTES` (or the fixed length, if longer) per value. Strings from a dictionary
    can expand beyond this; :func:`results.parquet_check.read_checked` keeps them as dictionaries and measures them
    before any reader expands them, except in a column it cannot (a :data:`results.parquet_footer.NO_DICTIONARY_FORM`
    encoding), where a chunk with dictionary or prefix-encoded strings is counted at its values
    times its bytes: no value is longer than the bytes its chunk holds."""
    chunks = chunks_of(meta) if isinstance(meta, pq.FileMetaData) else meta
    plain = plain_strings(chunks)
    total = 0
    for c in chunks:
        pages, values = max(c.uncompressed, 0), max(c.values, 0)
        total += pages + values * max(VALUE_BYTES, c.width)
        if c.column in plain and c.encodings & (DICTIONARY_ENCODINGS | {PREFIX_ENCODING}):
            total += values * pages
    return total


def check_sizes(chunks: list[Chunk], rows: int, size: int, footer: int, limit: int, decoded: bool = True) -> None:
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
            raise StoreError(
                f"its footer puts {c.where} at bytes {c.start:,} to {c.start + c.compressed:,}, "
                f"outside its data (bytes 4 to {data_end:,})"
            )
    limit_mb = f"{limit // 2**20:,} MiB"
    if size > limit:
        raise TooLarge(f"it is {size:,} bytes on disk, more than the {limit_mb} a store file may hold")
    estimate = decoded_estimate(chunks) if decoded else 0
    if estimate > limit:
        pages = sum(max(c.uncompressed, 0) for c in chunks)
        raise TooLarge(
            f"its footer says it decodes to about {estimate:,} bytes (pages of {pages:,} bytes "
            f"uncompressed, {rows_text(rows)}), more than the {limit_mb} a store file may hold"
        )


def rows_text(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"
