"""Verdicts and reports from Python: judge runs without writing a file, write the verdict
report (``attnsweep report``), re-run a pinned sweep against a baseline (``attnsweep replicate``)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnsweep.api import run as run_sweep
from attnsweep.api_runs import check_paths, resolve_run
from attnsweep.api_store import DEFAULT_STORE, Store
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.orchestrator.progress import PROGRESS_INTERVAL_S

if TYPE_CHECKING:
    from rich.console import Console

    from attnsweep.analysis.context import RunContext
    from attnsweep.analysis.replicate import Comparison
    from attnsweep.results import ResultsStore
    from attnsweep.stats.verdict_common import Verdict


def judge_runs(
    run_ids: list[str],
    store: str | Path | Store = DEFAULT_STORE,
    reference: str | Path | None = None,
) -> list[Verdict]:
    """The verdicts of the claims of docs/claims.md on the runs ``run_ids``, as ``attnsweep
    report`` judges them, computed now from the store; no file is written (no figure, no
    report: :func:`report` renders and writes them).

    Args:
        run_ids: the runs to judge (duplicates are dropped; where a sparse-Boolean cell is in
            several runs, the first run given is used).
        store: the results store (a folder, a URI, or an opened :class:`Store`).
        reference: the paper's read-off for claim R, a CSV with columns T, critical_m,
            err_lo, err_hi (default: the one shipped, stats/data/).

    Returns:
        One dict per claim, in the report's order: the runs' own claims (their specs'
        ``claims:``, ``origin`` ``spec``; tagged ``[run RUN_ID]`` where several runs have
        some), then those of L1-L4 and R (judged on the union of the sparse-Boolean runs' m*
        tables) and S1-S4 (of each symmetry run, tagged likewise) that the runs test: a claim
        the runs do not test has no dict (``verdicts.json``'s ``not_tested`` names them).
        Each dict holds ``id``, ``claim``, ``verdict``
        (``supported``, ``not supported``, ``inconclusive``, ``not tested``), ``statistic``,
        ``interval``, ``why`` as text, and ``series``, ``not_judged`` and ``flags`` as
        numbers and lists (:attr:`api_store.RunAnalysis.verdicts`); NaN where a number is
        missing (``verdicts.json`` writes it null).

    Raises:
        AttnsweepError: no run ids given, or ``store`` is empty or a file.
        orchestrator.ArgumentError: a run id that is not a str.
        results.StoreError: a run id is not in the store, or a run has no trained trials.
    """
    from attnsweep.analysis.claims import judge, runs_of
    from attnsweep.api_store import check_names
    from attnsweep.stats.boolean_cells import REFERENCE_CSV

    if isinstance(run_ids, str):
        run_ids = [run_ids]
    for run_id in run_ids:
        check_names(run=run_id)
    results = (store if isinstance(store, Store) else Store(store)).results
    return judge(results, runs_of(results, list(run_ids)), reference or REFERENCE_CSV).claims


@dataclass(frozen=True)
class Report:
    """What :func:`report` wrote: ``path`` (report.html), and as ``verdicts.json`` holds them
    the ``verdicts`` (one dict per claim) and the ``caveats`` a reader must know."""

    path: Path
    verdicts: list[dict]
    caveats: list[str]


def report(
    run_ids: list[str] | None,
    store: str = DEFAULT_STORE,
    out_dir: Path | None = None,
    publish: bool = False,
    readme: Path | None = None,
    from_folder: Path | None = None,
    notify: Callable[[str], None] | None = None,
) -> Report:
    """Write the verdict report of runs, as ``attnsweep report`` does: judge, render, write
    (presentation/report.py).

    Args:
        run_ids: the runs (a sweep's name: its latest run); with ``from_folder``, default
            every run there.
        store: the results store (not read with ``from_folder``).
        out_dir: the report folder (default ``reports/FIRST_RUN_ID``; with ``from_folder``,
            that folder).
        publish: also write the findings (trials.parquet, runs.parquet, the m* tables, the
            figures, findings.md).
        readme: also put the findings into this README between its markers (implies publish).
        from_folder: make the report and findings again from a published folder's rows
            instead of a store (implies publish).
        notify: told each sweep's name read as its latest run.

    Raises:
        AttnsweepError: no run given, a folder or README that cannot be written, or a
            report there would drop published rows.
        results.StoreError: a run is not in the store, or has no trained trials.
        KeyboardInterrupt: Ctrl-C (or SIGTERM where the caller makes it one); its argument
            says what ``out_dir`` (and the README) hold now.
    """
    from attnsweep.results import ResultsStore

    if not run_ids and from_folder is None:
        raise AttnsweepError(
            "give at least one run id, or --from a published findings folder (attnsweep runs lists them)"
        )
    if from_folder is not None:
        from attnsweep.results.outputs import recover_folder

        recover_folder(from_folder)  # a publish a kill interrupted: the old folder or the new one, whole
    if from_folder is not None and not from_folder.is_dir():
        raise AttnsweepError(
            f"--from: {from_folder} " + ("is not a directory" if from_folder.exists() else "does not exist")
        )
    if from_folder is None:
        run_ids = [resolve_run(ResultsStore(store), r, notify) for r in run_ids]
    out_dir = out_dir or from_folder or Path("reports") / run_ids[0]
    if from_folder is None:
        check_paths(store, None)
    if out_dir.exists() and not out_dir.is_dir():
        raise AttnsweepError(f"--out: {out_dir} exists and is not a directory")
    if readme is not None:  # every problem with the README is found before anything is written
        from attnsweep.presentation.readme_sections import check_readme

        check_readme(readme)
    try:
        with tempfile.TemporaryDirectory(prefix="attnsweep-findings-") as scratch:
            path = _report_in(store, run_ids, out_dir, publish, readme, from_folder, scratch, notify)
    except KeyboardInterrupt:
        kept = (
            f"{out_dir} holds the old findings or the new ones, whole, never a mix"
            + (f"; {readme} is whole" if readme is not None else "")
            if publish or readme is not None or from_folder is not None
            else f"{out_dir} may hold some of the new report's files beside the old ones"
        )
        raise KeyboardInterrupt(kept) from None
    written = json.loads((path.parent / "verdicts.json").read_text())
    return Report(path, written["verdicts"], written["caveats"])


def _report_in(
    store,
    run_ids,
    out_dir: Path,
    publish: bool,
    readme: Path | None,
    from_folder: Path | None,
    scratch: str,
    notify,
) -> Path:
    from attnsweep.results import ResultsStore

    if from_folder is not None:
        from attnsweep.presentation.published import load

        store, publish = str(Path(scratch) / "store"), True
        loaded = load(from_folder, ResultsStore(store))
        run_ids = [resolve_run(ResultsStore(store), r, notify) for r in run_ids or []]  # a sweep: its latest run there
        unknown = [r for r in run_ids if r not in loaded]
        if unknown:
            raise AttnsweepError(
                f"--from: {from_folder} holds no run {', '.join(unknown)} (it holds {', '.join(loaded)})"
            )
        run_ids = run_ids or loaded
    source = f"the published rows in {from_folder}" if from_folder is not None else "the results store"
    return _report(ResultsStore(store), run_ids, out_dir, publish, readme, source)


def _report(
    store,
    run_ids: list[str],
    out_dir: Path,
    publish: bool,
    readme: Path | None,
    source: str = "the results store",
) -> Path:
    from attnsweep.presentation.report import build_report

    try:
        return build_report(store, run_ids, out_dir, publish=publish, readme=readme, source=source)
    except OSError as exc:  # the folder cannot be made or written
        raise AttnsweepError(f"--out: cannot write the report to {out_dir}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class Replication:
    """What :func:`replicate` found: the new run against the baseline.

    Attributes:
        comparisons: every comparison made (``ok`` False: it moved; None: not comparable).
        caveats: what a reader of either run must know.
        path: the report written (report.md).
    """

    sweep: str
    baseline: str
    run_id: str
    comparisons: list[Comparison]
    caveats: list[str]
    path: Path

    @property
    def failed(self) -> list[Comparison]:
        """The comparisons that moved: a regression when not empty."""
        return [c for c in self.comparisons if c.ok is False]


def replicate(
    spec: Path,
    baseline: str,
    store: str = DEFAULT_STORE,
    *,
    address: str | None = None,
    local: bool = False,
    report: Path | None = None,
    tolerance: float = 0.25,
    alpha: float = 0.01,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    console: Console | None = None,
    notify: Callable[[str], None] | None = None,
) -> Replication:
    """Re-run the pinned sweep ``spec`` and compare it with run ``baseline`` of the same spec,
    as ``attnsweep replicate`` does; writes ``report.md`` into ``report`` (default
    ``reports/SWEEP/NEW_RUN_ID``).

    Args:
        baseline: the baseline run (a sweep's name: its latest run, which ``notify`` is told).
        tolerance: relative widening of the baseline intervals.
        alpha: level of the Holm-corrected distribution tests.
        console: where the run's progress goes (default: stderr).

    Raises:
        AttnsweepError: the baseline is of another spec, not finished or not analysable, or
            the report folder cannot take the report (all found before the sweep runs).
        orchestrator.SpecError, orchestrator.RunError, results.StoreError: as :func:`api.run`.
    """
    from attnsweep.analysis.boolean import run_caveats
    from attnsweep.analysis.context import RunContext
    from attnsweep.analysis.replication import compare_runs
    from attnsweep.orchestrator.provenance import code_version
    from attnsweep.orchestrator.spec import load_spec
    from attnsweep.presentation.replication import write_report
    from attnsweep.results import ResultsStore

    s = load_spec(spec)
    results = ResultsStore(store)
    baseline = resolve_run(results, baseline, notify)
    base = RunContext.load(results, results.sweep_of(baseline), baseline)
    record = base.record
    if record["spec_hash"] != s.spec_hash():
        raise AttnsweepError(
            f"--baseline: run {baseline} was made from another spec (hash {record['spec_hash']}, "
            f"this spec {s.spec_hash()}); replicate pins one spec"
        )
    if record.get("status") != "finished":
        raise AttnsweepError(
            f"--baseline: run {baseline} is {record.get('status') or 'not recorded as finished'}, "
            "not finished: a replication compared with it would report what it lacks as a "
            "regression. Finish it first (attnsweep resume " + baseline + ") or give a finished run"
        )
    _analysable(results, base)  # before the sweep runs again, not after
    if report is not None:  # the folder checked before the sweep runs: it writes only inside it
        _check_report_folder(results, report)
    summary = run_sweep(
        s,
        store,
        address=address,
        local=local,
        progress_interval_s=progress_interval_s,
        console=console,
    )
    folder = report or Path("reports") / s.name / summary.run_id
    _check_report_folder(results, folder)
    comparisons = compare_runs(results, baseline, summary.run_id, tolerance, alpha, folder / "figures")
    header = dict(
        sweep=s.name,
        spec_hash=s.spec_hash(),
        baseline_code=record["code_version"],
        new_code=code_version(),
        tolerance=tolerance,
        alpha=alpha,
    )
    new = RunContext.load(results, results.sweep_of(summary.run_id), summary.run_id)
    caveats = [n for c in (base, new) for n in run_caveats(results, c.sweep, c.run_id, c)]
    path = write_report(
        folder / "report.md",
        comparisons,
        baseline,
        summary.run_id,
        folder / "figures",
        header,
        caveats,
    )
    return Replication(s.name, baseline, summary.run_id, comparisons, caveats, path)


def _check_report_folder(results: ResultsStore, folder: Path) -> None:
    """Raise AttnsweepError unless ``replicate`` may write its report into ``folder``: not a
    file, not inside the store, no link among its figure folders, no report.md of an earlier
    replication (each run gets a folder of its own; a second one would replace the first's)."""
    from attnsweep.results.outputs import check_output_folder

    if folder.exists() and not folder.is_dir():
        raise AttnsweepError(f"--report: {folder} exists and is not a folder")
    if results.holds(folder):
        raise AttnsweepError(
            f"--report: {folder} is inside the results store at {results.root}; give a folder outside it"
        )
    figures = folder / "figures"
    try:
        check_output_folder(folder, [figures, figures / "baseline", figures / "new"], "--report")
    except ValueError as exc:
        raise AttnsweepError(str(exc)) from None
    if (folder / "report.md").exists() and not (folder / "report.md").is_symlink():
        raise AttnsweepError(
            f"--report: {folder} already holds the report of a replication (report.md); each "
            "replication gets a folder of its own: give a new one"
        )


def _analysable(results: ResultsStore, run: RunContext) -> None:
    """Raise AttnsweepError unless ``run`` can be analysed (it has trained trials), so that a
    replication finds a useless baseline before it spends a sweep's time."""
    from attnsweep.analysis.experiments import analysis_of
    from attnsweep.results import StoreError

    try:
        analysis_of(run.experiment).analyze(results, run, None, False)
    except StoreError as exc:
        raise AttnsweepError(
            f"--baseline: run {run.run_id} cannot be analysed, so nothing could be compared with it: {exc}"
        ) from exc
