"""Verdicts L1-L4 and R of the sparse-Boolean experiment (docs/claims.md section 1a).

The claim under test (Edelman, Goel, Kakade, Zhang, "Inductive Biases and Variable Creation
in Self-Attention Mechanisms", ICML 2022, arXiv 2110.10090, Theorem 4.2 and section 5): a
bounded-norm self-attention head learns an s-sparse Boolean function of T bits from a number
of samples that grows like log T, times factors that grow with the norm bound B and with s;
an MLP on the flattened bits needs samples that grow like T.

Input: an m* table, one row per cell, as ``orchestrator.analyze.analyze_run(...).m_star``
returns it: cell columns (``task``, ``T``, ``s``, ``model``, ``norm_bound``, ...) and
``m_star``, ``ci_lo``, ``ci_hi``, ``censored`` ("", "above", "below"), ``m_min``, ``m_max``
(results/critical.py defines them). Two optional columns:

* ``replicates`` (list of float): the cell's bootstrap m* (seeds resampled; +inf for a
  replicate beyond the grid), attached by :func:`with_replicates`. Every interval here is a
  percentile interval over the replicate index r: replicate r of a statistic is the
  statistic computed from replicate r of every cell it uses (each cell's bootstrap is
  independent of the others', so this bootstraps the statistic). Without replicates the
  intervals are NaN and the verdicts inconclusive.
* ``budget`` ("ok", "budget-limited", "not checked"): a claim whose statistic uses a
  budget-limited cell is inconclusive and names it (such an m* measures the training budget,
  not the samples: docs/claims.md section 3); budget-limited cells it considered but did not use
  are named.

A cell's *value* is m*, +inf when censored above (m* beyond the largest m of the grid) and
m_min when censored below (m* <= m_min: an upper bound).

Each verdict is a dict like those of :func:`results.symmetry.verdicts`: ``claim``,
``statistic``, ``interval``, ``verdict`` ("supported", "not supported" or "inconclusive")
and ``why``. Where a claim can be judged on several series (e.g. transformer cells at two
norm bounds for L1), each is judged: the claim is supported when every judged series
supports it, not supported when any contradicts it, and inconclusive otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata

from results.critical import format_m_star
from results.fits import compare_growth

ATTENTION, BASELINE = "transformer", "mlp"
ARCH_FIELDS = ("model", "d", "layers", "heads", "mlp_width")
"""Settings of one architecture: cells that differ only in these are compared in L4."""
RESULT_COLUMNS = frozenset({"m_star", "m_star_grid", "ci_lo", "ci_hi", "censored", "n_seeds", "m_min", "m_max",
                            "n_trials", "series", "budget", "m_star_2x", "replicates", "run_id", "sweep",
                            "settings", "m_star_default", "m_star_tuned", "censored_default", "censored_tuned",
                            "tuning"})
"""Columns of an m* table that are not cell settings."""

MIN_DECADES = 3.0
"""L1 needs max T / min T >= 10^3 (docs/claims.md 1a: one decade cannot tell log from slow power-law growth)."""
MIN_POINTS = 3
"""Uncensored T a growth-law fit needs (L1), and T a trend of the L4 ratio needs."""
AIC_MARGIN = 2.0
"""A law 'beats' another when its AIC (and BIC) is lower by at least this much (Burnham &
Anderson, Model Selection and Multimodel Inference, 2002, section 2.6: within 2 units both
have substantial support)."""
R_RANGE = (100, 1100)
"""The T range of the paper's figure "Transformer, 3-way AND" (Edelman et al. 2022, section 5)."""
EQUIVALENCE = (0.8, 1.25)
"""Equivalence margin of R for the geometric-mean ratio ours/paper (docs/decisions.md, Issue 7)."""
REFERENCE_CSV = Path(__file__).parent / "data" / "edelman2022_fig_3way_and.csv"
"""Our read-off of the paper's figure (columns T, critical_m, err_lo, err_hi)."""

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"


def verdicts(m_star: pl.DataFrame, cell: list[str] | None = None, reference: Path | str = REFERENCE_CSV,
             ci: float = 0.95) -> list[dict]:
    """L1, L2, L3, L4 and R, in that order.

    Args:
        m_star: the m* table (see the module docstring), one row per cell.
        cell: its cell columns (default: every column not in ``RESULT_COLUMNS``).
        reference: the paper's read-off for R (see :func:`read_reference`).
        ci: coverage of the intervals.
    """
    cell = cell or cell_columns(m_star)
    return [l1_log_growth(m_star, cell, ci), l2_norm_bound(m_star, cell, ci), l3_sparsity(m_star, cell, ci),
            l4_mlp_baseline(m_star, cell, ci), r_reference(m_star, reference, cell, ci)]


