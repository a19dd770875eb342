"""Epochs against T: how long a success took to train, and how many trials ran out.

An optimiser that needs more epochs as T grows, under a fixed epoch budget, makes m* grow
for reasons other than samples; these numbers let a reader see how much of that is in the
rows. Per cell (the rows m* was computed from):

* ``epochs_median``, ``epochs_q1``, ``epochs_q3``: the epochs a *success* (test accuracy at
  or above the threshold) trained for, median and quartiles;
* ``ran_out``: the share of the cell's trained trials (status ``done``) that stopped at
  ``max_epochs`` without converging (``converged`` false), at every m tried.

Along a series, the growth of the median epochs of a success against T is the OLS slope of
log10(median) on log10 T (median ~ T^slope), with a percentile interval over bootstrap
replicates that resample each cell's successes (Efron & Tibshirani, An Introduction to the
Bootstrap, 1993, ch. 13).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl


def epochs_by_cell(rows: pl.DataFrame, threshold: float) -> dict:
    """Epoch numbers of one cell's rows.

    Args:
        rows: the cell's trial rows (columns ``status``, ``test_acc``, ``epochs``,
            ``converged``).
        threshold: the test accuracy that counts as a success.

    Returns:
        ``n_trained``, ``n_success``, ``epochs_median``, ``epochs_q1``, ``epochs_q3`` (NaN
        without a success), ``ran_out`` (share, NaN without a trained trial) and
        ``success_epochs`` (the successes' epochs, a list of int).
    """
    done = rows.filter(pl.col("status") == "done")
    wins = done.filter(pl.col("test_acc") >= threshold)["epochs"].drop_nulls().to_numpy().astype(float)
    out = dict(
        n_trained=done.height,
        n_success=int(wins.size),
        epochs_median=math.nan,
        epochs_q1=math.nan,
        epochs_q3=math.nan,
        ran_out=math.nan,
        success_epochs=[int(e) for e in wins],
    )
    if wins.size:
        q1, med, q3 = np.percentile(wins, [25, 50, 75])
        out.update(epochs_median=float(med), epochs_q1=float(q1), epochs_q3=float(q3))
    if done.height:
        out["ran_out"] = float((~done["converged"].fill_null(False)).mean())
    return out


def epoch_growth(
    T: np.ndarray,
    success_epochs: list[np.ndarray],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> dict:
    """Median epochs of a success against T: median ~ T^slope.

    Args:
        T: ``(n,)`` context lengths; success_epochs: per T, the successes' epochs ``(k_i,)``
            (cells without a success are left out).
        n_boot: bootstrap replicates; ci: coverage of the interval; seed: the bootstrap's seed.

    Returns:
        ``slope``, ``ci_lo``, ``ci_hi`` (NaN with fewer than 3 cells), ``n_points``,
        ``T`` (the cells used).
    """
    keep = [i for i, e in enumerate(success_epochs) if len(e)]
    T = np.asarray(T, float)[keep]
    eps = [np.asarray(success_epochs[i], float) for i in keep]
    out = dict(slope=math.nan, ci_lo=math.nan, ci_hi=math.nan, n_points=len(keep), T=[float(t) for t in T])
    if len(keep) < 3:
        return out
    x = np.log10(T)
    w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)  # slope = w . y
    out["slope"] = float(w @ np.log10([np.median(e) for e in eps]))
    rng = np.random.default_rng(seed)
    meds = np.stack([np.median(rng.choice(e, size=(n_boot, e.size)), axis=1) for e in eps], 1)  # (n_boot, n)
    reps = np.log10(meds) @ w
    lo, hi = np.percentile(reps, [50 * (1 - ci), 50 * (1 + ci)])
    out.update(ci_lo=float(lo), ci_hi=float(hi))
    return out
