"""The analysis of a symmetry run: m* per student and teacher, verdicts S1-S4, figures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.analyze import search_rows
from orchestrator.spec import AnalysisSettings
from workers import SymmetryTrialConfig
from results import ResultsStore, StoreError
from results.critical import format_m_star
from results.figures import plot_equivariance_errors, plot_test_error
from results.symmetry import critical_sizes, verdicts, with_student


@dataclass
class SymmetryAnalysis:
    """Everything ``analyze`` computes for one symmetry run."""

    sweep: str
    run_id: str
    m_star: pl.DataFrame
    errors: pl.DataFrame
    verdicts: list[dict]
    figures: list[Path] = field(default_factory=list)


def analyze_symmetry_run(store: ResultsStore, sweep: str, run_id: str, settings: AnalysisSettings,
                         figures_dir: Path | None = None) -> SymmetryAnalysis:
    """m* (success: relative test error <= ``settings.target_error``), median errors per
    (teacher, student, m), verdicts S1-S4 and figures.

    Raises:
        StoreError: the run has no trained trials.
    """
    cell = [f for f in SymmetryTrialConfig.model_fields if f not in ("m", "seed", "fault")]
    trials = search_rows(store.scan_run_trials(sweep, run_id), cell).collect()  # tuning rows stay out
    if trials.filter(pl.col("status") == "done").is_empty():
        raise StoreError(f"run {run_id} has no trained trials to analyse")
    m_star = critical_sizes(trials, settings.target_error, settings.n_boot, settings.ci)
    labelled = with_student(trials).filter(pl.col("status") == "done").collect()
    errors = (
        labelled.group_by("teacher", "student", "m")
        .agg(pl.len().alias("trials"), pl.col("test_error").median(), pl.col("eq_error_median").median(),
             pl.col("perm_error_median").median())
        .sort("teacher", "student", "m")
    )
    result = SymmetryAnalysis(sweep, run_id, m_star, errors, verdicts(trials, m_star, settings.n_boot, settings.ci))
    if figures_dir is not None:
        figures_dir = Path(figures_dir)
        result.figures.append(plot_test_error(labelled, figures_dir / "test_error_vs_m.png"))
        result.figures.append(plot_equivariance_errors(
            labelled, "eq_error_median", figures_dir / "orthogonal_error.png", "O(d) equivariance error E (float64)"))
        result.figures.append(plot_equivariance_errors(
            labelled, "perm_error_median", figures_dir / "permutation_error.png", "permutation equivariance error"))
    return result


def print_symmetry(result: SymmetryAnalysis, console: Console, target_error: float) -> None:
    """The m* table, the error table and the verdicts."""
    # Sizes that do not vary go into the title, so the table fits a terminal.
    shapes = [c for c in ("n", "k", "d") if result.m_star[c].n_unique() > 1]
    fixed = ", ".join(f"{c}={result.m_star[c][0]}" for c in ("n", "k", "d") if c not in shapes)
    t = Table(title=escape(f"m* (relative test error <= {target_error:g}; {fixed}) — sweep {result.sweep}, "
                           f"run {result.run_id}"))
    for c in ("teacher", "student", *shapes, "m*", "CI", "grid m*", "seeds", "m range"):
        t.add_column(c, min_width=13 if c == "student" else None,
                     justify="left" if c in ("teacher", "student") else "right")
    for r in result.m_star.iter_rows(named=True):
        above, below = r["censored"] == "above", r["censored"] == "below"
        t.add_row(r["teacher"], r["student"], *(str(r[c]) for c in shapes),
                  format_m_star(r["m_star"], r["censored"], r["m_min"], r["m_max"]),
                  "-" if above or below or math.isnan(r["ci_lo"]) else f"{r['ci_lo']:.1f} .. {r['ci_hi']:.1f}",
                  "-" if above else f"{r['m_star_grid']:.0f}", str(r["n_seeds"]), f"{r['m_min']}..{r['m_max']}")
    console.print(t)
    e = Table(title="median over seeds: relative test error, O(d) equivariance error E (float64), permutation error")
    for c in ("teacher", "student", "m", "test error", "E", "perm E"):
        e.add_column(c, justify="left" if c in ("teacher", "student") else "right")
    for r in result.errors.iter_rows(named=True):
        e.add_row(r["teacher"], r["student"], str(r["m"]), *(_sci(r[c]) for c in ("test_error", "eq_error_median", "perm_error_median")))
    console.print(e)
    for v in result.verdicts:
        numbers = "" if v["statistic"] == "-" else f"{escape(v['statistic'])}; {escape(v['interval'])} "
        console.print(f"[bold]{escape(v['claim'])}[/]: {v['verdict']} — {numbers}({escape(v['why'])})")
    for p in result.figures:
        console.print(f"figure: {p}")


def _sci(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2e}"
