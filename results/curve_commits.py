"""Which ``curves`` part files of a run a read may use: those its trial part files commit.

A trial's curve points are written just before its row, each in a part file of its own
table, and the trial part file names the curves file it commits in its metadata
(:data:`~results.layout.CURVES_KEY`; :meth:`results.store.ResultsStore.write_trials`). A
curves file no trial file names holds points of rows never stored (a kill between the two
renames): no read sees them, ``store check`` lists the file, ``store compact`` deletes it
(unless a trial of it has a row and no committed points: then it is kept and named), and the
resumed run trains those trials again and writes their points anew. A trial file without the
key (written before this rule, or rewritten by a tool that drops metadata) or with a key that
is not a list of names commits the curves files up to its own name, as curves were then
written just before their rows; ``store compact`` names them explicitly when it rewrites that
file.
"""

from __future__ import annotations

import json

from attnsweep.results.layout import CURVES_KEY

MAX_KEY_BYTES = 1 << 20
"""The most bytes of a trial file's list of committed curves files that are parsed (a
compacted file of a run of a million parts would need ~40 MB; no run writes that many)."""


def committed_names(trial_files: list[tuple[str, dict | None]], curve_names: list[str]) -> set[str]:
    """The names among ``curve_names`` (a run's curves part files) that the run's trial files
    commit: a trial file commits the curves file of its own name (the writer names the pair
    alike) and those its :data:`~results.layout.CURVES_KEY` lists (a compacted file's). A trial
    file whose key is missing (written before commits, or rewritten by a tool that drops
    Parquet metadata) or not a list of file names (:func:`listed` gives None) commits every
    curves file up to its own name, as curves were written just before their rows: a damaged
    key can show a kill's leftover points again, never hide stored ones.

    Args:
        trial_files: ``(file name, Parquet key-value metadata)`` of each trial part file of the
            run a read uses.
        curve_names: the names of the run's curves part files.
    """
    named: set[str] = set()
    by_age: str | None = None
    for name, meta in trial_files:
        named.add(name)
        raw = (meta or {}).get(CURVES_KEY)
        names = listed(raw) if raw is not None else None
        if names is None:
            by_age = name if by_age is None else max(by_age, name)
        else:
            named |= set(names)
    return {c for c in curve_names if c in named or (by_age is not None and c <= by_age)}


def unreadable_keys(trial_files: list[tuple[str, dict | None]]) -> list[str]:
    """The names of the trial files whose :data:`~results.layout.CURVES_KEY` is there but not a
    list of file names (``store check`` names them: their curves are committed by age)."""
    return [
        name for name, meta in trial_files if (raw := (meta or {}).get(CURVES_KEY)) is not None and listed(raw) is None
    ]


def listed(raw: bytes) -> list[str] | None:
    """The file names in one trial file's :data:`~results.layout.CURVES_KEY` value, or None
    for a value that is too long, not JSON, nested too deep, or not a list of plain
    ``.parquet`` file names."""
    if len(raw) > MAX_KEY_BYTES:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: brackets nested deeper than the parser goes
        return None
    if not isinstance(value, list) or not all(
        isinstance(n, str) and "/" not in n and "\\" not in n and n.endswith(".parquet") for n in value
    ):
        return None
    return value
