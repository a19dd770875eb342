"""Slopes and verdicts of the symmetry analysis on constructed tables."""

import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats.symmetry import critical_sample_sizes, log_slope, verdicts


def test_log_slope_of_an_exact_power_law():
    # E = 3 m^-0.5 exactly: log10 E = log10 3 - 0.5 log10 m, for every seed.
    rows = [dict(m=m, seed=s, e=3 * m**-0.5) for m in (4, 16, 64, 256) for s in range(4)]
    b, lo, hi = log_slope(pl.DataFrame(rows), "e", n_boot=200)
    assert b == pytest.approx(-0.5) and lo == pytest.approx(-0.5) and hi == pytest.approx(-0.5)


def test_log_slope_needs_two_m():
    b, lo, hi = log_slope(pl.DataFrame(dict(m=[4, 4], seed=[0, 1], e=[0.1, 0.2])), "e")
    assert math.isnan(b) and math.isnan(lo)


def _trials():
    """3 seeds; the inner-product student is exact and learns the equivariant teacher at
    every m; the transformer needs m >= 64 there; on the control teacher only the
    transformer learns (m >= 16). E of the transformer halves per 4x in m."""
    rows = []
    for teacher in ("equivariant", "control"):
        for m in (4, 16, 64, 256):
            for seed in range(3):
                base = dict(
                    teacher=teacher,
                    n=6,
                    k=4,
                    d=8,
                    m=m,
                    seed=seed,
                    status="done",
                    perm_error_median=0.1 / m,
                )
                orth_err = 1e-3 if teacher == "equivariant" else 1.0
                rows.append(
                    dict(
                        base,
                        model="transformer",
                        equivariance="orthogonal",
                        test_error=orth_err,
                        eq_error_median=2e-16,
                        eq_error_max=4e-16,
                    )
                )
                tr_ok = m >= (64 if teacher == "equivariant" else 16)
                rows.append(
                    dict(
                        base,
                        model="transformer",
                        equivariance="none",
                        test_error=0.01 if tr_ok else 0.5,
                        eq_error_median=m**-0.5,
                        eq_error_max=2 * m**-0.5,
                    )
                )
                rows.append(
                    dict(
                        base,
                        model="mlp",
                        equivariance="none",
                        test_error=0.5,
                        eq_error_median=1.0,
                        eq_error_max=1.4,
                    )
                )
    return pl.DataFrame(rows)


def test_verdicts_on_a_constructed_run():
    trials = _trials()
    m_star = critical_sample_sizes(trials, target_error=0.05, n_boot=200, ci=0.95)
    got = {v["claim"][:2]: v for v in verdicts(trials, m_star, n_boot=200)}
    assert got["S1"]["verdict"] == "supported"  # 4e-16 < 1e-10 and 0.5 >= 1e4 * 4e-16
    assert got["S2"]["verdict"] == "supported"  # equivariant: <=4 vs 64 and > 256; control: > 256 vs 16
    assert got["S3"]["verdict"] == "supported"  # slope of log10 m^-0.5 is -0.5
    assert "-0.50" in got["S3"]["statistic"]
    assert got["S4"]["verdict"] == "supported"  # slope -1


def test_s1_fails_when_the_equivariant_student_is_not():
    trials = _trials().with_columns(
        eq_error_max=pl.when(pl.col("equivariance") == "orthogonal").then(1e-6).otherwise(pl.col("eq_error_max"))
    )
    m_star = critical_sample_sizes(trials, 0.05, 100, 0.95)
    s1 = verdicts(trials, m_star, n_boot=100)[0]
    assert s1["verdict"] == "not supported"


def test_s2_fails_when_the_equivariant_student_also_wins_on_the_control():
    trials = _trials().with_columns(
        test_error=pl.when(pl.col("equivariance") == "orthogonal").then(1e-3).otherwise(pl.col("test_error"))
    )
    s2 = verdicts(trials, critical_sample_sizes(trials, 0.05, 100, 0.95), n_boot=100)[1]
    assert s2["verdict"] == "not supported"


def test_missing_students_are_not_tested():
    trials = _trials().filter(pl.col("equivariance") != "orthogonal")
    got = verdicts(trials, critical_sample_sizes(trials, 0.05, 100, 0.95), n_boot=100)
    # No inner-product trials: the run holds no data for S1 and S2 ("not tested", not "inconclusive").
    assert got[0]["verdict"] == got[1]["verdict"] == "not tested"
    assert np.isfinite(float(got[2]["statistic"].split("=")[1]))


def test_a_zero_width_interval_becomes_the_bracketing_grid_points():
    # Every seed of the transformer fails at m = 16 and succeeds at m = 64 (the constructed run):
    # the bootstrap repeats one m*, but the grid only says 16 < m* <= 64.
    trials = _trials()
    m_star = critical_sample_sizes(trials, target_error=0.05, n_boot=200, ci=0.95)
    row = m_star.filter((pl.col("teacher") == "equivariant") & (pl.col("student") == "transformer")).row(0, named=True)
    assert row["censored"] == "" and (row["ci_lo"], row["ci_hi"]) == (16.0, 64.0)
    assert 16 <= row["m_star"] <= 64


