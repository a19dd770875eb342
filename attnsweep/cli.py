"""The ``attnsweep`` command line.

User errors (a bad spec, an empty store, a refused query) print one message and exit
with code 2; an interrupted run exits with 130 after saving what finished.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from attnsweep.orchestrator.errors import AttnsweepError, RayDiedError
from attnsweep.presentation.console_text import log_text, markup, visible

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Sweeps of small attention models on Ray, results in Parquet, verdicts with polars.")
WIDE = 100_000
"""Columns of a console that is not a terminal (a log, a pipe, a file): nothing is wrapped
or clipped, tables print at their natural width. ``COLUMNS`` set in the environment wins."""


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not (getattr(stream, "isatty", lambda: False)() or "COLUMNS" in os.environ)
    return Console(stderr=stderr, width=WIDE if wide else None)


err = _console(stderr=True)
out = _console(stderr=False)

# A string, not a Path: Path("") would silently become the current folder.
StoreOpt = Annotated[str, typer.Option("--store", envvar="ATTNSWEEP_STORE", metavar="DIR",
                                        help="results store directory or URI")]
SpecArg = Annotated[Path, typer.Argument(metavar="SPEC", help="sweep spec (YAML)")]
MaxTrialsOpt = Annotated[int, typer.Option(min=1, metavar="N", help="refuse grids above this many trials")]
DEFAULT_PROGRESS_INTERVAL = 10.0  # orchestrator.progress.PROGRESS_INTERVAL_S, without importing it for --help
DEFAULT_STORE = "results-store"


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
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the installed version and exit")] = False,
) -> None:
    """Sweeps of small attention models on Ray, results in Parquet, verdicts with polars."""


def _error(message: str) -> None:
    # One line however long: a wrapped message breaks grep and the tests that read it.
    err.print(f"error: {visible(message)}", markup=False, highlight=False, style="red", soft_wrap=True)


def _user_errors(fn):
    """Turn the project's errors into a message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from attnsweep.results import StoreError
        from attnsweep.tasks import TaskError

        try:
            return fn(*args, **kwargs)
        except (AttnsweepError, StoreError, TaskError) as exc:
            _error(str(exc))
            raise typer.Exit(2) from None
        except OSError as exc:  # an output or figure path that cannot be written
            _error(f"{exc.strerror or exc}: {exc.filename or ''}")
            raise typer.Exit(2) from None
        except ImportError as exc:  # e.g. an s3:// store without s3fs
            _error(f"a package this needs is not installed: {exc}")
            raise typer.Exit(2) from None
        except Exception as exc:  # an object store client's own error (botocore's, the server out of reach)
            if type(exc).__module__.partition(".")[0] not in STORE_CLIENTS:
                raise
            _error(f"the store's server could not be reached or refused: {type(exc).__name__}: {exc}")
            raise typer.Exit(2) from None

    return wrapper


STORE_CLIENTS = ("botocore", "aiobotocore", "s3fs", "gcsfs", "adlfs", "azure")  # not google: protobuf (Ray) lives there
"""Packages whose errors are an object store's refusal, told in one line (exit 2) as an OSError is."""


@app.command()
@_user_errors
def validate(spec: SpecArg, max_trials: MaxTrialsOpt = 1_000_000,
             show: Annotated[bool, typer.Option("--show", metavar="",
                                                help="also print every trial setting of each grid block and where it "
                                                     "comes from (spec or default)")] = False) -> None:
    """Check a spec and say what it would run; writes nothing."""
    from attnsweep.orchestrator.packing import count_packs, spec_pack_sizer
    from attnsweep.orchestrator.spec import load_spec

    s = load_spec(spec, max_trials=max_trials)
    workers = s.resources.num_workers or max(1, int((os.cpu_count() or 1) / s.resources.cpus_per_worker))
    workers = min(workers, s.n_trials())  # a run starts no more workers than it has trials (executors.py)
    budget = s.execution.pack_memory_mb * 2**20
    biggest = 0
    if not s.search.adaptive:  # one pass over the runs of one shape: pack count and memory (no trial list)
        sizer = spec_pack_sizer(s, workers)

        def size_of(cfg) -> int:
            nonlocal biggest
            size = sizer(cfg)
            biggest = max(biggest, s.family.working_bytes(cfg) + s.family.memory_bytes(cfg))
            return size

        n_packs, exact = count_packs(s, size_of)
    biggest = max([biggest, *(s.family.working_bytes(c) + s.family.memory_bytes(c) for c in _largest_trials(s))])
    if biggest > budget:
        err.print(f"warning: one trial needs about {biggest / 2**20:,.0f} MiB of training memory, more than "
                  f"execution.pack_memory_mb ({s.execution.pack_memory_mb:g}); such trials run one per pack and "
                  "may not fit a worker", style="yellow", markup=False)
    if s.experiment == "symmetry":  # its cells are keyed by these alone (stats/symmetry.py)
        pooled = sorted({axis for g in s.grids for axis, values in g.items() if len(values) > 1}
                        - {"teacher", "model", "equivariance", "n", "k", "d", "m"})
        if pooled:
            err.print(f"warning: the grid varies {', '.join(pooled)}: symmetry cells are keyed by teacher, student, n, k "
                      "and d, so analyze will pool those values in one cell (it names them then); give each value "
                      "its own run to compare them", style="yellow", markup=False)
    if s.search.adaptive:
        n_cells = s.n_cells()
        tune = (f", {' and '.join(s.search.tune.params()).replace('_', ' ')} tuned by Optuna against the spec's "
                f"({s.search.tune.n_trials} parameter sets per cell)" if s.search.tune else "")
        out.print(f"[green]valid[/]: sweep {s.name!r}: adaptive m* search over {_plural(n_cells, 'cell')}, m in "
                  f"{s.search.m.min}..{s.search.m.max}, to within {s.search.rel_tol:.0%}{tune}; at most "
                  f"{_plural(s.n_trials(), 'trial')}")
    else:
        packs = _plural(n_packs, "pack") if exact else f"about {n_packs:,} packs (estimated from a sample of its shapes)"
        out.print(f"[green]valid[/]: sweep {s.name!r}: {_plural(s.n_trials(), 'trial')} in {packs} "
                  f"(for {_plural(workers, 'worker')} here)")
    for i in range(len(s.grids)):
        if len(s.grids) > 1:
            out.print(f"  grid block {i}:")
        for k, v in s.axes(i).items():
            shown = v if len(v) <= 12 else [*v[:6], "..."]
            values = ", ".join("null" if x is None else str(x) for x in shown)
            out.print(f"  {'  ' if len(s.grids) > 1 else ''}{k}: [{values}]" + (f" ({len(v)} values)" if len(v) > 12 else ""),
                      markup=False, highlight=False)
    if show:
        for i in range(len(s.grids)):
            out.print(_settings_table(s, i))


