"""The analysis of a sparse-Boolean run: m* per cell, its growth with T, and the figures.

A *cell* is every trial setting except m and the seed; a *series* is a cell without T
(e.g. the transformer on 3-way AND), along which m*(T) is fit by the four growth laws
of :mod:`stats.fits`. Printed by :mod:`attnsweep.presentation.terminal`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from attnsweep.analysis.context import RunContext
from attnsweep.analysis.redraws import with_redrawn
from attnsweep.analysis.saved_m_star import m_star_saved
from attnsweep.analysis.tuning import choose_m_star, range_check, tuning_choices, with_range_binds
from attnsweep.orchestrator.spec import AnalysisSettings, SearchSettings
from attnsweep.orchestrator.trials_table import trial_schema, with_later_fields
from attnsweep.results import ResultsStore, StoreError
from attnsweep.stats import compare_growth, critical_sample_sizes, success_rates
from attnsweep.stats.boolean_cells import ATTENTION, BASELINE, estimator_view
from attnsweep.stats.boolean_growth import AIC_MARGIN, MIN_DECADES, _rivals
from attnsweep.stats.boolean_wording import AGREED_KEYS, _disagreement, law_reading, law_why
from attnsweep.stats.critical import ESTIMATORS, FEW_SEEDS, format_m_star, resolve_bounds
from attnsweep.stats.figures import plot_m_star, plot_success_curves, plot_success_grid
from attnsweep.stats.fits import robust_law
from attnsweep.stats.norm_use import BOUNDED, norm_growth, norm_use
from attnsweep.stats.restarts import LEARNER, learners
from attnsweep.stats.verdict_common import EFFECT_SLOPE, Verdict
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers.config import LATER_FIELDS

CELL_FIELDS = [
    *(f for f in BooleanTrialConfig.model_fields if f not in ("m", "seed", "fault")),
    LEARNER,
]
"""A sparse-Boolean cell: every setting but m and the seed (and the test-only fault); in a run
with restarts, ``learner`` in place of ``restart`` (stats/restarts.py)."""

TUNED_RUN = "tuned_search"
"""A column of the m* table of a run whose adaptive search tuned settings per cell (always
true there; absent, read as false, for every other run): in a report of several runs it keeps
a tuned series apart from an untuned one of the same settings (L1 is judged per positions x
bound x tuning) instead of pooling the two into one series."""


@dataclass
class Analysis:
    """Everything ``analyze`` computes for one run."""

    sweep: str
    run_id: str
    m_star: pl.DataFrame
    fits: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Per series label (the ``series`` column of ``m_star``), :func:`stats.fits.compare_growth`;
    :meth:`fit_table` gives the same keyed by the series' settings."""
    laws: dict[str, dict] = field(default_factory=dict)
    """Per series label of ``fits``, the growth law its cells name as the report names it
    (:func:`stats.fits.robust_law`; none below ``stats.fits.MIN_LAW_POINTS`` exact cells)."""
    checks: list[dict] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    varying: list[str] = field(default_factory=list)
    budget: pl.DataFrame | None = None
    """m* of the budget-check cells (twice max_epochs), when the run has them."""
    tuning: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per tuned cell, the tuning phase's choice (analysis/tuning.py)."""
    tuned: list[str] = field(default_factory=list)
    """Settings the run's adaptive search tuned per cell."""
    replicates: dict[tuple, np.ndarray] = field(default_factory=dict)
    """The ``(n_boot,)`` bootstrap m* of each cell, keyed by its cell values (stats/critical.py)."""
    series_fields: list[str] = field(default_factory=list)
    """The settings that tell the run's series apart (those that vary, but T and tuned ones)."""
    norm_growth: dict[str, dict] = field(default_factory=dict)
    """Per transformer series, the smallest ||W_Q W_K^T|| of a successful trial against ln T
    (:func:`stats.norm_use.norm_growth`: ``a``, ``b``, ``b_lo``, ``b_hi``, ``n_points``)."""

    def fit_table(self) -> pl.DataFrame:
        """The growth-law fits, one row per (series, law): the series' settings as columns
        (``series_fields``), then ``law`` (``log``: a + b ln T, ``linear``: a + b T,
        ``power``: a T^c, whose exponent is in ``b``), ``a``, ``b`` with their bootstrap
        intervals ``a_lo``..``b_hi``, ``r2``, ``aic``, ``bic``, ``delta_aic`` and
        ``n_points`` (stats/fits.py), and ``named_law``: the series' growth law as the report
        names it (:attr:`laws`; e.g. ``"no law named (3 exact cells; a law needs 5)"``: the
        lowest AIC alone names none); empty when no series has 3 exact m*."""
        if not self.fits:
            return pl.DataFrame()
        keys = self.m_star.select(*self.series_fields, "series").unique(subset=["series"], maintain_order=True)
        fits = pl.concat(
            [
                fit.rename({"model": "law"}).with_columns(
                    series=pl.lit(label),
                    named_law=pl.lit(law_reading(self.laws[label]) if label in self.laws else None, pl.String),
                )
                for label, fit in self.fits.items()
            ]
        )
        return fits.join(keys, on="series", how="left").select(
            *self.series_fields, "law", *[c for c in fits.columns if c not in ("law", "series")]
        )


