"""How far each estimator of m* (stats/critical.py: logistic crossing, grid, interpolated on
ln m) lands from the true half-success point when the success rate levels off below 1, and how
often the ``plateau`` flag fires, against a curve whose ceiling is 1.

Simulated cells: P(success | m) = ceiling * sigmoid(slope * (ln m - ln m0)), m on a geometric
grid of 13 values from 8 to 2048, each seed's outcome at each m drawn independently. The true
half-success point solves P = 1/2. Prints, per (ceiling, seeds), the median and the 10th-90th
percentiles of each estimator / truth over the replicates, and the share flagged ``plateau``.

Usage: ``python bench/plateau_bias.py [--replicates 400]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import polars as pl

from attnsweep.stats.critical import critical_sample_sizes

M = np.unique(np.round(np.geomspace(8, 2048, 13)).astype(int))
M0, SLOPE = 100.0, 2.5


def truth(ceiling: float) -> float:
    """The m where ceiling * sigmoid(SLOPE (ln m - ln M0)) = 1/2."""
    p = 0.5 / ceiling
    return math.exp(math.log(M0) + math.log(p / (1 - p)) / SLOPE)


def cells(ceiling: float, seeds: int, replicates: int, rng: np.random.Generator) -> pl.DataFrame:
    p = ceiling / (1 + np.exp(-SLOPE * (np.log(M) - math.log(M0))))
    ok = rng.random((replicates, seeds, M.size)) < p
    r, s, j = np.meshgrid(np.arange(replicates), np.arange(seeds), np.arange(M.size), indexing="ij")
    return pl.DataFrame(
        dict(
            cell=r.ravel(),
            seed=s.ravel(),
            m=M[j.ravel()],
            status="done",
            test_acc=ok.ravel().astype(float),
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=400)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| ceiling | seeds | logistic / truth | grid / truth | interpolated / truth | flagged plateau |")
    print("|---|---|---|---|---|---|")
    for ceiling in (0.8, 1.0):
        for seeds in (8, 16, 32):
            table, _ = critical_sample_sizes(cells(ceiling, seeds, args.replicates, rng), ["cell"], n_boot=0)
            t = truth(ceiling)
            row = [f"{ceiling:g}", str(seeds)]
            for col in ("m_star_logistic", "m_star_grid", "m_star_interp"):
                ratio = (table[col] / t).drop_nans().drop_nulls().to_numpy()
                q10, q50, q90 = np.percentile(ratio, [10, 50, 90])
                row.append(f"{q50:.2f} ({q10:.2f}-{q90:.2f})")
            row.append(f"{table['plateau'].mean():.0%}")
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
