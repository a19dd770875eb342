"""S2's control half for a student that cannot represent the teacher, and the advantage's slope
intervals built from the cells' m* intervals (stats/symmetry.py, stats/symmetry_scale.py), on
constructed tables whose answers follow from how they are built (no training)."""

import json
import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats import symmetry_scale as scale
from attnsweep.stats.symmetry import (
    NO_FIT_FACTOR,
    critical_sample_sizes,
    representation,
    verdicts,
    with_budget_check,
)

TARGET = 0.05
MS = (4, 16, 64, 256)


def _run(ip_control_train=lambda m: 0.9, epochs=400):
    """One (d, n, k) group, 3 seeds, every trial at ``epochs`` without stopping early.

    * equivariant teacher: the inner-product student succeeds at every m (fits its training
      set), the transformer from m = 64, the MLP never (it fits its training set: no epochs
      problem, so its m* is a plain lower bound);
    * control teacher: the transformer succeeds from m = 16, the MLP never (fits its training
      set); the inner-product student never reaches the target (test error 0.9) with training
      error ``ip_control_train(m)``, above the target: every such trial ran out of epochs, so
      the out-of-epochs rule leaves its m* unknown.
    """
    rows = []
    for teacher in ("equivariant", "control"):
        for m in MS:
            for seed in range(3):
                base = dict(
                    teacher=teacher,
                    n=6,
                    k=4,
                    d=8,
                    m=m,
                    seed=seed,
                    status="done",
                    converged=False,
                    max_epochs=epochs,
                    eq_error_median=m**-0.5,
                    eq_error_max=2 * m**-0.5,
                    perm_error_median=m**-0.5,
                )
                eq = teacher == "equivariant"
                rows.append(
                    dict(
                        base,
                        model="transformer",
                        equivariance="orthogonal",
                        test_error=1e-3 if eq else 0.9,
                        train_error=1e-4 if eq else ip_control_train(m),
                        eq_error_median=2e-16,
                        eq_error_max=4e-16,
                    )
                )
                ok = m >= (64 if eq else 16)
                rows.append(
                    dict(
                        base,
                        model="transformer",
                        equivariance="none",
                        test_error=0.01 if ok else 0.5,
                        train_error=1e-4,
                    )
                )
                rows.append(dict(base, model="mlp", equivariance="none", test_error=0.5, train_error=1e-4))
    return pl.DataFrame(rows)


def _ip_control(m_star):
    return m_star.filter((pl.col("teacher") == "control") & (pl.col("student") == "inner-product")).row(0, named=True)


def test_a_control_student_that_cannot_fit_its_training_sets_meets_the_control_half():
    # Training error 0.9 at every m (18 x the target, >= 2 x): flat, so its slope on m is 0 and
    # its interval [0, 0] lies above -0.05. No budget check ran: the evidence is level and trend.
    trials = _run()
    m_star = critical_sample_sizes(trials, TARGET, 200, 0.95)
    assert _ip_control(m_star)["bound"] == "none"  # unknown by the out-of-epochs rule alone
    s2 = verdicts(trials, m_star, n_boot=200, target_error=TARGET)[1]
    assert s2["verdict"] == "supported", s2["why"]
    assert "control: inner-product never reaches the target at any m tried (up to 256" in s2["statistic"]
    assert "cannot represent this teacher" in s2["why"]
    assert "0.9 to 0.9 at m = 4, 16, 64, 256" in s2["why"]
    assert "[evidence: its level and trend across m" in s2["why"]
    assert "slope of log10 training error on log10 m 0.00, CI 0.00 .. 0.00" in s2["why"]
    (read,) = s2["series"][0]["numbers"]["cannot_represent"]
    assert read["cannot_represent"] is True and read["evidence"] == "level and trend"
    assert read["level"] == pytest.approx(NO_FIT_FACTOR * TARGET)
    assert [x["median"] for x in read["train_error"]] == [0.9] * 4
    # The cell no longer counts among those whose m* the epochs left unknown.
    assert "cells that ran out of epochs" not in s2["why"]


def test_a_control_student_whose_training_error_falls_with_m_stays_undecided():
    # Training error 0.9 (m/4)^-0.4: 0.9, 0.52, 0.30, 0.17 at m = 4..256, above 2 x the target
    # everywhere, but falling: slope -0.4 exactly (every seed alike, so its interval is -0.4 too),
    # below -0.05. Larger training sets bring it down: no evidence that it cannot represent
    # the teacher, and its m* stays unknown.
    trials = _run(lambda m: 0.9 * (m / 4) ** -0.4)
    m_star = critical_sample_sizes(trials, TARGET, 200, 0.95)
    s2 = verdicts(trials, m_star, n_boot=200, target_error=TARGET)[1]
    assert s2["verdict"] == "inconclusive"
    assert "control: inner-product unknown vs transformer" in s2["statistic"]
    assert "the rows do not show that it cannot represent this teacher" in s2["why"]
    assert "it may fall as m grows (slope of log10 training error on log10 m -0.40, CI -0.40 .. -0.40" in s2["why"]
    assert "undecided (the two overlap, or one has no number): control: mlp, control: transformer" in s2["why"]


