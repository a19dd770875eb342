"""Trial ids two code versions both ran (stats/pooling.py), on constructed rows whose counts
follow from how they are built."""

import polars as pl

from attnsweep.stats.pooling import shared_trials


def _row(trial_id, run_id, version, acc, status="done"):
    return dict(trial_id=trial_id, run_id=run_id, code_version=version, status=status, test_acc=acc)


def test_shared_trial_ids_are_counted_with_their_changed_and_flipped_outcomes():
    first = [0.90, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97]
    rows = [_row(f"t{i}", "r1", "aaa", acc) for i, acc in enumerate(first)]
    # r2 (another code version) ran t0..t5 again: t0, t1 identical; t2 0.92 -> 0.93 (changed,
    # both below 0.95); t3 0.93 -> 0.96 (changed, flips up); t4 0.94 -> 0.94 (identical);
    # t5 0.95 -> 0.949 (changed, flips down). t6 failed in r2: not a trained row, not compared.
    again = {0: 0.90, 1: 0.91, 2: 0.93, 3: 0.96, 4: 0.94, 5: 0.949}
    rows += [_row(f"t{i}", "r2", "bbb", acc) for i, acc in again.items()]
    rows += [_row("t6", "r2", "bbb", None, status="failed")]
    # r3 ran t7 again with the same code version as r1: not a version conflict.
    rows += [_row("t7", "r3", "aaa", 0.5)]
    got = shared_trials(pl.DataFrame(rows), 0.95)
    assert got.to_dicts() == [
        dict(run_a="r1", version_a="aaa", run_b="r2", version_b="bbb", shared=6, changed=3, flipped=2)
    ]


def test_no_shared_trial_ids_give_an_empty_table():
    rows = pl.DataFrame([_row("t1", "r1", "aaa", 0.99), _row("t2", "r2", "bbb", 0.99)])
    assert shared_trials(rows, 0.95).is_empty()
