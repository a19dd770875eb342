"""Tables derived from a run's rows, saved beside them so that a later read need not
recompute them (the bootstrapped m* table of a run, analysis/saved_m_star.py).

Layout under the store root::

    derived/sweep=<name>/run_id=<id>/<name>.parquet

Each file carries a key in its Parquet metadata: whoever saved it states what the table was
derived from (code version, settings, a digest of the rows), and a read with another key finds
nothing. A derived file is a cache: deleting it loses nothing, and a file that cannot be read
or written is treated as absent, never as an error of the run.
"""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.atomic_write import write_parquet_atomic
from attnsweep.results.errors import StoreError
from attnsweep.results.layout import NAME_RE
from attnsweep.results.store import ResultsStore

DERIVED = "derived"
"""The folder of derived tables at a store's root."""
KEY = b"attnsweep.derived_from"
"""Parquet metadata key holding what a derived table was computed from."""


def write_derived(store: ResultsStore, sweep: str, run_id: str, name: str, table: pa.Table, key: str) -> bool:
    """Save ``table`` as the derived table ``name`` of a run, atomically, with ``key``.

    Args:
        name: a file name stem (letters, digits, ``_.-``).
        key: what the table was derived from; :func:`read_derived` returns it only for this key.

    Returns:
        whether it was written (False where the store cannot be written: a read-only store
        keeps working, it only recomputes).

    Raises:
        StoreError: a sweep, run id or name that is not a safe path component.
    """
    folder = store.run_dir(DERIVED, sweep, run_id)
    _check_name(name)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), KEY: key.encode()})
    try:
        write_parquet_atomic(table, folder / f"{name}.parquet")
    except OSError:
        return False
    return True


def read_derived(store: ResultsStore, sweep: str, run_id: str, name: str, key: str) -> pa.Table | None:
    """The derived table ``name`` of a run if it was saved with ``key``; None otherwise (never
    saved, saved from other rows, settings or code, or unreadable).

    Raises:
        StoreError: a sweep, run id or name that is not a safe path component.
    """
    _check_name(name)
    path = store.run_dir(DERIVED, sweep, run_id) / f"{name}.parquet"
    with contextlib.suppress(OSError, pa.ArrowException):
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            table = pq.read_table(fh)
        if (table.schema.metadata or {}).get(KEY) == key.encode():
            return table
    return None


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise StoreError(f"derived table name {name!r} must hold only letters, digits, '_', '.', '-'")
