"""Replication: re-run a pinned sweep and compare everything derived from it with a baseline run.

Rules (a comparison fails -> the replication is a regression):

* **m\\* per cell**: the new m* must lie in the baseline's bootstrap interval widened by the
  relative tolerance ``tol`` on each side, ``[ci_lo / (1 + tol), ci_hi * (1 + tol)]``, and
  censoring must agree (a cell that reached the success rate must still reach it). Without
  baseline intervals (``n_boot: 0``) the interval is the baseline m* itself.
* **Growth-law parameters** (sparse Boolean; each series and law): the new estimate must lie
  in the baseline's parameter interval widened by ``tol`` times its width on each side;
  laws without an interval are shown, not judged.
* **Verdicts** (symmetry S1-S4): the same verdict.
* **Score distributions** per (cell, m): a two-sample Kolmogorov-Smirnov test of the seeds'
  test accuracy (sparse Boolean) or relative test error (symmetry), Holm-corrected over all
  (cell, m); a corrected p below ``alpha`` fails.

The baseline must come from the same spec (same spec hash): replication re-runs the sweep
it pins, seeds included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import ks_2samp

from attnsweep.analysis.boolean import CELL_FIELDS, analyze_run
from attnsweep.analysis.symmetry import analyze_symmetry_run
from attnsweep.orchestrator.trials_table import with_later_fields
from attnsweep.stats.critical import format_m_star
from attnsweep.stats.symmetry import CELL as SYMMETRY_CELL


@dataclass
class Comparison:
    """One derived quantity, baseline against new."""

    kind: str
    what: str
    baseline: str
    new: str
    ok: bool | None  # None: shown, not judged


def compare_symmetry(
    store, sweeps, run_ids, contexts, settings, dirs, tol: float
) -> tuple[list[Comparison], str, list[str]]:
    """The m* of each cell and the verdicts of S1-S4 of two symmetry runs (``run_ids``:
    baseline, new), the score whose distributions are compared (``test_error``) and their cell."""
    sa, sb = (analyze_symmetry_run(store, s, r, settings, d) for s, r, d in zip(sweeps, run_ids, dirs, strict=True))
    out = _m_star(sa.m_star, sb.m_star, list(SYMMETRY_CELL), tol)
    out += [
        Comparison("verdict", x["claim"], x["verdict"], y["verdict"], x["verdict"] == y["verdict"])
        # The same experiment's claims, in one order: a run judged on fewer claims ends the
        # comparison at the shorter list, as before strictness was asked of every zip.
        for x, y in zip(sa.verdicts, sb.verdicts, strict=False)
    ]
    return out, "test_error", [c for c in SYMMETRY_CELL if c != "student"] + ["model", "equivariance"]


def compare_boolean(
    store, sweeps, run_ids, contexts, settings, dirs, tol: float
) -> tuple[list[Comparison], str, list[str]]:
    """The m* of each cell and the growth-law parameters of two sparse-Boolean runs, the score
    whose distributions are compared (``test_acc``) and their cell."""
    a, b = (
        analyze_run(store, figures_dir=d, settings=settings, context=c) for c, d in zip(contexts, dirs, strict=True)
    )
    cell = [c for c in CELL_FIELDS if c in a.m_star.columns]
    return _m_star(a.m_star, b.m_star, cell, tol) + _fits(a.fits, b.fits, tol), "test_acc", cell


def _m_star(base: pl.DataFrame, new: pl.DataFrame, cell: list[str], tol: float) -> list[Comparison]:
    out = []
    joined = base.join(new, on=cell, how="full", suffix="_new", nulls_equal=True, coalesce=True)
    varying = [c for c in cell if joined[c].n_unique() > 1] or cell[:1]
    for r in joined.iter_rows(named=True):
        what = ", ".join(f"{c}={r[c]}" for c in varying)
        if r.get("m_star_grid") is None and r.get("censored") is None:
            out.append(Comparison("m*", what, "missing", _fmt_m(r, "_new"), False))
            continue
        if r.get("censored_new") is None:
            out.append(Comparison("m*", what, _fmt_m(r, ""), "missing", False))
            continue
        if {r.get("bound"), r.get("bound_new")} & {
            "lower",
            "none",
        }:  # beyond the grid, or no number: both must be
            ok = r.get("bound") == r.get("bound_new")
        else:
            lo, hi = r["ci_lo"], r["ci_hi"]
            if lo is None or math.isnan(lo) or hi is None or math.isnan(hi):
                lo = hi = r["m_star"]
            ok = lo / (1 + tol) <= r["m_star_new"] <= hi * (1 + tol)
        out.append(Comparison("m*", what, _fmt_m(r, ""), _fmt_m(r, "_new"), bool(ok)))
    return out


def _fmt_m(r: dict, suffix: str) -> str:
    bound = r.get(f"bound{suffix}")
    if bound != "exact":
        return format_m_star(r.get(f"m_star{suffix}"), bound)
    lo, hi = r.get(f"ci_lo{suffix}"), r.get(f"ci_hi{suffix}")
    ci = f" [{lo:.1f}, {hi:.1f}]" if lo is not None and not math.isnan(lo) else ""
    return f"{r[f'm_star{suffix}']:.1f}{ci}"


def _fits(base: dict, new: dict, tol: float) -> list[Comparison]:
    out = []
    for series, fa in base.items():
        fb = new.get(series)
        for row in fa.iter_rows(named=True):
            other = None if fb is None else fb.filter(pl.col("model") == row["model"])
            for p in ("a", "b"):
                label = f"{series}: {row['model']} law, {p if row['model'] != 'power' or p == 'a' else 'c'}"
                if other is None or other.is_empty():
                    out.append(Comparison("fit", label, f"{row[p]:.3g}", "missing", False))
                    continue
                value, lo, hi = other[p][0], row[f"{p}_lo"], row[f"{p}_hi"]
                if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
                    out.append(Comparison("fit", label, f"{row[p]:.3g}", f"{value:.3g}", None))
                    continue
                pad = tol * (hi - lo)
                out.append(
                    Comparison(
                        "fit",
                        label,
                        f"{row[p]:.3g} [{lo:.3g}, {hi:.3g}]",
                        f"{value:.3g}",
                        bool(lo - pad <= value <= hi + pad),
                    )
                )
    return out


def distributions(store, sweeps, runs, cell, score, alpha) -> list[Comparison]:
    frames = []
    for s, r in zip(sweeps, runs, strict=True):
        t = with_later_fields(store.scan_run_trials(s, r)).filter(pl.col("status") == "done").collect()
        cols = [c for c in cell if c in t.columns]
        frames.append(t.select([*cols, "m", pl.col(score)]).drop_nulls(score))
    keys = [c for c in frames[0].columns if c != score]
    g = [f.group_by(keys).agg(pl.col(score)) for f in frames]
    both = g[0].join(g[1], on=keys, suffix="_new", nulls_equal=True)
    varying = [k for k in keys if both[k].n_unique() > 1]
    tests = []
    for r in both.iter_rows(named=True):
        x, y = np.asarray(r[score], float), np.asarray(r[f"{score}_new"], float)
        p = 1.0 if np.array_equal(np.sort(x), np.sort(y)) else float(ks_2samp(x, y).pvalue)
        tests.append((", ".join(f"{k}={r[k]}" for k in varying), p, x, y))
    # Holm: the i-th smallest p is compared with alpha / (n - i).
    order = sorted(range(len(tests)), key=lambda i: tests[i][1])
    adjusted, running = [1.0] * len(tests), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, tests[i][1] * (len(tests) - rank)))
        adjusted[i] = running
    return [
        Comparison(
            f"{score} distribution",
            what,
            f"median {np.median(x):.3g}",
            f"median {np.median(y):.3g} (Holm p={adjusted[i]:.2g})",
            adjusted[i] >= alpha,
        )
        for i, (what, _, x, y) in enumerate(tests)
    ]