def test_s2_is_not_won_on_brackets_that_touch():
    # Equivariant teacher: the inner-product student succeeds from m = 64, the transformer from
    # m = 256, every seed alike: zero-width bootstrap intervals that looked apart (about 31 vs
    # 127); as brackets, 16 .. 64 and 64 .. 256, they are not.
    rows = []
    for teacher in ("equivariant", "control"):
        for m in (4, 16, 64, 256):
            for seed in range(3):
                base = dict(
                    teacher=teacher,
                    n=6,
                    k=4,
                    d=8,
                    m=m,
                    seed=seed,
                    status="done",
                    perm_error_median=0.1 / m,
                    eq_error_median=0.1,
                    eq_error_max=0.2,
                )
                first = {
                    ("equivariant", "orthogonal"): 64,
                    ("equivariant", "none"): 256,
                    ("control", "none"): 16,
                }
                for model, eq in (
                    ("transformer", "orthogonal"),
                    ("transformer", "none"),
                    ("mlp", "none"),
                ):
                    ok = model == "transformer" and m >= first.get((teacher, eq), 10**9)
                    rows.append(dict(base, model=model, equivariance=eq, test_error=0.01 if ok else 0.5))
    trials = pl.DataFrame(rows)
    m_star = critical_sample_sizes(trials, target_error=0.05, n_boot=200, ci=0.95)
    s2 = verdicts(trials, m_star, n_boot=200)[1]
    assert "inner-product" in s2["statistic"] and "(16 .. 64)" in s2["statistic"] and "(64 .. 256)" in s2["statistic"]
    assert s2["verdict"] != "supported"


def test_s2_is_inconclusive_when_both_students_are_beyond_the_grid_on_the_equivariant_teacher():
    # No student learns the equivariant teacher at any m tried: no order of m* can be read
    # off, so S2 is neither supported nor refuted (it used to read as not supported).
    trials = _trials().with_columns(
        test_error=pl.when(pl.col("teacher") == "equivariant").then(0.9).otherwise(pl.col("test_error"))
    )
    s2 = verdicts(trials, critical_sample_sizes(trials, 0.05, 100, 0.95), n_boot=100)[1]
    assert s2["verdict"] == "inconclusive"
    assert "undecided (the two overlap, or one has no number): equivariant: mlp, equivariant: transformer" in s2["why"]


def test_e_slopes_of_trials_that_ran_out_of_epochs_stay_inconclusive_after_a_budget_check_kept_m_star():
    # The budget check settles m* (its outcome at twice the epochs), not E: when the generic
    # transformer's deciding trials ran out of epochs, S3 and S4 are inconclusive even where
    # the check kept the outcome and cleared the cell's flag.
    trials = _trials()
    m_star = critical_sample_sizes(trials, target_error=0.05, n_boot=100, ci=0.95)
    generic = (pl.col("student") == "transformer") & (pl.col("teacher") == "equivariant")
    cleared = m_star.with_columns(
        out_of_epochs=pl.when(generic).then(True).otherwise(pl.col("out_of_epochs")),
        flags=pl.when(generic).then(pl.lit("")).otherwise(pl.col("flags")),
        budget=pl.lit("ok"),
    )
    got = {v["claim"][:2]: v for v in verdicts(trials, cleared, n_boot=100)}
    for claim in ("S3", "S4"):
        assert got[claim]["verdict"] == "inconclusive", got[claim]["why"]
        assert "does not clear E" in got[claim]["why"]
    plain = {v["claim"][:2]: v for v in verdicts(trials, m_star, n_boot=100)}
    assert plain["S3"]["verdict"] == plain["S4"]["verdict"] == "supported"


def test_a_package_teacher_joins_s2_by_its_symmetries():
    # "mirror" is the control teacher's rows under another name: with permutations alone it
    # stands beside the control, where the inner-product student must not win.
    trials = _trials()
    mirror = trials.filter(pl.col("teacher") == "control").with_columns(teacher=pl.lit("mirror"))
    both = pl.concat([trials, mirror])
    m_star = critical_sample_sizes(both, 0.05, 100, 0.95)
    sym = dict(equivariant=frozenset({"orthogonal", "permutation"}), mirror=frozenset({"permutation"}))
    s2 = verdicts(both, m_star, n_boot=100, symmetries=sym)[1]
    assert s2["verdict"] == "supported" and "mirror: inner-product" in s2["statistic"]
    assert {c["teacher"] for c in s2["series"][0]["numbers"]["comparisons"]} == {"equivariant", "control", "mirror"}
    # Unknown symmetries (its package is not installed here), or no side: no claim reads it.
    for unread in (None, frozenset({"orthogonal"})):
        s2 = verdicts(both, m_star, n_boot=100, symmetries=dict(mirror=unread))[1]
        assert "mirror" not in s2["statistic"]
    # Standing in for the missing built-in of its side: the claim is judged on it.
    alone = pl.concat([trials.filter(pl.col("teacher") != "control"), mirror])
    s2 = verdicts(alone, critical_sample_sizes(alone, 0.05, 100, 0.95), n_boot=100, symmetries=sym)[1]
    assert s2["verdict"] == "supported" and "control" not in s2["statistic"]
    # A mirror where the inner-product student wins contradicts the claim as the control would.
    won = pl.concat(
        [
            trials,
            mirror.with_columns(
                test_error=pl.when(pl.col("equivariance") == "orthogonal").then(1e-3).otherwise(pl.col("test_error"))
            ),
        ]
    )
    s2 = verdicts(won, critical_sample_sizes(won, 0.05, 100, 0.95), n_boot=100, symmetries=sym)[1]
    assert s2["verdict"] == "not supported"
