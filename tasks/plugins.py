"""What the three extension points share: reading a group's entry-point names without loading
them, and loading one entry point on its own into one clear error.

Each registry (tasks/registry.py for Boolean tasks, tasks/teachers.py for symmetry teachers,
workers/student_registry.py for symmetry students) passes the entry points it looked up, so that
a test can swap the lookup of one registry (``monkeypatch.setattr(registry, "entry_points",
...)``) without touching the others. No torch here: spec validation reads names alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import EntryPoint

from attnsweep.tasks.errors import TaskError

NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
"""A plugin's name: lower-case letters, digits and ``_``, starting with a letter, at most 32."""


def checked_names(points: Iterable[EntryPoint], group: str, built_in: tuple[str, ...], kind: str) -> list[str]:
    """``built_in``, then the entry points' names in the order found, without loading any.

    Args:
        points: the entry points of ``group``.
        kind: what a name names (``"task"``, ``"teacher"``, ``"student"``), for messages.

    Raises:
        TaskError: an entry point's name is not :data:`NAME` or is a built-in one.
    """
    names = list(built_in)
    for point in points:
        if not NAME.match(point.name) or point.name in built_in:
            raise TaskError(
                f"entry point {point.name!r} ({point.value}) of group {group!r}: a {kind} name is "
                f"lower-case letters, digits and _ (at most 32), and not one of {list(built_in)}"
            )
        if point.name not in names:
            names.append(point.name)
    return names


_SCANS: dict[tuple, list[str]] = {}
# Reading a group's entry points parses every installed distribution's metadata (14 ms with this
# project's dependencies); spec validation asks once per trial config, so 100,000 trials would
# spend 23 minutes there. A scan is reused while the import path and its folders are unchanged:
# installing a package adds its metadata folder to one of them, which changes that folder's mtime.


def installed_names(
    lookup: Callable[..., Iterable[EntryPoint]], group: str, built_in: tuple[str, ...], kind: str
) -> list[str]:
    """:func:`checked_names` of ``lookup(group=group)``, the scan reused while ``lookup`` (a
    registry's ``entry_points``), ``sys.path`` and the modification times of its folders stay
    the same.

    Raises:
        TaskError: as :func:`checked_names` (never remembered: every call checks again).
    """
    key = (lookup, group, built_in, kind, tuple(sys.path), tuple(_mtime(p) for p in sys.path))
    names = _SCANS.get(key)
    if names is None:
        if len(_SCANS) >= 64:  # old keys of a changed path: forget them all
            _SCANS.clear()
        names = _SCANS[key] = checked_names(lookup(group=group), group, built_in, kind)
    return list(names)


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return None


IMPORT_TIMEOUT_ENV = "ATTNSWEEP_PLUGIN_TIMEOUT"
DEFAULT_IMPORT_TIMEOUT_S = 120.0
"""Seconds a plugin's import may take (env :data:`IMPORT_TIMEOUT_ENV` overrides): far above a
package that imports torch (1.0-1.5 s for torch on 2 busy cores, 2026-12-05), on a worker
that may be slow to page it in; past this the import is abandoned."""

_ABANDONED: dict[tuple[str, str], str] = {}
# An import that ran past its time still holds its module's import lock (its half-made module
# sits in sys.modules): importing it again would wait on that lock for ever, so a later load of
# the same entry point fails at once with the first message.


def import_timeout() -> float:
    """:data:`IMPORT_TIMEOUT_ENV` in seconds, else :data:`DEFAULT_IMPORT_TIMEOUT_S`.

    Raises:
        TaskError: the variable is set but not a number of seconds above 0.
    """
    text = os.environ.get(IMPORT_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_IMPORT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise TaskError(f"{IMPORT_TIMEOUT_ENV}={text!r} is not a number of seconds above 0 (a plugin's import time)")
    return seconds


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what is written to stdout, by Python (``print``) or to descriptor 1 (C code, a
    subprocess), to stderr for the duration: a plugin's chatter at import must not land in a
    command's machine-readable output (``analyze --format csv``, ``query --format json``)."""
    if sys.stderr is None:  # no stderr to send it to: nothing to protect stdout with
        yield
        return
    saved = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if sys.stdout is not None:
            sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 1)
            os.close(saved)


