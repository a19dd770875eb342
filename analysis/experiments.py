"""How each experiment's run is analysed, looked up by the run's ``experiment`` (as
workers/experiments.py looks up how its trials train): the callers (``analyze``, the API's
``analyze`` and ``m_star``) ask :func:`analysis_of` instead of branching on the experiment's name.
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


@dataclass(frozen=True)
class ExperimentAnalysis:
    """One experiment's run analysis.

    Attributes:
        name: the experiment (workers/experiments.py ``EXPERIMENTS``).
        analyze: ``(store, context, figures, save) -> result``: the run's analysis, its figures
            written to ``figures`` (None: none); ``save`` keeps its m* table in the store where
            the experiment does (the sparse-Boolean analysis).
        m_star: ``result -> DataFrame``: the run's m* table as its claims read it.
        verdicts: ``(result, context) -> list``: the verdicts of the experiment's claims on the run.
    """

    name: str
    analyze: Callable[[ResultsStore, RunContext, Path | None, bool], Any]
    m_star: Callable[[Any], pl.DataFrame]
    verdicts: Callable[[Any, RunContext], list]


def _boolean_analyze(store: ResultsStore, context: RunContext, figures: Path | None, save: bool) -> Any:
    from attnsweep.analysis.boolean import analyze_run

    return analyze_run(store, figures_dir=figures, context=context, save=save)


def _boolean_m_star(result: Any) -> pl.DataFrame:
    from attnsweep.analysis.boolean import m_star_table

    return m_star_table(result)


def _boolean_verdicts(result: Any, context: RunContext) -> list:
    from attnsweep.analysis.boolean import boolean_verdicts, m_star_table

    return boolean_verdicts([m_star_table(result)], context.tuned, context.settings.ci)[1]


def _symmetry_analyze(store: ResultsStore, context: RunContext, figures: Path | None, save: bool) -> Any:
    from attnsweep.analysis.symmetry import analyze_symmetry_run

    return analyze_symmetry_run(store, context.sweep, context.run_id, context.settings, figures)


ANALYSES: dict[str, ExperimentAnalysis] = {
    "sparse_boolean": ExperimentAnalysis("sparse_boolean", _boolean_analyze, _boolean_m_star, _boolean_verdicts),
    "symmetry": ExperimentAnalysis(
        "symmetry", _symmetry_analyze, lambda result: result.m_star, lambda result, context: result.verdicts
    ),
}


def analysis_of(experiment: str) -> ExperimentAnalysis:
    """The analysis of runs of ``experiment``.

    Raises:
        ValueError: no experiment has that name (the message lists those that do).
    """
    try:
        return ANALYSES[experiment]
    except KeyError:
        raise ValueError(f"experiment must be one of {sorted(ANALYSES)}, got {experiment!r}") from None
