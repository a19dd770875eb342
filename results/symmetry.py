"""Verdicts S1-S4 of the symmetry experiment (docs/claims.md 1b; Ma & Ying, arXiv 2210.06741).

Input: the trial rows of a symmetry run (columns ``teacher``, ``model``, ``equivariance``,
``n``, ``k``, ``d``, ``m``, ``seed``, ``status``, ``test_error``, ``eq_error_median``,
``eq_error_max``, ``perm_error_median``). A *student* is (model, equivariance):
``inner-product`` (equivariance ``orthogonal``), ``transformer``/``mlp`` (``none``), the
same ``+ rotations`` (``augment``) and ``transformer, no positions`` (``permutation``).

* S1: the inner-product student is exactly O(d)-equivariant: the largest float64 error E
  over all its trials is below ``ROUNDOFF`` (1e-10), and the generic transformer's median E
  on the equivariant teacher at the smallest m is at least ``GAP`` (1e4) times larger
  (bootstrap CI over its trials).
* S2: on the equivariant teacher the inner-product student's m* (results/critical.py, with
  success = relative test error <= target) lies below the generic transformer's and the
  MLP's (intervals apart and grid m* ordered, or theirs beyond the grid); on the control
  teacher it does not (its m* is beyond the grid or not lower).
* S3: the generic transformer's E falls as m grows: the OLS slope of log10 E on log10 m,
  with a bootstrap CI over seeds, is below 0.
* S4: the same for the permutation error of the generic transformer with positions, on
  the equivariant teacher (which is permutation-equivariant).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from results.critical import critical_sample_sizes, format_m_star

ROUNDOFF = 1e-10
GAP = 1e4
CELL = ["teacher", "student", "n", "k", "d"]


def with_student(trials: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Add the ``student`` label column."""
    eq, model = pl.col("equivariance"), pl.col("model")
    return trials.lazy().with_columns(
        student=pl.when(eq == "orthogonal").then(pl.lit("inner-product"))
        .when(eq == "permutation").then(pl.lit("transformer, no positions"))
        .when(eq == "augment").then(model + pl.lit(" + rotations"))
        .otherwise(model)
    )


def critical_sizes(trials: pl.DataFrame, target_error: float, n_boot: int, ci: float) -> pl.DataFrame:
    """m* per (teacher, student, n, k, d) with success = relative test error <= target.

    The interval is the percentile bootstrap over seeds (results/critical.py), except where
    that has zero width: when every seed fails at one m tried and succeeds at the next, each
    replicate gives the same m*, though the grid only says that m* lies between those two m.
    There ``ci_lo`` .. ``ci_hi`` is that bracket (the largest m tried below ``m_star_grid``,
    and ``m_star_grid``), so no comparison rests on an interval the data cannot give.
    """
    return critical_sizes_and_replicates(trials, target_error, n_boot, ci)[0]


def critical_sizes_and_replicates(trials: pl.DataFrame, target_error: float, n_boot: int,
                                  ci: float) -> tuple[pl.DataFrame, dict[tuple, np.ndarray]]:
    """:func:`critical_sizes` and each cell's ``(n_boot,)`` bootstrap m* (+inf: beyond the
    grid), keyed by the tuple of its :data:`CELL` values (results/critical.py)."""
    labelled = with_student(trials)
    table, reps = critical_sample_sizes(labelled, CELL, success=pl.col("test_error") <= target_error,
                                        n_boot=n_boot, ci=ci)
    return bracket_degenerate(table, labelled.select(*CELL, "m").unique().collect()).sort(CELL), reps


