"""The words of the sparse-Boolean verdicts: the verdict dict, whose statistic, interval and why
are sentences (a claim judged on several series joins theirs; the flagged cells it used are
named), and the clauses that describe its numbers (m* with its bound, a ratio, an interval's
end, the growth law an L1 series names, L4's ratio, R's difference from the paper).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import polars as pl

from attnsweep.stats.boolean_cells import BASELINE
from attnsweep.stats.critical import FEW_SEEDS, format_m_star
from attnsweep.stats.fits import MIN_LAW_POINTS
from attnsweep.stats.verdict_common import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    SUPPORTED,
    Verdict,
    combined,
    quantity,
    split_flags,
)

LIMITING = ("budget-limited", "out-of-epochs")
"""Flags of a cell whose m* measures the training budget (stats/critical.py)."""


def verdict_dict(
    cid: str,
    claim: str,
    verdict: str,
    why: str,
    statistic: str = "-",
    interval: str = "-",
    series: list[dict] = (),
    used: pl.DataFrame | None = None,
    not_judged: list[dict] = (),
    name_flags: bool = True,
    limited_reads: str | None = None,
) -> Verdict:
    """The verdict dict (stats/boolean_verdicts.py, module docstring). Budget-limited cells among ``used`` make it
    inconclusive and are named; every flag of a used cell is listed in ``flags`` and, with
    ``name_flags``, counted in ``why`` (:func:`_flag_counts`). ``limited_reads``: what the
    budget-limited cells make of the claim's measure, with ``{cells}`` where they are named
    (None: an m* claim's words, that their m* measures the training budget)."""
    flags = _flagged(used) if used is not None and not used.is_empty() else []
    limited = sorted({_name(f["cell"]) for f in flags if f["flag"] in LIMITING})
    if limited and verdict in (SUPPORTED, NOT_SUPPORTED):
        verdict = INCONCLUSIVE
        why += (
            f"; budget-limited cells used ({_few(limited)}): their m* measures the training budget"
            if limited_reads is None
            else "; " + limited_reads.format(cells=_few(limited))
        )
    other = _flag_counts([f for f in flags if f["flag"] not in LIMITING]) if name_flags else ""
    if other:
        why += f"; flagged cells used: {other}"
    return Verdict(
        id=cid,
        claim=claim,
        statistic=statistic,
        interval=interval,
        verdict=verdict,
        why=why,
        series=list(series),
        not_judged=list(not_judged),
        flags=flags,
    )


def combine_series(
    cid: str,
    claim: str,
    judged: list[tuple],
    side: list[dict],
    limited_reads: str | None = None,
    say_verdicts: bool = False,
) -> Verdict:
    """One verdict from per-series ``(key, verdict, statistic, interval, why, used, numbers)``:
    supported when all are, not supported when any is not, else inconclusive (a series that
    uses a budget-limited cell counts as inconclusive; ``limited_reads``: as
    :func:`verdict_dict`). The flagged cells of every series are counted once, at the end of
    the verdict's ``why``. ``say_verdicts``: each series' ``why`` of several opens with its own
    verdict (a spec's own claims), so a table that shows the combined one alone still says
    which series decided it."""
    series = []
    for key, verdict, statistic, interval, why, used, numbers in judged:
        one = verdict_dict(
            cid, claim, verdict, why, statistic, interval, used=used, name_flags=False, limited_reads=limited_reads
        )
        series.append(
            dict(
                cells=key,
                verdict=one["verdict"],
                statistic=statistic,
                interval=interval,
                why=one["why"],
                numbers=numbers,
                flags=one["flags"],
            )
        )
    verdict = combined([s["verdict"] for s in series])

    def tag(s: dict, text: str) -> str:
        return f"[{_label(s['cells'])}] {text}" if s["cells"] and len(series) > 1 else text

    out = Verdict(
        id=cid,
        claim=claim,
        statistic=" | ".join(tag(s, s["statistic"]) for s in series),
        interval=" | ".join(tag(s, s["interval"]) for s in series),
        verdict=verdict,
        why=" | ".join(
            tag(s, f"{s['verdict']}: {s['why']}" if say_verdicts and len(series) > 1 else s["why"]) for s in series
        ),
        series=series,
        not_judged=list(side),
        flags=[f for s in series for f in s["flags"]],
    )
    flagged = _flag_counts([f for f in out["flags"] if f["flag"] not in LIMITING])
    if flagged:
        out["why"] += f"; flagged cells used: {flagged}"
    for s in series:
        del s["flags"]
    return out


def _cell_of(row: dict, suffix: str = "") -> dict:
    """A cell's settings (the columns a flag names it by)."""
    names = ("task", "T", "s", "model", "norm_bound")
    return {c: row.get(f"{c}{suffix}", row.get(c)) for c in names if f"{c}{suffix}" in row or c in row}


def _flagged(cells: pl.DataFrame) -> list[dict]:
    """``{"flag", "cell"}`` for every flag of every cell in ``cells`` (and of their paired
    MLP cells, in an L4 table)."""
    out = []
    for suffix in ("", "_mlp"):
        if f"flags{suffix}" not in cells.columns:
            continue
        for r in cells.iter_rows(named=True):
            cell = _cell_of(r, suffix)
            if suffix:
                cell["model"] = r.get("model_mlp", BASELINE)
            out += [dict(flag=f, cell=cell) for f in split_flags(r[f"flags{suffix}"])]
    return out


def _flag_counts(flags: Sequence[Mapping], k: int = 3) -> str:
    """Flagged cells in a clause, per flag its count and the first ``k`` cells, each named by
    the settings that tell the flagged cells apart: ``3 cells with fewer than 8 seeds (T=16,
    T=32, T=64); 1 cell flagged open-interval (T=64)`` ("" for none)."""
    cells: dict[str, list[Mapping]] = {}
    for f in flags:
        if f["cell"] not in cells.setdefault(f["flag"], []):
            cells[f["flag"]].append(f["cell"])
    every = [c for group in cells.values() for c in group]
    keys = [key for key in dict.fromkeys(k for c in every for k in c) if len({str(c.get(key)) for c in every}) > 1]
    parts = []
    for flag, group in cells.items():
        names = sorted(
            {" ".join(f"{key}={c.get(key)}" for key in keys) if keys else _name(c) for c in group},
            key=lambda name: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)],
        )
        what = f"with fewer than {FEW_SEEDS} seeds" if flag == "few-seeds" else f"flagged {flag}"
        shown = ", ".join(names[:k]) + (f", and {len(names) - k} more" if len(names) > k else "")
        parts.append(f"{len(group)} cell{'s' if len(group) > 1 else ''} {what} ({shown})")
    return "; ".join(parts)


