"""A spec's own claims (orchestrator/spec_claims.py, docs/claims.md 5) judged by the rules of the
paper's claims: nothing here is a new statistic.

* ``growth`` (m* grows along an axis like a named law): each series (the cells that differ only
  in the axis) is judged as an L1 series is (stats/boolean_growth.py): exact m* only, the four
  laws of :func:`stats.fits.compare_growth`, the law named by :func:`stats.fits.robust_law`
  (lowest AICc in every variant: both scales, each value of the axis left out in turn; none
  below ``stats.fits.MIN_LAW_POINTS`` cells), the span rule (``MIN_DECADES`` of the axis) and
  growth shown by the power-law exponent's interval above ``EFFECT_SLOPE``.
* ``fewer_samples`` (m* at ``less`` below m* at ``more``): each pair of cells that differ only in
  the axis gives the ratio m*(more) / m*(less) with its bootstrap interval, a bound where either
  m* is one (stats/verdict_common.py ``ratio_bound``), as L4's ratio; pooled, their geometric
  mean (as L2/L3's ratio).
* ``trend`` (a per-trial quantity falls or rises along an axis, default m): per series, the
  slope of log10 quantity on log10 axis with its seed bootstrap interval, judged as S3 is
  (stats/symmetry.py ``log_slope``).

Each m* claim is judged once per estimator of m* (stats/critical.py ``ESTIMATORS``) and
:func:`stats.boolean_wording.agreed` keeps a verdict only where all agree. Cells a claim uses
that are budget-limited make it inconclusive (stats/boolean_wording.py ``verdict_dict``).
Every verdict is a :class:`stats.verdict_common.Verdict` with ``origin`` ``"spec"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from attnsweep.stats.boolean_cells import (
    MIN_POINTS,
    cell_values,
    estimator_view,
    groups_by,
    normalized,
    replicate_interval,
)
from attnsweep.stats.boolean_growth import AIC_MARGIN, MIN_DECADES
from attnsweep.stats.boolean_wording import agreed, combine_series, interval_end, ratio_text, show_m_star, verdict_dict
from attnsweep.stats.critical import ESTIMATORS
from attnsweep.stats.fits import MIN_LAW_POINTS, compare_growth, robust_law
from attnsweep.stats.symmetry import log_slope
from attnsweep.stats.verdict_common import (
    EFFECT_RATIO,
    EFFECT_SLOPE,
    INCONCLUSIVE,
    NOT_SUPPORTED,
    NOT_TESTED,
    SUPPORTED,
    Verdict,
    quantity,
    ratio_bound,
)

LAW_FORMS = {"log": "a + b ln x", "polylog": "a (ln x)^k", "linear": "a + b x", "power": "a x^c"}


def claim_text(claim: Mapping) -> str:
    """``id: the hypothesis in words`` (the claim's ``text``, else made from its fields)."""
    if claim.get("text"):
        return f"{claim['id']}: {claim['text']}"
    if claim["kind"] == "growth":
        form = LAW_FORMS[claim["law"]].replace("x", str(claim["axis"]))
        words = f"m* grows along {claim['axis']} like {form} ({claim['law']})"
    elif claim["kind"] == "fewer_samples":
        a = claim["axis"]
        words = f"{a}={claim['less']} needs fewer samples (a lower m*) than {a}={claim['more']}"
    else:
        words = f"{claim['quantity']} {claim['direction']} as {claim.get('along', 'm')} grows"
    return f"{claim['id']}: {words}"


def judge(
    claims: Sequence[Mapping],
    m_star: pl.DataFrame | None,
    trials: pl.DataFrame | None,
    cell: list[str],
    ci: float = 0.95,
    n_boot: int = 1000,
) -> list[Verdict]:
    """Every claim of ``claims`` (dicts of orchestrator/spec_claims.py's models), in order.

    Args:
        m_star: the run's m* table (stats/boolean_verdicts.py's input; with ``replicates``);
            None or empty: the m* claims are not tested.
        trials: the run's trained trial rows (``status`` ``done``; ``m``, ``seed``, the cell
            columns and the quantities) for ``trend``; None: trend claims are not tested.
        cell: the columns that name a cell (every setting but m and the seed).
        ci: the intervals' level; n_boot: bootstrap replicates of a trend's slope.
    """
    out = []
    for claim in claims:
        text = claim_text(claim)
        if claim["kind"] == "trend":
            verdict = trend(claim, trials, cell, m_star, ci, n_boot)
        elif m_star is None or m_star.is_empty():
            verdict = verdict_dict(claim["id"], text, NOT_TESTED, "the run has no m* table")
        else:
            rule = growth if claim["kind"] == "growth" else fewer_samples
            table = normalized(m_star)
            verdict = agreed({name: rule(claim, estimator_view(table, name), cell, ci) for name in ESTIMATORS})
        verdict["origin"] = "spec"
        out.append(verdict)
    return out


# --- growth ------------------------------------------------------------------------------


def growth(claim: Mapping, m_star: pl.DataFrame, cell: list[str], ci: float = 0.95) -> Verdict:
    """A growth claim on one estimator's m* table: one series per setting of the other cell
    columns, judged by :func:`_growth_series`; a series with fewer than ``MIN_POINTS`` values of
    the axis beside others is named, not judged (as L1's side blocks)."""
    axis, text = claim["axis"], claim_text(claim)
    if axis not in m_star.columns:
        return verdict_dict(claim["id"], text, NOT_TESTED, f"the m* table has no {axis} column")
    groups = groups_by(m_star, [c for c in cell if c != axis])
    side = [key for key, part in groups if len(groups) > 1 and part[axis].n_unique() < MIN_POINTS]
    series = [(key, part) for key, part in groups if key not in side and part[axis].n_unique() >= MIN_POINTS]
    if not series:
        return verdict_dict(
            claim["id"], text, NOT_TESTED, f"no series has {MIN_POINTS} or more values of {axis}", not_judged=side
        )
    judged = [(key, *_growth_series(part, axis, claim["law"], ci)) for key, part in series]
    return combine_series(claim["id"], text, judged, side, say_verdicts=True)


def _rivals(law: str, fit: dict[str, dict]) -> tuple[str, ...]:
    """The laws ``law`` must beat. A law that holds ``law`` as a special case is a rival only
    where its exponent's interval excludes that case (L1's rule for polylog against log,
    stats/boolean_growth.py ``_rivals``): a (ln x)^k with k = 1 is a log law, a x^c with c = 1 a
    linear one."""
    k, c = fit["polylog"], fit["power"]
    rivals = [m for m in LAW_FORMS if m != law]
    if law == "log" and not k["b_lo"] > 1:  # NaN (no interval) compares False: not a rival
        rivals.remove("polylog")
    if law == "linear" and not (c["b_lo"] > 1 or c["b_hi"] < 1):
        rivals.remove("power")
    return tuple(rivals)


def _growth_series(part: pl.DataFrame, axis: str, law: str, ci: float) -> tuple:
    """(verdict, statistic, interval, why, cells used, numbers) of one series."""
    used = part.filter((pl.col("bound") == "exact") & pl.col("m_star").is_finite()).sort(axis)
    left = part.filter(pl.col("bound") != "exact").sort(axis)
    left_text = (
        "; left out (a bound, not a value): "
        + ", ".join(f"{axis}={r[axis]}: {show_m_star(r)}" for r in left.iter_rows(named=True))
        if not left.is_empty()
        else ""
    )
    numbers: dict = dict(n_cells=used.height, values=used[axis].to_list(), left_out=left[axis].to_list())
    if used[axis].n_unique() < MIN_POINTS:
        why = f"m* is exact at {used[axis].n_unique()} value(s) of {axis}; a growth-law fit needs {MIN_POINTS}"
        return INCONCLUSIVE, "-", "-", why + left_text, used, numbers
    x = used[axis].cast(pl.Float64).to_numpy()
    point, reps = cell_values(used)
    fit = {r["model"]: r for r in compare_growth(x, point, reps, ci).iter_rows(named=True)}
    rivals = _rivals(law, fit)
    robust = robust_law(x, point, rivals, AIC_MARGIN, law=law)
    lo_def, hi_def = robust["log_deficit_min"], robust["log_deficit_max"]  # the claimed law's deficit
    power = fit["power"]
    decades = math.log10(x.max() / x.min())
    named = robust["law"] if robust["law"] not in ("too few cells", "undecided") else None
    numbers.update(
        law=named or robust["law"],
        deficit_aicc=dict(least=lo_def, most=hi_def, variants=robust["n_variants"]),
        c=quantity(power["b"], power["b_lo"], power["b_hi"]),
        decades=decades,
        rivals=list(rivals),
        laws={
            m: dict(a=r["a"], b=r["b"], b_ci=[r["b_lo"], r["b_hi"]], aic=r["aic"], bic=r["bic"]) for m, r in fit.items()
        },
    )
    # Below MIN_LAW_POINTS cells AICc is not defined (docs/claims.md): no deficit is stated.
    laws = (
        f"law named by AICc: {named or robust['law']}; the {law} law's AICc behind the best of "
        f"{', '.join(rivals)}: {lo_def:+.1f} to {hi_def:+.1f} over {robust['n_variants']} variants (< 0: ahead)"
        if len(x) >= MIN_LAW_POINTS
        else f"no law named ({len(x)} exact cells; AICc needs {MIN_LAW_POINTS})"
    )
    statistic = f"{laws}; c = {power['b']:.3f} (a {axis}^c); {axis} {x.min():g}..{x.max():g} ({decades:.1f} decades, {len(x)} cells)"
    interval = f"c {power['b_lo']:.3f} .. {power['b_hi']:.3f}"
    if len(x) < MIN_LAW_POINTS:
        why = f"no law is named from {len(x)} exact cells (AICc needs {MIN_LAW_POINTS})"
        return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
    if decades < MIN_DECADES:
        why = (
            f"{axis} spans {decades:.1f} decades; the rule's {MIN_DECADES:g} (max / min >= {10**MIN_DECADES:g}) "
            "not reached, so no law is decided"
        )
        return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
    if math.isnan(power["b_lo"]):
        why = "no bootstrap interval for the exponent (too few finite replicates)"
        return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
    if power["b_hi"] < EFFECT_SLOPE:
        why = f"m* does not grow along {axis} (c's interval below {EFFECT_SLOPE:g})"
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    if lo_def >= AIC_MARGIN:
        why = f"another law fits better than {law} by >= {AIC_MARGIN:g} AICc in every variant (named: {numbers['law']})"
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    if hi_def <= -AIC_MARGIN and power["b_lo"] > EFFECT_SLOPE:
        why = (
            f"m* grows (c's interval above {EFFECT_SLOPE:g}) and the {law} law leads every rival by >= "
            f"{AIC_MARGIN:g} AICc in every variant"
        )
        return SUPPORTED, statistic, interval, why + left_text, used, numbers
    why = (
        f"c's interval includes {EFFECT_SLOPE:g} (growth not shown at the required effect)"
        if power["b_lo"] <= EFFECT_SLOPE
        else f"the {law} law does not lead by {AIC_MARGIN:g} AICc in every variant"
    )
    return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers


# --- fewer_samples -----------------------------------------------------------------------


def _at(axis: str, value: object) -> pl.Expr:
    return pl.col(axis).is_null() if value is None else pl.col(axis).eq(value)


def fewer_samples(claim: Mapping, m_star: pl.DataFrame, cell: list[str], ci: float = 0.95) -> Verdict:
    """A fewer-samples claim on one estimator's m* table.

    Statistics: per pair of cells equal in every cell column but the axis, the ratio
    m*(more) / m*(less) (a bound where either is one; a pair with no number is left out and
    named) with its bootstrap interval; pooled, the geometric mean of the pairs' ratios with
    its interval. Supported when the pooled interval lies above ``EFFECT_RATIO`` and every
    pair's above 1 ("in every cell"); not supported when the pooled interval lies at or below 1
    or a pair's below 1 (``less`` needs more samples there); inconclusive otherwise.
    """
    axis, less, more, text = claim["axis"], claim["less"], claim["more"], claim_text(claim)
    if axis not in m_star.columns:
        return verdict_dict(claim["id"], text, NOT_TESTED, f"the m* table has no {axis} column")
    on = [c for c in cell if c != axis and c in m_star.columns]
    low, high = m_star.filter(_at(axis, less)), m_star.filter(_at(axis, more))
    pairs = low.join(high, on=on, how="inner", suffix="_more", nulls_equal=True)
    if pairs.is_empty():
        return verdict_dict(
            claim["id"], text, NOT_TESTED, f"no cells at both {axis}={less} and {axis}={more} with equal other settings"
        )
    varying = [c for c in on if pairs[c].n_unique() > 1]
    lo_pt, lo_reps = cell_values(pairs)
    hi_pt, hi_reps = cell_values(pairs, "_more")
    rows, ratios, rep_ratios, shown, skipped = [], [], [], [], []
    for i, r in enumerate(pairs.iter_rows(named=True)):
        name = " ".join(f"{c}={r[c]}" for c in varying) or "the cell"
        bound = ratio_bound(r["bound_more"], r["bound"])
        if bound == "none" or math.isnan(lo_pt[i]) or math.isnan(hi_pt[i]):
            skipped.append(name)
            continue
        value = r["m_star_more"] / r["m_star"]
        reps = None if lo_reps is None or hi_reps is None else hi_reps[:, i] / lo_reps[:, i]
        with np.errstate(invalid="ignore", divide="ignore"):
            lo, hi = replicate_interval(reps, ci)
        if bound == "lower" and math.isinf(lo):  # beyond the grid in every replicate: as L4's ratio
            top = r["ci_hi"]
            lo = r["m_star_more"] / top if top is not None and math.isfinite(top) and top > 0 else value
        rows.append(
            dict(
                cells={c: r[c] for c in varying},
                ratio=quantity(value, lo, hi, bound),
                less=quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"]),
                more=quantity(r["m_star_more"], r["ci_lo_more"], r["ci_hi_more"], r["bound_more"]),
            )
        )
        ratios.append(value)
        rep_ratios.append(reps)
        shown.append(f"{name}: {ratio_text(value, bound)} (CI {interval_end(lo)} .. {interval_end(hi)})")
    used = pl.concat([low.join(high.select(on), on=on, how="semi", nulls_equal=True), high], how="diagonal_relaxed")
    skip_text = f"; left out (a bound on each side, no ratio): {', '.join(skipped)}" if skipped else ""
    if not rows:
        return verdict_dict(claim["id"], text, INCONCLUSIVE, "no pair has a ratio" + skip_text, used=used)
    pooled = float(np.exp(np.mean(np.log(ratios))))
    bounds = {q["ratio"]["bound"] for q in rows} - {"exact"}
    pooled_bound = "exact" if not bounds else bounds.pop() if len(bounds) == 1 else "none"
    have = [r for r in rep_ratios if r is not None]
    if len(have) < len(rep_ratios):
        plo = phi = math.nan
    else:
        R = min(len(r) for r in have)
        with np.errstate(invalid="ignore", divide="ignore"):
            plo, phi = replicate_interval(np.exp(np.mean(np.log([r[:R] for r in have]), axis=0)), ci)
    pair_lo = [q["ratio"]["ci_lo"] for q in rows]
    pair_hi = [q["ratio"]["ci_hi"] for q in rows]
    statistic = (
        f"m* at {axis}={more} / m* at {axis}={less}: pooled (geometric mean over {len(rows)} pair(s)) "
        f"{ratio_text(pooled, pooled_bound)}; per pair: "
        + "; ".join(shown[:6])
        + (f"; and {len(shown) - 6} more" if len(shown) > 6 else "")
    )
    interval = f"pooled ratio CI {interval_end(plo)} .. {interval_end(phi)}"
    numbers = dict(ratio=quantity(pooled, plo, phi, pooled_bound), pairs=rows, left_out=skipped, effect=EFFECT_RATIO)
    need = f"fewer = the ratio's interval above {EFFECT_RATIO:.2f} pooled and above 1 in every pair"
    if math.isnan(plo) or any(v is None or math.isnan(v) for v in pair_lo):
        verdict, why = INCONCLUSIVE, "no bootstrap replicates"
    elif phi <= 1 or any(h is not None and h < 1 for h in pair_hi):
        verdict = NOT_SUPPORTED
        why = f"{need}; " + (
            "the pooled ratio's interval is at or below 1" if phi <= 1 else f"in some pair {axis}={less} needs more"
        )
    elif plo > EFFECT_RATIO and all(lo_ > 1 for lo_ in pair_lo):
        verdict, why = SUPPORTED, need
    else:
        lean = (
            f"; the estimate leans the other way ({axis}={less} needs more samples)"
            if pooled_bound == "exact" and not math.isnan(pooled) and pooled < 1  # a bound is no estimate
            else ""
        )
        short = [f"the pooled interval reaches down to {EFFECT_RATIO:.2f}"] if plo <= EFFECT_RATIO else []
        short += ["a pair's interval includes 1"] if any(lo_ <= 1 for lo_ in pair_lo) else []
        verdict, why = INCONCLUSIVE, f"{need}; {' and '.join(short)}{lean}"
    series = [
        dict(cells={}, verdict=verdict, statistic=statistic, interval=interval, why=why + skip_text, numbers=numbers)
    ]
    return verdict_dict(claim["id"], text, verdict, why + skip_text, statistic, interval, series=series, used=used)


# --- trend ----------------------------------------------------------------------------------


def trend(
    claim: Mapping,
    trials: pl.DataFrame | None,
    cell: list[str],
    m_star: pl.DataFrame | None = None,
    ci: float = 0.95,
    n_boot: int = 1000,
) -> Verdict:
    """A trend claim: per series (the trials that differ only in the axis, m and the seed),
    the OLS slope of log10 quantity on log10 axis with a seed-bootstrap interval
    (:func:`stats.symmetry.log_slope`). Falls: supported when the interval lies below
    -``EFFECT_SLOPE``, not supported when above it (rises: mirrored); rows whose quantity is
    not above 0 are dropped (a logarithm). The m* cells of a series that are budget-limited
    make it inconclusive."""
    quantity_, along, falls = claim["quantity"], claim.get("along", "m"), claim["direction"] == "falls"
    text = claim_text(claim)
    if trials is None or trials.is_empty() or quantity_ not in trials.columns or along not in trials.columns:
        return verdict_dict(claim["id"], text, NOT_TESTED, f"no trained trials with {quantity_} and {along}")
    rows = trials.filter(pl.col(quantity_).is_not_null() & pl.col(along).is_not_null())
    by = [c for c in [*cell, "m"] if c != along and c in rows.columns]
    groups = groups_by(rows, by)
    side = [key for key, part in groups if part[along].n_unique() < 2]
    judged = []
    for key, part in groups:
        if key in side:
            continue
        data = part.select(m=pl.col(along), seed=pl.col("seed"), value=pl.col(quantity_))
        b, lo, hi = log_slope(data, "value", n_boot, ci)
        dropped = part.height - data.filter(pl.col("value") > 0).height
        numbers = dict(
            slope=quantity(b, lo, hi), effect=EFFECT_SLOPE, values=sorted(set(part[along].to_list())), dropped=dropped
        )
        statistic = f"slope of log10 {quantity_} on log10 {along} = {b:.2f}"
        interval = f"CI {lo:.2f} .. {hi:.2f}"
        drop = f"; {dropped} trial(s) with {quantity_} <= 0 left out (a logarithm)" if dropped else ""
        need = (
            f"falls = the interval lies below -{EFFECT_SLOPE:g}"
            if falls
            else f"rises = the interval lies above {EFFECT_SLOPE:g}"
        )
        if math.isnan(lo):
            verdict, why = INCONCLUSIVE, "no bootstrap interval (two or more values above 0 and n_boot > 0 needed)"
        elif (hi < -EFFECT_SLOPE) if falls else (lo > EFFECT_SLOPE):
            verdict, why = SUPPORTED, need
        elif (lo > -EFFECT_SLOPE) if falls else (hi < EFFECT_SLOPE):
            verdict, why = NOT_SUPPORTED, f"{need}; the interval lies {'above' if falls else 'below'} it"
        else:
            verdict, why = INCONCLUSIVE, f"{need}; the interval includes it"
        used = None
        if m_star is not None and not m_star.is_empty() and along == "m":
            used = normalized(m_star)
            for c, v in key.items():
                if c in used.columns:
                    used = used.filter(_at(c, v))
        judged.append((key, verdict, statistic, interval, why + drop, used, numbers))
    if not judged:
        return verdict_dict(
            claim["id"], text, NOT_TESTED, f"no series has 2 or more values of {along}", not_judged=side
        )
    return combine_series(
        claim["id"],
        text,
        judged,
        side,
        limited_reads=(
            "cells out of epochs used ({cells}): their trials stopped before fitting their training sets, so "
            f"{quantity_} there measures the training budget as much as the samples"
        ),
        say_verdicts=True,
    )
