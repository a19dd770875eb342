"""The analysis of a symmetry run: m* per student and teacher, verdicts S1-S4, figures.

Printed by :mod:`attnsweep.presentation.terminal`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from attnsweep.analysis.boolean import search_rows
from attnsweep.orchestrator.spec import AnalysisSettings
from attnsweep.results import ResultsStore, StoreError
from attnsweep.stats import symmetry_scale as scale
from attnsweep.stats.figures_symmetry import (
    plot_advantage,
    plot_equivariance_errors,
    plot_error_against_m,
    plot_test_error,
)
from attnsweep.stats.symmetry import (
    critical_sample_sizes_and_replicates,
    verdicts,
    with_budget_check,
    with_student,
)
from attnsweep.stats.verdict_common import Verdict, quantity
from attnsweep.tasks.teachers import teacher_symmetries
from attnsweep.workers import SymmetryTrialConfig


@dataclass
class SymmetryAnalysis:
    """Everything ``analyze`` computes for one symmetry run."""

    sweep: str
    run_id: str
    m_star: pl.DataFrame
    errors: pl.DataFrame
    verdicts: list[Verdict]
    figures: list[Path] = field(default_factory=list)
    scale: ScaleAnalysis | None = None


@dataclass
class ScaleAnalysis:
    """A run over more than one (n, k, d) group (stats/symmetry_scale.py): S1-S4 per group,
    S2's advantage per group and its slopes along d, n and k, the generic student's E
    against m per group. The slopes are measurements: the paper claims nothing about them."""

    groups: pl.DataFrame
    advantage: pl.DataFrame
    advantage_slopes: pl.DataFrame
    error_slopes: pl.DataFrame
    error_medians: pl.DataFrame
    center: dict[str, int]

    def measurements(self) -> list[dict]:
        """The slopes as records (``measurement``, ``statistic``, ``interval``, ``note`` as
        text; ``numbers``: the same as numbers, cells keyed by their sizes), for
        verdicts.json and the findings."""
        out = []
        for r in self.advantage_slopes.iter_rows(named=True):
            fixed = {k: int(v) for k, v in (part.split("=") for part in r["fixed"].split(", ") if "=" in part)}
            values = [int(v) for v in r["values"].split(", ") if v]
            local = json.loads(r["local_json"] or "[]")
            numbers = dict(
                kind="advantage_slope",
                student=r["student"],
                axis=r["axis"],
                fixed=fixed,
                values=values,
                slope=quantity(r["slope"], r["ci_lo"], r["ci_hi"], "exact" if values[1:] else "none"),
                censored_share=r["censored_share"],
                left_out=json.loads(r["left_out_json"] or "[]"),
                local_slopes=[dict(one, slope=quantity(one["slope"], one["ci_lo"], one["ci_hi"])) for one in local],
                lack_of_fit=r["lack_of_fit"],
                denominator_at_floor=r["floor"],
            )
            statistic, interval = _slope_text(r, f"advantage ~ {r['axis']}^slope"), _interval(r)
            if r["lack_of_fit"]:
                # One power law does not fit the line: its local slopes are the statistic, not one slope.
                statistic = "no single slope (the local slopes disagree): " + ", ".join(
                    f"{r['axis']} {one['from']} -> {one['to']}: {one['slope']:.2f}" for one in local
                )
                interval = ", ".join(
                    f"{r['axis']} {one['from']} -> {one['to']}: CI {_num(one['ci_lo'])} .. {_num(one['ci_hi'])}"
                    for one in local
                ) + (
                    " (intervals, each from the cells' m* intervals and the paired bootstrap, that do not overlap; "
                    f"one power law's slope {r['slope']:.2f}, CI {_num(r['ci_lo'])} .. {_num(r['ci_hi'])}, would "
                    "misstate the line)"
                )
            out.append(
                dict(
                    measurement=f"S2 advantage of the inner-product student over the {r['student']} "
                    f"against {r['axis']} ({r['fixed']})",
                    statistic=statistic,
                    interval=interval,
                    note=_slope_note(r),
                    numbers=numbers,
                )
            )
        for r in self.error_slopes.iter_rows(named=True):
            numbers = dict(
                kind="error_slope",
                cells=dict(d=r["d"], n=r["n"], k=r["k"]),
                slope=quantity(r["slope"], r["ci_lo"], r["ci_hi"]),
                m_min=r["m_min"],
                m_max=r["m_max"],
            )
            out.append(
                dict(
                    measurement=f"E of the generic transformer against m (d={r['d']}, n={r['n']}, k={r['k']})",
                    statistic=_slope_text(r, "E ~ m^slope"),
                    interval=_interval(r),
                    note=f"m {r['m_min']}..{r['m_max']}; equivariant teacher; median float64 E per trial",
                    numbers=numbers,
                )
            )
        return out


def analyze_symmetry_run(
    store: ResultsStore,
    sweep: str,
    run_id: str,
    settings: AnalysisSettings,
    figures_dir: Path | None = None,
) -> SymmetryAnalysis:
    """m* (success: relative test error <= ``settings.target_error``), median errors per
    (teacher, student, m), verdicts S1-S4 and figures.

    Raises:
        StoreError: the run has no trained trials.
    """
    cell = [f for f in SymmetryTrialConfig.model_fields if f not in ("m", "seed", "fault")]
    # Tuning rows stay out; sorted, so that figures and tables do not depend on the order
    # the store's files are read in (a run rebuilt by `report --from` gives the same files).
    trials = search_rows(store.scan_run_trials(sweep, run_id), cell).collect().sort("trial_id")
    if trials.filter(pl.col("status") == "done").is_empty():
        raise StoreError(f"run {run_id} has no trained trials to analyse")
    m_star, replicates = critical_sample_sizes_and_replicates(
        trials, settings.target_error, settings.n_boot, settings.ci
    )
    budget_rows = store.scan_run_trials(sweep, run_id).filter(pl.col("search_phase") == "budget").collect()
    m_star = with_budget_check(m_star, trials, budget_rows, settings.target_error, settings.success_frac)
    labelled = with_student(trials).filter(pl.col("status") == "done").collect()
    sizes = [c for c in ("d", "n", "k") if labelled[c].n_unique() > 1]  # a multi-size run's medians stay per size
    errors = (
        labelled.group_by("teacher", "student", *sizes, "m")
        .agg(
            pl.len().alias("trials"),
            pl.col("test_error").median(),
            pl.col("eq_error_median").median(),
            pl.col("perm_error_median").median(),
        )
        .sort("teacher", "student", *sizes, "m")
    )
    # Each teacher's symmetries decide its side in S2 (a package's teacher joins one, tasks/teachers.py).
    symmetries = {t: teacher_symmetries(t) for t in trials["teacher"].unique().sort().to_list()}
    judged = verdicts(trials, m_star, settings.n_boot, settings.ci, symmetries, budget_rows, settings.target_error)
    result = SymmetryAnalysis(sweep, run_id, m_star, errors, judged)
    if len(scale.groups(trials)) > 1:
        result.scale = _scale(trials, m_star, replicates, settings, symmetries, budget_rows)
        texts = {v["claim"].split(":", 1)[0]: v["claim"] for v in result.verdicts}
        result.verdicts = scale.overall_verdicts(result.scale.groups, texts)
    if figures_dir is not None:
        figures_dir = Path(figures_dir)
        result.figures.append(plot_test_error(labelled, figures_dir / "test_error_vs_m.png"))
        result.figures.append(
            plot_equivariance_errors(
                labelled,
                "eq_error_median",
                figures_dir / "orthogonal_error.png",
                "O(d) equivariance error E (float64)",
            )
        )
        result.figures.append(
            plot_equivariance_errors(
                labelled,
                "perm_error_median",
                figures_dir / "permutation_error.png",
                "permutation equivariance error",
            )
        )
        if result.scale is not None:
            result.figures.append(
                plot_advantage(
                    result.scale.advantage,
                    result.scale.center,
                    figures_dir / "advantage_vs_size.png",
                )
            )
            result.figures.append(
                plot_error_against_m(
                    result.scale.error_medians,
                    result.scale.center,
                    figures_dir / "error_vs_m_by_d.png",
                )
            )
    return result


def _scale(
    trials: pl.DataFrame,
    m_star: pl.DataFrame,
    replicates: dict,
    settings: AnalysisSettings,
    symmetries: dict,
    budget_rows: pl.DataFrame,
) -> ScaleAnalysis:
    slopes, medians = scale.error_against_m(trials, settings.n_boot, settings.ci)
    return ScaleAnalysis(
        groups=scale.group_verdicts(
            trials, m_star, settings.n_boot, settings.ci, symmetries, budget_rows, settings.target_error
        ),
        advantage=scale.advantage(m_star, replicates, settings.ci),
        advantage_slopes=scale.advantage_slopes(m_star, replicates, settings.ci),
        error_slopes=slopes,
        error_medians=medians,
        center=scale.center(trials),
    )


def claims_along_d(analyses: Sequence[SymmetryAnalysis]) -> dict[str, dict]:
    """What the (d, n, k) groups of S3 and S4 show along d, over every run that judges them
    (:func:`stats.symmetry_scale.by_d`; a run of one size is one group), beside the rule's
    verdict: per claim, ``by_d``'s dict; a claim left out where every group supports it, no
    group tests it, or the groups at the smallest d do not all support it.

    Args:
        analyses: the symmetry runs (each group counted per run: the ``run`` column).
    """
    frames = [t.with_columns(run=pl.lit(a.run_id)) for a in analyses if (t := _group_table(a)) is not None]
    if not frames:
        return {}
    table = pl.concat(frames, how="vertical_relaxed")
    out = {}
    for claim in scale.BY_D:
        along = scale.by_d(table.filter(pl.col("claim") == claim), claim)
        if along is not None:
            out[claim] = along
    return out


def _group_table(a: SymmetryAnalysis) -> pl.DataFrame | None:
    """A run's verdicts per (d, n, k) group (``d``, ``n``, ``k``, ``claim``, ``verdict``,
    ``flags``): a multi-size run's group table, a one-size run's verdicts as its one group;
    None where the run's cells span several sizes without a group table."""
    columns = ["d", "n", "k", "claim", "verdict", "flags"]
    if a.scale is not None:
        groups = a.scale.groups
        if "flags" not in groups.columns:
            groups = groups.with_columns(flags=pl.lit(""))
        return groups.select(columns)
    sizes = a.m_star.select("d", "n", "k").unique() if not a.m_star.is_empty() else a.m_star
    if sizes.height != 1:
        return None
    d, n, k = sizes.row(0)
    rows = [
        dict(
            d=d,
            n=n,
            k=k,
            claim=v["id"],
            verdict=v["verdict"],
            flags="; ".join(dict.fromkeys(f["flag"] for f in v["flags"])),
        )
        for v in a.verdicts
    ]
    schema = dict(d=pl.Int64, n=pl.Int64, k=pl.Int64, claim=pl.String, verdict=pl.String, flags=pl.String)
    return pl.DataFrame(rows, schema=schema)


