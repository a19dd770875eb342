"""The CLI's spec commands: ``validate`` (what a spec would run), ``init`` (a starter spec)
and ``examples`` (the example specs, listed or copied)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attnsweep.cli_options import MaxTrialsOpt, SetOpt, SpecArg, err, out, plural, quoted, user_errors
from attnsweep.presentation.console_text import visible


@user_errors
def validate(
    spec: SpecArg,
    max_trials: MaxTrialsOpt = 1_000_000,
    show: Annotated[
        bool,
        typer.Option(
            "--show",
            metavar="",
            help="also print every trial setting of each grid block and every run setting, and where each comes from (spec or default)",
        ),
    ] = False,
    set_: SetOpt = None,
) -> None:
    """Check a spec and say what it would run; writes nothing."""
    from attnsweep.api_specs import check_spec

    check = check_spec(spec, max_trials=max_trials, overrides=set_ or ())
    s = check.spec
    if check.largest_trial_bytes > check.budget_bytes:
        err.print(
            f"warning: one trial needs about {check.largest_trial_bytes / 2**20:,.0f} MiB of training memory, "
            f"more than execution.pack_memory_mb ({s.execution.pack_memory_mb:g}); such trials run one per pack "
            "and may not fit a worker",
            style="yellow",
            markup=False,
        )
    if check.pooled_axes:
        err.print(
            f"warning: the grid varies {', '.join(check.pooled_axes)}: symmetry cells are keyed by teacher, "
            "student, n, k and d, so analyze will pool those values in one cell (it names them then); give each "
            "value its own run to compare them",
            style="yellow",
            markup=False,
        )
    if s.search.adaptive:
        n_cells = s.n_cells()
        tune = (
            f", {' and '.join(s.search.tune.params()).replace('_', ' ')} tuned by Optuna against the spec's "
            f"({s.search.tune.n_trials} parameter sets per cell)"
            if s.search.tune
            else ""
        )
        out.print(
            f"[green]valid[/]: sweep {s.name!r}: adaptive m* search over {plural(n_cells, 'cell')}, m in "
            f"{s.search.m.min}..{s.search.m.max}, to within {s.search.rel_tol:.0%}{tune}; at most "
            f"{plural(s.n_trials(), 'trial')}"
        )
    else:
        n_packs = check.n_packs
        packs = (
            plural(n_packs, "pack")
            if check.packs_exact
            else f"about {n_packs:,} packs (estimated from a sample of its shapes)"
        )
        out.print(
            f"[green]valid[/]: sweep {s.name!r}: {plural(s.n_trials(), 'trial')} in {packs} "
            f"(for {plural(check.workers, 'worker')} here)"
        )
    if check.curve_points:
        out.print(_curves_line(check), markup=False, highlight=False)
    for i in range(len(s.grids)):
        if len(s.grids) > 1:
            out.print(f"  grid block {i}:")
        for k, v in s.axes(i).items():
            shown = v if len(v) <= 12 else [*v[:6], "..."]
            values = ", ".join("null" if x is None else str(x) for x in shown)
            out.print(
                f"  {'  ' if len(s.grids) > 1 else ''}{k}: [{values}]" + (f" ({len(v)} values)" if len(v) > 12 else ""),
                markup=False,
                highlight=False,
            )
    if s.claims:
        from attnsweep.stats.own_claims import claim_text

        out.print(f"  {plural(len(s.claims), 'claim')} of your own, judged first by analyze and report:")
        for claim in s.claims:
            out.print(visible(f"    {claim_text(claim.model_dump())}"), markup=False, highlight=False)
    if show:
        for i in range(len(s.grids)):
            out.print(_settings_table(s, i))
        out.print(_run_settings_table(s))


def _curves_line(check) -> str:
    """What a trial's learning curve holds in its worker (workers/memory.py), counted in the pack
    sizes, and the ceiling ``execution.curves.max_points`` is held to."""
    from attnsweep.workers.memory import CURVE_MAX_BYTES, CURVE_MAX_POINTS, CURVE_POINT_BYTES

    held = check.curve_bytes / 2**20
    size = f"{held:,.1f} MiB" if held >= 1 else f"{check.curve_bytes / 2**10:,.0f} KiB"
    return (
        f"  learning curves: at most {check.curve_points:,} points a trial, up to {size} of curve buffer a "
        f"trial in its worker ({CURVE_POINT_BYTES:,} bytes a point), counted in the pack sizes; the ceiling is "
        f"{CURVE_MAX_BYTES // 2**20} MiB a trial (max_points up to {CURVE_MAX_POINTS:,})"
    )


def _settings_table(s, block: int):
    """A rich table of grid block ``block``'s resolved trial settings: name, value, where it
    came from (the spec's grid, fixed, seeds or search, or the default), meaning. Defaults are
    dimmed and marked, so a setting the spec left out cannot pass unseen."""
    return _table(
        f"trial settings of grid block {block}" if len(s.grids) > 1 else "trial settings",
        "setting",
        "from: the spec's grid, fixed, seeds or search section, or the default (dimmed)",
        s.resolved_settings(block),
        fold_names=False,
    )


def _run_settings_table(s):
    """The spec's run settings (execution, resources, analysis; search when adaptive): value,
    whether the spec gave it or it is the default (dimmed), meaning."""
    from pydantic import BaseModel

    rows = []
    for section in ["execution", "resources", "analysis"] + (["search"] if s.search.adaptive else []):
        settings = getattr(s, section)
        for name, field in type(settings).model_fields.items():
            value = getattr(settings, name)
            if isinstance(value, BaseModel):
                value = "{" + ", ".join(f"{k}: {_setting_text(v)}" for k, v in value.model_dump().items()) + "}"
            source = "spec" if name in settings.model_fields_set else "default"
            rows.append((f"{section}.{name}", value, source, field.description or ""))
    return _table("run settings", "run setting", "from: the spec, or the default (dimmed)", rows, fold_names=True)


def _table(title: str, first: str, caption: str, rows, fold_names: bool):
    """``rows`` of (name, value, source, meaning) as a rich table, defaults dimmed; names fold
    in a narrow terminal when ``fold_names``, else never."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, caption=caption, caption_justify="left"
    )
    # Headers never fold below their own width; the meaning column takes what the terminal has
    # left, and goes where there is no room for it.
    table.add_column(first, overflow="fold", no_wrap=not fold_names, min_width=len(first))
    table.add_column("value", overflow="fold", min_width=len("value"), max_width=48)
    table.add_column("from", no_wrap=True, min_width=len("default"))
    wide = out.width >= 72
    if wide:
        table.add_column("meaning", overflow="fold", min_width=len("meaning"), ratio=1)
    for name, value, source, meaning in rows:
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


