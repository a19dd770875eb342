"""A small grid of built-in sparse-Boolean trials, trained one by one and stacked, whose rows
tests/workers/test_model_registry.py compares bit for bit with the rows the code before the model
registry (commit 4172b44) gave on this machine: the registry must not move a built-in model's row.

Run as a script to write tests/workers/data/builtin_rows.json (done once, at 4172b44).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

GOLDEN = Path(__file__).parent / "data" / "builtin_rows.json"
VOLATILE = ("wall_s", "worker_host", "pack_size")


def configs():
    from attnsweep.workers import BooleanTrialConfig

    base = dict(task="and", s=2, max_epochs=25, n_test=200, d=8, heads=2, mlp_width=16)
    out = []
    for model, extra in (
        ("transformer", {}),
        ("transformer", dict(layers=2)),
        ("transformer", dict(norm_bound=2.0)),
        ("transformer", dict(stop="margin", margin_target=0.01)),
        ("transformer", dict(positions="sinusoidal", ln_affine=False)),
        ("mlp", {}),
        ("mlp", dict(norm_bound=2.0, norm_kind="spectral")),
        ("mlp", dict(batch_size=8)),
    ):
        for T in (8, 24):
            for m in (16, 48):
                out.append([BooleanTrialConfig(model=model, T=T, m=m, seed=seed, **base, **extra) for seed in (0, 1)])
    return out


def environment() -> dict:
    return dict(torch=torch.__version__, cpu=torch.backends.cpu.get_cpu_capability(), threads=torch.get_num_threads())


def rows() -> list[dict]:
    from attnsweep.workers.train_boolean import train_pack

    out = []
    for pack in configs():
        for stacked in (False, True):
            for row in train_pack(pack, "cpu", stacked=stacked):
                out.append({k: _plain(v) for k, v in row.items() if k not in VOLATILE})
    return out


def _plain(v):
    if isinstance(v, float):
        return v.hex() if math.isfinite(v) else repr(v)  # exact bits
    return v


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(dict(environment=environment(), rows=rows()), indent=0) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