def test_a_control_student_that_fits_a_small_training_set_is_not_unable_to_represent():
    # At m = 4 its median training error is 0.06 < 2 x 0.05: it fits its training set there.
    trials = _run(lambda m: 0.06 if m == 4 else 0.9)
    m_star = critical_sample_sizes(trials, TARGET, 200, 0.95)
    s2 = verdicts(trials, m_star, n_boot=200, target_error=TARGET)[1]
    assert s2["verdict"] == "inconclusive"
    assert "reaches 0.06 at m = 4, below 2 x the target (0.1): it fits its training set there" in s2["why"]


def test_a_control_student_whose_training_error_falls_with_twice_the_epochs_stays_budget_limited():
    # The budget check at twice the epochs (800) at m = 256: the inner-product student's training
    # error falls from 0.9 to 0.01 and it reaches the target: the outcome at m = 256 changed, so the
    # cell is budget-limited (m* unknown), and its fall with more epochs says it was an epochs
    # problem, not one of representation.
    trials = _run()
    twice = trials.filter(
        (pl.col("teacher") == "control") & (pl.col("equivariance") == "orthogonal") & (pl.col("m") == 256)
    ).with_columns(max_epochs=pl.lit(800), train_error=pl.lit(0.01), test_error=pl.lit(0.01))
    m_star = with_budget_check(critical_sample_sizes(trials, TARGET, 200, 0.95), trials, twice, TARGET, 0.5)
    cell = _ip_control(m_star)
    assert cell["budget"] == "budget-limited" and cell["bound"] == "none"
    s2 = verdicts(trials, m_star, n_boot=200, budget_rows=twice, target_error=TARGET)[1]
    assert s2["verdict"] == "inconclusive"
    assert "falls with more epochs (0.01 against 0.9 at m = 256 at twice the epochs)" in s2["why"]
    assert "an epochs problem, not one of representation" in s2["why"]
    (read,) = s2["series"][0]["numbers"]["cannot_represent"]
    assert read["cannot_represent"] is False and read["train_error_2x"] == [dict(m=256, median=0.01)]


def _cell_rows(train):
    """A cell's rows: 3 seeds at each m of ``train`` ({m: training error}), all done."""
    return pl.DataFrame([dict(m=m, seed=s, status="done", train_error=e) for m, e in train.items() for s in range(3)])


def test_representation_by_the_budget_check():
    rows = _cell_rows({4: 0.5, 16: 0.8, 64: 0.9})
    # At twice the epochs, m = 64: 0.85 against 0.9, a fall of 5.6% (< 10%): it stays.
    stays = representation(rows, _cell_rows({64: 0.85}), TARGET, n_boot=100)
    assert stays["cannot_represent"] is True and stays["evidence"] == "budget check"
    assert "0.85 against 0.9 at m = 64: it fell by less than 10%" in stays["text"]
    # 0.8 against 0.9: a fall of 11% (> 10%): more epochs help, whatever the level.
    falls = representation(rows, _cell_rows({64: 0.8}), TARGET, n_boot=100)
    assert falls["cannot_represent"] is False and "an epochs problem" in falls["text"]
    # The budget check reads first: with it, the trend across m is not read.
    assert stays["slope"] is None


def test_representation_needs_a_trend_where_no_budget_check_ran():
    one_m = representation(_cell_rows({16: 0.9}), _cell_rows({}), TARGET, n_boot=100)
    assert one_m["cannot_represent"] is False and "one m tried gives no trend" in one_m["text"]
    rising = representation(_cell_rows({1: 0.2, 16: 0.9, 256: 0.95}), _cell_rows({}), TARGET, n_boot=100)
    assert rising["cannot_represent"] is True and rising["evidence"] == "level and trend"
    # log10 0.2, 0.9, 0.95 on log10 1, 16, 256 (x = 0, 1.204, 2.408): OLS slope by hand.
    x = np.log10([1, 16, 256])
    y = np.log10([0.2, 0.9, 0.95])
    want = np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2)
    assert rising["slope"]["estimate"] == pytest.approx(want)
    assert representation(_cell_rows({4: 0.9}), _cell_rows({}), TARGET)["train_error"] == [{"m": 4, "median": 0.9}]


# --- the advantage's slope intervals: from the cells' m* intervals, not the seed bootstrap alone ---


