"""Verdicts L1-L4 and R of the sparse-Boolean experiment (docs/claims.md section 1a).

The claim under test (Edelman, Goel, Kakade, Zhang, "Inductive Biases and Variable Creation
in Self-Attention Mechanisms", ICML 2022, arXiv 2110.10090, Theorem 4.2 and section 5): a
bounded-norm self-attention head learns an s-sparse Boolean function of T bits from a number
of samples that grows like log T, times factors that grow with the norm bound B and with s;
an MLP on the flattened bits needs samples that grow like T.

Input: an m* table, one row per cell, as ``orchestrator.analyze.analyze_run(...).m_star``
returns it: cell columns (``task``, ``T``, ``s``, ``model``, ``norm_bound``, ...) and
``m_star``, ``bound`` ("exact", "lower", "upper", "none"), ``ci_lo``, ``ci_hi``, ``flags``,
``m_min``, ``m_max`` (stats/critical.py defines them; a table without ``bound`` has it
derived from ``censored``). Two optional columns:

* ``replicates`` (list of float): the cell's bootstrap m* (seeds resampled; +inf for a
  replicate beyond the grid), attached by :func:`with_replicates`. Every interval here is a
  percentile interval over the replicate index r: replicate r of a statistic is the
  statistic computed from replicate r of every cell it uses (each cell's bootstrap is
  independent of the others', so this bootstraps the statistic). Without replicates the
  intervals are NaN and the verdicts inconclusive.
* ``budget`` ("ok", "budget-limited", "not checked"): the check at twice the epochs.

The censoring rule (docs/claims.md 2) applied here: a growth-law fit uses exact m* only and
names the others with their bound; a rank (L2, L3) takes a lower bound as larger than every
value and an upper bound as its value; a ratio with a bound in it is itself a bound. A claim
whose statistic uses a budget-limited cell (``flags``: ``budget-limited`` or
``out-of-epochs``) is inconclusive and names it; non-monotone cells and cells with few seeds
are named in its ``flags``.

Each verdict is a dict (the same keys as :func:`stats.symmetry.verdicts`):

* ``id`` (``L1`` ...), ``claim`` (its text), ``verdict`` (:data:`VERDICTS`: ``supported``,
  ``not supported``, ``inconclusive`` when the data cannot decide, ``not tested`` when the
  runs hold no data for it);
* ``statistic``, ``interval``, ``why``: the same as sentences, for people;
* ``series``: one dict per judged series (``cells``: the settings that name it, e.g.
  ``{"s": 3, "norm_bound": None}``; ``verdict``, ``why``, ``numbers``), where ``numbers``
  holds the statistic as numbers: quantities as ``{"estimate", "ci_lo", "ci_hi",
  "bound"}``, counts and parameters as numbers;
* ``not_judged``: the settings of series named but not judged (side blocks with fewer
  than 3 values of T), ``flags``: ``{"flag", "cell"}`` per flagged cell the statistic saw.

L1's series ``numbers`` also say what the statistic says where the rule does not decide:
``direction`` ("faster than log", "log", "undecided"), ``log_deficit_aicc`` (the log law's AICc
behind the best rival: ``full``, ``least``, ``most`` over the fitting variants, ``variants``),
``span_short`` (fewer than ``MIN_DECADES``), ``law`` (named only when it wins every variant
of :func:`stats.fits.robust_law`; "undecided" or "too few cells" otherwise), ``robust`` (its
winners per variant) and, on the larger bound's series of two that differ only in B,
``across_bound`` (:func:`across_bound`). R's numbers add ``ratio_by_T`` and ``trend_slope``.

Where a claim is judged on several series (e.g. transformer cells at two norm bounds for
L1), it is supported when every judged series supports it, not supported when any
contradicts it, and inconclusive otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata

from attnsweep.stats.critical import format_m_star
from attnsweep.stats.fits import MIN_LAW_POINTS, compare_growth, robust_law
from attnsweep.stats.restarts import LEARNER, ONE_INIT

ATTENTION, BASELINE = "transformer", "mlp"
ARCH_FIELDS = ("model", "d", "layers", "heads", "mlp_width")
"""Settings of one architecture: cells that differ only in these are compared in L4."""
RESULT_COLUMNS = frozenset({"m_star", "m_star_grid", "ci_lo", "ci_hi", "censored", "n_seeds", "m_min", "m_max",
                            "n_trials", "series", "budget", "m_star_2x", "replicates", "run_id", "sweep",
                            "settings", "m_star_default", "m_star_tuned", "censored_default", "censored_tuned",
                            "tuning", "bound", "flags", "non_monotone", "out_of_epochs", "m_floor_if_fit",
                            "ci_lo_exact", "ci_hi_exact", "bound_2x", "bound_default", "bound_tuned"})
"""Columns of an m* table that are not cell settings."""

MIN_DECADES = 3.0
"""L1 needs max T / min T >= 10^3 (docs/claims.md 1a: one decade cannot tell log from slow power-law growth)."""
MIN_POINTS = 3
"""Uncensored T a growth-law fit needs (L1), and T a trend of the L4 ratio needs."""
AIC_MARGIN = 2.0
"""A law 'beats' another when its AIC (and BIC) is lower by at least this much (Burnham &
Anderson, Model Selection and Multimodel Inference, 2002, section 2.6: within 2 units both
have substantial support)."""
EFFECT_SLOPE = 0.05
"""The smallest log-log slope that counts as "grows" or "falls" (docs/claims.md 2): a
factor 10^0.05 = 1.12 per tenfold change of the axis. A slope whose interval lies inside
(-0.05, 0.05) is flat: it barely moves."""
EFFECT_RATIO = 10 ** EFFECT_SLOPE
"""The smallest ratio of m* between the largest and the smallest value of a setting that
counts as "m* grows with it" (L2, L3): 12% more samples."""
FAR_MORE = 2.0
""""Far more samples" (L4): the MLP's m* at least twice the transformer's."""
R_RANGE = (100, 1100)
"""The T range of the paper's figure "Transformer, 3-way AND" (Edelman et al. 2022, section 5)."""
EQUIVALENCE = (0.8, 1.25)
"""Equivalence margin of R for the geometric-mean ratio ours/paper (docs/decisions.md, Issue 7)."""
REFERENCE_CSV = Path(__file__).parent / "data" / "edelman2022_fig_3way_and.csv"
"""Our read-off of the paper's figure (columns T, critical_m, err_lo, err_hi)."""
READ_OFF = 1.5
"""Precision of our read-off of the paper's figure, in samples (its CSV's header)."""
PROTOCOL_FIELDS = ("d", "heads", "layers", "lr", "weight_decay", "max_epochs", "batch_size", "n_test", "norm_kind",
                   "precision")
"""Settings of our protocol that R names beside its statistic."""

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED = "supported", "not supported", "inconclusive", "not tested"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED)
"""The four verdicts: the data support the claim, contradict it, cannot decide it, or do not test it."""
LIMITING = ("budget-limited", "out-of-epochs")
"""Flags of a cell whose m* measures the training budget (stats/critical.py)."""