def search_rows(trials: pl.LazyFrame | pl.DataFrame, cell: list[str], phase_name: str = "search") -> pl.LazyFrame:
    """The rows m* is computed from: all of a grid sweep's; of an adaptive search, its
    ``search`` phase (the spec's settings; ``phase_name="tuned"``: the search with the
    adopted settings) plus every tuning trial whose settings are that search's cell's (the
    adopted set's trials at the probe m). The same rule holds in every cell, whether or not
    the search came back to the probe m: a tuning trial with a cell's own settings is a trial
    of that cell (it has the trial id the search trial with the same settings, m and seed would
    have had). Tuning trials of sets not adopted, and the budget check, stay out.

    Args:
        cell: the columns that identify a cell (every setting but m and the seed).
    """
    phase = pl.col("search_phase")
    trials = trials.lazy()
    searched = trials.filter((phase.is_null() | (phase == "search")) if phase_name == "search" else phase == phase_name)
    tuned = trials.filter(phase == "tune").join(
        searched.filter(phase == phase_name).select(*cell).unique(),
        on=cell,
        how="semi",
        nulls_equal=True,
    )
    return pl.concat([searched, tuned])


def search_of(store: ResultsStore, sweep: str, run_id: str) -> SearchSettings:
    """The search settings of the run's own spec (a grid search where it has no ``search``).

    Raises:
        StoreError: no such run.
        SpecError: its stored spec's ``search`` section is invalid (:mod:`analysis.context`).
    """
    return RunContext.load(store, sweep, run_id).search


def tuned_fields(store: ResultsStore, sweep: str, run_id: str) -> set[str]:
    """Settings the run's adaptive search tuned per cell (empty for a grid sweep).

    Raises:
        StoreError, SpecError: as :func:`search_of`.
    """
    return RunContext.load(store, sweep, run_id).tuned


def unfinished_note(store: ResultsStore, sweep: str, run_id: str, context: RunContext | None = None) -> str | None:
    """A warning for a run that did not finish (its cells may be incomplete), else None.

    Args:
        context: the run's record and settings, if already read (:class:`analysis.context.RunContext`).
    """
    from attnsweep.results.locks import RunLock, RunLockedError

    ctx = context or RunContext.load(store, sweep, run_id)
    record = ctx.record
    if record["status"] == "finished":
        return None
    stored = len(store.run_trial_ids(sweep, run_id))
    state = record["status"]
    if state == "running":
        try:
            with RunLock(store, sweep, run_id):
                state = "unfinished (its driver is gone)"
        except RunLockedError:
            state = "still running"
    held = (
        f"{stored} trials stored (an adaptive search, which stops when m* is pinned; at most {record['n_trials']})"
        if ctx.search.adaptive
        else f"{stored} of {record['n_trials']} trials stored"
    )
    return f"run {run_id} is {state}: {held}; cells may be incomplete (attnsweep resume {run_id})"


def run_caveats(store: ResultsStore, sweep: str, run_id: str, context: RunContext | None = None) -> list[str]:
    """What a reader of this run's results must know: it did not finish, the store holds
    fewer (or more) of its rows than it recorded, or a model (any text setting) trained no
    trial at all (:mod:`analysis.completeness`).

    Args:
        context: the run's record and settings, if already read (:class:`analysis.context.RunContext`).

    Raises:
        StoreError: no such run.
        SpecError: its stored spec's settings are invalid (:mod:`analysis.context`).
    """
    from attnsweep.analysis.completeness import incomplete_note, untrained_note

    ctx = context or RunContext.load(store, sweep, run_id)
    notes = (
        unfinished_note(store, sweep, run_id, ctx),
        incomplete_note(store, sweep, run_id, ctx),
        untrained_note(store, sweep, run_id, ctx),
        pooled_note(store, sweep, run_id, ctx.experiment),
    )
    return [n for n in notes if n is not None]


