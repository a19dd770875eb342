"""The one-layer training step against the path it replaced, side by side in one run.

For T = 1024, 8192, 65536 and d = 32, 64 (4 heads, m = 128, 3-way AND, lr 3e-3), trains
one pack of sparse-Boolean trials on today's code and on an earlier commit (``--before``,
checked out in a temporary git worktree, bench/worktree.py), each in a fresh process with
one thread, and reports trial-epochs per second per core. In the same run it measures the
attainable rate of the step's main product shape, ``(m, T) @ (T, H + d)`` float32 on one
thread, and states each path's products (the work a step cannot avoid) as a fraction of it.
Then it profiles the new step at T = 65536 (torch.profiler: where a step's time goes).

    python bench/train_step.py [--before 15fb5a3] [--Ts 1024 8192 65536] [--ds 32 64] [--m 128]

``--m`` sets the training-set size (128, the issue's reference size, by default; the fourth
decade trains at m = 256..1024, where the products are a larger part of a step).

Trials stop when they fit their training set, so a pack runs at most ``--epochs`` epochs
(scaled down with T) and the rate is the epochs its trials ran over its wall time; the test
set is 100 samples, so evaluation is a negligible part (``bench/pack_profile.py`` times it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worktree import ROOT, checkout, import_root, prefix  # noqa: E402

HEADS, M = 4, 128
CHILD = r"""
import importlib, json, sys, time, torch
torch.set_num_threads(1)
BooleanTrialConfig = importlib.import_module(sys.argv[5] + "workers.config").BooleanTrialConfig
try:  # the module's name before it said which experiment it trains
    train_pack = importlib.import_module(sys.argv[5] + "workers.train_boolean").train_pack
except ModuleNotFoundError:
    train_pack = importlib.import_module(sys.argv[5] + "workers.train").train_pack
T, d, P, E, M = map(int, sys.argv[1:5] + sys.argv[6:7])
warm = [BooleanTrialConfig(task="and", T=16, s=3, m=16, seed=0, n_test=100, max_epochs=2)]
train_pack(warm, "cpu")
configs = [BooleanTrialConfig(task="and", T=T, s=3, m=M, seed=i, n_test=100, d=d, heads=4, lr=3e-3,
                              max_epochs=E, reject_ambiguous=False) for i in range(P)]
t0 = time.perf_counter()
rows = train_pack(configs, "cpu")
wall = time.perf_counter() - t0
print(json.dumps(dict(wall=wall, epochs=sum(r["epochs"] or 0 for r in rows),
                      status=[r["status"] for r in rows], error=[r["error_type"] for r in rows])))
"""


def run_pack(code_root: Path, T: int, d: int, pack: int, epochs: int) -> dict:
    """One pack trained by the code at ``code_root`` in a fresh one-thread process."""
    env = dict(os.environ, PYTHONPATH=str(import_root(code_root)), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(T),
            str(d),
            str(pack),
            str(epochs),
            prefix(code_root),
            str(M),
        ],
        cwd=code_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def attainable(T: int, d: int, repeats: int = 20) -> float:
    """GFLOP/s of ``(m, T) @ (T, H + d)`` float32 on one thread: the best of ``repeats``."""
    torch.set_num_threads(1)
    a, b = torch.rand(M, T), torch.rand(T, HEADS + d)
    best = float("inf")
    for _ in range(repeats + 3):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * M * T * (HEADS + d) / best / 1e9


def products(T: int, d: int, one_hot: bool) -> float:
    """Floating-point operations of one trial-epoch's matrix products: the forward and the
    weight-gradient products over the m samples (over 2T one-hot columns before, T bits now),
    and the three over the 2T table rows (scores and values, their gradient, the
    projection's gradient)."""
    C = HEADS + d
    cols = 2 * T if one_hot else T
    return 2 * (2 * M * cols * C) + 3 * (2 * C * d * 2 * T)


def profile_step(T: int, d: int, steps: int) -> list[tuple[str, float]]:
    """torch.profiler's self time of each op over ``steps`` steps of one trial (share of the total)."""
    from torch.profiler import ProfilerActivity, profile

    from attnsweep import tasks
    from attnsweep.workers.config import BooleanTrialConfig
    from attnsweep.workers.train_boolean import _Trial

    torch.set_num_threads(1)
    c = BooleanTrialConfig(task="and", T=T, s=3, m=M, d=d, heads=HEADS, lr=3e-3, max_epochs=100, n_test=100, seed=0)
    batch, _, _ = tasks.sample_training_sets(
        c.task, T, c.s, M, [0], reject_ambiguous=False, max_redraws=1, device=torch.device("cpu")
    )
    trial = _Trial(c, batch.x[0], batch.y[0], torch.device("cpu"))
    for _ in range(2):
        trial.step(trial.x, batch.y[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            trial.step(trial.x, batch.y[0])
    events = [(e.key, e.self_cpu_time_total) for e in prof.key_averages()]
    total = sum(t for _, t in events)
    return [(k, t / total) for k, t in sorted(events, key=lambda kv: -kv[1])]


def main() -> None:
    global M
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--before",
        default="15fb5a3",
        help="the commit of the path replaced (default: the vmap pack)",
    )
    ap.add_argument("--Ts", type=int, nargs="+", default=[1024, 8192, 65536])
    ap.add_argument("--ds", type=int, nargs="+", default=[32, 64])
    ap.add_argument(
        "--epochs",
        type=int,
        default=60,
        help="most epochs per trial at T = 1024 (fewer at larger T)",
    )
    ap.add_argument("--profile-steps", type=int, default=10, help="0: no profile")
    ap.add_argument("--m", type=int, default=M, help="training-set size (samples per trial)")
    args = ap.parse_args()
    M = args.m
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"1 thread per process; m = {M}, {HEADS} heads, 3-way AND; before = {args.before}"
    )
    print(
        "| T | d | trials x epochs | before: trial-epochs/s | now: trial-epochs/s | speed-up | attainable GFLOP/s "
        "| before: products at | now: products at |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with checkout(args.before) as before:
        for T in args.Ts:
            for d in args.ds:
                pack, epochs = (8, args.epochs) if T <= 8192 else (2, max(5, args.epochs // 6))
                if T > 1024:
                    epochs = max(5, epochs // 2)
                old = run_pack(before, T, d, pack, epochs)
                new = run_pack(ROOT, T, d, pack, epochs)
                rate = attainable(T, d)
                r_old, r_new = old["epochs"] / old["wall"], new["epochs"] / new["wall"]
                f_old = r_old * products(T, d, one_hot=True) / 1e9 / rate
                f_new = r_new * products(T, d, one_hot=False) / 1e9 / rate
                print(
                    f"| {T} | {d} | {pack} x <= {epochs} | {r_old:.1f} | {r_new:.1f} | {r_new / r_old:.1f}x "
                    f"| {rate:.0f} | {f_old:.0%} | {f_new:.0%} |",
                    flush=True,
                )
    if args.profile_steps <= 0:
        return
    T = max(args.Ts)
    print(f"\n# where a step's time goes now: T = {T}, d = 32, {args.profile_steps} steps (torch.profiler, self time)")
    print("| op | share |")
    print("|---|---|")
    shares = profile_step(T, 32, args.profile_steps)
    for name, share in shares[:12]:
        print(f"| {name} | {share:.1%} |")
    print(f"| (the rest) | {sum(s for _, s in shares[12:]):.1%} |")


if __name__ == "__main__":
    main()
