"""The verdict report: one self-contained HTML page with the runs' own claims (their specs'
``claims:``, docs/claims.md 5) first, then the claims of docs/claims.md 1a (L1-L4, R) and 1b
(S1-S4) that the runs test (one line names the others and what they need), computed from the
results store when the report is built.

``build_report(store, run_ids, out_dir)`` judges the runs (analysis/claims.py:
``analyze_run`` for sparse-Boolean runs, ``analyze_symmetry_run`` for symmetry runs, figures
into ``out_dir/figures``; L1-L4 and R on the union of the sparse-Boolean runs' m* tables,
S1-S4 on each symmetry run), renders the page (:func:`render`) and writes it (:func:`write`, and with ``publish``
:func:`publish`):

* ``out_dir/report.html``: verdicts, figures (embedded as base64 PNG), m* tables, the R plot,
  and each run's spec, package versions, code version and hosts; no external CSS, script or
  image, so it reads the same when mailed;
* ``out_dir/verdicts.json``: the verdicts (the runs' own claims first, ``origin`` ``spec``; then
  the paper's claims the runs test), ``not_tested`` (the paper's others: ``id``, ``claim``,
  ``needs``) and run ids, for scripts;
* ``out_dir/figures/``: the PNG files the page embeds;
* ``out_dir/m_star.csv``: the m* table of the sparse-Boolean runs (one row per cell; ``m_star``
  empty where it is a bound, whose value is in ``m_star_bound``: analysis/exports.py, export_m_star);
* ``out_dir/m_star_symmetry.csv``: the m* table of the symmetry runs (one row per cell and run);
* in ``verdicts.json``, ``groups``, ``advantage`` and ``measurements``: a multi-size symmetry
  run's S1-S4 per (d, n, k) group, S2's advantage per group and the slopes across scale;
* with ``publish``: the findings of presentation/publish.py (trials.parquet, the
  m*-against-T figure, findings.md), and with ``readme`` the same findings in a README.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

import jinja2
import polars as pl

from attnsweep.analysis.boolean import interval_text, union_cell
from attnsweep.analysis.claims import Judgement, ReportRun, judge, runs_of, untested_line
from attnsweep.analysis.experiments import analysis_of
from attnsweep.analysis.exports import export_m_star
from attnsweep.analysis.symmetry import ScaleAnalysis, SymmetryAnalysis
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.publish import publish as publish_folder
from attnsweep.presentation.published import published_rows, published_within
from attnsweep.presentation.readme_sections import readme_run_ids, update_readmes
from attnsweep.presentation.verdict_table import EXPERIMENTS
from attnsweep.results import ResultsStore
from attnsweep.results.outputs import (
    building,
    check_output_folder,
    recover_folder,
    replacing,
    write_text,
)
from attnsweep.stats import symmetry as sym
from attnsweep.stats.boolean_cells import REFERENCE_CSV, read_reference, reference_cells
from attnsweep.stats.boolean_verdicts import EQUIVALENCE
from attnsweep.stats.critical import format_m_star, format_reading
from attnsweep.stats.figures import plot_reference
from attnsweep.stats.verdict_common import jsonable, quantity

TEMPLATES = Path(__file__).parent / "templates"
SYMMETRY_CSV = "m_star_symmetry.csv"
CAPTIONS = {
    "m_star_vs_T": "m* against T (log axis), one series per setting (nothing pooled), with 95% intervals and the "
    "four growth laws fitted to exact m*, each in its own line style (log dashed; their AIC differences shown "
    "from 5 exact cells, where a law may be named); triangles up: above a bound (beyond the largest m tried), "
    "down: at or below one",
    "success_rate_grid": "Success rate over seeds on the (T, m) grid; white: no trained trial there (every trial "
    "failed before training, e.g. no unambiguous training set of that size, or none was run)",
    "success_rate_curves": "Success rate over seeds against m, one line per T within each series (nothing pooled); "
    "dashed: the rate that defines m*",
    "test_error_vs_m": "Relative test error against m per student (mean and 95% interval over seeds); one panel per "
    "teacher, or in a run over several sizes one panel per (d, n, k) group with the teacher as "
    "the line style: no line pools groups",
    "orthogonal_error": "O(d) equivariance error E (float64) per student and teacher; each box pools every m and "
    "every (d, n, k) group the run tried; a slot marked n/a has no box and says why",
    "permutation_error": "Permutation equivariance error per student and teacher; each box pools every m and every "
    "(d, n, k) group the run tried; a slot marked n/a has no box and says why",
    "advantage_vs_size": "S2's advantage (m* of a generic student / m* of the inner-product student, equivariant "
    "teacher) against d, n and k, the other two sizes held at the centre; bars: 95% intervals; "
    "triangles up: lower bounds (the generic m* beyond the largest m tried), down: upper bounds",
    "learning_curves": "Learning curves (the run kept them: execution.curves): training accuracy (sparse Boolean) or "
    "relative training error (symmetry) against the epoch, for at most 4 of the run's cells and 6 values of m; "
    "each line one trial (seed), coloured by m, ending where the trial stopped; points every k-th epoch and the last",
    "error_vs_m_by_d": "O(d) equivariance error E of the generic transformer (equivariant teacher) against m, one line "
    "per d; median over seeds, bars: quartiles",
}


def build_report(
    store: ResultsStore,
    run_ids: list[str],
    out_dir: Path,
    reference: Path | str = REFERENCE_CSV,
    publish: bool = False,
    readme: Path | None = None,
    source: str = "the results store",
) -> Path:
    """Analyse the runs, judge the claims and write the report: :func:`judge`, then
    :func:`render`, then :func:`write` (and, publishing, :func:`publish`).

    Args:
        store: the results store.
        run_ids: the runs to report on (duplicates are dropped; where a sparse-Boolean cell
            is in several runs, the first run given is used).
        out_dir: the report folder (created).
        reference: the paper's read-off for claim R (columns T, critical_m, err_lo, err_hi).
        publish: also write the findings (presentation/publish.py): trials.parquet, the
            m*-against-T figure with the paper's points, findings.md.
        readme: also put the findings into this README between its markers (implies publish).
        source: where the trial rows came from, as the page says it ("the results store", or
            the published folder a ``report --from`` rebuilt them from).

    Returns:
        The path of ``report.html``.

    Raises:
        AttnsweepError: no run ids given.
        StoreError: a run id is not in the store, or a run has no trained trials.
    """
    runs = runs_of(store, run_ids)
    run_ids = [r.run_id for r in runs]
    out_dir = Path(out_dir)
    recover_folder(out_dir)  # a publish a kill interrupted: the folder is made the old or the new one first
    _outside_store(store, out_dir)
    _own_folders(out_dir, run_ids)
    _drops_nothing(store, out_dir, publish, readme, runs)
    if not (publish or readme is not None):
        _write(store, runs, out_dir, reference, False, source)
        return out_dir / "report.html"
    # A published folder is one unit (its SHA256SUMS vouch for the files beside it): it is built
    # aside and swapped in whole (results/outputs.py), at the folder a link there points to.
    final = Path(os.path.realpath(out_dir))
    here = Path.cwd().resolve()
    if final in (here, *here.parents):
        raise AttnsweepError(
            f"--out: {out_dir} is the current folder or holds it; published findings replace "
            "their folder whole, so give a folder of their own (e.g. docs/findings)"
        )
    with building(final) as stage:
        made = _write(store, runs, stage, reference, True, source)
    if readme is not None:
        boolean_runs = [r for r in runs if analysis_of(r.experiment).pooled]
        symmetry_runs = [r for r in runs if not analysis_of(r.experiment).pooled]
        # The analyses name their figures in the folder they were made in; they are in out_dir now.
        symmetry = [
            dataclasses.replace(a, figures=[out_dir / Path(p).relative_to(stage) for p in a.figures])
            for a in map(_judged, symmetry_runs)
        ]
        update_readmes(
            readme,
            [(r.sweep, r.run_id) for r in runs],
            out_dir,
            made.union if boolean_runs else None,
            made.claims,
            made.caveats,
            symmetry,
        )
    return out_dir / "report.html"


@dataclass
class Rendered:
    """What :func:`render` made: the page and the record behind ``verdicts.json``."""

    page: str
    record: dict


def render(
    judgement: Judgement,
    figures: Path,
    reference: Path | str = REFERENCE_CSV,
    source: str = "the results store",
) -> Rendered:
    """The report page (Jinja) and the verdicts' JSON record of a :func:`judge`; the R plot
    of the sparse-Boolean cells against the paper is written into ``figures`` first."""
    runs, union, claims = judgement.runs, judgement.union, judgement.claims
    run_ids = [r.run_id for r in runs]
    symmetry_runs = judgement.symmetry_runs
    cell = union_cell(union)
    ours = reference_cells(union)
    if not ours.is_empty():  # one colour per series (tuned settings do not make one)
        ours = ours.with_columns(
            series=_label(ours, [c for c in [*cell, "run_id"] if c not in ("T", *judgement.tuned)])
        )
    # The R plot compares sparse-Boolean cells with the paper: a report without them has none.
    # A run that does not test R shows nothing of it (its line says what R needs).
    r_plot = (
        plot_reference(ours, read_reference(reference), figures / "reference_3way_and.png")
        if judgement.judged_boolean and any(v["id"] == "R" for v in judgement.paper)
        else None
    )

    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    caveats = judgement.caveats
    page = _template().render(
        caveats=caveats,
        title=f"attnsweep verdict report: {', '.join(run_ids)}",
        generated=generated,
        source=source,
        runs=[_run_view(r) for r in runs],
        own=[_verdict_view(v) for v in judgement.own],
        verdicts=[_verdict_view(v) for v in judgement.paper],
        untested=untested_line(judgement.not_tested),
        r_plot=_data_uri(r_plot) if r_plot else None,
        boolean_table=_table(union, [*cell, "run_id"]) if judgement.judged_boolean else None,
        symmetry_tables=[(r.run_id, _table(_m_star_of(r), sym.CELL)) for r in symmetry_runs],
        scale=[_scale_view(r.run_id, sc) for r in symmetry_runs if (sc := _judged(r).scale) is not None],
        reference=Path(reference).name,
        margin=EQUIVALENCE,
    )
    measurements = [
        dict(m, run_id=r.run_id)
        for r in symmetry_runs
        if (sc := _judged(r).scale) is not None
        for m in sc.measurements()
    ]
    record = dict(runs=run_ids, generated=generated, verdicts=claims, caveats=caveats)
    if judgement.not_tested:  # the paper's claims the runs do not test: no verdict, what they need
        record["not_tested"] = judgement.not_tested
    if measurements:
        record["groups"] = [
            dict(g, numbers=json.loads(g["numbers"]), run_id=r.run_id)
            for r in symmetry_runs
            if (sc := _judged(r).scale) is not None
            for g in sc.groups.iter_rows(named=True)
        ]
        record["advantage"] = [
            _advantage_record(a, r.run_id)
            for r in symmetry_runs
            if (sc := _judged(r).scale) is not None
            for a in sc.advantage.iter_rows(named=True)
        ]
        record["measurements"] = measurements
    # JSON has no NaN or infinity: a missing or unbounded number is null, and its ``bound`` says which.
    return Rendered(page, jsonable(record))


def write(out_dir: Path, judgement: Judgement, rendered: Rendered) -> None:
    """Write a rendered report into ``out_dir`` (made): ``verdicts.json``, the m* tables as
    CSV, ``report.html``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Every file through results/outputs.py: a link at one of the report's names is replaced.
    write_text(out_dir / "verdicts.json", json.dumps(rendered.record, indent=2))
    if judgement.judged_boolean:  # the m* table for anyone's own analysis (replicates stay in the store's rows)
        with replacing(out_dir / "m_star.csv") as temp:  # a bound in m_star_bound, never in m_star
            export_m_star(judgement.union).write_csv(temp)
    symmetry_runs = judgement.symmetry_runs
    if symmetry_runs:
        with replacing(out_dir / SYMMETRY_CSV) as temp:
            export_m_star(
                pl.concat(
                    [_m_star_of(r).with_columns(run_id=pl.lit(r.run_id)) for r in symmetry_runs],
                    how="diagonal_relaxed",
                )
            ).write_csv(temp)
    write_text(out_dir / "report.html", rendered.page)


