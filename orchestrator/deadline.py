"""Deadlines for calls that wait on another machine (a job server, a Ray cluster).

The clients we call (Ray's job SDK, ``ray.init``) set no timeout of their own: a server that
accepts the connection and never answers would hang the command. :func:`within` runs such a
call in a daemon thread and gives up at the deadline; the abandoned call dies with the process.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

from attnsweep.orchestrator.errors import RunError

TIMEOUT_S = 30.0
"""Default seconds a call to another machine may take (``--timeout``, env ``ATTNSWEEP_TIMEOUT``)."""

T = TypeVar("T")


MAX_TIMEOUT_S = 86_400.0
"""The longest deadline (seconds), as ``--timeout`` allows; a larger one overflows a thread's wait."""


def default_timeout() -> float:
    """``ATTNSWEEP_TIMEOUT`` in seconds, else :data:`TIMEOUT_S`.

    Raises:
        RunError: the variable is not a number of seconds in (0, 86400].
    """
    text = os.environ.get("ATTNSWEEP_TIMEOUT")
    if text is None:
        return TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TIMEOUT_S:
        raise RunError(
            f"ATTNSWEEP_TIMEOUT={text!r}: give a number of seconds above 0 and at most {MAX_TIMEOUT_S:g} (a day)"
        )
    return value


def within(timeout_s: float, what: str, fn: Callable[[], T], limit_s: float | None = None) -> T:
    """``fn()``, or a :class:`RunError` saying that ``what`` did not answer within
    ``timeout_s`` seconds.

    Args:
        what: who is waited on, e.g. ``"the job server at http://host:8265"``.
        limit_s: the limit the message names (default ``timeout_s``): a command's whole
            ``--timeout`` when this call has only what is left of it.

    Raises:
        RunError: the deadline passed; and whatever ``fn`` raises.
    """
    done: queue.Queue = queue.Queue(maxsize=1)

    def call() -> None:
        try:
            done.put((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done.put((False, exc))

    threading.Thread(target=call, daemon=True, name="attnsweep-deadline").start()
    try:
        ok, value = done.get(timeout=timeout_s)
    except queue.Empty:
        raise RunError(
            f"no answer from {what} within {timeout_s if limit_s is None else limit_s:g} s; check the address and that the server is up "
            "(raise the limit with --timeout or ATTNSWEEP_TIMEOUT)"
        ) from None
    if not ok:
        raise value
    return value
