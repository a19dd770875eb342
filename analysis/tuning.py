"""Tuned against default: the optimiser's counterpart of the budget check.

An adaptive search with ``search.tune`` (orchestrator/adaptive.py) searches every cell with
the spec's own settings first, tunes the learning rate and weight decay at a probe m just
below that m*, and searches the cell again only when the best tuned set robustly beats the
spec's settings there. This module reads both back from the store:

* :func:`tuning_choices`: per cell, the probe m, the parameter sets tried, the best one and
  how robust its choice was (recomputed from the rows with the search's own rule,
  :func:`orchestrator.adaptive.robust_choice`);
* :func:`choose_m_star`: per cell, m* with the spec's settings (``m_star_default``) and with
  the adopted ones (``m_star_tuned``), and the one the verdicts use (``settings``). Tuning
  *made m* worse* when the tuned m* lies above the default's interval (or is censored above
  the range where the default is not); such a cell keeps the default's m*, as a cell where
  tuning was not adopted does, and its ``tuning`` column says so;
* :func:`with_range_binds` (and its check line, :func:`range_check`): per cell whose m* uses
  the adopted settings, those of them that sit at an edge of the range the search drew them
  from (``range_binds``): where the search's best lies at its cap, a better set may lie beyond
  it, so the tuned m* is what tuning within that range reached, not what tuning could reach.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from attnsweep.orchestrator.adaptive import robust_choice

TUNING_STATES = ("not tuned", "spec kept", "tuned", "worse: spec used")
"""Values of the ``tuning`` column of an m* table."""
EDGE_FRACTION = 0.1
"""An adopted value within this fraction of its search range's width (on the scale the search
samples: log for a log-sampled range) from an edge sits at that edge (:func:`with_range_binds`)."""


def tuning_choices(rows: pl.DataFrame, cell: list[str], tuned: list[str], confidence: float) -> pl.DataFrame:
    """The tuning phase of each cell, as the search decided it.

    Args:
        rows: every row of the run (at least ``cell``, ``m``, ``seed``, ``status``,
            ``test_acc``, ``search_phase``).
        cell: the columns of a cell; tuned: those of them the search tuned.
        confidence: ``search.tune.confidence``.

    Returns:
        One row per tuned cell: the cell columns (the spec's own values of ``tuned``),
        ``probe_m``, ``sets`` (parameter sets tried), ``best_<param>`` for each tuned
        setting, ``win_frac``, ``beats_default`` and ``adopted``. Empty when nothing was tuned.
    """
    phase = pl.col("search_phase")
    tune = rows.filter(phase == "tune")
    base = [c for c in cell if c not in tuned]
    if tune.is_empty() or not tuned:
        return pl.DataFrame()
    spec_values = rows.filter(phase == "search").select([*base, *tuned]).unique()
    score = (
        pl.when(pl.col("status") == "done").then(pl.col("test_acc").fill_nan(0.5).fill_null(0.5)).otherwise(0.5)
    ).alias("score")
    out = []
    for key, part in tune.group_by(base, maintain_order=True):
        probe = int(min(part["m"].to_list()))  # a group has rows, and m is never null
        seeds = sorted(set(part["seed"]))
        match = (
            pl.all_horizontal([pl.col(c).eq_missing(v) for c, v in zip(base, key, strict=True)])
            if base
            else pl.lit(True)
        )
        own = spec_values.filter(match)
        if own.height != 1:
            continue
        own_values = own.row(0, named=True)
        at_probe = rows.filter(match & (pl.col("m") == probe) & pl.col("seed").is_in(seeds)).with_columns(score)
        is_default = pl.all_horizontal([pl.col(t).eq_missing(own_values[t]) for t in tuned])
        default = at_probe.filter(is_default).unique("seed").sort("seed")
        sets = (
            part.filter(~is_default)
            .with_columns(score)
            .group_by(tuned, maintain_order=True)
            .agg(pl.col("seed"), pl.col("score"))
        )
        table = [
            [dict(zip(s, v, strict=True))[seed] if seed in s else 0.5 for seed in seeds]
            for s, v in zip(sets["seed"], sets["score"], strict=True)
        ]
        if not table or default.height != len(seeds):
            continue
        choice = robust_choice(np.array(table), default["score"].to_numpy(), confidence)
        best = sets.row(choice.best, named=True)
        out.append(
            {
                **dict(zip(base, key, strict=True)),
                **{t: own_values[t] for t in tuned},
                "probe_m": probe,
                "sets": sets.height,
                **{f"best_{t}": best[t] for t in tuned},
                "win_frac": choice.win_frac,
                "beats_default": choice.beats_default,
                "adopted": choice.adopted,
            }
        )
    return pl.DataFrame(out) if out else pl.DataFrame()


def choose_m_star(
    default: pl.DataFrame,
    tuned_table: pl.DataFrame | None,
    cell: list[str],
    tuned: list[str],
    tuning_ran: bool,
) -> pl.DataFrame:
    """The m* table the verdicts use, one row per cell (module docstring).

    Args:
        default: m* per cell with the spec's settings (stats/critical.py's table).
        tuned_table: m* per cell with the adopted settings (None or empty: none adopted).
        cell: the cell columns; tuned: those the search tuned.
        tuning_ran: the run's spec tunes (else every row is ``not tuned``).

    Returns:
        ``default``'s rows, replaced by the tuned row where tuning was adopted and did not
        make m* worse, with columns ``settings`` (``default`` or ``tuned``),
        ``m_star_default``, ``m_star_tuned`` (null where not adopted), their ``censored``
        marks ``censored_default`` and ``censored_tuned`` and bounds ``bound_default`` and
        ``bound_tuned`` (stats/critical.py), and ``tuning`` (one of
        :data:`TUNING_STATES`).
    """
    base = [c for c in cell if c not in tuned]
    state = pl.lit("spec kept" if tuning_ran else "not tuned")
    out = default.with_columns(
        settings=pl.lit("default"),
        m_star_default=pl.col("m_star"),
        m_star_tuned=pl.lit(None, pl.Float64),
        censored_default=pl.col("censored"),
        censored_tuned=pl.lit(None, pl.String),
        bound_default=pl.col("bound"),
        bound_tuned=pl.lit(None, pl.String),
        tuning=state,
    )
    if tuned_table is None or tuned_table.is_empty():
        return out
    ref = default.select(
        *base,
        d_m=pl.col("m_star"),
        d_hi=pl.col("ci_hi"),
        d_cens=pl.col("censored"),
        d_bound=pl.col("bound"),
    )
    t = tuned_table.join(ref, on=base, how="left", nulls_equal=True)
    # A bound is not a value (stats/critical.py): compare values only where both are exact.
    measured = (pl.col("bound") == "exact") & (pl.col("d_bound") == "exact")
    worse = (measured & (pl.col("m_star") > pl.col("d_hi"))).fill_null(False) | (
        (pl.col("censored") == "above") & (pl.col("d_cens") != "above")
    )
    t = t.with_columns(
        worse=worse,
        m_star_default=pl.col("d_m"),
        m_star_tuned=pl.col("m_star"),
        censored_default=pl.col("d_cens"),
        censored_tuned=pl.col("censored"),
        bound_default=pl.col("d_bound"),
        bound_tuned=pl.col("bound"),
    )
    used = (
        t.filter(~pl.col("worse"))
        .drop("d_m", "d_hi", "d_cens", "d_bound", "worse")
        .with_columns(settings=pl.lit("tuned"), tuning=pl.lit("tuned"))
    )
    worse_keys = t.filter(pl.col("worse")).select(
        *base,
        m_star_tuned_=pl.col("m_star_tuned"),
        censored_tuned_=pl.col("censored_tuned"),
        bound_tuned_=pl.col("bound_tuned"),
        worse_=pl.lit(True),
    )
    kept = (
        out.join(used.select(base), on=base, how="anti", nulls_equal=True)
        .join(worse_keys, on=base, how="left", nulls_equal=True)
        .with_columns(
            m_star_tuned=pl.coalesce("m_star_tuned_", "m_star_tuned"),
            censored_tuned=pl.coalesce("censored_tuned_", "censored_tuned"),
            bound_tuned=pl.coalesce("bound_tuned_", "bound_tuned"),
            tuning=pl.when(pl.col("worse_").fill_null(False))
            .then(pl.lit("worse: spec used"))
            .otherwise(pl.col("tuning")),
        )
        .drop("m_star_tuned_", "censored_tuned_", "bound_tuned_", "worse_")
    )
    return pl.concat([kept, used.select(kept.columns)], how="vertical_relaxed")


def range_edge(value: float | None, low: float, high: float, log: bool = True) -> str | None:
    """``"lower"`` or ``"upper"`` when ``value`` lies within :data:`EDGE_FRACTION` of that edge
    of the search range ``low`` .. ``high`` (its position measured on the log scale where the
    search samples ``log``-uniformly, as Optuna's ``FloatDistribution(log=True)`` of
    orchestrator/adaptive.py does), else None (a missing value, or one well inside)."""
    if value is None or not math.isfinite(value) or high <= low or (log and (value <= 0 or low <= 0)):
        return None
    scale = math.log if log else float
    where = (scale(value) - scale(low)) / (scale(high) - scale(low))
    if where <= EDGE_FRACTION:
        return "lower"
    if where >= 1 - EDGE_FRACTION:
        return "upper"
    return None


def with_range_binds(table: pl.DataFrame, ranges: dict[str, tuple[float, float]], log: bool = True) -> pl.DataFrame:
    """Add ``range_binds`` (String) to an m* table of :func:`choose_m_star`: for each cell whose
    m* uses the adopted settings (``settings == "tuned"``), the tuned settings whose value sits
    at an edge of its search range (:func:`range_edge`), e.g. ``"lr (at the upper edge 0.01)"``
    (several joined by ``"; "``); ``""`` for every other cell, and where nothing binds.

    Args:
        ranges: per tuned setting, its search range ``(min, max)`` (``search.tune``'s
            ranges; every one of them is sampled on a log scale, ``log``).
    """
    uses = table["settings"] == "tuned" if "settings" in table.columns else pl.Series([False] * table.height)
    binds = []
    for row, tuned in zip(table.iter_rows(named=True), uses.fill_null(False), strict=True):
        named = []
        for name, (low, high) in ranges.items() if tuned else ():
            edge = range_edge(row.get(name), low, high, log)
            if edge is not None:
                named.append(f"{name} (at the {edge} edge {high if edge == 'upper' else low:g})")
        binds.append("; ".join(named))
    return table.with_columns(pl.Series("range_binds", binds, dtype=pl.String))


def range_check(table: pl.DataFrame) -> dict | None:
    """The check line of the tuned settings' search range among ``analyze``'s checks
    (analysis/boolean.py), from ``range_binds`` (:func:`with_range_binds`): yes when no cell
    whose m* uses adopted settings has one at an edge of its range; None where no cell uses them."""
    if "range_binds" not in table.columns or "settings" not in table.columns:
        return None
    uses = table.filter(pl.col("settings") == "tuned")
    if uses.is_empty():
        return None
    bound = uses.filter(pl.col("range_binds").fill_null("") != "")
    where = "; ".join(
        f"{r.get('series', 'all')}, T={r.get('T')}: {r['range_binds']}" for r in bound.iter_rows(named=True)
    )
    edge = f"within {EDGE_FRACTION:.0%} of an edge of its search range (on the scale the search samples)"
    return dict(
        check="the tuned settings' search range does not bind",
        verdict="yes" if bound.is_empty() else "no",
        detail=(
            f"no adopted value of the {uses.height} cells with tuned settings lies {edge}"
            if bound.is_empty()
            else f"in {bound.height} of {uses.height} cells with tuned settings an adopted value lies {edge}, and a "
            f"better one may lie beyond it (widen the range): {where}"
        ),
    )
