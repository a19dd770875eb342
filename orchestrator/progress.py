"""A live progress bar: done/failed counts, trials per second and ETA (rich)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
    TimeElapsedColumn, TimeRemainingColumn,
)
from rich.text import Text


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f} trials/s" if speed else "- trials/s", style="cyan")


class SweepProgress:
    """Context manager around a rich progress bar for ``total`` trials."""

    def __init__(self, console: Console, total: int, label: str):
        self._progress = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("[green]done {task.fields[done]}[/] [red]failed {task.fields[failed]}[/]"
                       " [yellow]diverged {task.fields[diverged]}[/] [magenta]lost {task.fields[lost]}[/]"),
            _RateColumn(), TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
            console=console, transient=False, speed_estimate_period=60.0,
        )
        self._counts: Counter = Counter()
        self._task = self._progress.add_task(label, total=total, **self._fields())

    def _fields(self) -> dict:
        return {k: self._counts[k] for k in ("done", "failed", "diverged", "lost")}

    def advance(self, n: int, statuses: Counter) -> None:
        """Record ``n`` finished trials with their statuses."""
        self._counts.update(statuses)
        self._progress.update(self._task, advance=n, **self._fields())

    def __enter__(self) -> SweepProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()
