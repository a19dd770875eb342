"""Three estimators of m* (logistic crossing, grid, interpolated on ln m), the plateau flag, the
open-interval rule, and findings that stand only where every estimator agrees
(stats/critical.py, stats/boolean_cells.estimator_view, stats/boolean_wording.agreed)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from attnsweep.stats.boolean_cells import estimator_view
from attnsweep.stats.boolean_verdicts import verdicts
from attnsweep.stats.critical import critical_sample_sizes

POW2 = [2**k for k in range(3, 14)]  # T = 8 .. 8192: 3.0 decades


def rows_from(outcomes: dict[int, list[int]], T: int = 8, **extra) -> list[dict]:
    """Trial rows of one cell: ``outcomes[m]`` lists each seed's success (1) or failure (0)."""
    return [
        dict(T=T, m=m, seed=seed, status="done", test_acc=float(ok), converged=True, train_acc=1.0, **extra)
        for m, seeds in outcomes.items()
        for seed, ok in enumerate(seeds)
    ]


def test_interpolated_m_star_is_the_crossing_of_the_line_on_ln_m():
    # Rate 1/4 at m = 16, 3/4 at m = 32: the line on ln m reaches 1/2 halfway, at 16 * sqrt(2);
    # the grid m* is 32, the first m tried where half the seeds succeed.
    rows = rows_from({8: [0, 0, 0, 0], 16: [1, 0, 0, 0], 32: [1, 1, 1, 0], 64: [1, 1, 1, 1]})
    table, _ = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=0)
    row = table.row(0, named=True)
    assert math.isclose(row["m_star_interp"], 16 * math.sqrt(2), rel_tol=1e-12)
    assert row["m_star_grid"] == 32
    assert row["m_star_logistic"] == row["m_star"]


def test_interpolation_skips_an_m_without_trained_trials_and_stops_at_the_first_m_tried():
    # Nothing trained at m = 16 (its trials failed): the line runs from m = 8 (rate 0) to 32
    # (rate 1), so 1/2 is reached at sqrt(8 * 32) = 16. A cell at the rate from its first m: that m.
    rows = rows_from({8: [0, 0], 32: [1, 1]}) + [
        dict(T=8, m=16, seed=s, status="failed", test_acc=None, converged=None, train_acc=None) for s in range(2)
    ]
    table, _ = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=0)
    assert math.isclose(table["m_star_interp"][0], 16.0, rel_tol=1e-12)
    first, _ = critical_sample_sizes(pl.DataFrame(rows_from({8: [1, 1], 16: [1, 1]})), ["T"], n_boot=0)
    assert first["m_star_interp"][0] == 8.0


def test_a_rate_that_levels_off_below_one_is_flagged_plateau():
    # 16 seeds, m = 16..256. The flag needs the largest m at >= 2x the grid m* and its successes
    # below what a 95% rate gives 5% of the time: P(X <= 12 | 16, 0.95) = 0.0070 (flagged),
    # P(X <= 14 | 16, 0.95) = 1 - 16 * 0.95^15 * 0.05 - 0.95^16 = 0.189 (not flagged).
    def cell(rates: list[int]) -> dict[int, list[int]]:
        return {m: [1] * k + [0] * (16 - k) for m, k in zip([16, 32, 64, 128, 256], rates, strict=True)}

    flat = rows_from(cell([0, 4, 12, 12, 12]), T=8)  # grid m* 64, 12/16 at 256
    rising = rows_from(cell([0, 4, 12, 14, 16]), T=16)  # reaches 1 at the largest m
    near = rows_from(cell([0, 4, 10, 12, 14]), T=32)  # 14/16: within what 95% allows
    late = rows_from(cell([0, 0, 0, 0, 8]), T=64)  # crosses at the largest m: nothing lies past it
    table, _ = critical_sample_sizes(pl.DataFrame(flat + rising + near + late), ["T"], n_boot=50)
    by_T = {r["T"]: r for r in table.iter_rows(named=True)}
    assert by_T[8]["plateau"] and "plateau" in by_T[8]["flags"]
    assert not by_T[16]["plateau"] and "plateau" not in by_T[16]["flags"]
    assert not by_T[32]["plateau"]
    assert not by_T[64]["plateau"]


