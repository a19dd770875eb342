"""Where a pack's time goes at large T: a profile of one pack, split by phase.

Trains one pack of sparse-Boolean trials under cProfile and reports the wall time of
each phase as a share of the pack: data generation (training sets), the ambiguity
check, model set-up, the training loop (forward, backward, AdamW), the norm projection,
and evaluation (test-set generation and the test forward). Also prints trials per
second per core of the pack.

    python bench/pack_profile.py [--T 8192] [--m 128] [--pack 8] [--n-test 10000] [--norm-bound B]
        [--model transformer|mlp] [--threads N]
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import time

import torch

from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.train_boolean import train_pack

# Phase -> (file suffix, function name) whose cumulative time is the phase's.
PHASES = {
    "training sets (draw)": ("tasks/boolean.py", "sample_training_set"),
    "ambiguity check": ("tasks/boolean.py", "is_ambiguous"),
    "model set-up": (
        "workers/train_boolean.py",
        "__init__",
    ),  # _Trial: a trial's model, optimiser and tables
    "norm projection": ("workers/norms.py", "project_transformer"),
    "norm projection (MLP)": ("workers/norms.py", "project_mlp"),
    "evaluation: test-set draw": ("tasks/boolean.py", "test_chunks"),
    "evaluation: forward": ("workers/train_boolean.py", "_evaluate"),
    "achieved norms": ("workers/norms.py", "transformer_norms"),
    "achieved norms (MLP)": ("workers/norms.py", "mlp_norms"),
}


def _cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    return sum(v[3] for (f, _, fn), v in stats.stats.items() if f.endswith(suffix) and fn == name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--pack", type=int, default=8)
    ap.add_argument("--n-test", type=int, default=10_000)
    ap.add_argument("--norm-bound", type=float, default=None)
    ap.add_argument("--model", choices=["transformer", "mlp"], default="transformer")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    configs = [
        BooleanTrialConfig(
            task="and",
            T=args.T,
            s=3,
            m=args.m,
            seed=i,
            n_test=args.n_test,
            d=32,
            heads=4,
            lr=3e-3,
            max_epochs=1000,
            norm_bound=args.norm_bound,
            model=args.model,
        )
        for i in range(args.pack)
    ]
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    rows = train_pack(configs, device="cpu")
    profile.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(profile)
    times = {phase: _cumulative(stats, *where) for phase, where in PHASES.items()}
    # The test-set draw runs inside _evaluate's loop (a generator), and the ambiguity
    # check inside the draw: report each phase without the ones nested in it.
    times["evaluation: forward"] -= times["evaluation: test-set draw"]
    times["training sets (draw)"] -= times["ambiguity check"]
    times["training loop"] = wall - sum(times.values())
    threads = torch.get_num_threads()
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, threads {threads}; "
        f"{args.model}, T={args.T}, m={args.m}, pack of {args.pack}, n_test={args.n_test}, norm bound {args.norm_bound}"
    )
    print(
        f"# epochs per trial: {[r['epochs'] for r in rows]}; test accuracy: {[round(r['test_acc'] or 0, 3) for r in rows]}"
    )
    print("| phase | seconds | share of the pack |")
    print("|---|---|---|")
    for phase, t in sorted(((p, t) for p, t in times.items() if t > 0 or "MLP" not in p), key=lambda kv: -kv[1]):
        print(f"| {phase} | {t:.2f} | {100 * t / wall:.1f}% |")
    print(f"| **pack** | {wall:.2f} | 100% |")
    print(
        f"trials per second per core: {args.pack / wall / threads:.3f} "
        f"(trial-epochs per second per core: {sum(r['epochs'] for r in rows) / wall / threads:.1f})"
    )


if __name__ == "__main__":
    main()
