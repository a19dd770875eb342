"""The findings' section of a README: the short verdict table between two marker lines,
written by ``attnsweep report --publish --readme`` and never typed by hand, so the next run
can regenerate it."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from attnsweep.analysis.symmetry import SymmetryAnalysis
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.verdict_table import (
    BOOLEAN,
    EXPERIMENTS,
    HEADER,
    ROW_START,
    SYMMETRY,
    boolean_row,
    runs_comment,
    symmetry_row,
)
from attnsweep.results.outputs import read_text_capped, replacing

START = "<!-- attnsweep findings: made by `attnsweep report --publish --readme`; edits here are overwritten -->"


END = "<!-- /attnsweep findings -->"


def update_readmes(
    readme: Path,
    runs: list[tuple[str, str]],
    out_dir: Path,
    union: pl.DataFrame | None,
    claims: list[dict],
    caveats: list[str],
    symmetry: list[SymmetryAnalysis],
) -> None:
    """Put the short verdict table (presentation/verdict_table.py) into ``readme`` between
    :data:`START` and :data:`END`: the row of each experiment the report has runs of is made
    new, the other experiment's row is kept as the README has it.

    Raises:
        AttnsweepError: as :func:`update_readme`.
    """
    check_readme(readme)
    rows, comments = _table(read_section(readme))
    link = f"{relative(out_dir, readme)}/findings.md"
    symmetry_ids = [a.run_id for a in symmetry]
    if union is not None:
        rows[BOOLEAN] = boolean_row(claims, union, link, caveats)
        comments[BOOLEAN] = runs_comment(BOOLEAN, [r for _, r in runs if r not in symmetry_ids])
    if symmetry:
        rows[SYMMETRY] = symmetry_row(symmetry, link, caveats)
        comments[SYMMETRY] = runs_comment(SYMMETRY, symmetry_ids)
    lines = [
        *HEADER,
        *(rows[e] for e in EXPERIMENTS if e in rows),
        "",
        *(comments[e] for e in EXPERIMENTS if e in comments),
    ]
    update_readme(readme, "\n".join(lines))


def _table(section: str) -> tuple[dict[str, str], dict[str, str]]:
    """The rows and run comments of a README's verdict table, by experiment (empty for a
    section that has none, such as one written before the table existed)."""
    rows, comments = {}, {}
    for line in (line.rstrip("\r") for line in section.split("\n")):
        for e in EXPERIMENTS:
            if line.startswith(ROW_START[e]):
                rows[e] = line
            elif line.startswith(f"<!-- runs ({e}): ") and line.endswith(" -->"):
                comments[e] = line
    return rows, comments


def readme_run_ids(readme: Path, experiment: str) -> list[str]:
    """The run ids the README's verdict table shows for ``experiment`` (:data:`BOOLEAN` or
    :data:`SYMMETRY`), in its order; [] where it shows none."""
    section = read_section(readme) if Path(readme).is_file() else ""
    comment = _table(section)[1].get(experiment, "")
    return comment.removeprefix(f"<!-- runs ({experiment}): ").removesuffix(" -->").split() if comment else []


def check_readme(readme: Path, start: str = START, end: str = END) -> str:
    """Read a README that is to receive the findings, before anything is written.

    The markers count only as whole lines: none (the section is appended), or one
    :data:`START` line followed later by one :data:`END` line.

    Returns:
        The README's text (line endings as they are).

    Raises:
        AttnsweepError: it is not a file, cannot be read or written, is not UTF-8 text, or
            its marker lines are not one START line before one END line.
    """
    readme = Path(readme)
    if not readme.is_file():
        raise AttnsweepError(f"--readme: {readme} is not a file")
    try:
        text = read_text_capped(readme, "--readme", newline="")
    except UnicodeDecodeError as exc:  # before ValueError, of which it is a subclass
        raise AttnsweepError(
            f"--readme: {readme} is not UTF-8 text (byte {exc.start}): the findings are Markdown in UTF-8"
        ) from exc
    except ValueError as exc:  # too large, or not a regular file (a FIFO would block)
        raise AttnsweepError(str(exc)) from None
    except OSError as exc:
        raise AttnsweepError(f"--readme: cannot read {readme}: {exc.strerror or exc}") from exc
    if not os.access(readme, os.W_OK):
        raise AttnsweepError(f"--readme: {readme} is not writable")
    starts, ends = _marker_lines(text, start, end)
    if (len(starts), len(ends)) not in ((0, 0), (1, 1)) or (starts and starts[0] > ends[0]):
        raise AttnsweepError(
            f"--readme: {readme} needs no findings marker lines, or exactly these two, in this order, "
            f"each on a line of its own (found {len(starts)} start and {len(ends)} end line(s)):\n{start}\n{end}"
        )
    return text


def update_readme(readme: Path, markdown: str, start: str = START, end: str = END) -> None:
    """Replace the lines between the ``start`` and ``end`` lines of ``readme`` with
    ``markdown`` (appended at the end, with the markers, when the README has none), keeping
    the README's line endings.

    Raises:
        AttnsweepError: as :func:`check_readme`, or the README cannot be written.
    """
    text = check_readme(readme, start, end)
    newline = "\r\n" if "\r\n" in text else "\n"
    block = newline.join([start, *markdown.rstrip("\n").split("\n"), end]) + newline
    lines = _lines(text)
    starts, ends = _marker_lines(text, start, end)
    if starts:
        text = "".join(lines[: starts[0]]) + block + "".join(lines[ends[0] + 1 :])
    else:
        # Every byte of the README is kept (trailing blank lines, a form feed at its end): the
        # section follows after one blank line.
        gap = "" if not text or text.endswith(newline * 2) else newline if text.endswith("\n") else newline * 2
        text = text + gap + block
    # Written aside and renamed over the README (at its target, when it is a link: the README
    # the user keeps, not the link, is what gets the section): a full disk or a kill mid-write
    # leaves the old README whole, never one cut mid-line.
    try:
        with replacing(os.path.realpath(readme)) as temp, open(temp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        raise AttnsweepError(f"--readme: cannot write {readme}: {exc.strerror or exc}") from exc


def _lines(text: str) -> list[str]:
    """``text``'s lines, each with its ending, split at ``\\n`` alone: ``str.splitlines``
    also splits at a form feed, U+2028, U+2029, U+0085 and other separators, which Markdown
    keeps inside a line, so a README line holding one beside the markers lost its text when
    the lines were put back together."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _marker_lines(text: str, start: str = START, end: str = END) -> tuple[list[int], list[int]]:
    """Indices of the lines that are exactly the start and the end marker (spaces and tabs
    around it aside; any other character makes the line text, kept as it is)."""
    lines = [line.rstrip("\n").rstrip("\r").strip(" \t") for line in _lines(text)]
    return [i for i, line in enumerate(lines) if line == start], [i for i, line in enumerate(lines) if line == end]


def relative(folder: Path, readme: Path) -> str:
    """The findings folder as a link from the README's folder (POSIX separators)."""
    return Path(os.path.relpath(Path(folder).resolve(), Path(readme).resolve().parent)).as_posix()


def read_section(readme: Path, start: str = START, end: str = END) -> str:
    """The Markdown between the marker lines of ``readme`` ("" when it has none)."""
    text = read_text_capped(readme, "--readme")
    starts, ends = _marker_lines(text, start, end)
    if not starts or not ends:
        return ""
    return "\n".join(line.rstrip("\n").rstrip("\r") for line in _lines(text)[starts[0] + 1 : ends[0]]).strip("\n")