def _name(cell: Mapping) -> str:
    return " ".join(f"{c}={v}" for c, v in cell.items())


def _label(key: dict) -> str:
    return ", ".join(f"{c}={v}" for c, v in key.items())


def _few(names: list[str], k: int = 4) -> str:
    return "; ".join(names[:k]) + (f"; and {len(names) - k} more" if len(names) > k else "")


def left_out_cells(part: pl.DataFrame) -> list[dict]:
    """The cells of a series a fit leaves out (a bound, or none), as numbers and text."""
    rows = part.filter(pl.col("bound") != "exact").sort("T").iter_rows(named=True)
    return [
        dict(
            T=r["T"],
            m_star=quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"]),
            text=show_m_star(r),
            flags=split_flags(r["flags"]),
        )
        for r in rows
    ]


def show_m_star(row: dict) -> str:
    return format_m_star(row["m_star"], row["bound"], digits=0)


def ratio_text(value: float, bound: str) -> str:
    if bound == "none" or math.isnan(value):
        return "none (a bound on each side)"
    return {"lower": f"> {value:.2f}", "upper": f"≤ {value:.2f}"}.get(bound, f"{value:.2f}")


def interval_end(value: float) -> str:
    return "beyond the grid (inf)" if math.isinf(value) else f"{value:.2f}"


def _pct(ratio: float) -> str:
    """A ratio as a difference: 1.08 -> '8.0% above', 0.9 -> '10.0% below'."""
    if math.isnan(ratio):
        return "?"
    diff = ratio - 1
    return f"{abs(diff):.1%} {'above' if diff >= 0 else 'below'}"


