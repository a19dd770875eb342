"""The critical sample size m* of a cell, its interval, and what the rows allow it to say.

Definition (used everywhere in attnsweep; docs/claims.md section 2, "Censoring"):

* A trial *succeeds* when it finished training (status ``done``) and reached the success
  measure (test accuracy >= ``acc_threshold``, default 0.95; or the expression given as
  ``success``). Diverged trials count as failures. Failed trials (no training happened,
  e.g. no unambiguous training set could be drawn) are left out.
* A *cell* is every setting but m and the seed. Its success rate at m is the fraction
  of its seeds that succeed.
* ``m_star_grid``: the smallest m tried whose success rate is >= ``success_frac``
  (default 1/2).
* The estimate: a logistic fit of success on ln m,
  P(success | m) = sigmoid(a + b (ln m - mean ln m)), by penalised maximum likelihood
  (ridge ``RIDGE`` on a and b, which keeps the fit finite when the outcomes separate
  perfectly), and m* solves P = success_frac: ln m* = mean ln m + (logit(frac) - a) / b,
  clamped to the range of m tried. When b <= 0 the fit says nothing, and the estimate is
  m_star_grid.
* ``m_star_interp``: the success rate interpolated on ln m: where the rate first reaches
  ``success_frac``, the m at which the straight line through (ln m, rate) of the last m tried
  below that crossing and the crossing itself takes the value ``success_frac``.
* *The floor*: no training set has fewer than one sample, so m* >= 1, and a cell that
  reaches the rate at m = 1 has m* = 1 exactly (not a bound).

*Three estimators* (:data:`ESTIMATORS`): the logistic crossing (``m_star_logistic``, what
``m_star`` holds for an exact cell), the grid m* and the interpolated m*. Each reads the same
rows; a finding is stated only where all three agree (docs/method.md, "Three estimators").
Each has its bootstrap replicates from the same resampling of seeds (the logistic ones
returned beside the table, the others as the ``replicates_grid`` and ``replicates_interp``
list columns).

*Plateau* (``plateau``, a flag): the rate levels off below 1: at the largest m tried, at
least twice the grid m*, the successes are significantly fewer than 95% (one-sided binomial
test at 5%). The logistic model's ceiling is 1, so there its crossing can lie away from the
point where half the seeds succeed, and the grid and interpolated m* are the readings to
compare it with.

What a cell's rows allow m* to be (the ``bound`` column; one rule for every derived
quantity, docs/claims.md 2):

* ``exact``: m* is the estimate, with its interval.
* ``lower``: m* > ``m_star``: no m tried reaches the rate (``censored = "above"``; m_star is
  the largest m tried), or the only m that could reach it had every trial that ran out of
  epochs succeeded lie above ``m_star`` (below).
  An interval with no upper end (``ci_hi`` infinite; the bootstrap's replicates beyond the
  grid outnumber its tail) is a lower bound too: m* > the interval's lower end, flag
  ``open-interval``, so that no fit or ratio reads the estimate as a value.
* ``upper``: m* <= ``m_star``: the smallest m tried already reaches the rate
  (``censored = "below"``, m_star = that m, > 1), or the cell is budget-limited (below): more
  training can only add successes, so the sample-limited m* is at most the estimate.
* ``none``: no number (a cell beyond the grid whose every m could have reached the rate had
  its trials not run out of epochs).

*Budget-limited* (the ``out_of_epochs`` column, from the rows alone): a trial *ran out of
epochs* when it finished without success, without stopping early (``converged`` false) and
without reaching the success measure even on its own training set (``fitted`` false). A cell
is out of epochs when, at some m tried, its success rate is below ``success_frac`` but its
successes plus the trials that ran out of epochs reach it: those trials decide which side of
the threshold that m falls on, and more training can only add successes, so the
sample-limited m* is at most the one measured. The budget check at twice the epochs
(analysis/boolean.py, ``budget`` column) overrides this rule where it ran: ``"ok"``
clears it, ``"budget-limited"`` sets it.

*Non-monotone* (``non_monotone``): the success rate reaches ``success_frac`` at some m and
falls below it at a larger m tried. The logistic model does not hold there, so m* is its
definition, ``m_star_grid`` (the first crossing), with the flag.

Intervals (``ci_lo``/``ci_hi``, level ``ci``): for an exact m*, the hull of three intervals,
each a reading of what the rows allow (their coverage was measured by simulation with 4-32
seeds, bench/interval_coverage.py, table in docs/claims.md 2):

1. the percentile bootstrap over seeds: the seeds of the cell are resampled with replacement
   (each seed keeps its outcomes at every m) ``n_boot`` times and m* is recomputed; a
   replicate beyond the grid counts as +inf; percentiles are order statistics;
2. the grid bracket: the largest m tried below ``m_star_grid`` and ``m_star_grid`` itself
   (the grid cannot place m* more finely; with few seeds every replicate can repeat one
   value, and the bootstrap alone then has zero width);
3. the profile-likelihood interval of m* under the logistic model (Wilks: the m* whose
   profile deviance is within the chi-square(1) quantile of the best), which widens with few
   seeds where the bootstrap does not.

A bound's interval: ``lower``: from the bootstrap's lower end (or the bound) to +inf;
``upper``: from 1 (or, budget-limited, the largest m below the m an optimistic count
reaches) to the larger of the bound and the bootstrap's upper end; ``none``: 1 .. +inf.
``few-seeds`` is flagged below :data:`FEW_SEEDS` seeds, where the simulated coverage of the
interval falls short of its level.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator

import numpy as np
import polars as pl

RIDGE = 1e-2
NEWTON_STEPS = 60

SUCCESS_STATUSES = ("done",)
TRAINED_STATUSES = ("done", "diverged")
BOUNDS = ("exact", "lower", "upper", "none")
"""What an m* (or any number computed from m*) is: the value itself, or a bound on it."""
FLAGS = ("non-monotone", "out-of-epochs", "budget-limited", "few-seeds", "open-interval", "plateau")
"""Flags a cell's m* can carry (module docstring), in the order they are listed."""
ESTIMATORS = {"logistic": "m_star_logistic", "grid": "m_star_grid", "interpolated": "m_star_interp"}
"""The estimators of m* and the column of each (module docstring); a finding holds when it holds
under every one."""
FEW_SEEDS = 8
"""Below this many seeds the interval's simulated coverage falls short of 95%
(docs/claims.md 2, bench/interval_coverage.py), and a cell is flagged ``few-seeds``."""