def _m_star_table():
    """The equivariant teacher at d = 4, 8, 16 (n = 6, k = 4): the inner-product student's m* is
    1 exactly (interval 1 .. 1, the floor), the transformer's 40 (30 .. 50), 60 (45 .. 75) and
    160 (110 .. 170); its bootstrap replicates lie in narrower bands, 39..41, 59..61 and
    158..162 (as a 5-seed bootstrap's often do: docs/claims.md 2, "bootstrap alone")."""
    cells = []
    reps = {}
    rng = np.random.default_rng(0)
    for d, (m, lo, hi, band) in {
        4: (40.0, 30.0, 50.0, (39.0, 41.0)),
        8: (60.0, 45.0, 75.0, (59.0, 61.0)),
        16: (160.0, 110.0, 170.0, (158.0, 162.0)),
    }.items():
        for student, values, r in (
            ("inner-product", (1.0, 1.0, 1.0), np.ones(400)),
            ("transformer", (m, lo, hi), rng.uniform(*band, 400)),
        ):
            cells.append(
                dict(
                    teacher="equivariant",
                    student=student,
                    n=6,
                    k=4,
                    d=d,
                    m_star=values[0],
                    ci_lo=values[1],
                    ci_hi=values[2],
                    bound="exact",
                    m_min=1,
                    m_max=512,
                )
            )
            reps[("equivariant", student, 6, 4, d)] = r
    return pl.DataFrame(cells), reps


def test_local_slope_intervals_come_from_the_cells_intervals_and_overlap_where_they_do():
    m_star, reps = _m_star_table()
    row = (
        scale.advantage_slopes(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    local = json.loads(row["local_json"])
    # Point slopes: log2(60 / 40) = 0.585 and log2(160 / 60) = 1.415.
    assert [x["slope"] for x in local] == pytest.approx([math.log2(1.5), math.log2(160 / 60)])
    # The bootstrap alone: 4 -> 8 within log2(59/41) .. log2(61/39) = 0.52 .. 0.65, and 8 -> 16
    # within log2(158/61) .. log2(162/59) = 1.37 .. 1.46: apart.
    assert local[0]["bootstrap_hi"] <= math.log2(61 / 39) and local[1]["bootstrap_lo"] >= math.log2(158 / 61)
    assert local[0]["bootstrap_hi"] < local[1]["bootstrap_lo"]
    # From the cells' intervals (the inner-product m* is 1 .. 1): 4 -> 8 from log2(45 / 50) = -0.152
    # to log2(75 / 30) = 1.322; 8 -> 16 from log2(110 / 75) = 0.553 to log2(170 / 45) = 1.918.
    assert (local[0]["cells_lo"], local[0]["cells_hi"]) == pytest.approx((math.log2(45 / 50), math.log2(75 / 30)))
    assert (local[1]["cells_lo"], local[1]["cells_hi"]) == pytest.approx((math.log2(110 / 75), math.log2(170 / 45)))
    # Each interval is the hull of the two: here the cells' (they hold the bootstrap's).
    assert (local[0]["ci_lo"], local[0]["ci_hi"]) == pytest.approx((math.log2(45 / 50), math.log2(75 / 30)))
    assert (local[1]["ci_lo"], local[1]["ci_hi"]) == pytest.approx((math.log2(110 / 75), math.log2(170 / 45)))
    # 0.553 < 1.322: they overlap, so one power law stands.
    assert row["lack_of_fit"] is False
    # The one slope over d = 4, 8, 16: OLS weights on ln d are (-1, 0, 1) / (2 ln 2), so the slope
    # is log2(m16 / m4) / 2 = 1, its cells' extremes log2(110 / 50) / 2 = 0.569 .. log2(170 / 30) / 2
    # = 1.251, holding the bootstrap's (about 0.97 .. 1.03).
    assert row["slope"] == pytest.approx(1.0)
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((math.log2(110 / 50) / 2, math.log2(170 / 30) / 2))


def test_local_slope_intervals_apart_when_the_cells_intervals_say_so():
    # Narrow the cells' intervals to the bootstrap's bands: 4 -> 8 from log2(59/41) = 0.525 to
    # log2(61/39) = 0.645, 8 -> 16 from log2(158/61) = 1.373 to log2(162/59) = 1.457: apart.
    m_star, reps = _m_star_table()
    band = {4: (39.0, 41.0), 8: (59.0, 61.0), 16: (158.0, 162.0)}
    m_star = pl.DataFrame(
        [
            dict(r, ci_lo=band[r["d"]][0], ci_hi=band[r["d"]][1]) if r["student"] == "transformer" else r
            for r in m_star.iter_rows(named=True)
        ]
    )
    row = (
        scale.advantage_slopes(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    local = json.loads(row["local_json"])
    assert local[0]["ci_hi"] == pytest.approx(math.log2(61 / 39)) and local[1]["ci_lo"] == pytest.approx(
        math.log2(158 / 61)
    )
    assert row["lack_of_fit"] is True


def test_a_two_value_slope_takes_its_interval_from_the_cells_without_replicates():
    # No replicates (n_boot = 0 upstream): the interval is the cells' alone, log2(45/50) .. log2(75/30).
    m_star, _ = _m_star_table()
    row = (
        scale.advantage_slopes(m_star.filter(pl.col("d") <= 8), {}, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((math.log2(45 / 50), math.log2(75 / 30)))