def _settings_table(s, block: int):
    """A rich table of grid block ``block``'s resolved trial settings: name, value, where it
    came from (the spec's grid, fixed, seeds or search, or the default), meaning. Defaults are
    dimmed and marked, so a setting the spec left out cannot pass unseen."""
    from rich.table import Table
    from rich.text import Text

    from rich import box

    title = f"trial settings of grid block {block}" if len(s.grids) > 1 else "trial settings"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="from: the spec's grid, fixed, seeds or search section, or the default (dimmed)",
                  caption_justify="left")
    # Headers never fold below their own width; the meaning column takes what the terminal has left,
    # and goes where there is no room for it.
    table.add_column("setting", no_wrap=True, min_width=len("setting"))
    table.add_column("value", overflow="fold", min_width=len("value"), max_width=48)
    table.add_column("from", no_wrap=True, min_width=len("default"))
    wide = out.width >= 72
    if wide:
        table.add_column("meaning", overflow="fold", min_width=len("meaning"), ratio=1)
    for name, value, source, meaning in s.resolved_settings(block):
        style = "dim" if source == "default" else ""
        cells = [Text(name, style=style), Text(_setting_text(value), style=style), Text(source, style=style)]
        table.add_row(*cells, *([Text(meaning, style=style)] if wide else []))
    return table


def _setting_text(value) -> str:
    """A setting's value as the spec would write it (lists long as a grid's: their ends)."""
    def one(x) -> str:
        return "null" if x is None else str(x).lower() if isinstance(x, bool) else str(x)

    if isinstance(value, list):
        shown = value if len(value) <= 12 else [*value[:6], "...", *value[-2:]]
        return "[" + ", ".join(one(x) if x != "..." else x for x in shown) + "]"
    return one(value)


STARTER = """\
# A starter sweep: the critical sample size m* against the context length T for 3-sparse AND.
# `attnsweep validate --show {path}` lists every trial setting and which ones are defaults;
# `attnsweep examples` lists the example specs (attnsweep examples copy NAME to start from one).
name: {name}
seeds: 4
grid:
  T: [8, 16, 32]
  m: {{start: 8, stop: 256, num: 6, scale: log}}   # 8, 16, 32, 64, 128, 256
fixed:
  task: and          # or parity
  s: 3               # relevant bits
  model: transformer # or mlp (the baseline)
  d: 32
  heads: 4
  lr: 3e-3
  max_epochs: 1000
analysis:
  acc_threshold: 0.95  # a seed succeeds at this test accuracy
  success_frac: 0.5    # m* is the smallest m at which this fraction of seeds succeeds
"""