def publish(store: ResultsStore, out_dir: Path, judgement: Judgement, reference: Path | str = REFERENCE_CSV) -> None:
    """Write the findings of a :func:`judge` into ``out_dir`` (presentation/publish.py)."""
    runs_ = [(r.sweep, r.run_id) for r in judgement.runs]
    symmetry = [_judged(r) for r in judgement.symmetry_runs]
    publish_folder(
        store,
        runs_,
        out_dir,
        judgement.union if judgement.judged_boolean else None,
        judgement.claims,
        reference,
        judgement.ci,
        judgement.caveats,
        symmetry,
        untested_line(judgement.not_tested),
    )


def _write(
    store: ResultsStore,
    runs: list[ReportRun],
    out_dir: Path,
    reference: Path | str,
    publishing: bool,
    source: str,
) -> Judgement:
    """Analyse ``runs`` and write the report (and, ``publishing``, the findings) into ``out_dir``."""
    # Figures go to figures/RUN_ID/ and overwrite the same names; nothing else there is removed
    # (a figure `run` or `analyze` wrote, or a file a person put there, is not the report's to delete).
    figures = out_dir / "figures"
    judgement = judge(store, runs, reference, figures)
    write(out_dir, judgement, render(judgement, figures, reference, source))
    if publishing:
        publish(store, out_dir, judgement, reference)
    return judgement