def with_replicates(m_star: pl.DataFrame, replicates: dict[tuple, np.ndarray], cell: list[str]) -> pl.DataFrame:
    """Attach each cell's bootstrap m* as a ``replicates`` list column (null where missing).

    Args:
        replicates: ``(n_boot,)`` arrays keyed by the tuple of the cell's ``cell`` values, as
            the second value :func:`results.critical.critical_sample_sizes` returns.
    """
    keys = (tuple(r) for r in m_star.select(cell).iter_rows())
    col = [None if (v := replicates.get(k)) is None else [float(x) for x in v] for k in keys]
    return m_star.with_columns(pl.Series("replicates", col, dtype=pl.List(pl.Float64)))


def cell_columns(m_star: pl.DataFrame) -> list[str]:
    """The cell columns of an m* table: every column not in ``RESULT_COLUMNS``."""
    return [c for c in m_star.columns if c not in RESULT_COLUMNS]


def read_reference(path: Path | str = REFERENCE_CSV) -> pl.DataFrame:
    """The paper's read-off: columns ``T``, ``critical_m``, ``err_lo``, ``err_hi``, sorted
    by T (lines starting with '#' are comments).

    Raises:
        OSError: the file cannot be read.
        ValueError: a column is missing.
    """
    table = pl.read_csv(path, comment_prefix="#")
    missing = {"T", "critical_m", "err_lo", "err_hi"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: columns {sorted(missing)} are missing (need T, critical_m, err_lo, err_hi)")
    return table.sort("T")


def reference_cells(m_star: pl.DataFrame, t_range: tuple[float, float] = R_RANGE) -> pl.DataFrame:
    """Our cells of the paper's setting: transformer, 3-way AND, T within ``t_range``."""
    if not {"task", "s", "model", "T"} <= set(m_star.columns):
        return m_star.clear()
    return m_star.filter((pl.col("task") == "and") & (pl.col("s") == 3) & (pl.col("model") == ATTENTION)
                         & pl.col("T").is_between(*t_range)).sort("T")


# --- L1 ----------------------------------------------------------------------------------

def l1_log_growth(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L1: along T, the attention model's m* grows, and ``a + b ln T`` beats ``a + b T`` and
    ``a T^c`` by AIC and BIC (each by >= ``AIC_MARGIN``), over >= ``MIN_DECADES`` decades of T.

    Source: docs/claims.md 1a (L1); Edelman et al. 2022, Theorem 4.2 (sample complexity
    O(log T)). The laws and their AIC/BIC are those of :func:`results.fits.compare_growth`
    (least squares on the m* scale); "grows" means the bootstrap interval of the log law's
    slope b lies above 0. The power-law exponent c is reported with its interval (log growth
    shows as c -> 0). A series is the transformer's cells that differ only in T; only
    uncensored cells enter the fit.
    """
    claim = ("L1: m* grows like log T: a + b ln T beats a + b T and a T^c by AIC and BIC, "
             f"T over >= {MIN_DECADES:g} decades")
    cell = cell or cell_columns(m_star)
    series, side = _t_series(_groups(_attention(m_star), [c for c in cell if c != "T"]))
    judged = [(_label(key), *_l1_series(part, ci), part) for key, part in series]
    if not judged:
        return _verdict(claim, "-", "-", INCONCLUSIVE, "no transformer cells" if not side else
                        f"no series has {MIN_POINTS} or more values of T")
    return _side_note(_combine(claim, judged), side)


def _t_series(series: list[tuple[dict, pl.DataFrame]]) -> tuple[list[tuple[dict, pl.DataFrame]], list[str]]:
    """The series a claim about the curve m*(T) judges, and the labels of those it does not.

    A series with fewer than MIN_POINTS values of T, beside others, is a side block (an s or
    B comparison at a few T), not a curve: it is named, not judged, so it cannot hold a
    T claim (L1, R) back.
    """
    side = [_label(key) for key, part in series if len(series) > 1 and part["T"].n_unique() < MIN_POINTS]
    return [(key, part) for key, part in series if _label(key) not in side], side


def _side_note(verdict: dict, side: list[str]) -> dict:
    if side:
        verdict["why"] += f"; not a T series (< {MIN_POINTS} values of T), not judged: {_few(side)}"
    return verdict


def series_fit(part: pl.DataFrame, ci: float = 0.95) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The growth-law fits of one series, as L1 judges them: ``(used, fit)``.

    ``used``: the series' uncensored cells with a finite m*, sorted by T; ``fit``: the
    table of :func:`results.fits.compare_growth` over them (with the bootstrap replicates
    when every cell has them), or None with fewer than ``MIN_POINTS`` values of T.
    """
    used = part.filter((pl.col("censored") == "") & pl.col("m_star").is_finite()).sort("T")
    if used["T"].n_unique() < MIN_POINTS:
        return used, None
    point, reps = _values(used)
    return used, compare_growth(used["T"].to_numpy().astype(float), point, reps, ci)


def _l1_series(part: pl.DataFrame, ci: float) -> tuple[str, str, str, str, pl.DataFrame]:
    """(verdict, statistic, interval, why, cells used) of one series."""
    used, fit = series_fit(part, ci)
    if fit is None:
        return (INCONCLUSIVE, "-", "-", f"m* is measured (not censored) at {used['T'].n_unique()} value(s) of T; "
                f"a growth-law fit needs {MIN_POINTS}", used)
    T = used["T"].to_numpy().astype(float)
    law = {r["model"]: r for r in fit.iter_rows(named=True)}
    log, power = law["log"], law["power"]
    aic = min(law[m]["aic"] for m in ("linear", "power")) - log["aic"]  # > 0: the log law is better
    bic = min(law[m]["bic"] for m in ("linear", "power")) - log["bic"]
    decades = math.log10(T.max() / T.min())
    statistic = (f"c = {power['b']:.3f} (a T^c); best law by AIC: {fit['model'][0]}; the log law's margin "
                 f"AIC {aic:+.1f}, BIC {bic:+.1f}; log slope b = {log['b']:.3g}; "
                 f"T {T.min():g}..{T.max():g} ({decades:.1f} decades, {len(T)} cells)")
    interval = f"c {power['b_lo']:.3f} .. {power['b_hi']:.3f}; b {log['b_lo']:.3g} .. {log['b_hi']:.3g}"
    if decades < MIN_DECADES:
        return (INCONCLUSIVE, statistic, interval, f"T spans {decades:.1f} decades; telling log from power-law "
                f"growth needs >= {MIN_DECADES:g} (max T / min T >= {10 ** MIN_DECADES:g})", used)
    if math.isnan(log["b_lo"]):
        why = "no bootstrap interval for the slope (too few finite replicates)"
        return INCONCLUSIVE, statistic, interval, why, used
    if log["b_hi"] <= 0:
        return NOT_SUPPORTED, statistic, interval, "m* does not grow with T (the slope's interval is not above 0)", used
    if aic <= -AIC_MARGIN or bic <= -AIC_MARGIN:
        return NOT_SUPPORTED, statistic, interval, f"{fit['model'][0]} growth fits better than log growth", used
    if log["b_lo"] > 0 and aic >= AIC_MARGIN and bic >= AIC_MARGIN:
        why = f"slope interval above 0 and the log law ahead by >= {AIC_MARGIN:g}"
        return SUPPORTED, statistic, interval, why, used
    return (INCONCLUSIVE, statistic, interval, "the slope's interval includes 0" if log["b_lo"] <= 0
            else f"the laws are within {AIC_MARGIN:g} AIC/BIC units of each other", used)


# --- L2, L3 --------------------------------------------------------------------------------

def l2_norm_bound(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L2: the attention model's m* grows with the norm bound B (None, unbounded, ranks as the
    largest B). Statistic: :func:`_monotone_in` over cells that differ only in B, of which
    at least 2 are bounded. Source: docs/claims.md 1a (L2); Edelman et al. 2022, Theorem 4.2
    (the bound grows with the norms of W_Q W_K^T, W_V and the readout)."""
    return _monotone_in(m_star, "norm_bound", "L2: m* grows with the norm bound B (unbounded = largest)",
                        cell or cell_columns(m_star), ci)


def l3_sparsity(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L3: the attention model's m* grows with the sparsity s. Statistic:
    :func:`_monotone_in` over cells that differ only in s. Source: docs/claims.md 1a (L3);
    Edelman et al. 2022, Theorem 4.2 (the bound grows with s)."""
    return _monotone_in(m_star, "s", "L3: m* grows with the sparsity s", cell or cell_columns(m_star), ci)


def _monotone_in(m_star: pl.DataFrame, x: str, claim: str, cell: list[str], ci: float) -> dict:
    """Whether the transformer's m* grows with setting ``x``.

    Statistic: the mean, over groups of cells that differ only in ``x``, of Spearman's rank
    correlation between ``x`` and the cells' values (ties share their average rank; +inf,
    beyond the grid, ranks last), with a bootstrap interval. Supported when the interval
    lies above 0, not supported when it lies at or below 0. Groups whose cells are all
    censored on the same side carry no order and are left out.
    """
    att = _attention(m_star)
    if x not in att.columns or att.is_empty():
        return _verdict(claim, "-", "-", INCONCLUSIVE, f"no transformer cells with a {x} column")
    kept, dropped = [], 0
    for _, part in _groups(att, [c for c in cell if c != x]):
        levels = part[x].drop_nulls().n_unique()
        if levels < 2:
            continue
        if part["censored"].n_unique() == 1 and part["censored"][0] != "":
            dropped += 1
            continue
        kept.append(part)
    what = "bounded values of B" if x == "norm_bound" else f"values of {x}"
    left_out = f"; {dropped} group(s) censored throughout left out" if dropped else ""
    if not kept:
        why = f"needs transformer cells that differ only in {x}, at >= 2 {what}"
        return _verdict(claim, "-", "-", INCONCLUSIVE, why + left_out)
    rhos, reps = [], []  # per group: rho, and its (R,) replicates
    for part in kept:
        xs = part[x].cast(pl.Float64).fill_null(math.inf).to_numpy()
        point, r = _values(part)
        rhos.append(float(_spearman(xs, point)))
        reps.append(None if r is None else _spearman(xs, r))
    rho = float(np.mean(rhos))
    if any(r is None for r in reps):
        lo = hi = math.nan
    else:
        R = min(len(r) for r in reps)
        lo, hi = _interval(np.mean([r[:R] for r in reps], axis=0), ci)
    statistic = f"mean Spearman rho of m* with {x} = {rho:.2f} over {len(kept)} group(s) of cells"
    why = f"groups: cells that differ only in {x} (>= 2 {what})" + left_out
    if math.isnan(lo):
        verdict, why = INCONCLUSIVE, why + "; no bootstrap replicates"
    else:
        verdict = SUPPORTED if lo > 0 else (NOT_SUPPORTED if hi <= 0 else INCONCLUSIVE)
        why += "; supported when the interval lies above 0"
    used = pl.concat(kept, how="diagonal_relaxed")
    return _verdict(claim, statistic, f"CI {lo:.2f} .. {hi:.2f}", verdict, why, _limited(used))


# --- L4 -----------------------------------------------------------------------------------

def l4_mlp_baseline(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L4: the MLP needs far more samples than the transformer as T grows.

    Statistic (per series of paired cells: a transformer and an MLP cell equal in every
    setting but the architecture's, ``ARCH_FIELDS``): the ratio MLP m* / transformer m* at
    the largest T where both have one (an MLP beyond the grid counts as +inf: the ratio is
    then a lower bound), with its bootstrap interval; and Spearman's rho of the ratio with T.
    Supported when the ratio's interval lies above 1 and rho's above 0 (>= ``MIN_POINTS``
    T); not supported when the ratio's lies at or below 1 or rho's at or below 0. Source:
    docs/claims.md 1a (L4); Edelman et al. 2022, section 5 (MLP baseline, sample complexity
    growing like T).
    """
    claim = "L4: the MLP needs far more samples than the transformer, and more so as T grows"
    cell = cell or cell_columns(m_star)
    if "model" not in m_star.columns:
        return _verdict(claim, "-", "-", INCONCLUSIVE, "the m* table has no model column")
    on = [c for c in cell if c not in ARCH_FIELDS]
    tr, mlp = (m_star.filter(pl.col("model") == v) for v in (ATTENTION, BASELINE))
    pairs = tr.join(mlp, on=on, how="inner", suffix="_mlp", nulls_equal=True)
    if pairs.is_empty():
        return _verdict(claim, "-", "-", INCONCLUSIVE, "no T with both a transformer and an MLP cell of equal settings")
    arch = [c for c in ARCH_FIELDS if c in cell and c != "model"]
    by = [c for c in on if c != "T"] + arch + [f"{c}_mlp" for c in arch]
    judged = [(_label(key), *_l4_series(part.sort("T"), ci)) for key, part in _groups(pairs, by)]
    return _combine(claim, judged)


def _end(value: float) -> str:
    return "beyond the grid (inf)" if math.isinf(value) else f"{value:.2f}"


def _l4_series(pairs: pl.DataFrame, ci: float) -> tuple[str, str, str, str, pl.DataFrame]:
    tr, tr_reps = _values(pairs)
    mlp, mlp_reps = _values(pairs, "_mlp")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = mlp / tr  # (n,); NaN where both are beyond the grid
        reps = None if tr_reps is None or mlp_reps is None else mlp_reps / tr_reps  # (R, n)
    keep = ~np.isnan(ratio)
    T = pairs["T"].to_numpy()[keep]
    used = pairs.filter(pl.Series(keep))
    if not keep.any():
        return INCONCLUSIVE, "-", "-", "both models are beyond the grid at every T", used
    ratio, reps = ratio[keep], None if reps is None else reps[:, keep]
    last = used.row(-1, named=True)
    if math.isinf(ratio[-1]):
        shown = f"> {last['m_max_mlp'] / tr[keep][-1]:.1f} (MLP m* > {last['m_max_mlp']}, beyond the grid)"
    elif math.isinf(tr[keep][-1]):
        shown = f"< {mlp[keep][-1] / last['m_max']:.2f} (transformer m* > {last['m_max']}, beyond the grid)"
    else:
        shown = f"{ratio[-1]:.2f}"
    lo, hi = _interval(None if reps is None else reps[:, -1], ci)
    statistic = f"MLP m* / transformer m* at T={T[-1]}: {shown}"
    # A replicate with the MLP beyond the grid is +inf: an interval end at inf is a lower bound.
    interval = (f"ratio CI {_end(lo)} .. {_end(hi)}" if not (math.isinf(lo) and math.isinf(hi))
                else "ratio infinite in every bootstrap replicate (MLP beyond the grid)")
    if math.isnan(lo):
        return INCONCLUSIVE, statistic, interval, "no bootstrap replicates", used
    more, not_more = lo > 1, hi <= 1
    grows = not_grows = False
    trend = f"the ratio at {len(T)} value(s) of T; a trend needs {MIN_POINTS}"
    if len(T) >= MIN_POINTS and np.isfinite(ratio).any():
        rho = float(_spearman(T.astype(float), ratio))
        rlo, rhi = _interval(_spearman(T.astype(float), reps[~np.isnan(reps).any(1)]), ci)
        statistic += f"; Spearman rho of the ratio with T = {rho:.2f} over T {T[0]}..{T[-1]}"
        interval += f"; rho CI {rlo:.2f} .. {rhi:.2f}"
        grows, not_grows = rlo > 0, rhi <= 0
        trend = f"rho's interval {'above 0' if grows else 'at or below 0' if not_grows else 'includes 0'}"
    elif len(T) >= MIN_POINTS:
        trend = "the MLP is beyond the grid at every T: no trend to measure"
    if not_more or not_grows:
        return NOT_SUPPORTED, statistic, interval, "the ratio's interval is at or below 1" if not_more else trend, used
    if more and grows:
        return SUPPORTED, statistic, interval, f"ratio's interval above 1; {trend}", used
    why = ("ratio's interval above 1; " if more else "the ratio's interval includes 1; ") + trend
    return INCONCLUSIVE, statistic, interval, why, used


# --- R ------------------------------------------------------------------------------------

def r_reference(m_star: pl.DataFrame, reference: Path | str = REFERENCE_CSV, cell: list[str] | None = None,
                ci: float = 0.95, margin: tuple[float, float] = EQUIVALENCE) -> dict:
    """R: our m* at T in ``R_RANGE`` (transformer, 3-way AND) against the paper's read-off.

    Statistic: the geometric-mean ratio ours / paper over our T in the range,
    exp(mean ln(m*(T) / m_paper(T))), with m_paper linearly interpolated in T between the
    read-off points (Edelman et al. 2022, section 5, figure "Transformer, 3-way AND"; our
    read-off in ``results/data``), and its bootstrap interval (the read-off is taken as
    fixed). An equivalence test (Schuirmann's two one-sided tests, as an interval inside the
    margin): supported when the interval lies inside ``margin``, not supported when it lies
    wholly outside, inconclusive otherwise. As for L1, a series with fewer than
    ``MIN_POINTS`` values of T in the range beside others (a side block over B or s) is
    named, not judged. Source: docs/claims.md 1a (R).

    Raises:
        OSError, ValueError: the reference cannot be read (see :func:`read_reference`).
    """
    claim = f"R: our m* matches the paper's for T = {R_RANGE[0]}..{R_RANGE[1]} (transformer, 3-way AND)"
    ref = read_reference(reference)
    ours = reference_cells(m_star)
    if ours.is_empty():
        have = sorted(set(_attention(m_star)["T"].to_list())) if "T" in m_star.columns else []
        return _verdict(claim, "-", "-", INCONCLUSIVE, f"no transformer 3-way AND cell with T in "
                        f"{R_RANGE[0]}..{R_RANGE[1]} (transformer T here: {have or 'none'})")
    cell = cell or cell_columns(m_star)
    series, side = _t_series(_groups(ours, [c for c in cell if c != "T"]))
    if not series:
        return _verdict(claim, "-", "-", INCONCLUSIVE, f"no series has {MIN_POINTS} or more values of T in "
                        f"{R_RANGE[0]}..{R_RANGE[1]}; not judged: {_few(side)}")
    judged = [(_label(key), *_r_series(part, ref, ci, margin)) for key, part in series]
    return _side_note(_combine(claim, judged), side)


def _r_series(ours: pl.DataFrame, ref: pl.DataFrame, ci: float, margin: tuple[float, float]):
    T = ours["T"].to_numpy().astype(float)
    paper = np.interp(T, ref["T"].to_numpy().astype(float), ref["critical_m"].to_numpy())  # (n,)
    point, reps = _values(ours)
    with np.errstate(divide="ignore"):
        gm = float(np.exp(np.mean(np.log(point / paper))))
        lo, hi = _interval(None if reps is None else np.exp(np.mean(np.log(reps / paper), axis=1)), ci)
    statistic = (f"geometric-mean ratio ours/paper = {gm:.2f} over T = {', '.join(f'{t:g}' for t in T)} "
                 f"(ours {', '.join(_show(r) for r in ours.iter_rows(named=True))}; "
                 f"paper {', '.join(f'{p:.0f}' for p in paper)})")
    interval = f"CI {lo:.2f} .. {hi:.2f}; margin {margin[0]:g} .. {margin[1]:g}"
    why = f"equivalent when the interval lies inside {margin[0]:g} .. {margin[1]:g}"
    if (ours["censored"] == "below").any():
        why += "; a cell at or below the smallest m counts as that m (an upper bound)"
    if math.isnan(lo):
        return INCONCLUSIVE, statistic, interval, "no bootstrap replicates", ours
    if margin[0] <= lo and hi <= margin[1]:
        return SUPPORTED, statistic, interval, why, ours
    if hi < margin[0] or lo > margin[1]:
        return NOT_SUPPORTED, statistic, interval, why + "; the interval lies outside it", ours
    return INCONCLUSIVE, statistic, interval, why + "; the interval overlaps the margin's edge", ours


# --- helpers -------------------------------------------------------------------------------

def _values(df: pl.DataFrame, suffix: str = "") -> tuple[np.ndarray, np.ndarray | None]:
    """Cell values ``(n,)`` (+inf beyond the grid, m_min at or below it) and their bootstrap
    replicates ``(R, n)`` (None when a cell has none; R is the shortest cell's count)."""
    above = (df[f"censored{suffix}"] == "above").to_numpy()
    below = (df[f"censored{suffix}"] == "below").to_numpy()
    m = df[f"m_star{suffix}"].cast(pl.Float64).fill_null(math.nan).to_numpy()
    point = np.where(above, math.inf, np.where(below, df[f"m_min{suffix}"].to_numpy(), m))
    col = f"replicates{suffix}"
    if col not in df.columns or df[col].null_count() or df.is_empty():
        return point, None
    reps = df[col].to_list()
    R = min(len(r) for r in reps)
    return point, (np.array([r[:R] for r in reps], float).T if R else None)


def _spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` ``(n,)`` with each row of ``y`` ``(..., n)``: the Pearson
    correlation of average ranks (Spearman 1904), 0 where either ranking is constant."""
    rx = rankdata(x) - (len(x) + 1) / 2
    ry = rankdata(y, axis=-1) - (y.shape[-1] + 1) / 2
    num, den = (ry * rx).sum(-1), np.sqrt((rx**2).sum() * (ry**2).sum(-1))
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _interval(reps: np.ndarray | None, ci: float) -> tuple[float, float]:
    """Percentile interval (order statistics, as in results/critical.py) of the replicates,
    NaN ones dropped; NaNs when fewer than 20 remain."""
    if reps is None:
        return math.nan, math.nan
    reps = np.asarray(reps, float)
    reps = reps[~np.isnan(reps)]
    if reps.size < 20:
        return math.nan, math.nan
    with np.errstate(invalid="ignore"):
        lo, hi = np.percentile(reps, [round(50 * (1 - ci), 9), round(50 * (1 + ci), 9)], method="inverted_cdf")
    return float(lo), float(hi)


def _attention(m_star: pl.DataFrame) -> pl.DataFrame:
    return m_star.filter(pl.col("model") == ATTENTION) if "model" in m_star.columns else m_star


def _groups(df: pl.DataFrame, by: list[str]) -> list[tuple[dict, pl.DataFrame]]:
    """``(key, rows)`` per distinct value of ``by`` (only the columns that vary in ``df``)."""
    if df.is_empty():
        return []
    by = [c for c in by if c in df.columns and df[c].n_unique() > 1]
    if not by:
        return [({}, df)]
    return [(dict(zip(by, key)), part) for key, part in df.partition_by(by, as_dict=True, maintain_order=True).items()]


def _label(key: dict) -> str:
    return ", ".join(f"{c}={v}" for c, v in key.items())


def _show(row: dict) -> str:
    return format_m_star(row["m_star"], row["censored"], row["m_min"], row["m_max"], digits=0)


def _name(row: dict) -> str:
    return " ".join(f"{c}={row[c]}" for c in ("task", "T", "s", "model", "norm_bound") if c in row)


def _limited(cells: pl.DataFrame) -> list[str]:
    """Names of the budget-limited cells among ``cells`` (and of their paired MLP cells)."""
    out = []
    for suffix in ("", "_mlp"):
        if f"budget{suffix}" in cells.columns:
            rows = cells.filter(pl.col(f"budget{suffix}") == "budget-limited").iter_rows(named=True)
            out += [_name({**r, **{k.removesuffix(suffix): v for k, v in r.items() if suffix and k.endswith(suffix)}})
                    for r in rows]
    return out


def _verdict(claim: str, statistic: str, interval: str, verdict: str, why: str,
             limited: list[str] = (), named: list[str] = ()) -> dict:
    """The verdict dict; budget-limited cells the statistic used make it inconclusive."""
    if limited:
        verdict = INCONCLUSIVE
        why += f"; budget-limited cells used ({_few(limited)}): their m* measures the training budget"
    named = [n for n in named if n not in limited]
    if named:
        why += f"; budget-limited cells not used ({_few(named)})"
    return dict(claim=claim, statistic=statistic, interval=interval, verdict=verdict, why=why)


def _few(names: list[str], k: int = 4) -> str:
    return "; ".join(names[:k]) + (f"; and {len(names) - k} more" if len(names) > k else "")


def _combine(claim: str, judged: list[tuple]) -> dict:
    """One verdict from per-series ``(label, verdict, statistic, interval, why, used, [seen])``:
    supported when all are, not supported when any is not, else inconclusive."""
    verdicts = [j[1] for j in judged]
    verdict = (NOT_SUPPORTED if NOT_SUPPORTED in verdicts
               else SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE)

    def tag(label: str, text: str) -> str:
        return f"[{label}] {text}" if label and len(judged) > 1 else text

    limited = [n for j in judged for n in _limited(j[5])]
    seen = [n for j in judged for n in _limited(j[6] if len(j) > 6 else j[5])]
    return _verdict(claim, " | ".join(tag(j[0], j[2]) for j in judged), " | ".join(tag(j[0], j[3]) for j in judged),
                    verdict, " | ".join(tag(j[0], j[4]) for j in judged), limited, seen)
