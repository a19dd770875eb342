"""Verdict L1 of the sparse-Boolean experiment: m* grows like log T. The growth laws fitted to
each series of transformer cells along T, the rule that judges them (stats/boolean_verdicts.py
describes the verdict dict and its numbers), and how m* moves between two norm bounds.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from attnsweep.stats.boolean_cells import (
    MIN_POINTS,
    attention_cells,
    cell_columns,
    cell_values,
    groups_by,
    m_star_ratio,
    normalized,
    t_series,
)
from attnsweep.stats.boolean_wording import (
    combine_series,
    direction_text,
    law_reading,
    law_why,
    left_out_cells,
    verdict_dict,
)
from attnsweep.stats.fits import MIN_LAW_POINTS, compare_growth, robust_law
from attnsweep.stats.verdict_common import (
    EFFECT_RATIO,
    EFFECT_SLOPE,
    INCONCLUSIVE,
    NOT_SUPPORTED,
    NOT_TESTED,
    SUPPORTED,
    quantity,
)

MIN_DECADES = 3.0
"""L1 needs max T / min T >= 10^3 (docs/claims.md 1a: one decade cannot tell log from slow power-law growth)."""
SMALL_T_FROM = (16, 64)
"""L1 also reads each series' direction over T >= each of these alone: the smallest T, where
training sets near m* are often redrawn for ambiguity (docs/method.md, "The data"), must not
decide it by themselves."""
AIC_MARGIN = 2.0
"""A law 'beats' another when its AIC (and BIC) is lower by at least this much (Burnham &
Anderson, Model Selection and Multimodel Inference, 2002, section 2.6: within 2 units both
have substantial support)."""

L1_CLAIM = (
    "L1: m* grows like log T: a + b ln T beats a + b T, a T^c and a (ln T)^k with k > 1 by AIC and BIC, "
    f"T over >= {MIN_DECADES:g} decades"
)


def l1_log_growth(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L1: along T, the attention model's m* grows, and ``a + b ln T`` beats ``a + b T`` and
    ``a T^c`` by AIC and BIC (each by >= ``AIC_MARGIN``), over >= ``MIN_DECADES`` decades of T.

    Source: docs/claims.md 1a (L1); Edelman et al. 2022, Theorem 4.2 (sample complexity
    O(log T)). The laws and their AIC/BIC are those of :func:`stats.fits.compare_growth`
    (least squares on the m* scale). "Grows" means the interval of the power-law exponent c
    (the log-log slope of m* on T) lies above :data:`EFFECT_SLOPE`. A series is the
    transformer's cells that differ only in T; only exact m* enter the fit, the others are
    named (``left_out`` in its numbers).
    """
    m_star = normalized(m_star)
    cell = cell or cell_columns(m_star)
    series, side = t_series(groups_by(attention_cells(m_star), [c for c in cell if c != "T"]))
    # A lone series at fewer than MIN_POINTS values of T is no curve either: a grid that never
    # holds 3 values of T does not test L1, whatever its m* (issue 49: no row for it).
    side += [key for key, part in series if part["T"].n_unique() < MIN_POINTS]
    series = [(key, part) for key, part in series if key not in side]
    if not series:
        why = "no transformer cells" if not side else f"no series has {MIN_POINTS} or more values of T"
        return verdict_dict("L1", L1_CLAIM, NOT_TESTED, why, not_judged=side)
    out = combine_series("L1", L1_CLAIM, [(key, *_l1_series(part, ci)) for key, part in series], side)
    # How m* moves with the bound sits with the larger bound's series (its numbers' ``across_bound``).
    for pair in across_bound(series, ci):
        larger = dict(pair["cells"], norm_bound=pair["bounds"][1])
        for s in out["series"]:
            if s["cells"] == larger or (
                set(s["cells"]) == set(larger) and all(s["cells"][c] == larger[c] for c in larger)
            ):
                s["numbers"]["across_bound"] = pair
    return out


def across_bound(series: list[tuple[dict, pl.DataFrame]], ci: float = 0.95) -> list[dict]:
    """m* of each pair of L1 series that differ only in a (finite) norm bound: the larger
    bound's over the smaller's, per T, with :func:`m_star_ratio`. Where the bound binds, the
    norm a success uses is the bound; how m* moves with the bound says what the bound costs in
    samples. One dict per pair: ``cells`` (the shared settings), ``bounds`` ([small, large])
    and the fields of :func:`m_star_ratio`."""
    out = []
    bounded = [(key, part) for key, part in series if key.get("norm_bound") is not None]
    for i, (k1, p1) in enumerate(bounded):
        for k2, p2 in bounded[i + 1 :]:
            rest1 = {c: v for c, v in k1.items() if c != "norm_bound"}
            rest2 = {c: v for c, v in k2.items() if c != "norm_bound"}
            if rest1 != rest2 or k1["norm_bound"] == k2["norm_bound"]:
                continue
            (lo_b, lo_p), (hi_b, hi_p) = sorted([(k1["norm_bound"], p1), (k2["norm_bound"], p2)], key=lambda x: x[0])
            out.append(dict(cells=rest1, bounds=[lo_b, hi_b], **m_star_ratio(hi_p, lo_p, ci)))
    return out


