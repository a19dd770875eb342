"""Tests of pack sizing and cutting (orchestrator/packing.py) and of the spec's
execution/resources sections."""

from __future__ import annotations

import pytest

from attnsweep.orchestrator import SpecError, make_packs, parse_spec, trial_id
from attnsweep.orchestrator.packing import (
    AUTO_PACK_MAX,
    auto_pack_size,
    count_packs,
    group_of,
    spec_pack_sizer,
)
from attnsweep.workers.builtin_models import working_bytes as boolean_working_bytes
from attnsweep.workers.memory import (
    STACKED_SLOTS,
    boolean_trial_bytes,
    pack_bytes,
)
from attnsweep.workers.stacking import boolean_stacks

SPEC = "name: p\nseeds: {seeds}\ngrid: {{T: [8, 16], m: [32]}}\nfixed: {{task: and, s: 2}}\n"


def _packs(spec):
    return list(make_packs(((trial_id(c), c) for c in spec.trials()), spec_pack_sizer(spec), spec.experiment))


ONE_BY_ONE = "name: p\nseeds: {seeds}\ngrid: {{T: [512, 1024], m: [32]}}\nfixed: {{task: and, s: 2}}\n"
"""Settings whose packs train one trial after the other (workers/stacking.py: T > 256)."""


def test_auto_pack_size_fills_the_memory_budget():
    spec = parse_spec(ONE_BY_ONE.format(seeds=8))
    first = next(spec.trials())
    assert not boolean_stacks(first)
    per_trial, working = boolean_trial_bytes(first), boolean_working_bytes(first)
    # A budget that holds one trial's working set, 3 trials' shares and most of a 4th's.
    budget_mb = (working + 3.9 * per_trial) / 2**20
    spec = parse_spec(ONE_BY_ONE.format(seeds=8) + f"execution: {{pack_memory_mb: {budget_mb}}}\n")
    sizes = [len(p) for p in _packs(spec) if p.configs[0].T == 512]
    assert sizes == [3, 3, 2]


def test_a_stacked_setting_is_packed_in_whole_lane_groups():
    # Every slot of a stacked pack holds a working set and a share, padding included
    # (workers/memory.py), so the budget buys whole groups of 32 slots, and at least one.
    spec = parse_spec(SPEC.format(seeds=100))
    first = next(spec.trials())
    assert boolean_stacks(first)
    group = pack_bytes(boolean_trial_bytes(first), boolean_working_bytes(first), STACKED_SLOTS, stacked=True)
    for groups, expected in ((2.7, 64), (1.0, 32), (0.01, 32)):
        assert auto_pack_size(first, "sparse_boolean", groups * group) == expected
    spec = parse_spec(SPEC.format(seeds=100) + f"execution: {{pack_memory_mb: {2.7 * group / 2**20}}}\n")
    assert [len(p) for p in _packs(spec) if p.configs[0].T == 8] == [64, 36]


def test_on_a_gpu_the_budget_buys_whole_groups_of_the_device_group_size():
    # A GPU pads every group to execution.device_group slots (workers/stacked.py), so the memory
    # rule counts groups of that size there; on a CPU the setting changes nothing.
    base = SPEC.format(seeds=100)
    first = next(parse_spec(base).trials())
    group = pack_bytes(boolean_trial_bytes(first), boolean_working_bytes(first), 64, stacked=True)
    budget = f"pack_memory_mb: {2.5 * group / 2**20}"
    gpu = parse_spec(base + f"execution: {{device_group: 64, {budget}}}\nresources: {{gpus_per_worker: 0.5}}\n")
    cpu = parse_spec(base + f"execution: {{device_group: 64, {budget}}}\n")
    assert group_of(gpu) == 64 and group_of(cpu) == STACKED_SLOTS
    assert spec_pack_sizer(gpu)(first) == 128  # two whole groups of 64
    assert spec_pack_sizer(cpu)(first) == auto_pack_size(first, "sparse_boolean", 2.5 * group)  # lanes of 32
    huge = parse_spec(base + "execution: {device_group: 4096, pack_memory_mb: 1}\nresources: {gpus_per_worker: 1}\n")
    assert spec_pack_sizer(huge)(first) == AUTO_PACK_MAX  # one group at least, never above the cap


def test_auto_is_the_default_and_is_capped():
    spec = parse_spec(SPEC.format(seeds=300) + "execution: {pack_memory_mb: 100000}\n")
    assert spec.execution.pack_size == "auto"
    sizes = [len(p) for p in _packs(spec)]
    assert sizes == [AUTO_PACK_MAX, 300 - AUTO_PACK_MAX] * 2
    assert auto_pack_size(next(spec.trials()), "sparse_boolean", 1) == STACKED_SLOTS  # never below a group
    assert auto_pack_size(next(parse_spec(ONE_BY_ONE.format(seeds=2)).trials()), "sparse_boolean", 1) == 1


