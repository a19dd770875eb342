"""Ctrl-C during a DuckDB call: a SIGINT interrupts DuckDB's work on a query's connection
within about a second.

While DuckDB works on a query in the main thread, Python's signal handler cannot run, and
DuckDB looks at Python's signals only between its tasks (70 s apart in a sort of 10^9 rows
that spills; never while it streams a scan), so during each DuckDB call the signal's wakeup
descriptor is a pipe that a thread of ours reads, and that thread calls DuckDB's
``interrupt()`` (:func:`interruptible`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from contextlib import contextmanager

_running: set = set()  # the connections in a DuckDB call now, in the main thread
_wakeup: list[int] = []  # the write end of the pipe the watcher reads, once made
_wakeup_lock = threading.Lock()
_acting: set[int] = set()  # the signals that interrupt, as the handlers were when the block began


def interrupts(handler) -> bool:
    """Whether ``handler`` (a Python signal handler) stops the main thread's work: Python's own
    Ctrl-C handler, or one marked so (an ``interrupts`` attribute that is true, as
    ``cli_options.sigterm_as_interrupt``'s)."""
    return handler is signal.default_int_handler or bool(getattr(handler, "interrupts", False))


def _wakeup_fd() -> int:
    """The write end of a pipe that a daemon thread reads: a SIGINT written to it interrupts
    every connection in :data:`_running` (made on first use)."""
    with _wakeup_lock:
        if not _wakeup:
            r, w = os.pipe()
            os.set_blocking(w, False)  # signal.set_wakeup_fd needs it so

            def watch() -> None:
                while data := os.read(r, 64):  # the numbers of the signals that came
                    if any(s in data for s in _acting):
                        for con in list(_running):
                            with contextlib.suppress(Exception):  # closed meanwhile: nothing to interrupt
                                con.interrupt()

            threading.Thread(target=watch, name="attnsweep-query-ctrl-c", daemon=True).start()
            _wakeup.append(w)
        return _wakeup[0]


@contextmanager
def interruptible(con):
    """Within the block, a SIGINT or SIGTERM whose handler stops the work (:func:`interrupts`:
    Python's own Ctrl-C handler, the CLI's SIGTERM) interrupts DuckDB's work on ``con`` at once
    (DuckDB then raises its InterruptException, and Python its KeyboardInterrupt). A signal that
    is ignored stays ignored (a process started in the background ignores Ctrl-C, and SIGTERM
    still stops it). Only in the main thread, and where no one else (asyncio) has the signal
    wakeup descriptor; elsewhere the block runs as it is."""
    acting = {s for s in (signal.SIGINT, signal.SIGTERM) if interrupts(signal.getsignal(s))}
    if threading.current_thread() is not threading.main_thread() or not acting:
        yield
        return
    _acting.clear()
    _acting.update(acting)
    fd = _wakeup_fd()
    old = signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    if old not in (-1, fd):
        signal.set_wakeup_fd(old)
        yield
        return
    _running.add(con)
    try:
        yield
    finally:
        _running.discard(con)
        signal.set_wakeup_fd(old)