def _verdict_view(v: dict) -> dict:
    """A verdict as the page shows it: its text fields and the series it names but does not judge."""
    return dict(
        v,
        not_judged_text="; ".join(
            ", ".join(f"{c}={x}" for c, x in key.items()) or "all" for key in v.get("not_judged") or []
        ),
    )


def _advantage_record(row: dict, run_id: str) -> dict:
    """One row of S2's advantage as verdicts.json carries it: the group, the student, the
    advantage and both m* as quantities (stats/verdict_common.py :func:`~stats.verdict_common.quantity`)."""
    return dict(
        cells=dict(d=row["d"], n=row["n"], k=row["k"]),
        student=row["student"],
        advantage=quantity(row["ratio"], row["ci_lo"], row["ci_hi"], row["bound"]),
        m_star=quantity(row["m_star"], row["m_star_lo"], row["m_star_hi"], row["m_star_bound"]),
        m_star_inner_product=quantity(
            row["m_star_baseline"], row["baseline_lo"], row["baseline_hi"], row["baseline_bound"]
        ),
        text=row["text"],
        run_id=run_id,
    )


def _outside_store(store: ResultsStore, out_dir: Path) -> None:
    """Raise AttnsweepError when ``out_dir`` lies inside the store's folder: a report or a
    published folder there would become part of the store (its trials.parquet read as trials,
    every trial counted twice). Links and bind mounts count (:meth:`ResultsStore.holds`)."""
    if store.holds(out_dir):
        raise AttnsweepError(
            f"--out: {out_dir} is inside the results store at {store.root}; a report or published "
            "findings there would be read back as part of the store. Give a folder outside it"
        )


