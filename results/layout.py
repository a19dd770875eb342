"""Where a store's files lie and what they are named: the folder layout of runs and trials,
the names a sweep or run may have, and the files and columns that make a run's record.

Layout under the store root::

    trials/sweep=<name>/run_id=<id>/part-<seq>-<uid>.parquet   one row per trial
    curves/sweep=<name>/run_id=<id>/part-<seq>-<uid>.parquet   learning-curve points
    runs/sweep=<name>/run_id=<id>/run.parquet                   one row per run

The partition columns (``sweep``, ``run_id``) live in the paths only, as hive
partitioning expects, so the files read as they are with ``polars.scan_parquet``,
``pyarrow.dataset`` (``partitioning="hive"``) and DuckDB (``read_parquet(...,
hive_partitioning = true)``). Damaged files are moved under :data:`QUARANTINE` at the
store root.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")  # \Z: "$" would also take a name ending in a newline
TRIAL_COLUMNS = ("trial_id",)
"""Columns that tell a run's trial rows apart (every attnsweep version writes them): a file of
a run whose other files have them, and it not, is no file of its trials (set aside)."""
QUARANTINE = "quarantine"
# Parquet key-value metadata of a compacted file: JSON list of the file names it replaces.
REPLACES_KEY = b"attnsweep.replaces"
CURVES_KEY = b"attnsweep.curves"
"""Parquet key-value metadata of a trial part file: JSON list of the names of the ``curves``
part files its rows commit (results/curves_table.py). A curve point is read only from a
committed file, so points written before their rows (a kill between the two renames) are never
seen; a trial file without this key was written before curves were committed this way."""
RUN_FILE = "run.parquet"
"""The one name of a run's record in its ``runs`` folder: another file there is not read."""
RUN_COLUMNS = ("status", "started_at", "n_trials", "spec_hash", "spec_yaml")
"""Columns without which a ``runs`` file is not the record of a run (:meth:`results.store.ResultsStore.read_run`)."""
PARTITION_SCHEMA = pa.schema([("sweep", pa.string()), ("run_id", pa.string())])


def partition_ok(folder: Path) -> bool:
    """Whether ``folder`` is ``sweep=<name>/run_id=<id>`` with names a run of ours can have
    (no ``%``: pyarrow would decode ``%32`` as ``2`` and merge the folder into another run)."""
    sweep, run = folder.parent.name, folder.name
    return (
        sweep.startswith("sweep=")
        and run.startswith("run_id=")
        and bool(NAME_RE.match(sweep.removeprefix("sweep=")))
        and bool(NAME_RE.match(run.removeprefix("run_id=")))
    )
