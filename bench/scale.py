"""attnsweep at 1k, 10k and 100k tiny trials: throughput, orchestration overhead per trial,
and the driver's peak memory.

Each size runs in a fresh subprocess: a local Ray is started (not timed), then one
``run_sweep`` of N tiny trials (sweeps/tiny-100k.yaml with its seed count cut to N/40) on
``RayExecutor`` workers is timed end to end, store writes included. From the rows:

* compute = the sum over trials of ``wall_s`` (each pack's training seconds divided over its
  trials), i.e. the seconds workers spent training;
* overhead per trial = (wall - compute / workers) / N: everything that is not training:
  expansion, hashing, packing, Ray calls, worker start-up, Parquet writes, progress;
* peak driver memory = ``ru_maxrss`` of the driver process (Ray's own daemons are other
  processes and are not counted);
* the store must hold exactly N rows with N distinct trial ids, or the script fails.

Usage: ``python bench/scale.py [--sizes 1000 10000 100000] [--repeats 3] [--out scale.json]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "sweeps" / "tiny-100k.yaml"
CELLS = 40  # the grid of tiny-100k.yaml without its seeds


def child(n: int, workers: str) -> dict:
    import ray
    from rich.console import Console

    from attnsweep.orchestrator import RayExecutor, parse_spec, run_sweep
    from attnsweep.results import ResultsStore

    text = SPEC.read_text().replace("seeds: 2500", f"seeds: {max(1, n // CELLS)}")
    text = text.replace("pack_size: auto", f"pack_size: auto\n  workers: {workers}")
    spec = parse_spec(text)
    ray.init(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)
    executor = RayExecutor(spec.execution, None, spec.resources)
    slots = executor.slots()
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultsStore(tmp)
        t0 = time.perf_counter()
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
        wall = time.perf_counter() - t0
        executor.shutdown()
        rows = store.scan_trials().select("trial_id", "wall_s", "pack_size").collect()
        files = sum(1 for _ in Path(tmp, "trials").rglob("*.parquet"))
    ray.shutdown()
    if rows.height != spec.n_trials() or rows["trial_id"].n_unique() != spec.n_trials():
        raise SystemExit(
            f"store holds {rows.height} rows / {rows['trial_id'].n_unique()} ids for {spec.n_trials()} trials"
        )
    compute = float(rows["wall_s"].sum())
    return dict(
        n=spec.n_trials(),
        workers=workers,
        slots=slots,
        wall_s=wall,
        compute_s=compute,
        trials_per_s=spec.n_trials() / wall,
        overhead_ms=1e3 * (wall - compute / slots) / spec.n_trials(),
        mean_pack=float(rows["pack_size"].mean()),
        part_files=files,
        counts=dict(summary.counts),
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


def machine() -> str:
    with open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    import ray
    import torch

    return (
        f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, ray {ray.__version__}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default="actors", choices=["actors", "tasks"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.workers)))
        return
    runs = []
    for rep in range(args.repeats):
        for n in args.sizes:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n), "--workers", args.workers],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=True,
            )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"repeat {rep}: {runs[-1]}", file=sys.stderr)
    print(f"machine: {machine()}\n")
    print("| trials | wall (s) | trials/s | overhead per trial (ms) | mean pack | part files | peak driver RSS (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        mine = [r for r in runs if r["n"] == n] or [r for r in runs if abs(r["n"] - n) < CELLS]
        med = {
            k: statistics.median(r[k] for r in mine)
            for k in (
                "wall_s",
                "trials_per_s",
                "overhead_ms",
                "mean_pack",
                "part_files",
                "peak_rss_mib",
            )
        }
        print(
            f"| {mine[0]['n']} | {med['wall_s']:.1f} | {med['trials_per_s']:.0f} | {med['overhead_ms']:.2f} | "
            f"{med['mean_pack']:.0f} | {med['part_files']:.0f} | {med['peak_rss_mib']:.0f} |"
        )
    if args.out:
        args.out.write_text(json.dumps(dict(machine=machine(), runs=runs), indent=1))


if __name__ == "__main__":
    main()
