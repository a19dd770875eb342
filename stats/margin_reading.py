"""The margin bound's reading of a series: does m* grow faster than log T because margins shrink?

Edelman et al. (ICML 2022, section 4, Theorem 4.2) bound the capacity of a bounded-norm head;
as a margin bound it asks for a sample size of order (C / gamma)^2 log T to reach a given test
error, where gamma is the training margin and C the bound's complexity term in the norms it
counts (workers/margins.py; gamma / C is a trial's ``margin_normalised``). At a fixed norm
bound, then, m* may grow faster than log T and still agree with the theorem, if the margins a
learner reaches shrink with T. Two numbers per series (docs/claims.md, "The bound's reading"):

* how the normalised margin of a success moves with T: the least-squares slope ``e`` of
  ln(median normalised margin of the cell's successes) on ln T, with its t interval
  (``margin_trend``): margins shrink like T^e when the interval lies below -0.05, the effect
  size of every log-log slope here (stats/verdict_common.py ``EFFECT_SLOPE``);
* how m* scaled by the bound's term grows: ``m* x margin^2`` per cell (the cell's median
  normalised margin of successes; its bootstrap replicates scaled alike, so the margin's own
  spread is not in the interval), judged exactly as L1 judges m* (stats/boolean_growth.py:
  the same span rule, AICc laws and direction), under each estimator of m* and read as agreed
  only where all agree (stats/boolean_wording.py ``agreed``).

:func:`reading` turns the two, with the series' own L1 direction, into one of ``"margins"``
(m* grows faster than log T, margins shrink, and the scaled m* does not grow faster than log),
``"something else"`` (the scaled m* grows faster than log T too) or ``"cannot tell"``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats as sps

from attnsweep.stats.boolean_cells import ATTENTION, MIN_POINTS, estimator_view, normalized
from attnsweep.stats.boolean_growth import l1_log_growth
from attnsweep.stats.boolean_wording import agreed
from attnsweep.stats.critical import ESTIMATORS
from attnsweep.stats.verdict_common import EFFECT_SLOPE

MARGIN = "margin_success"
"""The m* table's column of a cell's median normalised margin of successes (stats/norm_use.py)."""


def margin_trend(T: np.ndarray, margin: np.ndarray, ci: float = 0.95) -> dict | None:
    """Least squares of ln margin on ln T: ``e`` (the exponent of margin ~ T^e) with its
    t interval ``e_lo``, ``e_hi`` at coverage ``ci``, and ``n_points``; None with fewer than
    :data:`stats.boolean_cells.MIN_POINTS` cells with a positive margin.

    Args:
        T: ``(n,)`` context lengths; margin: ``(n,)`` median normalised margins (non-positive
            or NaN: left out).
    """
    keep = np.isfinite(margin) & (margin > 0) & np.isfinite(T)
    x, y = np.log(T[keep]), np.log(margin[keep])
    if len(np.unique(x)) < MIN_POINTS:
        return None
    fit = sps.linregress(x, y)
    half = sps.t.ppf(0.5 + ci / 2, len(x) - 2) * fit.stderr
    return dict(e=float(fit.slope), e_lo=float(fit.slope - half), e_hi=float(fit.slope + half), n_points=int(len(x)))


def scaled(m_star: pl.DataFrame) -> pl.DataFrame:
    """The m* table with each exact cell's ``m_star``, estimator columns and replicates times its
    ``margin_success`` squared. An exact cell without a positive margin of success (rows trained
    before margins existed, or no success) has no scaled m*: its ``bound`` becomes ``"none"``, so
    L1 leaves it out while the table keeps every cell (and so the same series as the unscaled
    table). Bounds are kept as they are."""
    if MARGIN not in m_star.columns:
        return m_star.with_columns(bound=pl.when(pl.col("bound") == "exact").then(pl.lit("none")).otherwise("bound"))
    exact = pl.col("bound") == "exact"
    usable = exact & pl.col(MARGIN).is_not_null() & (pl.col(MARGIN) > 0)
    factor = pl.col(MARGIN) ** 2
    values = [c for c in ("m_star", *ESTIMATORS.values()) if c in m_star.columns]
    values += [c for c in m_star.columns if c.startswith("replicates")]
    out = m_star.with_columns(
        [pl.when(usable).then(pl.col(c) * factor).otherwise(pl.col(c)).alias(c) for c in dict.fromkeys(values)]
    )
    return out.with_columns(bound=pl.when(exact & ~usable).then(pl.lit("none")).otherwise(pl.col("bound")))


def bound_reading(
    m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95, l1: dict | None = None
) -> list[dict]:
    """Per L1 series whose cells carry margins: the margin trend, the scaled m*'s L1 judgment
    under every estimator (agreed), the series' own L1 direction, and the reading.

    Args:
        m_star: an m* table (one row per cell) with :data:`MARGIN` from stats/norm_use.py, and
            ``bound``, ``T``, ``model`` as L1 reads them; a restart run's learners are series
            of their own.
        cell: its cell columns (default: as L1 finds them).
        ci: coverage of the intervals.
        l1: the L1 verdict already judged on ``m_star`` with ``cell`` (agreed over the
            estimators), whose series' directions are read; None: judged here.

    Returns:
        One dict per series with margins: ``cells`` (the series' settings), ``T`` (the cells
        with a margin of success), ``margin_trend`` (:func:`margin_trend`, or None),
        ``scaled`` (the agreed L1 verdict dict of the scaled m*'s series, its ``direction``,
        ``law`` and ``c`` in ``numbers``), ``direction`` (the unscaled series' agreed L1
        direction) and ``reading`` (:func:`reading`). [] when no series has margins.
    """
    m_star = normalized(m_star)
    if MARGIN not in m_star.columns or m_star.is_empty() or not m_star[MARGIN].is_not_null().any():
        return []
    plain = (
        l1 if l1 is not None else agreed({e: l1_log_growth(estimator_view(m_star, e), cell, ci) for e in ESTIMATORS})
    )
    judged = agreed({e: l1_log_growth(scaled(estimator_view(m_star, e)), cell, ci) for e in ESTIMATORS})
    out = []
    for s in judged.get("series", []):
        key = s["cells"]
        part = m_star
        for k, v in key.items():
            part = part.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
        # The margin reading is about the attention head's bound (the paper's transformer).
        part = part.filter(pl.col("model") == ATTENTION) if "model" in part.columns else part
        with_margin = part.filter(pl.col(MARGIN).is_not_null() & (pl.col(MARGIN) > 0)).sort("T")
        if with_margin.is_empty():
            continue
        trend = margin_trend(
            with_margin["T"].to_numpy().astype(float), with_margin[MARGIN].to_numpy().astype(float), ci
        )
        own = next((p for p in plain.get("series", []) if p["cells"] == key), None)
        direction = str(own["numbers"].get("direction", "undecided")) if own else "undecided"
        scaled_direction = str(s["numbers"].get("direction", "undecided"))
        entry = dict(
            cells=key,
            T=with_margin["T"].to_list(),
            margins=with_margin[MARGIN].to_list(),
            margin_trend=trend,
            scaled=s,
            direction=direction,
        )
        entry["reading"] = reading(direction, trend, scaled_direction)
        out.append(entry)
    return out


def reading(direction: str, trend: dict | None, scaled_direction: str) -> str:
    """Which reading a series' numbers support: ``"margins"`` where m* grows faster than log T,
    the margin of a success shrinks (its exponent's interval below -EFFECT_SLOPE, -0.05: at least
    11% less per tenfold T) and m* x margin^2 does not grow faster than log T (its direction ``log``); ``"something else"`` where m*
    and m* x margin^2 both grow faster than log T; else ``"cannot tell"`` (m* itself not faster
    than log, or directions undecided, or too few cells for a trend)."""
    if direction != "faster than log":
        return "cannot tell"
    if scaled_direction == "faster than log":
        return "something else"
    shrinks = trend is not None and trend["e_hi"] < -EFFECT_SLOPE
    if shrinks and scaled_direction == "log":
        return "margins"
    return "cannot tell"


def reading_sentence(entry: dict) -> str:
    """One sentence: which reading a series' rows support, with the numbers that decide it."""
    trend = entry["margin_trend"]
    sc = entry["scaled"]["numbers"]
    c = sc.get("c") or {}
    c_text = (
        f"c = {c['estimate']:.2f} ({c['ci_lo']:.2f} .. {c['ci_hi']:.2f})"
        if c.get("estimate") is not None and c.get("ci_lo") is not None and c.get("ci_hi") is not None
        else "no fit"
    )
    if trend is None:
        moves = f"too few cells with a success ({len(entry['T'])}) for a margin trend"
    else:
        sign = (
            "shrinks"
            if trend["e_hi"] < -EFFECT_SLOPE
            else "grows"
            if trend["e_lo"] > EFFECT_SLOPE
            else f"does not move by the effect size (|e| < {EFFECT_SLOPE:g})"
            if trend["e_lo"] > -EFFECT_SLOPE and trend["e_hi"] < EFFECT_SLOPE
            else "moves by an amount its interval does not decide"
        )
        moves = (
            f"the median normalised margin of a success {sign} with T (margin ~ T^e, e = {trend['e']:.3g}, "
            f"{trend['e_lo']:.3g} .. {trend['e_hi']:.3g}, {trend['n_points']} cells)"
        )
    scaled = f"m* x margin^2 (the bound's term taken out): direction {sc.get('direction', 'undecided')}, {c_text}"
    verdict = {
        "margins": "the rows support the margins reading: m* grows faster than log T at this fixed bound because "
        "the margins a success reaches shrink, as the margin bound allows",
        "something else": "the rows support neither log growth nor the margins reading: with the bound's margin "
        "term taken out, m* still grows faster than log T, so something other than a shrinking margin makes it grow",
        "cannot tell": "the rows cannot tell whether margins are why m* grows as it does",
    }[entry["reading"]]
    return f"{verdict} (m* direction: {entry['direction']}; {moves}; {scaled})."
