"""A replication's comparisons of a new run with its baseline (the rules: analysis/replicate.py),
each experiment's own through its analysis (analysis/experiments.py ``compare``), then the
score distributions of every cell."""

from __future__ import annotations

from pathlib import Path

from attnsweep.analysis.context import RunContext
from attnsweep.analysis.experiments import analysis_of
from attnsweep.analysis.replicate import Comparison, distributions
from attnsweep.orchestrator.errors import RunError
from attnsweep.results import ResultsStore


def compare_runs(
    store: ResultsStore,
    baseline: str,
    new: str,
    tol: float = 0.25,
    alpha: float = 0.01,
    figures_dir: Path | None = None,
) -> list[Comparison]:
    """Every comparison of run ``new`` against run ``baseline`` (see the module doc).

    Raises:
        RunError: the runs come from different specs or experiments.
        StoreError: a run is missing or has no trained trials.
        SpecError: a run's stored spec has invalid settings (:mod:`analysis.context`).
    """
    sweeps = store.sweep_of(baseline), store.sweep_of(new)
    contexts = RunContext.load(store, sweeps[0], baseline), RunContext.load(store, sweeps[1], new)
    records = contexts[0].record, contexts[1].record
    if records[0]["spec_hash"] != records[1]["spec_hash"]:
        raise RunError(
            f"run {new} and baseline {baseline} come from different specs; replication compares runs of one pinned spec"
        )
    settings = contexts[0].settings  # one spec (same hash): the baseline's settings judge both
    dirs = [None, None] if figures_dir is None else [figures_dir / "baseline", figures_dir / "new"]
    kind = analysis_of(contexts[0].experiment)
    out, score, cell = kind.compare(store, sweeps, (baseline, new), contexts, settings, dirs, tol)
    out += distributions(store, sweeps, (baseline, new), [c for c in cell if c != "student"], score, alpha)
    return out