def _slope_text(r: dict, law: str) -> str:
    return "no slope" if math.isnan(r["slope"]) else f"slope {r['slope']:.2f} ({law})"


def _interval(r: dict) -> str:
    if math.isnan(r["ci_lo"]):
        return "-"
    return f"CI {_num(r['ci_lo'])} .. {_num(r['ci_hi'])}"


def _num(v: float) -> str:
    return ("-inf" if v < 0 else "inf") if math.isinf(v) else f"{v:.2f}"


def _slope_note(r: dict) -> str:
    values = [v for v in r["values"].split(", ") if v]
    parts = [
        f"{r['axis']} = {r['values']}" + (" (two points: no check of the law)" if len(values) == 2 else "")
        if values
        else "no value with a number"
    ]
    local = json.loads(r.get("local_json") or "[]")
    if local and not r.get("lack_of_fit"):
        parts.append(
            "local slopes agree within their intervals (each the hull of the extremes the cells' m* intervals "
            "allow and the paired bootstrap's): "
            + ", ".join(
                f"{one['from']} -> {one['to']}: {one['slope']:.2f} ({_num(one['ci_lo'])} .. {_num(one['ci_hi'])})"
                for one in local
            )
        )
    if r.get("floor"):
        parts.append(
            "the denominator is the inner-product student's m* at its floor of 1 in every group of the line "
            "(it succeeded at m = 1, the smallest m there is): the advantage is the generic student's m* "
            "over that floor; the inner-product student's need, at most 1 sample, is not resolved further"
        )
    if r["left_out"]:
        parts.append(f"left out (a bound or none, not a number): {r['left_out']}")
    if r["censored_share"] and not math.isnan(r["censored_share"]):
        parts.append(f"{r['censored_share']:.0%} of replicates had an m* beyond the grid (slope +-inf there)")
    return "; ".join(parts)
