"""The sparse-Boolean findings' notes below the series table, as Markdown lines: the norms the
trained heads used and m* across the bound, which trials the series share (pooling), the
epochs a success took, the cells whose success rate levels off, and the training sets
redrawn near m*."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from attnsweep.analysis.boolean import CELL_FIELDS, TUNED_RUN, search_rows
from attnsweep.orchestrator.trials_table import with_later_fields
from attnsweep.presentation.markdown import md_text
from attnsweep.presentation.series import (
    by_rows,
    l1_series,
    rows_label,
    series_cells,
    series_kind,
)
from attnsweep.stats.boolean_cells import attention_cells
from attnsweep.stats.boolean_growth import SMALL_T_FROM
from attnsweep.stats.critical import format_m_star, format_reading
from attnsweep.stats.epochs import epoch_growth, epochs_by_cell
from attnsweep.stats.norm_use import TOLERANCE, norm_growth
from attnsweep.stats.pooling import shared_trials
from attnsweep.stats.verdict_common import number


def norm_use_lines(claims: list[dict], union: pl.DataFrame, ci: float = 0.95) -> list[str]:
    """One line per L1 series on the norms its trained heads used (stats/norm_use.py;
    Edelman et al., ICML 2022, Theorem 4.2 bounds capacity by these norms at a fixed bound):
    where a bound is set, the share of trained trials with a bounded matrix at it per cell;
    and the least ||W_Q,h^T W_K,h|| of a successful trial against ln T, least-squares fitted
    (:func:`stats.norm_use.norm_growth`). Markdown lines, [] when no series has the norms."""
    _, series = l1_series(claims)
    if not series or "min_norm_qk" not in union.columns:
        return []
    items = []
    for s in series:
        cells = series_cells(union, s["cells"]).sort("T")
        parts = []
        if "at_bound" in cells.columns and cells["at_bound"].drop_nulls().len():
            shares = cells.filter(pl.col("at_bound").is_not_null())
            lo, hi = number(shares["at_bound"].min()), number(shares["at_bound"].max())
            parts.append(
                f"a bounded matrix at the bound in {lo:.0%}..{hi:.0%} of a cell's trained trials "
                f"(T = {number(shares['T'].min()):g}: {shares['at_bound'][0]:.0%}, "
                f"T = {number(shares['T'].max()):g}: {shares['at_bound'][-1]:.0%})"
            )
        norms = cells.filter(pl.col("min_norm_qk").is_not_null())
        if norms.height:
            parts.append(_least_norm_text(cells, norms, ci))
        if parts:
            items.append(f"{series_kind(union, s['cells'])['label']}: " + "; ".join(parts) + ".")
    for pair in across_bounds(series):
        items.append(_across_bound_text(pair))
    if not items:
        return []
    return [
        "Norms the trained heads used, per series (the theorem bounds capacity by them at a fixed bound; "
        "docs/claims.md, section 1), and how m* moves with the bound:",
        "",
        *[f"- {md_text(i)}" for i in items],
        "",
    ]


def _least_norm_text(cells: pl.DataFrame, norms: pl.DataFrame, ci: float) -> str:
    """The least ||W_Q W_K^T|| of a success along T, in a clause. Where it sits at the bound
    it is the bound, not what a head needs: only the cells below the bound are fitted, and from
    the first T where it binds on the clause says so and draws nothing from it."""
    text = (
        f"the least ||W_Q W_K^T|| of a success {norms['min_norm_qk'][0]:.2f} at T = {norms['T'][0]:g} "
        f"and {norms['min_norm_qk'][-1]:.2f} at T = {norms['T'][-1]:g}"
    )
    bound = cells["norm_bound"].drop_nulls() if "norm_bound" in cells.columns else None
    top = number(bound.max()) if bound is not None and bound.len() else None
    at = (norms["min_norm_qk"] >= (1 - TOLERANCE) * top) if top is not None else None
    if top is None or at is None or not at.any():
        g = norm_growth(norms["T"].to_numpy(), norms["min_norm_qk"].to_numpy(), ci)
        if not math.isnan(g["b"]):
            text += (
                f", {g['b']:+.3g} per unit of ln T ({ci:.0%} CI {g['b_lo']:.3g} .. {g['b_hi']:.3g}, {g['n_points']} T)"
            )
        return text
    first = number(norms.filter(at)["T"].min())
    binding = norms.filter(pl.col("T") >= first)
    share = (binding["min_norm_qk"] >= (1 - TOLERANCE) * top).sum()
    text += (
        f"; from T = {first:g} on it is the bound {top:g} itself in {share} of {binding.height} cells: "
        "there a success uses all the norm it is allowed, so the least norm measures the bound, and says "
        "nothing of the norm a head needs (no conclusion about need is drawn from it)"
    )
    below = norms.filter(pl.col("T") < first)
    if below.height >= 3:
        g = norm_growth(below["T"].to_numpy(), below["min_norm_qk"].to_numpy(), ci)
        if not math.isnan(g["b"]):
            text += (
                f"; below it (T < {first:g}) {g['b']:+.3g} per unit of ln T ({ci:.0%} CI {g['b_lo']:.3g} .. "
                f"{g['b_hi']:.3g}, {g['n_points']} T)"
            )
    return text


def across_bounds(series: list[dict]) -> list[dict]:
    """The m*-across-the-bound comparisons the L1 series carry (:func:`stats.boolean_growth.across_bound`)."""
    return [s["numbers"]["across_bound"] for s in series if s.get("numbers", {}).get("across_bound")]


def _across_bound_text(pair: dict) -> str:
    """m* of two series that differ only in the norm bound, as a sentence (:func:`stats.boolean_growth.across_bound`)."""
    lo_b, hi_b = pair["bounds"]
    if not pair["n_T"]:
        return f"m*(B={hi_b:g}) / m*(B={lo_b:g}): no T where both m* are values"
    q = pair["geomean"]
    ci = "" if q.get("ci_lo") is None else f" (95% CI {q['ci_lo']:.2f} .. {q['ci_hi']:.2f})"
    per = ", ".join(f"{r:.2f} at T = {t:g}" for t, r in zip(pair["T"], pair["ratios"], strict=True))
    text = (
        f"m* across the bound: m*(B={hi_b:g}) / m*(B={lo_b:g}) has a geometric mean of {q['estimate']:.2f}{ci} "
        f"over {pair['n_T']} T where both are values ({per})"
    )
    if pair["left_out"]:
        text += f"; left out (a bound on either side): T = {', '.join(f'{t:g}' for t in pair['left_out'])}"
    return text


def series_sources(union: pl.DataFrame, key: dict, rows: pl.DataFrame) -> list[dict]:
    """Where each cell of one L1 series comes from, sorted by T: ``T``, ``run_id``, ``lr``,
    ``tuning`` (the cell's tuning state, "not tuned" for a grid sweep), ``rows`` (the trial
    rows its m* was computed from: :func:`analysis.boolean.search_rows` of its run, the
    tuned phase where the adopted settings are used) and ``phases`` (those rows per search
    phase)."""
    cells = series_cells(union, key).sort("T")
    rows = with_later_fields(rows)  # rows stored before a setting existed read as the value they had
    cols = [c for c in CELL_FIELDS if c in cells.columns and c in rows.columns]
    out = []
    for r in cells.iter_rows(named=True):
        mine = rows.filter(pl.col("run_id") == r["run_id"]) if "run_id" in r and r["run_id"] else rows
        cell = pl.DataFrame([{c: r[c] for c in cols}], schema={c: mine.schema[c] for c in cols})
        mine = mine.join(cell, on=cols, how="semi", nulls_equal=True)
        phase = "tuned" if r.get("settings") == "tuned" else "search"
        used = search_rows(mine, cols, phase).collect()
        phases = dict(used.group_by("search_phase").len().sort("search_phase").iter_rows()) if used.height else {}
        out.append(
            dict(
                T=r["T"],
                run_id=r.get("run_id"),
                lr=r.get("lr"),
                tuning=r.get("tuning") or "not tuned",
                rows=used,
                phases={str(k): int(v) for k, v in phases.items()},
            )
        )
    return out


def pooling_lines(
    claims: list[dict],
    union: pl.DataFrame,
    rows: pl.DataFrame,
    records: list[dict],
    threshold: float,
) -> list[str]:
    """What each L1 series pools: its runs and their code versions (with the T each gives),
    its learning rates and the search phases of its rows; and the trial ids two code versions
    both ran, with how many changed (stats/pooling.py). Markdown lines."""
    _, series = l1_series(claims)
    if not series:
        return []
    version = {rec["run_id"]: rec.get("code_version") or "?" for rec in records}
    items = []
    for s, suffix in by_rows(series):
        src = series_sources(union, s["cells"], rows)
        if not src:
            continue
        by_run: dict[str, list] = {}
        for c in src:
            by_run.setdefault(c["run_id"], []).append(c["T"])
        runs = "; ".join(f"run {r} (code {version.get(r, '?')}): T = {_ts(ts)}" for r, ts in by_run.items())
        lrs = sorted({c["lr"] for c in src if c["lr"] is not None})
        lr = (
            f"lr {lrs[0]:g} in every cell"
            if len(lrs) == 1
            else "lr per cell " + ", ".join(f"{c['lr']:.2g} at T = {c['T']:g} ({c['tuning']})" for c in src)
        )
        for c in src:  # a grid sweep's rows have no search phase
            c["phases"] = {("grid" if p in (None, "None") else p): n for p, n in c["phases"].items()}
        kinds = {tuple(sorted(c["phases"])) for c in src}
        if len(kinds) == 1:
            phases = "rows of the " + " and ".join(f"{p} phase" for p in next(iter(kinds))) + " in every cell"
        else:
            phases = "rows per cell: " + ", ".join(
                f"T = {c['T']:g}: " + " + ".join(f"{n} {p}" for p, n in c["phases"].items()) for c in src
            )
        if any("tune" in c["phases"] for c in src) or any(c["tuning"] == "tuned" for c in src):
            phases += (
                "; a cell that adopted tuned settings takes the tuning trials of the adopted set (at the probe "
                "m) in every such cell, whether or not the search came back to that m"
            )
        items.append(f"{rows_label(union, s, suffix)}: {runs}; {lr}; {phases}.")
    lines = [
        "What each series pools (runs, code versions, learning rates, search phases):",
        "",
        *[f"- {md_text(i)}" for i in items],
        "",
    ]
    shared = shared_trials(rows, threshold)
    if shared.is_empty():
        lines += [
            "No trial id was trained by two code versions: no cell mixes two versions of one trial.",
            "",
        ]
        return lines
    parts = [
        f"runs {r['run_a']} (code {r['version_a']}) and {r['run_b']} (code {r['version_b']}) share {r['shared']} "
        f"trained trial ids: {r['changed']} of them have a different test accuracy and {r['flipped']} a "
        f"different outcome at the {threshold:g} threshold"
        for r in shared.iter_rows(named=True)
    ]
    lines += [
        md_text(
            "Trial ids run by two code versions (the same settings and seed): " + "; ".join(parts) + ". "
            'By the pooling rule (docs/decisions.md, "Pooling across code versions") these are split, '
            "never pooled: each cell takes its rows from one run, so two versions' rows of one trial never "
            "enter one m*; they are counted here, not averaged."
        ),
        "",
    ]
    return lines


def epoch_lines(
    claims: list[dict], union: pl.DataFrame, rows: pl.DataFrame, threshold: float, ci: float = 0.95
) -> list[str]:
    """Epochs against T per L1 series (stats/epochs.py): per cell, the median (quartiles) of
    the epochs a success took and the share of trained trials that ran out of epochs, and the
    median's growth against T with its interval. Markdown lines."""
    _, series = l1_series(claims)
    items = []
    for s, suffix in by_rows(series):
        src = series_sources(union, s["cells"], rows)
        cells = [(c["T"], epochs_by_cell(c["rows"], threshold)) for c in src]
        cells = [(t, e) for t, e in cells if e["n_trained"]]
        if not cells:
            continue
        g = epoch_growth(
            np.array([t for t, _ in cells], float),
            [np.array(e["success_epochs"]) for _, e in cells],
            ci=ci,
        )
        per = ", ".join(
            f"T = {t:g}: {e['epochs_median']:.0f} ({e['epochs_q1']:.0f}..{e['epochs_q3']:.0f}), "
            f"{e['ran_out']:.0%} ran out"
            if e["n_success"]
            else f"T = {t:g}: no success, {e['ran_out']:.0%} ran out"
            for t, e in cells
        )
        grow = (
            ""
            if math.isnan(g["slope"])
            else f"; the median grows like T^{g['slope']:.2f} ({ci:.0%} CI {g['ci_lo']:.2f} .. {g['ci_hi']:.2f}, "
            f"{g['n_points']} T)"
        )
        items.append(f"{rows_label(union, s, suffix)}: {per}{grow}.")
    if not items:
        return []
    return [
        "Epochs against T, per series (the epochs a success trained for: median (quartiles); the share of a "
        "cell's trained trials, at every m tried, that stopped at the epoch budget without converging; "
        "stats/epochs.py). Where the median grows with T under a fixed budget and a share runs out, the "
        "optimiser's budget is part of what m* measures:",
        "",
        *[f"- {md_text(i)}" for i in items],
        "",
    ]