def test_an_interval_without_an_upper_end_makes_m_star_a_lower_bound_at_its_lower_end():
    # 4 seeds, two of which succeed only at the largest m: half the seeds reach the rate there,
    # but a resample of 4 seeds holds fewer than two of them with probability 5/16, so the
    # bootstrap's upper end is beyond the grid. The rows allow only m* > the interval's lower end.
    rows = rows_from({16: [0, 0, 0, 0], 32: [0, 0, 0, 0], 64: [1, 1, 0, 0]})
    table, _ = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=400)
    row = table.row(0, named=True)
    assert row["censored"] == "" and math.isfinite(row["m_star_logistic"])
    assert row["bound"] == "lower" and "open-interval" in row["flags"]
    assert math.isinf(row["ci_hi"]) and row["m_star"] == row["ci_lo"] == row["ci_lo_exact"]


def test_every_estimator_has_its_bootstrap_from_one_resampling():
    rows = rows_from({8: [0] * 8, 16: [1, 1, 0, 0, 0, 0, 0, 0], 32: [1] * 6 + [0] * 2, 64: [1] * 8})
    table, reps = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=300, seed=3)
    grid, interp = np.array(table["replicates_grid"][0]), np.array(table["replicates_interp"][0])
    logistic = reps[(8,)]
    assert grid.shape == interp.shape == logistic.shape == (300,)
    # Every grid replicate is an m tried, and each interpolated one lies at or below its grid one
    # and above the m tried before it: the same resample of seeds behind both.
    assert set(np.unique(grid)) <= {8.0, 16.0, 32.0, 64.0}
    assert np.all(interp <= grid) and np.all(interp > grid / 2 - 1e-9)


def _table(logistic, grid, interp, noise: float = 0.02, n_boot: int = 200) -> pl.DataFrame:
    """An m* table of one transformer series along POW2 whose three estimators follow the given
    laws of T, each with lognormal bootstrap replicates."""
    rng = np.random.default_rng(0)
    rows = []
    for T in POW2:
        values = {"logistic": logistic(T), "grid": grid(T), "interp": interp(T)}
        reps = {k: v * np.exp(noise * rng.standard_normal(n_boot)) for k, v in values.items()}
        lo = min(float(np.percentile(r, 2.5)) for r in reps.values())
        hi = max(float(np.percentile(r, 97.5)) for r in reps.values())
        rows.append(
            dict(
                task="and",
                T=T,
                s=3,
                model="transformer",
                norm_bound=None,
                m_star=values["logistic"],
                m_star_logistic=values["logistic"],
                m_star_grid=values["grid"],
                m_star_interp=values["interp"],
                ci_lo=lo,
                ci_hi=hi,
                censored="",
                bound="exact",
                flags="",
                n_seeds=16,
                m_min=8,
                m_max=10**6,
                n_trials=100,
                replicates=reps["logistic"].tolist(),
                replicates_grid=reps["grid"].tolist(),
                replicates_interp=reps["interp"].tolist(),
            )
        )
    return pl.DataFrame(rows, schema_overrides={"norm_bound": pl.Float64})


def test_estimator_view_swaps_an_exact_cells_value_and_replicates_and_keeps_a_bound():
    table = _table(lambda T: 5 * math.sqrt(T), lambda T: 20 + 10 * math.log(T), lambda T: 4 * math.sqrt(T))
    table = table.with_columns(bound=pl.when(pl.col("T") == 8192).then(pl.lit("lower")).otherwise(pl.col("bound")))
    view = estimator_view(table, "grid")
    exact = view.filter(pl.col("bound") == "exact")
    assert exact["m_star"].to_list() == exact["m_star_grid"].to_list()
    assert exact["replicates"].to_list() == exact["replicates_grid"].to_list()
    assert view.filter(pl.col("T") == 8192)["m_star"][0] == 5 * math.sqrt(8192)
    assert estimator_view(table, "logistic").equals(table)


