"""How each experiment's run is analysed, looked up by the run's ``experiment`` (as
workers/experiments.py looks up how its trials train): the callers (``analyze``, ``report``,
``replicate``, the API's ``analyze`` and ``m_star``, the spec's own claims) ask
:func:`analysis_of` instead of branching on the experiment's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from attnsweep.analysis.context import RunContext
    from attnsweep.results import ResultsStore
    from attnsweep.stats.verdict_common import Verdict

BOOLEAN_SECTION = "sparse Boolean"
SYMMETRY_SECTION = "symmetry"


@dataclass(frozen=True)
class ExperimentAnalysis:
    """One experiment's run analysis.

    Attributes:
        name: the experiment (workers/experiments.py ``EXPERIMENTS``).
        analyze: ``(store, context, figures, save) -> result``: the run's analysis, its figures
            written to ``figures`` (None: none); ``save`` keeps its m* table in the store where
            the experiment does (the sparse-Boolean analysis).
        m_star: ``result -> DataFrame``: the run's m* table as its claims read it.
        verdicts: ``(result, context) -> list``: the verdicts of the paper's claims on the run alone.
        pooled: whether a report judges the paper's claims of this experiment on the union of
            its runs' m* tables (sparse Boolean: L1-L4 and R over every run given) or on each
            run alone (symmetry: S1-S4 per run, :attr:`verdicts`).
        section: the row of the README's verdict table the experiment's findings go to
            (presentation/verdict_table.py).
        cell: ``() -> list[str]``: the settings that key a cell of the run's m* table, m aside
            (the spec's own claims compare cells over them).
        claim_trials: ``(trials) -> LazyFrame``: a run's finished search rows as the spec's
            ``trend`` claims read them (stats/own_claims.py): the columns the claims name,
            made where the experiment derives them.
        compare: ``(store, sweeps, run_ids, contexts, settings, figure_dirs, tol) ->
            (comparisons, score, cell)``: the m* and verdict comparisons of two runs of one
            spec (analysis/replicate.py), the per-trial score whose distributions are
            compared, and the cell that keys them.
    """

    name: str
    analyze: Callable[[ResultsStore, RunContext, Path | None, bool], Any]
    m_star: Callable[[Any], pl.DataFrame]
    verdicts: Callable[[Any, RunContext], list[Verdict]]
    pooled: bool
    section: str
    cell: Callable[[], list[str]]
    claim_trials: Callable[[pl.LazyFrame], pl.LazyFrame]
    compare: Callable[..., tuple[list, str, list[str]]]


def _boolean_analyze(store: ResultsStore, context: RunContext, figures: Path | None, save: bool) -> Any:
    from attnsweep.analysis.boolean import analyze_run

    return analyze_run(store, figures_dir=figures, context=context, save=save)


def _boolean_m_star(result: Any) -> pl.DataFrame:
    from attnsweep.analysis.boolean import m_star_table

    return m_star_table(result)


def _boolean_verdicts(result: Any, context: RunContext) -> list[Verdict]:
    from attnsweep.analysis.boolean import boolean_verdicts, m_star_table

    return boolean_verdicts([m_star_table(result)], context.tuned, context.settings.ci)[1]


def _boolean_cell() -> list[str]:
    from attnsweep.analysis.boolean import CELL_FIELDS

    return [c for c in CELL_FIELDS if c != "m"]


def _boolean_claim_trials(rows: pl.LazyFrame) -> pl.LazyFrame:
    # An error of 0 is below what the test set resolves, and its logarithm would drop the trials
    # that fit best: 1 - test_acc is floored at half a test sample.
    import polars as pl

    if not {"test_acc", "n_test"} <= set(rows.collect_schema().names()):
        return rows
    floor = 0.5 / pl.col("n_test").cast(pl.Float64)
    return rows.with_columns(
        test_error=pl.coalesce(pl.col("test_error"), pl.max_horizontal(1 - pl.col("test_acc"), floor))
    )


def _boolean_compare(*args: Any) -> tuple[list, str, list[str]]:
    from attnsweep.analysis.replicate import compare_boolean

    return compare_boolean(*args)


def _symmetry_analyze(store: ResultsStore, context: RunContext, figures: Path | None, save: bool) -> Any:
    from attnsweep.analysis.symmetry import analyze_symmetry_run

    return analyze_symmetry_run(store, context.sweep, context.run_id, context.settings, figures)


def _symmetry_cell() -> list[str]:
    from attnsweep.stats.symmetry import CELL

    return list(CELL)


def _symmetry_claim_trials(rows: pl.LazyFrame) -> pl.LazyFrame:
    from attnsweep.stats.symmetry import with_student

    return with_student(rows)


def _symmetry_compare(*args: Any) -> tuple[list, str, list[str]]:
    from attnsweep.analysis.replicate import compare_symmetry

    return compare_symmetry(*args)


ANALYSES: dict[str, ExperimentAnalysis] = {
    "sparse_boolean": ExperimentAnalysis(
        "sparse_boolean",
        _boolean_analyze,
        _boolean_m_star,
        _boolean_verdicts,
        pooled=True,
        section=BOOLEAN_SECTION,
        cell=_boolean_cell,
        claim_trials=_boolean_claim_trials,
        compare=_boolean_compare,
    ),
    "symmetry": ExperimentAnalysis(
        "symmetry",
        _symmetry_analyze,
        lambda result: result.m_star,
        lambda result, context: result.verdicts,
        pooled=False,
        section=SYMMETRY_SECTION,
        cell=_symmetry_cell,
        claim_trials=_symmetry_claim_trials,
        compare=_symmetry_compare,
    ),
}
SECTIONS = tuple(dict.fromkeys(a.section for a in ANALYSES.values()))
"""The README verdict table's rows, in its order."""


def analysis_of(experiment: str) -> ExperimentAnalysis:
    """The analysis of runs of ``experiment``.

    Raises:
        ValueError: no experiment has that name (the message lists those that do).
    """
    try:
        return ANALYSES[experiment]
    except KeyError:
        raise ValueError(f"experiment must be one of {sorted(ANALYSES)}, got {experiment!r}") from None


def analysis_of_record(record: dict) -> ExperimentAnalysis:
    """The analysis of the run ``record`` describes (its ``experiment``; a record without one
    is a sparse-Boolean run's, as before the field existed: analysis/context.py).

    Raises:
        SpecError: the record names no experiment of :data:`ANALYSES` (naming the run, the
            field and the allowed values).
    """
    from attnsweep.analysis.context import experiment_of
    from attnsweep.orchestrator.errors import SpecError

    experiment = experiment_of(record)
    if experiment not in ANALYSES:
        raise SpecError(
            [f"experiment: value {experiment!r}: not an experiment; allowed: {sorted(ANALYSES)}"],
            f"the record of run {record.get('run_id') or '?'}",
        )
    return ANALYSES[experiment]
