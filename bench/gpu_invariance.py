"""Whether a trial's row on a GPU is its own, bit for bit, in any pack (a CPU: --device cpu).

Trains the pack-invariance cases of
tests/workers/test_pack_invariance.py on a device and reports, per model, whether a watched trial
gets the same row bit for bit: the same pack twice (determinism), and alone against packs of 2,
8 and 64, last slot, beside its own copy (invariance). Two ways: as the code runs (off the CPU,
groups of a fixed slot count with torch's deterministic algorithms, workers/stacked.py), and the
same with the deterministic algorithms left off, to show what they are for.
Where rows differ it gives the largest relative difference
of a float field and whether status and epoch count still agree.

Usage: ``python bench/gpu_invariance.py [--device cuda]`` (``--device cpu``: a dry run, where
every line should read "yes").
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable, Iterator

import torch

import attnsweep.workers.stacked as stacked
import attnsweep.workers.stacked_boolean as stacked_boolean
import attnsweep.workers.stacked_symmetry as stacked_symmetry
from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig, train_pack
from attnsweep.workers.train_symmetry import train_symmetry_pack

OF_THE_PACK = ("wall_s", "pack_size", "worker_host", "device")

BOOLEAN = {
    "one-layer transformer": dict(model="transformer", d=16, heads=2),
    "one-layer transformer, bfloat16": dict(model="transformer", d=16, heads=2, precision="bfloat16"),
    "two-layer transformer": dict(model="transformer", d=16, heads=2, layers=2),
    "MLP": dict(model="mlp", mlp_width=32),
}
SYMMETRY = {
    "generic transformer": dict(model="transformer", equivariance="none"),
    "inner-product student": dict(model="transformer", equivariance="orthogonal"),
    "permutation transformer": dict(model="transformer", equivariance="permutation"),
    "symmetry MLP": dict(model="mlp", equivariance="none"),
}


def boolean_configs(settings: dict) -> list[BooleanTrialConfig]:
    return [
        BooleanTrialConfig(
            task="and",
            T=16,
            s=2,
            m=24,
            seed=seed,
            n_test=100,
            lr=1e-2,
            max_epochs=25,
            fault="nan" if seed == 5 else None,
            **settings,
        )
        for seed in range(64)
    ]


def symmetry_configs(settings: dict) -> list[SymmetryTrialConfig]:
    return [
        SymmetryTrialConfig(
            teacher="equivariant", n=4, k=2, d=4, m=8, seed=seed, width=8, heads=2, mlp_width=16, max_epochs=15,
            n_test=16, n_q=2, fault="nan" if seed == 5 else None, **settings,
        )
        for seed in range(64)
    ]  # fmt: skip


def compare(a: dict, b: dict) -> tuple[bool, float, bool]:
    """(bit for bit, largest relative difference of a float field, status and epochs agree)."""
    same, worst = True, 0.0
    for key in a:
        if key in OF_THE_PACK:
            continue
        x, y = a[key], b[key]
        if x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            continue
        same = False
        if isinstance(x, float) and isinstance(y, float):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-30))
    return same, worst, a["status"] == b["status"] and a["epochs"] == b["epochs"]


@contextlib.contextmanager
def nondeterministic() -> Iterator[None]:
    """The product's layout with torch's deterministic algorithms left off: why they are on."""
    real = stacked.reproducible
    modules = (stacked_boolean, stacked_symmetry)
    for m in modules:
        m.reproducible = lambda dev: contextlib.nullcontext()
    try:
        yield
    finally:
        for m in modules:
            m.reproducible = real


def cases(train: Callable, configs: list) -> dict[str, tuple[bool, float, bool]]:
    """The watched trial (seed 3) alone against itself in other packs, and the same pack twice."""
    alone = train([configs[3]])[0]
    pack8 = [configs[3]] + configs[10:17]
    first = train(pack8)
    out = {"same pack of 8 twice": compare(first[0], train(pack8)[0])}
    big = train(configs[:3] + configs[4:] + [configs[3]])
    for name, pack, slot in (
        ("pack of 2", [configs[3], configs[9]], 0),
        ("pack of 8, first slot", pack8, 0),
        ("pack of 8, last slot", configs[20:27] + [configs[3]], 7),
        ("beside its own copy", [configs[3], configs[3]], 1),
    ):
        row = first[0] if pack is pack8 else train(pack)[slot]
        out[name] = compare(alone, row)
    out["pack of 64, last slot"] = compare(alone, big[-1])
    out["diverged trial, alone and in the 64"] = compare(train([configs[5]])[0], big[4])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    dev = ap.parse_args().device
    torch.set_num_threads(1)
    print(f"\n{torch.cuda.get_device_name() if dev == 'cuda' else dev}: is a stacked trial's row its own?\n")
    print("| model | packs | case | bit for bit | largest relative difference | status and epochs agree |")
    print("|---|---|---|---|---|---|")
    runs: list[tuple[str, Callable, list]] = []
    for name, settings in BOOLEAN.items():
        runs.append((name, lambda p: train_pack(p, device=dev, stacked=True), boolean_configs(settings)))
    for name, settings in SYMMETRY.items():
        runs.append((name, lambda p: train_symmetry_pack(p, device=dev, stacked=True), symmetry_configs(settings)))
    modes = {"as run": contextlib.nullcontext, "no deterministic algorithms": nondeterministic}
    for name, train, configs in runs:
        for mode, within in modes.items():
            with within():
                try:
                    found = cases(train, configs)
                except Exception as exc:  # noqa: BLE001 - one model's failure must not lose the others' lines
                    print(f"| {name} | {mode} | error | {type(exc).__name__}: {exc} | | |")
                    continue
            for case, (same, worst, agree) in found.items():
                print(
                    f"| {name} | {mode} | {case} | {'yes' if same else 'no'} | {worst:.1e} | {'yes' if agree else 'no'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
