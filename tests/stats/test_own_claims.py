"""A spec's own claims judged on constructed m* and trial tables whose right verdict is known by
construction (stats/own_claims.py): a log law named only where m* is a log law, a linear law
refused as log, an order supported only where the intervals are apart, a falling trend found."""

from __future__ import annotations

import numpy as np
import polars as pl

from attnsweep.stats.own_claims import judge

T = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]  # 3 decades
R = 200


def _table(cells: list[dict], m: list[float], sd: list[float], seed: int = 0) -> pl.DataFrame:
    """An m* table: each cell exact with m*, its interval +-2 sd and R bootstrap replicates N(m*, sd)."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        [
            dict(
                c,
                m_star=float(v),
                bound="exact",
                ci_lo=float(v - 2 * s),
                ci_hi=float(v + 2 * s),
                flags="",
                n_seeds=8,
                replicates=list(rng.normal(v, s, R)),
            )
            for c, v, s in zip(cells, m, sd, strict=True)
        ]
    )


def test_log_growth_is_named_log():
    rng = np.random.default_rng(1)
    m = [10 + 20 * np.log(t) + rng.normal(0, 0.3) for t in T]
    cells = [dict(task="and", T=t, model="transformer") for t in T]
    table = _table(cells, m, [1.0] * len(T))
    v = judge([dict(id="mine-1", kind="growth", axis="T", law="log")], table, None, ["task", "T", "model"])[0]
    assert v["verdict"] == "supported", v["why"]
    assert v["origin"] == "spec" and v["claim"].startswith("mine-1: ")
    assert v["series"][0]["numbers"]["law"] == "log"
    assert set(v["estimators"].values()) == {"supported"}


def test_linear_growth_is_not_log():
    rng = np.random.default_rng(2)
    m = [3.0 * t * (1 + rng.normal(0, 0.01)) for t in T]
    cells = [dict(task="and", T=t, model="mlp") for t in T]
    table = _table(cells, m, [0.02 * v for v in m])
    log = judge([dict(id="g", kind="growth", axis="T", law="log")], table, None, ["task", "T", "model"])[0]
    assert log["verdict"] == "not supported", log["why"]
    # a T^1 is the linear law: the two tie, so no single law is named, and never log
    assert log["series"][0]["numbers"]["law"] in ("linear", "undecided")
    lin = judge([dict(id="g", kind="growth", axis="T", law="linear")], table, None, ["task", "T", "model"])[0]
    assert lin["verdict"] == "supported", lin["why"]


def test_short_span_is_not_decided():
    rng = np.random.default_rng(3)
    short = T[:5]  # 8..128: 1.2 decades
    m = [10 + 20 * np.log(t) + rng.normal(0, 0.3) for t in short]
    table = _table([dict(T=t) for t in short], m, [1.0] * 5)
    v = judge([dict(id="g", kind="growth", axis="T", law="log")], table, None, ["T"])[0]
    assert v["verdict"] == "inconclusive"
    assert "decades" in v["why"]


def _log_claim_on_two_models() -> dict:
    """A log-growth claim judged on two models along T: the transformer's m* a log law, the MLP's linear."""
    rng = np.random.default_rng(4)
    log = [10 + 20 * np.log(t) + rng.normal(0, 0.3) for t in T]
    lin = [3.0 * t for t in T]
    cells = [dict(T=t, model="transformer") for t in T] + [dict(T=t, model="mlp") for t in T]
    table = _table(cells, log + lin, [1.0] * len(T) + [0.02 * v for v in lin])
    return judge([dict(id="g", kind="growth", axis="T", law="log")], table, None, ["T", "model"])[0]


def test_series_split_by_the_other_axes():
    """Two models along T: the log claim holds for one and not the other: not supported overall."""
    v = _log_claim_on_two_models()
    assert [s["cells"] for s in v["series"]] == [{"model": "transformer"}, {"model": "mlp"}]
    assert [s["verdict"] for s in v["series"]] == ["supported", "not supported"]
    assert v["verdict"] == "not supported"


def _pairs(less: list[float], more: list[float], sd: float) -> pl.DataFrame:
    Ts = [16, 32, 64]
    cells = [dict(T=t, model="transformer") for t in Ts] + [dict(T=t, model="mlp") for t in Ts]
    return _table(cells, less + more, [sd] * 6)


def test_fewer_samples_disjoint_intervals_say_yes():
    table = _pairs([20, 25, 30], [80, 120, 200], sd=2.0)
    claim = dict(id="mine-2", kind="fewer_samples", axis="model", less="transformer", more="mlp")
    v = judge([claim], table, None, ["T", "model"])[0]
    assert v["verdict"] == "supported", v["why"]
    ratio = v["series"][0]["numbers"]["ratio"]
    # geometric mean of 80/20, 120/25, 200/30
    assert abs(ratio["estimate"] - (4 * 4.8 * (200 / 30)) ** (1 / 3)) < 1e-9


def test_fewer_samples_overlapping_intervals_are_inconclusive():
    table = _pairs([40, 50, 60], [42, 51, 63], sd=6.0)
    claim = dict(id="mine-2", kind="fewer_samples", axis="model", less="transformer", more="mlp")
    v = judge([claim], table, None, ["T", "model"])[0]
    assert v["verdict"] == "inconclusive", v["why"]


def test_fewer_samples_the_other_way_is_not_supported():
    table = _pairs([80, 120, 200], [20, 25, 30], sd=2.0)
    claim = dict(id="mine-2", kind="fewer_samples", axis="model", less="transformer", more="mlp")
    assert judge([claim], table, None, ["T", "model"])[0]["verdict"] == "not supported"


def test_fewer_samples_with_a_bound_is_a_bound():
    """The MLP beyond the grid at T=64 (a lower bound at m_max=256): the ratio there is a lower bound."""
    table = _pairs([20, 25, 30], [80, 120, 256], sd=2.0).with_columns(
        bound=pl.when((pl.col("model") == "mlp") & (pl.col("T") == 64)).then(pl.lit("lower")).otherwise(pl.col("bound"))
    )
    table = table.with_columns(
        replicates=pl.when(pl.col("bound") == "lower").then(pl.lit([float("inf")] * R)).otherwise(pl.col("replicates"))
    )
    claim = dict(id="mine-2", kind="fewer_samples", axis="model", less="transformer", more="mlp")
    v = judge([claim], table, None, ["T", "model"])[0]
    pair = v["series"][0]["numbers"]["pairs"][-1]
    assert pair["ratio"]["bound"] == "lower"
    assert v["verdict"] == "supported"


def _trials(slope: float, noise: float) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for m in (8, 16, 32, 64, 128, 256):
        for seed in range(6):
            rows.append(
                dict(model="transformer", m=m, seed=seed, test_error=0.5 * m**slope * np.exp(rng.normal(0, noise)))
            )
    return pl.DataFrame(rows)


def test_trend_falls():
    claim = dict(id="mine-3", kind="trend", quantity="test_error", along="m", direction="falls")
    v = judge([claim], None, _trials(-0.5, 0.1), ["model"], n_boot=300)[0]
    assert v["verdict"] == "supported", v["why"]
    assert abs(v["series"][0]["numbers"]["slope"]["estimate"] + 0.5) < 0.05
    rises = dict(claim, direction="rises")
    assert judge([rises], None, _trials(-0.5, 0.1), ["model"], n_boot=300)[0]["verdict"] == "not supported"


def test_trend_flat_with_noise_is_not_falls():
    claim = dict(id="mine-3", kind="trend", quantity="test_error", along="m", direction="falls")
    v = judge([claim], None, _trials(0.0, 0.02), ["model"], n_boot=300)[0]
    assert v["verdict"] == "not supported", v["why"]


def test_m_star_claims_without_an_m_star_table_are_not_tested():
    claim = dict(id="g", kind="growth", axis="T", law="log")
    assert judge([claim], None, None, ["T"])[0]["verdict"] == "not tested"


def test_flagged_cells_are_counted_once_with_the_first_three_named():
    """Issue 49: the why listed every few-seeds cell of every series in full; now one count per
    flag for the whole verdict and the first three cells, named by what tells them apart."""
    from attnsweep.stats.boolean_growth import l1_log_growth

    Ts = [8, 16, 32, 64, 128, 256]
    cells = [dict(task="and", T=t, s=3, model="transformer", norm_bound=b) for b in (1.0, 2.0) for t in Ts]
    m = [10 + 20 * np.log(c["T"]) for c in cells]
    table = _table(cells, m, [1.0] * len(cells)).with_columns(flags=pl.lit("few-seeds"), n_seeds=pl.lit(3))
    v = l1_log_growth(table, ["task", "T", "s", "model", "norm_bound"])
    assert len(v["series"]) == 2
    assert v["why"].count("fewer than 8 seeds") == 1
    assert v["why"].endswith(
        "flagged cells used: 12 cells with fewer than 8 seeds "
        "(T=8 norm_bound=1.0, T=8 norm_bound=2.0, T=16 norm_bound=1.0, and 9 more)"
    )
    assert len(v["flags"]) == 12  # the numbers keep every flagged cell


def test_each_series_of_an_own_claim_says_its_verdict_in_the_why():
    v = _log_claim_on_two_models()
    parts = v["why"].split(" | ")
    assert parts[0].startswith("[model=transformer] supported: ") and parts[1].startswith("[model=mlp] not supported: ")


def test_fewer_samples_leaning_the_other_way_says_so():
    # The MLP's m* a little below the transformer's, intervals overlapping: inconclusive, and
    # the why says which way the estimate points.
    table = _pairs([50, 60, 70], [46, 55, 66], sd=6.0)
    claim = dict(id="mine-2", kind="fewer_samples", axis="model", less="transformer", more="mlp")
    v = judge([claim], table, None, ["T", "model"])[0]
    assert v["verdict"] == "inconclusive", v["why"]
    assert "an interval includes it" not in v["why"]
    from attnsweep.stats.own_claims import EFFECT_RATIO

    assert v["why"].endswith(
        f"the pooled interval reaches down to {EFFECT_RATIO:.2f} and a pair's interval includes 1; "
        "the estimate leans the other way (model=transformer needs more samples)"
    ), v["why"]


def test_a_trend_on_cells_out_of_epochs_says_what_that_does_to_its_quantity():
    claim = dict(id="mine-3", kind="trend", quantity="test_error", along="m", direction="falls")
    m_star = _table([dict(model="transformer")], [40.0], [2.0]).with_columns(flags=pl.lit("out-of-epochs"))
    v = judge([claim], m_star, _trials(-0.5, 0.1), ["model"], n_boot=300)[0]
    assert v["verdict"] == "inconclusive", v["why"]
    assert "their m* measures" not in v["why"]
    assert (
        "cells out of epochs used (model=transformer): their trials stopped before fitting their training "
        "sets, so test_error there measures the training budget as much as the samples"
    ) in v["why"], v["why"]


def test_a_growth_claim_on_fewer_cells_than_aicc_needs_states_no_aicc():
    from attnsweep.stats.fits import MIN_LAW_POINTS

    short = T[: MIN_LAW_POINTS - 1]
    m = [10 + 20 * np.log(t) for t in short]
    table = _table([dict(T=t) for t in short], m, [1.0] * len(short))
    v = judge([dict(id="g", kind="growth", axis="T", law="log")], table, None, ["T"])[0]
    assert v["verdict"] == "inconclusive"
    assert "AICc behind" not in v["statistic"], v["statistic"]
    assert v["statistic"].startswith(f"no law named ({len(short)} exact cells; AICc needs {MIN_LAW_POINTS}); c = ")
