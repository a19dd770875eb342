"""The symmetry findings as Markdown (Ma & Ying, arXiv 2210.06741): per run, the verdicts S1-S4
with their statistics and intervals, per (d, n, k) group, with the budget, flags and seeds
notes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from attnsweep.analysis.boolean import interval_text
from attnsweep.analysis.claims import untested_line
from attnsweep.analysis.symmetry import SymmetryAnalysis
from attnsweep.presentation.folder import RUNS, TRIALS
from attnsweep.presentation.markdown import md_code, md_target, md_text, run_line
from attnsweep.stats.critical import format_m_star


def _symmetry_cells(m_star: pl.DataFrame) -> list[str]:
    """A single-group symmetry run's m* per (teacher, student) as Markdown lines (a multi-size
    run shows its groups instead); [] without cells. Its claims may be "not tested" (a rerun of
    one cell has no pair to compare), but its m* is a measurement all the same."""
    if m_star.is_empty():
        return []
    lines = [
        "m* per cell (relative test error at or below the target in half the seeds):",
        "",
        "| teacher | student | d | n | k | m* | 95% CI | seeds | budget | flags |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in m_star.iter_rows(named=True):
        lines.append(
            "| "
            + " | ".join(
                md_text(x)
                for x in (
                    r["teacher"],
                    r["student"],
                    r["d"],
                    r["n"],
                    r["k"],
                    format_m_star(r["m_star"], r["bound"]),
                    interval_text(r),
                    r["n_seeds"],
                    r.get("budget") or "-",
                    r.get("flags") or "-",
                )
            )
            + " |"
        )
    return [*lines, ""]


def render_symmetry(
    records: list[dict],
    claims: list[dict],
    symmetry: Sequence[SymmetryAnalysis],
    base: str,
    caveats: Sequence[str] = (),
    out_dir: Path | None = None,
    full: bool = False,
    untested: str = "",
) -> str:
    """The symmetry findings as Markdown: per symmetry run, its S1-S4 verdicts (across
    groups for a multi-size run), S1-S4 per (d, n, k) group with the S2 advantage and S3's
    E slope, the slopes measured across scale and the two figures; ``base`` as for
    :func:`render`, ``out_dir`` the findings folder (for the figures' paths); ``full`` adds
    every group's verdicts with their statistics and intervals (findings.md has them, the
    README links to them); a claim a run does not test has no row, ``untested`` (analysis/claims.py
    ``untested_line``) names them under the first table."""

    def link(name: str) -> str:
        return md_target(f"{base}/{name}" if base else name)

    folder = Path(out_dir) if out_dir is not None else None
    by_id = {rec["run_id"]: rec for rec in records}
    lines = ["## What attnsweep found: the symmetry claims", ""]
    for a in symmetry:
        lines.append(run_line(by_id[a.run_id]))
    lines += [
        line
        for c in caveats
        for line in (
            "",
            f"**Warning:** {md_text(c)}. The verdicts below are computed from the trials read.",
        )
    ]
    lines += [
        "",
        "Made from the results store by `attnsweep report RUN_ID --publish --out FOLDER "
        "[--readme README.md]`; `attnsweep report --from FOLDER [--readme README.md]` makes it again from the "
        "folder's committed trial rows. Regenerate it, do not edit it.",
        "",
    ]
    for a in symmetry:
        if len(symmetry) > 1:
            lines += [f"### Run {md_code(a.run_id)} (sweep {md_code(a.sweep)})", ""]
        tested = [v for v in a.verdicts if v["verdict"] != "not tested"]
        if tested:
            lines += ["| claim | verdict | statistic | interval | why |", "|---|---|---|---|---|"]
        for v in tested:
            lines.append(
                "| " + " | ".join(md_text(v[k]) for k in ("claim", "verdict", "statistic", "interval", "why")) + " |"
            )
        # What this run does not test, and why, in one line (another run may test it).
        here = untested_line([dict(id=v["id"], needs=v["why"]) for v in a.verdicts if v not in tested])
        if here:
            lines += [
                *([""] if tested else []),
                md_text(here.replace("Not tested here:", "Not tested by this run:", 1)),
            ]
        if untested:
            lines += ["", md_text(untested)]
            untested = ""
        if a.scale is None:
            lines += ["", *_symmetry_cells(a.m_star)]
            continue
        sc = a.scale
        figures = {p.stem: p for p in a.figures}
        if folder is not None and "advantage_vs_size" in figures:
            rel = Path(os.path.relpath(figures["advantage_vs_size"], folder)).as_posix()
            lines += [
                "",
                f"![S2's advantage against d, n and k]({link(rel)})",
                "",
                "S2's advantage: m* of the generic transformer (and of the transformer trained on rotated "
                "samples) over m* of the inner-product student, on the equivariant teacher, against each size "
                "the run varies, the others held at the centre "
                f"({', '.join(f'{k}={v}' for k, v in sc.center.items())}); bars: 95% "
                "intervals (paired bootstrap replicates); triangles up: lower bounds (the generic m* beyond the "
                "largest m tried), down: upper bounds (a generic m* that ran out of epochs); no mark: no number.",
            ]
        where = "below" if full else f"in [findings]({link('findings.md')})"
        lines += [
            "",
            f"Per (d, n, k) group (each verdict's statistic and interval are {where}, in the "
            f"[report]({link('report.html')}) and in [verdicts]({link('verdicts.json')})):",
            "",
            "| d | n | k | S1 | S2 | S3 | S4 | advantage, transformer | advantage, + rotations | E slope (S3) |",
            "|---:|---:|---:|---|---|---|---|---:|---:|---:|",
        ]
        adv = {(r["n"], r["k"], r["d"], r["student"]): r["text"] for r in sc.advantage.iter_rows(named=True)}
        slopes = {(r["n"], r["k"], r["d"]): r for r in sc.error_slopes.iter_rows(named=True)}
        for (n, k, d), part in sc.groups.group_by(["n", "k", "d"], maintain_order=True):
            verdict = dict(zip(part["claim"], part["verdict"], strict=True))
            e = slopes.get((n, k, d))
            e_text = (
                "-"
                if e is None or e["slope"] != e["slope"]
                else f"{e['slope']:.2f} ({e['ci_lo']:.2f} .. {e['ci_hi']:.2f})"
            )
            lines.append(
                f"| {md_text(d)} | {md_text(n)} | {md_text(k)} | "
                + " | ".join(md_text(verdict.get(c, "-")) for c in ("S1", "S2", "S3", "S4"))
                + f" | {md_text(adv.get((n, k, d, 'transformer'), '-'))}"
                + f" | {md_text(adv.get((n, k, d, 'transformer + rotations'), '-'))} | {e_text} |"
            )
        lines += _floor_note(sc.advantage)
        lines += [
            "",
            "Measured across scale (the paper makes no claim about these; log-log slopes with 95% intervals: "
            "for the advantage's slopes the hull of the extremes its cells' m* intervals allow and the paired "
            "bootstrap's, for E's slopes the seed bootstrap; where a line's local slopes between neighbouring "
            "values disagree beyond their intervals, the local slopes are the statistic, not one slope):",
            "",
            "| measurement | statistic | interval | note |",
            "|---|---|---|---|",
        ]
        for m in sc.measurements():
            lines.append(
                "| " + " | ".join(md_text(m[c]) for c in ("measurement", "statistic", "interval", "note")) + " |"
            )
        if folder is not None and "error_vs_m_by_d" in figures:
            rel = Path(os.path.relpath(figures["error_vs_m_by_d"], folder)).as_posix()
            lines += ["", f"![E against m per d]({link(rel)})"]
        if full:
            lines += [
                "",
                "Every group's verdicts:",
                "",
                "| d | n | k | claim | verdict | statistic | interval |",
                "|---:|---:|---:|---|---|---|---|",
            ]
            for r in sc.groups.iter_rows(named=True):
                lines.append(
                    "| "
                    + " | ".join(md_text(r[c]) for c in ("d", "n", "k", "claim", "verdict", "statistic", "interval"))
                    + " |"
                )
        lines.append("")
    lines += [
        _symmetry_budget(symmetry) + " Where trials ran out of epochs without fitting their training set to "
        "the target, and so decide which side of one half an m falls on, and no check at twice the epochs "
        "cleared the cell, it is flagged `out-of-epochs` and its m* is a bound (docs/claims.md 2)"
        + _symmetry_flags(symmetry)
        + "."
        + _seeds_note(symmetry),
        "",
        f"Files: [report]({link('report.html')}), [verdicts]({link('verdicts.json')}), "
        f"[m* table]({link('m_star_symmetry.csv')}), [every trial row]({link(TRIALS)}), "
        f"[run records]({link(RUNS)}).",
        "",
    ]
    return "\n".join(lines)


def _symmetry_budget(symmetry: Sequence[SymmetryAnalysis]) -> str:
    """What the budget check of the symmetry cells (each cell's deciding m at twice the
    epochs) found, in a sentence; per run (named by its sweep) when there are several."""
    rows = [r for a in symmetry for r in a.m_star.iter_rows(named=True)]
    if not any(r.get("budget") in ("ok", "budget-limited") for r in rows):
        return (
            "The training budget was not checked at twice the epochs (a run made before the check, or with "
            "`search.budget_check: false`): a student's m* here is the m* at the spec's `max_epochs`."
        )
    lead = "Budget check (each cell's deciding m again at twice the epochs): "
    if len(symmetry) == 1:
        return lead + _budget_counts(rows) + "."
    parts = [
        f"run `{a.run_id}` ({md_text(a.sweep)}): {_budget_counts(list(a.m_star.iter_rows(named=True)))}"
        for a in symmetry
    ]
    return lead + "; ".join(parts) + "."


def _budget_counts(rows: list[dict]) -> str:
    """How many of ``rows`` (m* table rows) kept their outcome at twice the epochs, which did
    not (by name) and how many were not checked."""
    checked = [r for r in rows if r.get("budget") in ("ok", "budget-limited")]
    if not checked:
        return f"not checked ({len(rows)} cells)"
    limited = [
        md_text(f"{r['teacher']} teacher: {r['student']} at d={r['d']}, n={r['n']}, k={r['k']}")
        for r in checked
        if r["budget"] == "budget-limited"
    ]
    text = f"{len(checked) - len(limited)} of {len(rows)} cells kept their outcome"
    if limited:
        text += f", **budget-limited** (an outcome changed with more training, so m* measured the budget): {', '.join(limited)}"
    unchecked = len(rows) - len(checked)
    return text + (f", {unchecked} not checked" if unchecked else "")


def _symmetry_flags(symmetry: Sequence[SymmetryAnalysis]) -> str:
    """Which symmetry cells carry the out-of-epochs flag, as a clause ("" if none)."""
    run = (lambda a: f"{a.sweep}, ") if len(symmetry) > 1 else (lambda a: "")
    cells = [
        md_text(f"{run(a)}{r['teacher']} teacher: {r['student']} at d={r['d']}, n={r['n']}, k={r['k']}")
        for a in symmetry
        for r in a.m_star.iter_rows(named=True)
        if "out-of-epochs" in (r.get("flags") or "")
    ]
    return (
        (
            f": {len(cells)} cells ({', '.join(cells[:8])}"
            + (f" and {len(cells) - 8} more" if len(cells) > 8 else "")
            + ")"
        )
        if cells
        else ""
    )


def _seeds_note(symmetry: Sequence[SymmetryAnalysis]) -> str:
    """What the seeds of the symmetry cells make of their 95% intervals, as a sentence ("" when enough)."""
    few = [
        r["n_seeds"] for a in symmetry for r in a.m_star.iter_rows(named=True) if "few-seeds" in (r.get("flags") or "")
    ]
    if not few:
        return ""
    return (
        f" {len(few)} cells have fewer than 8 seeds ({min(few)}..{max(few)}; flag `few-seeds`): in simulation "
        "the 95% interval of such a cell covers the true m* in about 89-92% of cells in an adaptive search "
        "(docs/claims.md 2), so read "
        "their intervals, and the advantages and slopes made from them, as about 90% intervals."
    )


def _floor_note(advantage: pl.DataFrame) -> list[str]:
    """A sentence naming the advantage's denominator where it is the floor m* = 1 (the
    inner-product student succeeded at the smallest m there is); [] where none is."""
    if advantage.is_empty() or "baseline_floor" not in advantage.columns:
        return []
    groups = advantage.unique(subset=["n", "k", "d"])
    floor = groups.filter(pl.col("baseline_floor"))
    if floor.is_empty():
        return []
    only = floor.filter(pl.col("baseline_m_max") == 1).height
    tried = f"; in {only} of them m = 1 is the only m the search tried for it" if only else ""
    return [
        "",
        md_text(
            f"The advantage's denominator: in {floor.height} of {groups.height} groups the inner-product "
            f"student's m* is 1, the floor (it succeeded at m = 1){tried}. There the advantage is the "
            "generic student's m* over that floor: it measures how many samples the generic student needs, "
            "not a ratio of two measured needs."
        ),
    ]