PLATEAU_PAST = 2.0
PLATEAU_RATE = 0.95
PLATEAU_LEVEL = 0.05
"""The plateau test (:func:`_plateau`): at an m at least ``PLATEAU_PAST`` times the grid m*,
successes fewer than a rate of ``PLATEAU_RATE`` gives with probability ``PLATEAU_LEVEL``."""

_PROFILE_SLOPES = np.geomspace(0.05, 300.0, 96)
"""Logistic slopes over which the profile likelihood is maximised (per unit of ln m)."""
_PROFILE_STEP = 0.01
"""Spacing of the candidate ln m* of the profile likelihood (a 1% step in m*)."""


def outcomes(
    trials: pl.LazyFrame | pl.DataFrame,
    acc_threshold: float = 0.95,
    success: pl.Expr | None = None,
    fitted: pl.Expr | None = None,
) -> pl.LazyFrame:
    """The trials that trained, with boolean ``success`` and ``out_of_epochs`` columns.

    Args:
        acc_threshold: success is ``test_acc >= acc_threshold`` ...
        success: ... unless this expression says otherwise (e.g. a test error below a target).
        fitted: whether a trial reached the success measure on its training set (default
            ``train_acc >= acc_threshold``); with ``converged`` it decides ``out_of_epochs``
            (the trial failed, did not stop early and did not fit its training set). Rows
            without a ``converged`` column never ran out of epochs.
    """
    trials = trials.lazy()
    names = trials.collect_schema().names()
    reached = success if success is not None else pl.col("test_acc") >= acc_threshold
    if fitted is None:
        fitted = pl.col("train_acc") >= acc_threshold if "train_acc" in names else pl.lit(True)
    ran_out = (
        (
            (pl.col("status") == "done")
            & ~pl.col("success")
            & (pl.col("converged") == False)  # noqa: E712
            & ~fitted.fill_null(False)
        )
        if "converged" in names
        else pl.lit(False)
    )
    return (
        trials.filter(pl.col("status").is_in(TRAINED_STATUSES))
        .with_columns(success=(pl.col("status") == "done") & reached.fill_null(False))
        .with_columns(out_of_epochs=ran_out.fill_null(False))
    )