def pooled_note(store: ResultsStore, sweep: str, run_id: str, experiment: str) -> str | None:
    """A warning for a run of an experiment whose cells are keyed by some settings alone
    (workers/experiments.py ``cell_keys``; symmetry: teacher, student, n, k and d,
    stats/symmetry.py) where its trials vary another (e.g. a calibration grid over
    ``max_epochs``): each m* and error there mixes those settings. None for an experiment
    whose every setting keys a cell (sparse Boolean).

    Raises:
        KeyError: ``experiment`` is not one of workers/experiments.py ``EXPERIMENTS``.
    """
    from attnsweep.stats.symmetry import pooled_settings
    from attnsweep.workers.experiments import EXPERIMENTS

    kind = EXPERIMENTS[experiment]
    if kind.cell_keys is None:
        return None
    trials = store.scan_run_trials(sweep, run_id)
    settings = [f for f in kind.config.model_fields if f not in ("m", "seed", "fault")]
    # The rows the analysis reads: the search's (tuning rows only where they repeat a searched trial).
    pooled = pooled_settings(search_rows(trials, settings), [f for f in settings if f not in kind.cell_keys])
    if not pooled:
        return None
    listed = " and ".join(f"{k} ({', '.join(map(str, v))})" for k, v in pooled.items())
    return (
        f"run {run_id} varies {listed} within its {experiment} cells, which are keyed by "
        f"{kind.cell_words} alone: each m*, error and verdict below pools those settings. "
        "Read one setting's rows with attnsweep query, or give each setting its own run"
    )


def m_star_table(result: Analysis) -> pl.DataFrame:
    """A run's m* table as the verdicts read it: one row per cell, with its bootstrap
    ``replicates`` (stats/boolean_cells.py) and its ``run_id``."""
    from attnsweep.stats.boolean_cells import with_replicates

    cell = [c for c in CELL_FIELDS if c in result.m_star.columns]
    table = with_replicates(result.m_star, result.replicates, cell)
    table = table.with_columns(run_id=pl.lit(result.run_id))
    return table.with_columns(pl.lit(True).alias(TUNED_RUN)) if result.tuned else table


def union_cell(union: pl.DataFrame) -> list[str]:
    """The columns that name a cell of a report's union m* table: :data:`CELL_FIELDS` and,
    where a run tuned, :data:`TUNED_RUN`."""
    return [c for c in [*CELL_FIELDS, TUNED_RUN] if c in union.columns]


def boolean_verdicts(
    tables: list[pl.DataFrame],
    tuned: set[str],
    ci: float = 0.95,
    reference: Path | str | None = None,
) -> tuple[pl.DataFrame, list[Verdict]]:
    """Claims L1-L4 and R (docs/claims.md 1a) judged on the m* tables of sparse-Boolean runs.

    Args:
        tables: each run's :func:`m_star_table`; where a cell is in several, the first is used
            (a tuned run's cells are never the same as an untuned run's: :data:`TUNED_RUN`).
        tuned: settings an adaptive search tuned per cell (:func:`tuned_fields`): choices,
            not axes, so they do not split the series and groups the claims compare.
        ci: the level of the bootstrap intervals.
        reference: the paper's read-off for R (default :data:`stats.boolean_cells.REFERENCE_CSV`).

    Returns:
        ``(union, verdicts)``: the union m* table (one row per cell) and one dict per claim
        (``claim``, ``statistic``, ``interval``, ``verdict``, ``why``).
    """
    from attnsweep.stats.boolean_cells import REFERENCE_CSV
    from attnsweep.stats.boolean_verdicts import verdicts

    if not tables:
        return pl.DataFrame(), verdicts(pl.DataFrame())
    union = pl.concat(tables, how="diagonal_relaxed")
    if TUNED_RUN in union.columns:
        union = union.with_columns(pl.col(TUNED_RUN).fill_null(False))
    if "range_binds" in union.columns:  # a table made without it (an untuned run's) binds nothing
        union = union.with_columns(pl.col("range_binds").fill_null(""))
    cell = union_cell(union)
    margins = [c for c in MARGIN_COLUMNS if c in union.columns]
    if margins:  # a cell's margins from the first run whose rows carry them (docs/claims.md 1a)
        union = union.with_columns([pl.col(c).fill_null(pl.col(c).drop_nulls().first().over(cell)) for c in margins])
    union = union.unique(subset=cell, keep="first", maintain_order=True)
    return union, verdicts(union, [c for c in cell if c not in tuned], reference or REFERENCE_CSV, ci)