@app.command()
@_user_errors
def init(path: Annotated[Path, typer.Argument(metavar="[PATH]", help="where to write it")] = Path("sweep.yaml")) -> None:
    """Write a starter sweep spec (never over an existing file)."""
    import re

    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", path.stem)
    name = stem if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,99}", stem) else "my-sweep"
    _write_new(path, STARTER.format(name=name, path=path).encode())
    out.print(f"wrote {path}; next: attnsweep validate --show {path}, then attnsweep run {path}",
              markup=False, highlight=False)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file at ``path``: never over a file, a link or a folder.

    Raises:
        AttnsweepError: something is already at ``path``, or its folder is missing.
    """
    try:
        with open(path, "xb") as fh:  # O_EXCL: refuses any existing name, a dangling link included
            fh.write(data)
    except FileExistsError:
        raise AttnsweepError(f"{path}: already exists; give another path (nothing was written)") from None
    except (FileNotFoundError, NotADirectoryError):
        raise AttnsweepError(f"{path}: its folder does not exist") from None


def examples_dir() -> Path:
    """The folder of the example specs: ``sweeps/`` of a checkout (or an editable install),
    ``attnsweep/examples/`` of an installed wheel (package data)."""
    face = Path(__file__).resolve().parent
    for folder in (face / "examples", face.parent / "sweeps"):
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return folder
    raise AttnsweepError(f"no example specs found beside {face}: reinstall attnsweep")


examples_app = typer.Typer(help="List the example sweep specs, or copy one to start from.",
                           invoke_without_command=True)
app.add_typer(examples_app, name="examples")


@examples_app.callback()
def examples(ctx: typer.Context) -> None:
    """List the example specs (name and what each runs); `examples copy NAME` copies one."""
    if ctx.invoked_subcommand is None:
        examples_list()


@examples_app.command("list")
@_user_errors
def examples_list() -> None:
    """List the example specs: name, trials, description."""
    import yaml

    for path in sorted(examples_dir().glob("*.yaml"), key=lambda p: p.stem):
        try:
            data = yaml.safe_load(path.read_text()) or {}
            about = " ".join(str(data.get("description") or "").split())
        except (yaml.YAMLError, AttributeError):
            about = ""
        out.print(f"{path.stem:<26} {about[:100] + ('...' if len(about) > 100 else '')}".rstrip(),
                  markup=False, highlight=False)


@examples_app.command("copy")
@_user_errors
def examples_copy(name: Annotated[str, typer.Argument(metavar="NAME", help="an example's name (see: attnsweep examples)")],
                  dest: Annotated[Path | None, typer.Argument(metavar="[DEST]", help="file or existing folder "
                                                               "(default: NAME.yaml here)")] = None) -> None:
    """Copy an example spec to DEST (never over an existing file)."""
    folder = examples_dir()
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    stem = name[:-5] if name.endswith(".yaml") else name
    if stem not in names:
        raise AttnsweepError(f"examples copy: no example {name!r}; the examples are: {', '.join(names)}")
    target = dest if dest is not None else Path(f"{stem}.yaml")
    if target.is_dir():
        target = target / f"{stem}.yaml"
    _write_new(target, (folder / f"{stem}.yaml").read_bytes())
    out.print(f"wrote {target}", markup=False, highlight=False)


AddressOpt = Annotated[str | None, typer.Option(metavar="ADDRESS",
                                                help="Ray cluster: auto or HOST:PORT (default: start a local Ray)")]
LocalOpt = Annotated[bool, typer.Option("--local", metavar="", help="run packs in this process, without Ray")]
InFlightOpt = Annotated[int | None, typer.Option(min=1, metavar="N", help="packs submitted at once")]
FiguresOpt = Annotated[Path | None, typer.Option(metavar="DIR", help="figure folder (default: figures/SWEEP/RUN_ID)")]
AnalyzeOpt = Annotated[bool, typer.Option(metavar="", help="print the m* table and fits at the end")]
ProgressOpt = Annotated[float, typer.Option(
    "--progress-interval", min=0.1, max=86_400, metavar="SECONDS", envvar="ATTNSWEEP_PROGRESS_INTERVAL",
    help="seconds between progress lines when stderr is not a terminal (a log, a file)")]


@app.command()
@_user_errors
def run(
    spec: SpecArg,
    store: StoreOpt = DEFAULT_STORE,
    address: AddressOpt = None,
    local: LocalOpt = False,
    max_in_flight: InFlightOpt = None,
    max_trials: MaxTrialsOpt = 1_000_000,
    resume: Annotated[str | None, typer.Option(metavar="RUN_ID",
        help="continue this run of the same spec: skip trials it already holds (also: attnsweep resume RUN_ID)")] = None,
    figures: FiguresOpt = None,
    analyze: AnalyzeOpt = True,
    progress_interval: ProgressOpt = DEFAULT_PROGRESS_INTERVAL,
) -> None:
    """Run a sweep, stream its rows into the store, then print the analysis."""
    from attnsweep.orchestrator.spec import load_spec

    s = load_spec(spec, max_trials=max_trials)  # before anything is started or written
    if resume is not None:
        from attnsweep.results import ResultsStore

        resume = _run_or_latest(ResultsStore(store), resume)
    _execute(s, store, address, local, max_in_flight, figures, analyze, resume, progress_interval)


@app.command()
@_user_errors
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to continue (a sweep's name: its latest run)")],
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

    run_id = _run_or_latest(ResultsStore(store), run_id)
    s = stored_spec(ResultsStore(store), run_id)
    _execute(s, store, address, local, max_in_flight, figures, analyze, run_id, progress_interval)


def _execute(s, store: str, address, local: bool, max_in_flight, figures, analyze: bool, resume_id: str | None,
             progress_interval: float) -> None:
    """attnsweep run / resume: the Python API's run (attnsweep/api.py; SIGTERM ends it as
    Ctrl-C does) with a terminal's output around it."""
    from attnsweep import api
    from attnsweep.orchestrator.driver import new_run_id

    if local and address is not None:
        raise AttnsweepError(f"--local and --address {address}: a run without Ray has no cluster; give one of them")
    _check_paths(store, figures)
    run_id = resume_id or new_run_id()
    try:
        summary = api.run(s, store, address=address, local=local, max_in_flight=max_in_flight, resume=resume_id,
                          run_id=run_id, progress_interval_s=progress_interval, console=err)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: finished trials are saved; continue with: attnsweep resume {run_id}"
                  + (f" --store {markup(_quoted(store))}" if store != DEFAULT_STORE else ""), soft_wrap=True)
        raise typer.Exit(130) from None
    except RayDiedError as exc:  # one line naming the run to resume, not Ray's traceback
        raise AttnsweepError(f"{exc} with: attnsweep resume {run_id}"
                             + (f" --store {store}" if store != DEFAULT_STORE else "")) from None
    if summary.already_complete:
        err.print(visible(f"run {run_id} is complete ({summary.n_trials} trials); nothing to resume"), markup=False)
    else:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing left to run"
        if resume_id is not None:  # the whole run, as the store holds it; then this attempt's part
            whole = _trial_counts(store, summary.sweep, summary.run_id)
            counts = (", ".join(f"{k} {v}" for k, v in sorted(whole.items())) or "no trials") + f" (this attempt: {counts})"
        err.print(f"[bold]run {markup(summary.run_id)}[/] of sweep {markup(summary.sweep)}: {markup(counts)}; "
                  f"{summary.wall_s:.1f} s, {summary.trials_per_s:.1f} trials/s, "
                  f"workers idle {summary.idle_frac or 0:.0%} of the time; store {markup(store)}", soft_wrap=True)
    if analyze:
        from attnsweep.results import ResultsStore

        _print_analysis(ResultsStore(store), summary.run_id, figures or Path("figures") / summary.sweep / summary.run_id)


def _quoted(path: str) -> str:
    """``path`` as a shell word (a command to copy and paste)."""
    import shlex

    return shlex.quote(path)


def _trial_counts(store: str, sweep: str, run_id: str) -> dict[str, int]:
    """Trials of a run by status, each trial once, as the store holds them."""
    from attnsweep.results import ResultsStore, StoreError

    try:
        held = ResultsStore(store).scan_run_trials(sweep, run_id).group_by("status").len().collect()
    except StoreError:
        return {}
    return dict(zip(held["status"].to_list(), held["len"].to_list()))


@app.command()
@_user_errors
def replicate(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="the pinned sweep spec (YAML)")],
    baseline: Annotated[str, typer.Option(metavar="RUN_ID", help="run id of the baseline run of this spec (a sweep's name: its latest run)")],
    store: StoreOpt = DEFAULT_STORE,
    address: AddressOpt = None,
    local: LocalOpt = False,
    report: Annotated[Path | None, typer.Option(metavar="DIR",
                                                help="report folder (default: reports/SWEEP/NEW_RUN_ID)")] = None,
    tolerance: Annotated[float, typer.Option(min=0, metavar="FRACTION",
                                             help="relative widening of the baseline intervals")] = 0.25,
    alpha: Annotated[float, typer.Option(min=0, max=1, metavar="LEVEL",
                                         help="level of the Holm-corrected distribution tests")] = 0.01,
    progress_interval: ProgressOpt = DEFAULT_PROGRESS_INTERVAL,
) -> None:
    """Re-run a pinned sweep and compare it with a baseline run; exit 1 on a regression.

    Writes report.md (every comparison, the cells that moved, baseline and new figures side by side).
    """
    from attnsweep import api
    from attnsweep.orchestrator.analyze import run_caveats
    from attnsweep.orchestrator.provenance import code_version
    from attnsweep.orchestrator.replicate import compare_runs
    from attnsweep.presentation.replication import write_report
    from attnsweep.orchestrator.spec import load_spec
    from attnsweep.results import ResultsStore

    s = load_spec(spec)
    results = ResultsStore(store)
    baseline = _run_or_latest(results, baseline)
    record = results.read_run(results.sweep_of(baseline), baseline)
    if record["spec_hash"] != s.spec_hash():
        raise AttnsweepError(f"--baseline: run {baseline} was made from another spec (hash {record['spec_hash']}, "
                             f"this spec {s.spec_hash()}); replicate pins one spec")
    if record.get("status") != "finished":
        raise AttnsweepError(f"--baseline: run {baseline} is {record.get('status') or 'not recorded as finished'}, "
                             "not finished: a replication compared with it would report what it lacks as a "
                             "regression. Finish it first (attnsweep resume " + baseline + ") or give a finished run")
    _analysable(results, baseline)  # before the sweep runs again, not after
    if report is not None:  # the folder checked before the sweep runs: it writes only inside it
        _check_report_folder(results, report)
    summary = api.run(s, store, address=address, local=local, progress_interval_s=progress_interval, console=err)
    folder = report or Path("reports") / s.name / summary.run_id
    _check_report_folder(results, folder)
    comparisons = compare_runs(results, baseline, summary.run_id, tolerance, alpha, folder / "figures")
    header = dict(sweep=s.name, spec_hash=s.spec_hash(), baseline_code=record["code_version"],
                  new_code=code_version(), tolerance=tolerance, alpha=alpha)
    caveats = [n for r in (baseline, summary.run_id) for n in run_caveats(results, results.sweep_of(r), r)]
    for note in caveats:
        err.print(visible(f"warning: {note}"), style="yellow", markup=False, highlight=False)
    path = write_report(folder / "report.md", comparisons, baseline, summary.run_id, folder / "figures", header,
                        caveats)
    failed = [c for c in comparisons if c.ok is False]
    for c in failed:
        err.print(visible(f"moved: {c.kind} {c.what}: baseline {c.baseline}, new {c.new}"), markup=False, highlight=False)
    verdict = "REGRESSION" if failed else "passed"
    out.print(visible(f"replication of {s.name} (run {summary.run_id} vs baseline {baseline}): {verdict}; "
                      f"{len(failed)} of {sum(c.ok is not None for c in comparisons)} comparisons failed; report {path}"),
              markup=False, highlight=False)
    if failed:
        raise typer.Exit(1)


