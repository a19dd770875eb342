"""The README's short verdict table: one row per paper, its sub-claims' verdicts, a bottom line
in plain words made from the verdicts' numbers, and a link to the full findings page.

A row is one line of Markdown, so a report on one experiment replaces that experiment's row
and keeps the other's (presentation/readme_sections.py). Every number in a row comes from the
verdicts (stats/boolean_verdicts.py for L1-L4 and R, stats/symmetry.py for S1-S4); the full
statistics, intervals and reasons are on the findings page it links.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import polars as pl

from attnsweep.analysis.experiments import BOOLEAN_SECTION, SECTIONS, SYMMETRY_SECTION
from attnsweep.analysis.symmetry import SymmetryAnalysis, claims_along_d
from attnsweep.presentation.markdown import md_target, md_text
from attnsweep.presentation.series import l1_series, series_kind
from attnsweep.stats.boolean_growth import MIN_DECADES, SMALL_T_FROM
from attnsweep.stats.verdict_common import combined

HEADER = ["| claim | verdicts | bottom line |", "|---|---|---|"]
BOOLEAN, SYMMETRY = BOOLEAN_SECTION, SYMMETRY_SECTION
EXPERIMENTS = SECTIONS
"""The experiments' rows (analysis/experiments.py ``section``), in the table's order."""
ROW_START = {
    BOOLEAN: "| Sparse Boolean functions: m\\* grows like log T (Edelman et al., ICML 2022) |",
    SYMMETRY: "| Equivariance with knowledge forces an attention-like form (Ma & Ying, 2022) |",
}
"""The first cell of each experiment's row: how a README's row is recognised."""
BOOLEAN_WORDS = {
    "L2": "m\\* grows with the norm bound",
    "L3": "m\\* grows with the sparsity s",
    "L4": "the MLP needs far more samples than the transformer, more so as T grows",
    "R": "our m\\* matches the paper's within 0.8-1.25x",
}
SYMMETRY_WORDS = {
    "S1": "the inner-product student is exactly O(d)-equivariant and the generic one is not",
    "S2": "the inner-product student needs fewer samples on the equivariant teacher only",
    "S3": "the generic transformer's O(d) equivariance error falls as m grows",
    "S4": "its permutation equivariance error falls as m grows",
}


def runs_comment(experiment: str, run_ids: list[str]) -> str:
    """The hidden line after the table that names the runs a row was made from (``report``
    refuses to drop a run the README shows); run ids keep only ``[A-Za-z0-9._-]``."""
    safe = ["".join(ch for ch in r if ch.isascii() and (ch.isalnum() or ch in "._-")) for r in run_ids]
    return f"<!-- runs ({experiment}): {' '.join(safe)} -->"


def boolean_row(claims: list[dict], union: pl.DataFrame, link: str, caveats: Sequence[str] = ()) -> str:
    """The sparse-Boolean row: L1 judged apart for the paper's protocol and the theorem's class
    (one-init series, as the verdicts read them), L2-L4 and R as verdicts.json has them.

    Args:
        claims: the report's verdict dicts (``id``, ``verdict``, ``series`` with ``numbers``).
        union: the report's m* table of the sparse-Boolean runs (names each series' kind).
        link: the findings page, relative to the README.
        caveats: warnings the findings carry (a run unfinished); the row says there are some.
    """
    by_id = {v["id"]: v for v in claims}
    _, series = l1_series(claims)
    one = [s for s in series if s["cells"].get("learner") in (None, "one init")]
    groups = {
        "paper's protocol": [s for s in one if not series_kind(union, s["cells"])["theory"]],
        "theorem's class": [s for s in one if series_kind(union, s["cells"])["theory"]],
    }
    l1 = ", ".join(
        f"{combined([s['verdict'] for s in group])} ({name})" for name, group in groups.items() if group
    ) or by_id.get("L1", {}).get("verdict")
    # A claim the runs do not test has no verdict here (the findings page's line says what it needs).
    verdicts = [f"L1 {l1}"] * (l1 is not None) + [f"{c} {by_id[c]['verdict']}" for c in BOOLEAN_WORDS if c in by_id]
    bottom = " ".join(t for t in (_growth_text(groups), _words(by_id, BOOLEAN_WORDS)) if t)
    return _row(BOOLEAN, "; ".join(verdicts), bottom, link, caveats)


def _growth_text(groups: dict[str, list[dict]]) -> str:
    """What was measured of m* against log T, per model class, over the one-init series: counts
    of the directions every estimator of m* agrees on (stats/boolean_wording.py ``agreed``),
    each series named with its T, the exponent c's range over the estimators, the direction over
    the larger T alone, the span against the pre-set rule (stats/boolean_growth.py
    ``MIN_DECADES``) and what faster growth at finite T says of an upper bound."""
    series = [s for group in groups.values() for s in group]
    if not series:
        return ""
    parts = []
    for name, group in groups.items():
        if not group:
            continue
        by = {d: [s for s in group if s["numbers"].get("direction") == d] for d in ("faster than log", "log")}
        undecided = [s for s in group if s not in by["faster than log"] and s not in by["log"]]
        n = len(group)
        counts = []
        if by["faster than log"]:
            cs = [
                e["c"]
                for s in by["faster than log"]
                for e in (s["numbers"].get("estimators") or {}).values()
                if e.get("c") is not None and math.isfinite(e["c"])
            ]
            c_range = f"; c of a T^c {min(cs):.2f} to {max(cs):.2f} over the estimators" if cs else ""
            counts.append(
                f"faster than log T in {len(by['faster than log'])} of {n} ({_names(by['faster than log'])}{c_range})"
            )
        if by["log"]:
            counts.append(f"like log T in {len(by['log'])} of {n} ({_names(by['log'])})")
        if undecided:
            counts.append(f"undecided in {len(undecided)} of {n} ({_names(undecided)})")
        widest = max(s["numbers"].get("decades", 0.0) for s in group)
        span = (
            f"its longest series spans {widest:.1f} decades of T, as the pre-set rule needs"
            if widest >= MIN_DECADES
            else f"its longest series spans {widest:.1f} decades of T, short of the {MIN_DECADES:g} the pre-set "
            "rule needs"
        )
        parts.append(f"{name[0].upper()}{name[1:]}: m\\* grows " + "; ".join(counts) + f"; {span}.")
    larger = str(max(SMALL_T_FROM))
    from_larger = [s["numbers"].get("direction_from_T", {}).get(larger, "undecided") for s in series]
    held = sum(d in ("faster than log", "log") for d in from_larger)
    parts.append(
        f"Over T >= {larger} alone a direction holds in {held} of {len(series)} series."
        if held
        else f"Over T >= {larger} alone the direction is undecided in every series: the readings above rest on "
        f"the T below {larger}."
    )
    lead = (
        f"Measured for AdamW-trained heads over {len(series)} series of one initialisation per training set (the "
        "restart runs' other learners are in the findings). A series counts as faster than log or log-like only "
        "where all three m\\* estimators (logistic, grid, interpolated) give that direction; else it is undecided."
    )
    bound = (
        "The theorem's O(log T) is an upper bound with constants it does not state: faster growth at finite T "
        "neither confirms nor refutes it."
    )
    return " ".join([lead, *parts, bound])


def _names(series: list[dict]) -> str:
    """Series as the bottom line names them: norm bound, tuning or restart run, and T range."""
    out = []
    for s in series:
        cells, T = s["cells"], s["numbers"].get("T") or []
        bits = []
        if cells.get("norm_bound") is not None:
            bits.append(f"B = {cells['norm_bound']:g}")
        if any(cells.get(k) for k in ("tuned_search", "tuned")):
            bits.append("tuned")
        if cells.get("learner"):
            bits.append("restart run")
        if not bits:
            bits.append("untuned")
        if T:
            bits.append(f"T = {min(T):g}..{max(T):g}")
        out.append(", ".join(bits) or "series")
    return "; ".join(out)


def symmetry_row(symmetry: list[SymmetryAnalysis], link: str, caveats: Sequence[str] = ()) -> str:
    """The symmetry row: each of S1-S4 over the runs that test it (a claim is supported when
    every such run supports it, stats/verdict_common.py ``combined``), and its bottom line.

    Args:
        symmetry: the report's symmetry analyses, one per run.
        link: the findings page, relative to the README.
        caveats: warnings the findings carry; the row says there are some.
    """
    per_claim: dict[str, list[str]] = {}
    for a in symmetry:
        for v in a.verdicts:
            if v.get("verdict") != "not tested":
                per_claim.setdefault(v.get("id"), []).append(v["verdict"])
    verdicts, overall = [], {}
    for c in SYMMETRY_WORDS:
        found = per_claim.get(c, [])
        overall[c] = {"verdict": combined(found) if found else "not tested"}
        runs = f" ({len(found)} runs)" if len(found) > 1 else ""
        verdicts.append(f"{c} {overall[c]['verdict']}{runs}")
    # Beside a verdict the rule leaves open, what the groups show along d (S3, S4: analysis/symmetry.py).
    along = claims_along_d(symmetry)
    words = {c: w + (f" ({md_text(along[c]['short'])})" if c in along else "") for c, w in SYMMETRY_WORDS.items()}
    return _row(SYMMETRY, "; ".join(verdicts), _words(overall, words), link, caveats)


def _words(by_id: Mapping[str, dict], words: dict[str, str]) -> str:
    """The claims in ``words`` grouped by verdict, in plain words."""
    said = {
        verdict: [words[c] for c in words if by_id.get(c, {}).get("verdict") == verdict]
        for verdict in ("supported", "not supported", "inconclusive")
    }
    out = []
    if said["supported"]:
        out.append("The rows support that " + "; that ".join(said["supported"]) + ".")
    if said["not supported"]:
        out.append("They contradict that " + "; that ".join(said["not supported"]) + ".")
    if said["inconclusive"]:
        out.append("They leave open whether " + "; whether ".join(said["inconclusive"]) + ".")
    return " ".join(out)


def _row(experiment: str, verdicts: str, bottom: str, link: str, caveats: Sequence[str]) -> str:
    warning = " Some runs carry warnings (see the findings)." if caveats else ""
    return f"{ROW_START[experiment]} {md_text(verdicts)} | {bottom}{warning} [Findings]({md_target(link)}) |"
