"""How much of its norm bound a trained head uses: whether the bound binds, and the norm that
success needs as T grows (docs/claims.md 1a).

Edelman et al. (ICML 2022, Theorem 4.2) bound the sample complexity of an attention head by
the norms of W_Q W_K^T, W_V and the readout, with log T growth *at a fixed bound*. Two
numbers per cell say whether an experiment sits in that regime:

* ``at_bound``: the fraction of trained trials with some bounded matrix at its bound (its
  achieved norm within ``TOLERANCE`` of B, relative): near 1, the bound binds and the class is
  the bounded one; near 0, the bound was not felt and the cell is effectively unbounded;
* ``min_norm_qk``: the smallest achieved ||W_Q,h^T W_K,h|| (max over heads) among the
  trials that succeeded: the norm that generalising needed at this T.

* ``margin_success`` and ``margin_failure``: the median normalised training margin
  (workers/margins.py: the margin relative to the norms the capacity bound counts) of the
  trials that succeeded and of those that did not; null where the rows carry no margins.

* ``fit_at_m_max``: the fraction of trained trials at the cell's largest m that fit their
  training set (training accuracy 1): where a bound is set, m* is beyond the grid and fewer
  than half of them fit, the bounded model did not fit the task within its epochs
  (:func:`fit_limits`).

Across T, ``min_norm_qk`` against ln T (least squares, :func:`norm_growth`) says how fast the
needed norm grows: a slope above 0 means a fixed bound holds only up to some T, beyond which
the class cannot represent the target at all (a representability limit, not a sample count).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy import stats

TOLERANCE = 1e-3
"""A matrix sits at the bound when its achieved norm is at least (1 - TOLERANCE) B: the
projection rescales onto the sphere of radius B, so a bound that binds leaves exactly B,
up to float32 rounding of the norm (1e-6) and of the rescaled weights."""

BOUNDED = ("norm_qk", "norm_v", "norm_readout")
"""The achieved norms of the matrices a norm bound covers (workers/norms.py)."""


def norm_use(rows: pl.DataFrame, cell: list[str], acc_threshold: float) -> pl.DataFrame:
    """Per cell, how the trained trials used their norm bound.

    Args:
        rows: trial rows with ``cell`` columns, ``status``, ``test_acc``, ``norm_bound`` and
            the achieved norms :data:`BOUNDED` (null where a model has no such matrix).
        cell: the settings that make a cell (every one but m and the seed).
        acc_threshold: the test accuracy that counts as success (analysis.acc_threshold).

    Returns:
        One row per cell: the ``cell`` columns, ``n_trained`` (trials done), ``at_bound``
        (fraction of them with a bounded matrix at the bound; null without a bound),
        ``min_norm_qk`` (smallest ||W_Q,h^T W_K,h|| among the successful; null when none
        succeeded), ``margin_success`` and ``margin_failure`` (median normalised margin of the
        successful and of the other trained trials; null without margins), ``n_success`` and ``fit_at_m_max`` (fraction of the trials at the cell's
        largest m with training accuracy 1; null without ``m`` and ``train_acc``).
    """
    done = rows.filter(pl.col("status") == "done")
    norms = [pl.col(c) for c in BOUNDED if c in done.columns]
    if done.is_empty() or not norms:
        return pl.DataFrame(
            schema={
                **{c: rows.schema[c] for c in cell},
                "n_trained": pl.UInt32,
                "at_bound": pl.Float64,
                "min_norm_qk": pl.Float64,
                "margin_success": pl.Float64,
                "margin_failure": pl.Float64,
                "n_success": pl.UInt32,
                "fit_at_m_max": pl.Float64,
            }
        )
    # The largest achieved norm over the bounded matrices, relative to the bound.
    used = pl.max_horizontal(norms) / pl.col("norm_bound")
    success = pl.col("test_acc") >= acc_threshold
    margin = pl.col("margin_normalised") if "margin_normalised" in done.columns else pl.lit(None, pl.Float64)
    fit = (
        (pl.col("train_acc") >= 1.0).filter(pl.col("m") == pl.col("m").max()).mean()
        if {"m", "train_acc"} <= set(done.columns)
        else pl.lit(None, pl.Float64)
    )
    return (
        done.group_by(cell, maintain_order=True)
        .agg(
            n_trained=pl.len(),
            at_bound=pl.when(pl.col("norm_bound").is_not_null().all())
            .then((used >= 1 - TOLERANCE).mean())
            .otherwise(None),
            min_norm_qk=pl.col("norm_qk").filter(success).min(),
            margin_success=margin.filter(success).median().cast(pl.Float64),
            margin_failure=margin.filter(~success).median().cast(pl.Float64),
            n_success=success.sum().cast(pl.UInt32),
            fit_at_m_max=fit.cast(pl.Float64),
        )
        .sort(cell, nulls_last=True)
    )


def fit_limits(m_star: pl.DataFrame) -> pl.DataFrame:
    """The cells where a norm-bounded model could not fit the task: a bound is set, m* is
    beyond the grid (``bound`` "lower" or "none": no m tried reached the success rate), and
    fewer than half the trials at the largest m fit their own training set, with the spec's
    epochs and, where the budget check ran, with twice them (``fit_at_m_max_2x``).

    Such a cell's m* was not measured: the bounded model did not fit m samples within its
    epochs, either because no head within the bound represents the target at this T (a
    representability limit) or because training did not find one (an optimisation limit); the
    rows cannot tell the two apart, and a larger share fitting at twice the epochs points at
    training.

    Args:
        m_star: the analysis' m* table (``norm_bound``, ``bound``, ``fit_at_m_max`` and,
            where present, ``fit_at_m_max_2x``).

    Returns:
        Its rows that are such cells (maybe none).
    """
    needed = {"norm_bound", "bound", "fit_at_m_max"}
    if m_star.is_empty() or not needed <= set(m_star.columns):
        return m_star.clear()
    twice = pl.col("fit_at_m_max_2x") if "fit_at_m_max_2x" in m_star.columns else pl.lit(None, pl.Float64)
    return m_star.filter(
        pl.col("norm_bound").is_not_null()
        & pl.col("bound").is_in(["lower", "none"])
        & (pl.col("fit_at_m_max") < 0.5)
        & (twice.is_null() | (twice < 0.5))
    )


def norm_growth(T: np.ndarray, norm: np.ndarray, ci: float = 0.95) -> dict:
    """The least-squares line ``norm = a + b ln T`` over the T where a norm was measured.

    Args:
        T: ``(n,)`` context lengths; norm: ``(n,)`` e.g. ``min_norm_qk`` (NaN: left out).
        ci: coverage of the slope's interval (Student's t with n - 2 degrees of freedom).

    Returns:
        ``a``, ``b`` (per unit of ln T), ``b_lo``, ``b_hi``, ``n_points``; NaN where fewer
        than 3 points leave no interval.
    """
    T, norm = np.asarray(T, float), np.asarray(norm, float)
    keep = np.isfinite(norm) & (T > 0)
    T, norm = T[keep], norm[keep]
    out = dict(a=math.nan, b=math.nan, b_lo=math.nan, b_hi=math.nan, n_points=int(len(T)))
    if len(np.unique(T)) < 3:
        return out
    fit = stats.linregress(np.log(T), norm)
    half = stats.t.ppf(0.5 + ci / 2, len(T) - 2) * fit.stderr
    return dict(
        out,
        a=float(fit.intercept),
        b=float(fit.slope),
        b_lo=float(fit.slope - half),
        b_hi=float(fit.slope + half),
    )
