"""Adaptive m* search against the full grid that pins m* as well, on the same cells.

Both runs use the same cells (3-way AND, the CLS transformer at several T), the same seeds
and the same training settings, on the embedded local Ray:

* grid: m log-spaced over [m_min, m_max] with ratio at most ``1 + tol`` between neighbours,
  so the first m whose success rate reaches 1/2 is pinned within ``tol``;
* adaptive: ``search: {mode: adaptive, rel_tol: tol}`` (orchestrator/adaptive.py), no
  tuning and no budget check (they answer other questions and are not in the grid either).

Reported per cell: m* of each (stats/critical.py, logistic refinement) and their relative
difference; and the trials, wall time and worker idle fraction of each run, with their
ratios. The idle fraction is read from the store alone (1 - the trials' pack wall seconds
summed / (workers x the run's wall seconds)), so it measures any version of the driver. Trials at the same
(cell, m, seed) have the same trial id and, being deterministic, the same outcome in both.

Usage: ``python bench/adaptive.py [--T 8 16 32 64] [--seeds 32] [--tol 0.1] [--store DIR] [--adaptive-only]``
"""

from __future__ import annotations

import argparse
import io
import math
import os
import tempfile
import time

import numpy as np
import polars as pl
from rich.console import Console

from attnsweep.analysis.boolean import analyze_run
from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.executors import RayExecutor
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore

FIXED = "fixed: {task: and, s: 3, d: 32, heads: 4, lr: 3e-3, max_epochs: 1000, n_test: 2000, model: transformer}\n"


def specs(T: list[int], seeds: int, tol: float, m_min: int, m_max: int) -> tuple[str, str, int]:
    num = math.ceil(math.log(m_max / m_min) / math.log(1 + tol)) + 1
    ms = sorted({int(round(m)) for m in np.geomspace(m_min, m_max, num)})
    grid = f"name: bench-grid\nseeds: {seeds}\ngrid: {{T: {T}, m: {ms}}}\n{FIXED}"
    adaptive = (
        f"name: bench-adaptive\nseeds: {seeds}\ngrid: {{T: {T}}}\n{FIXED}"
        f"search: {{mode: adaptive, m: {{min: {m_min}, max: {m_max}}}, rel_tol: {tol}, budget_check: false}}\n"
    )
    return grid, adaptive, len(ms)


def idle_fraction(store: ResultsStore, sweep: str, run_id: str, workers: int) -> float:
    """1 - (sum of the run's pack wall seconds) / (workers x the run's wall seconds). A row's
    ``wall_s`` is its pack's wall time divided by the pack's size, so the rows' sum is the
    packs' sum."""
    busy = store.scan_run_trials(sweep, run_id).select(pl.col("wall_s").sum()).collect().item()
    return 1 - busy / (workers * store.read_run(sweep, run_id)["wall_s"])


def run(text: str, store: ResultsStore) -> tuple[float, int, pl.DataFrame, float]:
    spec = parse_spec(text)
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        workers = executor.slots()
        t0 = time.perf_counter()
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
        wall = time.perf_counter() - t0
    finally:
        executor.shutdown()
    n = sum(summary.counts.values())
    idle = idle_fraction(store, spec.name, summary.run_id, workers)
    return wall, n, analyze_run(store, summary.run_id).m_star, idle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--seeds", type=int, default=32)
    ap.add_argument("--tol", type=float, default=0.1)
    ap.add_argument("--m-min", type=int, default=8)
    ap.add_argument("--m-max", type=int, default=256)
    ap.add_argument("--store", default=None, help="store folder (default: a temporary one)")
    ap.add_argument("--adaptive-only", action="store_true", help="run the adaptive search only: wall and idle")
    args = ap.parse_args()
    root = args.store or tempfile.mkdtemp(prefix="bench-adaptive-")
    grid_text, adaptive_text, n_m = specs(args.T, args.seeds, args.tol, args.m_min, args.m_max)
    store = ResultsStore(root)
    if args.adaptive_only:
        a_wall, a_n, a, a_idle = run(adaptive_text, store)
        print(f"adaptive: {a_n} trials, {a_wall:.1f} s, workers idle {a_idle:.1%}")
        print(a.select("T", "m_star", "ci_lo", "ci_hi"))
        return
    g_wall, g_n, g, g_idle = run(grid_text, store)
    a_wall, a_n, a, a_idle = run(adaptive_text, store)
    print(
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, embedded local Ray; 3-way AND, transformer "
        f"d=32, lr 3e-3, <= 1000 epochs; {args.seeds} seeds; m in {args.m_min}..{args.m_max}; tolerance "
        f"{args.tol:.0%}; grid of {n_m} m values\n"
    )
    print("| T | grid m* (95% CI) | adaptive m* (95% CI) | adaptive / grid | adaptive m tried |")
    print("|---|---|---|---|---|")
    both = g.join(a, on="T", suffix="_a").sort("T")
    worst = 0.0
    for r in both.iter_rows(named=True):
        ratio = r["m_star_a"] / r["m_star"]
        worst = max(worst, abs(ratio - 1))
        tried = (
            store.scan_run_trials("bench-adaptive", store.latest_run()[1])
            .filter(pl.col("T") == r["T"])
            .select(pl.col("m").n_unique())
            .collect()
            .item()
        )
        print(
            f"| {r['T']} | {r['m_star']:.1f} ({r['ci_lo']:.1f} .. {r['ci_hi']:.1f}) | {r['m_star_a']:.1f} "
            f"({r['ci_lo_a']:.1f} .. {r['ci_hi_a']:.1f}) | {ratio:.3f} | {tried} |"
        )
    print(
        f"\n| run | trials | wall (s) | workers idle |\n|---|---|---|---|\n| grid | {g_n} | {g_wall:.1f} | {g_idle:.1%} |\n"
        f"| adaptive | {a_n} | {a_wall:.1f} | {a_idle:.1%} |\n"
        f"| adaptive / grid | {a_n / g_n:.2f} | {a_wall / g_wall:.2f} | |"
    )
    print(
        f"\nlargest |adaptive m* / grid m* - 1| = {worst:.3f} (target <= {args.tol}); "
        f"trial ratio {a_n / g_n:.2f} (target <= 0.33)"
    )


if __name__ == "__main__":
    main()