def _drops_nothing(
    store: ResultsStore, out_dir: Path, publish: bool, readme: Path | None, runs: list[ReportRun]
) -> None:
    """Raise AttnsweepError when the report would write over published findings it does not
    hold again in full: a folder whose trials.parquet or runs.parquet holds other runs, or
    (publishing) more rows of a run than the store now has (re-signed in SHA256SUMS, nothing
    would catch the loss); a folder inside another published folder's figures; or a README
    section that shows other runs. Reporting the same runs again, or more, is republishing."""
    within = published_within(out_dir)
    if within is not None:
        raise AttnsweepError(
            f"--out: {out_dir} is inside the figures of the published findings in {within}; a report "
            "there would write over them. Give a folder outside it"
        )
    ids = {r.run_id for r in runs}
    held = published_rows(out_dir)
    dropped = [r for r in held if r not in ids]
    if dropped:
        raise AttnsweepError(
            f"--out: {out_dir} (the report folder; with --from, that folder unless --out names "
            f"another) holds the published rows of run(s) {', '.join(dropped)}, which this "
            "report does not include; writing there would drop them. Report them too (attnsweep "
            f"report --from {out_dir} makes the folder again with every run it holds), or give "
            "another --out"
        )
    if publish or readme is not None:
        for r in runs:
            have = store.scan_run_trials(r.sweep, r.run_id).select(pl.len()).collect().item()
            if held.get(r.run_id, 0) > have:
                raise AttnsweepError(
                    f"--out: {out_dir} holds {held[r.run_id]} rows of run {r.run_id}, the store "
                    f"{have}; publishing would drop {held[r.run_id] - have}. Publish from a store "
                    "that holds them all (attnsweep report --from that folder), or give another --out"
                )
    if readme is None:
        return
    experiments = [e for e in EXPERIMENTS if any(analysis_of(r.experiment).section == e for r in runs)]
    dropped = [r for e in experiments for r in readme_run_ids(readme, e) if r not in ids]
    if dropped:
        raise AttnsweepError(
            f"--readme: {readme} shows the findings of run(s) {', '.join(dropped)}, which this "
            "report does not include; writing there would replace them. Report them too, or "
            "delete that section from the README first"
        )