MARGIN_COLUMNS = ("margin_success", "margin_failure")
"""Each cell's median normalised margins (stats/norm_use.py): a run made before margins existed
has none, and a later run of the same cell that measured them lends them to the union's row."""


def with_budget_check(table: pl.DataFrame, budget: pl.DataFrame | None, cols: list[str]) -> pl.DataFrame:
    """Add ``m_star_2x``, ``bound_2x`` and ``budget`` to the m* table: for each cell with a
    budget-check twin (the same cell at twice ``max_epochs``), ``"ok"`` when the twin's m*
    lies inside the cell's interval (both beyond the grid on the same side also counts) and
    the twin's own trials did not run out of epochs where they decide its m*, else
    ``"budget-limited"``: more training moved m*, or twice the epochs were still too few to
    say, so m* measured the budget, not the samples. Cells without a twin: ``"not checked"``.
    The bounds and flags are then resolved again (stats/critical.py,
    :func:`stats.critical.resolve_bounds`): the check overrides the rows' own out-of-epochs
    rule where it ran."""
    table = table.with_columns(
        m_star_2x=pl.lit(None, pl.Float64),
        bound_2x=pl.lit(None, pl.String),
        budget=pl.lit("not checked"),
    )
    if budget is None or budget.is_empty():
        return resolve_bounds(table)
    keys = [c for c in cols if c != "max_epochs"]
    twin = budget.select(
        *keys,
        max_epochs=pl.col("max_epochs") // 2,
        m_star_2x_=pl.col("m_star"),
        censored_2x=pl.col("censored"),
        bound_2x_=pl.col("bound"),
        ran_out_2x=pl.col("out_of_epochs"),
    )
    joined = table.drop("m_star_2x", "bound_2x").join(twin, on=[*keys, "max_epochs"], how="left", nulls_equal=True)
    inside = (pl.col("m_star_2x_") >= pl.col("ci_lo")) & (pl.col("m_star_2x_") <= pl.col("ci_hi"))
    same_side = (pl.col("censored") != "") & (pl.col("censored") == pl.col("censored_2x"))
    # A twin whose own trials ran out of epochs and decide its m* settles nothing: twice the
    # epochs were still too few to say, so the cell stays limited by its budget.
    verdict = (
        pl.when(pl.col("censored_2x").is_null())
        .then(pl.lit("not checked"))
        .when(pl.col("ran_out_2x").fill_null(False))
        .then(pl.lit("budget-limited"))
        .when(same_side | ((pl.col("censored_2x") != "above") & inside.fill_null(False)))
        .then(pl.lit("ok"))
        .otherwise(pl.lit("budget-limited"))
    )
    joined = joined.with_columns(budget=verdict, m_star_2x=pl.col("m_star_2x_"), bound_2x=pl.col("bound_2x_"))
    return resolve_bounds(joined.drop("m_star_2x_", "censored_2x", "bound_2x_", "ran_out_2x"))