JobAddressOpt = Annotated[str, typer.Option("--address", envvar="RAY_API_SERVER_ADDRESS", metavar="URL",
                                             help="job server, e.g. http://127.0.0.1:8265")]
DEFAULT_JOB_ADDRESS = "http://127.0.0.1:8265"
JobArg = Annotated[str, typer.Argument(metavar="JOB_ID", help="job id from submit")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", envvar="ATTNSWEEP_TIMEOUT", min=0.1, max=86_400, metavar="SECONDS",
                                           help="seconds each call to the job server may take")]
DEFAULT_TIMEOUT = 30.0  # orchestrator.deadline.TIMEOUT_S, without importing it for --help


def _check_report_folder(results, folder: Path) -> None:
    """Raise AttnsweepError unless ``replicate`` may write its report into ``folder``: not a
    file, not inside the store, no link among its figure folders, no report.md of an earlier
    replication (each run gets a folder of its own; a second one would replace the first's)."""
    from attnsweep.results.outputs import check_output_folder

    if folder.exists() and not folder.is_dir():
        raise AttnsweepError(f"--report: {folder} exists and is not a folder")
    if results.holds(folder):
        raise AttnsweepError(f"--report: {folder} is inside the results store at {results.root}; give a folder "
                             "outside it")
    figures = folder / "figures"
    try:
        check_output_folder(folder, [figures, figures / "baseline", figures / "new"], "--report")
    except ValueError as exc:
        raise AttnsweepError(str(exc)) from None
    if (folder / "report.md").exists() and not (folder / "report.md").is_symlink():
        raise AttnsweepError(f"--report: {folder} already holds the report of a replication (report.md); each "
                             "replication gets a folder of its own: give a new one")


def _analysable(results, run_id: str) -> None:
    """Raise AttnsweepError unless run ``run_id`` can be analysed (it has trained trials),
    so that a replication finds a useless baseline before it spends a sweep's time."""
    from attnsweep.orchestrator.analyze import analyze_run, settings_of
    from attnsweep.orchestrator.analyze_symmetry import analyze_symmetry_run
    from attnsweep.results import StoreError

    sweep = results.sweep_of(run_id)
    record = results.read_run(sweep, run_id)
    try:
        if (record.get("experiment") or "sparse_boolean") == "symmetry":
            analyze_symmetry_run(results, sweep, run_id, settings_of(results, sweep, run_id))
        else:
            analyze_run(results, run_id)
    except StoreError as exc:
        raise AttnsweepError(f"--baseline: run {run_id} cannot be analysed, so nothing could be compared with it: "
                             f"{exc}") from exc


@app.command()
@_user_errors
def submit(
    spec: SpecArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    store: Annotated[str | None, typer.Option(metavar="DIR",
        help="results store as the cluster sees it (shared path or URI); default: the cluster's ATTNSWEEP_STORE")] = None,
    job_id: Annotated[str | None, typer.Option("--job-id", metavar="JOB_ID", help="a job id of your own")] = None,
    wait: Annotated[bool, typer.Option("--wait", metavar="",
                                       help="follow the job's log to its end; exit 0 only if it succeeded")] = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    progress_interval: Annotated[float, typer.Option(
        "--progress-interval", min=0.1, max=86_400, metavar="SECONDS",
        help="seconds between the progress lines in the job's log")] = DEFAULT_PROGRESS_INTERVAL,
) -> None:
    """Submit a sweep as a Ray job to a cluster's job server; prints the job id."""
    from attnsweep.orchestrator import jobs

    jid = jobs.submit(spec, address, store, job_id, timeout_s=timeout, progress_interval_s=progress_interval)
    out.print(visible(jid), markup=False, highlight=False)
    if wait:
        jobs.logs(address, jid, follow=True, write=lambda chunk: err.print(log_text(chunk), end="", markup=False, highlight=False),
                  timeout_s=timeout)
        state, message = jobs.status(address, jid, timeout_s=timeout)
        err.print(visible(f"job {jid}: {state}{': ' + message if message else ''}"), markup=False, highlight=False)
        if state != "SUCCEEDED":
            raise typer.Exit(1)


@app.command()
@_user_errors
def status(job_id: JobArg, address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
           timeout: TimeoutOpt = DEFAULT_TIMEOUT) -> None:
    """Print a submitted job's status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)."""
    from attnsweep.orchestrator import jobs

    state, message = jobs.status(address, job_id, timeout_s=timeout)
    out.print(visible(f"{state}{': ' + message if message else ''}"), markup=False, highlight=False)


@app.command()
@_user_errors
def logs(
    job_id: JobArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    follow: Annotated[bool, typer.Option("--follow", "-f", metavar="", help="stream until the job ends")] = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
) -> None:
    """Print a submitted job's log."""
    from attnsweep.orchestrator import jobs

    jobs.logs(address, job_id, follow, write=lambda chunk: typer.echo(log_text(chunk), nl=False), timeout_s=timeout)