def isolated_load(point: EntryPoint) -> object:
    """``point.load()``, isolated: in a thread of its own, waited for at most
    :func:`import_timeout` seconds, its stdout sent to stderr, and whatever it raises but
    ``KeyboardInterrupt`` (``SystemExit`` from ``sys.exit()`` too) turned into a
    :class:`TaskError` naming the entry point and the exception.

    After a timeout the import is abandoned, not stopped (Python cannot stop a thread): it
    runs on in a daemon thread until the process ends, and what it prints from then on is no
    longer redirected. Code that must run on the main thread (``signal.signal``) fails there.

    Raises:
        TaskError: the import raised, or ran past its time (then every later load of the
            same entry point in this process fails at once).
        KeyboardInterrupt: Ctrl-C while waiting, or the plugin raised it.
    """
    where = f"entry point {point.name!r} ({point.value}) of group {point.group!r}"
    key = (point.group, point.value)
    if key in _ABANDONED:
        raise TaskError(_ABANDONED[key])
    timeout = import_timeout()
    box: dict[str, object] = {}

    def load() -> None:
        try:
            box["value"] = point.load()
        except BaseException as exc:  # noqa: BLE001 - SystemExit, GeneratorExit, ...: the plugin's error
            box["error"] = exc

    thread = threading.Thread(target=load, name=f"attnsweep plugin {point.name}", daemon=True)
    with _stdout_to_stderr():
        thread.start()
        thread.join(timeout)
    if thread.is_alive():
        message = _ABANDONED[key] = (
            f"{where} does not load: its import ran past {timeout:g} s and was abandoned "
            f"(a plugin's import time: env {IMPORT_TIMEOUT_ENV})"
        )
        raise TaskError(message)
    error = box.get("error")
    if isinstance(error, KeyboardInterrupt):
        raise error
    if isinstance(error, BaseException):
        raise TaskError(
            f"{where} does not load: its import raised {type(error).__name__}: {error}{_raised_at(error)}"
        ) from error
    return box.get("value")


def _raised_at(error: BaseException) -> str:
    """Where in the plugin's own code ``error`` was raised (`` (at FILE:LINE: SOURCE)``), the
    frame a row's traceback cannot show: it ends in this module, where the import is made.
    Import machinery's frames are skipped; "" where no frame is the plugin's (a SyntaxError
    names its line in its message)."""
    import traceback

    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if f.filename != __file__ and not f.filename.startswith("<frozen") and "importlib" not in f.filename
    ]
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno}" + (f": {last.line.strip()}" if last.line else "") + ")"


def load_one(points: Iterable[EntryPoint], group: str, name: str, cls: type, kind: str) -> object:
    """The value the entry point ``name`` of ``group`` names, checked to be a ``cls`` of that
    name, imported by :func:`isolated_load` (a thread, a timeout, stdout sent to stderr).

    Raises:
        TaskError: no entry point has that name, two do, or it does not load (whatever it
            raised but KeyboardInterrupt, ``sys.exit()`` included, or its import ran past
            :func:`import_timeout`), is not a ``cls`` or its ``name`` attribute is another
            name. The message names the entry point.
    """
    found = [p for p in points if p.name == name]
    if not found:
        raise TaskError(f"no installed package adds {kind} {name!r} (entry points of group {group!r})")
    if len(found) > 1:
        raise TaskError(f"two entry points of group {group!r} name {kind} {name!r}")
    point = found[0]
    where = f"entry point {point.name!r} ({point.value}) of group {group!r}"
    value = isolated_load(point)
    if not isinstance(value, cls):
        raise TaskError(f"{where} is a {type(value).__name__}, not an {cls.__module__}.{cls.__qualname__}")
    own = getattr(value, "name", None)
    if not isinstance(own, str) or not NAME.match(own) or own != point.name:
        raise TaskError(
            f"{where} names {kind} {own!r}: the entry point and the {kind} need one name, "
            f"lower-case letters, digits and _ (at most 32)"
        )
    return value
