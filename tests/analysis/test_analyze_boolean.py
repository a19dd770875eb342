"""The plain-language checks printed by `analyze`, on constructed m* tables."""

import math

import polars as pl
import pytest

from attnsweep.analysis.boolean import _checks


def _row(model, T, m_star, lo, hi, censored=""):
    """A cell as stats/critical.py writes it: beyond the grid (``above``) a lower bound at
    the largest m tried, 512, with the interval 512 .. inf."""
    if censored == "above":
        return dict(
            task="and",
            model=model,
            T=T,
            m_star=512.0,
            m_star_grid=math.nan,
            ci_lo=512.0,
            ci_hi=math.inf,
            censored=censored,
            bound="lower",
            flags="",
            m_max=512,
            series=f"model={model}",
        )
    return dict(
        task="and",
        model=model,
        T=T,
        m_star=m_star,
        m_star_grid=m_star,
        ci_lo=lo,
        ci_hi=hi,
        censored=censored,
        bound="exact",
        flags="",
        m_max=512,
        series=f"model={model}",
    )


@pytest.mark.parametrize(
    "tr, mlp, verdict",
    [
        (
            _row("transformer", 64, 40.0, 30.0, 50.0),
            _row("mlp", 64, math.nan, math.inf, math.inf, "above"),
            "yes",
        ),
        (_row("transformer", 64, 40.0, 30.0, 50.0), _row("mlp", 64, 300.0, 250.0, 350.0), "yes"),
        (_row("transformer", 64, 200.0, 150.0, 260.0), _row("mlp", 64, 100.0, 80.0, 120.0), "no"),
        (
            _row("transformer", 64, 90.0, 70.0, 130.0),
            _row("mlp", 64, 110.0, 95.0, 140.0),
            "inconclusive",
        ),
        # the transformer beyond the grid, the MLP within it: the transformer needs more
        (
            _row("transformer", 64, math.nan, math.inf, math.inf, "above"),
            _row("mlp", 64, 208.0, 180.0, 240.0),
            "no",
        ),
        (
            _row("transformer", 64, math.nan, math.inf, math.inf, "above"),
            _row("mlp", 64, math.nan, math.inf, math.inf, "above"),
            "inconclusive",
        ),
    ],
)
def test_transformer_vs_mlp_at_the_largest_T(tr, mlp, verdict):
    small = [_row("transformer", 8, 20.0, 15.0, 25.0), _row("mlp", 8, 30.0, 25.0, 35.0)]
    checks = _checks(pl.DataFrame([*small, tr, mlp]), fits={})
    assert [c["verdict"] for c in checks] == [verdict]
    assert "T=64" in checks[0]["check"]


def test_settings_tuned_per_cell_do_not_split_the_comparison():
    rows = [
        _row("transformer", 8, 20.0, 15.0, 25.0),
        _row("mlp", 8, 30.0, 25.0, 35.0),
        _row("transformer", 64, 40.0, 30.0, 50.0),
        _row("mlp", 64, 300.0, 250.0, 350.0),
    ]
    table = pl.DataFrame([dict(r, lr=lr) for r, lr in zip(rows, (1e-3, 2e-3, 3e-3, 4e-3), strict=True)])
    assert _checks(table, fits={}) == []  # every lr its own group: nothing to compare
    assert [c["verdict"] for c in _checks(table, fits={}, tuned={"lr"})] == ["yes"]


def test_search_rows_count_the_adopted_sets_tuning_trials_in_every_tuned_cell():
    # Two tuned cells (lr adopted 0.01 at T = 8 and 0.02 at T = 32), each tuned at a probe m
    # with its adopted lr and with a set not adopted. At T = 8 the tuned search came back to
    # the probe m, at T = 32 it did not: the adopted set's tuning trials count in both cells
    # alike, and the set not adopted in neither.
    from attnsweep.analysis.boolean import search_rows

    def row(T, lr, m, phase):
        return dict(T=T, lr=lr, m=m, seed=0, search_phase=phase)

    trials = pl.DataFrame(
        [
            row(8, 0.003, 18, "search"),
            row(8, 0.01, 18, "tune"),
            row(8, 0.005, 18, "tune"),
            row(8, 0.01, 18, "tuned"),
            row(8, 0.01, 40, "tuned"),
            row(32, 0.003, 33, "search"),
            row(32, 0.02, 33, "tune"),
            row(32, 0.004, 33, "tune"),
            row(32, 0.02, 40, "tuned"),
            row(32, 0.02, 90, "tuned"),
            row(32, 0.02, 90, "budget"),
        ]
    )
    got = search_rows(trials, ["T", "lr"], "tuned").collect()
    tune = got.filter(pl.col("search_phase") == "tune")
    assert sorted(tune.select("T", "lr", "m").iter_rows()) == [(8, 0.01, 18), (32, 0.02, 33)]
    assert got.filter(pl.col("search_phase") == "tuned").height == 4
    assert "budget" not in got["search_phase"].to_list() and "search" not in got["search_phase"].to_list()
    # The spec's own search: its cells' rows only (no tuning trial has the spec's lr here).
    spec = search_rows(trials, ["T", "lr"]).collect()
    assert spec["search_phase"].to_list() == ["search", "search"]
