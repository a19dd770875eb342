"""Training time of a symmetry pack per student, this checkout against an earlier commit.

Times ``train_symmetry_pack`` on one pack (3 seeds, the equivariant teacher, a fixed number
of full-batch epochs) for each student, in a fresh process per measurement with one torch
thread, alternating the earlier commit (a temporary git worktree) and this one so that load
hits both alike; prints the median seconds of ``--repeat`` runs and the ratio. With
``--profile STUDENT`` it prints this checkout's cProfile of that student's pack instead.

    python bench/symmetry.py [--before 8ad6be3] [--repeat 2] [--d 32 --n 12 --k 8 --m 128 --epochs 200]
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

from worktree import ROOT, checkout, prefix

STUDENTS = {
    "inner-product": ("transformer", "orthogonal"),
    "transformer": ("transformer", "none"),
    "transformer + rotations": ("transformer", "augment"),
    "mlp": ("mlp", "none"),
}
_PACK = """
import cProfile, importlib, json, pstats, sys, time, torch
torch.set_num_threads(1)
SymmetryTrialConfig = importlib.import_module(sys.argv[2] + "workers.config").SymmetryTrialConfig
train_symmetry_pack = importlib.import_module(sys.argv[2] + "workers.train_symmetry").train_symmetry_pack
model, eq, d, n, k, m, epochs, profile = json.loads(sys.argv[1])
cfgs = [SymmetryTrialConfig(teacher="equivariant", n=n, k=k, d=d, m=m, seed=s, model=model, equivariance=eq,
                            max_epochs=epochs, n_test=1000) for s in range(3)]
prof = cProfile.Profile() if profile else None
t0 = time.perf_counter()
if prof: prof.enable()
train_symmetry_pack(cfgs)
if prof:
    prof.disable(); pstats.Stats(prof).sort_stats("tottime").print_stats(15)
print(time.perf_counter() - t0)
"""


def _pack_s(cwd: Path, student: str, args, profile: bool = False) -> float | str:
    model, eq = STUDENTS[student]
    spec = json.dumps([model, eq, args.d, args.n, args.k, args.m, args.epochs, profile])
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    out = subprocess.run(
        [sys.executable, "-c", _PACK, spec, prefix(cwd)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    ).stdout
    return out if profile else float(out.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="8ad6be3", help="the earlier commit (default: before the speed-up)")
    ap.add_argument("--repeat", type=int, default=2)
    for name, default in (("d", 32), ("n", 12), ("k", 8), ("m", 128), ("epochs", 200)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--profile", choices=list(STUDENTS))
    ap.add_argument("--out", type=Path, default=Path("bench-symmetry.json"))
    args = ap.parse_args()
    if args.profile:
        print(_pack_s(ROOT, args.profile, args, profile=True))
        return
    rows = {}
    with checkout(args.before) as before:
        for student in STUDENTS:
            times: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(args.repeat):
                for label, cwd in (("before", before), ("after", ROOT)):
                    times[label].append(_pack_s(cwd, student, args))
            rows[student] = {k: statistics.median(v) for k, v in times.items()}
            print(
                f"{student:25s} before {rows[student]['before']:6.2f} s  after {rows[student]['after']:6.2f} s  "
                f"({rows[student]['before'] / rows[student]['after']:.2f}x)",
                flush=True,
            )
    machine = dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform())
    setting = {k: getattr(args, k) for k in ("d", "n", "k", "m", "epochs")}
    args.out.write_text(json.dumps(dict(before=args.before, setting=setting, machine=machine, rows=rows), indent=2))


if __name__ == "__main__":
    main()
