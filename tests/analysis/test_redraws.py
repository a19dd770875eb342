"""The share of redrawn training sets near a cell's crossing (analysis/redraws.py) and the
estimator columns of the CSV/JSON export (analysis/exports.py ``export_m_star``)."""

from __future__ import annotations

import math

import polars as pl

from attnsweep.analysis.exports import export_m_star
from attnsweep.analysis.redraws import with_redrawn


def rows(T: int, redrawn: dict[int, list[int]], status: str = "done") -> list[dict]:
    return [
        dict(T=T, batch_size=None, m=m, seed=i, status=status, redraws=r)
        for m, per_seed in redrawn.items()
        for i, r in enumerate(per_seed)
    ]


def test_the_share_counts_the_two_m_around_the_crossing_only():
    # T = 8 crosses at m = 32: the window is m = 16 (2 of 4 redrawn) and 32 (1 of 4): 3/8. Its
    # m = 8 (all redrawn) and m = 64 (none) lie outside. T = 16 never crosses: its two largest m
    # tried, 32 (0 of 4) and 64 (1 of 4): 1/8. A failed trial (nothing trained) does not count.
    trials = pl.DataFrame(
        rows(8, {8: [5, 1, 2, 3], 16: [1, 0, 4, 0], 32: [0, 0, 7, 0], 64: [0, 0, 0, 0]})
        + rows(16, {16: [3, 3, 3, 3], 32: [0, 0, 0, 0], 64: [0, 0, 0, 2]})
        + rows(16, {64: [9, 9]}, status="failed"),
        schema_overrides={"batch_size": pl.Int64},
    )
    table = pl.DataFrame({"T": [8, 16], "batch_size": [None, None], "m_star_grid": [32.0, math.nan]})
    out = with_redrawn(table, trials, ["T", "batch_size"])
    assert out["T"].to_list() == [8, 16]
    assert out["redrawn"].to_list() == [3 / 8, 1 / 8]


def test_rows_without_a_redraws_column_give_no_share():
    table = pl.DataFrame({"T": [8], "m_star_grid": [32.0]})
    out = with_redrawn(table, pl.DataFrame({"T": [8], "m": [32], "status": ["done"]}), ["T"])
    assert out["redrawn"].to_list() == [None]


def test_the_export_writes_no_estimator_reading_for_a_bound():
    table = pl.DataFrame(
        {
            "T": [8, 16],
            "m_star": [40.0, 256.0],
            "bound": ["exact", "lower"],
            "m_star_logistic": [40.0, 726.7],
            "m_star_grid": [32.0, 512.0],
            "m_star_interp": [38.0, 400.0],
        }
    )
    out = export_m_star(table)
    assert out.row(0, named=True) | {} == {
        "T": 8,
        "m_star": 40.0,
        "m_star_bound": None,
        "bound": "exact",
        "m_star_logistic": 40.0,
        "m_star_grid": 32.0,
        "m_star_interp": 38.0,
    }
    second = out.row(1, named=True)
    assert second["m_star"] is None and second["m_star_bound"] == 256.0
    assert second["m_star_logistic"] is None and second["m_star_grid"] is None and second["m_star_interp"] is None


def test_the_export_splits_every_other_m_star_from_its_bound_and_drops_the_as_if_exact_interval():
    table = pl.DataFrame(
        {
            "T": [8, 16],
            "m_star": [40.0, 8.0],
            "bound": ["exact", "upper"],
            "ci_lo_exact": [30.0, 8.0],
            "ci_hi_exact": [50.0, 38.0],
            "m_star_default": [40.0, 8.0],
            "bound_default": ["exact", "upper"],
            "m_star_2x": [41.0, math.nan],
            "bound_2x": ["exact", "none"],
        }
    )
    out = export_m_star(table)
    assert "ci_lo_exact" not in out.columns and "ci_hi_exact" not in out.columns
    assert out["m_star_default"].to_list() == [40.0, None]
    assert out["m_star_bound_default"].to_list() == [None, 8.0]
    assert out["m_star_2x"].to_list() == [41.0, None]
    assert out["m_star_bound_2x"].to_list() == [None, None]  # "unknown": no number on either side
