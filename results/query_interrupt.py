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


def _wakeup_fd() -> int:
    """The write end of a pipe that a daemon thread reads: a SIGINT written to it interrupts
    every connection in :data:`_running` (made on first use)."""
    with _wakeup_lock:
        if not _wakeup:
            r, w = os.pipe()
            os.set_blocking(w, False)  # signal.set_wakeup_fd needs it so

            def watch() -> None:
                while data := os.read(r, 64):  # the numbers of the signals that came
                    if signal.SIGINT in data or signal.SIGTERM in data:
                        for con in list(_running):
                            with contextlib.suppress(Exception):  # closed meanwhile: nothing to interrupt
                                con.interrupt()

            threading.Thread(target=watch, name="attnsweep-query-ctrl-c", daemon=True).start()
            _wakeup.append(w)
        return _wakeup[0]


@contextmanager
def interruptible(con):
    """Within the block, a SIGINT interrupts DuckDB's work on ``con`` at once (DuckDB then
    raises its InterruptException, and Python its KeyboardInterrupt). Only where Ctrl-C means
    KeyboardInterrupt (Python's own SIGINT handler) in the main thread, and where no one else
    (asyncio) has the signal wakeup descriptor; elsewhere the block runs as it is."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
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