def _own_folders(out_dir: Path, run_ids: list[str]) -> None:
    """Raise AttnsweepError when a folder the report writes figures into is a link: its
    figures would land wherever the link points (a link at a file name is simply replaced,
    results/outputs.py)."""
    figures = out_dir / "figures"
    try:
        check_output_folder(out_dir, [figures, *(figures / run_id for run_id in run_ids)], "--out")
    except ValueError as exc:
        raise AttnsweepError(str(exc)) from None


def summary(verdicts: list[dict]) -> str:
    """One line: each claim's short name and verdict, e.g. ``L1 inconclusive, L2 supported``;
    where the runs test no claim, that (the report's not-tested line says what each needs)."""
    said = ", ".join(f"{v['claim'].split(':', 1)[0]} {v['verdict']}" for v in verdicts)
    return said or "none: the runs test no claim (the report says what each claim needs)"


def _label(df: pl.DataFrame, cols: list[str]) -> pl.Expr:
    """A series label from the columns that vary in ``df`` ("ours" when none do)."""
    cols = [c for c in cols if c in df.columns and df[c].n_unique() > 1]
    if not cols:
        return pl.lit("ours")
    return pl.concat_str(
        [pl.lit(f"{c}=") + pl.col(c).cast(pl.String).fill_null("none") for c in cols],
        separator=", ",
    )


# Columns of the m* tables that hold words, not numbers: left-aligned on the page.
TEXT_COLUMNS = ("budget", "tuning", "flags")


def _table(m_star: pl.DataFrame, cell: list[str]) -> dict:
    """An m* table as strings: the cell columns that vary (``fixed`` names the others), m*,
    its interval, grid m*, seeds, m range, and ``budget`` when the table has it; ``numeric``
    says per column whether it holds numbers (right-aligned) or text (left-aligned)."""
    always = ("T", "model", "teacher", "student")
    shown = [c for c in cell if c in m_star.columns and (m_star[c].n_unique() > 1 or c in always)]
    fixed = ", ".join(f"{c}={m_star[c][0]}" for c in cell if c in m_star.columns and c not in shown and c != "run_id")
    checked = "budget" in m_star.columns and (m_star["budget"] != "not checked").any()
    # A grid sweep has no budget check; a symmetry cell's check re-runs its deciding m, not a search (no m* at 2x).
    extra: list[str] = [c for c in ("m_star_2x", "budget") if c in m_star.columns] if checked else []
    if "tuning" in m_star.columns and (m_star["tuning"] != "not tuned").any():
        extra += ["m_star_default", "m_star_tuned", "tuning"]
    for column in (
        "at_bound",
        "min_norm_qk",
        "margin_success",
        "margin_failure",
    ):  # how much of its bound a cell used, and the margins it reached (stats/norm_use.py)
        if column in m_star.columns and m_star[column].is_not_null().any():
            extra.append(column)
    if "at_bound" in extra:  # with a bound: did the largest m still fit its training sets?
        extra += [
            c for c in ("fit_at_m_max", "fit_at_m_max_2x") if c in m_star.columns and m_star[c].is_not_null().any()
        ]
    if "redrawn" in m_star.columns and m_star["redrawn"].is_not_null().any():
        extra.append("redrawn")  # training sets redrawn near the crossing (analysis/redraws.py)
    if "flags" in m_star.columns and (m_star["flags"].fill_null("") != "").any():
        extra += ["flags"]
    rows = []
    for r in m_star.iter_rows(named=True):
        rows.append(
            [
                *("none" if r[c] is None else f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in shown),
                format_m_star(r["m_star"], r["bound"]),
                interval_text(r),
                format_reading(r, "m_star_grid", 0),
                format_reading(r, "m_star_interp", 1),
                str(r["n_seeds"]),
                f"{r['m_min']}..{r['m_max']}",
                *(_cell(r, c) for c in extra),
            ]
        )
    names = {
        "m_star_2x": "m* at 2x epochs",
        "m_star_default": "m* spec settings",
        "m_star_tuned": "m* tuned",
        "at_bound": "at the bound",
        "min_norm_qk": "least ||W_Q W_K^T|| of a success",
        "margin_success": "normalised margin of successes (median)",
        "margin_failure": "normalised margin of failures (median)",
        "fit_at_m_max": "fit at the largest m",
        "fit_at_m_max_2x": "fit there at 2x epochs",
        "redrawn": "training sets redrawn near m*",
    }
    numeric = [
        *(m_star[c].dtype.is_numeric() for c in shown),
        True,
        True,
        True,
        True,
        True,
        True,
        *(c not in TEXT_COLUMNS for c in extra),
    ]
    return dict(
        columns=[
            *shown,
            "m*",
            "95% CI",
            "grid m*",
            "interp. m*",
            "seeds",
            "m range",
            *(names.get(c, c) for c in extra),
        ],
        rows=rows,
        fixed=fixed,
        numeric=numeric,
    )


