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
        assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), (
            key,
            a[key],
            b[key],
        )  # NaN == NaN


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [
        dict(
            T=256, m=60, model="transformer", d=32, heads=4, lr=3e-3, max_epochs=60
        ),  # the one-layer hand-written step
        dict(
            T=64,
            m=48,
            model="transformer",
            d=16,
            heads=2,
            lr=3e-3,
            max_epochs=40,
            batch_size=16,
            norm_bound=1.0,
        ),
        dict(T=32, m=40, model="transformer", d=16, heads=2, layers=2, lr=3e-3, max_epochs=25),  # autograd, 2 layers
        dict(T=32, m=40, model="mlp", mlp_width=64, lr=3e-3, max_epochs=40),
        dict(
            T=64,
            m=40,
            model="transformer",
            d=16,
            heads=2,
            lr=3e-3,
            max_epochs=20,
            precision="bfloat16",
        ),
    ],
)
def test_a_trial_alone_and_in_packs_of_other_sizes_gives_the_same_row(settings):
    torch.set_num_threads(1)
    configs = [BooleanTrialConfig(task="and", s=3, seed=seed, n_test=300, **settings) for seed in range(5)]
    alone = [train_pack([c], device="cpu")[0] for c in configs[:3]]
    packs = [
        train_pack(configs[:2], device="cpu"),
        train_pack(configs[::-1], device="cpu"),
        train_pack([configs[1], configs[1], configs[0], configs[2]], device="cpu"),
    ]  # a trial twice in one pack
    found = {
        0: [packs[0][0], packs[1][4], packs[2][2]],
        1: [packs[0][1], packs[1][3], packs[2][0], packs[2][1]],
        2: [packs[1][2], packs[2][3]],
    }
    for i, rows in found.items():
        assert alone[i]["status"] == "done"
        for row in rows:
            _same(alone[i], row)


@pytest.mark.parametrize(
    "student",
    [
        dict(model="transformer", equivariance="none"),
        dict(model="transformer", equivariance="augment"),
        dict(model="transformer", equivariance="orthogonal"),
        dict(model="mlp", equivariance="none"),
    ],
)
def test_a_symmetry_trial_alone_and_in_packs_gives_the_same_row(student):
    from attnsweep.workers import SymmetryTrialConfig
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    torch.set_num_threads(1)
    configs = [
        SymmetryTrialConfig(
            teacher="equivariant",
            n=4,
            k=2,
            d=4,
            m=8,
            seed=seed,
            width=8,
            heads=2,
            mlp_width=16,
            max_epochs=30,
            n_test=32,
            n_q=2,
            **student,
        )
        for seed in range(4)
    ]
    alone = [train_symmetry_pack([c], device="cpu")[0] for c in configs[:2]]
    for pack in (configs, configs[::-1], [configs[1], configs[0], configs[1]]):
        rows = train_symmetry_pack(pack, device="cpu")
        for c, row in zip(pack, rows, strict=True):
            if c.seed < 2:
                assert alone[c.seed]["status"] == "done"
                _same(alone[c.seed], row)


BOOLEAN_MODELS = {
    "one-layer, hand-written step": dict(model="transformer", d=16, heads=2),
    "one-layer, bfloat16": dict(model="transformer", d=16, heads=2, precision="bfloat16"),
    "one-layer, fixed codes, bounded, ln gain fixed": dict(
        model="transformer", d=16, heads=2, positions="fixed", ln_affine=False, norm_bound=1.0
    ),
    "two layers": dict(model="transformer", d=16, heads=2, layers=2),
    "MLP": dict(model="mlp", mlp_width=32),
    "MLP, minibatches": dict(model="mlp", mlp_width=32, batch_size=8),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOOLEAN_MODELS))
def test_every_boolean_model_gives_a_trial_its_row_in_packs_of_1_2_8_and_64(name):
    # 64 trials of one setting: some fit early (at different epochs), one diverges (NaN weights
    # after its first epoch), the rest run out of epochs. Trial 3 is watched in packs of 1, 2, 8
    # and 64, in the first slot and the last, beside a copy of itself; so are the early and the
    # diverged trials in the pack of 64.
    torch.set_num_threads(1)
    configs = [
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
            **BOOLEAN_MODELS[name],
        )
        for seed in range(64)
    ]
    alone = {i: train_pack([configs[i]], device="cpu")[0] for i in (3, 5)}
    assert alone[3]["status"] == "done" and alone[5]["status"] == "diverged"
    big = train_pack(configs[:3] + configs[4:] + [configs[3]], device="cpu")  # trial 3 last of 64
    for pack, slot in (
        ([configs[3], configs[9]], 0),
        ([configs[3]] + configs[10:17], 0),
        (configs[20:27] + [configs[3]], 7),
        ([configs[3], configs[3]], 1),
    ):
        _same(alone[3], train_pack(pack, device="cpu")[slot])
    _same(alone[3], big[-1])
    _same(alone[5], big[4])
    epochs = [row["epochs"] for row in big]
    early = [i for i, row in enumerate(big) if row["converged"]]
    if early:  # trials that fit left the pack at their own epochs
        i = early[0]
        _same(train_pack([(configs[:3] + configs[4:] + [configs[3]])[i]], device="cpu")[0], big[i])
    assert len(set(epochs)) > 1