def success_rates(
    trials: pl.LazyFrame | pl.DataFrame,
    cell: list[str],
    acc_threshold: float = 0.95,
    success: pl.Expr | None = None,
) -> pl.DataFrame:
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
    fitted: pl.Expr | None = None,
    earlier: dict[str, object] | None = None,
) -> tuple[pl.DataFrame, dict[tuple, np.ndarray]]:
    """m* per cell with its interval, bound and flags (module docstring).

    Args:
        trials: rows with the ``cell`` columns, ``m``, ``seed``, ``status``, ``test_acc``
            (and ``converged``, ``train_acc`` for the out-of-epochs rule).
        cell: the columns that identify a cell (every setting but m and seed).
        acc_threshold: test accuracy a trial must reach to succeed.
        success_frac: success rate that defines m*.
        n_boot: bootstrap replicates (0: no interval).
        ci: coverage of the interval.
        seed: seeds the bootstrap; each cell's resampling generator is seeded by ``seed``
            and its cell values, so a cell's interval depends neither on the order of the
            rows (which the store does not fix) nor on the other cells of the table.
        success: success expression replacing ``test_acc >= acc_threshold`` (see outcomes).
        fitted: "fit its training set" expression (see :func:`outcomes`).
        earlier: settings added after trials were first stored, with the value earlier trials
            had (``workers.config.LATER_FIELDS``): a cell at that value is seeded as if the
            setting did not exist, so adding one leaves earlier runs' intervals unchanged.

    Returns:
        ``(table, replicates)``: one row per cell with ``cell`` columns, ``m_star``,
        ``bound``, ``ci_lo``, ``ci_hi``, ``flags`` (``; ``-joined :data:`FLAGS`, "" when
        none), ``m_star_grid``, ``censored`` ("", "above", "below": m* relative to the m
        tried), ``non_monotone``, ``out_of_epochs``, ``m_floor_if_fit`` (the largest m
        below the first m that an optimistic count, every trial that ran out of epochs a
        success, brings to the rate; null when that is the smallest m tried), ``n_seeds``, ``m_min``,
        ``m_max``, ``n_trials``; and the ``(n_boot,)`` bootstrap m* of each cell (+inf beyond the grid),
        keyed by the tuple of its cell values. ``ci_lo_exact``/``ci_hi_exact`` keep the
        interval the rows give if m* is read as exact (the hull for a cell inside the grid,
        the bootstrap's for one outside it), from which :func:`resolve_bounds` derives
        ``ci_lo``/``ci_hi``.
    """
    data = (
        outcomes(trials, acc_threshold, success, fitted)
        .select([*cell, "m", "seed", "success", "out_of_epochs"])
        .collect()
    )
    out, reps = [], {}
    for key, group, rng in _cells(data, cell, seed, earlier or {}):
        ms, mat, ran = _outcome_matrix(group)
        k = np.nansum(mat, 0)
        n = np.sum(~np.isnan(mat), 0)
        row = dict(zip(cell, key, strict=True))
        row.update(
            _estimate(ms, k, n, ran, success_frac),
            n_seeds=mat.shape[0],
            m_min=int(ms[0]),
            m_max=int(ms[-1]),
            n_trials=len(group),
            ci_lo_exact=math.nan,
            ci_hi_exact=math.nan,
            replicates_grid=None,
            replicates_interp=None,
        )
        if n_boot > 0:
            vals, grid_vals, interp_vals = _bootstrap(ms, mat, rng, n_boot, success_frac)
            lo, hi = _exact_interval(vals, ms, k, n, row["m_star_grid"], row["censored"], success_frac, ci)
            row.update(
                ci_lo_exact=lo,
                ci_hi_exact=hi,
                replicates_grid=grid_vals.tolist(),
                replicates_interp=interp_vals.tolist(),
            )
            reps[tuple(key)] = vals
        out.append(row)
    return resolve_bounds(_table(out, cell, data.schema)), reps