def analyze_run(
    store: ResultsStore,
    run_id: str | None = None,
    figures_dir: Path | None = None,
    settings: AnalysisSettings | None = None,
    context: RunContext | None = None,
    save: bool = False,
) -> Analysis:
    """m* per cell, growth fits per series and the checks of a run.

    Args:
        store: the results store.
        run_id: the run (default: the latest; ignored where ``context`` is given).
        figures_dir: where PNG figures go (None: no figures).
        settings: m* settings (default: those of the run's spec).
        context: the run's record and settings, if already read (:class:`analysis.context.RunContext`).
        save: save the m* tables with the run for later analyses to reuse (``run`` does;
            analysis/saved_m_star.py); a table saved for these rows and settings is reused either way.

    Raises:
        StoreError: no such run, or it has no trained trials.
        SpecError: its stored spec's settings are invalid (:mod:`analysis.context`).
    """
    if context is None:
        sweep, run_id = store.latest_run() if run_id is None else (store.sweep_of(run_id), run_id)
        context = RunContext.load(store, sweep, run_id)
    sweep, run_id = context.sweep, context.run_id
    settings = settings or context.settings
    names = set(trial_schema().names)
    trials = with_later_fields(store.scan_run_trials(sweep, run_id))
    cols = [c for c in CELL_FIELDS if c in names]
    every = trials.select(
        [
            *cols,
            "m",
            "seed",
            "status",
            "test_acc",
            "train_acc",
            "train_loss",
            "converged",
            "search_phase",
            "error_type",
            *[c for c in ("redraws", *BOUNDED, "margin_normalised") if c in names],
        ]
    ).collect()
    # Restarts of one training set: three learners over the same rows (stats/restarts.py).
    every, cols = learners(every, cols, settings.acc_threshold)
    data = search_rows(every, cols).collect()
    if data.filter(pl.col("status").is_in(["done", "diverged"])).is_empty():
        errors = data.filter(pl.col("status") == "failed").group_by("error_type").len().sort("len", descending=True)
        why = ""
        if not errors.is_empty():
            top = errors["error_type"][0]
            hint = (
                "at small m a training set often fits more than one set of relevant positions: raise m; "
                if top and "Ambiguous" in top
                else ""
            )
            why = f": all {data.height} failed before training, most with {top} ({hint}the rows' error column says why)"
        raise StoreError(f"run {run_id} has no trained trials to analyse{why}")
    varying = [c for c in cols if data[c].n_unique() > 1]
    m_star = functools.partial(
        critical_sample_sizes,
        acc_threshold=settings.acc_threshold,
        success_frac=settings.success_frac,
        n_boot=settings.n_boot,
        ci=settings.ci,
        earlier=LATER_FIELDS,
    )

    def saved(phase: str, rows: pl.DataFrame):
        return m_star_saved(store, sweep, run_id, phase, rows, cols, settings, m_star, save, also=LATER_FIELDS)

    table, reps = saved("search", data)
    # Tuned settings differ from cell to cell by choice, not as an axis: they do not split a series.
    tuned = context.tuned
    tuned_data = search_rows(every, cols, "tuned").collect()
    tuned_table = None
    if not tuned_data.is_empty():
        tuned_table, tuned_reps = saved("tuned", tuned_data)
        reps = {**reps, **tuned_reps}
    spec_table = table  # m* with the spec's own settings, before tuned cells replace theirs
    table = choose_m_star(table, tuned_table, cols, sorted(tuned), bool(tuned))
    search = context.search
    ranges = {k: (r.min, r.max) for k, r in search.tune.params().items()} if search.tune is not None else {}
    table = with_range_binds(table, {k: v for k, v in ranges.items() if k in tuned})
    choices = (
        tuning_choices(every, cols, sorted(tuned), search.tune.confidence)
        if tuned and search.tune is not None
        else pl.DataFrame()
    )
    data = pl.concat([data, tuned_data], how="vertical_relaxed")
    table = with_redrawn(table, data, cols)
    series_cols = [c for c in varying if c != "T" and c not in tuned]
    table = table.with_columns(series=_label(series_cols)).sort(["series", "T"])
    budget_rows = every.filter(pl.col("search_phase") == "budget")
    budget = saved("budget", budget_rows)[0] if not budget_rows.is_empty() else None
    table = with_budget_check(table, budget, cols)
    # How much of its bound each cell used, and the norm success needed (stats/norm_use.py).
    use = norm_use(data, cols, settings.acc_threshold).drop("n_trained", "n_success")
    use = use.with_columns([pl.col(c).cast(table.schema[c]) for c in cols])  # an all-null column is typed Null there
    table = table.join(use, on=cols, how="left", nulls_equal=True)
    if budget is not None and not budget_rows.is_empty():  # the budget check's twin: did more epochs fit?
        keys = [c for c in cols if c != "max_epochs"]
        twice = (
            norm_use(budget_rows, cols, settings.acc_threshold)
            .select(*keys, fit_at_m_max_2x="fit_at_m_max")
            .with_columns([pl.col(c).cast(table.schema[c]) for c in keys])
        )
        table = table.join(twice, on=keys, how="left", nulls_equal=True)
    result = Analysis(
        sweep,
        run_id,
        table,
        varying=varying,
        budget=budget,
        tuned=sorted(tuned),
        replicates=reps,
        series_fields=series_cols,
        tuning=choices,
    )
    result.fits = _fits(table, reps, cols, settings.ci)
    result.laws = _laws(table, result.fits)
    result.norm_growth = (
        {
            label: norm_growth(part["T"].to_numpy(), part["min_norm_qk"].fill_null(np.nan).to_numpy(), settings.ci)
            # The paper's claim on W_QK's norm along T is about the transformer's attention head.
            for (label,), part in table.filter(pl.col("model") == ATTENTION).group_by("series", maintain_order=True)
        }
        if "T" in table.columns
        else {}
    )
    result.checks = _checks(table, result.fits, tuned, result.laws)
    if tuned_table is not None:  # tuning changed some cells: the growth laws with the spec's settings, too
        spec_table = spec_table.with_columns(series=_label(series_cols))
        spec_fits = _fits(spec_table, reps, cols, settings.ci)
        spec_laws = _laws(spec_table, spec_fits)
        result.checks += [_spec_law(label, fit, spec_laws[label]) for label, fit in spec_fits.items()]
    if figures_dir is not None:
        figures_dir = Path(figures_dir)
        result.figures.append(plot_m_star(table, result.fits, "series", figures_dir / "m_star_vs_T.png"))
        rates = success_rates(data, cols, settings.acc_threshold).with_columns(series=_label(series_cols))
        if (data["search_phase"] == "search").any():  # m differs per cell: curves, not a sparse heatmap
            result.figures.append(
                plot_success_curves(rates, "series", figures_dir / "success_rate_curves.png", settings.success_frac)
            )
        else:
            result.figures.append(plot_success_grid(rates, "series", figures_dir / "success_rate_grid.png"))
    return result


