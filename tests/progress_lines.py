"""Reading a plain progress line back (orchestrator/progress.py writes them): what a log
scraper of a Ray job or a cron run would do, so the tests hold the format to it."""

from __future__ import annotations

import re

from attnsweep.orchestrator.progress import PREFIX, STATUSES

_SHARE = re.compile(r"(?P<finished>\d+)(?:/(?P<total>\d+))? trials(?: \([\d.]+%\))?")


def parse_progress_line(line: str) -> dict:
    """The fields of a :func:`progress_line` line: ``label``, ``finished``, ``total`` (None
    when unknown), the four status counts, ``rate`` (trials per second), ``elapsed`` and
    ``eta`` (as written, ``H:MM:SS`` or ``-``).

    Raises:
        ValueError: ``line`` is not a progress line.
    """
    parts = line.rstrip("\n").split(" | ")
    if len(parts) != 9 or not parts[0].startswith(PREFIX):
        raise ValueError(f"not a progress line: {line!r}")
    share = _SHARE.fullmatch(parts[1])
    counts = [p.split(" ") for p in parts[2:6]]
    if share is None or [k for k, _ in counts] != list(STATUSES) or not parts[6].endswith(" trials/s"):
        raise ValueError(f"not a progress line: {line!r}")
    return dict(
        label=parts[0].removeprefix(PREFIX),
        finished=int(share["finished"]),
        total=int(share["total"]) if share["total"] else None,
        **{k: int(v) for k, v in counts},
        rate=float(parts[6].removesuffix(" trials/s")),
        elapsed=parts[7].removeprefix("elapsed "),
        eta=parts[8].removeprefix("ETA "),
    )