def _ts(values: list) -> str:
    return ", ".join(f"{v:g}" for v in values)


def cell_name(r: dict, cols: tuple[str, ...]) -> str:
    """A cell as ``model=transformer T=32 ...`` (Markdown-escaped); a tuned run's cell says so,
    since an untuned one of the same settings may sit beside it."""
    return md_text(
        " ".join([f"{c}={r[c]}" for c in cols if c in r] + ([f"{TUNED_RUN}=True"] if r.get(TUNED_RUN) else []))
    )


def plateau_lines(union: pl.DataFrame) -> list[str]:
    """The cells whose success rate levels off below 1 (flag ``plateau``, stats/critical.py) with
    m* under each estimator and how far the logistic crossing sits from the interpolated one;
    [] where no cell is flagged."""
    if union.is_empty() or "plateau" not in union.columns:
        return []
    cells = union.filter(pl.col("plateau").fill_null(False))
    if cells.is_empty():
        return []
    lines = [
        "Cells whose success rate levels off below 1 (flag `plateau`: at the largest m tried, at least twice "
        "the grid m*, significantly fewer than 95% of the seeds succeed). The logistic model's ceiling is 1, so "
        "on these cells its crossing can lie away from "
        r"the m where half the seeds succeed; the grid and interpolated m\* do not assume a ceiling "
        '(docs/method.md, "Three estimators"):',
        "",
        r"| cell | m\* logistic | m\* grid | m\* interpolated | logistic / interpolated | m\* |",
        "|---|---|---|---|---|---|",
    ]
    for r in cells.sort(
        [c for c in ("model", "positions", "norm_bound", "T") if c in cells.columns], nulls_last=True
    ).iter_rows(named=True):
        exact = r["bound"] == "exact" and r.get("m_star_logistic") and r.get("m_star_interp")
        ratio = f"{r['m_star_logistic'] / r['m_star_interp']:.2f}" if exact else "-"
        lines.append(
            f"| {cell_name(r, ('model', 'positions', 'norm_bound', 'learner', 'T', 's'))} | "
            + " | ".join(format_reading(r, c) for c in ("m_star_logistic", "m_star_grid", "m_star_interp"))
            + f" | {ratio} | {md_text(format_m_star(r['m_star'], r['bound']))} |"
        )
    # A bound is not a value (docs/claims.md 2): only exact cells enter the range.
    ratios = [
        r["m_star_logistic"] / r["m_star_interp"]
        for r in cells.iter_rows(named=True)
        if r["bound"] == "exact" and r.get("m_star_logistic") and r.get("m_star_interp")
    ]
    if ratios:
        lines += [
            "",
            rf"On those of these cells whose m\* is a value, the logistic m\* is {min(ratios):.2f} to "
            f"{max(ratios):.2f} times the interpolated one.",
        ]
    return [*lines, ""]