def _cell(row: dict, column: str) -> str:
    """The budget check's, the tuning's and the flags' columns: ``-`` where a cell was not
    checked or tuned; an m* as :func:`stats.critical.format_m_star` writes it, by its bound."""
    if column == "m_star_2x":
        if row.get("budget") in (None, "not checked"):
            return "-"
        return format_m_star(row[column], row.get("bound_2x"))
    if column in ("m_star_default", "m_star_tuned"):
        return format_m_star(row[column], row.get(column.replace("m_star", "bound")))
    if column in ("at_bound", "fit_at_m_max", "fit_at_m_max_2x", "redrawn"):
        return "-" if row.get(column) is None else f"{row[column]:.0%}"
    if column in ("min_norm_qk", "margin_success", "margin_failure"):
        return "-" if row[column] is None else f"{row[column]:.3g}"
    return str(row[column] or "")


def _judged(run: ReportRun) -> SymmetryAnalysis:
    """A symmetry run's analysis, which :func:`judge` sets on every symmetry run."""
    if run.symmetry is None:
        raise ValueError(f"run {run.run_id} has no symmetry analysis: judge() the runs first")
    return run.symmetry


def _m_star_of(run: ReportRun) -> pl.DataFrame:
    """A judged run's m* table, which :func:`judge` sets on every run."""
    if run.m_star is None:
        raise ValueError(f"run {run.run_id} has no m* table: judge() the runs first")
    return run.m_star


def _scale_view(run_id: str, sc: ScaleAnalysis) -> dict:
    """A multi-size symmetry run's tables across scale as strings (analysis/symmetry.py)."""
    groups = [
        [str(r[c]) for c in ("d", "n", "k", "claim", "verdict", "statistic", "interval")]
        for r in sc.groups.iter_rows(named=True)
    ]
    advantage = [
        [
            str(r["d"]),
            str(r["n"]),
            str(r["k"]),
            r["student"],
            r["m_star_text"],
            r["baseline_text"],
            r["text"],
        ]
        for r in sc.advantage.iter_rows(named=True)
    ]
    measured = [[m[c] for c in ("measurement", "statistic", "interval", "note")] for m in sc.measurements()]
    return dict(run_id=run_id, groups=groups, advantage=advantage, measured=measured)


def _run_view(run: ReportRun) -> dict:
    """What the page shows of one run: its record and its figures."""
    rec = run.record
    try:
        packages = json.loads(rec.get("packages") or "{}")
    except ValueError:
        packages = {"(unreadable)": rec.get("packages")}
    hosts = [rec.get("host")] + [a.get("host") for a in rec.get("attempts") or []]
    counts = ", ".join(
        f"{k.removeprefix('n_')} {rec[k]}"
        for k in ("n_done", "n_failed", "n_diverged", "n_lost")
        if rec.get(k) is not None
    )
    return dict(
        run_id=run.run_id,
        sweep=run.sweep,
        experiment=run.experiment,
        status=rec.get("status"),
        started=_utc_minute(rec.get("started_at")),
        ended=_utc_minute(rec.get("ended_at")),
        n_trials=rec.get("n_trials"),
        counts=counts,
        code_version=rec.get("code_version"),
        hosts=", ".join(dict.fromkeys(h for h in hosts if h)),
        packages=packages,
        spec_yaml=rec.get("spec_yaml") or "",
        figures=[(CAPTIONS.get(p.stem, p.stem.replace("_", " ")), _data_uri(p)) for p in run.figures],
    )


def _utc_minute(when: dt.datetime | None) -> str:
    """A run record's time in UTC to the minute, e.g. ``2026-12-01 09:46 UTC`` (``-`` when
    unset, e.g. a run still running has no end); a naive time is taken to be UTC, as the
    store writes them."""
    if when is None:
        return "-"
    when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
    return f"{when:%Y-%m-%d %H:%M} UTC"


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2")
