"""Stacked packs against the same trials one by one, per model, in one process on one thread.

For each model and pack size P, P trials (seeds 0..P-1 of one setting that never fits within
the budget, so every trial runs exactly ``--epochs`` full-batch epochs) are trained (a) as one
stacked pack, ``train_pack(configs)`` (workers/stacked.py), and (b) one after another on the
per-trial path, ``train_pack([c], stacked=False)``, side by side in one run. (b) is timed on
the first ``--alone`` trials of the pack and reported per trial (it is linear in the trials).
Reported: trials/s of each and their ratio, median of ``--repeats``.

Models: the tiny transformer and the MLP of the sparse-Boolean experiment (3-sparse parity,
T = 16, m = 64; the transformer d = 16, 2 heads, one layer), and the generic transformer and
inner-product students of the symmetry experiment (equivariant teacher, d = 8, n = 6, k = 4,
m = 64).

Usage: ``python bench/packing.py [--models transformer mlp generic inner] [--sizes 32 64 256]
[--epochs 50] [--alone 16] [--repeats 1]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig, train_pack
from attnsweep.workers.train_symmetry import train_symmetry_pack


def configs(model: str, p: int, epochs: int) -> list:
    if model in ("transformer", "mlp"):
        # 3-sparse parity on 16 bits from 64 samples does not fit within the budget, so no
        # trial stops early and both ways run the same number of steps.
        return [
            BooleanTrialConfig(
                task="parity",
                T=16,
                s=3,
                m=64,
                seed=i,
                d=16,
                heads=2,
                model=model,
                mlp_width=64,
                max_epochs=epochs,
                n_test=256,
            )
            for i in range(p)
        ]
    student = dict(model="transformer", equivariance="none" if model == "generic" else "orthogonal")
    return [
        SymmetryTrialConfig(
            teacher="equivariant",
            n=6,
            k=4,
            d=8,
            m=64,
            seed=i,
            max_epochs=epochs,
            n_test=256,
            **student,
        )
        for i in range(p)
    ]


def train(model: str, cfgs: list, stacked: bool) -> list[dict]:
    if model in ("transformer", "mlp"):
        return train_pack(cfgs, device="cpu", stacked=stacked)
    return train_symmetry_pack(cfgs, device="cpu", stacked=stacked)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["transformer", "mlp", "generic", "inner"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 256])
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--alone", type=int, default=16, help="trials timed one by one per measurement")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
        f"1 thread, {args.epochs} full-batch epochs, median of {args.repeats}\n"
    )
    print("| model | pack size | stacked trials/s | one by one trials/s | speed-up |")
    print("|---|---|---|---|---|")
    for model in args.models:
        train(model, configs(model, 2, 2), True)  # warm-up: first-call costs out of the numbers
        train(model, configs(model, 1, 2), False)
        for p in args.sizes:
            cfgs = configs(model, p, args.epochs)
            stacked, alone = [], []
            for _ in range(args.repeats):
                rows: list[dict] = []
                stacked.append(timed(lambda: rows.extend(train(model, cfgs, True))) / p)
                assert all(r["status"] == "done" and not r["converged"] for r in rows), "a trial stopped early"
                few = cfgs[: args.alone]
                alone.append(timed(lambda: [train(model, [c], False) for c in few]) / len(few))
            ts, ta = 1 / statistics.median(stacked), 1 / statistics.median(alone)
            print(f"| {model} | {p} | {ts:.1f} | {ta:.1f} | {ts / ta:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
