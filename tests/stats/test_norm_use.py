"""How much of its norm bound a cell used (stats/norm_use.py), on rows whose right answer
follows from their construction."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats.norm_use import norm_growth, norm_use


def _rows():
    def row(T, bound, qk, v, readout, acc, status="done"):
        return dict(
            T=T,
            norm_bound=bound,
            norm_qk=qk,
            norm_v=v,
            norm_readout=readout,
            test_acc=acc,
            status=status,
        )

    return pl.DataFrame(
        [
            row(64, 1.0, 1.0, 0.5, 0.2, 0.99),  # W_QK at the bound
            row(64, 1.0, 0.9995, 0.1, 0.1, 0.50),  # within the tolerance: at the bound
            row(64, 1.0, 0.5, 0.5, 0.5, 0.97),  # nothing at the bound
            row(64, 1.0, 0.3, 0.2, 0.9999, 0.40),  # the readout at the bound
            row(64, 1.0, 1.0, 1.0, 1.0, None, "failed"),  # not trained: not counted
            row(64, None, 2.5, 1.0, 0.5, 0.96),  # unbounded
            row(64, None, 1.7, 1.0, 0.5, 0.99),
            row(64, None, 0.9, 1.0, 0.5, 0.10),  # the smallest norm, but it failed
        ],
        schema_overrides={"norm_bound": pl.Float64, "test_acc": pl.Float64},
    )


def test_the_fraction_at_the_bound_and_the_smallest_norm_that_succeeded():
    table = norm_use(_rows(), ["T", "norm_bound"], acc_threshold=0.95)
    bounded = table.filter(pl.col("norm_bound") == 1.0).row(0, named=True)
    assert bounded["n_trained"] == 4 and bounded["at_bound"] == pytest.approx(3 / 4)
    assert bounded["min_norm_qk"] == pytest.approx(0.5) and bounded["n_success"] == 2
    free = table.filter(pl.col("norm_bound").is_null()).row(0, named=True)
    assert free["at_bound"] is None  # no bound, nothing to bind
    assert free["min_norm_qk"] == pytest.approx(1.7) and free["n_success"] == 2


def test_a_cell_where_nothing_succeeded_has_no_smallest_norm():
    rows = _rows().with_columns(test_acc=pl.lit(0.1))
    table = norm_use(rows, ["T", "norm_bound"], acc_threshold=0.95)
    assert table["min_norm_qk"].to_list() == [None, None] and table["n_success"].to_list() == [0, 0]


def test_the_needed_norm_against_ln_T():
    T = 2.0 ** np.arange(3, 14)
    exact = norm_growth(T, 0.4 + 0.15 * np.log(T))
    assert exact["b"] == pytest.approx(0.15) and exact["a"] == pytest.approx(0.4)
    assert exact["b_lo"] == pytest.approx(0.15) and exact["b_hi"] == pytest.approx(0.15)  # no residual
    rng = np.random.default_rng(0)
    noisy = norm_growth(T, 0.4 + 0.15 * np.log(T) + rng.normal(0, 0.05, len(T)))
    assert noisy["b_lo"] < 0.15 < noisy["b_hi"] and noisy["n_points"] == len(T)
    gaps = norm_growth([8, 16, 32, 64], [1.0, math.nan, 1.2, math.nan])
    assert gaps["n_points"] == 2 and math.isnan(gaps["b"])  # two values of T give no interval


def _fit_rows(T: int, bound, train_at_max: list[float]) -> list[dict]:
    """Trials at m = 64 (all fit, none generalise) and at m = 512 with the given training accuracies."""
    rows = [
        dict(
            T=T,
            norm_bound=bound,
            m=64,
            norm_qk=1.0,
            norm_v=1.0,
            norm_readout=0.5,
            test_acc=0.6,
            train_acc=1.0,
            status="done",
        )
        for _ in train_at_max
    ]
    rows += [
        dict(
            T=T,
            norm_bound=bound,
            m=512,
            norm_qk=1.0,
            norm_v=1.0,
            norm_readout=0.5,
            test_acc=0.6,
            train_acc=acc,
            status="done",
        )
        for acc in train_at_max
    ]
    return rows


def test_the_fraction_that_fits_at_the_largest_m():
    rows = pl.DataFrame(
        _fit_rows(1024, 1.0, [1.0, 0.9, 0.8, 0.97]) + _fit_rows(64, 1.0, [1.0, 1.0, 1.0, 0.99]),
        schema_overrides={"norm_bound": pl.Float64},
    )
    table = norm_use(rows, ["T", "norm_bound"], acc_threshold=0.95)
    assert dict(zip(table["T"], table["fit_at_m_max"], strict=True)) == {
        64: pytest.approx(3 / 4),
        1024: pytest.approx(1 / 4),
    }
    assert norm_use(rows.drop("train_acc"), ["T", "norm_bound"], 0.95)["fit_at_m_max"].to_list() == [None, None]


def test_a_fit_limit_is_a_bounded_cell_beyond_the_grid_whose_largest_m_did_not_fit():
    from attnsweep.stats.norm_use import fit_limits

    def cell(T, bound, bound_kind, fit, fit_2x=None):
        return dict(
            T=T,
            norm_bound=bound,
            bound=bound_kind,
            fit_at_m_max=fit,
            fit_at_m_max_2x=fit_2x,
            m_max=512,
        )

    table = pl.DataFrame(
        [
            cell(4096, 1.0, "lower", 0.25),  # beyond the grid, most did not fit: a limit
            cell(2048, 1.0, "none", 0.0, 0.375),  # the same with twice the epochs
            cell(1024, 1.0, "lower", 0.25, 0.75),  # twice the epochs fit: the budget, not a limit
            cell(512, 1.0, "lower", 0.75),  # they fit but did not generalise: samples
            cell(256, 1.0, "exact", 0.0),  # m* measured
            cell(4096, None, "lower", 0.0),  # no bound: not the bounded class's limit
        ],
        schema_overrides={"norm_bound": pl.Float64, "fit_at_m_max_2x": pl.Float64},
    )
    assert sorted(fit_limits(table)["T"].to_list()) == [2048, 4096]
    assert fit_limits(table.drop("fit_at_m_max_2x"))["T"].to_list() == [4096, 2048, 1024]


def test_the_median_normalised_margin_of_successes_and_of_failures():
    margins = [0.10, 0.02, 0.30, 0.04, None, 0.5, 0.2, -0.1]  # in the order of _rows()
    table = norm_use(_rows().with_columns(margin_normalised=pl.Series(margins)), ["T", "norm_bound"], 0.95)
    bounded = table.filter(pl.col("norm_bound") == 1.0).row(0, named=True)
    assert bounded["margin_success"] == pytest.approx(0.20)  # median of 0.10 and 0.30
    assert bounded["margin_failure"] == pytest.approx(0.03)  # of 0.02 and 0.04
    free = table.filter(pl.col("norm_bound").is_null()).row(0, named=True)
    assert free["margin_success"] == pytest.approx(0.35) and free["margin_failure"] == pytest.approx(-0.1)
    # Rows trained before margins existed: no margin column, no medians.
    old = norm_use(_rows(), ["T", "norm_bound"], 0.95)
    assert old["margin_success"].to_list() == [None, None] and old["margin_failure"].to_list() == [None, None]
