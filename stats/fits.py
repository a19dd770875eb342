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
            model=model,
            a=a,
            b=b,
            r2=1 - rss / tss if tss > 0 else math.nan,
            aic=ll_term + 2 * K_PARAMS,
            bic=ll_term + K_PARAMS * math.log(n),
            n_points=n,
            a_lo=math.nan,
            a_hi=math.nan,
            b_lo=math.nan,
            b_hi=math.nan,
        )
        if replicates is not None:
            good = replicates[np.all(np.isfinite(replicates), axis=1)]
            if len(good) >= 20:
                params = np.array([fit_growth(T, r, model) for r in good[:400]])
                q = [50 * (1 - ci), 50 * (1 + ci)]
                row.update(
                    a_lo=float(np.percentile(params[:, 0], q[0])),
                    a_hi=float(np.percentile(params[:, 0], q[1])),
                    b_lo=float(np.percentile(params[:, 1], q[0])),
                    b_hi=float(np.percentile(params[:, 1], q[1])),
                )
        rows.append(row)
    table = pl.DataFrame(rows).sort("aic")
    return table.with_columns(delta_aic=pl.col("aic") - pl.col("aic").min())


SCALES = ("m", "ln m")
"""The scales a robustness check fits on: least squares on m* itself, and on ln m* (each
law's prediction's logarithm against ln m*: the same laws, the errors taken as relative)."""
MIN_LAW_POINTS = 5
"""Exact cells below which no growth law is named: with three parameters per law (two and
the noise variance) AICc = AIC + 2k(k+1)/(n-k-1) is undefined at n <= 4 (Hurvich & Tsai,
Biometrika 76, 1989)."""