def redrawn_lines(union: pl.DataFrame) -> list[str]:
    """One sentence: the share of training sets redrawn near m* (``redrawn``,
    analysis/redraws.py) over the transformer cells at small T and at larger T; [] without it."""
    if union.is_empty() or "redrawn" not in union.columns or "T" not in union.columns:
        return []
    cells = attention_cells(union).filter(pl.col("redrawn").is_not_null())
    if cells.is_empty():
        return []
    small_T = max(SMALL_T_FROM) // 2
    parts = []
    for name, part in (
        (f"T <= {small_T}", cells.filter(pl.col("T") <= small_T)),
        (f"T >= {max(SMALL_T_FROM)}", cells.filter(pl.col("T") >= max(SMALL_T_FROM))),
    ):
        if not part.is_empty():
            lo, hi = number(part["redrawn"].min()), number(part["redrawn"].max())
            parts.append(f"{lo:.0%} to {hi:.0%} at {name} ({part.height} cells)")
    return [
        'Training sets redrawn because they did not determine the target (docs/method.md, "The data"), as a '
        "share of the trained trials at the two m around each transformer cell's crossing (m_star.csv's "
        "`redrawn`): " + "; ".join(parts) + ". Cells with many redrawn sets measure m* on sets conditioned to be "
        "unambiguous, which is why each series also states its direction over T >= 16 and T >= 64 alone.",
        "",
    ]
