"""The smallest-m-first search against the plain one, on the same symmetry spec, side by side.

Both runs train the same cells (both teachers; the inner-product student and the generic
transformer; d = 4, 8, 16 at n = 6, k = 4), the same seeds and settings, on the embedded
local Ray, without the budget check (it answers another question). They differ only in
``search.smallest_first``. Reported: per run the trials trained and the worker-seconds they
took (the rows' ``wall_s`` summed: a row's share of its pack's wall time), their ratios, and
per cell the m* of each run with whether they agree (the same m* and bound where both
decide). Trials at the same (cell, m, seed) have the same trial id and, being deterministic,
the same outcome in both runs.

Usage: ``python bench/smallest_first.py [--d 4 8 16] [--seeds 4] [--epochs 300] [--store DIR]``
"""

from __future__ import annotations

import argparse
import io
import platform
import tempfile
import time

import polars as pl
from rich.console import Console

from attnsweep.analysis.boolean import settings_of
from attnsweep.analysis.symmetry import analyze_symmetry_run
from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.executors import RayExecutor
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore
from attnsweep.stats.critical import format_m_star

KEYS = ["teacher", "student", "n", "k", "d"]


def spec_text(ds: list[int], seeds: int, epochs: int, smallest_first: bool) -> str:
    name = "bench-first" if smallest_first else "bench-plain"
    return (
        f"name: {name}\nexperiment: symmetry\nseeds: {seeds}\n"
        f"grid:\n  - {{teacher: [equivariant, control], d: {ds}, equivariance: [orthogonal]}}\n"
        f"  - {{teacher: [equivariant, control], d: {ds}, model: [transformer], equivariance: [none]}}\n"
        f"fixed: {{n: 6, k: 4, width: 32, heads: 4, lr: 3e-3, max_epochs: {epochs}, n_test: 500}}\n"
        f"search: {{mode: adaptive, m: {{min: 1, max: 256}}, rel_tol: 0.5, initial_points: 3, "
        f"budget_check: false, smallest_first: {str(smallest_first).lower()}}}\n"
        "analysis: {target_error: 0.05, n_boot: 200}\n"
    )


def run(text: str, store: ResultsStore) -> tuple[float, pl.DataFrame, pl.DataFrame]:
    spec = parse_spec(text)
    start = time.perf_counter()
    executor = RayExecutor(spec.execution, None, spec.resources)
    try:
        run_sweep(spec, store, executor, run_id="r1", console=Console(file=io.StringIO()))
    finally:
        executor.shutdown()
    wall = time.perf_counter() - start
    rows = store.scan_run_trials(spec.name, "r1").collect()
    m_star = analyze_symmetry_run(store, spec.name, "r1", settings_of(store, spec.name, "r1")).m_star
    return wall, rows, m_star


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--store", default=None)
    args = ap.parse_args()
    store = ResultsStore(args.store or tempfile.mkdtemp(prefix="bench-first-"))
    out = {}
    for first in (False, True):
        out[first] = run(spec_text(args.d, args.seeds, args.epochs, first), store)
    print(
        f"# {platform.machine()}, {platform.node()}; d = {args.d}, {args.seeds} seeds, max_epochs {args.epochs}, "
        "m 1..256, rel_tol 0.5, no budget check; the embedded local Ray"
    )
    print("| search | trials | worker-seconds | run wall seconds |")
    print("|---|---|---|---|")
    for first, (wall, rows, _) in out.items():
        print(f"| {'smallest first' if first else 'plain'} | {rows.height} | {rows['wall_s'].sum():.0f} | {wall:.0f} |")
    (_, plain, a), (_, firsts, b) = out[False], out[True]
    print(
        f"\nsmallest first / plain: trials {firsts.height / plain.height:.2f}, worker-seconds "
        f"{firsts['wall_s'].sum() / plain['wall_s'].sum():.2f}\n"
    )
    both = a.join(b, on=KEYS, suffix="_first")
    print("| teacher | student | d | m* plain | m* smallest first | same |")
    print("|---|---|---|---|---|---|")
    for r in both.sort(KEYS).iter_rows(named=True):
        same = r["bound"] == r["bound_first"] and (r["m_star"] == r["m_star_first"] or r["bound"] == "none")
        print(
            f"| {r['teacher']} | {r['student']} | {r['d']} | {format_m_star(r['m_star'], r['bound'])} | "
            f"{format_m_star(r['m_star_first'], r['bound_first'])} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