_CELL_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "m_star": pl.Float64,
    "m_star_logistic": pl.Float64,
    "m_star_grid": pl.Float64,
    "m_star_interp": pl.Float64,
    "plateau": pl.Boolean,
    "censored": pl.String,
    "non_monotone": pl.Boolean,
    "out_of_epochs": pl.Boolean,
    "m_floor_if_fit": pl.Float64,
    "n_seeds": pl.Int64,
    "m_min": pl.Int64,
    "m_max": pl.Int64,
    "n_trials": pl.Int64,
    "ci_lo_exact": pl.Float64,
    "ci_hi_exact": pl.Float64,
    "replicates_grid": pl.List(pl.Float64),
    "replicates_interp": pl.List(pl.Float64),
}
"""The columns :func:`critical_sample_sizes` adds to a cell's values before
:func:`resolve_bounds`, in their order, with their types (an empty table has them too)."""


def _cells(
    data: pl.DataFrame, cell: list[str], seed: int, earlier: dict[str, object]
) -> Iterator[tuple[tuple, pl.DataFrame, np.random.Generator]]:
    """Each cell's values, its rows, and its bootstrap generator, seeded by ``seed`` and the
    cell's values (not by the order of the rows or by the other cells)."""
    # A setting added later at the value earlier trials had does not enter the generator's seed:
    # a new setting leaves the intervals of earlier runs as they were.
    later = [i for i, name in enumerate(cell) if name in earlier]
    for key, group in data.group_by(cell, maintain_order=True):
        named = tuple(v for i, v in enumerate(key) if i not in later or v != earlier[cell[i]])
        yield key, group, np.random.default_rng([seed, _cell_hash(named)])


