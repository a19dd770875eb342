"""The symmetry trainer at large m (issue 26): what a full-batch epoch costs per student as m
grows, where a step's time goes, and what two exact changes would give.

Each measurement is a fresh process with one torch thread (``--threads`` for the thread
comparison) training one trial of the equivariant teacher at (d, n, k) = (16, 6, 4) by
default. The cost per epoch is the time of ``--epochs`` epochs minus that of one epoch (the
data draw, model set-up and scoring), divided by ``--epochs - 1``. Then:

* ``ops``: torch.profiler's self-CPU share per op for the generic transformer at the largest m;
* ``sdpa``: the attention's softmax(q k^T / sqrt(dh)) v by ``torch.nn.functional.
  scaled_dot_product_attention`` (the same formula, Vaswani et al. 2017 eq. 1) in place of the
  two batched products and the softmax, timed against the current code alternately;
* ``threads``: one trial on 2 threads against 1, as trial-epochs per second per core.

    python bench/symmetry_large_m.py [--d 16 --n 6 --k 4 --ms 256 1024 2048 --epochs 21 --repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from worktree import ROOT

STUDENTS = {
    "inner-product": ("transformer", "orthogonal"),
    "transformer": ("transformer", "none"),
    "transformer + rotations": ("transformer", "augment"),
    "mlp": ("mlp", "none"),
}
_TRIAL = """
import json, math, sys, time, torch
import torch.nn.functional as F
from attnsweep.workers import students
from attnsweep.workers.config import SymmetryTrialConfig
from attnsweep.workers.train_symmetry import train_symmetry_pack
model, eq, d, n, k, m, epochs, threads, sdpa, ops = json.loads(sys.argv[1])
torch.set_num_threads(threads)
if sdpa:
    def forward(self, queries, keys):
        q, kk, v = self._split(self.q(queries)), self._split(self.k(keys)), self._split(self.v(keys))
        mixed = F.scaled_dot_product_attention(q, kk, v).transpose(1, 2)
        return self.out(mixed.reshape(*mixed.shape[:2], -1))
    students.Attention.forward = forward
cfg = lambda e: SymmetryTrialConfig(teacher="equivariant", n=n, k=k, d=d, m=m, seed=0, model=model, equivariance=eq,
                                    max_epochs=e, n_test=1000)
train_symmetry_pack([cfg(1)])  # warm-up: first-call costs of the kernels
if ops:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_symmetry_pack([cfg(epochs)])
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    shares = sorted(((e.self_cpu_time_total / total, e.key) for e in prof.key_averages()), reverse=True)[:12]
    print(json.dumps([[key, share] for share, key in shares]))
else:
    t0 = time.perf_counter(); train_symmetry_pack([cfg(1)]); one = time.perf_counter() - t0
    t0 = time.perf_counter(); row = train_symmetry_pack([cfg(epochs)])[0]; many = time.perf_counter() - t0
    print(json.dumps([(many - one) / (epochs - 1), row["train_error"]]))
"""


def _run(student: str, args, m: int, threads: int = 1, sdpa: bool = False, ops: bool = False):
    model, eq = STUDENTS[student]
    spec = json.dumps([model, eq, args.d, args.n, args.k, m, args.epochs, threads, sdpa, ops])
    out = subprocess.run(
        [sys.executable, "-c", _TRIAL, spec],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    ).stdout
    return json.loads(out.splitlines()[-1])


def _median_epoch_s(student: str, args, m: int, **kw) -> float:
    return statistics.median(_run(student, args, m, **kw)[0] for _ in range(args.repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("d", 16), ("n", 6), ("k", 4), ("epochs", 21), ("repeat", 3)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--ms", type=int, nargs="+", default=[256, 1024, 2048])
    ap.add_argument("--out", type=Path, default=Path("bench-symmetry-large-m.json"))
    args = ap.parse_args()
    result: dict = {
        "setting": {k: getattr(args, k) for k in ("d", "n", "k", "epochs", "repeat", "ms")},
        "machine": dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform()),
    }
    per_epoch = {}
    for student in STUDENTS:
        per_epoch[student] = {m: _median_epoch_s(student, args, m) for m in args.ms}
        print(
            f"{student:25s} " + "  ".join(f"m={m}: {s * 1e3:7.1f} ms/epoch" for m, s in per_epoch[student].items()),
            flush=True,
        )
    result["ms_per_epoch"] = {s: {m: v * 1e3 for m, v in row.items()} for s, row in per_epoch.items()}
    big = max(args.ms)
    result["ops"] = _run("transformer", args, big, ops=True)
    print(f"transformer, m={big}, self-CPU share per op:")
    for key, share in result["ops"]:
        print(f"  {key:40s} {share:6.1%}")
    for student in ("transformer", "transformer + rotations"):
        times: dict[str, list[float]] = {"current": [], "sdpa": []}
        errors = {}
        for _ in range(args.repeat):  # alternate, so that load hits both alike
            for label in times:
                s, err = _run(student, args, big, sdpa=label == "sdpa")
                times[label].append(s)
                errors[label] = err
        cur, new = statistics.median(times["current"]), statistics.median(times["sdpa"])
        result[f"sdpa {student}"] = dict(current_ms=cur * 1e3, sdpa_ms=new * 1e3, speedup=cur / new, train_error=errors)
        print(
            f"{student}, m={big}: current {cur * 1e3:.1f} ms/epoch, sdpa {new * 1e3:.1f} ms/epoch "
            f"({cur / new:.2f}x); train error {errors['current']:.6g} vs {errors['sdpa']:.6g}",
            flush=True,
        )
    one, two = (
        statistics.median(_run("transformer", args, big, threads=t)[0] for _ in range(args.repeat)) for t in (1, 2)
    )
    result["threads"] = dict(
        one_thread_ms=one * 1e3,
        two_threads_ms=two * 1e3,
        per_core_ratio=(1 / (2 * two)) / (1 / one),
    )
    print(
        f"transformer, m={big}: 1 thread {one * 1e3:.1f} ms/epoch, 2 threads {two * 1e3:.1f} ms/epoch: "
        f"{result['threads']['per_core_ratio']:.2f}x the trial-epochs per second per core of 1 thread",
        flush=True,
    )
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