def test_estimators_that_disagree_leave_the_direction_undecided_and_the_verdict_inconclusive():
    # The logistic and interpolated m* grow like sqrt(T) (faster than log: L1 not supported on
    # each), the grid m* like 20 + 10 ln T (log growth: supported on it). No finding stands.
    table = _table(lambda T: 5 * math.sqrt(T), lambda T: 20 + 10 * math.log(T), lambda T: 4 * math.sqrt(T))
    l1 = verdicts(table)[0]
    assert l1["estimators"] == {"logistic": "not supported", "grid": "supported", "interpolated": "not supported"}
    assert l1["verdict"] == "inconclusive" and "estimators of m* disagree" in l1["why"]
    (series,) = l1["series"]
    numbers = series["numbers"]
    assert numbers["estimators"]["logistic"]["direction"] == "faster than log"
    assert numbers["estimators"]["grid"]["direction"] == "log"
    assert numbers["direction"] == "undecided" and numbers["law"] == "undecided"
    assert series["verdict"] == "inconclusive"


def test_estimators_that_agree_keep_the_verdict_and_direction():
    table = _table(lambda T: 5 * math.sqrt(T), lambda T: 6 * math.sqrt(T), lambda T: 4 * math.sqrt(T))
    l1 = verdicts(table)[0]
    assert l1["verdict"] == "not supported" and set(l1["estimators"].values()) == {"not supported"}
    numbers = l1["series"][0]["numbers"]
    assert numbers["direction"] == "faster than log" and numbers["law"] == "power"
    # Over T >= 16 and T >= 64 the cells still follow sqrt(T): the same direction from each.
    assert numbers["direction_from_T"] == {"16": "faster than log", "64": "faster than log"}


def test_a_cell_with_an_open_interval_enters_no_growth_fit():
    # The cell at T = 512 reads as a lower bound (its interval has no upper end): L1 fits the
    # other ten T and names it as left out.
    table = _table(lambda T: 5 * math.sqrt(T), lambda T: 6 * math.sqrt(T), lambda T: 4 * math.sqrt(T))
    table = table.with_columns(
        bound=pl.when(pl.col("T") == 512).then(pl.lit("lower")).otherwise(pl.col("bound")),
        flags=pl.when(pl.col("T") == 512).then(pl.lit("open-interval")).otherwise(pl.col("flags")),
        ci_hi=pl.when(pl.col("T") == 512).then(math.inf).otherwise(pl.col("ci_hi")),
    )
    numbers = verdicts(table)[0]["series"][0]["numbers"]
    assert numbers["T"] == [T for T in POW2 if T != 512]
    assert [x["T"] for x in numbers["left_out"]] == [512]


def test_a_tuned_series_whose_setting_sits_at_its_range_edge_says_it_is_bounded_by_its_range():
    table = _table(lambda T: 5 * math.sqrt(T), lambda T: 6 * math.sqrt(T), lambda T: 4 * math.sqrt(T))
    table = table.with_columns(
        range_binds=pl.when(pl.col("T").is_in([64, 1024]))
        .then(pl.lit("lr (at the upper edge 0.01)"))
        .otherwise(pl.lit(""))
    )
    l1 = verdicts(table)[0]
    (series,) = l1["series"]
    assert series["numbers"]["range_binds"] == [
        {"T": 64, "settings": "lr (at the upper edge 0.01)"},
        {"T": 1024, "settings": "lr (at the upper edge 0.01)"},
    ]
    assert "bounded by its search range" in series["why"] and "2 of 11 cells" in series["why"]


def test_an_open_interval_cell_is_exported_as_a_bound_with_no_estimator_reading():
    from attnsweep.analysis.exports import export_m_star

    rows = rows_from({16: [0, 0, 0, 0], 32: [0, 0, 0, 0], 64: [1, 1, 0, 0]})
    table, _ = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=400)
    row = export_m_star(table).row(0, named=True)
    assert row["bound"] == "lower" and row["m_star"] is None
    assert row["m_star_bound"] == table["ci_lo"][0]
    assert row["m_star_logistic"] is None and row["m_star_grid"] is None and row["m_star_interp"] is None
    assert "replicates_grid" not in row and "replicates_interp" not in row
