"""The one-layer step when its scores spread beyond the float32 matmul form: the exact table
path through autograd (before) against the hand-written step in float64 (now), side by side.

A trial's score range max_h (M_h - L_h) passes 60 (``score_range_safe(float32)``) when its
query and key weights grow, as they do with a learning rate near 1e-2 at large T (the tuned
protocol, docs/findings/tuned-interrupted). Before, every such step went through
``forward_table`` and autograd over ``(m, T, H)`` tensors; now it takes the hand-written step
in float64 up to a range of 489. Both are timed on the same trial state (3-way AND, d = 32,
4 heads, the query and key weights scaled until the range passes 60), alternately, one
thread, in this process; the float32 step on the unscaled state is timed beside them as the
reference rate. Reported: ms per step, and the ratios.

    python bench/wide_scores.py [--Ts 2048 8192] [--ms 128 1024] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from attnsweep.workers import BooleanTrialConfig, one_layer
from attnsweep.workers import train_boolean as train_module
from attnsweep.workers.models import logistic_loss


def _trial(T: int, m: int, scale: float) -> train_module._Trial:
    c = BooleanTrialConfig(task="and", T=T, s=3, m=m, d=32, heads=4, lr=1e-2, seed=0, n_test=100)
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2, (m, T), generator=g, dtype=torch.uint8)
    trial = train_module._Trial(c, bits, torch.randint(0, 2, (m,), generator=g).float(), torch.device("cpu"))
    with torch.no_grad():
        trial.model.blocks[0].attn.q.weight.mul_(scale)
        trial.model.blocks[0].attn.k.weight.mul_(scale)
    return trial


def _table_step(trial: train_module._Trial) -> None:
    """What a step with scores too wide for float32 did before: the table path's autograd."""
    trial.opt.zero_grad(set_to_none=True)
    logistic_loss(trial.model.forward_table(trial.x), trial.y).backward()


def _float64_step(trial: train_module._Trial) -> None:
    trial.opt.zero_grad(set_to_none=True)
    trial._step_float64(trial.x, trial.y, stop_when_fit=False)


def _float32_step(trial: train_module._Trial) -> None:
    trial.step(trial.x, trial.y)


def _ms(fn, trial, steps: int) -> float:
    fn(trial)  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        fn(trial)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ts", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--ms", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench-wide-scores.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    print(
        "| T | m | score range | table path (before), ms/step | float64 step (now), ms/step | speed-up | "
        "float32 step, ms/step | float64 / float32 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for T in args.Ts:
        for m in args.ms:
            scale = 1.0
            while True:  # the smallest power-of-1.25 scale that puts the range past float32's limit
                wide = _trial(T, m, scale)
                with torch.no_grad():
                    rng = one_layer.tables(wide.tensors, 4).score_range
                if rng > 60:
                    break
                scale *= 1.25
            wide.opt.step = lambda: None  # the timed steps leave the state as it is
            plain = _trial(T, m, 1.0)
            plain.opt.step = lambda: None
            times = {"table": [], "float64": [], "float32": []}
            for _ in range(args.repeat):
                times["table"].append(_ms(_table_step, wide, args.steps))
                times["float64"].append(_ms(_float64_step, wide, args.steps))
                times["float32"].append(_ms(_float32_step, plain, args.steps))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append(dict(T=T, m=m, score_range=rng, **{f"{k}_ms": v for k, v in med.items()}))
            print(
                f"| {T} | {m} | {rng:.0f} | {med['table']:.1f} | {med['float64']:.1f} | "
                f"{med['table'] / med['float64']:.1f}x | {med['float32']:.1f} | {med['float64'] / med['float32']:.2f} |",
                flush=True,
            )
    args.out.write_text(json.dumps(dict(machine=platform.platform(), rows=rows), indent=2))


if __name__ == "__main__":
    main()
