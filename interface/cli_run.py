"""The CLI's run commands: ``run`` and ``resume`` a sweep, ``replicate`` one against a
baseline, ``analyze`` a run; the Python API computes, these print."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import typer

from attnsweep.cli_options import (
    DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_STORE,
    AddressOpt,
    AnalyzeOpt,
    FiguresOpt,
    InFlightOpt,
    LocalOpt,
    MaxTrialsOpt,
    ProgressOpt,
    SetOpt,
    SpecArg,
    StoreOpt,
    err,
    notice,
    out,
    quoted,
    run_or_latest,
    sigterm_as_interrupt,
    user_errors,
)
from attnsweep.orchestrator.errors import AttnsweepError, RayDiedError
from attnsweep.presentation.console_text import for_stream, markup, visible


@user_errors
def run(
    spec: SpecArg,
    store: StoreOpt = DEFAULT_STORE,
    address: AddressOpt = None,
    local: LocalOpt = False,
    max_in_flight: InFlightOpt = None,
    max_trials: MaxTrialsOpt = 1_000_000,
    resume: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID",
            help="continue this run of the same spec: skip trials it already holds (also: attnsweep resume RUN_ID)",
        ),
    ] = None,
    figures: FiguresOpt = None,
    analyze: AnalyzeOpt = True,
    progress_interval: ProgressOpt = DEFAULT_PROGRESS_INTERVAL,
    set_: SetOpt = None,
) -> None:
    """Run a sweep, stream its rows into the store, then print the analysis."""
    from attnsweep.orchestrator.spec import load_spec

    s = load_spec(spec, max_trials=max_trials, overrides=set_ or ())  # before anything is started or written
    if resume is not None:
        from attnsweep.results import ResultsStore

        resume = run_or_latest(ResultsStore(store), resume)
    _execute(s, store, address, local, max_in_flight, figures, analyze, resume, progress_interval)


@user_errors
def resume(
    run_id: Annotated[
        str,
        typer.Argument(metavar="RUN_ID", help="the run to continue (a sweep's name: its latest run)"),
    ],
    store: StoreOpt = DEFAULT_STORE,
    address: AddressOpt = None,
    local: LocalOpt = False,
    max_in_flight: InFlightOpt = None,
    figures: FiguresOpt = None,
    analyze: AnalyzeOpt = True,
    progress_interval: ProgressOpt = DEFAULT_PROGRESS_INTERVAL,
) -> None:
    """Continue an interrupted or crashed run: only the trials it does not hold yet.

    The spec is the one stored in the run's record; the attempt is added to it.
    """
    from attnsweep.api import stored_spec
    from attnsweep.results import ResultsStore

    run_id = run_or_latest(ResultsStore(store), run_id)
    s = stored_spec(ResultsStore(store), run_id)
    _execute(s, store, address, local, max_in_flight, figures, analyze, run_id, progress_interval)


def _execute(
    s,
    store: str,
    address,
    local: bool,
    max_in_flight,
    figures,
    analyze: bool,
    resume_id: str | None,
    progress_interval: float,
) -> None:
    """attnsweep run / resume: the Python API's run (interface/api.py) with a terminal's output
    around it. SIGTERM acts as Ctrl-C from start to end of the command, so that whenever it
    comes the run says how it stands (:func:`_interrupted`), never ends without a word."""
    from attnsweep.api_runs import check_figure_folder, check_paths
    from attnsweep.orchestrator.driver import new_run_id

    if local and address is not None:
        raise AttnsweepError(f"--local and --address {address}: a run without Ray has no cluster; give one of them")
    check_paths(store, figures)
    run_id = resume_id or new_run_id()
    if analyze:  # a linked figure folder refused before the sweep runs, not after
        check_figure_folder(figures, s.name, run_id)
    with sigterm_as_interrupt():
        try:
            summary = _run_and_summarise(s, store, address, local, max_in_flight, resume_id, run_id, progress_interval)
        except KeyboardInterrupt:
            _interrupted(store, s.name, run_id, analyze)
        if analyze:
            from attnsweep.results import ResultsStore

            try:
                _print_analysis(
                    ResultsStore(store),
                    summary.run_id,
                    figures or Path("figures") / summary.sweep / summary.run_id,
                    save=True,  # the m* tables are kept with the run: analyze and report read them back
                )
            except KeyboardInterrupt:
                err.print(
                    visible(
                        f"interrupted: the analysis stopped; run {run_id} is saved: attnsweep analyze {run_id}"
                        + _store_option(store)
                    ),
                    style="yellow",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
                raise typer.Exit(130) from None


def _store_option(store: str) -> str:
    return f" --store {quoted(store)}" if store != DEFAULT_STORE else ""


def _interrupted(store: str, sweep: str, run_id: str, analyze: bool) -> NoReturn:
    """Say how run ``run_id`` stands after Ctrl-C or SIGTERM, from its record and the trials
    the store holds, and exit 130: an interrupted run names its trials and the resume that
    continues it; a run that had ended (the signal came as its record was written, or as its
    workers stopped) prints its summary line instead, with the analysis it did not print."""
    from attnsweep.api_runs import trial_counts
    from attnsweep.results import ResultsStore, StoreError

    results = ResultsStore(store)
    try:
        record = results.read_run(sweep, run_id)
    except (StoreError, OSError):  # stopped before its record was written
        record = {}
    held = ", ".join(f"{k} {v}" for k, v in sorted(trial_counts(results, sweep, run_id).items())) or "no trials"
    status = record.get("status")
    if status in ("finished", "failed"):
        why = f" ({record['error']})" if status == "failed" and record.get("error") else ""
        line = (
            f"run {run_id} of sweep {sweep}: {held}; {status}{why}; interrupted as it ended"
            + (f", before its analysis: attnsweep analyze {run_id}{_store_option(store)}" if analyze else "")
            + f"; store {store}"
        )
    elif not record:
        line = f"interrupted before run {run_id} was recorded: nothing of it is stored; run the spec again"
    else:
        line = (
            f"interrupted: finished trials are saved ({held}); continue with: attnsweep resume {run_id}"
            + _store_option(store)
        )
    err.print(visible(line), style="yellow", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(130) from None


def _run_and_summarise(s, store: str, address, local: bool, max_in_flight, resume_id, run_id: str, progress_interval):
    """The run, then its summary line on stderr; returns the run's summary.

    Raises:
        KeyboardInterrupt: Ctrl-C or SIGTERM (the run is recorded interrupted, or as it ended).
        typer.Exit: 1 where every trial was lost.
        AttnsweepError: Ray died under the run, or code it ran called ``sys.exit()``.
    """
    from attnsweep import api

    try:
        summary = api.run(
            s,
            store,
            address=address,
            local=local,
            max_in_flight=max_in_flight,
            resume=resume_id,
            run_id=run_id,
            progress_interval_s=progress_interval,
            console=err,
        )
    except RayDiedError as exc:  # one line naming the run to resume, not Ray's traceback
        raise AttnsweepError(
            f"{exc} with: attnsweep resume {run_id}" + (f" --store {store}" if store != DEFAULT_STORE else "")
        ) from None
    except SystemExit as exc:  # code the driver ran (a package's) called sys.exit(): the run failed, whatever the code
        raise AttnsweepError(
            f"run {run_id} stopped: code it ran called sys.exit({exc.code!r}) (a package's model, task or student?); "
            f"the run is recorded failed. Fix it, then: attnsweep resume {run_id}"
            + (f" --store {store}" if store != DEFAULT_STORE else "")
        ) from None
    if summary.already_complete:
        err.print(
            visible(f"run {run_id} is complete ({summary.n_trials} trials); nothing to resume"),
            markup=False,
        )
    else:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing left to run"
        if resume_id is not None:  # the whole run, as the store holds it; then this attempt's part
            from attnsweep.api_runs import trial_counts
            from attnsweep.results import ResultsStore

            whole = trial_counts(ResultsStore(store), summary.sweep, summary.run_id)
            counts = (
                ", ".join(f"{k} {v}" for k, v in sorted(whole.items())) or "no trials"
            ) + f" (this attempt: {counts})"
        err.print(
            f"[bold]run {markup(summary.run_id)}[/] of sweep {markup(summary.sweep)}: {markup(counts)}; "
            f"{summary.wall_s:.1f} s, {summary.trials_per_s:.1f} trials/s, "
            f"workers idle {summary.idle_frac or 0:.0%} of the time; store {markup(store)}",
            soft_wrap=True,
        )
        broken = {k: v for k, v in summary.counts.items() if k in ("failed", "lost") and v}
        if broken and set(summary.counts) != {"lost"}:  # where to read why, in the line a user reads last
            said = " and ".join(f"{v} {k}" for k, v in sorted(broken.items()))
            statuses = ", ".join(f"'{k}'" for k in sorted(broken))
            where = _store_option(str(store))
            err.print(
                visible(
                    f"{said}: each row's error column says why: attnsweep query \"SELECT trial_id, status, error "
                    f"FROM trials WHERE run_id = '{summary.run_id}' AND status IN ({statuses})\"{where}"
                ),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if summary.counts and set(summary.counts) == {"lost"}:  # no trial trained: a failed run, for cron too
            err.print(
                "[red]every trial was lost[/] (its worker died on every attempt; the rows' error says how): "
                "nothing to analyse. Fix the cause and run the spec again (a resume keeps lost trials as they are)",
                soft_wrap=True,
            )
            raise typer.Exit(1)
    return summary


@user_errors
def replicate(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="the pinned sweep spec (YAML)")],
    baseline: Annotated[
        str,
        typer.Option(
            metavar="RUN_ID",
            help="run id of the baseline run of this spec (a sweep's name: its latest run)",
        ),
    ],
    store: StoreOpt = DEFAULT_STORE,
    address: AddressOpt = None,
    local: LocalOpt = False,
    report: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="report folder (default: reports/SWEEP/NEW_RUN_ID)"),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(min=0, metavar="FRACTION", help="relative widening of the baseline intervals"),
    ] = 0.25,
    alpha: Annotated[
        float,
        typer.Option(min=0, max=1, metavar="LEVEL", help="level of the Holm-corrected distribution tests"),
    ] = 0.01,
    progress_interval: ProgressOpt = DEFAULT_PROGRESS_INTERVAL,
) -> None:
    """Re-run a pinned sweep and compare it with a baseline run; exit 1 on a regression.

    Writes report.md (every comparison, the cells that moved, baseline and new figures side by side).
    """
    from attnsweep.api_reports import replicate as replicate_run

    done = replicate_run(
        spec,
        baseline,
        store,
        address=address,
        local=local,
        report=report,
        tolerance=tolerance,
        alpha=alpha,
        progress_interval_s=progress_interval,
        console=err,
        notify=notice,
    )
    for note in done.caveats:
        err.print(visible(f"warning: {note}"), style="yellow", markup=False, highlight=False)
    failed = done.failed
    for c in failed:
        err.print(
            visible(f"moved: {c.kind} {c.what}: baseline {c.baseline}, new {c.new}"),
            markup=False,
            highlight=False,
        )
    verdict = "REGRESSION" if failed else "passed"
    out.print(
        visible(
            f"replication of {done.sweep} (run {done.run_id} vs baseline {done.baseline}): {verdict}; "
            f"{len(failed)} of {sum(c.ok is not None for c in done.comparisons)} comparisons failed; report "
            f"{done.path}"
        ),
        markup=False,
        highlight=False,
    )
    if failed:
        raise typer.Exit(1)


@user_errors
def analyze(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN_ID",
            help="the run, or a sweep's name for its latest run (default: the latest run)",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="the run, as an option")] = None,
    figures: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="also write the run's figures (PNG) into this folder; without it: no file"),
    ] = None,
    format: Annotated[
        Literal["table", "csv", "json"],
        typer.Option(
            "--format",
            metavar="table|csv|json",
            help="table: the tables; csv, json: the m* table alone on stdout, for scripts",
        ),
    ] = "table",
) -> None:
    """Print m* per cell with bootstrap intervals, the growth-law fits (or S1-S4); writes no file
    (figures with --figures DIR)."""
    from attnsweep.api_runs import check_paths
    from attnsweep.results import ResultsStore

    if run is not None and run_id is not None and run != run_id:
        raise AttnsweepError(f"two runs given ({run} and --run {run_id}): give one")
    check_paths(store, figures)
    if figures is not None:  # a folder asked for and not writable is an error, not a warning after the tables
        try:
            figures.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AttnsweepError(
                f"--figures: cannot make {figures}: {exc.strerror or exc}; nothing was analysed"
            ) from None
    results = ResultsStore(store)
    _print_analysis(results, run_or_latest(results, run or run_id), figures, format)


def _print_analysis(store, run_id: str | None, figures: Path | None, format: str = "table", save: bool = False) -> None:
    from attnsweep.analysis.boolean import run_caveats
    from attnsweep.analysis.context import RunContext
    from attnsweep.analysis.experiments import analysis_of
    from attnsweep.presentation.terminal import SHOW, print_own_claims

    if run_id is None:
        _, run_id = store.latest_run()
    sweep = store.sweep_of(run_id)
    if figures is not None:  # before anything is written: as report refuses it
        from attnsweep.api_runs import check_figure_folder

        figures = check_figure_folder(figures, sweep, run_id)
    context = RunContext.load(store, sweep, run_id)  # the record read and its settings parsed once
    for note in run_caveats(store, sweep, run_id, context):
        err.print(visible(f"warning: {note}"), style="yellow", markup=False, highlight=False)
    if format != "table":
        _write_m_star(store, sweep, run_id, figures, format, context)
        return

    kind = analysis_of(context.experiment)

    def analysis(figures_dir):  # computed, its figures written; printed below
        return kind.analyze(store, context, figures_dir, save)

    try:
        result = analysis(figures)
    except OSError as exc:  # the figure folder cannot be written: the analysis still prints
        err.print(
            visible(f"warning: no figures ({exc.strerror or exc}: {exc.filename or figures}); give --figures DIR"),
            style="yellow",
            markup=False,
            highlight=False,
        )
        result = analysis(None)
    own = []
    if context.claims:  # the spec's own claims, judged first and shown first
        from attnsweep.analysis.claims import judge_own

        own = judge_own(store, context, kind.m_star(result))
    with _stdout_errors():
        if own:
            print_own_claims(own, out)
        SHOW[kind.section](result, out, context)


@contextlib.contextmanager
def _stdout_errors():
    """An OSError while the block writes to stdout (a full disk, /dev/full, a closed
    descriptor) said as stdout's, in one line (exit 2), not as the figure folder's or a bare
    errno; a closed pipe (``| head``) is let through as it is."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise AttnsweepError(f"stdout could not be written: {exc.strerror or exc}") from None


def _write_m_star(store, sweep: str, run_id: str, figures: Path | None, format: str, context=None) -> None:
    """The m* table of a run on stdout, a row per cell with the run id first, as CSV (a
    header, then a line per cell; a list column as its JSON text) or JSON (an array of
    objects; NaN and infinity as null, as ``query --format json`` writes them). ``m_star``
    is empty where ``bound`` is not exact, and ``m_star_bound`` holds the bound's value
    there (:func:`attnsweep.api_runs.m_star_export`); the bootstrap replicates of each m*
    are left out."""
    import json

    import polars as pl

    from attnsweep.api_runs import m_star_export

    table = m_star_export(store, sweep, run_id, figures, context)
    if format == "json":
        text = table.write_json() + "\n"
    else:
        nested = [c for c, d in table.schema.items() if d.is_nested()]
        table = table.with_columns(
            pl.col(c).map_elements(
                lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
                return_dtype=pl.String,
            )
            for c in nested
        )
        text = table.write_csv()
    with _stdout_errors():
        sys.stdout.write(for_stream(text, sys.stdout))
        sys.stdout.flush()
