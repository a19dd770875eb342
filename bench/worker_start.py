"""What a sweep of the peers' trials costs before any training: cold workers against warm ones.

Runs bench/peers.py's attnsweep sweep (N trials) twice through one RayExecutor in one process:
the first sweep starts the workers (a Ray worker process importing torch and attnsweep's
worker modules, every worker at once), the second finds them warm. The difference is the
start-up that every method of bench/peers.py pays inside its timing, attnsweep and its peers
alike; it bounds how far ahead of them attnsweep can be at that N. Also reports how long
importing the worker module takes in a fresh interpreter (``python -X importtime``), and
torch's share of it.

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


def import_seconds() -> tuple[float, float]:
    """Seconds to import attnsweep.workers.entry in a fresh interpreter, and torch's part of it."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import attnsweep.workers.entry"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    cumulative = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and m.group(3) not in cumulative:
            cumulative[m.group(3)] = int(m.group(1)) / 1e6
    return cumulative["attnsweep.workers.entry"], cumulative.get("torch", 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    colds, warms, imports, torches = [], [], [], []
    for _ in range(args.rounds):
        cold, warm = sweeps(args.n)
        colds.append(cold)
        warms.append(warm)
        whole, torch_part = import_seconds()
        imports.append(whole)
        torches.append(torch_part)
    med = statistics.median
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {args.n} trials, median of {args.rounds} rounds")
    print(f"sweep on cold workers: {med(colds):.2f} s ({', '.join(f'{c:.2f}' for c in colds)})")
    print(f"the same sweep on warm workers: {med(warms):.2f} s ({', '.join(f'{w:.2f}' for w in warms)})")
    print(f"start-up (cold - warm): {med(colds) - med(warms):.2f} s")
    print(f"import attnsweep.workers.entry in a fresh interpreter: {med(imports):.2f} s, torch {med(torches):.2f} s")


if __name__ == "__main__":
    main()
