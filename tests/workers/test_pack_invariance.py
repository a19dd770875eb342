"""A trial's row is a function of its settings, seed, code version, device kind and thread
count, never of its packmates: trained alone and in packs of other sizes and compositions it
is the same bit for bit (every measured field but the pack's own wall time and size)."""

from __future__ import annotations

import pytest
import torch

from attnsweep.workers import BooleanTrialConfig, train_pack

SHARED = ("wall_s", "pack_size", "worker_host")
"""Fields that describe the pack, not the trial."""


def _same(a: dict, b: dict) -> None:
    for key in a:
        if key in SHARED:
            continue
        assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), (key, a[key], b[key])  # NaN == NaN


@pytest.mark.parametrize("settings", [
    dict(T=256, m=60, model="transformer", d=32, heads=4, lr=3e-3, max_epochs=60),  # the one-layer hand-written step
    dict(T=64, m=48, model="transformer", d=16, heads=2, lr=3e-3, max_epochs=40, batch_size=16, norm_bound=1.0),
    dict(T=32, m=40, model="transformer", d=16, heads=2, layers=2, lr=3e-3, max_epochs=25),  # autograd, 2 layers
    dict(T=32, m=40, model="mlp", mlp_width=64, lr=3e-3, max_epochs=40),
    dict(T=64, m=40, model="transformer", d=16, heads=2, lr=3e-3, max_epochs=20, precision="bfloat16"),
])
def test_a_trial_alone_and_in_packs_of_other_sizes_gives_the_same_row(settings):
    torch.set_num_threads(1)
    configs = [BooleanTrialConfig(task="and", s=3, seed=seed, n_test=300, **settings) for seed in range(5)]
    alone = [train_pack([c], device="cpu")[0] for c in configs[:3]]
    packs = [train_pack(configs[:2], device="cpu"), train_pack(configs[::-1], device="cpu"),
             train_pack([configs[1], configs[1], configs[0], configs[2]], device="cpu")]  # a trial twice in one pack
    found = {0: [packs[0][0], packs[1][4], packs[2][2]], 1: [packs[0][1], packs[1][3], packs[2][0], packs[2][1]],
             2: [packs[1][2], packs[2][3]]}
    for i, rows in found.items():
        assert alone[i]["status"] == "done"
        for row in rows:
            _same(alone[i], row)


@pytest.mark.parametrize("student", [dict(model="transformer", equivariance="none"),
                                     dict(model="transformer", equivariance="augment"),
                                     dict(model="transformer", equivariance="orthogonal"),
                                     dict(model="mlp", equivariance="none")])
def test_a_symmetry_trial_alone_and_in_packs_gives_the_same_row(student):
    from attnsweep.workers import SymmetryTrialConfig
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    torch.set_num_threads(1)
    configs = [SymmetryTrialConfig(teacher="equivariant", n=4, k=2, d=4, m=8, seed=seed, width=8, heads=2,
                                   mlp_width=16, max_epochs=30, n_test=32, n_q=2, **student) for seed in range(4)]
    alone = [train_symmetry_pack([c], device="cpu")[0] for c in configs[:2]]
    for pack in (configs, configs[::-1], [configs[1], configs[0], configs[1]]):
        rows = train_symmetry_pack(pack, device="cpu")
        for c, row in zip(pack, rows):
            if c.seed < 2:
                assert alone[c.seed]["status"] == "done"
                _same(alone[c.seed], row)
