"""The CLI's ``report`` command: the verdict report of runs, or published findings made again
(interface/api_reports.py writes them; this prints where, and the verdicts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attnsweep.cli_options import (
    DEFAULT_STORE,
    StoreOpt,
    err,
    notice,
    out,
    sigterm_as_interrupt,
    user_errors,
)
from attnsweep.presentation.console_text import visible


@user_errors
def report(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_ID",
            help="the runs to report on (sparse-Boolean and symmetry; with --from: default every run there)",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="report folder (default: reports/FIRST_RUN_ID; with --from: that folder)",
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            metavar="",
            help="also write the findings: every trial row as "
            "trials.parquet, the run records as runs.parquet, the m* tables, the "
            "figures, findings.md",
        ),
    ] = False,
    readme: Annotated[
        Path | None,
        typer.Option(
            "--readme",
            metavar="FILE",
            help="also put the findings into this README, between "
            "its findings markers (appended if it has none); implies --publish",
        ),
    ] = None,
    from_folder: Annotated[
        Path | None,
        typer.Option(
            "--from",
            metavar="DIR",
            help="make the report and findings again "
            "from a published folder's runs.parquet and trials.parquet "
            "instead of a store (--store is not read); implies --publish",
        ),
    ] = None,
) -> None:
    """Write the verdict report of runs: one self-contained report.html; prints its path.

    Verdicts L1-L4, R and S1-S4 are computed from the store now; also figures, m*, provenance.
    To publish a run: attnsweep report RUN_ID --out docs/findings --readme README.md
    To make published findings again from their trial rows: attnsweep report --from docs/findings/symmetry
    """
    from attnsweep.api_reports import report as write_report
    from attnsweep.presentation.report import summary

    try:
        with sigterm_as_interrupt():
            done = write_report(run_ids, store, out_dir, publish, readme, from_folder, notify=notice)
    except KeyboardInterrupt as exc:
        if not exc.args:  # before the report began writing: nothing of it to tell
            raise
        err.print(
            visible(f"interrupted: the report stopped; {exc}"),
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    for caveat in done.caveats:
        err.print(visible(f"warning: {caveat}"), style="yellow", markup=False)
    out.print(visible(done.path), markup=False, highlight=False, soft_wrap=True)
    out.print(
        visible(f"verdicts: {summary(done.verdicts)}"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