def bracket_degenerate(table: pl.DataFrame, tried: pl.DataFrame) -> pl.DataFrame:
    """``table`` (m* per cell) with each zero-width interval of an uncensored m* replaced by
    the grid bracket described in :func:`critical_sizes`.

    Args:
        tried: the ``(cell..., m)`` pairs tried, one row each.
    """
    uncensored = pl.col("censored").fill_null("") == ""
    width = pl.col("ci_hi") - pl.col("ci_lo")
    degenerate = uncensored & (pl.col("ci_lo").is_nan() | (width <= 1e-9 * pl.col("m_star").abs()))
    below = (tried.join(table.select(*CELL, "m_star_grid"), on=CELL, how="inner", nulls_equal=True)
             .filter(pl.col("m") < pl.col("m_star_grid")).group_by(CELL).agg(pl.col("m").max().alias("m_below")))
    joined = table.join(below, on=CELL, how="left", nulls_equal=True)
    lo = pl.min_horizontal(pl.col("m_below").fill_null(pl.col("m_min")).cast(pl.Float64), pl.col("m_star"))
    hi = pl.max_horizontal(pl.col("m_star_grid"), pl.col("m_star"))
    return joined.with_columns(ci_lo=pl.when(degenerate).then(lo).otherwise(pl.col("ci_lo")),
                               ci_hi=pl.when(degenerate).then(hi).otherwise(pl.col("ci_hi"))).drop("m_below")


def log_slope(df: pl.DataFrame, column: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """OLS slope of log10(column) on log10(m) with a bootstrap CI over seeds.

    Args:
        df: rows with ``m``, ``seed`` and ``column`` (> 0; other rows are dropped).

    Returns:
        ``(slope, lo, hi)``; NaNs when fewer than two distinct m remain.
    """
    df = df.filter(pl.col(column).is_not_null() & (pl.col(column) > 0))
    if df["m"].n_unique() < 2:
        return math.nan, math.nan, math.nan
    x, y = np.log10(df["m"].to_numpy().astype(float)), np.log10(df[column].to_numpy())
    seeds, inv = np.unique(df["seed"].to_numpy(), return_inverse=True)
    # Per-seed sufficient statistics, so a replicate's fit is a weighted sum of them.
    stats = np.stack([np.bincount(inv, w, len(seeds)) for w in (np.ones_like(x), x, y, x * x, x * y)], 1)

    def slope(s):  # s (..., 5) -> (...)
        n, sx, sy, sxx, sxy = np.moveaxis(s, -1, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (n * sxy - sx * sy) / (n * sxx - sx * sx)

    point = float(slope(stats.sum(0)))
    if n_boot <= 0:
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(r, minlength=len(seeds)) for r in rng.integers(0, len(seeds), (n_boot, len(seeds)))])
    reps = slope(counts @ stats)
    lo, hi = np.nanpercentile(reps, [50 * (1 - ci), 50 * (1 + ci)])
    return point, float(lo), float(hi)


def _median_ci(values: np.ndarray, n_boot: int, ci: float, seed: int = 0) -> tuple[float, float, float]:
    if len(values) == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    reps = np.median(values[rng.integers(0, len(values), (max(n_boot, 1), len(values)))], axis=1)
    lo, hi = np.percentile(reps, [50 * (1 - ci), 50 * (1 + ci)])
    return float(np.median(values)), float(lo), float(hi)


def verdicts(trials: pl.DataFrame, m_star: pl.DataFrame, n_boot: int = 1000, ci: float = 0.95) -> list[dict]:
    """S1-S4, each a dict with ``claim``, ``statistic``, ``interval``, ``verdict``
    (supported / not supported / inconclusive) and ``why``."""
    done = with_student(trials).filter(pl.col("status") == "done").collect()
    return [_s1(done, n_boot, ci), _s2(m_star), _s3(done, n_boot, ci), _s4(done, n_boot, ci)]


def _verdict(claim, statistic, interval, verdict, why) -> dict:
    return dict(claim=claim, statistic=statistic, interval=interval, verdict=verdict, why=why)


def _s1(done: pl.DataFrame, n_boot: int, ci: float) -> dict:
    claim = "S1: the inner-product student is exactly O(d)-equivariant; the generic one is not"
    orth = done.filter(pl.col("student") == "inner-product")["eq_error_max"].drop_nulls()
    generic = done.filter((pl.col("student") == "transformer") & (pl.col("teacher") == "equivariant"))
    if orth.is_empty() or generic.is_empty():
        return _verdict(claim, "-", "-", "inconclusive",
                        "needs inner-product trials and generic transformer trials on the equivariant teacher")
    e_max = float(orth.max())
    small = generic.filter(pl.col("m") == generic["m"].min())["eq_error_median"].drop_nulls().to_numpy()
    med, lo, hi = _median_ci(small, n_boot, ci)
    ok = e_max < ROUNDOFF and lo >= GAP * max(e_max, 1e-300)
    return _verdict(
        claim, f"max float64 E (inner-product, all trials) = {e_max:.2e}; median E (transformer, equivariant "
        f"teacher, m={generic['m'].min()}) = {med:.2e}",
        f"transformer median E CI {lo:.2e} .. {hi:.2e}", "supported" if ok else "not supported",
        f"needs max E < {ROUNDOFF:g} and the generic median E at least {GAP:g} times larger",
    )


