"""Tests of pack sizing and cutting (orchestrator/packing.py) and of the spec's
execution/resources sections."""

from __future__ import annotations

import pytest

from orchestrator import SpecError, make_packs, parse_spec, trial_id
from orchestrator.driver import spec_pack_sizer
from orchestrator.packing import AUTO_PACK_MAX, auto_pack_size
from workers.memory import boolean_trial_bytes

SPEC = "name: p\nseeds: {seeds}\ngrid: {{T: [8, 16], m: [32]}}\nfixed: {{task: and, s: 2}}\n"


def _packs(spec):
    return list(make_packs(((trial_id(c), c) for c in spec.trials()), spec_pack_sizer(spec), spec.experiment))


def test_auto_pack_size_fills_the_memory_budget():
    spec = parse_spec(SPEC.format(seeds=8))
    first = next(spec.trials())
    per_trial = boolean_trial_bytes(first)
    # A budget that holds 3 trials and most of a 4th.
    budget_mb = 3.9 * per_trial / 2**20
    spec = parse_spec(SPEC.format(seeds=8) + f"execution: {{pack_memory_mb: {budget_mb}}}\n")
    sizes = [len(p) for p in _packs(spec) if p.configs[0].T == 8]
    assert sizes == [3, 3, 2]


def test_auto_is_the_default_and_is_capped():
    spec = parse_spec(SPEC.format(seeds=300) + "execution: {pack_memory_mb: 100000}\n")
    assert spec.execution.pack_size == "auto"
    sizes = [len(p) for p in _packs(spec)]
    assert sizes == [AUTO_PACK_MAX, 300 - AUTO_PACK_MAX] * 2
    assert auto_pack_size(next(spec.trials()), "sparse_boolean", 1) == 1  # never below one


def test_an_explicit_pack_size_wins_and_packs_never_mix_shapes():
    spec = parse_spec(SPEC.format(seeds=5) + "execution: {pack_size: 2}\n")
    packs = _packs(spec)
    assert [len(p) for p in packs] == [2, 2, 1, 2, 2, 1]
    assert all(len({c.shape_key() for c in p.configs}) == 1 for p in packs)
    assert sum(len(p) for p in packs) == spec.n_trials()


def test_resources_section_and_the_execution_alias():
    spec = parse_spec(SPEC.format(seeds=1) + "resources: {gpus_per_worker: 0.25, cpus_per_worker: 2, num_workers: 3}\n")
    assert (spec.resources.gpus_per_worker, spec.resources.cpus_per_worker, spec.resources.num_workers) == (0.25, 2, 3)
    old = parse_spec(SPEC.format(seeds=1) + "execution: {gpus_per_worker: 0.5, pack_size: 4}\n")
    assert old.resources.gpus_per_worker == 0.5 and old.execution.pack_size == 4
    # Resources do not change what is computed, so they stay out of the spec hash.
    assert spec.spec_hash() == old.spec_hash()


@pytest.mark.parametrize("section,needle", [
    ("execution: {pack_size: big}", "execution.pack_size"),
    ("execution: {pack_memory_mb: 0}", "execution.pack_memory_mb"),
    ("execution: {workers: threads}", "execution.workers"),
    ("resources: {gpus_per_worker: -1}", "resources.gpus_per_worker"),
    ("resources: {num_workers: 0}", "resources.num_workers"),
    ("resources: {cpu: 1}", "resources.cpu"),
    ("resources: {gpus_per_worker: 1}\nexecution: {gpus_per_worker: 1}", "resources.gpus_per_worker: also given"),
])
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
