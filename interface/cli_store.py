"""The CLI's store commands: ``store check`` and ``store compact``, and ``runs`` (the runs a
store holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attnsweep.cli_options import DEFAULT_STORE, StoreOpt, err, out, user_errors
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.console_text import markup, visible

store_app = typer.Typer(no_args_is_help=True, help="Check or compact the results store.")


@store_app.command("check")
@user_errors
def store_check(store: StoreOpt = DEFAULT_STORE) -> None:
    """Verify the store: every page of every file read and checked (damaged files are
    quarantined, or skipped in a store you cannot write; files the file system will not let
    you read are skipped, not moved; files beyond ATTNSWEEP_MAX_FILE_MB are skipped), one
    schema per table, one row per trial id in each run, each ended run's trials as its record
    counts them, one record per run, no temporary files of dead writers, no failed or dead
    runs. Exit 1 on a problem, 2 when the path is not a store."""
    from attnsweep.results import ResultsStore
    from attnsweep.results.integrity import check_store

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give the store's folder (default results-store)")
    report = check_store(ResultsStore(store))
    if report.empty:
        out.print(f"empty: the store at {markup(store)} holds no runs yet (nothing to check)")
        return
    out.print(
        f"trials: {report.files['trials']} files, {report.rows['trials']} rows; "
        f"runs: {report.files['runs']} files, {report.rows['runs']} rows"
        + (
            f"; curves: {report.files['curves']} files, {report.rows['curves']} points"
            if report.files.get("curves")
            else ""
        )
    )
    for path in report.quarantined:
        out.print(
            f"[red]damaged[/]: {markup(path)} (unreadable as Parquet, or a curves file not of curve points; "
            "quarantined: its rows are not read; resume its run to recompute missing trials, then delete the file)"
        )
    for problem in report.skipped:
        out.print(f"[red]damaged[/]: {markup(problem)} (unreadable as Parquet)")
    for problem in report.unreadable:
        out.print(f"[red]not readable here[/]: {markup(problem)}")
    for problem in report.too_large:
        out.print(f"[red]too large[/]: {markup(problem)}", soft_wrap=True)
    for problem in report.schema_problems:
        out.print(f"[red]schema[/]: {markup(problem)}")
    for problem in report.foreign:
        out.print(f"[red]set aside[/]: {markup(problem)}", soft_wrap=True)
    for sweep, run_id, path in report.extra_records:
        out.print(
            f"[red]second run record[/]: run {markup(run_id)} of sweep {markup(sweep)}: {markup(path)} is not read (a run's "
            "record is run.parquet alone); move or delete it",
            soft_wrap=True,
        )
    for sweep, run_id, read, recorded, detail in report.row_counts:
        if read < recorded:
            out.print(
                f"[red]missing rows[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {read} of the {markup(recorded)} trials its "
                f"record counts ({markup(detail)}); attnsweep resume {markup(run_id)} reruns the missing trials of a grid sweep",
                soft_wrap=True,
            )
        else:
            out.print(
                f"[red]extra rows[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {read} trials, its record counts "
                f"{markup(recorded)} ({markup(detail)}): rows were added after it ended",
                soft_wrap=True,
            )
    for sweep, run_id, rows in report.no_trial_id:
        out.print(
            f"[red]no trial id[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {rows} rows whose trial_id is null",
            soft_wrap=True,
        )
    for sweep, run_id, tid, copies in report.duplicates:
        out.print(
            f"[red]duplicate[/]: trial {markup(tid)} of run {markup(run_id)} (sweep {markup(sweep)}) is stored {copies} times"
        )
    for path in report.uncommitted_curves:
        out.print(
            f"[red]uncommitted curves[/]: {markup(path)} (learning-curve points no readable trial file commits, so no "
            "read sees them: a kill's leftover between the two renames, or a curves file renamed or whose trial file is "
            "set aside or quarantined; store compact deletes it only when no trial file of its name exists and none of "
            "its trials has a stored row, and keeps it otherwise: rename it to its trial file's name to read it)",
            soft_wrap=True,
        )
    for sweep, run_id, points in report.curve_duplicates:
        out.print(
            f"[red]duplicate curve points[/]: run {markup(run_id)} of sweep {markup(sweep)} stores {points} curve point(s) "
            "a second time (reads keep one copy; store compact removes the others)",
            soft_wrap=True,
        )
    for sweep, run_id, points in report.curves_without_rows:
        out.print(
            f"[red]curves without rows[/]: run {markup(run_id)} of sweep {markup(sweep)} stores {points} curve point(s) "
            "of trials that have no row (not drawn; store compact deletes them)",
            soft_wrap=True,
        )
    for sweep, run_id, points in report.curve_bad_points:
        out.print(
            f"[red]curve points without a place[/]: run {markup(run_id)} of sweep {markup(sweep)} stores {points} curve "
            "point(s) without a trial id, or with no epoch or a negative one (never read; store compact drops them)",
            soft_wrap=True,
        )
    for path in report.curve_keys:
        out.print(
            f"[red]curves commit unreadable[/]: {markup(path)} (its list of the curves files it commits is not a list of "
            "file names: the run's curves up to it are read by their age; store compact writes the list again)",
            soft_wrap=True,
        )
    for sweep, run_id, why, rescue in report.failed_runs:
        kept = (
            ""
            if rescue is None
            else f"; the rows the store refused are in {markup(rescue)}"
            + ("" if Path(rescue).exists() else " (that file is gone now)")
        )
        out.print(
            f"[red]failed run[/]: run {markup(run_id)} of sweep {markup(sweep)}: {markup(why or 'no reason recorded')}{kept}; "
            f"attnsweep resume {markup(run_id)} runs its missing trials",
            soft_wrap=True,
        )
    for sweep, run_id in report.died_runs:
        out.print(
            f"[red]died run[/]: run {markup(run_id)} of sweep {markup(sweep)} is recorded running but no driver holds its "
            f"lock: its driver was killed or could not record its end; attnsweep resume {markup(run_id)} continues it"
        )
    for path, age, writer in report.temp_files:
        out.print(
            f"[yellow]temporary file[/]: {markup(path)} ({age:.0f} s old, written by {markup(writer)}: removed by the "
            "next run or store compact once its writer is provably gone; delete it by hand if you know it is)"
        )
    for path, age, writer in report.writing:
        out.print(f"being written: {markup(path)} ({age:.0f} s old, by {markup(writer)}, which is alive)")
    for sweep, run_id in report.orphans:
        out.print(
            f"[red]no run record[/]: run {markup(run_id)} of sweep {markup(sweep)} has trial rows but no readable run record "
            "(analyze and resume need it)"
        )
    for path in report.stray:
        out.print(f"[red]stray file[/]: {markup(path)} (not in a sweep=NAME/run_id=ID folder a run writes: not read)")
    for path in report.superseded:
        out.print(
            f"[yellow]superseded[/]: {markup(path)} (replaced by a compaction; skipped by readers; store compact deletes it)"
        )
    if report.ok:
        out.print("[green]ok[/]")
    else:
        raise typer.Exit(1)


@store_app.command("compact")
@user_errors
@store_app.command("compact")
@user_errors
def store_compact(
    store: StoreOpt = DEFAULT_STORE,
    sweep: Annotated[str | None, typer.Option(metavar="SWEEP", help="only this sweep")] = None,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="only this run")] = None,
) -> None:
    """Merge each run's part files into one file without changing a row (skips runs a
    driver is writing, and folders no run writes; a run beyond a quarter of the limit on a
    file, ATTNSWEEP_MAX_FILE_MB, becomes a few files)."""
    from attnsweep.api_runs import compact

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give the store's folder (default results-store)")
    total = compact(store, sweep, run_id)
    for why, locked in total.skipped:
        if locked:
            err.print(visible(f"skipped: {why}"), style="yellow", markup=False)
        else:
            err.print(
                visible(f"skipped: {why}"),
                style="yellow",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    out.print(
        f"compacted {total.runs} run(s): {total.files_before} files -> {total.files_after}, "
        f"{total.rows} rows unchanged"
        + (
            f"; {total.deleted_superseded} superseded file(s) deleted (an earlier compaction had replaced "
            "them and was stopped before deleting them)"
            if total.deleted_superseded
            else ""
        )
        + (f"; {total.deleted_temp} temporary file(s) of dead writers removed" if total.deleted_temp else "")
        + (
            f"; curves: {total.curve_files_before} files -> {total.curve_files_after}"
            if total.curve_files_before != total.curve_files_after
            else ""
        )
        + (
            f", {total.curve_points_dropped} duplicate or row-less point(s) removed"
            if total.curve_points_dropped
            else ""
        )
        + (
            f"; {total.deleted_uncommitted_curves} uncommitted curves file(s) deleted"
            if total.deleted_uncommitted_curves
            else ""
        )
        + (
            f"; {total.kept_uncommitted_curves} uncommitted curves file(s) kept: they hold the only points of "
            "stored trials (store check names them)"
            if total.kept_uncommitted_curves
            else ""
        )
        + (
            f"; {total.quarantined_curves} file(s) that are not curve points moved to quarantine/"
            if total.quarantined_curves
            else ""
        )
    )


@store_app.command("export")
@user_errors
def store_export(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN_ID...", help="the runs to export")],
    out_dir: Annotated[Path, typer.Option("--out", metavar="DIR", help="a new or empty folder")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Write runs' trial rows, records and search journals into a folder a commit can carry
    (trials.parquet, runs.parquet, SHA256SUMS, studies/); `store import` on another machine,
    then `resume`, continues a run that stopped (docs/store.md)."""
    from attnsweep.presentation.transfer import export_runs, lock_held
    from attnsweep.results import ResultsStore

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give the store's folder (default results-store)")
    results = ResultsStore(store)
    runs = export_runs(results, run_ids, out_dir)
    out.print(f"exported {len(runs)} run(s) to {markup(str(out_dir))}: {markup(', '.join(r for _, r in runs))}")
    for sweep, run_id in runs:
        if lock_held(results, sweep, run_id):
            err.print(
                visible(
                    f"warning: run {run_id} is still being written by a driver here: the export holds the rows "
                    "flushed so far; stop that driver before resuming the run elsewhere, or it is completed twice"
                ),
                style="yellow",
                markup=False,
                highlight=False,
            )