@app.command()
@_user_errors
def cancel(job_id: JobArg, address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
           timeout: TimeoutOpt = DEFAULT_TIMEOUT) -> None:
    """Stop a submitted job (finished trials stay in the store; resume the run later)."""
    from attnsweep.orchestrator import jobs

    stopped = jobs.cancel(address, job_id, timeout_s=timeout)
    out.print(visible(f"job {job_id}: {'stopping' if stopped else 'had already ended'}"), markup=False, highlight=False)


store_app = typer.Typer(no_args_is_help=True, help="Check or compact the results store.")
app.add_typer(store_app, name="store")


@store_app.command("check")
@_user_errors
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
    out.print(f"trials: {report.files['trials']} files, {report.rows['trials']} rows; "
              f"runs: {report.files['runs']} files, {report.rows['runs']} rows")
    for path in report.quarantined:
        out.print(f"[red]damaged[/]: {markup(path)} (unreadable as Parquet; quarantined: its rows are not read; "
                  "resume its run to recompute them, then delete the file)")
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
        out.print(f"[red]second run record[/]: run {markup(run_id)} of sweep {markup(sweep)}: {markup(path)} is not read (a run's "
                  "record is run.parquet alone); move or delete it", soft_wrap=True)
    for sweep, run_id, read, recorded, detail in report.row_counts:
        if read < recorded:
            out.print(f"[red]missing rows[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {read} of the {markup(recorded)} trials its "
                      f"record counts ({markup(detail)}); attnsweep resume {markup(run_id)} reruns the missing trials of a grid sweep",
                      soft_wrap=True)
        else:
            out.print(f"[red]extra rows[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {read} trials, its record counts "
                      f"{markup(recorded)} ({markup(detail)}): rows were added after it ended", soft_wrap=True)
    for sweep, run_id, rows in report.no_trial_id:
        out.print(f"[red]no trial id[/]: run {markup(run_id)} of sweep {markup(sweep)} holds {rows} rows whose trial_id is null",
                  soft_wrap=True)
    for sweep, run_id, tid, copies in report.duplicates:
        out.print(f"[red]duplicate[/]: trial {markup(tid)} of run {markup(run_id)} (sweep {markup(sweep)}) is stored {copies} times")
    for sweep, run_id, why, rescue in report.failed_runs:
        kept = ("" if rescue is None else f"; the rows the store refused are in {markup(rescue)}"
                + ("" if Path(rescue).exists() else " (that file is gone now)"))
        out.print(f"[red]failed run[/]: run {markup(run_id)} of sweep {markup(sweep)}: {markup(why or 'no reason recorded')}{kept}; "
                  f"attnsweep resume {markup(run_id)} runs its missing trials", soft_wrap=True)
    for sweep, run_id in report.died_runs:
        out.print(f"[red]died run[/]: run {markup(run_id)} of sweep {markup(sweep)} is recorded running but no driver holds its "
                  f"lock: its driver was killed or could not record its end; attnsweep resume {markup(run_id)} continues it")
    for path, age, writer in report.temp_files:
        out.print(f"[yellow]temporary file[/]: {markup(path)} ({age:.0f} s old, written by {markup(writer)}: removed by the "
                  "next run or store compact once its writer is provably gone; delete it by hand if you know it is)")
    for path, age, writer in report.writing:
        out.print(f"being written: {markup(path)} ({age:.0f} s old, by {markup(writer)}, which is alive)")
    for sweep, run_id in report.orphans:
        out.print(f"[red]no run record[/]: run {markup(run_id)} of sweep {markup(sweep)} has trial rows but no readable run record "
                  "(analyze and resume need it)")
    for path in report.stray:
        out.print(f"[red]stray file[/]: {markup(path)} (not in a sweep=NAME/run_id=ID folder a run writes: not read)")
    for path in report.superseded:
        out.print(f"[yellow]superseded[/]: {markup(path)} (replaced by a compaction; skipped by readers; store compact deletes it)")
    if report.ok:
        out.print("[green]ok[/]")
    else:
        raise typer.Exit(1)


@store_app.command("compact")
@_user_errors
def store_compact(
    store: StoreOpt = DEFAULT_STORE,
    sweep: Annotated[str | None, typer.Option(metavar="SWEEP", help="only this sweep")] = None,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="only this run")] = None,
) -> None:
    """Merge each run's part files into one file without changing a row (skips runs a
    driver is writing, and folders no run writes; a run beyond a quarter of the limit on a
    file, ATTNSWEEP_MAX_FILE_MB, becomes a few files)."""
    from attnsweep.results import ResultsStore
    from attnsweep.results.integrity import compact_store, not_a_run_folder, recognise
    from attnsweep.results.locks import RunLock, RunLockedError
    from attnsweep.results.roots import listing

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give the store's folder (default results-store)")
    results = ResultsStore(store)
    recognise(results)  # exit 2 for no folder, or a folder that is not a store
    total = dict(runs=0, files_before=0, files_after=0, rows=0, deleted_temp=0)
    folders = [f for f in sorted(listing(results.root / "trials", "sweep=*/run_id=*"), key=str)
               if (not sweep or f.parent.name == f"sweep={sweep}") and (not run_id or f.name == f"run_id={run_id}")]
    if (sweep or run_id) and not folders:
        raise AttnsweepError(f"no trials of {'run ' + run_id if run_id else ''}{' of ' if sweep and run_id else ''}"
                             f"{'sweep ' + sweep if sweep else ''} in the store at {store}")
    for folder in folders:
        sw, r = folder.parent.name.removeprefix("sweep="), folder.name.removeprefix("run_id=")
        why = not_a_run_folder(folder)  # one odd folder must not stop the compaction of the others
        if why is not None:
            err.print(visible(f"skipped: {folder.relative_to(results.root)}: {why}; left as it is (store check lists "
                              "its files)"),
                      style="yellow", markup=False, highlight=False, soft_wrap=True)
            continue
        try:
            with RunLock(results, sw, r):
                rep = compact_store(results, sw, r)
        except RunLockedError as exc:
            err.print(visible(f"skipped: {exc}"), style="yellow", markup=False)
            continue
        for k in total:
            total[k] += getattr(rep, k)
    out.print(f"compacted {total['runs']} run(s): {total['files_before']} files -> {total['files_after']}, "
              f"{total['rows']} rows unchanged"
              + (f"; {total['deleted_temp']} temporary file(s) of dead writers removed" if total["deleted_temp"] else ""))


