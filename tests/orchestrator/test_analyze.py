"""The plain-language checks printed by `analyze`, on constructed m* tables."""

import math

import polars as pl
import pytest

from attnsweep.orchestrator.analyze import _checks


def _row(model, T, m_star, lo, hi, censored=""):
    """A cell as stats/critical.py writes it: beyond the grid (``above``) a lower bound at
    the largest m tried, 512, with the interval 512 .. inf."""
    if censored == "above":
        return dict(task="and", model=model, T=T, m_star=512.0, m_star_grid=math.nan, ci_lo=512.0, ci_hi=math.inf,
                    censored=censored, bound="lower", flags="", m_max=512, series=f"model={model}")
    return dict(task="and", model=model, T=T, m_star=m_star, m_star_grid=m_star, ci_lo=lo, ci_hi=hi,
                censored=censored, bound="exact", flags="", m_max=512, series=f"model={model}")


@pytest.mark.parametrize(
    "tr, mlp, verdict",
    [
        (_row("transformer", 64, 40.0, 30.0, 50.0), _row("mlp", 64, math.nan, math.inf, math.inf, "above"), "yes"),
        (_row("transformer", 64, 40.0, 30.0, 50.0), _row("mlp", 64, 300.0, 250.0, 350.0), "yes"),
        (_row("transformer", 64, 200.0, 150.0, 260.0), _row("mlp", 64, 100.0, 80.0, 120.0), "no"),
        (_row("transformer", 64, 90.0, 70.0, 130.0), _row("mlp", 64, 110.0, 95.0, 140.0), "inconclusive"),
        # the transformer beyond the grid, the MLP within it: the transformer needs more
        (_row("transformer", 64, math.nan, math.inf, math.inf, "above"), _row("mlp", 64, 208.0, 180.0, 240.0), "no"),
        (_row("transformer", 64, math.nan, math.inf, math.inf, "above"),
         _row("mlp", 64, math.nan, math.inf, math.inf, "above"), "inconclusive"),
    ],
)
def test_transformer_vs_mlp_at_the_largest_T(tr, mlp, verdict):
    small = [_row("transformer", 8, 20.0, 15.0, 25.0), _row("mlp", 8, 30.0, 25.0, 35.0)]
    checks = _checks(pl.DataFrame([*small, tr, mlp]), fits={})
    assert [c["verdict"] for c in checks] == [verdict]
    assert "T=64" in checks[0]["check"]


def test_settings_tuned_per_cell_do_not_split_the_comparison():
    rows = [_row("transformer", 8, 20.0, 15.0, 25.0), _row("mlp", 8, 30.0, 25.0, 35.0),
            _row("transformer", 64, 40.0, 30.0, 50.0), _row("mlp", 64, 300.0, 250.0, 350.0)]
    table = pl.DataFrame([dict(r, lr=lr) for r, lr in zip(rows, (1e-3, 2e-3, 3e-3, 4e-3))])
    assert _checks(table, fits={}) == []  # every lr its own group: nothing to compare
    assert [c["verdict"] for c in _checks(table, fits={}, tuned={"lr"})] == ["yes"]
