"""GPU path check and throughput: run where a CUDA device exists (exits 2 otherwise).

The default run is one prepared run of at most ``--budget-s`` (480) seconds, the parts
``check busy rates invariance students`` (a part that would start past the budget is skipped and
said so):

* busy: device time over wall time for one pack of 256 tiny transformers (torch.profiler: the
  device's kernel time summed, against the wall time of the pack), with the host-device
  synchronisations and copies counted, at group sizes 32 and 256 (``execution.device_group``,
  workers/stacked.py);
* rates: trials/s of tiny-transformer packs of 32, 256 and 1024 at group sizes 32 and 256;
* invariance: a watched trial's row bit for bit alone, in a pack of 32 and in a pack of 256, at
  each group size (bench/gpu_invariance.py's comparison);
* students: trials/s of the generic and inner-product symmetry students in packs of 32 and 256
  at each group size.

The earlier parts below run when named in ``--parts``:

1. Check: a pack of sparse-AND trials trains on CUDA in float32 and in bfloat16 mixed
   precision, every trial fitting, beside the same pack on the CPU (epochs and test accuracy
   side by side: the training and test sets come from the device's own generator, so the
   numbers are not expected to match one to one, docs/claims.md).
2. Stacked against one by one: for each model of bench/packing.py (the tiny transformer and
   the MLP on parity, T = 16; the generic and inner-product symmetry students, d = 8), a
   stacked pack of P trials on CUDA against the same trials one after the other on the
   per-trial path, also on CUDA (where each trial's tiny kernels leave the device waiting).
3. Throughput: trials/s of one-layer transformer packs on CUDA against pack size, float32
   and bfloat16, at T = 64 and 1024 (m = 256, 100 full-batch epochs, no early stop), with
   the peak CUDA memory per pack beside the pack-size estimate of workers/memory.py.
4. Workers: trials/s of 1, 2, 4, 8 worker processes sharing the device, each training packs of 32
   (what ``resources.gpus_per_worker`` below 1 gives a sweep).
5. Profile: where a stacked pack of 256 tiny transformers spends its device and host time.

Each part runs even when one before it failed. Usage: ``python bench/gpu.py [--budget-s 480]
[--sizes 1 8 64 256] [--epochs 100] [--stacked-sizes 8 32 256] [--workers 1 2 4 8] [--parts check
busy rates invariance students stacked workers throughput profile]``; ``--device cpu`` is a dry
run of the script itself (``--pack-sizes 32 64 --groups 32 64`` keeps it short).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import torch

from attnsweep.workers import BooleanTrialConfig, train_pack
from attnsweep.workers.memory import boolean_trial_bytes
from attnsweep.workers.stacked import device_group

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/packing.py's trials


DEVICE = "cuda"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def device_name() -> str:
    return torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE


def check() -> None:
    cfgs = [
        BooleanTrialConfig(task="and", T=16, s=2, m=128, seed=i, d=16, heads=2, lr=3e-3, max_epochs=200, n_test=500)
        for i in range(4)
    ]
    cpu, gpu = train_pack(cfgs, device="cpu"), train_pack(cfgs, device=DEVICE)
    bf16 = train_pack([c.model_copy(update={"precision": "bfloat16"}) for c in cfgs], device=DEVICE)
    print(
        f"\ncheck on {device_name()}: seed, then status / epochs / test accuracy on the CPU, {DEVICE} float32, {DEVICE} bfloat16\n"
    )
    for c, a, b, h in zip(cfgs, cpu, gpu, bf16):
        print(" | ".join([str(c.seed)] + [f"{r['status']} / {r['epochs']} / {r['test_acc']:.3f}" for r in (a, b, h)]))
    assert all(r["device"].startswith(DEVICE) for r in gpu + bf16), gpu
    assert all(r["status"] == "done" and r["converged"] and r["test_acc"] >= 0.9 for r in cpu + gpu + bf16)
    print("check: every trial fits its training set and scores >= 0.9 on each device and precision")


def stacked_against_one_by_one(sizes: list[int], epochs: int, alone: int = 8) -> None:
    from packing import configs  # bench/packing.py: the same trials as on the CPU

    print(f"\n{device_name()}: stacked against one by one, {epochs} epochs\n")
    print("| model | pack size | stacked trials/s | one by one trials/s | speed-up |")
    print("|---|---|---|---|---|")
    for model in ("transformer", "mlp", "generic", "inner"):
        for p in sizes:
            cfgs = configs(model, p, epochs)
            sync()
            t0 = time.perf_counter()
            _train(model, cfgs, True)
            sync()
            ts = p / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            for c in cfgs[:alone]:
                _train(model, [c], False)
            sync()
            ta = min(alone, p) / (time.perf_counter() - t0)
            print(f"| {model} | {p} | {ts:.1f} | {ta:.1f} | {ts / ta:.1f}x |", flush=True)


def _train(model: str, cfgs: list, stacked: bool) -> list[dict]:
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    if model in ("transformer", "mlp"):
        return train_pack(cfgs, device=DEVICE, stacked=stacked)
    return train_symmetry_pack(cfgs, device=DEVICE, stacked=stacked)


def throughput(sizes: list[int], epochs: int) -> None:
    print(f"\n{device_name()}, torch {torch.__version__}, {epochs} epochs, parity s=3 (no early stop)\n")
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
                sync()
                if DEVICE == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                train_pack(cfgs, device=DEVICE)
                sync()
                dt = time.perf_counter() - t0
                peak = torch.cuda.max_memory_allocated() / 2**20 / p if DEVICE == "cuda" else float("nan")
                print(
                    f"| {T} | {precision} | {p} | {p / dt:.1f} | {peak:.1f} | {boolean_trial_bytes(cfgs[0]) / 2**20:.2f} |",
                    flush=True,
                )


def profile(p: int = 256, epochs: int = 50) -> None:
    """Where a stacked pack's time goes on the device: torch.profiler over one pack of ``p`` tiny
    transformer trials, the top operators by device time and by host time, and how often the
    host waited for the device (synchronisations)."""
    from packing import configs
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cfgs = configs("transformer", p, epochs)
    train_pack(cfgs[:2], device=DEVICE)  # warm
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    sync()
    t0 = time.perf_counter()
    with torch_profile(activities=activities) as prof:
        train_pack(cfgs, device=DEVICE)
        sync()
    print(
        f"\n{device_name()}: profile of a stacked pack of {p} tiny transformers, {epochs} epochs, {time.perf_counter() - t0:.2f} s\n"
    )
    table = prof.key_averages()
    key = "self_device_time_total" if DEVICE == "cuda" else "self_cpu_time_total"
    print(table.table(sort_by=key, row_limit=15, max_name_column_width=50))
    print(table.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50))


SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
COPY_NAMES = ("cudaMemcpy", "cudaMemcpyAsync", "Memcpy DtoH", "Memcpy HtoD")


def busy(groups: list[int], p: int = 256, epochs: int = 100) -> None:
    """Device time over wall time for one stacked pack of ``p`` tiny transformers (bench/packing.py's
    trials) at each group size, with the synchronisations and copies the profiler saw."""
    from packing import configs
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cfgs = configs("transformer", p, epochs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    print(f"\n{device_name()}: one pack of {p} tiny transformers, {epochs} epochs, under torch.profiler\n")
    print("| group size | wall s | device s | device / wall | synchronisations | copies | trials/s |")
    print("|---|---|---|---|---|---|---|")
    for g in groups:
        with device_group(g):
            train_pack(cfgs[:2], device=DEVICE)  # kernels loaded for this shape
            sync()
            t0 = time.perf_counter()
            with torch_profile(activities=activities) as prof:
                train_pack(cfgs, device=DEVICE)
                sync()
            wall = time.perf_counter() - t0
        events = prof.key_averages()
        device_s = sum(getattr(e, "self_device_time_total", 0.0) for e in events) / 1e6
        syncs = sum(e.count for e in events if e.key in SYNC_NAMES)
        copies = sum(e.count for e in events if e.key in COPY_NAMES)
        print(
            f"| {g} | {wall:.2f} | {device_s:.3f} | {device_s / wall:.1%} | {syncs} | {copies} | {p / wall:.1f} |",
            flush=True,
        )


def rates(groups: list[int], sizes: list[int], epochs: int = 100) -> None:
    """Trials/s of stacked packs of tiny transformers (bench/packing.py's trials) against pack
    size, at each group size; the issue's reference: 47.5 trials/s for a pack of 256 in groups
    of 32 on an H200 (BENCHMARKS.md, 246a623)."""
    from packing import configs

    print(f"\n{device_name()}: tiny transformers, {epochs} epochs, trials/s\n")
    print("| pack size | " + " | ".join(f"group {g}" for g in groups) + " |")
    print("|---|" + "---|" * len(groups))
    for p in sizes:
        cells = []
        for g in groups:
            cfgs = configs("transformer", p, epochs)
            with device_group(g):
                train_pack(cfgs[:2], device=DEVICE)
                sync()
                t0 = time.perf_counter()
                train_pack(cfgs, device=DEVICE)
                sync()
            cells.append(f"{p / (time.perf_counter() - t0):.1f}")
        print(f"| {p} | " + " | ".join(cells) + " |", flush=True)


def invariance(groups: list[int], sizes: list[int]) -> None:
    """A watched trial's row alone, in a pack of each size (last slot), bit for bit, at each
    group size (bench/gpu_invariance.py's trials and comparison)."""
    from gpu_invariance import BOOLEAN, boolean_configs, compare

    print(f"\n{device_name()}: the watched trial's row alone against packs, bit for bit\n")
    print("| model | group size | pack size | bit for bit | largest relative difference |")
    print("|---|---|---|---|---|")
    for name in ("one-layer transformer", "MLP"):
        base = boolean_configs(BOOLEAN[name])  # 64 trials; bigger packs repeat their seeds
        watched = base[3]
        for g in groups:
            with device_group(g):
                alone = train_pack([watched], device=DEVICE, stacked=True)[0]
                for p in sizes:
                    others = [watched.model_copy(update={"seed": 1000 + i}) for i in range(p - 1)]
                    row = train_pack([*others, watched], device=DEVICE, stacked=True)[-1]
                    same, worst, _ = compare(alone, row)
                    print(f"| {name} | {g} | {p} | {'yes' if same else 'NO'} | {worst:.1e} |", flush=True)


def students(groups: list[int], sizes: list[int], epochs: int = 100) -> None:
    """Trials/s of the symmetry students stacked (bench/packing.py's trials) at each group size."""
    from packing import configs

    print(f"\n{device_name()}: symmetry students stacked, {epochs} epochs, trials/s\n")
    print("| student | pack size | " + " | ".join(f"group {g}" for g in groups) + " |")
    print("|---|---|" + "---|" * len(groups))
    for model in ("generic", "inner"):
        for p in sizes:
            cells = []
            for g in groups:
                cfgs = configs(model, p, epochs)
                with device_group(g):
                    _train(model, cfgs[:2], True)
                    sync()
                    t0 = time.perf_counter()
                    _train(model, cfgs, True)
                    sync()
                cells.append(f"{p / (time.perf_counter() - t0):.1f}")
            print(f"| {model} | {p} | " + " | ".join(cells) + " |", flush=True)


def _worker(model: str, p: int, epochs: int, packs: int, device: str, barrier, out) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from packing import configs

    global DEVICE
    DEVICE = device
    cfgs = configs(model, p, epochs)
    _train(model, cfgs[:1], True)  # CUDA start-up
    barrier.wait()
    sync()
    t0 = time.perf_counter()
    for _ in range(packs):
        _train(model, cfgs, True)
    sync()
    out.put(time.perf_counter() - t0)


def workers_per_device(counts: list[int], epochs: int, p: int = 32, packs: int = 4) -> None:
    """Trials/s of several worker processes sharing the device, each training ``packs`` packs of
    ``p`` trials one after another: what ``resources.gpus_per_worker`` below 1 gives a sweep."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    print(f"\n{device_name()}: worker processes sharing it, each {packs} packs of {p}, {epochs} epochs\n")
    print("| model | workers | trials/s | against one worker |")
    print("|---|---|---|---|")
    for model in ("transformer", "generic"):
        one = None
        for n in counts:
            barrier, out = ctx.Barrier(n), ctx.Queue()
            procs = [
                ctx.Process(target=_worker, args=(model, p, epochs, packs, DEVICE, barrier, out)) for _ in range(n)
            ]
            for proc in procs:
                proc.start()
            slowest = max(out.get() for _ in procs)
            for proc in procs:
                proc.join()
            rate = n * packs * p / slowest
            one = one or rate
            print(f"| {model} | {n} | {rate:.1f} | {rate / one:.1f}x |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64, 256])
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--stacked-sizes", type=int, nargs="+", default=[8, 32, 256])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--groups", type=int, nargs="+", default=[32, 256], help="group sizes (execution.device_group)")
    ap.add_argument("--pack-sizes", type=int, nargs="+", default=[32, 256, 1024], help="for rates")
    ap.add_argument("--busy-pack", type=int, default=256)
    ap.add_argument("--budget-s", type=float, default=480.0, help="no part starts after this many seconds")
    ap.add_argument("--parts", nargs="+", default=["check", "busy", "rates", "invariance", "students"])
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        sys.exit(2)
    start = time.perf_counter()
    train_pack([BooleanTrialConfig(task="and", T=8, s=1, m=8, seed=0, max_epochs=1)], device=DEVICE)  # CUDA start-up
    small = [p for p in args.pack_sizes if p <= max(args.groups)] or args.pack_sizes[:1]
    parts = {
        "check": check,
        "busy": lambda: busy(args.groups, args.busy_pack, args.epochs),
        "rates": lambda: rates(args.groups, args.pack_sizes, args.epochs),
        "invariance": lambda: invariance(args.groups, small),
        "students": lambda: students(args.groups, small, args.epochs),
        "stacked": lambda: stacked_against_one_by_one(args.stacked_sizes, args.epochs),
        "throughput": lambda: throughput(args.sizes, args.epochs),
        "profile": profile,
        "workers": lambda: workers_per_device(args.workers, args.epochs),
    }
    failed, skipped = [], []
    for name in args.parts:
        if time.perf_counter() - start > args.budget_s:
            skipped.append(name)
            continue
        try:
            parts[name]()
        except Exception:  # noqa: BLE001 - a failed part is printed, and the others still run
            traceback.print_exc()
            failed.append(name)
    print(
        f"\n{time.perf_counter() - start:.0f} s in all"
        + (f"; skipped past the budget: {' '.join(skipped)}" if skipped else "")
    )
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