def _outcome_matrix(group: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cell's sorted m tried ``(K,)`` and its ``(seeds, K)`` success matrix (NaN where a
    seed has no trained trial at that m) and out-of-epochs matrix (0 where none)."""
    ms = np.sort(group["m"].unique().to_numpy())
    seeds = group["seed"].unique().sort().to_numpy()
    mat = np.full((len(seeds), len(ms)), np.nan)
    ran = np.zeros((len(seeds), len(ms)))
    si = np.searchsorted(seeds, group["seed"].to_numpy())
    mi = np.searchsorted(ms, group["m"].to_numpy())
    mat[si, mi] = group["success"].to_numpy().astype(float)
    ran[si, mi] = group["out_of_epochs"].to_numpy().astype(float)
    return ms, mat, ran


def _estimate(ms: np.ndarray, k: np.ndarray, n: np.ndarray, ran: np.ndarray, success_frac: float) -> dict:
    """A cell's m* and what its rows allow it to say (module docstring), from its successes
    ``k`` and trained trials ``n`` at each m ``(K,)`` and its out-of-epochs matrix ``ran``:
    ``m_star``, ``m_star_grid``, ``censored``, ``non_monotone``, ``out_of_epochs``, ``m_floor_if_fit``."""
    point = _m_star(ms, k[None], n[None], success_frac)
    grid, censored = point["m_star_grid"][0], point["censored"][0]
    rate = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    reached = rate >= success_frac
    first = int(np.argmax(reached)) if reached.any() else len(ms)
    non_monotone = bool(reached.any() and (rate[first + 1 :] < success_frac).any())
    # The trials that ran out of epochs decide an m when they alone put its rate below one half.
    optimistic = ((k + ran.sum(0)) >= success_frac * n) & (n > 0)
    opt_first = int(np.argmax(optimistic)) if optimistic.any() else len(ms)
    out_of_epochs = bool((optimistic & ~reached).any())
    # A non-monotone curve breaks the logistic model: m* is its definition, the first crossing.
    logistic = grid if non_monotone and censored == "" else point["m_star"][0]
    return dict(
        m_star=logistic,
        m_star_logistic=logistic,
        m_star_grid=grid,
        m_star_interp=point["m_star_interp"][0],
        plateau=_plateau(ms, k, n, grid),
        censored=censored,
        non_monotone=non_monotone,
        out_of_epochs=bool(out_of_epochs),
        m_floor_if_fit=float(ms[opt_first - 1]) if opt_first > 0 else None,
    )


def _plateau(ms: np.ndarray, k: np.ndarray, n: np.ndarray, grid: float) -> bool:
    """Whether a cell's success rate levels off below 1 (the ``plateau`` flag): it crosses
    one half (``grid``, the grid m*), the largest m tried with trained trials is at least
    :data:`PLATEAU_PAST` times ``grid``, and there the successes ``k`` of ``n`` are fewer
    than a success probability of :data:`PLATEAU_RATE` allows (one-sided binomial test at
    level :data:`PLATEAU_LEVEL`). Far past its crossing a logistic curve with ceiling 1 is near
    1; a rate held well below it there is one the logistic model misreads (docs/method.md,
    "Three estimators")."""
    from scipy.stats import binom  # here: reading the store must not import scipy

    top = np.flatnonzero(n > 0)
    if math.isnan(grid) or top.size == 0 or ms[top[-1]] < PLATEAU_PAST * grid:
        return False
    return bool(binom.cdf(k[top[-1]], n[top[-1]], PLATEAU_RATE) < PLATEAU_LEVEL)


def _bootstrap(
    ms: np.ndarray, mat: np.ndarray, rng: np.random.Generator, n_boot: int, success_frac: float
) -> np.ndarray:
    """The m* of ``n_boot`` seed-resampled replicates of a cell's success matrix ``mat``
    ``(seeds, K)``, ``(3, n_boot)``: rows the logistic, grid and interpolated estimators
    (:data:`ESTIMATORS`; one resampling for all three); +inf for a replicate beyond the grid."""
    S = mat.shape[0]
    pick = rng.integers(0, S, size=(n_boot, S))
    # A replicate's k and n are sums over its resampled seeds: how often it drew
    # each seed times that seed's outcomes, one (n_boot, seeds) @ (seeds, 2 ms)
    # product instead of an (n_boot, seeds, ms) copy. The sums are of small
    # integers, so exact in floating point in any order: the same k and n.
    counts = np.bincount((pick + S * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * S)
    trained = ~np.isnan(mat)
    both = counts.reshape(n_boot, S).astype(float) @ np.concatenate([np.where(trained, mat, 0.0), trained], 1)
    bk, bn = both[:, : len(ms)], both[:, len(ms) :].astype(np.int64)
    b = _m_star(ms, bk, bn, success_frac)
    beyond = b["censored"] == "above"
    return np.stack([np.where(beyond, np.inf, b[name]) for name in ("m_star", "m_star_grid", "m_star_interp")])


def _exact_interval(
    vals: np.ndarray,
    ms: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    grid: float,
    censored: str,
    success_frac: float,
    ci: float,
) -> tuple[float, float]:
    """The interval of a cell's m* read as exact: the bootstrap's percentile interval of
    ``vals``, and for a cell inside the grid its hull with the grid bracket and the profile
    likelihood interval (module docstring)."""
    lo, hi = percentile_interval(vals, ci)
    if censored == "":
        below = ms[ms < grid]
        p_lo, p_hi = profile_interval(ms, k, n, success_frac, ci)
        lo = min(lo, float(below[-1]) if below.size else lo, p_lo)
        hi = max(hi, float(grid), p_hi)
    return lo, hi


def _table(out: list[dict], cell: list[str], schema: pl.Schema) -> pl.DataFrame:
    """The rows of :func:`critical_sample_sizes` as a table, typed by :data:`_CELL_COLUMNS`
    and, when there are none, the ``cell`` columns' types in ``schema``."""
    if out:
        return pl.DataFrame(out, schema_overrides=_CELL_COLUMNS, infer_schema_length=None)
    return pl.DataFrame(schema={**{c: schema[c] for c in cell}, **_CELL_COLUMNS})


