"""What a sweep of the peers' trials costs before any training: cold workers against warm ones.

Runs bench/peers.py's attnsweep sweep (N trials) twice through one RayExecutor in one process:
the first sweep starts the workers (a Ray worker process importing torch and attnsweep's
worker modules, every worker at once), the second finds them warm. The difference is the
start-up that every method of bench/peers.py pays inside its timing, attnsweep and its peers
alike; it bounds how far ahead of them attnsweep can be at that N. Also reports how long
importing what a worker loads before its first pack takes in a fresh interpreter (``python -X
importtime``: the worker module and the sparse-Boolean training code), and torch's share of it.

Then the path a user takes, ``attnsweep.run`` in a fresh process that has imported nothing
(Ray started by the run, the driver never importing torch), for two sweeps of N trials: the
peers' (one cell) and the same trials over four cells listed largest first (m = 1024, 512,
256, 128; N/4 seeds each, so four packs on two workers). For each: the process's seconds
from its start to the run's return, the seconds from its start to the first row stored, and
whether the driver process imported torch.

    python bench/worker_start.py [--n 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path


def sweeps(n: int) -> tuple[float, float]:
    """Seconds of a sweep on cold workers, then of the same sweep on the warm ones (fresh process)."""
    code = f"""
import io, sys, tempfile, time
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import torch
torch.set_num_threads(1)
import ray
from peers import RAY_INIT, spec_yaml
ray.init(**RAY_INIT)
from rich.console import Console
from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.executors import RayExecutor
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore
with tempfile.TemporaryDirectory() as tmp:
    store = ResultsStore(tmp)
    t0 = time.perf_counter()
    ex = RayExecutor(parse_spec(spec_yaml({n})).execution, None, parse_spec(spec_yaml({n})).resources)
    run_sweep(parse_spec(spec_yaml({n})), store, ex, console=Console(file=io.StringIO()))
    t1 = time.perf_counter()
    run_sweep(parse_spec(spec_yaml({n}).replace("name: peers", "name: again")), store, ex,
              console=Console(file=io.StringIO()))
    t2 = time.perf_counter()
    ex.shutdown()
print("@@", t1 - t0, t2 - t1)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    cold, warm = (float(v) for v in out.split("@@")[-1].split())
    return cold, warm


def cells_yaml(n: int) -> str:
    """The peers' trials over four cells of m, listed largest first, n/4 seeds each."""
    from peers import spec_yaml

    return (
        spec_yaml(n // 4)
        .replace("name: peers", "name: cells")
        .replace("\n  m: 128", "")
        .replace("grid:\n", "grid:\n  m: [1024, 512, 256, 128]\n")
    )


def fresh_run(spec_text: str) -> tuple[float, float, bool]:
    """``attnsweep.run`` of a spec in a fresh process: seconds from the process's start to the
    run's return and to its first stored row, and whether the driver imported torch."""
    code = """
import io, sys, tempfile, time
import yaml
import attnsweep
from rich.console import Console
from attnsweep.results import ResultsStore
with tempfile.TemporaryDirectory() as tmp:
    summary = attnsweep.run(yaml.safe_load(sys.stdin.read()), tmp, console=Console(file=io.StringIO()))
    returned, torch = time.time(), "torch" in sys.modules
    first = ResultsStore(tmp).scan_run_trials(summary.sweep, summary.run_id)
    first = first.select("finished_at").collect()["finished_at"].min().timestamp()
print("@@", returned, first, torch, summary.counts["done"])
"""
    t0 = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code], input=spec_text, capture_output=True, text=True, check=True
    ).stdout
    returned, first, torch, _done = out.split("@@")[-1].split()
    return float(returned) - t0, float(first) - t0, torch == "True"


LOADED = ("attnsweep.workers.entry", "attnsweep.workers.train_boolean")
"""What a worker has imported when it trains its first sparse-Boolean pack (since 09898c8 the
entry module is light and the actor's constructor imports torch and the training code)."""


def import_seconds() -> tuple[float, float]:
    """Seconds to import :data:`LOADED` in a fresh interpreter, and torch's part of it."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {', '.join(LOADED)}"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    cumulative = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and m.group(3) not in cumulative:
            cumulative[m.group(3)] = int(m.group(1)) / 1e6
    return sum(cumulative[name] for name in LOADED), cumulative.get("torch", 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers import spec_yaml

    colds, warms, imports, torches = [], [], [], []
    fresh: dict[str, list[tuple[float, float, bool]]] = {"peers": [], "cells": []}
    for _ in range(args.rounds):
        cold, warm = sweeps(args.n)
        colds.append(cold)
        warms.append(warm)
        whole, torch_part = import_seconds()
        imports.append(whole)
        torches.append(torch_part)
        fresh["peers"].append(fresh_run(spec_yaml(args.n)))
        fresh["cells"].append(fresh_run(cells_yaml(args.n)))
    med = statistics.median
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {args.n} trials, median of {args.rounds} rounds")
    print(f"sweep on cold workers: {med(colds):.2f} s ({', '.join(f'{c:.2f}' for c in colds)})")
    print(f"the same sweep on warm workers: {med(warms):.2f} s ({', '.join(f'{w:.2f}' for w in warms)})")
    print(f"start-up (cold - warm): {med(colds) - med(warms):.2f} s")
    print(f"import {', '.join(LOADED)} in a fresh interpreter: {med(imports):.2f} s, torch {med(torches):.2f} s")
    for name, runs in fresh.items():
        total, first = [r[0] for r in runs], [r[1] for r in runs]
        print(
            f"attnsweep.run in a fresh process, {name}: {med(total):.2f} s ({', '.join(f'{t:.2f}' for t in total)}), "
            f"first row at {med(first):.2f} s ({', '.join(f'{t:.2f}' for t in first)}); "
            f"driver imported torch: {sorted({r[2] for r in runs})}"
        )


if __name__ == "__main__":
    main()
