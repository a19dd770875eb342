"""Packed vs unpacked training throughput against pack size, in one process on the CPU.

For each pack size P, the same P trials (seeds 0..P-1 of one tiny transformer setting that
never stops early, so every trial runs exactly ``max_epochs`` full-batch steps) are trained
(a) as one vmapped pack, ``train_pack(configs)``, and (b) one after another,
``train_pack([c])`` for each c; both on 1 torch thread, side by side in one run. Reported:
trials/s of each and their ratio, median of ``--repeats``.

Usage: ``python bench/packing.py [--sizes 1 2 4 ... 256] [--repeats 3] [--epochs 50]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnsweep.workers import BooleanTrialConfig, train_pack


def configs(p: int, epochs: int) -> list[BooleanTrialConfig]:
    # 3-sparse parity on 16 bits from 64 samples does not fit within the budget, so no
    # trial stops early and packed and unpacked do the same number of steps.
    return [BooleanTrialConfig(task="parity", T=16, s=3, m=64, seed=i, d=16, heads=2, max_epochs=epochs,
                               n_test=256) for i in range(p)]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    train_pack(configs(2, 2), device="cpu")  # warm-up: first-call costs out of the numbers
    print(f"{time.strftime('%Y-%m-%d')}, torch {torch.__version__}, 1 thread, {args.epochs} full-batch epochs, "
          f"median of {args.repeats}\n")
    print("| pack size | packed trials/s | unpacked trials/s | speed-up |")
    print("|---|---|---|---|")
    for p in args.sizes:
        cfgs = configs(p, args.epochs)
        packed, alone = [], []
        for _ in range(args.repeats):
            rows = []
            packed.append(timed(lambda: rows.extend(train_pack(cfgs, device="cpu"))))
            assert all(r["epochs"] == args.epochs for r in rows), "a trial stopped early"
            alone.append(timed(lambda: [train_pack([c], device="cpu") for c in cfgs]))
        tp, ta = p / statistics.median(packed), p / statistics.median(alone)
        print(f"| {p} | {tp:.1f} | {ta:.1f} | {tp / ta:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
