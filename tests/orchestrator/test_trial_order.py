"""The smallest cells first: a sweep's first packs are its cheapest runs, whatever the grid order."""

from __future__ import annotations

import io

from rich.console import Console

from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.executors import LocalExecutor
from attnsweep.orchestrator.packing import count_packs, make_packs, spec_pack_sizer
from attnsweep.orchestrator.spec import parse_spec, trial_id
from attnsweep.orchestrator.trial_order import smallest_first, trial_cost
from attnsweep.results import ResultsStore

# The grid lists its largest values first: grid order would start with T = 16, m = 64.
SPEC = """
name: order
seeds: 3
grid: {T: [16, 8], m: [64, 16], lr: [0.01, 0.001]}
fixed: {task: and, s: 2, d: 8, heads: 2, max_epochs: 5, n_test: 100}
execution: {pack_size: 2}
"""


def _cells(configs):
    return [(c.T, c.m, c.lr) for c in configs]


def test_the_cheapest_runs_come_first_and_no_trial_is_lost_or_repeated():
    spec = parse_spec(SPEC)
    ordered = list(smallest_first(spec))
    assert sorted(map(trial_id, ordered)) == sorted(map(trial_id, spec.trials()))
    cost = trial_cost(spec)
    costs = [cost(c) for c in ordered]
    assert costs == sorted(costs) and costs[0] < costs[-1]
    assert (ordered[0].T, ordered[0].m) == (8, 16)
    # Each run keeps its trials together, seeds fastest, as in grid order: equal costs
    # (the learning rates of one T and m) keep their grid order.
    assert [c.seed for c in ordered[:6]] == [0, 1, 2, 0, 1, 2]
    assert _cells(ordered[:6]) == [(8, 16, 0.01)] * 3 + [(8, 16, 0.001)] * 3


def test_packs_are_cut_as_in_grid_order():
    spec = parse_spec(SPEC)
    sizer = spec_pack_sizer(spec, 2)
    ids = lambda configs: ((trial_id(c), c) for c in configs)  # noqa: E731
    ours = list(make_packs(ids(smallest_first(spec)), sizer, spec.experiment))
    grid = list(make_packs(ids(spec.trials()), sizer, spec.experiment))
    assert sorted(p.ids for p in ours) == sorted(p.ids for p in grid)
    assert len(ours) == count_packs(spec, sizer)[0]


def test_a_grid_of_more_runs_than_the_limit_keeps_grid_order():
    spec = parse_spec(SPEC)
    assert [trial_id(c) for c in smallest_first(spec, limit=7)] == [trial_id(c) for c in spec.trials()]
    assert [trial_id(c) for c in smallest_first(spec, limit=8)] != [trial_id(c) for c in spec.trials()]


class _Recording(LocalExecutor):
    """Runs packs in this process and remembers them in the order they were submitted."""

    def __init__(self, spec):
        super().__init__(spec.execution, spec.resources)
        self.submitted = []

    def submit(self, pack, isolated=False):
        self.submitted.append(pack)
        return super().submit(pack, isolated)


def test_a_sweep_submits_its_smallest_cells_first_and_stores_every_trial(tmp_path):
    spec = parse_spec(SPEC)
    executor = _Recording(spec)
    store = ResultsStore(tmp_path / "store")
    summary = run_sweep(spec, store, executor, console=Console(file=io.StringIO()), max_in_flight=1)
    first = executor.submitted[0].configs[0]
    assert (first.T, first.m) == (8, 16)  # grid order would submit T = 16, m = 64 first
    cost = trial_cost(spec)
    costs = [cost(p.configs[0]) for p in executor.submitted]
    assert costs == sorted(costs)
    assert summary.counts["done"] == spec.n_trials() == 24
    stored = store.scan_run_trials(spec.name, summary.run_id).collect()
    assert sorted(stored["trial_id"]) == sorted(trial_id(c) for c in spec.trials())