@app.command()
@_user_errors
def runs(
    sweep: Annotated[str | None, typer.Argument(metavar="SWEEP", help="only this sweep's runs")] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """List the sweeps and runs in the store: status, trials by status, start and end (UTC)."""
    import polars as pl
    from rich.table import Table

    from attnsweep.results import StoreError

    from attnsweep.results.integrity import recognise

    if not store.strip():
        raise AttnsweepError("--store: an empty path; give a directory (default results-store)")
    results = _existing_store(store)
    if results.local:
        recognise(results)  # a folder that is not a store (/etc, a home folder) is refused, not listed as empty
    try:
        records = results.scan_runs().collect()
    except StoreError:
        err.print(f"the store at {visible(store)} holds no runs: run a sweep first", markup=False, highlight=False)
        return
    if sweep is not None:
        records = records.filter(pl.col("sweep") == sweep)
        if records.is_empty():
            raise AttnsweepError(f"no sweep {sweep!r} in the store at {store}")
    records = records.sort("sweep", "started_at")
    statuses = ("done", "failed", "diverged", "lost")
    t = Table(title=f"runs in {markup(store)}")
    for c in ("sweep", "run", "status", "trials", *statuses, "started", "ended"):
        t.add_column(c, justify="right" if c in ("trials", *statuses) else "left", no_wrap=c in ("run", "started", "ended"))
    for r in records.iter_rows(named=True):
        counts = {s: r.get(f"n_{s}") for s in statuses}
        running = r.get("status") == "running" or any(v is None for v in counts.values())
        if running:  # not ended (its record's counts are those of its start): count the rows it holds so far
            try:
                held = (results.scan_run_trials(r["sweep"], r["run_id"]).group_by("status").len().collect())
                counts = dict.fromkeys(statuses, 0) | dict(zip(held["status"], held["len"]))
            except StoreError:
                counts = dict.fromkeys(statuses, 0)
        when = [f"{v:%Y-%m-%d %H:%M:%S}" if v is not None else "-" for v in (r.get("started_at"), r.get("ended_at"))]
        trials = f"{sum(counts.values())} so far" if running else str(r.get("n_trials") or "-")
        t.add_row(markup(r["sweep"]), markup(r["run_id"]), markup(r.get("status") or "-"), trials,
                  *(str(counts.get(s, 0)) for s in statuses), *when)
    out.print(t)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _largest_trials(s):
    """The trials whose memory the pack count did not already see: an adaptive search's at
    the top of its m range; of a grid with more shapes than the count visits (a sample),
    each block's trial with every numeric axis at its largest value (memory grows with each)."""
    from attnsweep.orchestrator.packing import shape_groups

    if s.search.adaptive:
        yield from (s.family.config(**cell, m=s.search.m.max, seed=s.seeds[0]) for cell in s.cells())
        return
    if shape_groups(s)[2]:
        return
    for block in range(len(s.grids)):
        top = {k: max(v) if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) else v[0]
               for k, v in s.axes(block).items()}
        try:
            yield s.family.config(**s.fixed, **top)
        except ValueError:  # the largest values together break a cross-field rule
            pass


def _run_or_latest(results, name: str | None) -> str | None:
    """``name`` as a run id; a sweep's name means that sweep's latest run, said on stderr.
    A name that is neither is returned as it is, for the command's own message."""
    if name is None:
        return None
    run_id, n_runs = results.resolve_run(name)
    if n_runs:
        err.print(visible(f"{name} is a sweep: its latest run is {run_id}"
                          + (f" (of {n_runs}; `attnsweep runs` lists them)" if n_runs > 1 else "")),
                  markup=False, highlight=False, soft_wrap=True)
    return run_id


def _existing_store(store: str):
    """The ResultsStore at ``store``, refusing a local path that does not exist (rather
    than reading it as an empty store)."""
    from attnsweep.results import ResultsStore

    results = ResultsStore(store)  # a URI whose scheme cannot hold a store is refused here
    if results.local and not Path(results.root).exists():
        raise AttnsweepError(f"no store at {store}: that path does not exist (give --store DIR or set ATTNSWEEP_STORE)")
    return results


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
    run: Annotated[str | None, typer.Argument(metavar="RUN_ID", help="the run, or a sweep's name for its latest run "
                                                                      "(default: the latest run)")] = None,
    store: StoreOpt = DEFAULT_STORE,
    run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="the run, as an option")] = None,
    figures: FiguresOpt = None,
    format: Annotated[Literal["table", "csv", "json"], typer.Option(
        "--format", metavar="table|csv|json", help="table: tables and figures; csv, json: the m* table alone on "
                                                   "stdout, for scripts (figures only with --figures)")] = "table",
) -> None:
    """Print m* per cell with bootstrap intervals, the growth-law fits (or S1-S4), and write figures."""
    from attnsweep.results import ResultsStore

    if run is not None and run_id is not None and run != run_id:
        raise AttnsweepError(f"two runs given ({run} and --run {run_id}): give one")
    _check_paths(store, figures)
    if figures is not None:  # a folder asked for and not writable is an error, not a warning after the tables
        try:
            figures.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AttnsweepError(f"--figures: cannot make {figures}: {exc.strerror or exc}; nothing was "
                                 "analysed") from None
    results = ResultsStore(store)
    _print_analysis(results, _run_or_latest(results, run or run_id), figures, format)


def _print_analysis(store, run_id: str | None, figures: Path | None, format: str = "table") -> None:
    from attnsweep.orchestrator.analyze import analyze_run, run_caveats, settings_of
    from attnsweep.orchestrator.analyze_symmetry import analyze_symmetry_run
    from attnsweep.presentation.terminal import print_analysis, print_symmetry

    if run_id is None:
        _, run_id = store.latest_run()
    sweep = store.sweep_of(run_id)
    for note in run_caveats(store, sweep, run_id):
        err.print(visible(f"warning: {note}"), style="yellow", markup=False, highlight=False)
    if format != "table":
        _write_m_star(store, sweep, run_id, figures, format)
        return
    figures = figures or Path("figures") / sweep / run_id

    def run(figures_dir):
        if store.read_run(sweep, run_id).get("experiment") == "symmetry":
            settings = settings_of(store, sweep, run_id)
            print_symmetry(analyze_symmetry_run(store, sweep, run_id, settings, figures_dir), out, settings.target_error)
        else:
            print_analysis(analyze_run(store, run_id, figures_dir), out)

    try:
        run(figures)
    except OSError as exc:  # the figure folder cannot be written: the analysis still prints
        err.print(visible(f"warning: no figures ({exc.strerror or exc}: {exc.filename or figures}); give --figures DIR"),
                  style="yellow", markup=False, highlight=False)
        run(None)


