"""How often the 95% interval of m* covers the true m*, by simulation (docs/claims.md 2).

Each simulated cell has a known m*: seed s succeeds at sample size m with probability
P(m) = sigmoid(beta (ln m - ln m*)), independently at every m (each m draws its own training
set), with m* drawn log-uniformly in [30, 300] per cell. The cell is then measured as a sweep
would measure it, by one of three designs:

* ``grid2``: m = 8, 16, ..., 1024 (a factor 2 apart);
* ``grid1.4``: m = 8 .. 512 at a factor sqrt(2) (the quickstart's grid);
* ``adaptive``: the adaptive search of orchestrator/adaptive.py (4 initial points over
  8..1024, then bisection to rel_tol 0.1, one point a round), the design of the published runs.

and stats/critical.py computes m* and its interval from the simulated rows. Coverage is
the fraction of cells inside the grid (m* not censored) whose interval holds the true m*;
``width`` is the median of ci_hi / ci_lo. Beside the shipped interval the table gives the
percentile bootstrap alone (the interval before issue 22).

    python bench/interval_coverage.py                 # the table of docs/claims.md 2
    python bench/interval_coverage.py --cells 100     # quicker, noisier
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnsweep.orchestrator.adaptive import initial_points, next_points  # noqa: E402
from attnsweep.stats.critical import critical_sample_sizes, percentile_interval  # noqa: E402

DESIGNS = ("grid2", "grid1.4", "adaptive")
SLOPES = (1.5, 3.0, 8.0)
SEEDS = (4, 8, 16, 32)


def simulate(design: str, beta: float, seeds: int, cells: int, rng: np.random.Generator) -> tuple[pl.DataFrame, dict]:
    """Rows ``(cell, m, seed, status, test_acc)`` of ``cells`` simulated cells and their true m*."""
    rows, truth = [], {}
    for cell in range(cells):
        m_true = math.exp(rng.uniform(math.log(30), math.log(300)))
        truth[cell] = m_true

        def run(ms: list[int], cell: int = cell, m_true: float = m_true) -> dict[int, float]:
            rates = {}
            for m in ms:
                ok = rng.random(seeds) < 1 / (1 + math.exp(-beta * (math.log(m) - math.log(m_true))))
                rows.extend((cell, m, s, "done", 1.0 if o else 0.0) for s, o in enumerate(ok))
                rates[m] = float(ok.mean())
            return rates

        if design == "grid2":
            run([8 * 2**i for i in range(8)])
        elif design == "grid1.4":
            run(sorted({int(round(8 * 2 ** (i / 2))) for i in range(13)}))
        else:
            rates: dict[int, float] = {}
            todo = initial_points(8, 1024, 4)
            while todo:
                rates.update(run(todo))
                todo = next_points(rates, 8, 1024, 0.5, 0.1, 4, 1)
    frame = pl.DataFrame(rows, schema=["cell", "m", "seed", "status", "test_acc"], orient="row")
    return frame, truth


def coverage(design: str, beta: float, seeds: int, cells: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, DESIGNS.index(design), int(beta * 10), seeds])
    rows, truth = simulate(design, beta, seeds, cells, rng)
    table, reps = critical_sample_sizes(rows, ["cell"], n_boot=1000)
    inside = table.filter(pl.col("bound") == "exact")
    shipped, boot, w_shipped, w_boot = 0, 0, [], []
    for r in inside.iter_rows(named=True):
        t = truth[r["cell"]]
        lo, hi = percentile_interval(reps[(r["cell"],)], 0.95)
        shipped += r["ci_lo"] <= t <= r["ci_hi"]
        boot += lo <= t <= hi
        w_shipped.append(r["ci_hi"] / r["ci_lo"])
        w_boot.append(hi / lo)
    n = inside.height
    return dict(
        design=design,
        beta=beta,
        seeds=seeds,
        cells=n,
        coverage=shipped / n,
        width=float(np.median(w_shipped)),
        bootstrap_coverage=boot / n,
        bootstrap_width=float(np.median(w_boot)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=300, help="simulated cells per line (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| design | slope beta | seeds | cells | coverage | median hi/lo | bootstrap alone | its hi/lo |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    start = time.perf_counter()
    for design in DESIGNS:
        for beta in SLOPES:
            for seeds in SEEDS:
                r = coverage(design, beta, seeds, args.cells, args.seed)
                print(
                    f"| {design} | {beta:g} | {seeds} | {r['cells']} | {r['coverage']:.3f} | {r['width']:.2f} | "
                    f"{r['bootstrap_coverage']:.3f} | {r['bootstrap_width']:.2f} |",
                    flush=True,
                )
    print(f"\n{time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