def law_reading(robust: dict) -> str:
    """The growth law a series names (:func:`stats.fits.robust_law`): the law, or what
    stands in its place ("faster than log, law undecided", "no law named: 4 exact cells")."""
    law = robust["law"]
    if law == "too few cells":
        return f"no law named ({robust['n_points']} exact cells; a law needs {MIN_LAW_POINTS})"
    if law == "undecided":
        return "faster than log, law undecided" if robust["direction"] == "faster than log" else "law undecided"
    return law


def law_why(robust: dict) -> str:
    """Why a law is named or not, in a clause."""
    wins = robust["winners"]
    if robust["law"] == "too few cells":
        return f"AICc needs >= {MIN_LAW_POINTS} cells for a 3-parameter law"
    if robust["law"] == "undecided":
        counts = {}
        for w in wins.values():
            counts[w] = counts.get(w, 0) + 1
        return "the best law by AICc changes with the variant: " + ", ".join(
            f"{m} in {c} of {len(wins)}" for m, c in sorted(counts.items(), key=lambda x: -x[1])
        )
    return f"lowest AICc in all {len(wins)} variants: m* and ln m* scales, each T left out"


def direction_text(robust: dict) -> str:
    """Which way and how strongly the cells point against the log law, in a clause."""
    lo, hi, n = robust["log_deficit_min"], robust["log_deficit_max"], robust["n_variants"]
    if not n:
        return "not measured"
    span = f"{lo:.0f} to {hi:.0f}" if round(lo) != round(hi) else f"{lo:.0f}"
    if robust["direction"] == "faster than log":
        return f"faster than log: the log law trails by {span} AICc in all {n} variants"
    if robust["direction"] == "log":
        return f"log-like: the log law leads by {-hi:.0f} to {-lo:.0f} AICc in all {n} variants"
    return f"the log law's deficit ranges {lo:+.0f} to {hi:+.0f} AICc over {n} variants"


def mlp_ratio_text(last: dict, value: float, bound: str) -> str:
    """L4's ratio MLP m* / transformer m* at the largest T (``last``: the paired row there,
    the MLP's columns suffixed ``_mlp``), with both m* named where it is a bound."""
    mlp_row = {**last, **_strip(last, "_mlp")}
    if bound == "lower":
        beyond = ", beyond the grid" if last["bound_mlp"] == "lower" else ""
        shown = f"> {value:.1f} (MLP m* {show_m_star(mlp_row)}{beyond}; transformer m* {show_m_star(last)})"
    elif bound == "upper":
        sign = "<" if last["bound"] == "lower" else "≤"
        beyond = ", beyond the grid" if last["bound"] == "lower" else ""
        shown = f"{sign} {value:.2f} (transformer m* {show_m_star(last)}{beyond}; MLP m* {show_m_star(mlp_row)})"
    elif bound == "none":
        shown = f"none (MLP m* {show_m_star(mlp_row)}, transformer m* {show_m_star(last)}: a bound on each side)"
    else:
        shown = f"{value:.2f}"
    return shown


def _strip(row: dict, suffix: str) -> dict:
    return {k.removesuffix(suffix): v for k, v in row.items() if k.endswith(suffix)}


def reference_why(
    lo: float,
    hi: float,
    margin: tuple[float, float],
    protocol: dict,
    left_text: str,
    T: np.ndarray,
    per_T: np.ndarray,
    slope: float,
    slo: float,
    shi: float,
) -> str:
    """R's why before its verdict: which way ours differs from the paper's (the ratio's
    interval ``lo`` .. ``hi``), the margin, the settings of our protocol it rests on, and the
    trend of the ratio ``per_T`` against ``T`` (its slope and interval) where it has one."""
    rests_on = (
        "ours: " + ", ".join(f"{k}={v}" for k, v in protocol.items()) + "; success: test accuracy >= the "
        "run's threshold in half the seeds; the paper's width, optimiser, epochs and success rule are not in "
        "our read-off, which is by eye (about +-1.5 samples)"
    )
    side = (
        f"ours is {_pct(lo)} to {_pct(hi)} the paper's"
        if lo > 1 or hi < 1
        else f"ours is between {_pct(lo)} and {_pct(hi)} the paper's"
    )
    why = f"{side}; equivalent when the interval lies inside {margin[0]:g} .. {margin[1]:g}; {rests_on}{left_text}"
    if not math.isnan(slo):
        drift = (
            "ours rises against the paper's as T grows"
            if slo > 0
            else "ours falls against the paper's as T grows"
            if shi < 0
            else "no trend of the ratio with T is shown"
        )
        why += (
            f"; trend: {drift} (ratio {per_T[0]:.2f} at T={T[0]:g}, {per_T[-1]:.2f} at T={T[-1]:g}; slope "
            f"{slope:.2f}, CI {slo:.2f} .. {shi:.2f}): the level is an average over a drift, read it with it"
            if slo > 0 or shi < 0
            else f"; trend: {drift} (slope {slope:.2f}, CI {slo:.2f} .. {shi:.2f})"
        )
    return why