def verdicts(m_star: pl.DataFrame, cell: list[str] | None = None, reference: Path | str = REFERENCE_CSV,
             ci: float = 0.95) -> list[dict]:
    """L1, L2, L3, L4 and R, in that order.

    Args:
        m_star: the m* table (see the module docstring), one row per cell.
        cell: its cell columns (default: every column not in ``RESULT_COLUMNS``).
        reference: the paper's read-off for R (see :func:`read_reference`).
        ci: coverage of the intervals.
    """
    m_star = normalized(m_star)
    cell = cell or cell_columns(m_star)
    # A restart run's learners are L1 series of their own (docs/claims.md, "Restarts"); the other
    # claims compare one trained head per training set, as every other run and the paper do.
    one = one_init(m_star)
    return [l1_log_growth(m_star, cell, ci), l2_norm_bound(one, cell, ci), l3_sparsity(one, cell, ci),
            l4_mlp_baseline(one, cell, ci), r_reference(one, reference, cell, ci)]


def one_init(m_star: pl.DataFrame) -> pl.DataFrame:
    """The cells of ``m_star`` whose learner is one trained head per training set: all cells of
    a run without restarts, a restart run's *one init* cells (stats/restarts.py)."""
    if LEARNER not in m_star.columns:
        return m_star
    return m_star.filter(pl.col(LEARNER).is_null() | (pl.col(LEARNER) == ONE_INIT))


def with_replicates(m_star: pl.DataFrame, replicates: dict[tuple, np.ndarray], cell: list[str]) -> pl.DataFrame:
    """Attach each cell's bootstrap m* as a ``replicates`` list column (null where missing).

    Args:
        replicates: ``(n_boot,)`` arrays keyed by the tuple of the cell's ``cell`` values, as
            the second value :func:`stats.critical.critical_sample_sizes` returns.
    """
    keys = (tuple(r) for r in m_star.select(cell).iter_rows())
    col = [None if (v := replicates.get(k)) is None else [float(x) for x in v] for k in keys]
    return m_star.with_columns(pl.Series("replicates", col, dtype=pl.List(pl.Float64)))


def cell_columns(m_star: pl.DataFrame) -> list[str]:
    """The cell columns of an m* table: every column not in ``RESULT_COLUMNS``."""
    return [c for c in m_star.columns if c not in RESULT_COLUMNS]


def normalized(m_star: pl.DataFrame) -> pl.DataFrame:
    """The m* table with ``bound`` and ``flags`` (derived from ``censored`` and ``budget``
    where a table made without them lacks them: beyond the grid a lower bound at ``m_max``,
    at or below it an upper bound at ``m_min``, a ``budget-limited`` check a flag)."""
    if m_star.is_empty() or "censored" not in m_star.columns:
        return m_star
    out = m_star
    if "bound" not in out.columns:
        cens = pl.col("censored")
        out = out.with_columns(
            bound=pl.when(cens == "above").then(pl.lit("lower")).when(cens == "below").then(pl.lit("upper"))
            .otherwise(pl.lit("exact")),
            m_star=pl.when(cens == "above").then(pl.col("m_max").cast(pl.Float64))
            .when(cens == "below").then(pl.col("m_min").cast(pl.Float64)).otherwise(pl.col("m_star")))
    if "m_star_grid" not in out.columns:
        out = out.with_columns(m_star_grid=pl.col("m_star"))
    if "flags" not in out.columns:
        limited = (pl.col("budget") == "budget-limited") if "budget" in out.columns else pl.lit(False)
        out = out.with_columns(flags=pl.when(limited).then(pl.lit("budget-limited")).otherwise(pl.lit("")))
    return out.with_columns(pl.col("flags").fill_null(""))


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
    """Our cells of the paper's setting: transformer with learned position codes and a trained
    LayerNorm (the paper's protocol; a missing column reads as that), 3-way AND, T within
    ``t_range``. The theorem's class (untrained codes, bounded inputs) is another model than
    the one the paper's figure measured, so R does not compare it."""
    if not {"task", "s", "model", "T"} <= set(m_star.columns):
        return m_star.clear()
    protocol = pl.lit(True)
    if "positions" in m_star.columns:
        protocol = protocol & (pl.col("positions").fill_null("learned") == "learned")
    if "ln_affine" in m_star.columns:
        protocol = protocol & pl.col("ln_affine").fill_null(True)
    return m_star.filter((pl.col("task") == "and") & (pl.col("s") == 3) & (pl.col("model") == ATTENTION)
                         & pl.col("T").is_between(*t_range) & protocol).sort("T")


def quantity(estimate: float, lo: float = math.nan, hi: float = math.nan, bound: str = "exact") -> dict:
    """A number as verdicts.json carries it: ``estimate`` (for a bound, the bound's value),
    ``ci_lo``, ``ci_hi`` and ``bound`` (``exact``; ``lower``: the true value is above
    ``estimate``; ``upper``: at or below it; ``none``: no number)."""
    return dict(estimate=_num(estimate), ci_lo=_num(lo), ci_hi=_num(hi), bound=bound)


