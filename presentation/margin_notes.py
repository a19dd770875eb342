"""The findings' section on the capacity bound's own terms: per series whose rows carry margins,
the median normalised margin of successes and failures per T, how it moves with T, and which
reading the rows support (stats/margin_reading.py). Markdown lines for findings.md
(presentation/findings_boolean.py ``render``) and one sentence for its headline."""

from __future__ import annotations

import polars as pl

from attnsweep.presentation.markdown import md_text
from attnsweep.presentation.series import l1_series, series_cells, series_kind
from attnsweep.stats.margin_reading import bound_reading, reading_sentence
from attnsweep.stats.restarts import BY_MARGIN, LEARNER, ONE_INIT


def readings(claims: list[dict], union: pl.DataFrame, ci: float = 0.95) -> list[dict]:
    """:func:`stats.margin_reading.bound_reading` over the union m* table, its series named by
    the same settings as L1's ([] without an L1 series or without margins). The section and
    the headline of one page ask for the same objects: the last answer is kept for them."""
    last = _LAST.get("key")
    if last is not None and last[0] is claims and last[1] is union and last[2] == ci:
        return _LAST["value"]
    _LAST["key"], _LAST["value"] = (claims, union, ci), _readings(claims, union, ci)
    return _LAST["value"]


_LAST: dict = {}
"""The last (claims, union, ci) :func:`readings` answered, held (so identity is a safe key), and its answer."""


def _readings(claims: list[dict], union: pl.DataFrame, ci: float) -> list[dict]:
    l1, series = l1_series(claims)
    if not series or "margin_success" not in union.columns:
        return []
    cell = ["T", *[c for c in series[0]["cells"] if c in union.columns and c != "T"]]
    return bound_reading(union, cell, ci, l1)


def margin_lines(claims: list[dict], union: pl.DataFrame, ci: float = 0.95) -> list[str]:
    """The section: per series with margins, its margins per T and its reading; [] when no
    run's rows carry margins (rows trained before margins existed)."""
    entries = readings(claims, union, ci)
    if not entries:
        return []
    lines = [
        "### The bound's terms: margins",
        "",
        "The theorem's capacity bound is a margin bound: it asks for about (C / gamma)^2 log T samples, gamma the "
        "training margin and C its complexity term in the norms it counts (||w||, ||W_V||, ||W_Q W_K^T|| and the "
        "inputs' norm; workers/margins.py). Each trial records its normalised margin gamma / C; per cell, the median "
        "over the trials that succeeded and over those that did not. If margins shrink with T at a fixed bound, m* "
        "may grow faster than log T and still agree with the theorem; m* x margin^2 takes that term out and is judged "
        'as L1 judges m* (docs/claims.md, "The bound\'s reading").',
        "",
    ]
    for e in entries:
        if not _tabled(e):
            continue
        cells = series_cells(union, e["cells"]).sort("T")
        lines += [
            f"**{md_text(series_kind(union, e['cells'])['label'])}**",
            "",
            "| T | m* | margin of successes | margin of failures |",
            "|---:|---:|---:|---:|",
            *[
                f"| {r['T']} | {_m_star(r)} | {_num(r.get('margin_success'))} | {_num(r.get('margin_failure'))} |"
                for r in cells.iter_rows(named=True)
            ],
            "",
        ]
    for e in entries:
        lines.append(f"- **{md_text(series_kind(union, e['cells'])['label'])}**: {md_text(reading_sentence(e))}")
    return [*lines, ""]


def margin_headline(claims: list[dict], union: pl.DataFrame) -> str:
    """Sentences on the theorem's class: which reading its rows support, for each series of one
    head per training set (first fit) and for a restart run's best of R by margin (or, without
    it, its one init); "" where no series of the class carries margins."""
    theory = [e for e in readings(claims, union) if series_kind(union, e["cells"])["theory"]]
    plain = [e for e in theory if e["cells"].get(LEARNER) is None]
    by_margin = [e for e in theory if str(e["cells"].get(LEARNER)).endswith(BY_MARGIN)]
    one = [e for e in theory if e["cells"].get(LEARNER) == ONE_INIT]
    texts = []
    for e in [*plain, *(by_margin or one)]:
        cells = series_cells(union, e["cells"])
        bounds = cells["norm_bound"].unique().to_list() if "norm_bound" in cells.columns else []
        at = f"B = {bounds[0]:g}" if len(bounds) == 1 and isinstance(bounds[0], (int, float)) else "its bound"
        stops = cells["stop"].drop_nulls().unique().to_list() if "stop" in cells.columns else []
        targets = cells["margin_target"].drop_nulls().unique().to_list() if "margin_target" in cells.columns else []
        rule = {
            "fit": "stopped at the first fit",
            "margin": "trained to a normalised margin" + (f" of {targets[0]:g}" if len(targets) == 1 else ""),
            "budget": "trained for a fixed budget of epochs",
        }.get(stops[0] if len(stops) == 1 else "", "")
        who = ", ".join(t for t in (e["cells"].get(LEARNER) or "one head per training set", rule) if t)
        texts.append(f"Margins, the bound's own term, at {at} ({who}): {reading_sentence(e)}")
    return " ".join(texts)


def _tabled(e: dict) -> bool:
    """Whether a series gets its margins table: every series but a restart run's oracle and
    best-by-loss learners (their cells' margins are those of the same rows; their readings
    follow the tables)."""
    learner = e["cells"].get(LEARNER)
    return learner is None or learner == ONE_INIT or str(learner).endswith(BY_MARGIN)


def _num(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def _m_star(r: dict) -> str:
    from attnsweep.stats.critical import format_m_star

    return format_m_star(r.get("m_star"), r.get("bound"))
