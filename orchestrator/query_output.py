"""Writing a query's result batch by batch (``attnsweep query --format``), so memory stays
bounded by one batch whatever the result's size."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

TABLE_ROWS = 200
"""The most rows ``--format table`` shows."""


def _flat(batch: pa.RecordBatch) -> pl.DataFrame:
    """A batch for CSV, which has no nested types: a list becomes ``"[1, 2]"``."""
    df = pl.from_arrow(batch)
    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    return df.with_columns(
        (pl.lit("[") + pl.col(c).list.eval(pl.element().cast(pl.String)).list.join(", ") + pl.lit("]")).alias(c)
        for c in lists)


def write_batches(schema: pa.Schema, batches: Iterator[pa.RecordBatch], fmt: str, out: BinaryIO) -> int:
    """Write ``batches`` to ``out`` as ``csv`` (header once), ``json`` (one array of row
    objects) or ``parquet``; returns the rows written.

    Raises:
        ValueError: an unknown format.
    """
    rows = 0
    if fmt == "parquet":
        with pq.ParquetWriter(out, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        return rows
    if fmt not in ("csv", "json"):
        raise ValueError(f"unknown format {fmt!r}: csv, json or parquet")
    first = True
    if fmt == "json":
        out.write(b"[")
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if fmt == "csv":
            text = _flat(batch).write_csv(include_header=first)
        else:
            text = pl.from_arrow(batch).write_json()[1:-1]
            if not first:
                text = "," + text
        out.write(text.encode())
        first = False
        rows += batch.num_rows
    if fmt == "csv" and first:  # no rows: the header alone
        out.write(_flat(pa.RecordBatch.from_pylist([], schema=schema)).write_csv(include_header=True).encode())
    if fmt == "json":
        out.write(b"]\n")
    return rows


def head(schema: pa.Schema, batches: Iterator[pa.RecordBatch], n: int = TABLE_ROWS) -> tuple[pl.DataFrame, bool]:
    """The first ``n`` rows of a result, and whether it has more (the rest is not read)."""
    taken, count = [], 0
    for batch in batches:
        taken.append(batch)
        count += batch.num_rows
        if count > n:
            break
    df = pl.from_arrow(pa.Table.from_batches(taken, schema=schema))
    return df.head(n), df.height > n