def series_fit(part: pl.DataFrame, ci: float = 0.95) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The growth-law fits of one series, as L1 judges them: ``(used, fit)``.

    ``used``: the series' cells with an exact m*, sorted by T; ``fit``: the table of
    :func:`stats.fits.compare_growth` over them (with the bootstrap replicates when every
    cell has them), or None with fewer than ``MIN_POINTS`` values of T.
    """
    part = normalized(part)
    used = part.filter((pl.col("bound") == "exact") & pl.col("m_star").is_finite()).sort("T")
    if used["T"].n_unique() < MIN_POINTS:
        return used, None
    point, reps = cell_values(used)
    return used, compare_growth(used["T"].to_numpy().astype(float), point, reps, ci)


def _l1_series(part: pl.DataFrame, ci: float) -> tuple:
    """(verdict, statistic, interval, why, cells used, numbers) of one series."""
    used, fit = series_fit(part, ci)
    left = left_out_cells(part)
    left_text = (
        "; left out (a bound, not a value): " + ", ".join(f"T={x['T']}: {x['text']}" for x in left) if left else ""
    )
    numbers = dict(n_cells=used.height, T=used["T"].to_list(), left_out=left)
    binds = _range_binds(part)
    if binds:
        # A tuned setting at the edge of its search range: the series measures the range, too.
        numbers["range_binds"] = binds
        left_text += (
            f"; bounded by its search range: the adopted setting sits within 10% of the range's edge in "
            f"{len(binds)} of {part.height} cells ("
            + ", ".join(f"T={b['T']}: {b['settings']}" for b in binds)
            + "), so a wider range could move m*"
        )
    if fit is None:
        return (
            INCONCLUSIVE,
            "-",
            "-",
            f"m* is exact at {used['T'].n_unique()} value(s) of T; a growth-law fit needs {MIN_POINTS}{left_text}",
            used,
            numbers,
        )
    T = used["T"].to_numpy().astype(float)
    law = {r["model"]: r for r in fit.iter_rows(named=True)}
    log, power, poly = law["log"], law["power"], law["polylog"]
    rivals = _rivals(poly)
    aic = min(law[m]["aic"] for m in rivals) - log["aic"]  # > 0: the log law is better
    bic = min(law[m]["bic"] for m in rivals) - log["bic"]
    decades = math.log10(T.max() / T.min())
    robust = robust_law(T, used["m_star"].to_numpy().astype(float), rivals, AIC_MARGIN)
    numbers["robust"] = robust
    numbers["law"] = robust["law"]
    numbers["direction"] = robust["direction"]
    numbers["log_deficit_aicc"] = dict(
        full=robust["log_deficit"],
        least=robust["log_deficit_min"],
        most=robust["log_deficit_max"],
        variants=robust["n_variants"],
    )
    numbers.update(
        c=quantity(power["b"], power["b_lo"], power["b_hi"]),
        b=quantity(log["b"], log["b_lo"], log["b_hi"]),
        k=quantity(poly["b"], poly["b_lo"], poly["b_hi"]),
        reading=law_reading(robust),
        # No law is named from fewer cells than AICc needs, not even as "the lowest AIC".
        best_law=fit["model"][0] if len(T) >= MIN_LAW_POINTS else None,
        log_margin_aic=aic,
        log_margin_bic=bic,
        decades=decades,
        laws={
            r["model"]: dict(
                a=r["a"],
                b=r["b"],
                a_ci=[r["a_lo"], r["a_hi"]],
                b_ci=[r["b_lo"], r["b_hi"]],
                aic=r["aic"],
                bic=r["bic"],
                delta_aic=r["delta_aic"],
                r2=r["r2"],
            )
            for r in fit.iter_rows(named=True)
        },
    )
    # Where the few smallest T decide the direction: the same robust reading over the larger T only.
    m = used["m_star"].to_numpy().astype(float)
    numbers["direction_from_T"] = {str(t): _direction_from(T, m, t, rivals) for t in SMALL_T_FROM}
    statistic = (
        f"on the logistic m*: c = {power['b']:.3f} (a T^c); k = {poly['b']:.2f} (a (ln T)^k); "
        + (f"lowest AIC: {fit['model'][0]}; " if len(T) >= MIN_LAW_POINTS else "")
        + f"growth law named: {law_reading(robust)} ({law_why(robust)}); "
        f"direction: {direction_text(robust)}; the log law's margin "
        f"AIC {aic:+.1f}, BIC {bic:+.1f}; log slope b = {log['b']:.3g}; "
        f"T {T.min():g}..{T.max():g} ({decades:.1f} decades, {len(T)} cells)"
    )
    interval = (
        f"c {power['b_lo']:.3f} .. {power['b_hi']:.3f}; k {poly['b_lo']:.2f} .. {poly['b_hi']:.2f}; "
        f"b {log['b_lo']:.3g} .. {log['b_hi']:.3g}"
    )
    numbers["span_short"] = decades < MIN_DECADES
    if decades < MIN_DECADES:
        lead = (
            f"{direction_text(robust)} over {decades:.1f} decades"
            if robust["direction"] != "undecided"
            else f"the direction is undecided over {decades:.1f} decades ({direction_text(robust)})"
        )
        return (
            INCONCLUSIVE,
            statistic,
            interval,
            f"{lead}; the rule's {MIN_DECADES:g} decades (max T / min T >= "
            f"{10**MIN_DECADES:g}) not reached, so L1 is not decided{left_text}",
            used,
            numbers,
        )
    if math.isnan(power["b_lo"]):
        why = "no bootstrap interval for the exponent (too few finite replicates)"
        return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
    if power["b_hi"] < EFFECT_SLOPE:
        why = (
            f"m* does not grow with T by the required effect (c's interval below {EFFECT_SLOPE:g}: less than "
            f"{EFFECT_RATIO - 1:.0%} more samples per tenfold T)"
        )
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    # The grid and interpolated m* are judged by this same rule (stats/boolean_verdicts.py,
    # ``verdicts``): a verdict one estimator alone gives is not one the rows give.
    if aic <= -AIC_MARGIN or bic <= -AIC_MARGIN:
        why = (
            f"a faster law fits better than log growth (by {-aic:.1f} AIC, {-bic:.1f} BIC; a margin of "
            f"{AIC_MARGIN:g} decides); growth law named: {law_reading(robust)}"
        )
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    if power["b_lo"] > EFFECT_SLOPE and aic >= AIC_MARGIN and bic >= AIC_MARGIN:
        why = (
            f"m* grows (c's interval above {EFFECT_SLOPE:g}) and the log law is ahead by >= {AIC_MARGIN:g} AIC and BIC"
        )
        return SUPPORTED, statistic, interval, why + left_text, used, numbers
    why = (
        f"c's interval includes {EFFECT_SLOPE:g} (growth not shown at the required effect)"
        if power["b_lo"] <= EFFECT_SLOPE
        else f"the laws are within {AIC_MARGIN:g} AIC/BIC units of each other"
    )
    return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers


def _range_binds(part: pl.DataFrame) -> list[dict]:
    """The cells of a tuned series whose adopted setting sits at its search range's edge
    (``range_binds``, analysis/tuning.py): ``{"T", "settings"}`` each; [] without the column."""
    if "range_binds" not in part.columns:
        return []
    rows = part.filter(pl.col("range_binds").fill_null("") != "").sort("T")
    return [{"T": r["T"], "settings": r["range_binds"]} for r in rows.iter_rows(named=True)]


def _direction_from(T: np.ndarray, m_star: np.ndarray, smallest: float, rivals: tuple[str, ...]) -> str:
    """The robust direction (:func:`stats.fits.robust_law`) of the cells with T >= ``smallest``
    alone, or "too few cells" below :data:`MIN_POINTS` of them."""
    keep = smallest <= T
    if keep.sum() < MIN_POINTS:
        return "too few cells"
    return robust_law(T[keep], m_star[keep], rivals, AIC_MARGIN)["direction"]


def _rivals(poly: dict) -> tuple[str, ...]:
    """The laws the log law must beat: linear and power growth, and polylog growth when its
    exponent k's interval lies above 1. The claim bounds m* by O(log T): k = 1 is log growth
    itself, a (ln T)^1, and k < 1 grows slower still, so a polylog law with k's interval
    reaching 1 or below agrees with the claim rather than rivalling it."""
    faster = poly["b_lo"] > 1  # NaN (no interval) compares False: not a rival
    return ("linear", "power", "polylog") if faster else ("linear", "power")
