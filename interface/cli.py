"""The ``attnsweep`` command line: the typer app, its commands in the order ``--help`` lists
them (each defined in a ``cli_*`` module beside this one), and the console-script entry point.

User errors (a bad spec, an empty store, a refused query) print one message and exit
with code 2; an interrupted run exits with 130 after saving what finished.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Annotated, NoReturn

import typer

from attnsweep import cli_cluster, cli_options, cli_query, cli_report, cli_run, cli_specs, cli_store
from attnsweep.cli_options import err, out
from attnsweep.presentation.console_text import visible

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Sweeps of small attention models on Ray, results in Parquet, verdicts with polars.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("attnsweep")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown (not installed)"
        out.print(f"attnsweep {number}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="print the installed version and exit",
        ),
    ] = False,
) -> None:
    """Sweeps of small attention models on Ray, results in Parquet, verdicts with polars."""


for command in (
    cli_specs.validate,
    cli_specs.init,
    cli_run.run,
    cli_run.resume,
    cli_run.replicate,
    cli_cluster.submit,
    cli_cluster.status,
    cli_cluster.logs,
    cli_cluster.cancel,
    cli_store.runs,
    cli_run.analyze,
    cli_report.report,
    cli_query.query,
):
    app.command()(command)
app.add_typer(cli_specs.examples_app, name="examples")
app.add_typer(cli_store.store_app, name="store")
app.add_typer(cli_cluster.head_app, name="head")


def main() -> None:
    """Run the command line's command; raises SystemExit with its status, as a click app does
    (so a script that calls it can catch that)."""
    import warnings

    # One line per warning (e.g. a quarantined store file), not the source line behind it.
    warnings.showwarning = lambda message, category, *args, **kw: err.print(
        f"warning: {visible(message)}", style="yellow", markup=False, highlight=False
    )
    app()


def entry_point() -> NoReturn:
    """The ``attnsweep`` console script and ``python -m attnsweep.cli``: :func:`main`, then the
    process ends (:func:`_exit`)."""
    cli_options.owns_process = True
    try:
        main()
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: object) -> NoReturn:
    """End the process with ``code`` as the interpreter would (other threads joined, atexit
    handlers run, output flushed), but without the native libraries' static destructors:
    Arrow's thread pools can abort the process there (std::terminate on a still-joinable
    thread, apache/arrow#34314), which turned a command that had finished and printed its
    answer into exit -6 now and then."""
    if code is None:
        code = 0
    elif not isinstance(code, int):  # SystemExit("text"): the text on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    try:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:  # None: the process was started with that descriptor closed
                    stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
                pass
        os._exit(code)


if __name__ == "__main__":
    entry_point()