@store_app.command("import")
@user_errors
def store_import(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="a folder `store export` (or `report --publish`) wrote")
    ],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Write the runs of an exported folder into this store (its checksums and rows checked
    first; a run the store already holds is refused); then `attnsweep resume RUN_ID`."""
    from attnsweep.presentation.transfer import import_runs
    from attnsweep.results import ResultsStore

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give the store's folder (default results-store)")
    ids = import_runs(folder, ResultsStore(store))
    out.print(
        f"imported {len(ids)} run(s) into {markup(store)}: {markup(', '.join(ids))} "
        "(attnsweep resume RUN_ID continues one that stopped)"
    )


@user_errors
def runs(
    sweep: Annotated[str | None, typer.Argument(metavar="SWEEP", help="only this sweep's runs")] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """List the sweeps and runs in the store: status, trials by status, start and end (UTC)."""
    from rich.table import Table

    from attnsweep.api_runs import RUN_STATUSES, list_runs

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give a directory (default results-store)")
    records = list_runs(store, sweep)
    if records is None:
        err.print(
            f"the store at {visible(store)} holds no runs: run a sweep first",
            markup=False,
            highlight=False,
        )
        return
    statuses = RUN_STATUSES
    t = Table(title=f"runs in {markup(store)}")
    for c in ("sweep", "run", "status", "trials", *statuses, "started", "ended"):
        t.add_column(
            c,
            justify="right" if c in ("trials", *statuses) else "left",
            no_wrap=c in ("run", "started", "ended"),
        )
    for r in records:
        counts = r.counts
        when = [f"{v:%Y-%m-%d %H:%M:%S}" if v is not None else "-" for v in (r.started_at, r.ended_at)]
        trials = f"{sum(counts.values())} so far" if r.running else str(r.n_trials or "-")
        t.add_row(
            markup(r.sweep),
            markup(r.run_id),
            markup(r.status or "-"),
            trials,
            *(str(counts.get(s, 0)) for s in statuses),
            *when,
        )
    out.print(t)
