"""Which ``curves`` part files of a run a read may use: those its trial part files commit.

A trial's curve points are written just before its row, each in a part file of its own
table, and the trial part file names the curves file it commits in its metadata
(:data:`~results.layout.CURVES_KEY`; :meth:`results.store.ResultsStore.write_trials`). A
curves file no trial file names holds points of rows never stored (a kill between the two
renames): no read sees them, ``store check`` lists the file, ``store compact`` deletes it, and
the resumed run trains those trials again and writes their points anew. A run's trial file
written before this rule (no key) commits the curves files older than itself, as curves were
then written just before their rows; ``store compact`` names them explicitly when it rewrites
that file.
"""

from __future__ import annotations

import json

from attnsweep.results.layout import CURVES_KEY

MAX_KEY_BYTES = 1 << 20
"""The most bytes of a trial file's list of committed curves files that are parsed (a
compacted file of a run of a million parts would need ~40 MB; no run writes that many: a
longer list commits nothing, and ``store check`` names its curves files as not committed)."""


def committed_names(trial_files: list[tuple[str, dict | None]], curve_names: list[str]) -> set[str]:
    """The names among ``curve_names`` (a run's curves part files) that the run's trial files
    commit.

    Args:
        trial_files: ``(file name, Parquet key-value metadata)`` of each trial part file of the
            run a read uses.
        curve_names: the names of the run's curves part files.
    """
    named: set[str] = set()
    legacy: str | None = None
    for name, meta in trial_files:
        raw = (meta or {}).get(CURVES_KEY)
        if raw is None:
            legacy = name if legacy is None else max(legacy, name)
        else:
            named |= set(listed(raw))
    return {c for c in curve_names if c in named or (legacy is not None and c < legacy)}


def listed(raw: bytes) -> list[str]:
    """The plain file names in one trial file's :data:`~results.layout.CURVES_KEY` value
    (nothing for a value that is too long or not a JSON list)."""
    if len(raw) > MAX_KEY_BYTES:
        return []
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: brackets nested deeper than the parser goes
        return []
    if not isinstance(value, list):
        return []
    return [n for n in value if isinstance(n, str) and "/" not in n and n.endswith(".parquet")]
