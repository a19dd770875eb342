"""The judging of a report's runs: each run analysed, its spec's own claims judged on it
(:func:`judge_own`, stats/own_claims.py), claims L1-L4 and R judged on the union of the
sparse-Boolean runs' m* tables and S1-S4 on each symmetry run; the paper's claims the runs do
not test are set apart with what a run needs to test them (:func:`untested_line`). Nothing is
written but the figures asked for (presentation/report.py renders and writes what this finds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from attnsweep.analysis.boolean import boolean_verdicts, run_caveats
from attnsweep.analysis.completeness import as_stored
from attnsweep.analysis.context import RunContext
from attnsweep.analysis.experiments import analysis_of
from attnsweep.analysis.symmetry import SymmetryAnalysis
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.results import ResultsStore
from attnsweep.stats import symmetry as sym
from attnsweep.stats.boolean_cells import REFERENCE_CSV
from attnsweep.stats.figures_curves import plot_learning_curves
from attnsweep.stats.own_claims import judge as judge_claims
from attnsweep.stats.verdict_common import NOT_TESTED, Verdict

NO_RUN = "no run of this experiment given"
NEEDS = {
    "L1": "needs transformer cells at 3 or more values of T",
    "L2": "needs transformer cells that differ only in norm_bound, at 2 or more bounded values",
    "L3": "needs transformer cells that differ only in s",
    "L4": "needs transformer and MLP cells of equal settings",
    "R": "needs transformer 3-way AND cells at 3 or more T in 100..1100",
}
"""What a run needs to test each sparse-Boolean claim of the paper (the line that replaces an
untested claim's row); S1-S4 need a symmetry run."""


@dataclass
class ReportRun:
    """One run as the report shows it."""

    run_id: str
    sweep: str
    record: dict
    experiment: str
    context: RunContext | None = None
    """Its record and settings read once (:func:`runs_of`); None: read where they are needed."""
    figures: list[Path] = field(default_factory=list)
    m_star: pl.DataFrame | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    symmetry: SymmetryAnalysis | None = None


def runs_of(store: ResultsStore, run_ids: list[str]) -> list[ReportRun]:
    """The runs ``run_ids`` names (duplicates dropped), their records read and their
    settings parsed (:class:`analysis.context.RunContext`): every id is checked before
    anything is computed or written.

    Raises:
        AttnsweepError: no run ids given.
        StoreError: a run id is not in the store.
        SpecError: a run's stored spec has invalid settings (naming the run and the field).
    """
    run_ids = list(dict.fromkeys(run_ids))
    if not run_ids:
        raise AttnsweepError("give at least one run id (attnsweep runs lists them)")
    runs = []
    for run_id in run_ids:
        ctx = RunContext.load(store, store.sweep_of(run_id), run_id)
        # the page's counts of a run still running: the trials stored, as its warning says
        record = as_stored(store, ctx.sweep, run_id, ctx.record)
        runs.append(ReportRun(run_id, ctx.sweep, record, ctx.experiment, ctx))
    return runs


@dataclass
class Judgement:
    """What :func:`judge` found: the runs analysed and the verdicts of every claim."""

    runs: list[ReportRun]
    union: pl.DataFrame
    """The m* tables of the sparse-Boolean runs as one (a cell in several: the first run's)."""
    claims: list[dict]
    """The runs' own claims (their specs' ``claims:``, ``origin`` ``spec``) first, then those of
    L1-L4, R and S1-S4 (of each symmetry run) that the runs test."""
    caveats: list[str]
    tuned: set[str]
    """Settings an adaptive search tuned per cell: choices, not axes (they make no series)."""
    ci: float
    """The level of the sparse-Boolean runs' intervals (the first run's)."""
    judged_boolean: bool
    """Whether any run was a sparse-Boolean run (else :attr:`union` judges nothing)."""
    not_tested: list[dict] = field(default_factory=list)
    """The paper's claims the runs do not test: ``id``, ``claim``, ``needs`` (no row is shown
    for them; :func:`untested_line` says them in one line)."""

    @property
    def own(self) -> list[dict]:
        """The runs' own claims (those with ``origin`` ``spec``)."""
        return [v for v in self.claims if v.get("origin") == "spec"]

    @property
    def paper(self) -> list[dict]:
        """The paper's claims the runs test."""
        return [v for v in self.claims if v.get("origin") != "spec"]

    @property
    def symmetry_runs(self) -> list[ReportRun]:
        """The runs whose paper's claims are judged on each run alone (the symmetry runs)."""
        return [r for r in self.runs if not analysis_of(r.experiment).pooled]


def judge(
    store: ResultsStore,
    runs: list[ReportRun],
    reference: Path | str = REFERENCE_CSV,
    figures: Path | None = None,
) -> Judgement:
    """Analyse ``runs`` (:func:`runs_of`) and judge the claims; each run's figures go to
    ``figures/RUN_ID`` (None: no figure, no file written).

    Raises:
        StoreError: a run has no trained trials.
        SpecError: a run's stored spec has invalid settings.
    """
    boolean_tables: list[pl.DataFrame] = []
    tuned: set[str] = set()
    ci = 0.95
    kinds = {r.run_id: analysis_of(r.experiment) for r in runs}
    several_alone = sum(not k.pooled for k in kinds.values()) > 1
    contexts = {r.run_id: r.context or RunContext.load(store, r.sweep, r.run_id) for r in runs}
    for run in runs:
        ctx, kind = contexts[run.run_id], kinds[run.run_id]
        where = figures / run.run_id if figures is not None else None
        result = kind.analyze(store, ctx, where, False)
        run.m_star, run.figures = kind.m_star(result), result.figures
        if kind.pooled:  # the paper's claims judged below on the union of these runs' tables
            tuned |= ctx.tuned
            if not boolean_tables:
                ci = ctx.settings.ci
            boolean_tables.append(run.m_star)
        else:
            run.symmetry = result
            tag = f" [run {run.run_id}]" if several_alone else ""
            run.verdicts = [{**v, "claim": v["claim"].replace(":", f"{tag}:", 1)} for v in kind.verdicts(result, ctx)]
        if where is not None:  # a run that kept learning curves: one more figure; else none, nothing read
            curves = plot_learning_curves(
                store, run.sweep, run.run_id, (run.record.get("trial_fields") or "").split(","), where
            )
            if curves is not None:
                run.figures = [*run.figures, curves]
    union, claims = boolean_verdicts(boolean_tables, tuned, ci, reference)
    if not boolean_tables:
        claims = _missing(claims)
    claims += [v for r in runs if not kinds[r.run_id].pooled for v in r.verdicts] or _missing(
        _empty_symmetry_verdicts()
    )
    own: list[Verdict] = []
    with_claims = [r for r in runs if contexts[r.run_id].claims]
    for run in with_claims:
        tag = f" [run {run.run_id}]" if len(with_claims) > 1 else ""
        mine = judge_own(store, contexts[run.run_id], run.m_star)
        own += [{**v, "claim": v["claim"].replace(":", f"{tag}:", 1)} for v in mine]
    caveats = [note for r in runs for note in run_caveats(store, r.sweep, r.run_id, contexts[r.run_id])]
    tested = [v for v in claims if v["verdict"] != NOT_TESTED]
    ids = {v["id"] for v in tested}  # a claim one symmetry run tests is tested, whatever another run holds
    untested = [
        dict(id=v["id"], claim=v["claim"], needs=_needs(v))
        for v in claims
        if v["verdict"] == NOT_TESTED and v["id"] not in ids
    ]
    # Plain dicts (the same keys, in the same order): the renderers (report.py, publish.py,
    # readme_sections.py) take claims as dicts, and a Verdict is not one to a type checker.
    return Judgement(
        runs,
        union,
        [dict(v) for v in [*own, *tested]],
        caveats,
        tuned,
        ci,
        bool(boolean_tables),
        list({v["id"]: v for v in untested}.values()),
    )


def judge_own(store: ResultsStore, context: RunContext, m_star: pl.DataFrame | None) -> list[Verdict]:
    """The run's own claims (its spec's ``claims:``, orchestrator/spec_claims.py) judged by
    stats/own_claims.py on its m* table (a sparse-Boolean run's :func:`analysis.boolean.m_star_table`;
    None for a symmetry run) and its trained trials (the search's rows: an adaptive search's
    tuning and budget-check rows are choices and checks, not samples of the trend).

    A sparse-Boolean trial's ``test_error`` is 1 - ``test_acc``, floored at half a test sample
    (0.5 / ``n_test``): an error of 0 is below what the test set resolves, and a logarithm of it
    would drop the trials that fit best.

    Raises:
        SpecError: the stored spec's claims are invalid.
    """
    claims = context.claims
    if not claims:
        return []
    kind = analysis_of(context.experiment)
    cell = kind.cell()
    trials = None
    if any(c["kind"] == "trend" for c in claims):
        rows = store.scan_run_trials(context.sweep, context.run_id).filter(
            (pl.col("status") == "done") & (pl.col("search_phase").is_null() | (pl.col("search_phase") == "search"))
        )
        trials = kind.claim_trials(rows).collect()
        cell = [c for c in cell if c in trials.columns]
    if m_star is not None:
        cell = [c for c in cell if c in m_star.columns or trials is not None and c in trials.columns]
    return judge_claims(claims, m_star, trials, cell, context.settings.ci, context.settings.n_boot)


def _needs(v: Verdict) -> str:
    """What a run needs to test claim ``v`` (not tested here)."""
    if v["id"] in NEEDS:
        return NEEDS[v["id"]]
    return "a symmetry run" if v["why"] == NO_RUN else v["why"]


def untested_line(not_tested: list[dict]) -> str:
    """One line naming the paper's claims the runs do not test and what a run needs to test
    each (consecutive claims that need the same are named as a range: ``S1-S4 (a symmetry
    run)``); "" when every claim is tested."""
    if not not_tested:
        return ""
    groups: list[tuple[list[str], str]] = []
    for v in not_tested:
        if groups and groups[-1][1] == v["needs"]:
            groups[-1][0].append(v["id"])
        else:
            groups.append(([v["id"]], v["needs"]))
    parts = [f"{ids[0]}-{ids[-1]}" if len(ids) > 2 else ", ".join(ids) for ids, _ in groups]
    return "Not tested here: " + "; ".join(f"{p} ({needs})" for p, (_, needs) in zip(parts, groups, strict=True)) + "."


def _missing(verdicts: list[Verdict]) -> list[Verdict]:
    """The claims of an experiment the report has no run of: ``not tested``."""
    return [
        {
            **v,
            "statistic": "-",
            "interval": "-",
            "verdict": NOT_TESTED,
            "why": NO_RUN,
            "series": [],
            "not_judged": [],
            "flags": [],
        }
        for v in verdicts
    ]


def _empty_symmetry_verdicts() -> list[Verdict]:
    """S1-S4 of no trials (for their claim texts)."""
    text, num = pl.String, pl.Float64
    trials = pl.DataFrame(
        schema=dict(
            teacher=text,
            model=text,
            equivariance=text,
            status=text,
            n=pl.Int64,
            k=pl.Int64,
            d=pl.Int64,
            m=pl.Int64,
            seed=pl.Int64,
            test_error=num,
            eq_error_median=num,
            eq_error_max=num,
            perm_error_median=num,
        )
    )
    return sym.verdicts(trials, pl.DataFrame(schema=dict(teacher=text, student=text)), n_boot=0)