def jsonable(value):
    """``value`` with every non-finite float as None and numpy scalars as Python numbers
    (JSON has no NaN or infinity; a quantity's ``bound`` says which side a missing end is)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --- L1 ----------------------------------------------------------------------------------

L1_CLAIM = ("L1: m* grows like log T: a + b ln T beats a + b T, a T^c and a (ln T)^k with k > 1 by AIC and BIC, "
            f"T over >= {MIN_DECADES:g} decades")


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
    series, side = _t_series(_groups(_attention(m_star), [c for c in cell if c != "T"]))
    if not series:
        why = "no transformer cells" if not side else f"no series has {MIN_POINTS} or more values of T"
        return _verdict("L1", L1_CLAIM, NOT_TESTED, why, not_judged=side)
    out = _combine("L1", L1_CLAIM, [(key, *_l1_series(part, ci)) for key, part in series], side)
    # How m* moves with the bound sits with the larger bound's series (its numbers' ``across_bound``).
    for pair in across_bound(series, ci):
        larger = dict(pair["cells"], norm_bound=pair["bounds"][1])
        for s in out["series"]:
            if s["cells"] == larger or (set(s["cells"]) == set(larger) and all(
                    s["cells"][c] == larger[c] for c in larger)):
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
        for k2, p2 in bounded[i + 1:]:
            rest1 = {c: v for c, v in k1.items() if c != "norm_bound"}
            rest2 = {c: v for c, v in k2.items() if c != "norm_bound"}
            if rest1 != rest2 or k1["norm_bound"] == k2["norm_bound"]:
                continue
            (lo_b, lo_p), (hi_b, hi_p) = sorted([(k1["norm_bound"], p1), (k2["norm_bound"], p2)], key=lambda x: x[0])
            out.append(dict(cells=rest1, bounds=[lo_b, hi_b], **m_star_ratio(hi_p, lo_p, ci)))
    return out


def _t_series(series: list[tuple[dict, pl.DataFrame]]) -> tuple[list[tuple[dict, pl.DataFrame]], list[dict]]:
    """The series a claim about the curve m*(T) judges, and the keys of those it does not.

    A series with fewer than MIN_POINTS values of T, beside others, is a side block (an s or
    B comparison at a few T), not a curve: it is named, not judged, so it cannot hold a
    T claim (L1, R) back.
    """
    side = [key for key, part in series if len(series) > 1 and part["T"].n_unique() < MIN_POINTS]
    return [(key, part) for key, part in series if key not in side], side


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
    point, reps = _values(used)
    return used, compare_growth(used["T"].to_numpy().astype(float), point, reps, ci)


def _left_out(part: pl.DataFrame) -> list[dict]:
    """The cells of a series a fit leaves out (a bound, or none), as numbers and text."""
    rows = part.filter(pl.col("bound") != "exact").sort("T").iter_rows(named=True)
    return [dict(T=r["T"], m_star=quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"]), text=_show(r),
                 flags=_split(r["flags"])) for r in rows]


def _l1_series(part: pl.DataFrame, ci: float) -> tuple:
    """(verdict, statistic, interval, why, cells used, numbers) of one series."""
    used, fit = series_fit(part, ci)
    left = _left_out(part)
    left_text = "; left out (a bound, not a value): " + ", ".join(f"T={x['T']}: {x['text']}" for x in left) if left else ""
    numbers = dict(n_cells=used.height, T=used["T"].to_list(), left_out=left)
    if fit is None:
        return (INCONCLUSIVE, "-", "-", f"m* is exact at {used['T'].n_unique()} value(s) of T; a growth-law fit needs "
                f"{MIN_POINTS}{left_text}", used, numbers)
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
    numbers["log_deficit_aicc"] = dict(full=robust["log_deficit"], least=robust["log_deficit_min"],
                                       most=robust["log_deficit_max"], variants=robust["n_variants"])
    numbers.update(
        c=quantity(power["b"], power["b_lo"], power["b_hi"]), b=quantity(log["b"], log["b_lo"], log["b_hi"]),
        k=quantity(poly["b"], poly["b_lo"], poly["b_hi"]), reading=_law_reading(robust),
        best_law=fit["model"][0], log_margin_aic=aic, log_margin_bic=bic, decades=decades,
        laws={r["model"]: dict(a=r["a"], b=r["b"], a_ci=[r["a_lo"], r["a_hi"]], b_ci=[r["b_lo"], r["b_hi"]],
                               aic=r["aic"], bic=r["bic"], delta_aic=r["delta_aic"], r2=r["r2"])
              for r in fit.iter_rows(named=True)})
    # The same laws on the grid m* (the first m tried where half the seeds succeed): a verdict that
    # the m* estimator (the logistic fit) alone decides is not one the rows decide.
    grid = compare_growth(T, used["m_star_grid"].to_numpy().astype(float))
    glaw = {r["model"]: r for r in grid.iter_rows(named=True)}
    g_aic = min(glaw[m]["aic"] for m in rivals) - glaw["log"]["aic"]
    g_bic = min(glaw[m]["bic"] for m in rivals) - glaw["log"]["bic"]
    numbers["grid"] = dict(c=glaw["power"]["b"], k=glaw["polylog"]["b"], best_law=grid["model"][0],
                           reading=_reading(grid), log_margin_aic=g_aic, log_margin_bic=g_bic)
    statistic = (f"c = {power['b']:.3f} (a T^c); k = {poly['b']:.2f} (a (ln T)^k); best law by AIC: "
                 f"{fit['model'][0]}; growth law named: {_law_reading(robust)} ({_law_why(robust)}); "
                 f"direction: {_direction_text(robust)}; the log law's margin "
                 f"AIC {aic:+.1f}, BIC {bic:+.1f}; log slope b = {log['b']:.3g}; "
                 f"T {T.min():g}..{T.max():g} ({decades:.1f} decades, {len(T)} cells); on the grid m*: c = "
                 f"{glaw['power']['b']:.3f}, best law {grid['model'][0]}, the log law's margin AIC {g_aic:+.1f}")
    interval = (f"c {power['b_lo']:.3f} .. {power['b_hi']:.3f}; k {poly['b_lo']:.2f} .. {poly['b_hi']:.2f}; "
                f"b {log['b_lo']:.3g} .. {log['b_hi']:.3g}")
    numbers["span_short"] = decades < MIN_DECADES
    if decades < MIN_DECADES:
        lead = f"{_direction_text(robust)} over {decades:.1f} decades" if robust["direction"] != "undecided" else \
            f"the direction is undecided over {decades:.1f} decades ({_direction_text(robust)})"
        return (INCONCLUSIVE, statistic, interval, f"{lead}; the rule's {MIN_DECADES:g} decades (max T / min T >= "
                f"{10 ** MIN_DECADES:g}) not reached, so L1 is not decided{left_text}", used, numbers)
    if math.isnan(power["b_lo"]):
        why = "no bootstrap interval for the exponent (too few finite replicates)"
        return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
    if power["b_hi"] < EFFECT_SLOPE:
        why = (f"m* does not grow with T by the required effect (c's interval below {EFFECT_SLOPE:g}: less than "
               f"{EFFECT_RATIO - 1:.0%} more samples per tenfold T)")
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    grid_behind, grid_ahead = g_aic <= -AIC_MARGIN or g_bic <= -AIC_MARGIN, g_aic >= AIC_MARGIN and g_bic >= AIC_MARGIN
    if aic <= -AIC_MARGIN or bic <= -AIC_MARGIN:
        if not grid_behind:
            why = (f"{_growth_name(robust)} fits the fitted m* better than log growth, but not the grid m* (the log "
                   f"law's margin there {g_aic:+.1f} AIC): the m* estimator decides, not the rows")
            return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
        why = (f"{_growth_name(robust)} fits better than log growth (by {-aic:.1f} AIC, {-bic:.1f} BIC; "
               f"a margin of {AIC_MARGIN:g} decides), on the grid m* too (by {-g_aic:.1f} AIC)")
        return NOT_SUPPORTED, statistic, interval, why + left_text, used, numbers
    if power["b_lo"] > EFFECT_SLOPE and aic >= AIC_MARGIN and bic >= AIC_MARGIN:
        if not grid_ahead:
            why = (f"the log law is ahead on the fitted m*, but not on the grid m* (margin {g_aic:+.1f} AIC): the m* "
                   "estimator decides, not the rows")
            return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers
        why = (f"m* grows (c's interval above {EFFECT_SLOPE:g}) and the log law is ahead by >= {AIC_MARGIN:g} "
               "AIC and BIC, on the grid m* too")
        return SUPPORTED, statistic, interval, why + left_text, used, numbers
    why = (f"c's interval includes {EFFECT_SLOPE:g} (growth not shown at the required effect)"
           if power["b_lo"] <= EFFECT_SLOPE else f"the laws are within {AIC_MARGIN:g} AIC/BIC units of each other")
    return INCONCLUSIVE, statistic, interval, why + left_text, used, numbers


def _rivals(poly: dict) -> tuple[str, ...]:
    """The laws the log law must beat: linear and power growth, and polylog growth when its
    exponent k's interval lies above 1. The claim bounds m* by O(log T): k = 1 is log growth
    itself, a (ln T)^1, and k < 1 grows slower still, so a polylog law with k's interval
    reaching 1 or below agrees with the claim rather than rivalling it."""
    faster = poly["b_lo"] > 1  # NaN (no interval) compares False: not a rival
    return ("linear", "power", "polylog") if faster else ("linear", "power")


def _law_reading(robust: dict) -> str:
    """The growth law a series names (:func:`stats.fits.robust_law`): the law, or what
    stands in its place ("faster than log, law undecided", "no law named: 4 exact cells")."""
    law = robust["law"]
    if law == "too few cells":
        return f"no law named ({robust['n_points']} exact cells; a law needs {MIN_LAW_POINTS})"
    if law == "undecided":
        return "faster than log, law undecided" if robust["direction"] == "faster than log" else "law undecided"
    return law


def _law_why(robust: dict) -> str:
    """Why a law is named or not, in a clause."""
    wins = robust["winners"]
    if robust["law"] == "too few cells":
        return f"AICc needs >= {MIN_LAW_POINTS} cells for a 3-parameter law"
    if robust["law"] == "undecided":
        counts = {}
        for w in wins.values():
            counts[w] = counts.get(w, 0) + 1
        return ("the best law by AICc changes with the variant: " +
                ", ".join(f"{m} in {c} of {len(wins)}" for m, c in sorted(counts.items(), key=lambda x: -x[1])))
    return f"lowest AICc in all {len(wins)} variants: m* and ln m* scales, each T left out"


def _growth_name(robust: dict) -> str:
    """The growth a why names: the robust law's ("power growth"), else "faster-than-log growth
    (law undecided)" or "growth (law not named)"."""
    law = robust["law"]
    if law in ("too few cells", "undecided"):
        return ("faster-than-log growth (no law named)" if robust["direction"] == "faster than log"
                else "faster-than-log growth on all cells, not in every fitting variant (no law named)")
    return f"{law} growth"


