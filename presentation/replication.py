"""The replication report (``attnsweep replicate``): the comparisons of
:func:`attnsweep.analysis.replication.compare_runs` as Markdown, with both runs' figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attnsweep.analysis.replicate import Comparison
from attnsweep.results.outputs import write_text


def write_report(
    path: Path,
    comparisons: list[Comparison],
    baseline: str,
    new: str,
    figures: Path | None,
    header: dict,
    caveats: Sequence[str] = (),
) -> Path:
    """A Markdown report, replaced whole (results/outputs.py): verdict, the rules, warnings (``caveats``: a run incomplete or
    unfinished), every comparison (failures first), and the baseline and new figures side by side."""
    failed = [c for c in comparisons if c.ok is False]
    lines = [
        f"# Replication of {header.get('sweep')}: {'REGRESSION' if failed else 'PASSED'}",
        "",
        f"- baseline run: {baseline}",
        f"- new run: {new}",
    ]
    lines += [f"- {k}: {v}" for k, v in header.items() if k != "sweep"]
    lines += [
        "",
        f"{len(failed)} of {sum(c.ok is not None for c in comparisons)} judged comparisons failed. "
        "Rules: see `analysis/replicate.py` (m* inside the baseline CI widened by the tolerance; fit "
        "parameters inside their widened CI; equal verdicts; Holm-corrected KS tests of score distributions).",
        "",
    ]
    if caveats:
        lines += ["## Warnings", ""] + [f"- **Warning:** {c}" for c in caveats] + [""]
    if failed:
        lines += (
            ["## What moved", ""]
            + [f"- **{c.kind}** {c.what}: baseline {c.baseline}, new {c.new}" for c in failed]
            + [""]
        )
    lines += [
        "## Every comparison",
        "",
        "| kind | what | baseline | new | result |",
        "|---|---|---|---|---|",
    ]
    mark = {True: "ok", False: "**FAILED**", None: "shown"}
    lines += [
        f"| {c.kind} | {c.what} | {c.baseline} | {c.new} | {mark[c.ok]} |"
        for c in sorted(comparisons, key=lambda c: (c.ok is not False, c.kind))
    ]
    if figures is not None:
        pngs = sorted(p.name for p in (figures / "baseline").glob("*.png"))
        if pngs:
            lines += ["", "## Figures (baseline | new)", "", "| baseline | new |", "|---|---|"]
            rel = figures.relative_to(path.parent) if figures.is_relative_to(path.parent) else figures
            lines += [f"| ![baseline]({rel}/baseline/{n}) | ![new]({rel}/new/{n}) |" for n in pngs]
    return write_text(path, "\n".join(lines) + "\n")  # a link at the name is replaced, its target left alone