def _s2(m_star: pl.DataFrame) -> dict:
    claim = "S2: the inner-product student needs fewer samples on the equivariant teacher, not on the control"
    parts, ok, missing, unknown = [], True, False, []
    for teacher, should_win in (("equivariant", True), ("control", False)):
        t = m_star.filter(pl.col("teacher") == teacher)
        orth = t.filter(pl.col("student") == "inner-product")
        others = t.filter(pl.col("student").is_in(["transformer", "mlp"]))
        if orth.is_empty() or others.is_empty():
            missing = True
            continue
        o = orth.row(0, named=True)
        for r in others.iter_rows(named=True):
            parts.append(f"{teacher}: inner-product {_m(o)} vs {r['student']} {_m(r)}")
            if should_win and o["censored"] == "above" and r["censored"] == "above":
                unknown.append(r["student"])  # both beyond the grid: no order can be read off
                continue
            wins = _below(o, r)
            ok &= wins if should_win else not wins
    if missing and not parts:
        return _verdict(claim, "-", "-", "inconclusive", "needs inner-product, transformer and MLP trials on both teachers")
    verdict = "not supported" if not ok else ("inconclusive" if missing or unknown else "supported")
    return _verdict(claim, "; ".join(parts), "m* with 95% CI per student", verdict,
                    "wins = its interval lies below the other's (or the other's m* is beyond the grid); a "
                    "zero-width bootstrap interval is widened to the two m tried that bracket it"
                    + ("; a teacher is missing" if missing else "")
                    + (f"; on the equivariant teacher both m* are beyond the grid for {', '.join(unknown)}"
                       if unknown else ""))


def _below(a: dict, b: dict) -> bool:
    """Whether cell a's m* is clearly below cell b's: intervals apart (a zero-width one is
    already the grid bracket, :func:`critical_sizes`) and the grid m* (the first m where half
    the seeds succeed) ordered too."""
    if a["censored"] == "above":
        return False
    if b["censored"] == "above":
        return True
    return a["ci_hi"] < b["ci_lo"] and a["m_star_grid"] < b["m_star_grid"]


def _m(r: dict) -> str:
    if r["censored"]:
        return format_m_star(r["m_star"], r["censored"], r["m_min"], r["m_max"])
    return f"{r['m_star']:.0f} ({r['ci_lo']:.0f} .. {r['ci_hi']:.0f})"


def _slope_verdict(claim: str, rows: pl.DataFrame, column: str, n_boot: int, ci: float) -> dict:
    if rows.is_empty():
        return _verdict(claim, "-", "-", "inconclusive", "no trials of that student on the equivariant teacher")
    b, lo, hi = log_slope(rows, column, n_boot, ci)
    if math.isnan(b):
        return _verdict(claim, "-", "-", "inconclusive", "needs two or more values of m")
    verdict = "supported" if hi < 0 else ("not supported" if lo >= 0 else "inconclusive")
    return _verdict(claim, f"slope of log10 {column} on log10 m = {b:.2f}", f"CI {lo:.2f} .. {hi:.2f}", verdict,
                    "supported when the whole interval is below 0")


def _s3(done: pl.DataFrame, n_boot: int, ci: float) -> dict:
    rows = done.filter((pl.col("student") == "transformer") & (pl.col("teacher") == "equivariant"))
    return _slope_verdict("S3: the generic transformer's O(d) equivariance error falls as m grows",
                          rows, "eq_error_median", n_boot, ci)


def _s4(done: pl.DataFrame, n_boot: int, ci: float) -> dict:
    rows = done.filter((pl.col("student") == "transformer") & (pl.col("teacher") == "equivariant"))
    return _slope_verdict("S4: the generic transformer's permutation equivariance error falls as m grows",
                          rows, "perm_error_median", n_boot, ci)