def test_an_explicit_pack_size_wins_and_packs_never_mix_shapes():
    spec = parse_spec(SPEC.format(seeds=5) + "execution: {pack_size: 2}\n")
    packs = _packs(spec)
    assert [len(p) for p in packs] == [2, 2, 1, 2, 2, 1]
    assert all(len({c.shape_key() for c in p.configs}) == 1 for p in packs)
    assert sum(len(p) for p in packs) == spec.n_trials()


def test_resources_section_and_the_execution_alias():
    spec = parse_spec(SPEC.format(seeds=1) + "resources: {gpus_per_worker: 0.25, cpus_per_worker: 2, num_workers: 3}\n")
    assert (
        spec.resources.gpus_per_worker,
        spec.resources.cpus_per_worker,
        spec.resources.num_workers,
    ) == (0.25, 2, 3)
    old = parse_spec(SPEC.format(seeds=1) + "execution: {gpus_per_worker: 0.5, pack_size: 4}\n")
    assert old.resources.gpus_per_worker == 0.5 and old.execution.pack_size == 4
    # Resources do not change what is computed, so they stay out of the spec hash.
    assert spec.spec_hash() == old.spec_hash()


@pytest.mark.parametrize(
    "section,needle",
    [
        ("execution: {pack_size: big}", "execution.pack_size"),
        ("execution: {pack_memory_mb: 0}", "execution.pack_memory_mb"),
        ("execution: {workers: threads}", "execution.workers"),
        ("resources: {gpus_per_worker: -1}", "resources.gpus_per_worker"),
        ("resources: {num_workers: 0}", "resources.num_workers"),
        ("resources: {cpu: 1}", "resources.cpu"),
        (
            "resources: {gpus_per_worker: 1}\nexecution: {gpus_per_worker: 1}",
            "resources.gpus_per_worker: also given",
        ),
    ],
)
def test_bad_execution_and_resources_name_the_field(section, needle):
    with pytest.raises(SpecError) as err:
        parse_spec(SPEC.format(seeds=1) + section + "\n")
    assert needle in str(err.value)


def test_auto_packs_leave_no_worker_idle():
    spec = parse_spec(SPEC.format(seeds=20) + "execution: {pack_memory_mb: 100000}\n")
    sizer = spec_pack_sizer(spec, workers=4)  # 40 trials over 4 workers: at most 10 per pack
    packs = list(make_packs(((trial_id(c), c) for c in spec.trials()), sizer, spec.experiment))
    assert [len(p) for p in packs] == [10, 10, 10, 10]
    explicit = parse_spec(SPEC.format(seeds=20) + "execution: {pack_size: 20}\n")
    assert spec_pack_sizer(explicit, workers=4)(next(explicit.trials())) == 20  # an explicit size wins


@pytest.mark.parametrize(
    "text",
    [
        SPEC.format(seeds=8),
        SPEC.format(seeds=5) + "execution: {pack_size: 2}\n",
        SPEC.format(seeds=3) + "execution: {pack_memory_mb: 0.05}\n",
        "name: p\nseeds: 3\ngrid: {T: [8, 16], m: [32, 64], norm_bound: [null, 1.0, 2.0]}\nfixed: {task: and, s: 2}\n"
        "execution: {pack_size: 4}\n",
        "name: p\nseeds: 2\ngrid: [{T: [8], m: [32]}, {T: [8], m: [64, 128], model: [mlp, transformer]}]\n"
        "fixed: {task: and, s: 2}\n",
        "name: p\nseeds: 7\ngrid: [{T: [8], m: [32], norm_bound: [1.0]}, {T: [8], m: [32], norm_bound: [2.0]}]\n"
        "fixed: {task: and, s: 2}\nexecution: {pack_size: 5}\n",  # two blocks of one shape: their runs join
    ],
)
def test_count_packs_is_the_count_make_packs_cuts(text):
    spec = parse_spec(text)
    for workers in (None, 1, 3):
        n, exact = count_packs(spec, spec_pack_sizer(spec, workers))
        listed = list(
            make_packs(
                ((trial_id(c), c) for c in spec.trials()),
                spec_pack_sizer(spec, workers),
                spec.experiment,
            )
        )
        assert exact and n == len(listed)