def _fit_cells(part: pl.DataFrame) -> pl.DataFrame:
    """The cells of a series a growth-law fit uses: a value, not a bound (stats/critical.py),
    and one whose interval is bounded (an interval open above, ``ci_hi`` infinite, says only
    that m* lies above its lower end: a bound, whatever its ``bound`` column says)."""
    keep = pl.col("m_star").is_not_nan() & (pl.col("bound") == "exact")
    if "ci_hi" in part.columns:
        keep = keep & ~pl.col("ci_hi").is_infinite().fill_null(False)
    return part.filter(keep)


def _fits(table: pl.DataFrame, reps: dict, cols: list[str], ci: float) -> dict[str, pl.DataFrame]:
    """The growth-law fits (stats/fits.py) of each series with m* known at >= 3 values of T
    (:func:`_fit_cells`)."""
    fits = {}
    for (label,), part in table.group_by(["series"], maintain_order=True):
        finite = _fit_cells(part)
        if finite["T"].n_unique() < 3:
            continue
        T = finite["T"].to_numpy()
        keys = [tuple(r[c] for c in cols) for r in finite.iter_rows(named=True)]
        rep = np.stack([reps[k] for k in keys], axis=1) if reps else None
        fits[label] = compare_growth(T, finite["m_star"].to_numpy(), rep, ci=ci)
    return fits


def _laws(table: pl.DataFrame, fits: dict[str, pl.DataFrame]) -> dict[str, dict]:
    """Per series of ``fits``, the growth law its fitted cells name, by the report's rule
    (stats/boolean_growth.py: :func:`stats.fits.robust_law` against the rivals L1 names, with
    its margin; none below ``stats.fits.MIN_LAW_POINTS`` cells, whatever the lowest AIC), read
    under each estimator of m* (stats/critical.py ``ESTIMATORS``): as
    :func:`stats.boolean_wording.agreed` keeps them, the law and direction stand only where all
    estimators give the same, else they read ``"undecided"``; the other numbers are the
    logistic estimator's (the rivals too: the polylog exponent's interval of ``fits``), and
    ``estimators`` holds each estimator's law."""
    laws = {}
    for label, fit in fits.items():
        rivals = _rivals(fit.filter(pl.col("model") == "polylog").row(0, named=True))
        part, each = table.filter(pl.col("series") == label), []
        for name in ESTIMATORS:
            used = _fit_cells(estimator_view(part, name)).sort("T")
            T, m = used["T"].to_numpy().astype(float), used["m_star"].to_numpy().astype(float)
            each.append(robust_law(T, m, rivals, AIC_MARGIN))
        agree = {key: "undecided" for key in AGREED_KEYS if len({str(r[key]) for r in each}) > 1}
        laws[label] = {**each[0], **agree, "estimators": {n: r["law"] for n, r in zip(ESTIMATORS, each, strict=True)}}
    return laws


