"""The packing table: stacked packs against one by one on the cells sweeps really run, with the
rate each path reaches and the path the stacking rule picks (workers/stacking.py).

Cells: the median cell of each model of the quickstart, decades and theory sweeps (the middle
T of each grid list, the upper of the two middles for an even count; the middle m of a grid, or
of an adaptive search the geometric middle of its range, sqrt(m_min m_max) rounded; s, d and the
rest as the sweep fixes them), and the realistic cells of issue 47's table. Each cell's trials
run a fixed budget of ``--epochs`` full-batch epochs (``stop="budget"``, so both paths run the
same steps) and are scored on the sweep's n_test (scoring included in both paths' time).

Per cell, side by side in one process on one thread, interleaved: a pack of ``--pack`` trials
(seeds 0..P-1) trained stacked, ``train_pack(cfgs, stacked=True)``, and ``--alone`` of them one
after another on the per-trial path, ``train_pack([c], stacked=False)``; before each, a 1024 x
1024 float32 product's rate (GFLOP/s, 1 thread) measured beside. Per path: trials/s and the
GFLOP/s of the model's multiply-adds (2 flops each: every epoch's forward and backward on m
samples and the scoring forward on m + n_test; :func:`model_flops`).

Usage: ``python bench/packing_cells.py [--cells NAME ...] [--epochs 50] [--pack 32] [--alone 6]
[--repeats 2]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnsweep.workers import BooleanTrialConfig, train_pack
from attnsweep.workers.stacking import boolean_stacks, mlp_step_flops

SWEEP_T = dict(d=32, heads=4, layers=1, lr=3e-3, weight_decay=0.0)
MLP = dict(model="mlp", mlp_width=256, layers=1, lr=3e-3, weight_decay=0.0)
THEORY = dict(positions="fixed", ln_affine=False, norm_kind="frobenius", norm_bound=2.0)

CELLS: dict[str, dict] = {
    # median cells: quickstart (T 8..256 -> 64, m grid 8..512, 13 points -> 64; n_test 2000)
    "quickstart-transformer": dict(task="and", s=3, T=64, m=64, n_test=2000, model="transformer", **SWEEP_T),
    "quickstart-mlp": dict(task="and", s=3, T=64, m=64, n_test=2000, **MLP),
    # decades (transformer T 8..8192, 16 values -> 400; MLP T 8..256 -> 64; m search 8..1024 -> 91)
    "decades-transformer": dict(task="and", s=3, T=400, m=91, n_test=10000, model="transformer", **SWEEP_T),
    "decades-mlp": dict(task="and", s=3, T=64, m=91, n_test=10000, **MLP),
    # theory (T 4..2048, 10 values -> 128; m search 4..2048 -> 91; B in {1, 2} -> 2)
    "theory-transformer": dict(task="and", s=3, T=128, m=91, n_test=2000, model="transformer", **SWEEP_T, **THEORY),
    # issue 47's realistic cells
    "mlp-parity4-T16-m64": dict(task="parity", s=4, T=16, m=64, n_test=2000, **MLP),
    "mlp-parity4-T16-m128": dict(task="parity", s=4, T=16, m=128, n_test=2000, **MLP),
    "mlp-parity4-T16-m256": dict(task="parity", s=4, T=16, m=256, n_test=2000, **MLP),
    "mlp-and3-T64-m512": dict(task="and", s=3, T=64, m=512, n_test=2000, **MLP),
    "transformer-parity4-T16-m512": dict(task="parity", s=4, T=16, m=512, n_test=2000, model="transformer", **SWEEP_T),
    "transformer-and3-T64-m256": dict(task="and", s=3, T=64, m=256, n_test=2000, model="transformer", **SWEEP_T),
    "transformer-and3-T128-m512": dict(task="and", s=3, T=128, m=512, n_test=2000, model="transformer", **SWEEP_T),
    # where the MLP's rule turns (workers/stacking.py MLP_MAX_STEP_FLOPS): decades' MLP cells
    "mlp-and3-T128-m256": dict(task="and", s=3, T=128, m=256, n_test=10000, **MLP),
    "mlp-and3-T256-m256": dict(task="and", s=3, T=256, m=256, n_test=10000, **MLP),
    "mlp-and3-T128-m1024": dict(task="and", s=3, T=128, m=1024, n_test=10000, **MLP),
    "mlp-and3-T256-m1024": dict(task="and", s=3, T=256, m=1024, n_test=10000, **MLP),
}


def configs(cell: dict, p: int, epochs: int) -> list[BooleanTrialConfig]:
    return [BooleanTrialConfig(**cell, seed=i, max_epochs=epochs, stop="budget") for i in range(p)]


def model_flops(c: BooleanTrialConfig, epochs: int) -> int:
    """Flops (2 per multiply-add) of one trial: ``epochs`` training steps on its m samples and
    the scoring forward on m + n_test. The MLP: :func:`workers.stacking.mlp_step_flops` (its
    forward is a third of it at one layer, near enough). The one-layer CLS transformer per
    sample: keys and values of T + 1 tokens (2 (T + 1) d^2), the [CLS] query (d^2), scores and
    the weighted values (2 (T + 1) d), the feed-forward layer (8 d^2) and the readout (d);
    a training step 3x the forward (the backward's two products per forward product)."""
    if c.model == "mlp":
        step = mlp_step_flops(c.T, c.mlp_width, c.layers, c.m)
        forward = 2 * (c.m + c.n_test) * (c.T * c.mlp_width + (c.layers - 1) * c.mlp_width**2 + c.mlp_width)
        return epochs * step + forward
    d = c.d
    per_sample = 2 * (2 * (c.T + 1) * d * d + d * d + 2 * (c.T + 1) * d + 8 * d * d + d)
    return epochs * 3 * c.m * per_sample + (c.m + c.n_test) * per_sample


def matmul_rate(n: int = 1024, reps: int = 10) -> float:
    """GFLOP/s of an ``n x n`` float32 product on this thread (best of ``reps``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(cell: dict, args) -> dict:
    cfgs = configs(cell, args.pack, args.epochs)
    few = cfgs[: args.alone]
    paths = ["stacked", "alone"]
    # warm-up: first-call costs out of the numbers
    small = configs(cell, 2, 2)
    train_pack(small, device="cpu", stacked=True)
    train_pack(small[:1], device="cpu", stacked=False)
    secs: dict[str, list[float]] = {k: [] for k in paths}
    rates = []
    for _ in range(args.repeats):
        for path in paths:
            rates.append(matmul_rate())
            if path == "alone":
                secs[path].append(timed(lambda: [train_pack([c], device="cpu", stacked=False) for c in few]) / len(few))
                continue
            t0 = time.perf_counter()
            rows = train_pack(cfgs, device="cpu", stacked=True)
            secs[path].append((time.perf_counter() - t0) / len(cfgs))
            assert all(r["status"] == "done" for r in rows), rows[0].get("error")
    flops = model_flops(cfgs[0], args.epochs)
    out = {k: statistics.median(v) for k, v in secs.items()}
    return dict(seconds=out, flops=flops, matmul=statistics.median(rates), stacks=boolean_stacks(cfgs[0], "cpu"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--pack", type=int, default=32)
    ap.add_argument("--alone", type=int, default=6, help="trials timed one by one per measurement")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
        f"1 thread, {args.epochs} full-batch epochs, pack {args.pack}, {args.alone} one by one, "
        f"median of {args.repeats} interleaved\n"
    )
    print(
        "| cell | rule | stacked trials/s (GFLOP/s) | one by one trials/s (GFLOP/s) | stacked / one by one "
        "| 1024^2 matmul GFLOP/s | chosen path slower? |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.cells:
        r = measure(CELLS[name], args)
        s, f = r["seconds"], r["flops"]

        def cell(path: str, s=s, f=f) -> str:
            return f"{1 / s[path]:.1f} ({f / s[path] / 1e9:.1f})"

        ratio = s["alone"] / s["stacked"]
        slower = (ratio < 1) if r["stacks"] else (ratio > 1)
        print(
            f"| {name} | {'stacked' if r['stacks'] else 'one by one'} | {cell('stacked')} | {cell('alone')} "
            f"| {ratio:.2f}x | {r['matmul']:.0f} | {'**yes**' if slower else 'no'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
