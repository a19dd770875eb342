"""The margin bound's reading of a series (stats/margin_reading.py), on m* tables whose right
reading follows from their construction: m* = a T^0.5 ln T grows faster than log T; with
margins ~ T^-0.25, m* x margin^2 = a ln T grows exactly like log T (the margins reading);
with margins that do not move, the scaled m* grows as m* does (something else)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats.margin_reading import bound_reading, margin_trend, reading, scaled

POW2 = [2**k for k in range(2, 13)]  # T = 4 .. 4096: 3.0 decades


def table(margin_of, m_of=lambda T: 3 * math.sqrt(T) * math.log(T), noise=0.02, seed=0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for T in POW2:
        m = m_of(T)
        reps = m * np.exp(noise * rng.standard_normal(200))
        lo, hi = np.percentile(reps, [2.5, 97.5])
        rows.append(
            dict(
                task="and",
                T=T,
                s=3,
                model="transformer",
                norm_bound=1.0,
                m_star=m,
                m_star_grid=m,
                m_star_interp=m,
                ci_lo=float(lo),
                ci_hi=float(hi),
                bound="exact",
                flags="",
                n_seeds=8,
                m_min=2,
                m_max=10**6,
                n_trials=100,
                replicates=[float(r) for r in reps],
                margin_success=margin_of(T),
            )
        )
    return pl.DataFrame(rows, schema_overrides={"replicates": pl.List(pl.Float64)})


def test_shrinking_margins_that_account_for_the_growth_read_as_margins():
    (entry,) = bound_reading(table(lambda T: 0.5 * T**-0.25))
    assert entry["direction"] == "faster than log"
    assert entry["margin_trend"]["e"] == pytest.approx(-0.25, abs=1e-9)
    assert entry["margin_trend"]["e_hi"] < 0
    assert entry["scaled"]["numbers"]["direction"] == "log"
    assert entry["reading"] == "margins"


def test_margins_that_do_not_move_leave_the_growth_to_something_else():
    (entry,) = bound_reading(table(lambda T: 0.1 * (1 + 0.01 * (-1) ** int(math.log2(T)))))
    assert entry["direction"] == "faster than log"
    assert entry["margin_trend"]["e_lo"] < 0 < entry["margin_trend"]["e_hi"]
    assert entry["scaled"]["numbers"]["direction"] == "faster than log"
    assert entry["reading"] == "something else"


def test_log_growth_of_m_star_itself_leaves_nothing_to_explain():
    (entry,) = bound_reading(table(lambda T: 0.1, m_of=lambda T: 20 + 10 * math.log(T)))
    assert entry["direction"] == "log" and entry["reading"] == "cannot tell"


def test_rows_without_margins_have_no_reading():
    assert bound_reading(table(lambda T: 0.1).drop("margin_success")) == []
    assert bound_reading(table(lambda T: None)) == []


def test_the_scaled_table_multiplies_values_and_replicates_and_keeps_bounds():
    t = table(lambda T: 0.5).with_columns(
        bound=pl.when(pl.col("T") == 4096).then(pl.lit("lower")).otherwise(pl.lit("exact"))
    )
    out = scaled(t)
    first, last = out.row(0, named=True), out.row(-1, named=True)
    assert first["m_star"] == pytest.approx(t["m_star"][0] * 0.25)
    assert first["m_star_grid"] == pytest.approx(t["m_star_grid"][0] * 0.25)
    assert first["replicates"][0] == pytest.approx(t["replicates"][0][0] * 0.25)
    assert last["bound"] == "lower" and last["m_star"] == t["m_star"][-1]


def test_the_margin_trend_is_the_log_log_slope_with_its_t_interval():
    T = np.array([4.0, 16, 64, 256])
    got = margin_trend(T, 0.3 * T**-0.5 * np.array([1.01, 0.99, 1.02, 0.98]))
    assert got["e_lo"] < got["e"] < got["e_hi"] and got["e"] == pytest.approx(-0.5, abs=0.02)
    assert margin_trend(T[:2], np.array([0.1, 0.2])) is None  # fewer than 3 cells
    assert margin_trend(T, np.array([0.1, -0.1, math.nan, 0.2])) is None  # non-positive and NaN left out


@pytest.mark.parametrize(
    "direction, trend, scaled_direction, want",
    [
        ("faster than log", dict(e=-0.3, e_lo=-0.4, e_hi=-0.2), "log", "margins"),
        ("faster than log", dict(e=-0.3, e_lo=-0.4, e_hi=0.1), "log", "cannot tell"),
        ("faster than log", dict(e=-0.3, e_lo=-0.4, e_hi=-0.2), "undecided", "cannot tell"),
        ("faster than log", dict(e=-0.3, e_lo=-0.4, e_hi=-0.2), "faster than log", "something else"),
        ("log", dict(e=-0.3, e_lo=-0.4, e_hi=-0.2), "log", "cannot tell"),
        ("undecided", None, "faster than log", "cannot tell"),
    ],
)
def test_the_reading_rule(direction, trend, scaled_direction, want):
    assert reading(direction, trend, scaled_direction) == want


def test_a_series_without_margins_beside_one_with_them_leaves_the_reading_as_its_own_l1():
    # The union of an old run (no margins) and a new one: the reading's m* direction is the one
    # L1 gives the new series, and the old series, whose cells cannot be scaled, is not read.
    old = table(lambda T: None, m_of=lambda T: 20 + 10 * math.log(T)).with_columns(stop=pl.lit("fit"))
    new = table(lambda T: 0.1).with_columns(stop=pl.lit("margin"))
    union = pl.concat([old, new], how="diagonal_relaxed")
    cell = ["T", "stop", "norm_bound"]
    (entry,) = bound_reading(union, cell)
    assert entry["cells"]["stop"] == "margin"
    assert entry["direction"] == "faster than log" and entry["reading"] == "something else"
    assert scaled(old)["bound"].unique().to_list() == ["none"]  # no margin: no scaled m*