def law_text(robust: dict, why: bool = True) -> str:
    """The growth law a series names (:func:`_laws`) in the report's words
    (stats/boolean_wording.py): ``growth law named: power``, or what stands in its place
    (``no law named (3 exact cells; a law needs 5)``, ``law undecided``); with ``why``, the
    report's reason after a named or undecided law."""
    reading, each = law_reading(robust), robust.get("estimators", {})
    text = reading if robust["law"] in ("too few cells", "undecided") else f"growth law named: {reading}"
    reason = _disagreement(each) if len(set(each.values())) > 1 else law_why(robust)
    return f"{text} ({reason})" if why and robust["law"] != "too few cells" else text


def _spec_law(label: str, fit: pl.DataFrame, robust: dict) -> dict:
    """The check line of a series' growth laws with the spec's settings in every cell: the
    law they name (:func:`_laws`), not the lowest AIC."""
    power = fit.filter(pl.col("model") == "power").row(0, named=True)
    log = fit.filter(pl.col("model") == "log").row(0, named=True)
    return dict(
        check=f"growth law with the spec's settings in every cell [{label}]",
        verdict=law_reading(robust),
        detail=f"power-law exponent c = {power['b']:.2f} (CI {power['b_lo']:.2f} .. {power['b_hi']:.2f}); "
        f"log-law slope b = {log['b']:.1f} (CI {log['b_lo']:.1f} .. {log['b_hi']:.1f})",
    )


def _label(cols: list[str]) -> pl.Expr:
    if not cols:
        return pl.lit("all")
    return pl.concat_str(
        [pl.lit(f"{c}=") + pl.col(c).cast(pl.String).fill_null("none") for c in cols],
        separator=", ",
    )


def settings_of(store: ResultsStore, sweep: str, run_id: str) -> AnalysisSettings:
    """The analysis settings of the run's own spec (the defaults where it has no ``analysis``).

    Raises:
        StoreError: no such run.
        SpecError: its stored spec's ``analysis`` section is invalid (:mod:`analysis.context`).
    """
    return RunContext.load(store, sweep, run_id).settings


def _checks(
    table: pl.DataFrame,
    fits: dict[str, pl.DataFrame],
    tuned: AbstractSet[str] = frozenset(),
    laws: dict[str, dict] | None = None,
) -> list[dict]:
    """Plain-language checks: does m* grow with T (as L1 reads it: the power-law exponent's
    interval above :data:`stats.verdict_common.EFFECT_SLOPE`; cells of fewer than
    :data:`stats.critical.FEW_SEEDS` seeds named), which
    law the cells name (:func:`_laws`, the report's rule: none from fewer than
    ``stats.fits.MIN_LAW_POINTS`` exact cells), whether tuning made m* worse or its search range
    binds, and at the largest T, does the transformer need fewer samples than the MLP.

    Args:
        laws: per series of ``fits``, its :func:`_laws` (computed here where not given).
    """
    checks = []
    laws = laws if laws is not None else _laws(table, fits)
    for label, fit in fits.items():
        log = fit.filter(pl.col("model") == "log").row(0, named=True)
        power = fit.filter(pl.col("model") == "power").row(0, named=True)
        # "Grows" as L1 reads it (docs/claims.md 2): the power-law exponent's interval above the
        # effect size, not merely a log-law slope above 0.
        if math.isnan(power["b_lo"]) or math.isnan(log["r2"]):
            verdict = "inconclusive"  # no interval, or m* did not vary at all
        else:
            verdict = (
                "yes" if power["b_lo"] > EFFECT_SLOPE else ("no" if power["b_hi"] < EFFECT_SLOPE else "inconclusive")
            )
        # The span of the cells the fit used (exact m*): a bound beyond them widens nothing.
        used = (
            _fit_cells(table.filter(pl.col("series") == label))
            if {"series", "T", "bound"} <= set(table.columns)
            else pl.DataFrame()
        )
        Ts = used["T"].drop_nulls().to_list() if "T" in used.columns else []
        seeds = used["n_seeds"].drop_nulls().to_list() if "n_seeds" in used.columns else []
        few = (
            f"; cells of {min(seeds)} seeds (intervals from fewer than {FEW_SEEDS} are rough)"
            if seeds and min(seeds) < FEW_SEEDS
            else ""
        )
        span = math.log10(max(Ts) / min(Ts)) if Ts and min(Ts) > 0 else math.nan
        robust = laws[label]
        which = (
            ""
            if span >= MIN_DECADES or robust["law"] in ("too few cells", "undecided")
            else f" (which law holds is not decided here: its exact m* span {span:.1f} decades of T, L1 needs "
            f"{MIN_DECADES:g})"
        )
        checks.append(
            dict(
                check=f"m* grows with T [{label}]",
                verdict=verdict,
                detail=f"log-law slope b = {log['b']:.1f} (CI {log['b_lo']:.1f} .. {log['b_hi']:.1f}); "
                f"{law_text(robust)}{which}; power-law exponent c = {power['b']:.2f} "
                f"(CI {power['b_lo']:.2f} .. {power['b_hi']:.2f}; grows = above {EFFECT_SLOPE:g}){few}",
            )
        )
    if "tuning" in table.columns and (table["tuning"] != "not tuned").any():
        worse = table.filter(pl.col("tuning") == "worse: spec used")
        adopted = int((table["tuning"] != "spec kept").sum())
        where = "; ".join(
            f"{r['series']}, T={r.get('T')}: tuned {r['m_star_tuned']:.1f} vs {r['m_star_default']:.1f}"
            for r in worse.iter_rows(named=True)
        )
        checks.append(
            dict(
                check="tuning did not make m* worse",
                verdict="yes" if worse.is_empty() else "no",
                detail=(
                    f"tuned settings adopted in {adopted} of {table.height} cells"
                    + (f"; worse (the spec's settings' m* is used): {where}" if where else "")
                ),
            )
        )
    binds = range_check(table)
    if binds is not None:
        checks.append(binds)
    if "model" in table.columns and table["model"].n_unique() > 1:
        # Settings of one architecture only (widths, heads) do not split the comparison.
        group = [
            c
            for c in CELL_FIELDS
            if c in table.columns and c not in _ARCH_FIELDS and c not in tuned and table[c].n_unique() > 1
        ]
        parts = table.partition_by(group, as_dict=True) if group else {(): table}
        for key, part in parts.items():
            where = ", ".join(f"{c}={v}" for c, v in zip(group, key, strict=True))
            check = _transformer_vs_mlp(part, f" [{where}]" if where else "")
            if check:
                checks.append(check)
    return checks