def aicc(rss: float, n: int, k: int = K_PARAMS) -> float:
    """Small-sample AIC of a least-squares fit: n ln(RSS/n) + 2k + 2k(k+1)/(n-k-1) (Hurvich &
    Tsai 1989; Burnham & Anderson 2002, eq. 2.2); NaN where n - k - 1 <= 0."""
    if n - k - 1 <= 0:
        return math.nan
    return n * math.log(max(rss, 1e-12) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def fit_growth_log(T: np.ndarray, m_star: np.ndarray, model: str) -> tuple[float, float] | None:
    """Least-squares parameters of one law fitted on the ln m* scale: minimise
    sum (ln m* - ln f(T))^2 from the m*-scale fit; None where the law cannot be positive at
    every T (a log or linear law through zero), so that no logarithm of it exists.

    Raises:
        ValueError: unknown model.
    """
    from scipy.optimize import least_squares

    T, y = np.asarray(T, float), np.asarray(m_star, float)
    start = np.array(fit_growth(T, y, model))
    ly = np.log(y)

    def resid(p: np.ndarray) -> np.ndarray:
        f = predict(model, (p[0], p[1]), T)
        return ly - np.log(np.maximum(f, 1e-12))

    if np.any(predict(model, tuple(start), T) <= 0):  # start from the fit through the points' logs
        start = np.array([y.min(), 0.0]) if model in ("log", "linear") else start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = least_squares(resid, start, method="lm", max_nfev=4000)
    if np.any(predict(model, tuple(sol.x), T) <= 0):
        return None
    return float(sol.x[0]), float(sol.x[1])


def variant_aicc(T: np.ndarray, m_star: np.ndarray, scale: str) -> dict[str, float]:
    """AICc of each law (:data:`MODELS`) fitted on ``scale`` (:data:`SCALES`) to ``(T, m*)``
    ``(n,)``; +inf for a law with no fit on that scale, NaN for every law when n <= 4.

    Every law has the same number of parameters, so within one variant the AICc ranking is
    the AIC ranking; AICc is what makes the margin between two laws honest at small n.
    """
    T, y = np.asarray(T, float), np.asarray(m_star, float)
    n, out = len(T), {}
    for model in MODELS:
        if scale == "m":
            rss = float(np.sum((y - predict(model, fit_growth(T, y, model), T)) ** 2))
        elif scale == "ln m":
            params = fit_growth_log(T, y, model)
            if params is None:
                out[model] = math.inf
                continue
            rss = float(np.sum((np.log(y) - np.log(predict(model, params, T))) ** 2))
        else:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        out[model] = aicc(rss, n)
    return out


def robust_law(
    T: np.ndarray,
    m_star: np.ndarray,
    rivals: tuple[str, ...] = ("linear", "power", "polylog"),
    margin: float = 2.0,
    law: str = "log",
) -> dict:
    """Which growth law the cells name robustly, and how far the log law trails.

    Variants: each scale of :data:`SCALES`, with all cells and with each T left out in turn
    (2 (n + 1) fits of every law). A law is named when it has the lowest AICc in every
    variant; else the reading is ``"undecided"``. Below :data:`MIN_LAW_POINTS` cells no law
    is named (``"too few cells"``). A left-out variant with n - 1 = 4 cells has no AICc; its
    ranking is then by the least-squares term alone (the same for every law's k).

    The log law's deficit in a variant: the AICc (or that ranking term) of the log law minus
    that of the best of ``rivals`` (> 0: the log law trails). ``direction``: ``"faster than
    log"`` when the log law trails by at least ``margin`` in every variant, ``"log"`` when it
    leads by at least ``margin`` in every variant, else ``"undecided"``.

    Args:
        T, m_star: ``(n,)`` distinct context lengths and their exact m* (> 0).
        rivals: the laws the log law is measured against (linear and power always; polylog
            when its exponent's interval lies above 1, as L1 decides).
        margin: AICc units that decide (Burnham & Anderson 2002, section 2.6).
        law: the law whose deficit is measured (default log, L1's; a spec's growth claim names
            another, stats/own_claims.py); the keys keep the name ``log_deficit``.

    Returns:
        ``law`` (a model name, ``"undecided"`` or ``"too few cells"``), ``winners`` (per
        variant, e.g. ``{"m, all": "power", "ln m, without T=512": "polylog"}``),
        ``log_deficit`` (the full-data variant on the m* scale), ``log_deficit_min`` and
        ``log_deficit_max`` over the variants, ``direction``, ``n_variants``, ``n_points``.
    """
    T, y = np.asarray(T, float), np.asarray(m_star, float)
    n = len(T)
    out = dict(
        law="too few cells",
        winners={},
        log_deficit=math.nan,
        log_deficit_min=math.nan,
        log_deficit_max=math.nan,
        direction="undecided",
        n_variants=0,
        n_points=n,
    )
    if n < 3:
        return out
    deficits, winners = [], {}
    for scale in SCALES:
        drops = [None] + (list(range(n)) if n - 1 >= 3 else [])
        for drop in drops:
            keep = np.arange(n) != (-1 if drop is None else drop)
            scores = variant_aicc(T[keep], y[keep], scale)
            if any(math.isnan(v) for v in scores.values()):  # n <= 4: rank by the least-squares term
                scores = _ls_term(T[keep], y[keep], scale)
            name = f"{scale}, " + ("all" if drop is None else f"without T={T[drop]:g}")
            winners[name] = min(scores, key=scores.get)
            deficits.append(scores[law] - min(scores[m] for m in rivals))
    out.update(
        winners=winners,
        log_deficit=deficits[0],
        log_deficit_min=float(min(deficits)),
        log_deficit_max=float(max(deficits)),
        n_variants=len(deficits),
    )
    if min(deficits) >= margin:
        out["direction"] = "faster than log"
    elif max(deficits) <= -margin:
        out["direction"] = "log"
    if n >= MIN_LAW_POINTS:
        names = set(winners.values())
        out["law"] = names.pop() if len(names) == 1 else "undecided"
    return out


def _ls_term(T: np.ndarray, y: np.ndarray, scale: str) -> dict[str, float]:
    """n ln(RSS/n) of each law on ``scale``: the part of AIC that differs between laws."""
    n, out = len(T), {}
    for model in MODELS:
        if scale == "m":
            rss = float(np.sum((y - predict(model, fit_growth(T, y, model), T)) ** 2))
        else:
            params = fit_growth_log(T, y, model)
            rss = math.inf if params is None else float(np.sum((np.log(y) - np.log(predict(model, params, T))) ** 2))
        out[model] = n * math.log(max(rss, 1e-12) / n) if math.isfinite(rss) else math.inf
    return out