@user_errors
def init(
    path: Annotated[Path, typer.Argument(metavar="[PATH]", help="where to write it")] = Path("sweep.yaml"),
) -> None:
    """Write a starter sweep spec (never over an existing file)."""
    from attnsweep.api_specs import write_starter

    write_starter(path)
    word = quoted(str(path))
    out.print(
        visible(f"wrote {path}; next: attnsweep validate --show {word}, then attnsweep run {word}", newlines=False),
        markup=False,
        highlight=False,
    )


examples_app = typer.Typer(help="List the example sweep specs, or copy one to start from.", invoke_without_command=True)


@examples_app.callback()
def examples(ctx: typer.Context) -> None:
    """List the example specs (name and what each runs); `examples copy NAME` copies one."""
    if ctx.invoked_subcommand is None:
        examples_list()


@examples_app.command("list")
@user_errors
def examples_list() -> None:
    """List the example specs: name, trials, description."""
    from attnsweep.api_specs import examples

    for name, about in examples():
        out.print(
            f"{name:<26} {about[:100] + ('...' if len(about) > 100 else '')}".rstrip(),
            markup=False,
            highlight=False,
        )


@examples_app.command("copy")
@user_errors
def examples_copy(
    name: Annotated[str, typer.Argument(metavar="NAME", help="an example's name (see: attnsweep examples)")],
    dest: Annotated[
        Path | None,
        typer.Argument(metavar="[DEST]", help="file or existing folder (default: NAME.yaml here)"),
    ] = None,
) -> None:
    """Copy an example spec to DEST (never over an existing file)."""
    from attnsweep.api_specs import copy_example

    target = copy_example(name, dest)
    out.print(f"wrote {target}", markup=False, highlight=False)
