"""A sweep's progress where it is read: a live rich bar on a terminal (or in Jupyter with
ipywidgets), and elsewhere (a Ray job's log, cron, CI, a file, Jupyter without ipywidgets)
one plain line every ``interval_s`` seconds.

A plain line has no control characters and is never wrapped or clipped; its fields are
separated by ``" | "`` (:func:`progress_line` gives the format; tests/progress_lines.py reads
it back, as a log scraper would)::

    progress: quickstart 20261201-120000-abcdef | 312/1248 trials (25.0%) | done 280 | failed 32 | diverged 0 | lost 0 | 5.2 trials/s | elapsed 0:01:00 | ETA 0:03:00
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections import Counter

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

PROGRESS_INTERVAL_S = 10.0
"""Default seconds between plain progress lines (``--progress-interval``)."""
STATUSES = ("done", "failed", "diverged", "lost")
PREFIX = "progress: "


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def progress_line(label: str, finished: int, total: int | None, counts: Counter, elapsed_s: float) -> str:
    """One plain progress line (format in the module doc).

    Args:
        label: the sweep and run, e.g. ``"quickstart 20261201-120000-abcdef"``.
        finished: trials with a row so far; ``total``: trials the run will have (None: not
            known in advance, as in an adaptive search: no percentage and no ETA).
        counts: trials per status (done, failed, diverged, lost).
        elapsed_s: seconds since the run started. The rate is ``finished / elapsed_s``, the
            ETA ``(total - finished) / rate`` (``-`` while nothing has finished).
    """
    rate = finished / elapsed_s if elapsed_s > 0 else 0.0
    share = f"{finished}/{total} trials ({100 * finished / total:.1f}%)" if total else f"{finished} trials"
    eta = _clock((total - finished) / rate) if total and rate > 0 else "-"
    fields = [
        f"{PREFIX}{label}",
        share,
        *(f"{k} {counts.get(k, 0)}" for k in STATUSES),
        f"{rate:.1f} trials/s",
        f"elapsed {_clock(elapsed_s)}",
        f"ETA {eta}",
    ]
    return " | ".join(fields)


def _average_rate(task) -> float | None:
    """Trials per second since the bar started: the rate of the plain line and of the run's
    summary (finished / elapsed). rich's own ``task.speed`` averages a moving window, so on a
    run whose packs finish unevenly it disagreed with the summary printed at the end."""
    elapsed = task.finished_time if task.finished else task.elapsed
    return task.completed / elapsed if elapsed and task.completed else None


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        rate = _average_rate(task)
        return Text(f"{rate:.1f} trials/s" if rate else "- trials/s", style="cyan")


class _EtaColumn(ProgressColumn):
    """Time left at the average rate (as the plain line's ETA)."""

    def render(self, task) -> Text:
        rate = _average_rate(task)
        if task.total is None or not rate:
            return Text("-:--:--", style="cyan")
        return Text(_clock(max(task.total - task.completed, 0) / rate), style="cyan")


class SweepProgress:
    """Context manager showing the progress of ``total`` trials (None: not known) on ``console``.

    On a terminal, or in Jupyter with ipywidgets (rich's bar needs them there), it is rich's
    live bar; elsewhere a plain line (module doc)
    every ``interval_s`` seconds from a background thread, so a log shows the run moving even
    while no pack finishes, and a last one when the run ends.
    """

    def __init__(
        self,
        console: Console,
        total: int | None,
        label: str,
        interval_s: float = PROGRESS_INTERVAL_S,
    ):
        self._console, self._total, self._label, self._interval_s = (
            console,
            total,
            label,
            interval_s,
        )
        self._counts: Counter = Counter()
        self._finished = 0
        self._live = console.is_terminal or (console.is_jupyter and importlib.util.find_spec("ipywidgets") is not None)
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._live:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "[green]done {task.fields[done]}[/] [red]failed {task.fields[failed]}[/]"
                    " [yellow]diverged {task.fields[diverged]}[/] [magenta]lost {task.fields[lost]}[/]"
                ),
                _RateColumn(),
                TextColumn("ETA"),
                _EtaColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
                speed_estimate_period=60.0,
            )
            self._task = self._progress.add_task(label, total=total, **self._fields())

    def _fields(self) -> dict:
        return {k: self._counts[k] for k in STATUSES}

    def advance(self, n: int, statuses: Counter) -> None:
        """Record ``n`` finished trials with their statuses."""
        self._counts.update(statuses)
        self._finished += n
        if self._live:
            self._progress.update(self._task, advance=n, **self._fields())

    def line(self) -> str:
        """The plain progress line as of now."""
        return progress_line(self._label, self._finished, self._total, self._counts, time.monotonic() - self._start)

    def _print(self) -> None:
        self._console.print(self.line(), markup=False, highlight=False, soft_wrap=True, emoji=False)

    def _tick(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._print()

    def __enter__(self) -> SweepProgress:
        self._start = time.monotonic()
        if self._live:
            self._progress.start()
        else:
            self._thread = threading.Thread(target=self._tick, daemon=True, name="attnsweep-progress")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._progress.stop()
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._print()
