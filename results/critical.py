"""The critical sample size m* of a cell, with a bootstrap interval over seeds.

Definition (used everywhere in attnsweep; docs/claims.md section 1a):

* A trial *succeeds* when it finished training (status ``done``) with test accuracy
  >= ``acc_threshold`` (default 0.95). Diverged trials count as failures. Failed trials
  (no training happened, e.g. no unambiguous training set could be drawn) are left out.
* A *cell* is every setting but m and the seed. Its success rate at m is the fraction
  of its seeds that succeed.
* ``m_star_grid``: the smallest m of the grid whose success rate is >= ``success_frac``
  (default 1/2).
* ``m_star``: the refinement: a logistic fit of success on ln m,
  P(success | m) = sigmoid(a + b (ln m - mean ln m)), by penalised maximum likelihood
  (ridge ``RIDGE`` on a and b, which keeps the fit finite when the outcomes separate
  perfectly), and m* solves P = success_frac: ln m* = mean ln m + (logit(frac) - a) / b.
  It is clamped to the grid's range. When b <= 0 the fit says nothing, and m_star is
  m_star_grid.
* ``censored``: ``"above"`` when no m reaches the rate (m* > max m; m_star is NaN),
  ``"below"`` when the smallest m already does (m* <= min m; m_star is min m).
* ``ci_lo``/``ci_hi``: percentile bootstrap interval: the seeds of the cell are resampled
  with replacement (each seed keeps its outcomes at every m) ``n_boot`` times and m* is
  recomputed; a replicate censored above counts as +inf, and the percentiles are
  order statistics (no interpolation, so an interval end is +inf rather than NaN).
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import polars as pl

RIDGE = 1e-2
NEWTON_STEPS = 60

SUCCESS_STATUSES = ("done",)
TRAINED_STATUSES = ("done", "diverged")


def outcomes(trials: pl.LazyFrame | pl.DataFrame, acc_threshold: float = 0.95,
             success: pl.Expr | None = None) -> pl.LazyFrame:
    """The trials that trained, with a boolean ``success`` column.

    Args:
        acc_threshold: success is ``test_acc >= acc_threshold`` ...
        success: ... unless this expression says otherwise (e.g. a test error below a target).
    """
    reached = success if success is not None else pl.col("test_acc") >= acc_threshold
    return (
        trials.lazy()
        .filter(pl.col("status").is_in(TRAINED_STATUSES))
        .with_columns(success=(pl.col("status") == "done") & reached.fill_null(False))
    )


def success_rates(trials: pl.LazyFrame | pl.DataFrame, cell: list[str], acc_threshold: float = 0.95,
                  success: pl.Expr | None = None) -> pl.DataFrame:
    """Success rate per (cell, m): columns ``cell + [m, n, k, rate]`` (trials, successes)."""
    return (
        outcomes(trials, acc_threshold, success)
        .group_by([*cell, "m"])
        .agg(n=pl.len(), k=pl.col("success").sum(), rate=pl.col("success").mean())
        .sort([*cell, "m"])
        .collect()
    )


def critical_sample_sizes(
    trials: pl.LazyFrame | pl.DataFrame,
    cell: list[str],
    *,
    acc_threshold: float = 0.95,
    success_frac: float = 0.5,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    success: pl.Expr | None = None,
) -> tuple[pl.DataFrame, dict[tuple, np.ndarray]]:
    """m* per cell with its bootstrap interval.

    Args:
        trials: rows with the ``cell`` columns, ``m``, ``seed``, ``status``, ``test_acc``.
        cell: the columns that identify a cell (every setting but m and seed).
        acc_threshold: test accuracy a trial must reach to succeed.
        success_frac: success rate that defines m*.
        n_boot: bootstrap replicates (0: no interval).
        ci: coverage of the interval.
        seed: seeds the bootstrap; each cell's resampling generator is seeded by ``seed``
            and its cell values, so a cell's interval depends neither on the order of the
            rows (which the store does not fix) nor on the other cells of the table.
        success: success expression replacing ``test_acc >= acc_threshold`` (see outcomes).

    Returns:
        ``(table, replicates)``: one row per cell with ``cell`` columns, ``m_star``,
        ``m_star_grid``, ``ci_lo``, ``ci_hi``, ``censored``, ``n_seeds``, ``m_min``,
        ``m_max``, ``n_trials``; and the ``(n_boot,)`` bootstrap m* of each cell, keyed by
        the tuple of its cell values.
    """
    data = outcomes(trials, acc_threshold, success).select([*cell, "m", "seed", "success"]).collect()
    out, reps = [], {}
    for key, group in data.group_by(cell, maintain_order=True):
        rng = np.random.default_rng([seed, _cell_hash(key)])
        ms = np.sort(group["m"].unique().to_numpy())
        seeds = group["seed"].unique().sort().to_numpy()
        # (seeds, ms) outcome matrix; NaN where a seed has no trained trial at that m.
        mat = np.full((len(seeds), len(ms)), np.nan)
        si = np.searchsorted(seeds, group["seed"].to_numpy())
        mi = np.searchsorted(ms, group["m"].to_numpy())
        mat[si, mi] = group["success"].to_numpy().astype(float)
        k = np.nansum(mat, 0)[None]
        n = np.sum(~np.isnan(mat), 0)[None]
        point = _m_star(ms, k, n, success_frac)
        row = dict(zip(cell, key))
        row.update(
            m_star=point["m_star"][0], m_star_grid=point["m_star_grid"][0],
            censored=point["censored"][0], n_seeds=len(seeds), m_min=int(ms[0]),
            m_max=int(ms[-1]), n_trials=len(group),
        )
        if n_boot > 0:
            pick = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
            # A replicate's k and n are sums over its resampled seeds: how often it drew
            # each seed times that seed's outcomes, one (n_boot, seeds) @ (seeds, 2 ms)
            # product instead of an (n_boot, seeds, ms) copy. The sums are of small
            # integers, so exact in floating point in any order: the same k and n.
            S = len(seeds)
            counts = np.bincount((pick + S * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * S)
            trained = ~np.isnan(mat)
            both = counts.reshape(n_boot, S).astype(float) @ np.concatenate([np.where(trained, mat, 0.0), trained], 1)
            bk, bn = both[:, : len(ms)], both[:, len(ms):].astype(np.int64)
            b = _m_star(ms, bk, bn, success_frac)
            vals = np.where(b["censored"] == "above", np.inf, b["m_star"])
            lo, hi = percentile_interval(vals, ci)
            row.update(ci_lo=lo, ci_hi=hi)
            reps[tuple(key)] = vals
        else:
            row.update(ci_lo=math.nan, ci_hi=math.nan)
        out.append(row)
    schema_extra = {"m_star": pl.Float64, "m_star_grid": pl.Float64, "ci_lo": pl.Float64, "ci_hi": pl.Float64}
    table = pl.DataFrame(out, infer_schema_length=None) if out else pl.DataFrame(schema={**{c: data.schema[c] for c in cell}, **schema_extra})
    return table, reps


def percentile_interval(values: np.ndarray, ci: float) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates ``values`` ``(R,)`` with coverage
    ``ci``, as order statistics (no interpolation: an end may be +-inf, never NaN from
    inf - inf); NaN replicates are left out, and with none left both ends are NaN."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan, math.nan
    q = [round(50 * (1 - ci), 9), round(50 * (1 + ci), 9)]  # 2.4999.. would pick another order statistic
    with np.errstate(invalid="ignore"):  # inf - inf between censored replicates
        lo, hi = np.percentile(values, q, method="inverted_cdf")
    return float(lo), float(hi)


def format_m_star(m_star: float | None, censored: str | None, m_min: int | None = None, m_max: int | None = None,
                  digits: int = 1) -> str:
    """An m* as every table and verdict writes it: ``≤ 8`` at or below the smallest m tried
    (``m_min`` = 8; the m* itself where ``m_min`` is not known), ``> 1024`` beyond the largest
    (``> max`` where ``m_max`` is not known), else the value to ``digits`` decimals (``-``
    where there is none, e.g. a cell not checked)."""
    if censored == "above":
        return f"> {m_max}" if m_max is not None else "> max"
    if censored == "below":
        return f"≤ {m_min if m_min is not None else f'{m_star:.0f}'}"
    return "-" if m_star is None or math.isnan(m_star) else f"{m_star:.{digits}f}"


def _cell_hash(key: tuple) -> int:
    """A 63-bit integer naming a cell's values, the same in every process (unlike hash())."""
    text = json.dumps([v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for v in key])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def _m_star(ms: np.ndarray, k: np.ndarray, n: np.ndarray, frac: float) -> dict[str, np.ndarray]:
    """m* for R replicates at once.

    Args:
        ms: ``(K,)`` sorted sample sizes; k, n: ``(R, K)`` successes and trials.

    Returns:
        ``m_star`` ``(R,)`` float, ``m_star_grid`` ``(R,)`` float, ``censored`` ``(R,)`` str.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    reached = rate >= frac  # NaN compares False
    any_reached = reached.any(1)
    first = np.argmax(reached, 1)
    grid = np.where(any_reached, ms[first].astype(float), np.nan)
    censored = np.where(~any_reached, "above", np.where(first == 0, "below", ""))

    x = np.log(ms.astype(float))
    xbar = x.mean()
    a, b = _logistic_fit(x - xbar, k, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_m = xbar + (math.log(frac / (1 - frac)) - a) / b
    fit = np.exp(np.clip(log_m, x[0], x[-1]))
    m_star = np.where(b > 0, fit, grid)
    m_star = np.where(censored == "above", np.nan, np.where(censored == "below", float(ms[0]), m_star))
    return {"m_star": m_star, "m_star_grid": grid, "censored": censored}


def _logistic_fit(xc: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ridge-penalised binomial logistic regression of k/n on xc, by Newton's method,
    vectorised over replicates: xc ``(K,)``; k, n ``(R, K)``; returns a, b ``(R,)``."""
    R = k.shape[0]
    a, b = np.zeros(R), np.zeros(R)
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(a[:, None] + b[:, None] * xc)))
        r = k - n * p
        w = n * p * (1 - p)
        ga, gb = r.sum(1) - RIDGE * a, (r * xc).sum(1) - RIDGE * b
        haa, hab, hbb = w.sum(1) + RIDGE, (w * xc).sum(1), (w * xc * xc).sum(1) + RIDGE
        det = haa * hbb - hab * hab
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        a, b = a + da, b + db
        if np.max(np.abs(da) + np.abs(db)) < 1e-10:
            break
    return a, b