def _direction_text(robust: dict) -> str:
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


def _reading(fit: pl.DataFrame) -> str:
    """What the growth law of a series reads as: the best law by AIC when it leads every other
    by at least AIC_MARGIN, else ``"undecided"`` (``"log"``, ``"polylog"``, ``"linear"``,
    ``"power"``)."""
    aic = fit.sort("aic")["aic"].to_list()
    return fit.sort("aic")["model"][0] if len(aic) > 1 and aic[1] - aic[0] >= AIC_MARGIN else "undecided"


# --- L2, L3 --------------------------------------------------------------------------------

L2_CLAIM = "L2: m* grows with the norm bound B (unbounded = largest)"
L3_CLAIM = "L3: m* grows with the sparsity s"


def l2_norm_bound(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L2: the attention model's m* grows with the norm bound B (None, unbounded, ranks as the
    largest B). Statistic: :func:`_monotone_in` over cells that differ only in B, of which
    at least 2 are bounded. Source: docs/claims.md 1a (L2); Edelman et al. 2022, Theorem 4.2
    (the bound grows with the norms of W_Q W_K^T, W_V and the readout)."""
    m_star = normalized(m_star)
    return _monotone_in(m_star, "norm_bound", "L2", L2_CLAIM, cell or cell_columns(m_star), ci)


def l3_sparsity(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L3: the attention model's m* grows with the sparsity s. Statistic:
    :func:`_monotone_in` over cells that differ only in s. Source: docs/claims.md 1a (L3);
    Edelman et al. 2022, Theorem 4.2 (the bound grows with s)."""
    m_star = normalized(m_star)
    return _monotone_in(m_star, "s", "L3", L3_CLAIM, cell or cell_columns(m_star), ci)


def _monotone_in(m_star: pl.DataFrame, x: str, cid: str, claim: str, cell: list[str], ci: float) -> dict:
    """Whether the transformer's m* grows with setting ``x``.

    Statistics, over the groups of cells that differ only in ``x``: the mean of Spearman's
    rank correlation between ``x`` and the cells' values (ties share their average rank; a
    lower bound, beyond the grid, ranks last), and the geometric mean over groups of the
    ratio of m* at the group's largest ``x`` to m* at its smallest (the effect size), each
    with a bootstrap interval. Supported when rho's interval lies above 0 and the ratio's
    above :data:`EFFECT_RATIO`; not supported when rho's lies at or below 0 or the ratio's
    below :data:`EFFECT_RATIO`. Groups whose cells are all bounds on the same side carry no
    order and are left out, as are groups with a bound whose order against another cell it
    does not settle (:func:`_ordered`: a bound is never ranked as a value); a cell with no
    number (bound ``none``) is left out of its group.
    """
    att = _attention(m_star)
    if x not in att.columns or att.is_empty():
        return _verdict(cid, claim, NOT_TESTED, f"no transformer cells with a {x} column")
    kept, keys, dropped, unordered = [], [], 0, 0
    for key, part in _groups(att, [c for c in cell if c != x]):
        part = part.filter(pl.col("bound") != "none")
        levels = part[x].drop_nulls().n_unique()
        if levels < 2:
            continue
        if part["bound"].n_unique() == 1 and part["bound"][0] != "exact":
            dropped += 1
            continue
        if not _ordered(part):
            unordered += 1
            continue
        kept.append(part)
        keys.append(key)
    what = "bounded values of B" if x == "norm_bound" else f"values of {x}"
    left_out = f"; {dropped} group(s) with bounds only (no order) left out" if dropped else ""
    left_out += (f"; {unordered} group(s) with a bound whose order against the other cells is not known (a bound is "
                 "not a value) left out" if unordered else "")
    if not kept:
        why = f"needs transformer cells that differ only in {x}, at >= 2 {what}"
        return _verdict(cid, claim, INCONCLUSIVE if dropped or unordered else NOT_TESTED, why + left_out)
    rhos, reps, ratios, ratio_reps = [], [], [], []
    for part in kept:
        xs = part[x].cast(pl.Float64).fill_null(math.inf).to_numpy()
        point, r = _values(part)
        rhos.append(float(_spearman(xs, point)))
        reps.append(None if r is None else _spearman(xs, r))
        hi_i, lo_i = int(np.argmax(xs)), int(np.argmin(xs))
        ends = part["m_star"].cast(pl.Float64).to_numpy()  # a bound's own value: the ratio is then a bound
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(float(ends[hi_i] / ends[lo_i]))
            ratio_reps.append(None if r is None else r[:, hi_i] / r[:, lo_i])
    rho = float(np.mean(rhos))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.exp(np.mean(np.log(ratios))))
    if any(r is None for r in reps):
        lo = hi = rlo = rhi = math.nan
    else:
        R = min(len(r) for r in reps)
        lo, hi = _interval(np.mean([r[:R] for r in reps], axis=0), ci)
        with np.errstate(divide="ignore", invalid="ignore"):
            rlo, rhi = _interval(np.exp(np.mean(np.log([r[:R] for r in ratio_reps]), axis=0)), ci)
    ratio_bound_ = _ratios_bound([p.sort(x, nulls_last=True) for p in kept])
    statistic = (f"mean Spearman rho of m* with {x} = {rho:.2f} over {len(kept)} group(s) of cells; m* at the "
                 f"largest / smallest {x} = {_ratio_text(ratio, ratio_bound_)}")
    interval = f"rho CI {lo:.2f} .. {hi:.2f}; ratio CI {_end(rlo)} .. {_end(rhi)}"
    why = f"groups: cells that differ only in {x} (>= 2 {what})" + left_out
    groups = [dict(cells=key, rho=r_g, ratio=quantity(q_g, bound=_ratios_bound([p.sort(x, nulls_last=True)])),
                   m_star=[dict({x: v}, m_star=quantity(m, lo_, hi_, b)) for v, m, lo_, hi_, b in
                           p.sort(x, nulls_last=True).select(x, "m_star", "ci_lo", "ci_hi", "bound").iter_rows()])
              for key, p, r_g, q_g in zip(keys, kept, rhos, ratios)]
    numbers = dict(rho=quantity(rho, lo, hi), ratio=quantity(ratio, rlo, rhi, ratio_bound_), n_groups=len(kept),
                   groups=groups)
    if math.isnan(lo):
        verdict, why = INCONCLUSIVE, why + "; no bootstrap replicates"
    elif hi <= 0 or rhi < EFFECT_RATIO:
        verdict = NOT_SUPPORTED
        why += ("; rho's interval is at or below 0" if hi <= 0 else
                f"; the ratio's interval lies below {EFFECT_RATIO:.2f} (grows by less than the required effect)")
    elif lo > 0 and rlo >= EFFECT_RATIO:
        verdict = SUPPORTED
        why += f"; rho's interval above 0 and the ratio's above {EFFECT_RATIO:.2f}"
    else:
        verdict = INCONCLUSIVE
        why += ("; rho's interval includes 0" if lo <= 0 else f"; the ratio's interval includes {EFFECT_RATIO:.2f}")
    used = pl.concat(kept, how="diagonal_relaxed")
    series = [dict(cells={}, verdict=verdict, statistic=statistic, interval=interval, why=why, numbers=numbers)]
    return _verdict(cid, claim, verdict, why, statistic, interval, series=series, used=used)


