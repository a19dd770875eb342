"""What the three extension points share: reading a group's entry-point names without loading
them, and loading one entry point on its own into one clear error.

Each registry (tasks/registry.py for Boolean tasks, tasks/teachers.py for symmetry teachers,
workers/student_registry.py for symmetry students) passes the entry points it looked up, so that
a test can swap the lookup of one registry (``monkeypatch.setattr(registry, "entry_points",
...)``) without touching the others. No torch here: spec validation reads names alone.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
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


def load_one(points: Iterable[EntryPoint], group: str, name: str, cls: type, kind: str) -> object:
    """The value the entry point ``name`` of ``group`` names, checked to be a ``cls`` of that name.

    Raises:
        TaskError: no entry point has that name, two do, or it does not load (whatever it
            raised), is not a ``cls`` or its ``name`` attribute is another name. The message
            names the entry point.
    """
    found = [p for p in points if p.name == name]
    if not found:
        raise TaskError(f"no installed package adds {kind} {name!r} (entry points of group {group!r})")
    if len(found) > 1:
        raise TaskError(f"two entry points of group {group!r} name {kind} {name!r}")
    point = found[0]
    where = f"entry point {point.name!r} ({point.value}) of group {group!r}"
    try:
        value = point.load()
    except Exception as exc:  # a broken plugin is named, whatever it raised
        raise TaskError(f"{where} does not load: {type(exc).__name__}: {exc}") from exc
    if not isinstance(value, cls):
        raise TaskError(f"{where} is a {type(value).__name__}, not an {cls.__module__}.{cls.__qualname__}")
    own = getattr(value, "name", None)
    if not isinstance(own, str) or not NAME.match(own) or own != point.name:
        raise TaskError(
            f"{where} names {kind} {own!r}: the entry point and the {kind} need one name, "
            f"lower-case letters, digits and _ (at most 32)"
        )
    return value