def resolve_bounds(table: pl.DataFrame) -> pl.DataFrame:
    """``bound``, ``m_star``, ``ci_lo``/``ci_hi`` and ``flags`` of an m* table from its
    ``censored``, ``non_monotone``, ``out_of_epochs``, ``m_floor_if_fit``, ``n_seeds`` and,
    when present, ``budget`` (the check at twice the epochs: ``"ok"``, ``"budget-limited"``
    or ``"not checked"``), by the rules of the module docstring. Applying it twice changes
    nothing, so a caller that adds ``budget`` applies it again."""
    if table.is_empty():
        return table.with_columns(bound=pl.lit(None, pl.String), flags=pl.lit(None, pl.String))
    budget = pl.col("budget") if "budget" in table.columns else pl.lit("not checked")
    limited = (budget == "budget-limited") | (pl.col("out_of_epochs") & (budget != "ok"))
    floor = pl.col("m_floor_if_fit")
    above, below, inside = (pl.col("censored") == c for c in ("above", "below", ""))
    # Inside the grid, but the rows do not bound m* from above: what they allow is m* > the
    # interval's lower end, and a fit or a ratio must not read the estimate as a value.
    open_ = inside & ~limited & pl.col("ci_hi_exact").is_infinite()
    bound = (
        pl.when(above & limited & floor.is_null())
        .then(pl.lit("none"))
        .when(above)
        .then(pl.lit("lower"))
        .when(below)
        .then(pl.lit("upper"))
        .when(inside & limited)
        .then(pl.lit("upper"))
        .when(open_)
        .then(pl.lit("lower"))
        .otherwise(pl.lit("exact"))
    )
    # A budget-limited estimate keeps its value (it is the bound); beyond the grid the bound
    # is the largest m tried, or where trials ran out of epochs, the m below the optimistic count.
    value = (
        pl.when(above & limited)
        .then(floor)
        .when(above)
        .then(pl.col("m_max").cast(pl.Float64))
        .when(below)
        .then(pl.col("m_min").cast(pl.Float64))
        .when(open_)
        .then(pl.col("ci_lo_exact"))
        .otherwise(pl.col("m_star"))
    )
    plateau = pl.col("plateau").fill_null(False) if "plateau" in table.columns else pl.lit(False)
    lo, hi = pl.col("ci_lo_exact"), pl.col("ci_hi_exact")
    no_ci = lo.is_nan()
    ci_lo = (
        pl.when(no_ci)
        .then(pl.lit(math.nan))
        .when(pl.col("bound") == "lower")
        .then(pl.min_horizontal(lo, pl.col("m_star")))
        .when(pl.col("bound") == "none")
        .then(pl.lit(1.0))
        .when(below)
        .then(pl.lit(1.0))
        .when(pl.col("bound") == "upper")
        .then(pl.min_horizontal(lo, floor.fill_null(1.0)))
        .otherwise(lo)
    )
    ci_hi = (
        pl.when(no_ci)
        .then(pl.lit(math.nan))
        .when(pl.col("bound").is_in(["lower", "none"]))
        .then(pl.lit(math.inf))
        .when(below)
        .then(pl.max_horizontal(hi, pl.col("m_star")))
        .otherwise(hi)
    )
    flags = (
        pl.concat_list(
            [
                pl.when(pl.col("non_monotone")).then(pl.lit("non-monotone")),
                pl.when(pl.col("out_of_epochs") & (budget != "ok") & (budget != "budget-limited")).then(
                    pl.lit("out-of-epochs")
                ),
                pl.when(budget == "budget-limited").then(pl.lit("budget-limited")),
                pl.when(pl.col("n_seeds") < FEW_SEEDS).then(pl.lit("few-seeds")),
                pl.when(open_).then(pl.lit("open-interval")),
                pl.when(plateau).then(pl.lit("plateau")),
            ]
        )
        .list.drop_nulls()
        .list.join("; ")
    )
    return table.with_columns(bound=bound, m_star=value).with_columns(ci_lo=ci_lo, ci_hi=ci_hi, flags=flags)


