"""GPU path check and throughput: run where a CUDA device exists (exits 2 otherwise).

1. Check: a pack of sparse-AND trials trained on CUDA (float32) reaches the same epochs and
   test accuracy (within 1e-3) as on the CPU, and the bfloat16 mixed-precision pack trains.
2. Stacked against one by one: for each model of bench/packing.py (the tiny transformer and
   the MLP on parity, T = 16; the generic and inner-product symmetry students, d = 8), a
   stacked pack of P trials on CUDA against the same trials one after the other on the
   per-trial path, also on CUDA (where each trial's tiny kernels leave the device waiting).
3. Throughput: trials/s of one-layer transformer packs on CUDA against pack size, float32
   and bfloat16, at T = 64 and 1024 (m = 256, 100 full-batch epochs, no early stop), with
   the peak CUDA memory per pack beside the pack-size estimate of workers/memory.py.

Usage: ``python bench/gpu.py [--sizes 1 8 64 256] [--epochs 100] [--stacked-sizes 32 256]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from attnsweep.workers import BooleanTrialConfig, train_pack
from attnsweep.workers.memory import boolean_trial_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/packing.py's trials


def check() -> None:
    cfgs = [
        BooleanTrialConfig(task="and", T=16, s=2, m=128, seed=i, d=16, heads=2, lr=3e-3, max_epochs=200, n_test=500)
        for i in range(4)
    ]
    cpu, gpu = train_pack(cfgs, device="cpu"), train_pack(cfgs, device="cuda")
    for a, b in zip(cpu, gpu):
        assert b["device"].startswith("cuda") and a["status"] == b["status"] == "done", (a, b)
        assert a["epochs"] == b["epochs"] and abs(a["test_acc"] - b["test_acc"]) <= 1e-3, (a, b)
    bf16 = train_pack([c.model_copy(update={"precision": "bfloat16"}) for c in cfgs], device="cuda")
    assert all(r["status"] == "done" and r["test_acc"] >= 0.9 for r in bf16), bf16
    print("check: CUDA float32 pack equals the CPU pack; bfloat16 pack trains")


def stacked_against_one_by_one(sizes: list[int], epochs: int, alone: int = 8) -> None:
    from packing import configs  # bench/packing.py: the same trials as on the CPU

    print(f"\n{torch.cuda.get_device_name()}: stacked against one by one, {epochs} epochs\n")
    print("| model | pack size | stacked trials/s | one by one trials/s | speed-up |")
    print("|---|---|---|---|---|")
    for model in ("transformer", "mlp", "generic", "inner"):
        for p in sizes:
            cfgs = configs(model, p, epochs)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            _train_cuda(model, cfgs, True)
            torch.cuda.synchronize()
            ts = p / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            for c in cfgs[:alone]:
                _train_cuda(model, [c], False)
            torch.cuda.synchronize()
            ta = min(alone, p) / (time.perf_counter() - t0)
            print(f"| {model} | {p} | {ts:.1f} | {ta:.1f} | {ts / ta:.1f}x |", flush=True)


def _train_cuda(model: str, cfgs: list, stacked: bool) -> list[dict]:
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    if model in ("transformer", "mlp"):
        return train_pack(cfgs, device="cuda", stacked=stacked)
    return train_symmetry_pack(cfgs, device="cuda", stacked=stacked)


def throughput(sizes: list[int], epochs: int) -> None:
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, {epochs} epochs, parity s=3 (no early stop)\n")
    print("| T | precision | pack size | trials/s | peak CUDA MiB per trial | estimate MiB per trial |")
    print("|---|---|---|---|---|---|")
    for T in (64, 1024):
        for precision in ("float32", "bfloat16"):
            for p in sizes:
                cfgs = [
                    BooleanTrialConfig(
                        task="parity",
                        T=T,
                        s=3,
                        m=256,
                        seed=i,
                        d=32,
                        heads=4,
                        max_epochs=epochs,
                        n_test=1000,
                        precision=precision,
                        reject_ambiguous=False,
                    )
                    for i in range(p)
                ]
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                train_pack(cfgs, device="cuda")
                torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                peak = torch.cuda.max_memory_allocated() / 2**20 / p
                print(
                    f"| {T} | {precision} | {p} | {p / dt:.1f} | {peak:.1f} | {boolean_trial_bytes(cfgs[0]) / 2**20:.1f} |",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64, 256])
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--stacked-sizes", type=int, nargs="+", default=[32, 256])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        sys.exit(2)
    train_pack([BooleanTrialConfig(task="and", T=8, s=1, m=8, seed=0, max_epochs=1)], device="cuda")  # CUDA start-up
    check()
    stacked_against_one_by_one(args.stacked_sizes, args.epochs)
    throughput(args.sizes, args.epochs)


if __name__ == "__main__":
    main()
