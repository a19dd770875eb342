"""The ``attnsweep`` command line.

User errors (a bad spec, an empty store, a refused query) print one message and exit
with code 2; an interrupted run exits with 130 after saving what finished.
"""

from __future__ import annotations

import functools
import io
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from orchestrator.errors import AttnsweepError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Sweeps of small attention models on Ray, results in Parquet, verdicts with polars.")
err = Console(stderr=True)
out = Console()

# A string, not a Path: Path("") would silently become the current folder.
StoreOpt = Annotated[str, typer.Option("--store", envvar="ATTNSWEEP_STORE",
                                        help="results store directory (env ATTNSWEEP_STORE)")]
DEFAULT_STORE = "results-store"


def _user_errors(fn):
    """Turn the project's errors into a message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from results import StoreError
        from tasks import TaskError

        try:
            return fn(*args, **kwargs)
        except (AttnsweepError, StoreError, TaskError) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, style="red")
            raise typer.Exit(2) from None
        except OSError as exc:  # an output or figure path that cannot be written
            err.print(f"error: {exc.strerror or exc}: {exc.filename or ''}", markup=False, highlight=False, style="red")
            raise typer.Exit(2) from None

    return wrapper


@app.command()
@_user_errors
def validate(spec: Annotated[Path, typer.Argument(help="sweep spec (YAML)")],
             max_trials: Annotated[int, typer.Option(min=1, help="refuse grids above this many trials")] = 1_000_000) -> None:
    """Check a spec and say what it would run; writes nothing."""
    from orchestrator.driver import spec_pack_sizer
    from orchestrator.packing import make_packs
    from orchestrator.spec import load_spec

    s = load_spec(spec, max_trials=max_trials)
    n_packs = sum(1 for _ in make_packs(((str(i), c) for i, c in enumerate(s.trials())), spec_pack_sizer(s), s.experiment))
    out.print(f"[green]valid[/]: sweep {s.name!r}: {s.n_trials()} trials in {n_packs} packs")
    for i in range(len(s.grids)):
        if len(s.grids) > 1:
            out.print(f"  grid block {i}:")
        for k, v in s.axes(i).items():
            out.print(f"  {k}: {v if len(v) <= 12 else f'{v[:6]} ... ({len(v)} values)'}")


@app.command()
@_user_errors
def run(
    spec: Annotated[Path, typer.Argument(help="sweep spec (YAML)")],
    store: StoreOpt = DEFAULT_STORE,
    address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local Ray)")] = None,
    local: Annotated[bool, typer.Option("--local", help="run packs in this process, without Ray")] = False,
    max_in_flight: Annotated[int | None, typer.Option(min=1, help="packs submitted at once")] = None,
    max_trials: Annotated[int, typer.Option(min=1, help="refuse grids above this many trials")] = 1_000_000,
    figures: Annotated[Path | None, typer.Option(help="figure folder (default: figures/SWEEP/RUN_ID)")] = None,
    analyze: Annotated[bool, typer.Option(help="print the m* table and fits at the end")] = True,
) -> None:
    """Run a sweep, stream its rows into the store, then print the analysis."""
    from orchestrator.driver import run_sweep
    from orchestrator.executors import LocalExecutor, RayExecutor
    from orchestrator.spec import load_spec
    from results import ResultsStore

    s = load_spec(spec, max_trials=max_trials)  # before anything is started or written
    _check_paths(store, figures)
    executor = LocalExecutor(s.execution, s.resources) if local else RayExecutor(s.execution, address, s.resources)
    results = ResultsStore(store)
    try:
        summary = run_sweep(s, results, executor, console=err, max_in_flight=max_in_flight)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: finished trials are saved")
        raise typer.Exit(130) from None
    finally:
        executor.shutdown()
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    err.print(f"[bold]run {summary.run_id}[/] of sweep {summary.sweep}: {counts}; "
              f"{summary.wall_s:.1f} s, {summary.trials_per_s:.1f} trials/s; store {store}")
    if analyze:
        _print_analysis(results, summary.run_id, figures or Path("figures") / summary.sweep / summary.run_id)


def _check_paths(store: str, figures: Path | None) -> None:
    """Refuse store and figure paths that cannot work, before any trial runs."""
    if not store.strip():
        raise AttnsweepError("--store: an empty path; give a directory (default results-store)")
    for label, path in (("--store", Path(store)), ("--figures", figures)):
        if path is not None and path.exists() and not path.is_dir():
            raise AttnsweepError(f"{label}: {path} exists and is not a directory")


@app.command()
@_user_errors
def analyze(
    store: StoreOpt = DEFAULT_STORE,
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest run)")] = None,
    figures: Annotated[Path | None, typer.Option(help="figure folder (default: figures/SWEEP/RUN_ID)")] = None,
) -> None:
    """Print m* per cell with bootstrap intervals, the growth-law fits, and write figures."""
    from results import ResultsStore

    _check_paths(store, figures)
    _print_analysis(ResultsStore(store), run_id, figures)


def _print_analysis(store, run_id: str | None, figures: Path | None) -> None:
    from orchestrator.analyze import analyze_run, print_analysis, settings_of
    from orchestrator.analyze_symmetry import analyze_symmetry_run, print_symmetry

    if run_id is None:
        _, run_id = store.latest_run()
    sweep = store.sweep_of(run_id)
    figures = figures or Path("figures") / sweep / run_id
    record = store.read_run(sweep, run_id)
    if record["status"] != "finished":
        err.print(f"warning: run {run_id} is {record['status']}: {record['n_done']} of {record['n_trials']} trials "
                  "done; cells may be incomplete (resume or rerun it)", style="yellow", markup=False)
    if store.read_run(sweep, run_id).get("experiment") == "symmetry":
        settings = settings_of(store, sweep, run_id)
        print_symmetry(analyze_symmetry_run(store, sweep, run_id, settings, figures), out, settings.target_error)
    else:
        print_analysis(analyze_run(store, run_id, figures), out)


@app.command()
@_user_errors
def query(
    sql: Annotated[str, typer.Argument(help="one SELECT over the tables 'trials' and 'runs' (polars SQL)")],
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[Literal["table", "csv", "json", "parquet"], typer.Option("--format", help="output format")] = "table",
    output: Annotated[Path | None, typer.Option(help="write to this file instead of stdout")] = None,
) -> None:
    """Run a read-only SQL query over the store."""
    import polars as pl

    from results import ResultsStore, run_query

    df = run_query(ResultsStore(store), sql)
    if format == "table":
        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60):
            text = str(df)
    elif format == "csv":  # CSV has no nested types: lists become "[1, 2]"
        lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
        text = df.with_columns(
            (pl.lit("[") + pl.col(c).list.eval(pl.element().cast(pl.String)).list.join(", ") + pl.lit("]")).alias(c)
            for c in lists
        ).write_csv()
    elif format == "json":
        text = df.write_json()
    else:
        if output is None:
            buf = io.BytesIO()
            df.write_parquet(buf)
            sys.stdout.buffer.write(buf.getvalue())
            return
        df.write_parquet(output)
        return
    if output is not None:
        output.write_text(text)
    else:
        typer.echo(text)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
