"""The analysis of a run, printed as rich tables (``attnsweep analyze``, and after a run).

The numbers come from :mod:`attnsweep.analysis.boolean` (a sparse-Boolean run) and
:mod:`attnsweep.analysis.symmetry` (a symmetry run); this module only shows them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attnsweep.analysis.boolean import Analysis, interval_text, law_text
from attnsweep.analysis.experiments import BOOLEAN_SECTION, SYMMETRY_SECTION
from attnsweep.analysis.symmetry import ScaleAnalysis, SymmetryAnalysis
from attnsweep.presentation.console_text import markup
from attnsweep.stats.critical import format_m_star, format_reading
from attnsweep.stats.fits import MIN_LAW_POINTS


def _show(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else markup(value)


def print_own_claims(verdicts: Sequence[Mapping], console: Console) -> None:
    """The spec's own claims' verdicts (analysis/claims.py ``judge_own``), as a rich table."""
    t = Table(title="your claims (the spec's claims:), judged by the rules of the paper's claims")
    for c in ("claim", "verdict", "statistic", "interval", "why"):
        t.add_column(c, overflow="fold")
    for v in verdicts:
        t.add_row(*(markup(str(v[c])) for c in ("claim", "verdict", "statistic", "interval", "why")))
    console.print(t)


def print_analysis(result: Analysis, console: Console) -> None:
    """The m* table, the growth fits and the checks, as rich tables."""
    tuned = [c for c in result.tuned if c in result.m_star.columns]
    shown = [c for c in result.varying if c != "T" and c not in tuned]
    checked = "budget" in result.m_star.columns and (result.m_star["budget"] != "not checked").any()
    t = Table(title=f"critical sample size m* — sweep {result.sweep}, run {result.run_id}")
    flagged = "flags" in result.m_star.columns and (result.m_star["flags"].fill_null("") != "").any()
    bounded = "at_bound" in result.m_star.columns and result.m_star["at_bound"].is_not_null().any()
    margins = "margin_success" in result.m_star.columns and result.m_star["margin_success"].is_not_null().any()
    for c in [
        *shown,
        "T",
        "m*",
        "95% CI",
        "grid m*",
        "interp. m*",
        "seeds",
        "m range",
        *(["m* at 2x epochs"] if checked else []),
        *(["at bound"] if bounded else []),
        *(["margin s / f"] if margins else []),
        *(["flags"] if flagged else []),
    ]:
        t.add_column(
            c,
            justify="right" if c not in (*shown, "flags") else "left",
            no_wrap=c in ("95% CI", "m range"),
        )
    for r in result.m_star.iter_rows(named=True):
        m = format_m_star(r["m_star"], r["bound"])
        grid, interp = format_reading(r, "m_star_grid", 0), format_reading(r, "m_star_interp", 1)
        twin = []
        if checked:
            twin = [
                "-"
                if r["budget"] == "not checked"
                else format_m_star(r["m_star_2x"], r["bound_2x"]) + f" ({r['budget']})"
            ]
        use = ["-" if r["at_bound"] is None else f"{r['at_bound']:.0%}"] if bounded else []
        # The median normalised margin of the cell's successes and failures (stats/norm_use.py).
        margin = [" / ".join("-" if r.get(c) is None else f"{r[c]:.3g}" for c in ("margin_success", "margin_failure"))]
        t.add_row(
            *[_show(r[c]) for c in shown],
            str(r["T"]),
            m,
            interval_text(r),
            grid,
            interp,
            str(r["n_seeds"]),
            f"{r['m_min']}..{r['m_max']}",
            *twin,
            *use,
            *(margin if margins else []),
            *([r["flags"] or ""] if flagged else []),
        )
    console.print(t)
    for label, g in result.norm_growth.items():
        if g["n_points"] >= 3 and not math.isnan(g["b"]):
            # "Grows" only where the interval says so (above 0); otherwise the slope is named plainly.
            moves = "grows by" if g["b_lo"] > 0 else "falls by" if g["b_hi"] < 0 else "changes (not shown to grow) by"
            console.print(
                f"{label or 'transformer'}: the least ||W_Q W_K^T|| of a successful trial {moves} "
                f"{g['b']:.3g} per unit of ln T (95% CI {g['b_lo']:.3g} .. {g['b_hi']:.3g}, "
                f"{g['n_points']} T)",
                markup=False,
                highlight=False,
            )
    if tuned:
        u = Table(title="tuned against the spec's settings: m* of each, and the settings the verdicts use")
        choice = {}
        if not result.tuning.is_empty():
            keys = [c for c in result.tuning.columns if c in result.m_star.columns and c not in tuned]
            choice = {tuple(r[k] for k in keys): r for r in result.tuning.iter_rows(named=True)}
        binds = "range_binds" in result.m_star.columns and (result.m_star["range_binds"].fill_null("") != "").any()
        for c in [
            *shown,
            "T",
            "m* spec",
            "m* tuned",
            "tuning",
            "probe m",
            "beats spec",
            "wins",
            *tuned,
            *(["search range binds"] if binds else []),
        ]:
            u.add_column(c, justify="left" if c in (*shown, "tuning", "search range binds") else "right")
        for r in result.m_star.iter_rows(named=True):
            ch = choice.get(tuple(r[k] for k in keys)) if choice else None
            ch_cols = (
                [str(ch["probe_m"]), f"{ch['beats_default']:.0%}", f"{ch['win_frac']:.0%}"] if ch else ["-", "-", "-"]
            )
            u.add_row(
                *[_show(r[c]) for c in shown],
                str(r["T"]),
                format_m_star(r["m_star_default"], r["bound_default"]),
                format_m_star(r["m_star_tuned"], r["bound_tuned"]),
                r["tuning"],
                *ch_cols,
                *[f"{r[c]:.2g}" for c in tuned],
                *([r["range_binds"] or ""] if binds else []),
            )
        console.print(u)
    for label, fit in result.fits.items():
        # The law the cells name is the report's (analysis/boolean.py, Analysis.laws), not the lowest AIC;
        # below MIN_LAW_POINTS cells the laws are not ranked at all, since no law may be named there.
        ranked = result.laws.get(label, {}).get("n_points", 0) >= MIN_LAW_POINTS
        f = Table(
            title=escape(f"m* against T [{label}]: growth laws" + (" ranked by AIC" if ranked else "")),
            caption=escape(law_text(result.laws[label], why=False)) if label in result.laws else None,
        )
        columns = ("law", "a", "b or c", "b/c 95% CI", "R²", *(("AIC", "ΔAIC", "BIC") if ranked else ()))
        for c in columns:
            f.add_column(c, justify="right")
        rows = fit if ranked else fit.sort(pl.col("model").replace_strict(LAW_ORDER, return_dtype=pl.Int64))
        for r in rows.iter_rows(named=True):
            formula = {
                "log": "a + b ln T",
                "polylog": "a (ln T)^k",
                "linear": "a + b T",
                "power": "a T^c",
            }[r["model"]]
            f.add_row(
                formula,
                f"{r['a']:.3g}",
                f"{r['b']:.3g}",
                f"{r['b_lo']:.3g} .. {r['b_hi']:.3g}",
                f"{r['r2']:.3f}",
                *((f"{r['aic']:.1f}", f"{r['delta_aic']:.1f}", f"{r['bic']:.1f}") if ranked else ()),
            )
        console.print(f)
    for label in result.m_star["series"].unique(maintain_order=True):
        if label not in result.fits:
            console.print(
                f"[yellow]{escape(label)}: m* is known (not censored) at fewer than 3 values of T: no growth-law fit[/]"
            )
    for check in result.checks:
        console.print(f"[bold]{escape(check['check'])}[/]: {check['verdict']} — {escape(check['detail'])}")
    for p in result.figures:
        console.print(f"figure: {markup(p)}")


def print_symmetry(result: SymmetryAnalysis, console: Console, target_error: float) -> None:
    """The m* table, the error table and the verdicts."""
    # Sizes that do not vary go into the title, so the table fits a terminal.
    shapes = [c for c in ("n", "k", "d") if result.m_star[c].n_unique() > 1]
    fixed = "".join(f"; {c}={result.m_star[c][0]}" for c in ("n", "k", "d") if c not in shapes)
    t = Table(
        title=escape(f"m* (relative test error <= {target_error:g}{fixed}) — sweep {result.sweep}, run {result.run_id}")
    )
    flagged = (result.m_star["flags"].fill_null("") != "").any()
    checked = "budget" in result.m_star.columns and (result.m_star["budget"] != "not checked").any()
    for c in (
        "teacher",
        "student",
        *shapes,
        "m*",
        "CI",
        "grid m*",
        "seeds",
        "m range",
        *(["2x epochs"] if checked else []),
        *(["flags"] if flagged else []),
    ):
        t.add_column(
            c,
            min_width=13 if c == "student" else None,
            justify="left" if c in ("teacher", "student", "flags") else "right",
        )
    for r in result.m_star.iter_rows(named=True):
        grid = r["m_star_grid"]
        t.add_row(
            markup(r["teacher"]),
            markup(r["student"]),
            *(str(r[c]) for c in shapes),
            format_m_star(r["m_star"], r["bound"]),
            interval_text(r),
            "-" if grid is None or math.isnan(grid) else f"{grid:.0f}",
            str(r["n_seeds"]),
            f"{r['m_min']}..{r['m_max']}",
            *([r["budget"]] if checked else []),
            *([r["flags"] or ""] if flagged else []),
        )
    console.print(t)
    e = Table(title="median over seeds: relative test error, O(d) equivariance error E (float64), permutation error")
    sizes = [c for c in ("d", "n", "k") if c in result.errors.columns]
    for c in ("teacher", "student", *sizes, "m", "test error", "E", "perm E"):
        e.add_column(c, justify="left" if c in ("teacher", "student") else "right")
    for r in result.errors.iter_rows(named=True):
        e.add_row(
            markup(r["teacher"]),
            markup(r["student"]),
            *(str(r[c]) for c in sizes),
            str(r["m"]),
            *(_sci(r[c]) for c in ("test_error", "eq_error_median", "perm_error_median")),
        )
    console.print(e)
    if result.scale is not None:
        print_scale(result.scale, console)
    for v in result.verdicts:
        numbers = "" if v["statistic"] == "-" else f"{escape(v['statistic'])}; {escape(v['interval'])} "
        console.print(f"[bold]{escape(v['claim'])}[/]: {v['verdict']} — {numbers}({escape(v['why'])})")
    for p in result.figures:
        console.print(f"figure: {markup(p)}")


def print_scale(sc: ScaleAnalysis, console: Console) -> None:
    """S1-S4 per (d, n, k) group, S2's advantage per group and the measured slopes."""
    g = Table(title="S1-S4 per (d, n, k) group")
    for c in ("d", "n", "k", "claim", "verdict", "statistic", "interval"):
        g.add_column(c, justify="right" if c in ("d", "n", "k") else "left")
    for r in sc.groups.iter_rows(named=True):
        g.add_row(*(escape(str(r[c])) for c in ("d", "n", "k", "claim", "verdict", "statistic", "interval")))
    console.print(g)
    a = Table(
        title="S2's advantage: m* of the generic student / m* of the inner-product student (equivariant "
        "teacher; 95% CI)"
    )
    for c in ("d", "n", "k", "student", "m*", "m* inner-product", "advantage"):
        a.add_column(c, justify="left" if c == "student" else "right")
    for r in sc.advantage.iter_rows(named=True):
        a.add_row(
            str(r["d"]),
            str(r["n"]),
            str(r["k"]),
            markup(r["student"]),
            r["m_star_text"],
            r["baseline_text"],
            escape(r["text"]),
        )
    console.print(a)
    m = Table(
        title="measured across scale (no claim of the paper; log-log slopes, 95% intervals: an advantage's from "
        "its cells' m* intervals with the paired bootstrap, the others' from the seed bootstrap)"
    )
    for c in ("measurement", "statistic", "interval", "note"):
        m.add_column(c)
    for r in sc.measurements():
        m.add_row(*(escape(r[c]) for c in ("measurement", "statistic", "interval", "note")))
    console.print(m)


LAW_ORDER = {"log": 0, "polylog": 1, "linear": 2, "power": 3}
"""The order of the growth laws in an unranked fits table (fewer cells than a law needs)."""


def _sci(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2e}"


SHOW = {
    BOOLEAN_SECTION: lambda result, console, context: print_analysis(result, console),
    SYMMETRY_SECTION: lambda result, console, context: print_symmetry(result, console, context.settings.target_error),
}
"""How ``attnsweep analyze`` prints a run's analysis, by its experiment's section
(analysis/experiments.py ``section``): ``(result, console, context) -> None``."""
