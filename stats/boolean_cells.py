"""The m* table the sparse-Boolean claims read (stats/boolean_verdicts.py): its columns, its
bounds and flags, the cells of the paper's setting, the series and groups of cells, each cell's
value and bootstrap replicates, and the ratio of m* between two series.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from attnsweep.stats.restarts import LEARNER, ONE_INIT
from attnsweep.stats.verdict_common import quantity

# The two models the paper's claims are about (L1-L4: the attention model; L2: it against the MLP
# baseline): the built-ins the model registry gives paper_role attention and baseline
# (workers/builtin_models.py; stats reads no registry, and tests/workers/test_model_registry.py
# holds the two to agree). A model a package adds plays no role: it is its own series in the m*
# table and the figures, and enters no paper claim.
ATTENTION, BASELINE = "transformer", "mlp"
RESULT_COLUMNS = frozenset(
    {
        "m_star",
        "m_star_grid",
        "m_star_logistic",
        "m_star_interp",
        "plateau",
        "replicates_grid",
        "replicates_interp",
        "redrawn",
        "ci_lo",
        "ci_hi",
        "censored",
        "n_seeds",
        "m_min",
        "m_max",
        "n_trials",
        "series",
        "budget",
        "m_star_2x",
        "replicates",
        "run_id",
        "sweep",
        "settings",
        "m_star_default",
        "m_star_tuned",
        "censored_default",
        "censored_tuned",
        "tuning",
        "bound",
        "flags",
        "non_monotone",
        "out_of_epochs",
        "m_floor_if_fit",
        "ci_lo_exact",
        "ci_hi_exact",
        "bound_2x",
        "bound_default",
        "bound_tuned",
        "range_binds",
        "m_star_bound",
        "margin_success",
        "margin_failure",
    }
)
"""Columns of an m* table that are not cell settings."""
MIN_POINTS = 3
"""Uncensored T a growth-law fit needs (L1), and T a trend of the L4 ratio needs."""
R_RANGE = (100, 1100)
"""The T range of the paper's figure "Transformer, 3-way AND" (Edelman et al. 2022, section 5)."""
REFERENCE_CSV = Path(__file__).parent / "data" / "edelman2022_fig_3way_and.csv"
"""Our read-off of the paper's figure (columns T, critical_m, err_lo, err_hi)."""


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


def estimator_view(m_star: pl.DataFrame, estimator: str) -> pl.DataFrame:
    """The m* table as one estimator of m* reads it (stats/critical.py ``ESTIMATORS``): an exact
    cell's ``m_star`` and ``replicates`` are that estimator's; a bound stays the bound (it is
    the grid's, the same under every estimator). A table without the estimator's column (one
    made before it existed, or constructed) is returned as it is; one without its replicates
    keeps the logistic estimator's, whose spread then stands in for its own.

    Raises:
        ValueError: ``estimator`` is not one of ``ESTIMATORS``.
    """
    from attnsweep.stats.critical import ESTIMATORS

    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {sorted(ESTIMATORS)}, got {estimator!r}")
    column = ESTIMATORS[estimator]
    if estimator == "logistic" or column not in m_star.columns or "bound" not in m_star.columns:
        return m_star
    exact = pl.col("bound") == "exact"
    out = m_star.with_columns(m_star=pl.when(exact).then(pl.col(column)).otherwise(pl.col("m_star")))
    reps = f"replicates_{column.removeprefix('m_star_')}"
    if reps in out.columns and "replicates" in out.columns:
        out = out.with_columns(replicates=pl.col(reps))
    return out


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
            bound=pl.when(cens == "above")
            .then(pl.lit("lower"))
            .when(cens == "below")
            .then(pl.lit("upper"))
            .otherwise(pl.lit("exact")),
            m_star=pl.when(cens == "above")
            .then(pl.col("m_max").cast(pl.Float64))
            .when(cens == "below")
            .then(pl.col("m_min").cast(pl.Float64))
            .otherwise(pl.col("m_star")),
        )
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
    return m_star.filter(
        (pl.col("task") == "and")
        & (pl.col("s") == 3)
        & (pl.col("model") == ATTENTION)
        & pl.col("T").is_between(*t_range)
        & protocol
    ).sort("T")


def t_series(
    series: list[tuple[dict, pl.DataFrame]],
) -> tuple[list[tuple[dict, pl.DataFrame]], list[dict]]:
    """The series a claim about the curve m*(T) judges, and the keys of those it does not.

    A series with fewer than MIN_POINTS values of T, beside others, is a side block (an s or
    B comparison at a few T), not a curve: it is named, not judged, so it cannot hold a
    T claim (L1, R) back.
    """
    side = [key for key, part in series if len(series) > 1 and part["T"].n_unique() < MIN_POINTS]
    return [(key, part) for key, part in series if key not in side], side


def cell_values(df: pl.DataFrame, suffix: str = "") -> tuple[np.ndarray, np.ndarray | None]:
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


def replicate_interval(reps: np.ndarray | None, ci: float) -> tuple[float, float]:
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


def attention_cells(m_star: pl.DataFrame) -> pl.DataFrame:
    return m_star.filter(pl.col("model") == ATTENTION) if "model" in m_star.columns else m_star


def groups_by(df: pl.DataFrame, by: list[str]) -> list[tuple[dict, pl.DataFrame]]:
    """``(key, rows)`` per distinct value of ``by`` (only the columns that vary in ``df``)."""
    if df.is_empty():
        return []
    by = [c for c in by if c in df.columns and df[c].n_unique() > 1]
    if not by:
        return [({}, df)]
    return [
        (dict(zip(by, key, strict=True)), part)
        for key, part in df.partition_by(by, as_dict=True, maintain_order=True).items()
    ]


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
    cols = ["T", "m_star", "bound"] + (
        ["replicates"] if "replicates" in top.columns and "replicates" in bottom.columns else []
    )
    pairs = top.select(cols).join(bottom.select(cols), on="T", suffix="_b").sort("T")
    exact = pairs.filter((pl.col("bound") == "exact") & (pl.col("bound_b") == "exact"))
    left = [int(t) for t in pairs.filter((pl.col("bound") != "exact") | (pl.col("bound_b") != "exact"))["T"]]
    out = dict(
        T=[int(t) for t in exact["T"]],
        ratios=[],
        geomean=quantity(math.nan),
        n_T=exact.height,
        left_out=left,
    )
    if exact.is_empty():
        return out
    ratios = (exact["m_star"] / exact["m_star_b"]).to_numpy()
    gm = float(np.exp(np.mean(np.log(ratios))))
    lo = hi = math.nan
    if "replicates" in cols and not exact["replicates"].null_count() and not exact["replicates_b"].null_count():
        R = min(
            min(len(r) for r in exact["replicates"].to_list()),
            min(len(r) for r in exact["replicates_b"].to_list()),
        )
        ra = np.array([r[:R] for r in exact["replicates"].to_list()], float)  # (n, R)
        rb = np.array([r[:R] for r in exact["replicates_b"].to_list()], float)
        with np.errstate(divide="ignore", invalid="ignore"):
            reps = np.exp(np.mean(np.log(ra / rb), axis=0))  # (R,); inf/NaN where a replicate is beyond the grid
        lo, hi = replicate_interval(reps, ci)
    out.update(ratios=[float(r) for r in ratios], geomean=quantity(gm, lo, hi))
    return out
