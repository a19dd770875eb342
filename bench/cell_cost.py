"""What one sparse-Boolean cell costs, from a short probe: a few trials per m, trained as a sweep
trains them (``train_pack``, its own choice of stacked or one by one), each m's epochs to stop,
seconds per trial-epoch, and the cost of a full cell extrapolated from them.

A cell's cost is sum over its m values of seeds x epochs(m) x seconds per epoch(m); with the
budget check, the deciding m values again at twice the epochs (counted here as the same m values
again, at the probe's epochs, which is a lower end: a trial that stopped early stops early again).
The probe's trials are the cell's own first seeds, so its rows are what the sweep would write.

Usage:
    python bench/cell_cost.py --T 4096 --m 256 1024 --seeds 2 --norm-bound 2 \
        --stop margin --margin-target 0.1 --max-epochs 300 --cell-seeds 16 --cell-m 7
    python bench/cell_cost.py --T 16 256 1024 --m 48 192 512 --seeds 3 --stop fit margin ...

Prints one line per (T, m, stop) and the extrapolated core-hours per cell.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time

import torch

from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.train_boolean import train_pack


def probe(T: int, m: int, seeds: int, stop: str, args) -> dict:
    extra = dict(stop=stop, margin_target=args.margin_target) if stop == "margin" else dict(stop=stop)
    configs = [
        BooleanTrialConfig(
            task="and",
            T=T,
            s=3,
            m=m,
            seed=seed,
            d=32,
            heads=4,
            positions="fixed",
            ln_affine=False,
            norm_bound=args.norm_bound,
            lr=3e-3,
            max_epochs=args.max_epochs,
            n_test=2000,
            **extra,
        )
        for seed in range(seeds)
    ]
    t0 = time.perf_counter()
    rows = train_pack(configs, device="cpu")
    wall = time.perf_counter() - t0
    epochs = [r["epochs"] or 0 for r in rows]
    return dict(
        T=T,
        m=m,
        stop=stop,
        wall=wall,
        epochs=epochs,
        stopped=sum(bool(r["converged"]) for r in rows),
        per_epoch=wall / max(1, sum(epochs)),
        margins=[r["margin_normalised"] for r in rows],
        test=[r["test_acc"] for r in rows],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, nargs="+", required=True)
    ap.add_argument("--m", type=int, nargs="+", required=True, help="one per T, or one for all")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--stop", nargs="+", default=["fit"], choices=["fit", "margin", "budget"])
    ap.add_argument("--margin-target", type=float, default=0.1)
    ap.add_argument("--norm-bound", type=float, default=1.0)
    ap.add_argument("--max-epochs", type=int, default=3000)
    ap.add_argument("--cell-seeds", type=int, default=16, help="seeds per m of the cell extrapolated to")
    ap.add_argument("--cell-m", type=int, default=7, help="m values of the cell extrapolated to")
    args = ap.parse_args()
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}, {platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread")
    ms = args.m if len(args.m) == len(args.T) else args.m * len(args.T)
    for T, m in zip(args.T, ms, strict=True):
        for stop in args.stop:
            r = probe(T, m, args.seeds, stop, args)
            margins = ", ".join("-" if x is None else f"{x:.3f}" for x in r["margins"])
            cell_h = args.cell_seeds * args.cell_m * 2 * (r["wall"] / args.seeds) / 3600
            print(
                f"T={T} m={m} stop={stop}: {r['wall']:.1f} s for {args.seeds} trials; epochs {r['epochs']} "
                f"({r['stopped']} stopped by their rule); {1000 * r['per_epoch']:.2f} ms per trial-epoch; "
                f"normalised margin {margins}; test acc {r['test']}; a cell of {args.cell_seeds} seeds x "
                f"{args.cell_m} m with its budget check at this m's cost: {cell_h:.2f} core-hours",
                flush=True,
            )


if __name__ == "__main__":
    main()