def _write_m_star(store, sweep: str, run_id: str, figures: Path | None, format: str) -> None:
    """The m* table of a run on stdout, a row per cell with the run id first, as CSV (a
    header, then a line per cell; a list column as its JSON text) or JSON (an array of
    objects; NaN and infinity as null, as ``query --format json`` writes them). The
    bootstrap replicates of each m* are left out."""
    import json

    import polars as pl

    from attnsweep.orchestrator.analyze import analyze_run, m_star_table, settings_of
    from attnsweep.orchestrator.analyze_symmetry import analyze_symmetry_run

    if store.read_run(sweep, run_id).get("experiment") == "symmetry":
        table = analyze_symmetry_run(store, sweep, run_id, settings_of(store, sweep, run_id), figures).m_star
    else:
        table = m_star_table(analyze_run(store, run_id, figures))
    table = table.drop("replicates", strict=False).with_columns(pl.lit(run_id).alias("run_id"))
    table = table.select("run_id", pl.exclude("run_id"))
    if format == "json":
        sys.stdout.write(table.write_json() + "\n")
    else:
        nested = [c for c, d in table.schema.items() if d.is_nested()]
        table = table.with_columns(pl.col(c).map_elements(lambda v: json.dumps(v.to_list() if hasattr(v, "to_list")
                                                                               else v, default=str),
                                                          return_dtype=pl.String) for c in nested)
        sys.stdout.write(table.write_csv())
    sys.stdout.flush()