SYMMETRY_STUDENTS = {
    "generic transformer": dict(model="transformer", equivariance="none"),
    "augmented transformer": dict(model="transformer", equivariance="augment"),
    "inner-product student": dict(model="transformer", equivariance="orthogonal"),
    "permutation transformer": dict(model="transformer", equivariance="permutation"),
    "MLP": dict(model="mlp", equivariance="none"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SYMMETRY_STUDENTS))
def test_every_symmetry_student_gives_a_trial_its_row_in_packs_of_1_2_8_and_64(name):
    # The stacked path, which symmetry packs take on a GPU (on a CPU they train one by one,
    # workers/stacking.py, and the test above covers that path).
    from attnsweep.workers import SymmetryTrialConfig
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    torch.set_num_threads(1)
    configs = [
        SymmetryTrialConfig(
            teacher="equivariant",
            n=4,
            k=2,
            d=4,
            m=8,
            seed=seed,
            width=8,
            heads=2,
            mlp_width=16,
            max_epochs=15,
            n_test=16,
            n_q=2,
            fault="nan" if seed == 5 else None,
            **SYMMETRY_STUDENTS[name],
        )
        for seed in range(64)
    ]
    alone = {i: train_symmetry_pack([configs[i]], device="cpu", stacked=True)[0] for i in (3, 5)}
    assert alone[3]["status"] == "done" and alone[5]["status"] == "diverged"
    big = train_symmetry_pack(configs[:3] + configs[4:] + [configs[3]], device="cpu", stacked=True)
    _same(alone[3], big[-1])
    _same(alone[5], big[4])
    for pack, slot in (
        ([configs[3], configs[9]], 0),
        (configs[20:27] + [configs[3]], 7),
        ([configs[3]] * 2, 1),
    ):
        _same(alone[3], train_symmetry_pack(pack, device="cpu", stacked=True)[slot])


def test_the_lanes_leave_no_elementwise_tail_a_slot_could_fall_into():
    # Why packs are padded (workers/stacked.py): on this CPU an elementwise kernel's tail
    # rounds differently from its body, so one trial's values in a tensor of another size could
    # change. A pack's slot count is a multiple of the lanes, and each slot's sigmoid is then
    # the same wherever it sits.
    from attnsweep.workers.stacked import LANES, slot_count

    assert LANES in (16, 32) and slot_count(1) == LANES and slot_count(LANES + 1) == 2 * LANES
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, generator=g) * 5
    ref = None
    for slots in (LANES, 2 * LANES, 4 * LANES):
        for slot in (0, slots - 1):
            X = torch.randn(slots, 7, generator=g) * 5
            X[slot] = x
            got = torch.sigmoid(X)[slot]
            ref = got if ref is None else ref
            assert torch.equal(got, ref)


def test_off_the_cpu_a_pack_trains_in_fixed_groups_with_deterministic_algorithms():
    # The GPU layout (workers/stacked.py): whatever a pack's size, every group has the same slot
    # count, so no kernel sees a shape that depends on the pack; a CPU pack stays one group.
    # Checked on a device object alone (no GPU here); bench/gpu_invariance.py checks the rows.
    import os

    from attnsweep.workers.stacked import DEVICE_SLOTS, groups, reproducible, slot_count

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert DEVICE_SLOTS == 32
    assert groups(70, cuda) == [range(0, 32), range(32, 64), range(64, 70)]
    assert groups(1, cuda) == [range(0, 1)] and groups(0, cuda) == []
    assert groups(70, cpu) == [range(0, 70)]
    assert {slot_count(n, cuda) for n in (1, 7, 32)} == {32}
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] in (":4096:8", ":16:8")
    assert not torch.are_deterministic_algorithms_enabled()
    with reproducible(cuda):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    assert not torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    with reproducible(cpu):
        assert torch.get_num_threads() == 1 and not torch.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == threads


def test_the_group_size_off_the_cpu_is_a_setting_a_pack_of_256_can_train_as_one_group():
    from attnsweep.workers.stacked import device_group, device_slots, group_slots, groups, slot_count

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    with device_group(256):
        assert device_slots() == 256 and group_slots(cuda) == 256
        assert groups(256, cuda) == [range(0, 256)] and groups(300, cuda) == [range(0, 256), range(256, 300)]
        assert {slot_count(n, cuda) for n in (1, 100, 256)} == {256}
        assert groups(70, cpu) == [range(0, 70)] and group_slots(cpu) != 256  # the CPU's lanes, unchanged
        with device_group(None):
            assert device_slots() == 32
    assert device_slots() == 32
    with pytest.raises(ValueError, match="device_group must be at least 1"), device_group(0):
        pass
    assert device_slots() == 32


def test_a_row_names_its_device_as_a_rerun_must_match_it():
    # A worker labels its rows (workers/entry.py). On a GPU the label adds the model, CUDA and
    # torch (no GPU here to read them); a CPU row says "cpu", as every stored row before it did.
    from attnsweep.workers.pack import device_label

    assert device_label(torch.device("cpu")) == "cpu"
    assert device_label(torch.device("meta")) == "meta"
    # And off the CPU the group size, which a rerun there must match too (workers/stacked.py).
    from attnsweep.workers.entry import _labelled

    assert _labelled([{"device": "cpu"}], 256) == [{"device": "cpu", "device_group": None}]
    assert _labelled([{"device": "meta"}], 256) == [{"device": "meta", "device_group": 256}]
    assert _labelled([{"device": "meta"}]) == [{"device": "meta", "device_group": 32}]
