"""An m* table as the CSV and JSON exports write it (``analyze --format csv|json``, the report's
m_star.csv): one rule for a bound in every format (docs/claims.md 2, "Where it is written")."""

from __future__ import annotations

import polars as pl

from attnsweep.stats.critical import ESTIMATORS

REPLICATE_COLUMNS = ("replicates", "replicates_grid", "replicates_interp")
"""List columns of bootstrap m* (stats/critical.py, stats/boolean_cells.py): kept in memory and
in the store, never in an exported table."""


INTERNAL_COLUMNS = ("ci_lo_exact", "ci_hi_exact")
"""Columns from which stats/critical.py derives ``ci_lo``/``ci_hi``: the interval as if m* were
exact, which for a bound is not what the rows allow; never exported."""
PAIRS = ("_default", "_tuned", "_2x")
"""Suffixes of the other m* a table may carry beside its own bound column (``m_star_2x`` and
``bound_2x``: the budget check's; ``_default``/``_tuned``: an adaptive search's)."""


def _split_pairs(table: pl.DataFrame) -> pl.DataFrame:
    """Each ``m_star<suffix>`` of :data:`PAIRS` a value only where ``bound<suffix>`` is exact;
    its bound's value in ``m_star_bound<suffix>``."""
    for suffix in PAIRS:
        value, bound = f"m_star{suffix}", f"bound{suffix}"
        if value not in table.columns or bound not in table.columns:
            continue
        v = pl.col(value).cast(pl.Float64)
        v = pl.when(v.is_nan()).then(None).otherwise(v)
        exact = pl.col(bound) == "exact"
        table = table.with_columns(
            pl.when(exact).then(v).otherwise(None).alias(value),
            pl.when(exact | pl.col(bound).is_null()).then(None).otherwise(v).alias(f"m_star_bound{suffix}"),
        )
    return table


def export_m_star(table: pl.DataFrame) -> pl.DataFrame:
    """An m* table as the CSV and JSON exports write it (``analyze --format csv|json``, the
    report's m_star.csv): ``m_star`` holds a value only where it is one (``bound`` exact) and
    is empty elsewhere; ``m_star_bound`` holds the bound's value (``> 512``: 512) where
    ``bound`` is not exact, empty for an exact cell, so no script reads a bound as a value;
    each estimator's column (``m_star_logistic``, ``m_star_grid``, ``m_star_interp``) is
    empty there too.
    The same holds for each other m* of :data:`PAIRS` (``m_star_bound_2x`` ...). The replicate
    list columns (:data:`REPLICATE_COLUMNS`) and :data:`INTERNAL_COLUMNS` are left out. In memory
    (``Analysis.m_star``) ``m_star`` holds the bound's value beside ``bound``, as
    :func:`stats.critical.format_m_star` reads it."""
    table = table.drop(*REPLICATE_COLUMNS, *INTERNAL_COLUMNS, strict=False)
    table = _split_pairs(table)
    if "m_star" not in table.columns or "bound" not in table.columns:
        return table
    exact = pl.col("bound") == "exact"
    value = pl.col("m_star").cast(pl.Float64)
    value = pl.when(value.is_nan()).then(None).otherwise(value)  # "unknown" (bound none): no value
    missing = pl.lit(None, pl.Float64)
    # Each estimator's reading is a value only where m* is one (stats/critical.py ESTIMATORS).
    readings = [c for c in ESTIMATORS.values() if c in table.columns]
    bounded = table.with_columns(
        m_star=pl.when(exact).then(pl.col("m_star").cast(pl.Float64)).otherwise(missing),
        m_star_bound=pl.when(exact | pl.col("bound").is_null()).then(missing).otherwise(value),
        **{c: pl.when(exact).then(pl.col(c).cast(pl.Float64)).otherwise(missing) for c in readings},
    )
    at = bounded.columns.index("m_star") + 1
    order = [*bounded.columns[:at], "m_star_bound", *[c for c in bounded.columns[at:] if c != "m_star_bound"]]
    return bounded.select(order)
