"""The driver's submit loop (orchestrator/driver.py, ``PackRunner``) on a fake executor: no
Ray, no training, so the order of packs and the retry of a lost one are seen directly."""

from __future__ import annotations

import io

from ray.exceptions import WorkerCrashedError
from rich.console import Console

from attnsweep.orchestrator import parse_spec, trial_id
from attnsweep.orchestrator.adaptive import Request
from attnsweep.orchestrator.driver import PackRunner, RunSummary
from attnsweep.orchestrator.executors import Executor
from attnsweep.orchestrator.packing import spec_pack_sizer

SPEC = (
    "name: p\nseeds: [0, 1, 2]\ngrid: {T: [8, 16], m: [32]}\nfixed: {task: and, s: 2}\n"
    "execution: {pack_size: 3, max_retries: 1}\n"
)


class FakeExecutor(Executor):
    """Finishes the oldest pack in flight at each wait; a pack holding a killer is lost."""

    def __init__(self, killers: set[str]):
        self.killers, self.queue, self.submitted = killers, {}, []

    def submit(self, pack, isolated=False):
        self.submitted.append((pack.ids, isolated))
        self.queue[len(self.submitted)] = pack
        return len(self.submitted)

    def wait(self, handles, timeout_s):
        pack = self.queue.pop(handles[0])
        if self.killers & set(pack.ids):
            return [(handles[0], WorkerCrashedError())]
        return [(handles[0], [{"status": "done", "test_acc": 1.0, "wall_s": 0.5} for _ in pack.ids])]

    def slots(self):
        return 2


class Writer:
    def __init__(self):
        self.rows = []

    def append(self, rows):
        self.rows += rows

    def maybe_flush(self):
        pass

    def flush(self):
        pass


def _runner(spec, executor, done=()):
    summary = RunSummary(spec.name, "r", 0, slots=2)
    runner = PackRunner(spec, executor, Writer(), summary, set(done), Console(file=io.StringIO()), 2, 60.0)
    return runner, summary


def test_a_lost_pack_is_retried_one_trial_per_isolated_pack_before_new_packs():
    spec = parse_spec(SPEC)
    ids = [trial_id(c) for c in spec.trials()]
    executor = FakeExecutor(killers={ids[1]})
    runner, summary = _runner(spec, executor)
    runner.run(((trial_id(c), c) for c in spec.trials()), len(ids), spec_pack_sizer(spec, 2), "grid", {"x": 1})
    assert executor.submitted == [
        (tuple(ids[:3]), False),
        (tuple(ids[3:]), False),
        *[((tid,), True) for tid in ids[:3]],
    ]
    rows = {r["trial_id"]: r for r in runner.writer.rows}
    assert sorted(rows) == sorted(ids) and all(r["x"] == 1 for r in rows.values())
    # Two runs per pack (1 + max_retries): the killer's pack, then the killer alone.
    assert rows[ids[1]]["status"] == "lost" and rows[ids[1]]["attempts"] == 4
    assert [rows[t]["attempts"] for t in (ids[0], ids[2], ids[3])] == [3, 3, 1]
    assert summary.counts == {"done": 5, "lost": 1} and summary.busy_s == 2.5


def test_cells_advance_when_their_rows_are_in_and_share_a_trial_without_training_it_twice():
    spec = parse_spec(SPEC)
    configs = list(spec.trials())
    ids = [trial_id(c) for c in configs]
    executor = FakeExecutor(killers=set())
    runner, _ = _runner(spec, executor, done={ids[0]})
    runner._keep = True
    seen = []

    def cell(i):
        yield Request(configs[:2], {"round": 0})  # ids[0] is stored already; ids[1] is shared
        seen.append((i, sorted(runner.rows_by_id)))
        yield Request(configs[3 + i : 5 + i], {"round": 1, "cell": i})  # ids[4] is shared: the first asker's columns

    runner.run_cells([cell(0), cell(1)], "cells")
    # A pack is at most the waiting trials over the 2 workers, and holds one shape (T) only.
    assert executor.submitted == [((ids[1],), False), ((ids[3], ids[4]), False), ((ids[5],), False)]
    assert seen == [(0, [ids[1]]), (1, [ids[1]])]
    assert [(r["trial_id"], r["round"], r.get("cell")) for r in runner.writer.rows] == [
        (ids[1], 0, None),
        (ids[3], 1, 0),
        (ids[4], 1, 0),
        (ids[5], 1, 1),
    ]
