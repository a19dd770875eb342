"""attnsweep against its peers: the same N tiny training trials, five ways.

Every method trains the same trials: ``BooleanTrialConfig(**TRIAL, seed=i)`` for
i = 0..N-1 (a 1-layer, d=16 transformer on 4-sparse parity of 16 bits, 128 samples,
100 full-batch steps; no trial fits its training set early, so all run 100 steps).
(a)-(d) train one trial per call on the per-trial path, ``train_pack([cfg], device="cpu",
stacked=False)``, as a user of those tools would (a lone trial on the stacked path would pay
for a whole lane group of padding); attnsweep packs trials as its spec's defaults say.

  tune_default  Ray Tune, defaults: Tuner over a function trainable, grid over the seed,
                default TuneConfig/RunConfig (a new actor per trial, CSV/JSON loggers,
                progress output); only storage_path moved to a temp dir.
  tune_fast     Ray Tune, fastest settings for many short trials: reuse_actors=True,
                max_concurrent_trials = CPUs, verbose=0, TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1,
                TUNE_GLOBAL_CHECKPOINT_S=100 (as Ray's bookkeeping-overhead benchmark).
  ray_tasks     plain Ray: one @ray.remote task per trial, submit all, ray.get all.
  sequential    one process, one trial after another, no Ray.
  attnsweep     one sweep through orchestrator.driver.run_sweep on a RayExecutor, rows
                streamed into a Parquet store in a temp dir (included in the time).

Each run is a fresh Python subprocess, so no method inherits another's warm workers. It
starts Ray (not timed; the same ray.init arguments for every Ray method), times its
method from the first submission to all N results back (wall clock, perf_counter; for Tune
from building the Tuner to fit() returning), checks the rows (N rows, seeds 0..N-1, status
'done', 100 epochs each) and prints one JSON line. Torch uses one thread in every worker
and in the sequential process; the sequential process imports torch before the clock
starts (as any script would), Ray workers inside the timed section (as they must). The
parent runs the methods interleaved (order rotated each round) for --repeats rounds and
prints the median, min and max seconds per method and each median's ratio to attnsweep's.

    python bench/peers.py [--n 64] [--repeats 3] [--methods a,b] [--out runs.json]
    python bench/peers.py --n 8 --repeats 1      # smoke test, 2-3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TRIAL = dict(task="parity", T=16, s=4, m=128, d=16, heads=2, max_epochs=100, n_test=256, model="transformer")
METHODS = ["tune_default", "tune_fast", "ray_tasks", "sequential", "attnsweep"]
MARK = "@@peers "  # Tune prints its progress on stdout too; the result line carries this prefix
# What attnsweep's own embedded Ray uses (no dashboard); given to every Ray method so that
# none pays for background processes the others do not have.
RAY_INIT = dict(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)


def train_one(seed: int) -> dict:
    """One trial, as a user of Tune, Ray or a plain loop would run it."""
    import torch

    from attnsweep.workers.config import BooleanTrialConfig
    from attnsweep.workers.train_boolean import train_pack

    torch.set_num_threads(1)  # two 1-CPU workers on two cores must not oversubscribe them
    return {
        **train_pack([BooleanTrialConfig(**TRIAL, seed=seed)], device="cpu", stacked=False)[0],
        "seed": seed,
    }


def tune_trainable(config: dict) -> None:
    from ray import tune

    tune.report(train_one(config["seed"]))  # one report at the end: the Function API's final-result form


def run_tune(n: int, fast: bool) -> tuple[float, list[dict]]:
    import ray
    from ray import tune

    storage = tempfile.mkdtemp(prefix="peers-tune-")
    if fast:
        # Read by Tuner.fit on the driver: no CSV/JSON/TBX logger callbacks, and experiment
        # state saved at most every 100 s rather than adaptively.
        os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
        os.environ["TUNE_GLOBAL_CHECKPOINT_S"] = "100"
        tune_config = tune.TuneConfig(reuse_actors=True, max_concurrent_trials=int(ray.cluster_resources()["CPU"]))
        run_config = tune.RunConfig(storage_path=storage, verbose=0)
    else:
        tune_config, run_config = tune.TuneConfig(), tune.RunConfig(storage_path=storage)
    try:
        t0 = time.perf_counter()
        tuner = tune.Tuner(
            tune_trainable,
            param_space={"seed": tune.grid_search(list(range(n)))},
            tune_config=tune_config,
            run_config=run_config,
        )
        results = tuner.fit()
        seconds = time.perf_counter() - t0
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    return seconds, [r.metrics for r in results if r.metrics]


def run_ray_tasks(n: int) -> tuple[float, list[dict]]:
    import ray

    remote = ray.remote(train_one)
    t0 = time.perf_counter()
    rows = ray.get([remote.remote(seed) for seed in range(n)])
    return time.perf_counter() - t0, rows


def run_sequential(n: int) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    rows = [train_one(seed) for seed in range(n)]
    return time.perf_counter() - t0, rows


def spec_yaml(n: int) -> str:
    fixed = "\n".join(f"  {k}: {v}" for k, v in TRIAL.items() if k != "T")
    return f"name: peers\nseeds: {n}\ngrid:\n  T: [{TRIAL['T']}]\nfixed:\n{fixed}\n"


def run_attnsweep(n: int) -> tuple[float, list[dict]]:
    """The whole attnsweep path: spec, executor, run_sweep into a store; rows read back after."""
    from rich.console import Console

    from attnsweep.orchestrator.driver import run_sweep
    from attnsweep.orchestrator.executors import RayExecutor
    from attnsweep.orchestrator.spec import parse_spec
    from attnsweep.results import ResultsStore

    spec = parse_spec(spec_yaml(n))
    with tempfile.TemporaryDirectory(prefix="peers-store-") as tmp:
        store = ResultsStore(tmp)
        t0 = time.perf_counter()
        # Inside the timing: starting the workers is part of attnsweep's cost, as starting
        # Tune's trial actors is part of Tune's.
        executor = RayExecutor(spec.execution, None, spec.resources)  # finds Ray already started
        summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()))
        seconds = time.perf_counter() - t0
        executor.shutdown()
        rows = store.scan_run_trials(spec.name, summary.run_id).collect().to_dicts()
    return seconds, rows


def child(method: str, n: int) -> None:
    import torch

    torch.set_num_threads(1)
    if method != "sequential":
        import ray

        ray.init(**RAY_INIT)
    run = {
        "tune_default": lambda: run_tune(n, fast=False),
        "tune_fast": lambda: run_tune(n, fast=True),
        "ray_tasks": lambda: run_ray_tasks(n),
        "sequential": lambda: run_sequential(n),
        "attnsweep": lambda: run_attnsweep(n),
    }[method]
    seconds, rows = run()
    accs = [r["test_acc"] for r in rows if r.get("test_acc") is not None]
    record = dict(
        method=method,
        n=n,
        seconds=seconds,
        rows=len(rows),
        done=sum(r.get("status") == "done" for r in rows),
        full_epochs=sum(r.get("epochs") == TRIAL["max_epochs"] for r in rows),
        seeds_ok=sorted(r.get("seed", -1) for r in rows) == list(range(n)),
        mean_test_acc=statistics.fmean(accs) if accs else None,  # the same trials give about the same mean
    )
    record["ok"] = record["rows"] == record["done"] == record["full_epochs"] == n and record["seeds_ok"]
    print(MARK + json.dumps(record), flush=True)


def spawn(method: str, n: int) -> dict:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", method, "--n", str(n)],
        capture_output=True,
        text=True,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode or not lines:
        tail = (proc.stdout + proc.stderr)[-3000:]
        return dict(method=method, n=n, seconds=None, ok=False, error=f"exit {proc.returncode}: {tail}")
    return json.loads(lines[-1][len(MARK) :])


def machine() -> dict:
    import ray
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return dict(
        cpu=cpu,
        cores=os.cpu_count(),
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        python=platform.python_version(),
        torch=torch.__version__,
        ray=ray.__version__,
    )


def report(runs: list[dict], methods: list[str], n: int) -> None:
    secs = {m: [r["seconds"] for r in runs if r["method"] == m and r.get("seconds") is not None] for m in methods}
    base = statistics.median(secs["attnsweep"]) if secs.get("attnsweep") else None
    print("| method | median (s) | min (s) | max (s) | trials/s | attnsweep is X times faster |")
    print("|---|---|---|---|---|---|")
    for m in methods:
        if not secs[m]:
            print(f"| {m} | failed | | | | |")
            continue
        med = statistics.median(secs[m])
        ratio = f"{med / base:.1f}x" if base else "-"
        print(f"| {m} | {med:.2f} | {min(secs[m]):.2f} | {max(secs[m]):.2f} | {n / med:.1f} | {ratio} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64, help="trials per method (seeds 0..n-1)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds of all methods")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {METHODS}")
    ap.add_argument("--out", help="write every run (and the machine) as JSON here")
    ap.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        ap.error(f"--methods: unknown {unknown}; choose from {METHODS}")
    info = machine()
    print(
        f"# {info['cpu']}, {info['cores']} cores, {info['date']}, python {info['python']}, "
        f"torch {info['torch']}, ray {info['ray']}; {args.n} trials "
        f"({', '.join(f'{k}={v}' for k, v in TRIAL.items())}), {args.repeats} rounds",
        flush=True,
    )
    runs = []
    for r in range(args.repeats):
        for m in methods[r % len(methods) :] + methods[: r % len(methods)]:
            run = spawn(m, args.n)
            run["round"] = r
            runs.append(run)
            took = f"{run['seconds']:.2f} s" if run.get("seconds") is not None else "failed"
            print(
                f"#   round {r + 1}: {m} {took}" + ("" if run["ok"] else f"  CHECK FAILED: {run}"),
                flush=True,
            )
    report(runs, methods, args.n)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(machine=info, trial=TRIAL, n=args.n, runs=runs), fh, indent=1)
    if not all(r["ok"] for r in runs):
        sys.exit(1)


if __name__ == "__main__":
    main()