_ARCH_FIELDS = ("model", "T", "d", "layers", "heads", "mlp_width")


def _transformer_vs_mlp(part: pl.DataFrame, where: str) -> dict | None:
    """At the largest T with an MLP cell: yes when the transformer's m* lies below the MLP's
    (stats/symmetry.py's order of two m*, their bounds included), no when it lies at or
    above, inconclusive when the two overlap."""
    from attnsweep.stats.symmetry import _order

    # L2 is the paper's claim about these two models: a package's model enters no such comparison.
    mlp_T = part.filter(pl.col("model") == BASELINE)["T"].drop_nulls().to_list()
    if not mlp_T:
        return None
    T_max = max(mlp_T)
    at = part.filter(pl.col("T") == T_max)
    tr_cells, mlp_cells = at.filter(pl.col("model") == ATTENTION), at.filter(pl.col("model") == BASELINE)
    if tr_cells.is_empty() or mlp_cells.is_empty():
        return None
    tr, mlp = tr_cells.row(0, named=True), mlp_cells.row(0, named=True)
    order = _order(tr, mlp)
    return dict(
        check=f"transformer needs fewer samples than the MLP at T={T_max}{where}",
        verdict={"below": "yes", "above": "no"}.get(order, "inconclusive"),
        detail=f"transformer m* {_fmt(tr)}; MLP m* {_fmt(mlp)}",
    )


def _fmt(row: dict) -> str:
    if row["bound"] == "lower":
        return f"{format_m_star(row['m_star'], row['bound'])} (no m tried reached the success rate)"
    if row["bound"] != "exact":
        return format_m_star(row["m_star"], row["bound"]) + _flag_note(row)
    lo, hi = row["ci_lo"], row["ci_hi"]
    return f"{row['m_star']:.1f} (CI {lo:.1f} .. {hi:.1f})" + _flag_note(row)


def _flag_note(row: dict) -> str:
    return f" [{row['flags']}]" if row.get("flags") else ""


def interval_text(row: dict) -> str:
    """An m*'s interval as the tables write it: ``lo .. hi`` (``inf`` for an open end of a
    lower bound), ``-`` where there is none."""
    lo, hi = row["ci_lo"], row["ci_hi"]
    if lo is None or math.isnan(lo):
        return "-"
    return f"{lo:.1f} .. {'inf' if math.isinf(hi) else f'{hi:.1f}'}"