def profile_interval(
    ms: np.ndarray, k: np.ndarray, n: np.ndarray, frac: float = 0.5, ci: float = 0.95
) -> tuple[float, float]:
    """The profile-likelihood interval of m* under the logistic model of the module
    docstring, P(success | m) = sigmoid(logit(frac) + beta (ln m - ln m*)), beta >= 0.

    The set of m* whose profile log-likelihood (maximised over the slope beta) is within
    chi2_1(ci) / 2 of the maximum (Wilks 1938), searched on a grid of ln m* with step
    :data:`_PROFILE_STEP` from one e-fold below the smallest m tried to one above the
    largest (an end of the search range means "at least that far").

    Args:
        ms: ``(K,)`` sorted sample sizes; k, n: ``(K,)`` successes and trained trials.

    Returns:
        ``(lo, hi)`` in samples (``lo`` at least 1).
    """
    from scipy.stats import (
        chi2,
    )  # here: reading the store must not import scipy (results/__init__.py)

    x = np.log(np.asarray(ms, float))
    keep = np.asarray(n) > 0
    x, k, n = x[keep], np.asarray(k, float)[keep], np.asarray(n, float)[keep]
    if x.size == 0:
        return math.nan, math.nan
    c = np.arange(x[0] - 1.0, x[-1] + 1.0 + _PROFILE_STEP, _PROFILE_STEP)  # candidate ln m*
    shift = math.log(frac / (1 - frac))
    z = _PROFILE_SLOPES[:, None, None] * (x[None, None, :] - c[None, :, None]) + shift  # (B, C, K)
    ll = (k * -np.logaddexp(0, -z) + (n - k) * -np.logaddexp(0, z)).sum(-1)  # (B, C)
    profile = ll.max(0)
    inside = c[profile >= profile.max() - chi2.ppf(ci, 1) / 2]
    return max(1.0, math.exp(inside.min())), math.exp(inside.max())


def percentile_interval(values: np.ndarray, ci: float) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates ``values`` ``(R,)`` with coverage
    ``ci``, as order statistics (no interpolation: an end may be +-inf, never NaN from
    inf - inf); NaN replicates are left out, and with none left both ends are NaN."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan, math.nan
    q = [
        round(50 * (1 - ci), 9),
        round(50 * (1 + ci), 9),
    ]  # 2.4999.. would pick another order statistic
    with np.errstate(invalid="ignore"):  # inf - inf between censored replicates
        lo, hi = np.percentile(values, q, method="inverted_cdf")
    return float(lo), float(hi)


