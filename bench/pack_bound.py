"""How much faster a stacked pack could be at best, per model: the share of a lone trial's time
that does not grow with its samples, beside the speed-up stacking gives, in one run.

Stacking P trials pays once for what a trial's step costs whatever its size (Python, dispatch,
small-tensor bookkeeping) and P times for the arithmetic on its samples. A lone trial of m
samples takes ``a(m) = c + w m`` seconds per epoch and one of 2m takes ``c + 2 w m``, so its
sample work is ``w m = a(2m) - a(m)``. If a stacked pack removed every fixed cost and made the
sample work no cheaper, it would train ``a(m) / (a(2m) - a(m))`` times faster than the trials
one by one: that is the bound printed, next to the speed-up a pack of ``--pack`` measured (the
setting and models of bench/packing.py; one process, one thread, interleaved per round).

A stacked pack can beat the bound only where its kernels do the same sample work faster than
the lone trial's (wider products, for instance); where the measured speed-up sits near the
bound, what is left is arithmetic, which a CPU does no faster for being batched.

Usage: ``python bench/pack_bound.py [--models transformer mlp generic inner] [--pack 32]
[--epochs 50] [--alone 8] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from packing import configs, train  # bench/ is the script's own folder

FLOOR = 0.1
"""Shares of sample arithmetic below this are within the spread of a lone trial's epoch time
between runs here (1.19 and 1.57 ms for the tiny transformer at m = 64, two runs on one idle
machine), so they are printed as a bound, not a value."""


def per_epoch(model: str, cfgs: list, stacked: bool) -> float:
    """Seconds per trial-epoch of training ``cfgs`` (stacked as one pack, or one by one)."""
    t0 = time.perf_counter()
    rows = train(model, cfgs, True) if stacked else [r for c in cfgs for r in train(model, [c], False)]
    seconds = time.perf_counter() - t0
    assert all(r["status"] == "done" for r in rows), [r.get("error") for r in rows]
    return seconds / sum(r["epochs"] for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["transformer", "mlp", "generic", "inner"])
    ap.add_argument("--pack", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--alone", type=int, default=8, help="trials timed one by one, at m and at 2m")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
        f"1 thread, {args.epochs} epochs, median of {args.rounds} interleaved rounds\n"
    )
    print(
        "| model | m | lone, m: ms/epoch | lone, 2m: ms/epoch | sample work share | bound | "
        f"stacked {args.pack}: ms/trial-epoch | measured speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model in args.models:
        train(model, configs(model, 2, 2), True)  # first-call costs out of the numbers
        train(model, configs(model, 1, 2), False)
        pack = configs(model, args.pack, args.epochs)
        few = pack[: args.alone]
        double = [c.model_copy(update={"m": 2 * c.m}) for c in few]
        lone, lone2, stacked = [], [], []
        for _ in range(args.rounds):
            lone.append(per_epoch(model, few, False))
            lone2.append(per_epoch(model, double, False))
            stacked.append(per_epoch(model, pack, True))
        a, a2, st = (statistics.median(x) for x in (lone, lone2, stacked))
        share = (a2 - a) / a
        # Below the rounds' spread the difference says only that the arithmetic is small.
        work, bound = (
            (f"{share:.0%}", f"{1 / share:.1f}x") if share >= FLOOR else (f"< {FLOOR:.0%}", f"> {1 / FLOOR:.0f}x")
        )
        print(
            f"| {model} | {few[0].m} | {a * 1e3:.2f} | {a2 * 1e3:.2f} | {work} | {bound} | {st * 1e3:.2f} | {a / st:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