def _ordered(part: pl.DataFrame) -> bool:
    """Whether every pair of a group's cells has a known order: two values always; a bound
    against a value or another bound only where the bound settles it (``≤ u`` below ``v`` when
    u < v, ``> l`` above ``v`` when l >= v, ``≤ u`` below ``> l`` when u <= l). Two lower bounds
    at the same value (both beyond the same grid) tie, as the ranks treat them."""
    cells = list(zip(part["bound"].to_list(), part["m_star"].cast(pl.Float64).to_list()))
    for i, (b1, v1) in enumerate(cells):
        for b2, v2 in cells[i + 1:]:
            if b1 == b2 == "exact" or (b1 == b2 == "lower" and v1 == v2):
                continue
            (bl, vl), (bh, vh) = sorted([(b1, v1), (b2, v2)], key=lambda c: ("upper", "exact", "lower").index(c[0]))
            # bl is the pair's lower-reading end (upper bound or value), bh the higher one.
            if bl == "upper" and bh == "upper" or bl == "lower":
                return False
            if not (vl < vh if bl == "upper" and bh == "exact" else vl <= vh):
                return False
    return True


def ratio_bound(top: str, bottom: str) -> str:
    """The bound of the ratio top / bottom of two values with bounds ``top`` and ``bottom``
    (:data:`stats.critical.BOUNDS`): exact when both are; a lower bound when the top is a
    lower bound or the bottom an upper bound (and neither the other way round); an upper
    bound the other way round; none when they pull both ways or either has no number."""
    if "none" in (top, bottom):
        return "none"
    up = top == "lower" or bottom == "upper"
    down = top == "upper" or bottom == "lower"
    return "none" if up and down else "lower" if up else "upper" if down else "exact"


def _ratios_bound(parts: list[pl.DataFrame]) -> str:
    """The bound of a mean of end-to-end ratios (each group's largest over smallest value)."""
    kinds = {ratio_bound(p["bound"][-1], p["bound"][0]) for p in parts} - {"exact"}
    return "exact" if not kinds else kinds.pop() if len(kinds) == 1 else "none"


# --- L4 -----------------------------------------------------------------------------------

L4_CLAIM = "L4: the MLP needs far more samples than the transformer, and more so as T grows"


