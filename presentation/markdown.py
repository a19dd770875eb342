"""Text from data (rows, run records, file names) written into Markdown as literal text:
escaped so that nothing in the data becomes markup, a link or a findings marker line
(CommonMark 0.31)."""

from __future__ import annotations

import re

MARKUP = "\\`*_[]<>|!&~#"
"""Characters that can start Markdown or HTML markup (CommonMark lets a backslash escape each)."""


def md_text(text) -> str:
    """A string that came from data (a row, a run record, a file name) as literal Markdown
    text: every character that could start markup (links, images, raw HTML, emphasis, code,
    a table cell's end) escaped with a backslash (CommonMark 0.31, "Backslash escapes"), every
    control character and line break a space, so no string in the data becomes markup, a
    link, or a findings marker line."""
    out = []
    for ch in str(text):
        if ch in MARKUP:
            out.append("\\" + ch)
        elif ch in "\r\n\t" or (ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029"):
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


SAFE_TARGET = re.compile(r"[A-Za-z0-9._/~+-]*\Z")


def md_target(path: str) -> str:
    """A path as a Markdown link destination: as it is when it holds only plain path
    characters, else in angle brackets with ``<``, ``>`` and ``\\`` escaped (CommonMark
    0.31, "Links"), so a folder named ``my findings (v1)`` still links. Control characters
    and line breaks become spaces (a destination cannot hold them)."""
    if SAFE_TARGET.match(path):
        return path
    path = "".join(" " if ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029" else ch for ch in path)
    return "<" + re.sub(r"([<>\\])", r"\\\1", path) + ">"


def md_code(text) -> str:
    """A string that came from data as a Markdown code span: fenced by more backticks than it
    holds in a row, padded where it starts or ends with one (CommonMark 0.31, "Code spans");
    control characters and line breaks become spaces."""
    text = "".join(" " if ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029" else ch for ch in str(text))
    run = cur = 0
    for ch in text:
        cur = cur + 1 if ch == "`" else 0
        run = max(run, cur)
    fence = "`" * (run + 1)
    # A span that starts or ends with a backtick, or with a space at both ends (not only spaces),
    # loses one space a side when rendered: pad it with one.
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}" if text else "` `"


def run_line(rec: dict) -> str:
    counts = ", ".join(
        f"{rec[k]} {k.removeprefix('n_')}" for k in ("n_done", "n_failed", "n_diverged", "n_lost") if rec.get(k)
    )
    trials = f"{rec.get('n_trials')} trials"
    if rec.get("status") != "finished":  # a run that stopped early records the trials it planned, at most
        stored = sum(rec.get(k) or 0 for k in ("n_done", "n_failed", "n_diverged", "n_lost"))
        trials = f"{stored} trials stored of at most {rec.get('n_trials')} planned"
    return (
        f"Run {md_code(rec['run_id'])} of sweep {md_code(rec['sweep'])} ({md_text(trials)}: "
        f"{md_text(counts)}; {md_text(rec.get('status'))}; {_when(rec)}; code version "
        f"{md_code(rec.get('code_version'))})."
    )


def _when(rec: dict) -> str:
    """When a run ran: its start (UTC, to the minute) and its wall time."""
    start, end = rec.get("started_at"), rec.get("ended_at")
    if start is None:
        return "start unknown"
    text = f"started {start:%Y-%m-%d %H:%M} UTC"
    if end is not None:
        text += f", {(end - start).total_seconds() / 60:.1f} min"
    return text
