"""A stacked pack's epoch loop (workers/stacked_boolean.py ``fit_stacked``) against the loop of an
earlier commit, same trials, same device, interleaved: seconds per pack, epochs/s, and the
tensor-to-host reads per epoch (counted as tests/workers/test_host_reads.py counts them).

The earlier loop is that commit's workers/stacked_boolean.py and workers/stacked.py loaded as
modules of their own beside the current package (every other module is today's), so the
comparison is the loop alone. The
trials never fit within the budget (``stop: budget``), so both loops run exactly ``--epochs``
epochs; the rows are compared too (they must be equal bit for bit).

Usage: ``python bench/host_reads.py [--before 57adc0a] [--device cpu] [--sizes 32 256]
[--epochs 64] [--repeats 3] [--models transformer mlp]``
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "workers"))

from test_host_reads import StepGaps  # noqa: E402 - the counter the test uses

from attnsweep import tasks  # noqa: E402
from attnsweep.workers import BooleanTrialConfig  # noqa: E402
from attnsweep.workers.stacked import groups  # noqa: E402
from attnsweep.workers.stacked_boolean import fit_stacked  # noqa: E402
from attnsweep.workers.train_boolean import _model, eval_chunk, trained  # noqa: E402


def earlier_loop(rev: str):
    """``fit_stacked`` of workers/stacked_boolean.py at ``rev``, imported beside today's package,
    with that commit's workers/stacked.py (the pack and its helpers) under it."""
    folder = Path(tempfile.mkdtemp())
    for name in ("stacked", "stacked_boolean"):
        code = subprocess.run(["git", "show", f"{rev}:workers/{name}.py"], cwd=ROOT, check=True, capture_output=True)
        text = code.stdout.decode().replace("from attnsweep.workers.stacked import", "from stacked_before import")
        (folder / f"{name}_before.py").write_text(text)
    sys.path.insert(0, str(folder))
    for name in ("stacked_before", "stacked_boolean_before"):
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules["stacked_boolean_before"].fit_stacked


def setting(model: str, n: int, epochs: int) -> list[BooleanTrialConfig]:
    """The tiny transformer and the MLP of bench/packing.py (3-sparse parity, T = 16, m = 64)."""
    return [
        BooleanTrialConfig(
            task="parity",
            T=16,
            s=3,
            m=64,
            seed=i,
            d=16,
            heads=2,
            model=model,
            mlp_width=64,
            max_epochs=epochs,
            stop="budget",
            n_test=256,
        )
        for i in range(n)
    ]


def run(fit, configs, dev: torch.device, count: bool = False) -> tuple[float, list[dict], float]:
    """Seconds to train ``configs`` group by group (workers/stacked.py ``groups``), their results,
    and (``count``) host reads per epoch."""
    c = configs[0]
    batch, ok, _ = tasks.sample_training_sets(c.task, c.T, c.s, c.m, [x.seed for x in configs], device=dev)
    models = [_model(x, dev) for x in configs]
    names = {k for k, _ in models[0].named_parameters() if trained(c, k)}
    mode = StepGaps() if count else None
    ends: list[dict] = []
    sync()
    start = time.perf_counter()
    for g in groups(len(configs), dev):
        cut = slice(g.start, g.stop)
        args = ([configs[i] for i in g], [models[i] for i in g], names, batch.x[cut], batch.y[cut], eval_chunk(c), dev)
        if mode is not None:
            with mode:
                ends += fit(*args)
        else:
            ends += fit(*args)
    sync()
    wall = time.perf_counter() - start
    reads = sum(mode.gaps) / (c.max_epochs * len(groups(len(configs), dev))) if mode is not None else float("nan")
    return wall, ends, reads


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def same(a: list[dict], b: list[dict]) -> bool:
    return all(
        x["epochs"] == y["epochs"] and all(torch.equal(x["params"][k], y["params"][k]) for k in x["params"])
        for x, y in zip(a, b, strict=True)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="57adc0a")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 256])
    ap.add_argument("--epochs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["transformer", "mlp"])
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.set_num_threads(1)
    before = earlier_loop(args.before)
    print(f"device {dev}; before = {args.before}; {args.epochs} epochs; median of {args.repeats}")
    print("| model | trials | before: s | reads/epoch | now: s | reads/epoch | now faster by | rows equal |")
    print("|---|---|---|---|---|---|---|---|")
    for model in args.models:
        for n in args.sizes:
            configs = setting(model, n, args.epochs)
            _, ref, reads_before = run(before, configs, dev, count=True)
            _, got, reads_now = run(fit_stacked, configs, dev, count=True)
            times: dict[str, list[float]] = {"before": [], "now": []}
            for _ in range(args.repeats):  # interleaved
                times["before"].append(run(before, configs, dev)[0])
                times["now"].append(run(fit_stacked, configs, dev)[0])
            b, a = statistics.median(times["before"]), statistics.median(times["now"])
            print(
                f"| {model} | {n} | {b:.2f} | {reads_before:.1f} | {a:.2f} | {reads_now:.2f} | {b / a:.2f}x | {same(ref, got)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