AGREED_KEYS = ("direction", "law")
"""L1 series numbers stated only where every estimator of m* gives the same (else "undecided")."""


def agreed(by_estimator: Mapping[str, Verdict | dict]) -> Verdict:
    """One verdict from a claim judged once per estimator of m* (stats/critical.py
    ``ESTIMATORS``, first the logistic one, whose statistic and numbers it keeps).

    The rule (docs/method.md, "Three estimators"): a verdict, an L1 series' ``direction``, its
    named ``law`` and its directions over the larger T (``direction_from_T``) stand only where
    every estimator gives the same; elsewhere the verdict is inconclusive, the direction and
    law "undecided", and the why names what each estimator gave. ``estimators`` (in the
    verdict and in each series' numbers) keeps every estimator's reading.
    """
    names = list(by_estimator)
    out = cast(Verdict, copy.deepcopy(by_estimator[names[0]]))
    readings = {n: by_estimator[n]["verdict"] for n in names}
    out["estimators"] = readings
    if len(set(readings.values())) > 1:
        out["verdict"] = INCONCLUSIVE
        out["why"] += "; " + _disagreement(readings)
    for i, s in enumerate(out["series"]):
        each = {n: _same_series(by_estimator[n]["series"], i, s["cells"]) for n in names}
        numbers: dict = s["numbers"]
        numbers["estimators"] = {
            n: {k: (e or {}).get("numbers", {}).get(k) for k in (*AGREED_KEYS, "direction_from_T")}
            | {"verdict": (e or {}).get("verdict"), "c": ((e or {}).get("numbers", {}).get("c") or {}).get("estimate")}
            for n, e in each.items()
        }
        verdicts = {n: (e or {}).get("verdict") for n, e in each.items()}
        if len(set(verdicts.values())) > 1:
            s["verdict"] = INCONCLUSIVE
            s["why"] += "; " + _disagreement(verdicts)
        for key in AGREED_KEYS:
            if key in numbers and len({str(v[key]) for v in numbers["estimators"].values()}) > 1:
                numbers[key] = "undecided"
        if "direction" in numbers:  # an L1 series: what all three give, beside the logistic statistic
            s["statistic"] += (
                f"; under all three m* estimators: direction {numbers['direction']}, "
                f"law {numbers.get('law', 'not named')}"
            )
        if "direction_from_T" in numbers:
            numbers["direction_from_T"] = {
                t: d
                if all((v["direction_from_T"] or {}).get(t) == d for v in numbers["estimators"].values())
                else "undecided"
                for t, d in numbers["direction_from_T"].items()
            }
    if any("direction" in s["numbers"] for s in out["series"]):
        many = len(out["series"]) > 1
        out["statistic"] = " | ".join(
            f"[{_label(s['cells'])}] {s['statistic']}" if s["cells"] and many else s["statistic"] for s in out["series"]
        )
    return out


def _same_series(series: Sequence[Mapping], i: int, cells: Mapping) -> Mapping | None:
    """The ``i``-th series of another estimator's verdict, checked to be the same cells."""
    return series[i] if i < len(series) and series[i]["cells"] == cells else None


def _disagreement(readings: Mapping[str, str | None]) -> str:
    listed = ", ".join(f"{n}: {v or 'not judged'}" for n, v in readings.items())
    return f"the estimators of m* disagree ({listed}): the estimator decides, not the rows"
