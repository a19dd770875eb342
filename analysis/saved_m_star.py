"""A run's m* table, saved with the run when ``run`` analyses it and reused by ``analyze`` and
``report``, so the bootstrap (stats/critical.py, ``n_boot`` replicates per cell) runs once.

The saved table is keyed by what it was computed from (results/derived.py): the source of
stats/critical.py and the numpy and polars versions (the code that computes it), the m*
settings, the cell columns, and a digest of the rows themselves. Another code version, other
settings or other rows (a resume that added trials) find no table and compute it again, so a
reused table is the one a fresh computation would give, bit for bit (tests/analysis).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from attnsweep.orchestrator.spec import AnalysisSettings
from attnsweep.results import ResultsStore
from attnsweep.results.derived import read_derived, write_derived

MStar = tuple[pl.DataFrame, dict[tuple, np.ndarray]]
"""``(table, replicates)`` as :func:`stats.critical.critical_sample_sizes` returns them."""
REPLICATES = "replicates"


def m_star_saved(
    store: ResultsStore,
    sweep: str,
    run_id: str,
    phase: str,
    data: pl.DataFrame,
    cols: list[str],
    settings: AnalysisSettings,
    compute: Callable[[pl.DataFrame, list[str]], MStar],
    save: bool,
    also: object = None,
) -> MStar:
    """``compute(data, cols)``, or the table saved for exactly these inputs.

    Args:
        phase: which rows these are (``search``, ``tuned``, ``budget``): one saved table each.
        data: the rows ``compute`` reads.
        settings: the m* settings ``compute`` applies (part of the key).
        compute: the m* computation, :func:`stats.critical.critical_sample_sizes` with ``settings``.
        save: save a table computed here (``run`` does; ``analyze`` and ``report`` only read).
        also: anything else ``compute`` depends on (its ``repr`` is part of the key).

    Returns:
        ``(table, replicates)``: the m* table and each cell's ``(n_boot,)`` bootstrap m*,
        keyed by the tuple of its ``cols`` values.
    """
    key = _key(phase, data, cols, settings, repr(also))
    name = f"m_star-{phase}"
    saved = read_derived(store, sweep, run_id, name, key)
    if saved is not None:
        return _decode(pl.DataFrame(saved), cols)
    table, replicates = compute(data, cols)
    if save:
        write_derived(store, sweep, run_id, name, _encode(table, replicates, cols).to_arrow(), key)
    return table, replicates


def _key(phase: str, data: pl.DataFrame, cols: list[str], settings: AnalysisSettings, also: str) -> str:
    from attnsweep.stats import critical

    rows = data.sort(data.columns, nulls_last=True).write_csv().encode()
    parts = {
        "code": hashlib.sha256(Path(critical.__file__).read_bytes()).hexdigest(),
        "numpy": np.__version__,
        "polars": importlib.metadata.version("polars"),
        "phase": phase,
        "cols": cols,
        "settings": settings.model_dump(mode="json", include={"acc_threshold", "success_frac", "n_boot", "ci"}),
        "rows": hashlib.sha256(rows).hexdigest(),
        "also": also,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _encode(table: pl.DataFrame, replicates: dict[tuple, np.ndarray], cols: list[str]) -> pl.DataFrame:
    keys = table.select(cols).rows()
    column = [None if (r := replicates.get(k)) is None else r.tolist() for k in keys]
    return table.with_columns(pl.Series(REPLICATES, column, dtype=pl.List(pl.Float64)))


def _decode(saved: pl.DataFrame, cols: list[str]) -> MStar:
    replicates = {
        key: np.asarray(r, dtype=np.float64)
        for key, r in zip(saved.select(cols).rows(), saved[REPLICATES].to_list(), strict=True)
        if r is not None
    }
    return saved.drop(REPLICATES), replicates
