"""The store's ``trials``, ``runs`` and ``curves`` (where a run kept learning curves) as the
Arrow datasets a query reads, listed again when
a file of the store vanishes under the query (a compaction replaces a run's files by one).
"""

from __future__ import annotations

import pyarrow as pa

from attnsweep.results.errors import QueryError, StoreError
from attnsweep.results.roots import listing
from attnsweep.results.store import ResultsStore

TABLES = ("trials", "runs", "curves")
"""The tables a query can read, each a top folder of the store (``curves`` only where some
run kept learning curves: results/curves_table.py)."""

ATTEMPTS = 3
"""How many times a query starts when files of the store vanish under it (a compaction
replaces a run's files by one): the store is listed again and the query run again, as long as
no batch has been given out yet."""


def datasets(store: ResultsStore) -> dict[str, object]:
    """The store's ``trials``, ``runs`` and ``curves`` as Arrow datasets (those it holds), listed again
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
        return sorted(str(p) for table in TABLES for p in listing(store.root / table, "sweep=*/run_id=*/*.parquet"))
    except OSError:
        return []


def _listed(store: ResultsStore) -> dict[str, object]:
    tables = {}
    for name in TABLES:
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


def vanished(tables: dict[str, object]) -> list[str]:
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


def table_schemas(store: ResultsStore) -> dict[str, pa.Schema]:
    """The Arrow schema of each table a query can read (:data:`TABLES`), as the query
    sees them (the store's unified schema plus ``sweep`` and ``run_id``); tables the store
    does not hold yet are left out.

    Raises:
        QueryError: a file vanished twice while the tables were listed, or cannot be read.
    """
    try:
        return {name: dataset.schema for name, dataset in datasets(store).items()}
    except QueryError:
        raise
    except StoreError:
        return {}