@app.command()
@_user_errors
def report(
    run_ids: Annotated[list[str] | None, typer.Argument(metavar="RUN_ID", help="the runs to report on (sparse-Boolean "
                                                        "and symmetry; with --from: default every run there)")] = None,
    store: StoreOpt = DEFAULT_STORE,
    out_dir: Annotated[Path | None, typer.Option("--out", metavar="DIR",
                                                 help="report folder (default: reports/FIRST_RUN_ID; with --from: "
                                                      "that folder)")] = None,
    publish: Annotated[bool, typer.Option("--publish", metavar="", help="also write the findings: every trial row as "
                                          "trials.parquet, the run records as runs.parquet, the m* tables, the "
                                          "figures, findings.md")] = False,
    readme: Annotated[Path | None, typer.Option("--readme", metavar="FILE", help="also put the findings into this README, between "
                                                "its findings markers (appended if it has none); implies --publish")] = None,
    from_folder: Annotated[Path | None, typer.Option("--from", metavar="DIR", help="make the report and findings again "
                                                     "from a published folder's runs.parquet and trials.parquet "
                                                     "instead of a store (--store is not read); implies --publish")] = None,
) -> None:
    """Write the verdict report of runs: one self-contained report.html; prints its path.

    Verdicts L1-L4, R and S1-S4 are computed from the store now; also figures, m*, provenance.
    To publish a run: attnsweep report RUN_ID --out docs/findings --readme README.md
    To make published findings again from their trial rows: attnsweep report --from docs/findings/symmetry
    """
    import json
    import tempfile

    from attnsweep.presentation.report import summary
    from attnsweep.results import ResultsStore

    if not run_ids and from_folder is None:
        raise AttnsweepError("give at least one run id, or --from a published findings folder "
                             "(attnsweep runs lists them)")
    if from_folder is not None:
        from attnsweep.results.outputs import recover_folder

        recover_folder(from_folder)  # a publish a kill interrupted: the old folder or the new one, whole
    if from_folder is not None and not from_folder.is_dir():
        raise AttnsweepError(f"--from: {from_folder} " + ("is not a directory" if from_folder.exists()
                                                          else "does not exist"))
    if from_folder is None:
        run_ids = [_run_or_latest(ResultsStore(store), r) for r in run_ids]
    out_dir = out_dir or from_folder or Path("reports") / run_ids[0]
    if from_folder is None:
        _check_paths(store, None)
    if out_dir.exists() and not out_dir.is_dir():
        raise AttnsweepError(f"--out: {out_dir} exists and is not a directory")
    if readme is not None:  # every problem with the README is found before anything is written
        from attnsweep.presentation.findings import SYMMETRY_END, SYMMETRY_START, check_readme

        check_readme(readme)
        check_readme(readme, SYMMETRY_START, SYMMETRY_END)
    try:
        with _sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="attnsweep-findings-") as scratch:
            path = _report_in(store, run_ids, out_dir, publish, readme, from_folder, scratch)
    except KeyboardInterrupt:
        kept = (f"{out_dir} holds the old findings or the new ones, whole, never a mix"
                + (f"; {readme} is whole" if readme is not None else "")
                if publish or readme is not None or from_folder is not None
                else f"{out_dir} may hold some of the new report's files beside the old ones")
        err.print(visible(f"interrupted: the report stopped; {kept}"), style="yellow", markup=False, highlight=False,
                  soft_wrap=True)
        raise typer.Exit(130) from None
    written = json.loads((path.parent / "verdicts.json").read_text())
    for caveat in written["caveats"]:
        err.print(visible(f"warning: {caveat}"), style="yellow", markup=False)
    verdicts = written["verdicts"]
    out.print(visible(path), markup=False, highlight=False, soft_wrap=True)
    out.print(visible(f"verdicts: {summary(verdicts)}"), markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (``timeout``, a scheduler) stops the block as Ctrl-C does, so that what it
    writes is cleaned up the same way (from the main thread only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report_in(store, run_ids, out_dir: Path, publish: bool, readme: Path | None, from_folder: Path | None,
               scratch: str) -> Path:
    from attnsweep.results import ResultsStore

    if from_folder is not None:
        from attnsweep.presentation.findings import load
        store, publish = str(Path(scratch) / "store"), True
        loaded = load(from_folder, ResultsStore(store))
        run_ids = [_run_or_latest(ResultsStore(store), r) for r in run_ids or []]  # a sweep: its latest run there
        unknown = [r for r in run_ids if r not in loaded]
        if unknown:
            raise AttnsweepError(f"--from: {from_folder} holds no run {', '.join(unknown)} "
                                 f"(it holds {', '.join(loaded)})")
        run_ids = run_ids or loaded
    source = f"the published rows in {from_folder}" if from_folder is not None else "the results store"
    return _report(ResultsStore(store), run_ids, out_dir, publish, readme, source)


def _report(store, run_ids: list[str], out_dir: Path, publish: bool, readme: Path | None,
            source: str = "the results store") -> Path:
    from attnsweep.presentation.report import build_report

    try:
        return build_report(store, run_ids, out_dir, publish=publish, readme=readme, source=source)
    except OSError as exc:  # the folder cannot be made or written
        raise AttnsweepError(f"--out: cannot write the report to {out_dir}: {exc.strerror or exc}") from exc


def _query_output(output: str):
    """``query --output`` as orchestrator.query_output.resolve_output decides it, and first a
    path that names a folder by its form refused: one ending in '/' (or '/.'), which a Path
    would read as the file without it, where that is not a folder (a folder is refused there)."""
    from attnsweep.presentation.query_output import resolve_output

    if not output:
        raise AttnsweepError("--output: an empty path; give a file")
    path = Path(output)
    tail = "/" if output.endswith("/") else "/." if os.path.basename(output.rstrip("/")) == "." else None
    if tail is not None and not path.is_dir():
        raise AttnsweepError(f"--output: {output} names a folder (it ends in '{tail}'), and {path} is not one; give "
                             f"the path of a file, without the '{tail}'; nothing was written")
    return resolve_output(path)


@app.command()
@_user_errors
def query(
    sql: Annotated[str | None, typer.Argument(metavar="SQL",
        help="one SELECT over the tables 'trials' and 'runs' (DuckDB SQL); '-' reads it from stdin")] = None,
    store: StoreOpt = DEFAULT_STORE,
    file: Annotated[Path | None, typer.Option("--file", "-f", metavar="FILE", help="read the SQL from this file")] = None,
    schema: Annotated[bool, typer.Option("--schema", metavar="", help="list the tables and their columns, then exit")] = False,
    format: Annotated[Literal["table", "csv", "json", "parquet"], typer.Option(
        "--format", metavar="table|csv|json|parquet", help="output format")] = "table",
    output: Annotated[str | None, typer.Option(metavar="FILE", help=(  # a string: Path would drop a trailing '/'
        "write to this file instead of stdout (a file is replaced whole when the query succeeds; a "
        "device or FIFO is written through; a folder, block device or socket, a path ending in '/' and "
        "a path inside the store are refused)"))] = None,
    memory_limit: Annotated[str, typer.Option(
        "--memory-limit", envvar="ATTNSWEEP_QUERY_MEMORY", metavar="SIZE",
        help="DuckDB's memory for the query, e.g. 2GB, 512MiB or 25% (of this machine's); beyond it, it spills "
             "to a temporary folder; the result's batches count too")] = "25%",
    spill_limit: Annotated[str | None, typer.Option(
        "--spill-limit", envvar="ATTNSWEEP_QUERY_SPILL", metavar="SIZE",
        help="the most the query may spill to its temporary folder (under TMPDIR), e.g. 20GB or 50% (of the space "
             "free there); default half the space free there. The folder is removed however the query ends")] = None,
) -> None:
    """Run a read-only SQL query over the store (DuckDB SQL; the engine has no file access).

    The table format shows at most 200 rows; csv, json and parquet stream every row. The SQL
    is at most 1,000,000 bytes.
    """
    from attnsweep.presentation.query_output import read_sql, read_sql_file
    from attnsweep.results.query_limits import check_memory_limit, check_spill_limit
    from attnsweep.results.query_tables import table_schemas

    limit = check_memory_limit(memory_limit)  # every argument is checked before the store is read
    spill_bytes = check_spill_limit(spill_limit)
    target = _query_output(output) if output is not None and not schema else None
    _check_paths(store, None)
    results = _existing_store(store)
    if target is not None and results.holds(target.path):
        raise AttnsweepError(f"--output: {output} is inside the results store at {store}; a file written there would "
                             "be read back as part of the store or replace a run's files. Give a path outside it; "
                             "nothing was written")
    if sys.stdout is None and (target is None or schema):
        raise AttnsweepError("query: stdout is closed; give --output FILE" if not schema else "query --schema: stdout "
                             "is closed")
    if schema:
        tables = table_schemas(results)
        if not tables:
            raise AttnsweepError(f"the store at {store} is empty: run a sweep first")
        for name, columns in tables.items():
            out.print(f"{name} ({len(columns)} columns)", markup=False, highlight=False)
            for f in columns:
                out.print(visible(f"  {f.name}: {f.type}"), markup=False, highlight=False)
        return
    given = [x for x in (sql, file) if x is not None]
    if len(given) != 1:
        raise AttnsweepError("query: give the SQL as an argument, '-' for stdin, or --file FILE (one of them)")
    if file is not None:
        sql = read_sql_file(file)
    elif sql == "-":
        if sys.stdin is None:
            raise AttnsweepError("query -: stdin is closed; give the SQL as an argument or with --file FILE")
        sql = read_sql(sys.stdin.buffer, "stdin")
    try:
        with _sigterm_as_interrupt():  # SIGTERM (timeout, cron, systemd) cleans up as Ctrl-C does
            _query_to(results, sql, limit, spill_bytes, format, target, output)
    except KeyboardInterrupt:
        err.print("interrupted" + (f": {output} is as it was" if target is not None and not target.through else ""),
                  style="yellow", markup=False, highlight=False)
        raise typer.Exit(130) from None
    except BrokenPipeError:  # stdout's reader stopped reading (| head): end quietly, as a pipe's writer does
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        except (OSError, ValueError):
            pass
        raise typer.Exit(141) from None


def _query_to(results, sql: str, limit: str, spill_bytes: int, format: str, target, output: str | None) -> None:
    from contextlib import nullcontext

    from attnsweep.presentation.query_output import converter, open_output, table_text, write_batches
    from attnsweep.results import stream_query
    from attnsweep.results.query_columns import hugeint_as_text

    schema_, batches = stream_query(results, sql, memory_limit=limit, convert=hugeint_as_text(converter(format)),
                                    spill_bytes=spill_bytes)
    with batches:  # the connection and its spill folder go whatever happens below
        sink = open_output(target) if target is not None else nullcontext(sys.stdout.buffer)
        if format == "table":
            # On a terminal polars fits the table to it; a file or a pipe gets every column, every character.
            terminal = output is None and sys.stdout.isatty()
            text = table_text(schema_, batches, terminal=terminal)
            with sink as fh:
                fh.write((text + "\n").encode())
        else:
            with sink as fh:
                write_batches(schema_, batches, format, fh)
        if target is None:
            sys.stdout.buffer.flush()


def main() -> None:
    """Console-script entry point."""
    import warnings

    # One line per warning (e.g. a quarantined store file), not the source line behind it.
    warnings.showwarning = lambda message, category, *args, **kw: err.print(
        f"warning: {visible(message)}", style="yellow", markup=False, highlight=False)
    app()


if __name__ == "__main__":
    main()
