"""Growth laws of m* against the context length T, compared by AIC and BIC.

Four models of m*(T) (docs/claims.md section 1a, verdict L1):

* ``log``:     m* = a + b ln T     (Edelman et al., ICML 2022, Theorem 4.2: sample
  complexity of bounded-norm attention grows like log T)
* ``polylog``: m* = a (ln T)^k     (growth polynomial in log T: k = 1 is log growth through
  the origin, k > 1 faster than any log law, slower than any power of T)
* ``linear``:  m* = a + b T        (what the MLP baseline's capacity suggests)
* ``power``:   m* = a T^c          (slow power-law growth; log growth looks like c -> 0)

Each is fit by least squares on the m* scale (the power and polylog laws by
``scipy.optimize.curve_fit`` started from the regression of ln m* on ln T, respectively on
ln ln T), so all four share one Gaussian likelihood and
AIC = n ln(RSS/n) + 2k, BIC = n ln(RSS/n) + k ln n with k = 3 (two parameters plus the
noise variance) are comparable. Parameter intervals are percentile intervals of the fits
to the bootstrap replicates of m* (one replicate = one resample of seeds in every cell).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
from scipy.optimize import curve_fit

MODELS = ("log", "polylog", "linear", "power")
K_PARAMS = 3


def fit_growth(T: np.ndarray, m_star: np.ndarray, model: str) -> tuple[float, float]:
    """Least-squares parameters ``(a, b)`` of one model (``(a, c)`` for the power law,
    ``(a, k)`` for the polylog law).

    Args:
        T: ``(n,)`` context lengths (> 1 for the polylog law); m_star: ``(n,)`` critical
            sample sizes (finite).

    Raises:
        ValueError: unknown model.
    """
    T, y = np.asarray(T, float), np.asarray(m_star, float)
    if model in ("log", "linear"):
        x = np.log(T) if model == "log" else T
        b, a = np.polyfit(x, y, 1)
        return float(a), float(b)
    if model in ("power", "polylog"):
        x = np.log(T) if model == "power" else np.log(np.log(T))  # m* = a X^c with X = T or ln T
        c0, loga0 = np.polyfit(x, np.log(np.maximum(y, 1e-9)), 1)
        X = np.exp(x)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (a, c), _ = curve_fit(lambda t, a, c: a * t**c, X, y, p0=(math.exp(loga0), c0), maxfev=2000)
        except RuntimeError:
            a, c = math.exp(loga0), c0
        return float(a), float(c)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def predict(model: str, params: tuple[float, float], T: np.ndarray) -> np.ndarray:
    """m* predicted by a fitted model at ``T`` ``(n,)``.

    Raises:
        ValueError: unknown model.
    """
    a, b = params
    T = np.asarray(T, float)
    if model == "log":
        return a + b * np.log(T)
    if model == "linear":
        return a + b * T
    if model == "power":
        return a * T**b
    if model == "polylog":
        return a * np.log(T) ** b
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def compare_growth(
    T: np.ndarray, m_star: np.ndarray, replicates: np.ndarray | None = None, ci: float = 0.95
) -> pl.DataFrame:
    """Fit the four models and rank them.

    Args:
        T: ``(n,)`` distinct context lengths; m_star: ``(n,)`` m* (finite).
        replicates: optional ``(R, n)`` bootstrap m*; rows with a non-finite entry are
            skipped.
        ci: coverage of the parameter intervals.

    Returns:
        One row per model: ``model``, ``a``, ``b`` (c for ``power``, k for ``polylog``), ``a_lo``, ``a_hi``,
        ``b_lo``, ``b_hi``, ``r2``, ``aic``, ``bic``, ``delta_aic`` (to the best),
        ``n_points``, sorted by AIC.
    """
    T, y = np.asarray(T, float), np.asarray(m_star, float)
    n = len(T)
    rows = []
    tss = float(np.sum((y - y.mean()) ** 2))
    for model in MODELS:
        a, b = fit_growth(T, y, model)
        rss = float(np.sum((y - predict(model, (a, b), T)) ** 2))
        ll_term = n * math.log(max(rss, 1e-12) / n)
        row = dict(
            model=model, a=a, b=b, r2=1 - rss / tss if tss > 0 else math.nan,
            aic=ll_term + 2 * K_PARAMS, bic=ll_term + K_PARAMS * math.log(n), n_points=n,
            a_lo=math.nan, a_hi=math.nan, b_lo=math.nan, b_hi=math.nan,
        )
        if replicates is not None:
            good = replicates[np.all(np.isfinite(replicates), axis=1)]
            if len(good) >= 20:
                params = np.array([fit_growth(T, r, model) for r in good[:400]])
                q = [50 * (1 - ci), 50 * (1 + ci)]
                row.update(
                    a_lo=float(np.percentile(params[:, 0], q[0])), a_hi=float(np.percentile(params[:, 0], q[1])),
                    b_lo=float(np.percentile(params[:, 1], q[0])), b_hi=float(np.percentile(params[:, 1], q[1])),
                )
        rows.append(row)
    table = pl.DataFrame(rows).sort("aic")
    return table.with_columns(delta_aic=pl.col("aic") - pl.col("aic").min())