def test_count_packs_of_a_billion_trials_lists_none_of_them():
    spec = parse_spec(
        "name: p\nseeds: 1000000\ngrid: {T: [8, 16, 32, 64, 128], m: {start: 8, stop: 4096, num: 200, "
        "scale: log}}\nfixed: {task: and, s: 2}\nexecution: {pack_size: 100}\n",
        max_trials=10**10,
    )
    m_values = len(spec.grids[0]["m"])
    n, exact = count_packs(spec, spec_pack_sizer(spec, 4))
    assert exact and n == 5 * m_values * 10_000  # each of the shape runs of 10^6 seeds in packs of 100


def test_count_packs_of_too_many_shapes_is_an_estimate_from_a_sample():
    spec = parse_spec(
        "name: p\nseeds: 3\ngrid: {T: {start: 8, stop: 4096, num: 300, scale: log}, "
        "m: {start: 8, stop: 65536, num: 300, scale: log}}\nfixed: {task: and, s: 2}\n"
        "execution: {pack_size: 2}\n",
        max_trials=10**9,
    )
    runs = len(spec.grids[0]["T"]) * len(spec.grids[0]["m"])
    n, exact = count_packs(spec, spec_pack_sizer(spec, 4), limit=1000, sample=500)
    assert not exact and n == runs * 2  # every run of 3 seeds takes 2 packs of at most 2


def test_many_values_breaking_one_rule_make_one_line():
    with pytest.raises(SpecError) as caught:
        parse_spec(
            "name: p\nseeds: 1\ngrid: {T: {start: 8, stop: 100000000, num: 10000, scale: log}, m: [16]}\n"
            "fixed: {task: and, s: 2}\n"
        )
    message = str(caught.value)
    bad = [t for t in caught.value.problems if t.startswith("grid.T")]
    assert len(bad) > 2000 and len(message.splitlines()) == 2
    assert f"grid.T: {len(bad)} values:" in message and "..., 100000000)" in message


def test_auto_pack_size_counts_each_trials_learning_curve_at_320_bytes_a_point():
    # A trial's curve is held by its worker until the pack ends (workers/curves.py), 320 bytes a
    # kept point as measured (workers/memory.py): with 20,000 points a trial 6,400,000 bytes more
    # a trial. max_epochs 20,000, every 1, max_points 20,000: every epoch's point is kept.
    curves = "  curves: {every: 1, max_points: 20000}\n"
    base = ONE_BY_ONE.format(seeds=8).replace("s: 2}", "s: 2, max_epochs: 20000}")
    first = next(parse_spec(base).trials())
    assert not boolean_stacks(first)
    per_trial, working = boolean_trial_bytes(first), boolean_working_bytes(first)
    share = per_trial + 20_000 * 320
    # A budget that holds one working set, 3 trials with their curves and most of a 4th's.
    budget_mb = (working + 3.9 * share) / 2**20
    with_curves = parse_spec(base + f"execution:\n  pack_memory_mb: {budget_mb}\n" + curves)
    without = parse_spec(base + f"execution:\n  pack_memory_mb: {budget_mb}\n")
    assert [len(p) for p in _packs(with_curves) if p.configs[0].T == 512] == [3, 3, 2]
    assert [len(p) for p in _packs(without) if p.configs[0].T == 512] == [8]  # the same budget, no curves
    # Fewer points fit more trials: max_points 2,000 widens the stride to ceil(19,999 / 1,999) = 11,
    # which keeps ceil(19,999 / 11) + 1 = 1,820 points, 582,400 bytes a trial.
    assert auto_pack_size(first, "sparse_boolean", working + 3.9 * share, curves=_Curves(1, 2000)) == int(
        3.9 * share // (per_trial + 1_820 * 320)
    )


def test_a_stacked_pack_counts_every_slots_curve():
    # Issue 48: 32 and 64 stacked trials of 20,000 points each took 180 and 323 MB more than the
    # estimate; it now counts 32 x 20,000 x 320 and 64 x 20,000 x 320 bytes more.
    first = next(parse_spec(SPEC.format(seeds=100).replace("s: 2}", "s: 2, max_epochs: 20000}")).trials())
    assert boolean_stacks(first)
    per_trial, working = boolean_trial_bytes(first), boolean_working_bytes(first)
    group = pack_bytes(per_trial + 20_000 * 320, working, STACKED_SLOTS, stacked=True)
    assert group - pack_bytes(per_trial, working, STACKED_SLOTS, stacked=True) == 204_800_000 > 180e6
    assert 2 * 204_800_000 > 323e6
    for groups, expected in ((2.7, 64), (1.0, 32), (0.5, 32)):
        assert auto_pack_size(first, "sparse_boolean", groups * group, curves=_Curves(1, 20_000)) == expected


class _Curves:
    """A curve setting as the spec's ``execution.curves`` gives it."""

    def __init__(self, every: int, max_points: int):
        self.every, self.max_points = every, max_points
