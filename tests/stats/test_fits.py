"""Tests of the growth-law fits of m*(T) (results.fits) on exactly known curves."""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.stats import compare_growth, fit_growth, predict

T = 2.0 ** np.arange(3, 11)  # 8 .. 1024


def by_model(table):
    return {r["model"]: r for r in table.iter_rows(named=True)}


def test_exact_log_growth():
    y = 10 + 5 * np.log(T)
    table = compare_growth(T, y)
    assert table["model"].to_list()[0] == "log"
    assert sorted(table["model"].to_list()) == ["linear", "log", "polylog", "power"]
    row = by_model(table)["log"]
    assert row["a"] == pytest.approx(10.0, abs=1e-6)
    assert row["b"] == pytest.approx(5.0, abs=1e-6)
    assert row["r2"] == pytest.approx(1.0, abs=1e-12)
    assert row["delta_aic"] == 0.0
    assert row["n_points"] == 8
    assert all(d > 0 for d in table["delta_aic"].to_list()[1:])
    assert np.isnan(row["b_lo"]) and np.isnan(row["b_hi"])  # no replicates, no interval


def test_exact_linear_growth():
    y = 3 + 0.5 * T
    table = compare_growth(T, y)
    assert table["model"].to_list()[0] == "linear"
    row = by_model(table)["linear"]
    assert row["a"] == pytest.approx(3.0, abs=1e-6)
    assert row["b"] == pytest.approx(0.5, abs=1e-9)
    assert row["r2"] == pytest.approx(1.0, abs=1e-12)


def test_exact_power_growth():
    y = 2 * T**0.7
    table = compare_growth(T, y)
    assert table["model"].to_list()[0] == "power"
    row = by_model(table)["power"]
    assert row["a"] == pytest.approx(2.0, abs=1e-3)
    assert row["b"] == pytest.approx(0.7, abs=1e-3)  # the exponent c
    assert row["r2"] == pytest.approx(1.0, abs=1e-9)


def test_exact_polylog_growth():
    y = 3 * np.log(T) ** 2.5  # faster than any log law, slower than any power of T
    table = compare_growth(T, y)
    assert table["model"].to_list()[0] == "polylog"
    row = by_model(table)["polylog"]
    assert row["a"] == pytest.approx(3.0, rel=1e-4)
    assert row["b"] == pytest.approx(2.5, abs=1e-4)  # the exponent k of ln T
    assert row["r2"] == pytest.approx(1.0, abs=1e-9)


def test_aic_bic_formula():
    # Hand-checkable: for the log model on noisy data, AIC = n ln(RSS/n) + 2*3.
    rng = np.random.default_rng(0)
    y = 10 + 5 * np.log(T) + rng.normal(0, 0.5, size=len(T))
    A = np.stack([np.ones_like(T), np.log(T)], 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    rss = float(np.sum((y - A @ coef) ** 2))
    n = len(T)
    row = by_model(compare_growth(T, y))["log"]
    assert row["a"] == pytest.approx(coef[0], rel=1e-8) and row["b"] == pytest.approx(coef[1], rel=1e-8)
    assert row["aic"] == pytest.approx(n * np.log(rss / n) + 6, rel=1e-8)
    assert row["bic"] == pytest.approx(n * np.log(rss / n) + 3 * np.log(n), rel=1e-8)
    assert row["r2"] == pytest.approx(1 - rss / np.sum((y - y.mean()) ** 2), rel=1e-8)


def test_replicate_intervals_contain_truth():
    rng = np.random.default_rng(42)
    truth = 10 + 5 * np.log(T)
    reps = truth[None, :] + rng.normal(0, 0.2, size=(200, len(T)))
    table = compare_growth(T, truth + rng.normal(0, 0.2, size=len(T)), replicates=reps)
    row = by_model(table)["log"]
    assert row["b_lo"] < 5.0 < row["b_hi"]
    assert row["a_lo"] < 10.0 < row["a_hi"]
    assert row["b_hi"] - row["b_lo"] < 1.0  # noise 0.2 on 8 points: a narrow interval


def test_replicates_with_non_finite_rows_are_skipped():
    rng = np.random.default_rng(1)
    truth = 10 + 5 * np.log(T)
    reps = truth[None, :] + rng.normal(0, 0.2, size=(60, len(T)))
    reps[::2, 0] = np.inf  # half the replicates are censored somewhere
    row = by_model(compare_growth(T, truth, replicates=reps))["log"]
    assert np.isfinite(row["b_lo"]) and row["b_lo"] < 5.0 < row["b_hi"]
    reps[:45, 1] = np.nan  # only 15 good rows left: fewer than 20, no interval
    row = by_model(compare_growth(T, truth, replicates=reps))["log"]
    assert np.isnan(row["b_lo"])


def test_fit_growth_and_predict():
    assert fit_growth(T, 1 + 2 * np.log(T), "log") == pytest.approx((1.0, 2.0))
    assert fit_growth(T, 4 - 0.25 * T, "linear") == pytest.approx((4.0, -0.25))
    np.testing.assert_allclose(predict("log", (1.0, 2.0), np.array([np.e])), [3.0])
    np.testing.assert_allclose(predict("linear", (1.0, 2.0), np.array([3.0])), [7.0])
    np.testing.assert_allclose(predict("power", (2.0, 0.5), np.array([16.0])), [8.0])
    np.testing.assert_allclose(predict("polylog", (2.0, 3.0), np.array([np.e**2])), [16.0])  # 2 * 2^3


def test_unknown_model_raises():
    with pytest.raises(ValueError):
        fit_growth(T, T, "quadratic")
