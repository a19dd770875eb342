"""Tests of the critical sample size m* (results.critical), on hand-built outcome tables.

The logistic fit is on ln m centred at its mean, with a ridge on both coefficients. For
outcomes that are antisymmetric about the centre (k_i/n_i = 1 - k_j/n_j at opposite
points), the fit has a = 0 exactly (the score in a vanishes at a = 0 for every b) and so
P = 1/2 at the centre: m* is the geometric mean of the grid's ends.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats import critical_sample_sizes, outcomes, success_rates

CELL = ["task", "T"]


def trial(task, T, m, seed, status="done", acc=None):
    return dict(task=task, T=T, m=m, seed=seed, status=status, test_acc=acc)


def frame(rows) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "task": pl.String,
            "T": pl.Int64,
            "m": pl.Int64,
            "seed": pl.Int64,
            "status": pl.String,
            "test_acc": pl.Float64,
        },
    )


def outcome_rows(task, T, table: dict[int, list[bool]]):
    """``{m: [success of seed 0, seed 1, ...]}`` as done trials with acc 1.0 / 0.5."""
    return [trial(task, T, m, seed, acc=1.0 if ok else 0.5) for m, oks in table.items() for seed, ok in enumerate(oks)]


def one_row(table: pl.DataFrame, **cell) -> dict:
    sel = table
    for k, v in cell.items():
        sel = sel.filter(pl.col(k) == v)
    assert sel.height == 1
    return sel.row(0, named=True)


def test_symmetric_two_point_cell():
    # m = 10: 1 of 4 seeds succeeds (0.25); m = 1000: 3 of 4 (0.75).
    rows = outcome_rows("and", 16, {10: [True, False, False, False], 1000: [True, True, True, False]})
    table, reps = critical_sample_sizes(frame(rows), CELL, n_boot=0)
    row = one_row(table, task="and", T=16)
    # ln 10 and ln 1000 are symmetric about ln 100; rates 0.25 / 0.75 are antisymmetric.
    assert row["m_star"] == pytest.approx(100.0, rel=1e-6)
    assert row["m_star_grid"] == 1000.0  # the first m whose rate is >= 1/2
    assert row["censored"] == ""
    assert row["n_seeds"] == 4 and row["n_trials"] == 8
    assert row["m_min"] == 10 and row["m_max"] == 1000
    assert math.isnan(row["ci_lo"]) and math.isnan(row["ci_hi"])
    assert reps == {}


def test_symmetric_three_point_cell():
    # Two seeds; rates 0, 1/2, 1 at m = 10, 100, 1000: the fit crosses 1/2 at m = 100.
    rows = outcome_rows("parity", 8, {10: [False, False], 100: [True, False], 1000: [True, True]})
    table, _ = critical_sample_sizes(frame(rows), CELL, n_boot=0)
    row = one_row(table, task="parity", T=8)
    assert row["m_star"] == pytest.approx(100.0, rel=1e-6)
    assert row["m_star_grid"] == 100.0
    assert row["censored"] == ""


def test_censored_cells():
    rows = (
        outcome_rows("and", 4, {10: [False, False, False], 100: [True, False, False]})  # max rate 1/3
        + outcome_rows("and", 8, {30: [True, True, True], 300: [True, True, True]})
    )
    table, _ = critical_sample_sizes(frame(rows), CELL, n_boot=0)
    above = one_row(table, task="and", T=4)
    # Beyond the grid: m* > 100 (the largest m tried), a lower bound, not a value.
    assert above["censored"] == "above" and above["bound"] == "lower"
    assert above["m_star"] == 100.0 and math.isnan(above["m_star_grid"])
    below = one_row(table, task="and", T=8)
    # At or below the smallest m tried (30 > 1): m* <= 30, an upper bound.
    assert below["censored"] == "below" and below["bound"] == "upper"
    assert below["m_star"] == 30.0 and below["m_star_grid"] == 30.0


def test_accuracy_threshold():
    # 0.94 is below the default threshold 0.95; 0.95 itself counts.
    rows = [trial("and", 8, 10, 0, acc=0.94), trial("and", 8, 10, 1, acc=0.95)]
    rates = success_rates(frame(rows), CELL)
    assert rates["n"].to_list() == [2] and rates["k"].to_list() == [1]
    rates = success_rates(frame(rows), CELL, acc_threshold=0.9)
    assert rates["k"].to_list() == [2]


def test_failed_trials_are_left_out():
    # m = 10: two seeds done with acc 1.0, two failed (never trained): rate 2/2 = 1.
    rows = [
        trial("and", 8, 10, 0, acc=1.0),
        trial("and", 8, 10, 1, acc=1.0),
        trial("and", 8, 10, 2, status="failed"),
        trial("and", 8, 10, 3, status="failed"),
        *outcome_rows("and", 8, {100: [True, True, True, True]}),
    ]
    rates = success_rates(frame(rows), CELL)
    at10 = rates.filter(pl.col("m") == 10).row(0, named=True)
    assert (at10["n"], at10["k"], at10["rate"]) == (2, 2, 1.0)
    table, _ = critical_sample_sizes(frame(rows), CELL, n_boot=0)
    row = one_row(table, task="and", T=8)
    assert row["censored"] == "below" and row["m_star"] == 10.0
    assert row["n_trials"] == 6  # the failed rows are not trials that trained

    # Where it matters: 1 success and 3 failed at m = 10 is a rate of 1/1, not 1/4.
    rows = [
        trial("and", 8, 10, 0, acc=1.0),
        *(trial("and", 8, 10, s, status="failed") for s in (1, 2, 3)),
        *outcome_rows("and", 8, {100: [True, True, True, True]}),
    ]
    row = one_row(critical_sample_sizes(frame(rows), CELL, n_boot=0)[0], task="and", T=8)
    assert row["censored"] == "below" and row["m_star_grid"] == 10.0


def test_diverged_trials_count_as_failures():
    # m = 10: one done success, three diverged (with a high accuracy recorded anyway).
    rows = [
        trial("and", 8, 10, 0, acc=1.0),
        *(trial("and", 8, 10, s, status="diverged", acc=1.0) for s in (1, 2, 3)),
        *outcome_rows("and", 8, {100: [True, True, True, True]}),
    ]
    out = outcomes(frame(rows)).collect().sort("m", "seed")
    assert out["success"].to_list() == [True, False, False, False, True, True, True, True]
    rates = success_rates(frame(rows), CELL)
    assert rates.filter(pl.col("m") == 10)["rate"].to_list() == [0.25]
    row = one_row(critical_sample_sizes(frame(rows), CELL, n_boot=0)[0], task="and", T=8)
    assert row["censored"] == ""  # 0.25 < 1/2 at the smallest m
    assert row["m_star_grid"] == 100.0
    assert 10.0 <= row["m_star"] <= 100.0


def test_cells_are_separate():
    rows = outcome_rows("and", 16, {10: [True, False, False, False], 1000: [True, True, True, False]}) + outcome_rows(
        "parity", 16, {10: [True, True], 1000: [True, True]}
    )
    table, _ = critical_sample_sizes(frame(rows), CELL, n_boot=0)
    assert table.height == 2
    assert one_row(table, task="and", T=16)["m_star"] == pytest.approx(100.0, rel=1e-6)
    assert one_row(table, task="parity", T=16)["censored"] == "below"


def noisy_rows():
    rng = np.random.default_rng(3)
    ms = [10, 30, 100, 300, 1000, 3000]
    probs = [0.05, 0.2, 0.4, 0.6, 0.8, 0.95]
    table = {m: list(rng.random(12) < p) for m, p in zip(ms, probs, strict=True)}
    return outcome_rows("and", 32, table)


def test_bootstrap_interval_contains_m_star():
    table, reps = critical_sample_sizes(frame(noisy_rows()), CELL, n_boot=400, seed=1)
    row = one_row(table, task="and", T=32)
    assert row["censored"] == ""
    assert 10.0 <= row["m_star"] <= 3000.0
    assert row["ci_lo"] <= row["m_star"] <= row["ci_hi"]
    assert row["ci_lo"] < row["ci_hi"]
    vals = reps[("and", 32)]
    assert vals.shape == (400,)
    # The interval holds the 2.5 / 97.5 percentiles of the replicates (inf = censored above)
    # and the grid bracket of the first m whose rate reaches 1/2 (stats/critical.py).
    lo, hi = np.percentile(vals, [2.5, 97.5], method="inverted_cdf")
    assert row["ci_lo"] <= lo and row["ci_hi"] >= hi
    grid = row["m_star_grid"]
    assert row["ci_lo"] <= max(m for m in (10, 30, 100, 300, 1000, 3000) if m < grid) and row["ci_hi"] >= grid


def test_bootstrap_is_seeded():
    a, _ = critical_sample_sizes(frame(noisy_rows()), CELL, n_boot=100, seed=5)
    b, _ = critical_sample_sizes(frame(noisy_rows()), CELL, n_boot=100, seed=5)
    assert a.equals(b)


def test_a_cells_interval_depends_neither_on_row_order_nor_on_the_other_cells():
    # The store returns rows in file order, which differs between identical runs.
    one = frame(noisy_rows())
    other = frame(outcome_rows("and", 64, {10: [False] * 6 + [True] * 6, 100: [True] * 12}))
    alone, _ = critical_sample_sizes(one, CELL, n_boot=200, seed=5)
    mixed, _ = critical_sample_sizes(
        pl.concat([other, one.sample(fraction=1.0, shuffle=True, seed=7)]), CELL, n_boot=200, seed=5
    )
    row, again = one_row(alone, task="and", T=32), one_row(mixed, task="and", T=32)
    assert (row["ci_lo"], row["ci_hi"]) == (again["ci_lo"], again["ci_hi"])


def test_a_setting_added_later_at_its_earlier_value_leaves_the_bootstrap_as_it_was():
    # As workers.config.LATER_FIELDS says: rows that carry ln_affine = True (every trial before
    # the setting) draw the same bootstrap replicates as the rows of before.
    rows = frame(noisy_rows())
    before, reps = critical_sample_sizes(rows, CELL, n_boot=200, seed=5)
    earlier = {"ln_affine": True, "positions": "learned"}
    after, reps_after = critical_sample_sizes(
        rows.with_columns(ln_affine=pl.lit(True), positions=pl.lit("learned")),
        [*CELL, "ln_affine", "positions"],
        n_boot=200,
        seed=5,
        earlier=earlier,
    )
    _, reps_other = critical_sample_sizes(
        rows.with_columns(ln_affine=pl.lit(False)),
        [*CELL, "ln_affine"],
        n_boot=200,
        seed=5,
        earlier=earlier,
    )
    (key,) = reps
    np.testing.assert_array_equal(reps_after[(*key, True, "learned")], reps[key])
    assert not np.array_equal(reps_other[(*key, False)], reps[key])  # another cell: its own generator
    row, again = one_row(before, T=32), one_row(after, T=32)
    assert (row["ci_lo"], row["ci_hi"]) == (again["ci_lo"], again["ci_hi"])


def test_no_bootstrap_gives_nan_interval():
    table, reps = critical_sample_sizes(frame(noisy_rows()), CELL, n_boot=0)
    row = one_row(table, task="and", T=32)
    assert math.isnan(row["ci_lo"]) and math.isnan(row["ci_hi"])
    assert reps == {}
    assert math.isfinite(row["m_star"])