def l4_mlp_baseline(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L4: the MLP needs far more samples than the transformer as T grows.

    Statistic (per series of paired cells: a transformer and an MLP cell equal in every
    setting but the architecture's, ``ARCH_FIELDS``): the ratio MLP m* / transformer m* at
    the largest T where both have one (an MLP beyond the grid makes it a lower bound), with
    its bootstrap interval; and the log-log slope of the ratio on T over the T where both m*
    are values. Supported when the ratio's interval lies above :data:`FAR_MORE` ("far more")
    and the slope's above :data:`EFFECT_SLOPE` (>= ``MIN_POINTS`` T); not supported when the
    ratio's lies at or below 1 or the slope's below :data:`EFFECT_SLOPE`. Source: docs/claims.md 1a (L4); Edelman et al. 2022, section 5 (MLP
    baseline, sample complexity growing like T).
    """
    m_star = normalized(m_star)
    cell = cell or cell_columns(m_star)
    if "model" not in m_star.columns:
        return _verdict("L4", L4_CLAIM, NOT_TESTED, "the m* table has no model column")
    on = [c for c in cell if c not in ARCH_FIELDS]
    tr, mlp = (m_star.filter(pl.col("model") == v) for v in (ATTENTION, BASELINE))
    pairs = tr.join(mlp, on=on, how="inner", suffix="_mlp", nulls_equal=True)
    if pairs.is_empty():
        return _verdict("L4", L4_CLAIM, NOT_TESTED, "no T with both a transformer and an MLP cell of equal settings")
    arch = [c for c in ARCH_FIELDS if c in cell and c != "model"]
    by = [c for c in on if c != "T"] + arch + [f"{c}_mlp" for c in arch]
    judged = [(key, *_l4_series(part.sort("T"), ci)) for key, part in _groups(pairs, by)]
    return _combine("L4", L4_CLAIM, judged, [])


def _end(value: float) -> str:
    return "beyond the grid (inf)" if math.isinf(value) else f"{value:.2f}"


def _l4_series(pairs: pl.DataFrame, ci: float) -> tuple:
    tr, tr_reps = _values(pairs)
    mlp, mlp_reps = _values(pairs, "_mlp")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = mlp / tr  # (n,); NaN where both are beyond the grid
        reps = None if tr_reps is None or mlp_reps is None else mlp_reps / tr_reps  # (R, n)
    keep = ~np.isnan(ratio)
    T = pairs["T"].to_numpy()[keep]
    used = pairs.filter(pl.Series(keep))
    if not keep.any():
        return INCONCLUSIVE, "-", "-", "both models are beyond the grid at every T", used, {}
    ratio, reps = ratio[keep], None if reps is None else reps[:, keep]
    last = used.row(-1, named=True)
    mlp_row = {**last, **_strip(last, "_mlp")}
    bound = ratio_bound(last["bound_mlp"], last["bound"])
    value = last["m_star_mlp"] / last["m_star"] if bound != "none" else math.nan
    if bound == "lower":
        beyond = ", beyond the grid" if last["bound_mlp"] == "lower" else ""
        shown = f"> {value:.1f} (MLP m* {_show(mlp_row)}{beyond}; transformer m* {_show(last)})"
    elif bound == "upper":
        sign = "<" if last["bound"] == "lower" else "≤"
        beyond = ", beyond the grid" if last["bound"] == "lower" else ""
        shown = f"{sign} {value:.2f} (transformer m* {_show(last)}{beyond}; MLP m* {_show(mlp_row)})"
    elif bound == "none":
        shown = f"none (MLP m* {_show(mlp_row)}, transformer m* {_show(last)}: a bound on each side)"
    else:
        shown = f"{value:.2f}"
    lo, hi = _interval(None if reps is None else reps[:, -1], ci)
    if bound == "lower" and math.isinf(lo):
        # The MLP's m* is beyond the grid in every replicate: the ratio is above (its bound) /
        # (the transformer's m*), and the smallest that can be within the transformer's
        # interval is the bound over the interval's upper end, not over its estimate.
        top = last["ci_hi"]
        lo = last["m_star_mlp"] / top if top is not None and math.isfinite(top) and top > 0 else value
    statistic = f"MLP m* / transformer m* at T={T[-1]}: {shown}"
    interval = f"ratio CI {_end(lo)} .. {_end(hi)}"
    exact = (used["bound"] == "exact").to_numpy() & (used["bound_mlp"] == "exact").to_numpy()
    numbers = dict(T=[int(t) for t in T], ratio=quantity(value, lo, hi, bound),
                   transformer=[quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"]) for r in used.iter_rows(named=True)],
                   mlp=[quantity(r["m_star_mlp"], r["ci_lo_mlp"], r["ci_hi_mlp"], r["bound_mlp"])
                        for r in used.iter_rows(named=True)])
    if math.isnan(lo):
        return INCONCLUSIVE, statistic, interval, "no bootstrap replicates", used, numbers
    far, not_more = lo > FAR_MORE, hi <= 1
    grows = not_grows = False
    # "More so as T grows": the log-log slope of the ratio on T over the T where both m* are
    # values (a bound is not ranked against values), at least EFFECT_SLOPE.
    Te = T[exact].astype(float)
    trend = f"the ratio is a value at {len(Te)} T; a trend needs {MIN_POINTS}"
    if len(Te) >= MIN_POINTS:
        x = np.log10(Te)
        w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
        slope = float(w @ np.log10(ratio[exact]))
        with np.errstate(divide="ignore", invalid="ignore"):
            rep_slopes = np.log10(reps[:, exact]) @ w
        slo, shi = _interval(rep_slopes[np.isfinite(rep_slopes)], ci)
        statistic += (f"; log-log slope of the ratio on T = {slope:.2f} over T {int(Te[0])}..{int(Te[-1])} (where both "
                      "m* are values)")
        interval += f"; slope CI {slo:.2f} .. {shi:.2f}"
        numbers["slope"] = quantity(slope, slo, shi)
        numbers["slope_T"] = [int(t) for t in Te]
        grows, not_grows = slo > EFFECT_SLOPE, shi < EFFECT_SLOPE
        trend = (f"the ratio's slope on T is above {EFFECT_SLOPE:g} (it grows with T)" if grows else
                 f"the ratio's slope on T is below {EFFECT_SLOPE:g} (it does not grow with T)" if not_grows else
                 f"the ratio's slope interval includes {EFFECT_SLOPE:g}")
    if not_more or not_grows:
        return NOT_SUPPORTED, statistic, interval, "the ratio's interval is at or below 1" if not_more else trend, \
            used, numbers
    if far and grows:
        return SUPPORTED, statistic, interval, f"ratio's interval above {FAR_MORE:g} (far more); {trend}", used, numbers
    why = (f"ratio's interval above {FAR_MORE:g}; " if far else
           f"the ratio's interval reaches below {FAR_MORE:g} (\"far more\" needs at least {FAR_MORE:g}x); ") + trend
    return INCONCLUSIVE, statistic, interval, why, used, numbers


def _strip(row: dict, suffix: str) -> dict:
    return {k.removesuffix(suffix): v for k, v in row.items() if k.endswith(suffix)}


# --- R ------------------------------------------------------------------------------------

R_CLAIM = (f"R: our m* equals the paper's within the equivalence margin {EQUIVALENCE[0]:g} .. {EQUIVALENCE[1]:g} "
           f"(ratio ours/paper) for T = {R_RANGE[0]}..{R_RANGE[1]} (transformer, 3-way AND)")


def r_reference(m_star: pl.DataFrame, reference: Path | str = REFERENCE_CSV, cell: list[str] | None = None,
                ci: float = 0.95, margin: tuple[float, float] = EQUIVALENCE) -> dict:
    """R: our m* at T in ``R_RANGE`` (transformer, 3-way AND) against the paper's read-off.

    Statistic: the geometric-mean ratio ours / paper over our T in the range with an exact
    m*, exp(mean ln(m*(T) / m_paper(T))), with m_paper linearly interpolated in T between
    the read-off points (Edelman et al. 2022, section 5, figure "Transformer, 3-way AND";
    our read-off in ``stats/data``), and its bootstrap interval (the read-off is taken as
    fixed). An equivalence test (Schuirmann's two one-sided tests, as an interval inside the
    margin): supported when the interval lies inside ``margin``, not supported when it lies
    wholly outside, inconclusive otherwise. The verdict says which way ours differs, the
    margin, and the settings of our protocol it rests on (the paper's own width, optimiser,
    epochs and success rule are not part of our read-off). As for L1, a series with fewer
    than ``MIN_POINTS`` values of T in the range beside others (a side block over B or s) is
    named, not judged. Source: docs/claims.md 1a (R).

    Raises:
        OSError, ValueError: the reference cannot be read (see :func:`read_reference`).
    """
    m_star = one_init(normalized(m_star))
    ref = read_reference(reference)
    ours = reference_cells(m_star)
    if ours.is_empty():
        have = sorted(set(_attention(m_star)["T"].to_list())) if "T" in m_star.columns else []
        return _verdict("R", R_CLAIM, NOT_TESTED, f"no transformer 3-way AND cell with T in "
                        f"{R_RANGE[0]}..{R_RANGE[1]} (transformer T here: {have or 'none'})")
    cell = cell or cell_columns(m_star)
    series, side = _t_series(_groups(ours, [c for c in cell if c != "T"]))
    if not series:
        return _verdict("R", R_CLAIM, NOT_TESTED, f"no series has {MIN_POINTS} or more values of T in "
                        f"{R_RANGE[0]}..{R_RANGE[1]}", not_judged=side)
    judged = [(key, *_r_series(part, ref, ci, margin)) for key, part in series]
    return _combine("R", R_CLAIM, judged, side)


def _r_series(ours: pl.DataFrame, ref: pl.DataFrame, ci: float, margin: tuple[float, float]) -> tuple:
    protocol = {c: ours[c][0] for c in PROTOCOL_FIELDS if c in ours.columns and ours[c].n_unique() == 1}
    if "n_seeds" in ours.columns:
        protocol["seeds"] = int(ours["n_seeds"].max())
    rests_on = ("ours: " + ", ".join(f"{k}={v}" for k, v in protocol.items()) + "; success: test accuracy >= the "
                "run's threshold in half the seeds; the paper's width, optimiser, epochs and success rule are not in "
                "our read-off, which is by eye (about +-1.5 samples)")
    left = _left_out(ours)
    exact = ours.filter(pl.col("bound") == "exact")
    T = exact["T"].to_numpy().astype(float)
    paper = np.interp(T, ref["T"].to_numpy().astype(float), ref["critical_m"].to_numpy())  # (n,)
    point, reps = _values(exact)
    left_text = "; left out (a bound, not a value): " + ", ".join(f"T={x['T']}: {x['text']}" for x in left) if left else ""
    if exact.is_empty():
        return INCONCLUSIVE, "-", "-", "no cell in the range has an exact m*" + left_text, ours, \
            dict(left_out=left, protocol=protocol)
    ref_T = ref["T"].to_numpy().astype(float)
    lo_p = np.interp(T, ref_T, ref["err_lo"].to_numpy()) - READ_OFF
    hi_p = np.interp(T, ref_T, ref["err_hi"].to_numpy()) + READ_OFF
    read = np.isin(T, ref_T)  # read off at this T; elsewhere interpolated between read-off points
    grid = exact["m_star_grid"].to_numpy().astype(float)
    with np.errstate(divide="ignore"):
        gm = float(np.exp(np.mean(np.log(point / paper))))
        gm_grid = float(np.exp(np.mean(np.log(grid / paper))))
        ratio_reps = None
        if reps is not None:
            # Each replicate draws the paper's values too, uniformly within their plotted error bars
            # widened by the read-off's precision: the paper's uncertainty enters the interval.
            rng = np.random.default_rng(0)
            paper_reps = rng.uniform(lo_p, hi_p, size=reps.shape)
            ratio_reps = np.exp(np.mean(np.log(reps / paper_reps), axis=1))
        lo, hi = _interval(ratio_reps, ci)
        # The trend beside the level: the log-log slope of the ratio on T (ratio ~ T^slope), with
        # the same replicates' interval; a ratio that drifts with T is not one protocol's offset.
        per_T = point / paper  # (n,)
        slope = slo = shi = math.nan
        if len(T) >= MIN_POINTS:
            x = np.log(T)
            w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
            slope = float(w @ np.log(per_T))
            if reps is not None:
                rep_slopes = np.log(reps / paper_reps) @ w
                slo, shi = _interval(rep_slopes[np.isfinite(rep_slopes)], ci)
    papers = ", ".join(f"{p:.0f}" if r else f"{p:.0f}*" for p, r in zip(paper, read))
    statistic = (f"geometric-mean ratio ours/paper = {gm:.2f} over T = {', '.join(f'{t:g}' for t in T)} "
                 f"(ours {', '.join(_show(r) for r in exact.iter_rows(named=True))}; paper {papers}"
                 + ("; *: interpolated between read-off points" if not read.all() else "")
                 + f"); on the grid m*: {gm_grid:.2f}; the ratio against T: "
                 + ", ".join(f"{r:.2f}" for r in per_T)
                 + (f"; its trend ratio ~ T^{slope:.2f}" if not math.isnan(slope) else ""))
    interval = f"CI {lo:.3f} .. {hi:.3f} (the paper's error bars included); margin {margin[0]:g} .. {margin[1]:g}"
    if not math.isnan(slope):
        interval += f"; trend slope CI {slo:.2f} .. {shi:.2f}"
    numbers = dict(ratio=quantity(gm, lo, hi), ratio_grid=gm_grid, margin=list(margin), T=[int(t) for t in T],
                   ours=[float(p) for p in point], ours_grid=[float(g) for g in grid], paper=[float(p) for p in paper],
                   paper_read_off=[bool(r) for r in read], left_out=left, protocol=protocol,
                   ratio_by_T=[float(r) for r in per_T], trend_slope=quantity(slope, slo, shi))
    if math.isnan(lo):
        return INCONCLUSIVE, statistic, interval, "no bootstrap replicates" + left_text, exact, numbers
    side = (f"ours is {_pct(lo)} to {_pct(hi)} the paper's" if lo > 1 or hi < 1 else
            f"ours is between {_pct(lo)} and {_pct(hi)} the paper's")
    why = f"{side}; equivalent when the interval lies inside {margin[0]:g} .. {margin[1]:g}; {rests_on}{left_text}"
    if not math.isnan(slo):
        drift = ("ours rises against the paper's as T grows" if slo > 0 else
                 "ours falls against the paper's as T grows" if shi < 0 else "no trend of the ratio with T is shown")
        why += (f"; trend: {drift} (ratio {per_T[0]:.2f} at T={T[0]:g}, {per_T[-1]:.2f} at T={T[-1]:g}; slope "
                f"{slope:.2f}, CI {slo:.2f} .. {shi:.2f}): the level is an average over a drift, read it with it"
                if slo > 0 or shi < 0 else f"; trend: {drift} (slope {slope:.2f}, CI {slo:.2f} .. {shi:.2f})")
    grid_inside = margin[0] <= gm_grid <= margin[1]
    if margin[0] <= lo and hi <= margin[1]:
        room = min(lo - margin[0], margin[1] - hi)
        if room < 0.02:
            why += f"; a narrow call: the interval is inside the margin by {room:.3f}"
        if not grid_inside:
            return INCONCLUSIVE, statistic, interval, ("inside the margin on the fitted m*, but the grid m* give "
                                                       f"{gm_grid:.2f}, outside it: the m* estimator decides: " + why), \
                exact, numbers
        return SUPPORTED, statistic, interval, "inside the margin: " + why, exact, numbers
    if hi < margin[0] or lo > margin[1]:
        return NOT_SUPPORTED, statistic, interval, "outside the margin: " + why, exact, numbers
    return INCONCLUSIVE, statistic, interval, "the interval overlaps the margin's edge: " + why, exact, numbers


def _pct(ratio: float) -> str:
    """A ratio as a difference: 1.08 -> '8.0% above', 0.9 -> '10.0% below'."""
    if math.isnan(ratio):
        return "?"
    diff = ratio - 1
    return f"{abs(diff):.1%} {'above' if diff >= 0 else 'below'}"


# --- helpers -------------------------------------------------------------------------------

def _num(value) -> float:
    return math.nan if value is None else float(value)


def _values(df: pl.DataFrame, suffix: str = "") -> tuple[np.ndarray, np.ndarray | None]:
    """Cell values ``(n,)`` (+inf for a lower bound, the bound's value for an upper bound,
    NaN where there is no number) and their bootstrap replicates ``(R, n)`` (None when a
    cell has none; R is the shortest cell's count)."""
    bound = df[f"bound{suffix}"].to_numpy()
    m = df[f"m_star{suffix}"].cast(pl.Float64).fill_null(math.nan).to_numpy()
    point = np.where(bound == "lower", math.inf, np.where(bound == "none", math.nan, m))
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
    """Percentile interval (order statistics, as in stats/critical.py) of the replicates,
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
    return format_m_star(row["m_star"], row["bound"], digits=0)


def _ratio_text(value: float, bound: str) -> str:
    if bound == "none" or math.isnan(value):
        return "none (a bound on each side)"
    return {"lower": f"> {value:.2f}", "upper": f"≤ {value:.2f}"}.get(bound, f"{value:.2f}")


def _split(flags: str | None) -> list[str]:
    return [f for f in (flags or "").split("; ") if f]


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
            out += [dict(flag=f, cell=cell) for f in _split(r[f"flags{suffix}"])]
    return out


def _name(cell: dict) -> str:
    return " ".join(f"{c}={v}" for c, v in cell.items())


def _verdict(cid: str, claim: str, verdict: str, why: str, statistic: str = "-", interval: str = "-",
             series: list[dict] = (), used: pl.DataFrame | None = None, not_judged: list[dict] = ()) -> dict:
    """The verdict dict (module docstring). Budget-limited cells among ``used`` make it
    inconclusive and are named; every flag of a used cell is listed in ``flags``."""
    flags = _flagged(used) if used is not None and not used.is_empty() else []
    limited = sorted({_name(f["cell"]) for f in flags if f["flag"] in LIMITING})
    if limited and verdict in (SUPPORTED, NOT_SUPPORTED):
        verdict = INCONCLUSIVE
        why += f"; budget-limited cells used ({_few(limited)}): their m* measures the training budget"
    other = sorted({f"{f['flag']}: {_name(f['cell'])}" for f in flags if f["flag"] not in LIMITING})
    if other:
        why += f"; flagged cells used ({_few(other)})"
    return dict(id=cid, claim=claim, statistic=statistic, interval=interval, verdict=verdict, why=why,
                series=list(series), not_judged=list(not_judged), flags=flags)


def _few(names: list[str], k: int = 4) -> str:
    return "; ".join(names[:k]) + (f"; and {len(names) - k} more" if len(names) > k else "")


def combined(verdicts: list[str]) -> str:
    """One verdict from several series': not supported when any is, supported when all are,
    else inconclusive."""
    return (NOT_SUPPORTED if NOT_SUPPORTED in verdicts
            else SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE)


def _combine(cid: str, claim: str, judged: list[tuple], side: list[dict]) -> dict:
    """One verdict from per-series ``(key, verdict, statistic, interval, why, used, numbers)``:
    supported when all are, not supported when any is not, else inconclusive (a series that
    uses a budget-limited cell counts as inconclusive)."""
    series = []
    for key, verdict, statistic, interval, why, used, numbers in judged:
        one = _verdict(cid, claim, verdict, why, statistic, interval, used=used)
        series.append(dict(cells=key, verdict=one["verdict"], statistic=statistic, interval=interval, why=one["why"],
                           numbers=numbers, flags=one["flags"]))
    verdict = combined([s["verdict"] for s in series])

    def tag(s: dict, text: str) -> str:
        return f"[{_label(s['cells'])}] {text}" if s["cells"] and len(series) > 1 else text

    out = dict(id=cid, claim=claim, statistic=" | ".join(tag(s, s["statistic"]) for s in series),
               interval=" | ".join(tag(s, s["interval"]) for s in series), verdict=verdict,
               why=" | ".join(tag(s, s["why"]) for s in series), series=series, not_judged=list(side),
               flags=[f for s in series for f in s["flags"]])
    for s in series:
        del s["flags"]
    return out


def m_star_ratio(top: pl.DataFrame, bottom: pl.DataFrame, ci: float = 0.95) -> dict:
    """How m* of one series compares with another's at the same T (e.g. m*(B=2) / m*(B=1)).

    Statistic: per T where both cells' m* are exact, the ratio top / bottom; their geometric
    mean exp(mean ln ratio) with a percentile interval over the bootstrap replicates (replicate
    r of the mean from replicate r of every cell; the cells' bootstraps are independent).
    Cells where either m* is a bound are named in ``left_out``, never used as values.

    Args:
        top, bottom: m* tables of the two series (columns ``T``, ``m_star``, ``bound`` and
            optionally ``replicates``), one row per T.

    Returns:
        ``T`` (list of int), ``ratios`` (list of float), ``geomean``
        (:func:`quantity`), ``n_T``, ``left_out`` (T values).
    """
    top, bottom = normalized(top), normalized(bottom)
    cols = ["T", "m_star", "bound"] + (["replicates"] if "replicates" in top.columns and "replicates" in
                                       bottom.columns else [])
    pairs = top.select(cols).join(bottom.select(cols), on="T", suffix="_b").sort("T")
    exact = pairs.filter((pl.col("bound") == "exact") & (pl.col("bound_b") == "exact"))
    left = [int(t) for t in pairs.filter((pl.col("bound") != "exact") | (pl.col("bound_b") != "exact"))["T"]]
    out = dict(T=[int(t) for t in exact["T"]], ratios=[], geomean=quantity(math.nan), n_T=exact.height,
               left_out=left)
    if exact.is_empty():
        return out
    ratios = (exact["m_star"] / exact["m_star_b"]).to_numpy()
    gm = float(np.exp(np.mean(np.log(ratios))))
    lo = hi = math.nan
    if "replicates" in cols and not exact["replicates"].null_count() and not exact["replicates_b"].null_count():
        R = min(min(len(r) for r in exact["replicates"].to_list()), min(len(r) for r in exact["replicates_b"].to_list()))
        ra = np.array([r[:R] for r in exact["replicates"].to_list()], float)  # (n, R)
        rb = np.array([r[:R] for r in exact["replicates_b"].to_list()], float)
        with np.errstate(divide="ignore", invalid="ignore"):
            reps = np.exp(np.mean(np.log(ra / rb), axis=0))  # (R,); inf/NaN where a replicate is beyond the grid
        lo, hi = _interval(reps, ci)
    out.update(ratios=[float(r) for r in ratios], geomean=quantity(gm, lo, hi))
    return out