def format_m_star(m_star: float | None, bound: str | None, digits: int = 1) -> str:
    """An m* (or a quantity derived from it) as every table and verdict writes it, by its
    ``bound`` (:data:`BOUNDS`): ``45.2`` (exact, to ``digits`` decimals), ``> 1024``
    (lower), ``≤ 8`` (upper), ``unknown`` (none); ``-`` where there is no value at all
    (e.g. a cell not checked)."""
    if bound == "none":
        return "unknown"
    if m_star is None or (isinstance(m_star, float) and math.isnan(m_star)):
        return "-"
    if bound == "lower":
        return f"> {_short(m_star)}"
    if bound == "upper":
        return f"≤ {_short(m_star)}"
    return f"{m_star:.{digits}f}"


def format_reading(row: dict, column: str, digits: int = 1) -> str:
    """One estimator's m* (``column``: a value of :data:`ESTIMATORS`) of a table row as the
    tables write it: the number where the cell's m* is exact, ``-`` where it is a bound (the
    bound is in the m* column) or the row has no such reading."""
    value = row.get(column)
    if row.get("bound", "exact") != "exact" or value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _short(value: float) -> str:
    """A bound's value: an integer as an integer, else 3 significant digits."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def _cell_hash(key: tuple) -> int:
    """A 63-bit integer naming a cell's values, the same in every process (unlike hash())."""
    text = json.dumps([v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for v in key])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def _m_star(ms: np.ndarray, k: np.ndarray, n: np.ndarray, frac: float) -> dict[str, np.ndarray]:
    """m* for R replicates at once (the floor rule of the module docstring included).

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
    at_floor = ms[0] <= 1  # m = 1 reached: m* = 1 exactly, nothing is below it
    censored = np.where(~any_reached, "above", np.where((first == 0) & ~at_floor, "below", ""))

    x = np.log(ms.astype(float))
    xbar = x.mean()
    a, b = _logistic_fit(x - xbar, k, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_m = xbar + (math.log(frac / (1 - frac)) - a) / b
    fit = np.exp(np.clip(log_m, x[0], x[-1]))
    m_star = np.where(b > 0, fit, grid)
    m_star = np.where(any_reached & (first == 0), float(ms[0]), m_star)  # at the first m tried: that m
    m_star = np.where(censored == "above", np.nan, m_star)
    interp = np.where(censored == "above", np.nan, _interpolated(ms, rate, first, frac))
    return {"m_star": m_star, "m_star_grid": grid, "m_star_interp": interp, "censored": censored}


def _interpolated(ms: np.ndarray, rate: np.ndarray, first: np.ndarray, frac: float) -> np.ndarray:
    """``m_star_interp`` of R replicates: where the success rate first reaches ``frac``, the m
    at which the straight line on (ln m, rate) between the last m tried below that crossing
    (with trained trials) and the crossing itself takes the value ``frac``; the crossing's m
    when nothing lies below it.

    Args:
        ms: ``(K,)`` m tried, sorted; rate: ``(R, K)`` success rates (NaN: no trained
            trial); first: ``(R,)`` index of the first rate >= ``frac``.
    """
    x = np.log(ms.astype(float))
    idx = np.arange(x.size)
    rows = np.arange(rate.shape[0])
    below = ~np.isnan(rate) & (idx[None, :] < first[:, None])
    prev = np.where(below, idx[None, :], -1).max(1)
    x0, r0 = x[np.maximum(prev, 0)], rate[rows, np.maximum(prev, 0)]
    x1, r1 = x[first], rate[rows, first]
    with np.errstate(invalid="ignore", divide="ignore"):
        # r0 < frac <= r1 where prev exists, so the line rises and the step is in [0, 1].
        step = np.clip((frac - r0) / (r1 - r0), 0.0, 1.0)
    return np.where(prev >= 0, np.exp(x0 + step * (x1 - x0)), ms[first].astype(float))


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
