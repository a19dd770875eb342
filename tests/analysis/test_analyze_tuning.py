"""Which m* the verdicts use when a cell was searched with the spec's settings and tuned ones."""

import math

import polars as pl

from attnsweep.analysis.tuning import choose_m_star

NAN, INF = math.nan, math.inf


def _table(rows):
    """An m* table with each cell's bound as stats/critical.py writes it (beyond the grid: lower)."""
    table = pl.DataFrame(rows, schema=["T", "lr", "m_star", "ci_lo", "ci_hi", "censored"], orient="row")
    return table.with_columns(
        bound=pl.when(pl.col("censored") == "above").then(pl.lit("lower")).otherwise(pl.lit("exact"))
    )


DEFAULT = _table(
    [
        (8, 3e-3, 20.0, 18.0, 22.0, ""),
        (16, 3e-3, 30.0, 27.0, 33.0, ""),
        (32, 3e-3, NAN, INF, INF, "above"),
        (64, 3e-3, 60.0, 50.0, 70.0, ""),
        (128, 3e-3, 80.0, 70.0, 90.0, ""),
    ]
)
TUNED = _table(
    [
        (8, 8e-3, 15.0, 13.0, 17.0, ""),  # lower: used
        (16, 1e-3, 40.0, 36.0, 44.0, ""),  # above the default's interval: worse
        (32, 9e-3, NAN, INF, INF, "above"),  # beyond the range both times: not worse, used
        (64, 5e-3, NAN, INF, INF, "above"),  # beyond the range where the default was not: worse
    ]
)  # T = 128: no set adopted


def test_the_tuned_m_star_is_used_unless_tuning_made_it_worse():
    out = choose_m_star(DEFAULT, TUNED, ["T", "lr"], ["lr"], tuning_ran=True).sort("T")
    assert out["T"].to_list() == [8, 16, 32, 64, 128]
    assert out["tuning"].to_list() == [
        "tuned",
        "worse: spec used",
        "tuned",
        "worse: spec used",
        "spec kept",
    ]
    assert out["settings"].to_list() == ["tuned", "default", "tuned", "default", "default"]
    assert out["lr"].to_list() == [8e-3, 3e-3, 9e-3, 3e-3, 3e-3]
    assert out["m_star"].to_list()[:2] == [15.0, 30.0] and out["m_star"][3] == 60.0
    assert out["m_star_default"].to_list()[:2] == [20.0, 30.0]
    assert out["m_star_tuned"].to_list()[:2] == [15.0, 40.0] and out["m_star_tuned"][4] is None


def test_without_tuning_every_cell_keeps_its_m_star():
    out = choose_m_star(DEFAULT, None, ["T", "lr"], ["lr"], tuning_ran=False)
    assert set(out["tuning"]) == {"not tuned"} and set(out["settings"]) == {"default"}
    assert out["m_star"].to_list()[:2] == [20.0, 30.0] and math.isnan(out["m_star"][2])
    assert out["m_star_tuned"].null_count() == out.height
