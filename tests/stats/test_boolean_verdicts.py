"""Verdicts L1-L4 and R on constructed m* tables whose right verdict follows from their
construction (each test says why)."""

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from attnsweep.stats.boolean_cells import REFERENCE_CSV, read_reference, with_replicates
from attnsweep.stats.boolean_growth import l1_log_growth
from attnsweep.stats.boolean_verdicts import (
    l2_norm_bound,
    l3_sparsity,
    l4_mlp_baseline,
    r_reference,
    verdicts,
)
from attnsweep.stats.critical import critical_sample_sizes

POW2 = [2**k for k in range(3, 14)]  # T = 8 .. 8192: 3.0 decades


def cells(values, noise=0.02, n_boot=200, seed=0, **fixed):
    """An m* table: ``values`` maps a cell (dict of settings, merged over the defaults) to
    its m* (``math.inf``: beyond the grid). Replicates are m* times lognormal noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for settings, m in values:
        cell = dict(task="and", T=64, s=3, model="transformer", norm_bound=None, d=32, heads=4, **fixed)
        cell.update(settings)
        above = math.isinf(m)
        reps = np.full(n_boot, math.inf) if above else m * np.exp(noise * rng.standard_normal(n_boot))
        lo, hi = (math.inf, math.inf) if above else np.percentile(reps, [2.5, 97.5])
        rows.append(
            dict(
                cell,
                m_star=math.nan if above else float(m),
                m_star_grid=math.nan if above else float(m),
                ci_lo=float(lo),
                ci_hi=float(hi),
                censored="above" if above else "",
                n_seeds=8,
                m_min=8,
                m_max=int(1e6) if not above else 512,
                n_trials=100,
                replicates=[float(r) for r in reps],
            )
        )
    return pl.DataFrame(rows, schema_overrides={"norm_bound": pl.Float64, "replicates": pl.List(pl.Float64)})


def along_T(f, Ts=POW2, **settings):
    return [({"T": T, **settings}, f(T)) for T in Ts]


# --- L1 -------------------------------------------------------------------------------------


def test_l1_exact_log_growth_over_three_decades_is_supported():
    # 20 + 10 ln T is fit exactly by the log law (RSS 0) and by neither a line nor a power
    # law, so the log law wins by a wide AIC/BIC margin, and its slope 10 is far above 0.
    v = l1_log_growth(cells(along_T(lambda T: 20 + 10 * math.log(T))))
    assert v["verdict"] == "supported", v
    assert "3.0 decades" in v["statistic"] and "c = " in v["statistic"] and "c " in v["interval"]


def test_l1_linear_growth_is_not_supported():
    # m* = 2T: the linear law fits exactly, the log law badly.
    v = l1_log_growth(cells(along_T(lambda T: 2 * T)))
    assert v["verdict"] == "not supported", v


def test_l1_square_root_growth_is_not_supported():
    # m* = 5 sqrt(T) is a power law (c = 0.5): it beats the log law.
    v = l1_log_growth(cells(along_T(lambda T: 5 * math.sqrt(T))))
    assert v["verdict"] == "not supported", v
    assert "c = 0.500" in v["statistic"]


def test_l1_polylog_growth_faster_than_log_is_not_supported_and_read_as_polylog():
    # m* = 2 (ln T)^3: faster than any log law (k = 3, its interval far above 1), slower than
    # any power of T; the polylog law fits exactly, so it is the rival that beats the log law.
    v = l1_log_growth(cells(along_T(lambda T: 2 * math.log(T) ** 3)))
    numbers = v["series"][0]["numbers"]
    assert v["verdict"] == "not supported", v
    assert numbers["reading"] == "polylog" and numbers["k"]["ci_lo"] > 1
    assert numbers["k"]["estimate"] == pytest.approx(3, abs=0.05) and "k = 3.00" in v["statistic"]


def test_l1_polylog_slower_than_log_does_not_count_against_the_claim():
    # m* = 30 (ln T)^0.8 grows, but slower than log T (k < 1): within the claim's O(log T),
    # so polylog is no rival and the log law is judged against linear and power growth only.
    v = l1_log_growth(cells(along_T(lambda T: 30 * math.log(T) ** 0.8)))
    numbers = v["series"][0]["numbers"]
    assert numbers["reading"] == "polylog" and numbers["k"]["ci_hi"] < 1
    assert "polylog growth fits better" not in v["why"], v


def test_l1_decreasing_m_star_is_not_supported():
    v = l1_log_growth(cells(along_T(lambda T: 200 - 10 * math.log(T))))
    assert v["verdict"] == "not supported" and "does not grow" in v["why"], v


def test_l1_one_decade_is_inconclusive_even_for_exact_log_growth():
    v = l1_log_growth(cells(along_T(lambda T: 20 + 10 * math.log(T), Ts=[8, 16, 32, 64])))
    assert v["verdict"] == "inconclusive" and "0.9 decades" in v["why"], v


def test_l1_fewer_than_three_uncensored_T_is_inconclusive():
    table = cells([({"T": 8}, 30.0), ({"T": 64}, 50.0), ({"T": 8192}, math.inf)])
    v = l1_log_growth(table)
    assert v["verdict"] == "inconclusive" and "2 value(s) of T" in v["why"], v


@pytest.mark.parametrize("Ts", [[8], [8, 16]])
def test_l1_on_a_grid_of_fewer_than_three_T_is_not_tested(Ts):
    # Three T on the grid with one beyond it is a test that cannot decide (above); one or two
    # T on the grid is no test of growth along T at all, whatever the m*.
    v = l1_log_growth(cells(along_T(lambda T: 20 + 10 * math.log(T), Ts=Ts)))
    assert v["verdict"] == "not tested" and v["why"] == "no series has 3 or more values of T", v


def test_l1_budget_limited_cell_makes_it_inconclusive_and_is_named():
    table = cells(along_T(lambda T: 20 + 10 * math.log(T)))
    table = table.with_columns(
        budget=pl.when(pl.col("T") == 4096).then(pl.lit("budget-limited")).otherwise(pl.lit("ok"))
    )
    v = l1_log_growth(table)
    assert v["verdict"] == "inconclusive" and "T=4096" in v["why"] and "budget-limited" in v["why"], v


def test_l1_without_replicates_is_inconclusive():
    v = l1_log_growth(cells(along_T(lambda T: 20 + 10 * math.log(T))).drop("replicates"))
    assert v["verdict"] == "inconclusive" and "no bootstrap interval" in v["why"], v


def test_l1_judges_every_transformer_series_and_ignores_the_mlp():
    good = along_T(lambda T: 20 + 10 * math.log(T), norm_bound=1.0)
    bad = along_T(lambda T: 2 * T, norm_bound=2.0)
    mlp = along_T(lambda T: 2 * T, model="mlp")
    assert l1_log_growth(cells(good + mlp))["verdict"] == "supported"
    v = l1_log_growth(cells(good + bad))
    assert v["verdict"] == "not supported" and "[norm_bound=2.0]" in v["statistic"], v


def test_l1_side_blocks_with_two_T_are_named_not_judged():
    # A log-growth series over three decades plus side blocks over s and B at T = 64 and
    # 1024 (growing like 2T there, which alone would be "not supported"): L1 judges the T
    # series and names the side blocks.
    good = along_T(lambda T: 20 + 10 * math.log(T))
    side = [({"T": T, "s": s}, 2 * T) for T in (64, 1024) for s in (2, 4)]
    bounded = [({"T": T, "norm_bound": 0.5}, 2 * T) for T in (64, 1024)]
    v = l1_log_growth(cells(good + side + bounded))
    assert v["verdict"] == "supported", v
    # Named apart from the reason, which explains the verdict only.
    assert {"s": 2, "norm_bound": None} in v["not_judged"] and {"s": 3, "norm_bound": 0.5} in v["not_judged"]
    assert "not judged" not in v["why"] and "s=2" not in v["why"]
    # Side blocks alone make no T series: the run does not test L1.
    v = l1_log_growth(cells(side))
    assert v["verdict"] == "not tested" and "no series has 3 or more values of T" in v["why"], v


def test_r_judges_the_curve_and_names_a_side_block_at_one_T():
    # Our unbounded series equals the paper's read-off at its own T (ratio 1: supported);
    # a bounded cell at T = 1024, twice the paper's value, is a side block, not a curve.
    ref = read_reference()
    curve = [({"T": int(T)}, float(m)) for T, m in zip(ref["T"], ref["critical_m"], strict=True)]
    side = [({"T": 1024, "norm_bound": 0.5}, 2 * float(np.interp(1024, ref["T"], ref["critical_m"])))]
    v = r_reference(cells(curve + side))
    assert v["verdict"] == "supported", v
    assert v["not_judged"] == [{"norm_bound": 0.5}] and "norm_bound=0.5" not in v["why"]
    # The side block alone is still judged (it is the only series): 2x is outside the margin.
    assert r_reference(cells(side))["verdict"] == "not supported"


# --- L2, L3 ---------------------------------------------------------------------------------


def test_l2_m_star_rising_with_B_is_supported_unbounded_counting_as_largest():
    # m* strictly rises with B at both T, and the unbounded cell (None) is the largest:
    # every replicate (2% noise, gaps of 20%) keeps the order, so rho = 1 with CI [1, 1].
    values = [
        ({"T": T, "norm_bound": B}, m) for T in (32, 64) for B, m in ((1.0, 40), (2.0, 50), (4.0, 60), (None, 75))
    ]
    v = l2_norm_bound(cells(values))
    assert v["verdict"] == "supported" and "= 1.00" in v["statistic"] and "CI 1.00 .. 1.00" in v["interval"], v


def test_l2_unbounded_beyond_the_grid_still_counts_as_largest():
    values = [({"norm_bound": B}, m) for B, m in ((1.0, 40), (4.0, 60), (None, math.inf))]
    assert l2_norm_bound(cells(values))["verdict"] == "supported"


def test_l2_m_star_falling_with_B_is_not_supported():
    values = [({"norm_bound": B}, m) for B, m in ((1.0, 80), (2.0, 60), (4.0, 40))]
    v = l2_norm_bound(cells(values))
    assert v["verdict"] == "not supported" and "= -1.00" in v["statistic"], v


def test_l2_flat_m_star_is_inconclusive():
    # Equal m* at every B: replicate noise orders them at random, so rho's CI spans 0.
    values = [({"norm_bound": B}, 50.0) for B in (1.0, 2.0, 4.0, 8.0)]
    assert l2_norm_bound(cells(values, noise=0.1))["verdict"] == "inconclusive"


def test_l2_needs_two_bounded_values():
    # One bounded value beside the unbounded one: the run holds no test of L2.
    v = l2_norm_bound(cells([({"norm_bound": 1.0}, 40.0), ({"norm_bound": None}, 80.0)]))
    assert v["verdict"] == "not tested" and ">= 2 bounded values of B" in v["why"], v
    assert l2_norm_bound(cells(along_T(lambda T: 2 * T)))["verdict"] == "not tested"


def test_l3_m_star_rising_with_s_is_supported_and_falling_is_not():
    assert l3_sparsity(cells([({"s": s}, 20.0 * s) for s in (1, 2, 3, 4)]))["verdict"] == "supported"
    assert l3_sparsity(cells([({"s": s}, 100.0 / s) for s in (1, 2, 3, 4)]))["verdict"] == "not supported"
    assert l3_sparsity(cells([({"s": 3}, 50.0)]))["verdict"] == "not tested"


# --- L4 -------------------------------------------------------------------------------------


def test_l4_mlp_linear_transformer_log_is_supported():
    # ratio 2T / (20 + 10 ln T) rises with T (rho = 1), and at T = 512 the MLP is beyond
    # the grid: the ratio is +inf, above 1 in every replicate.
    Ts = [8, 16, 32, 64, 128, 256, 512]
    tr = along_T(lambda T: 20 + 10 * math.log(T), Ts=Ts)
    mlp = along_T(lambda T: math.inf if T == 512 else 2.0 * T, Ts=Ts, model="mlp", d=64)
    v = l4_mlp_baseline(cells(tr + mlp))
    assert v["verdict"] == "supported", v
    assert "T=512" in v["statistic"] and "beyond the grid" in v["statistic"], v


def test_l4_mlp_needing_fewer_samples_is_not_supported():
    Ts = [8, 16, 32, 64]
    tr = along_T(lambda T: 4.0 * T, Ts=Ts)
    mlp = along_T(lambda T: 2.0 * T, Ts=Ts, model="mlp")
    v = l4_mlp_baseline(cells(tr + mlp))
    assert v["verdict"] == "not supported" and "T=64: 0.50" in v["statistic"], v


def test_l4_constant_ratio_is_not_supported_and_two_T_inconclusive():
    # MLP = 3 x transformer at every T: the ratio does not grow with T (rho's CI spans 0
    # at best), so the claim "more so as T grows" is not shown.
    Ts = [8, 16, 32, 64, 128]
    v = l4_mlp_baseline(
        cells(
            along_T(lambda T: 50.0, Ts=Ts) + along_T(lambda T: 150.0, Ts=Ts, model="mlp"),
            noise=0.05,
        )
    )
    assert v["verdict"] == "inconclusive" and "includes 0" in v["why"], v
    two = cells(along_T(lambda T: 50.0, Ts=[8, 16]) + along_T(lambda T: 10.0 * T, Ts=[8, 16], model="mlp"))
    v = l4_mlp_baseline(two)
    assert v["verdict"] == "inconclusive" and "a trend needs 3" in v["why"], v


def test_l4_a_transformer_beyond_the_grid_is_shown_as_a_bound_and_not_supported():
    Ts = [8, 16, 32, 64]
    tr = along_T(lambda T: math.inf if T == 64 else 2.0 * T, Ts=Ts)
    mlp = along_T(lambda T: 50.0, Ts=Ts, model="mlp")
    v = l4_mlp_baseline(cells(tr + mlp))
    assert v["verdict"] == "not supported", v
    assert "T=64: < " in v["statistic"] and "transformer m* >" in v["statistic"], v


def test_l4_without_mlp_cells_is_not_tested():
    assert l4_mlp_baseline(cells(along_T(lambda T: 50.0)))["verdict"] == "not tested"


def test_l4_names_a_budget_limited_mlp_cell():
    Ts = [8, 16, 32, 64]
    table = cells(along_T(lambda T: 20 + 10 * math.log(T), Ts=Ts) + along_T(lambda T: 3.0 * T, Ts=Ts, model="mlp"))
    table = table.with_columns(
        budget=pl.when((pl.col("model") == "mlp") & (pl.col("T") == 64))
        .then(pl.lit("budget-limited"))
        .otherwise(pl.lit("ok"))
    )
    v = l4_mlp_baseline(table)
    assert v["verdict"] == "inconclusive" and "T=64" in v["why"] and "model=mlp" in v["why"], v


# --- R --------------------------------------------------------------------------------------


def paper_at(T):
    ref = read_reference()
    return float(np.interp(T, ref["T"].to_numpy(), ref["critical_m"].to_numpy()))


def test_r_matching_the_paper_is_supported():
    # Ours = the read-off (interpolated at T = 128 ... 1024): ratio 1, 2% noise.
    table = cells(along_T(paper_at, Ts=[128, 256, 512, 1024]))
    v = r_reference(table)
    assert v["verdict"] == "supported" and "= 1.00" in v["statistic"], v


def test_r_compares_only_the_papers_protocol_not_the_theorems_class():
    # Beside the protocol series (learned codes, ratio 1), a series of the theorem's class
    # (fixed codes, bound, inputs of norm sqrt(d)) at twice the paper's m*: R leaves it out.
    Ts = [128, 256, 512, 1024]
    protocol = along_T(paper_at, Ts=Ts, positions="learned", ln_affine=True)
    theory = along_T(lambda T: 2 * paper_at(T), Ts=Ts, positions="fixed", ln_affine=False, norm_bound=1.0)
    v = r_reference(cells(protocol + theory))
    assert v["verdict"] == "supported" and "= 1.00" in v["statistic"] and "fixed" not in v["statistic"], v
    assert r_reference(cells(theory))["verdict"] == "not tested"
    # Rows stored before the settings existed (null) are the protocol's.
    legacy = cells(along_T(paper_at, Ts=Ts, positions=None, ln_affine=None))
    assert r_reference(legacy)["verdict"] == "supported"


def test_r_twice_the_paper_is_not_supported():
    v = r_reference(cells(along_T(lambda T: 2 * paper_at(T), Ts=[128, 256, 512, 1024])))
    assert v["verdict"] == "not supported" and "= 2.00" in v["statistic"], v


def test_r_near_the_margin_is_inconclusive():
    # 1.2 x the paper with 20% noise per cell: the interval straddles 1.25.
    v = r_reference(cells(along_T(lambda T: 1.2 * paper_at(T), Ts=[128, 1024]), noise=0.2))
    assert v["verdict"] == "inconclusive" and "edge" in v["why"], v


def test_r_without_T_in_range_says_so():
    v = r_reference(cells(along_T(lambda T: 50.0, Ts=[8, 16, 32])))
    assert v["verdict"] == "not tested" and "100..1100" in v["why"] and "[8, 16, 32]" in v["why"], v


def test_r_uses_only_transformer_3_way_and_cells():
    # Parity and s=2 and MLP cells far from the paper do not enter.
    table = cells(
        along_T(paper_at, Ts=[200, 400])
        + along_T(lambda T: 9e3, Ts=[200], task="parity")
        + along_T(lambda T: 9e3, Ts=[200], s=2)
        + along_T(lambda T: 9e3, Ts=[200], model="mlp")
    )
    assert r_reference(table)["verdict"] == "supported"


def test_r_reference_path_is_a_parameter(tmp_path):
    # A reference at half our values: ratio 2.
    csv = tmp_path / "ref.csv"
    csv.write_text("# made up\nT,critical_m,err_lo,err_hi\n100,25,20,30\n1100,25,20,30\n")
    v = r_reference(cells(along_T(lambda T: 50.0, Ts=[300, 600])), reference=csv)
    assert v["verdict"] == "not supported" and "= 2.00" in v["statistic"], v
    (tmp_path / "bad.csv").write_text("T,m\n100,5\n")
    with pytest.raises(ValueError, match="critical_m"):
        r_reference(cells(along_T(lambda T: 50.0, Ts=[300])), reference=tmp_path / "bad.csv")


def test_the_shipped_reference_is_the_shared_read_off_with_its_comments():
    text = REFERENCE_CSV.read_text()
    assert text.startswith("# Critical sample size") and "arXiv 2110.10090" in text
    ref = read_reference()
    assert ref.height == 18 and ref["T"].to_list()[0] == 100 and ref["T"].to_list()[-1] == 1100
    assert ref.filter(pl.col("T") == 1100)["critical_m"].item() == pytest.approx(113.4)
    shared = Path(__file__).resolve().parents[3] / "shared/reference/edelman2022_fig_3way_and.csv"
    if shared.exists():
        assert shared.read_text() == text


# --- all at once, replicates from real bootstraps -------------------------------------------


def test_verdicts_returns_the_five_claims_in_order_with_one_of_four_verdicts():
    out = verdicts(cells(along_T(lambda T: 20 + 10 * math.log(T))))
    assert [v["claim"][:2] for v in out] == ["L1", "L2", "L3", "L4", "R:"]
    assert [v["id"] for v in out] == ["L1", "L2", "L3", "L4", "R"]
    for v in out:
        assert set(v) == {
            "id",
            "claim",
            "statistic",
            "interval",
            "verdict",
            "why",
            "series",
            "not_judged",
            "flags",
            "estimators",
        }
        assert v["estimators"] == {"logistic": v["verdict"], "grid": v["verdict"], "interpolated": v["verdict"]}
        assert v["verdict"] in {"supported", "not supported", "inconclusive", "not tested"}


def test_with_replicates_attaches_the_bootstraps_of_critical_sample_sizes():
    # 4 seeds; seed i succeeds from m = 16 * 2^(i % 2) at T=8, twice that at T=16.
    rows = [
        dict(
            T=T,
            m=m,
            seed=s,
            status="done",
            test_acc=1.0 if m >= (16 << (s % 2)) * (T // 8) else 0.5,
        )
        for T in (8, 16)
        for m in (8, 16, 32, 64, 128)
        for s in range(4)
    ]
    table, reps = critical_sample_sizes(pl.DataFrame(rows), ["T"], n_boot=50)
    out = with_replicates(table, reps, ["T"])
    assert out["replicates"].list.len().to_list() == [50, 50]
    assert np.allclose(out.filter(pl.col("T") == 8)["replicates"][0].to_numpy(), reps[(8,)])


def test_a_tuned_run_and_an_untuned_run_of_the_same_settings_are_two_l1_series():
    # The same cells twice: an untuned run (m* = 5 sqrt(T), a power law) and a run whose search
    # tuned lr per cell (m* = 20 + 10 ln T exactly, lr 3e-3 kept at half the T, 1e-2 adopted at
    # the rest). Pooled, the tuned cells that kept lr 3e-3 would be dropped as duplicates and
    # the others would join the untuned series at the same T; kept apart, each series gets its
    # own verdict from its own law, and its label says which protocol it is.
    from attnsweep.analysis.boolean import TUNED_RUN, boolean_verdicts
    from attnsweep.presentation.series import series_kind as _series_kind

    untuned = cells(along_T(lambda T: 5 * math.sqrt(T), lr=3e-3))
    tuned = cells([({"T": T, "lr": 3e-3 if i % 2 else 1e-2}, 20 + 10 * math.log(T)) for i, T in enumerate(POW2)])
    union, claims = boolean_verdicts([untuned, tuned.with_columns(pl.lit(True).alias(TUNED_RUN))], {"lr"})
    assert union.height == 2 * len(POW2)
    l1 = next(v for v in claims if v["id"] == "L1")
    by_protocol = {s["cells"][TUNED_RUN]: s for s in l1["series"]}
    assert by_protocol[False]["verdict"] == "not supported" and by_protocol[True]["verdict"] == "supported"
    assert by_protocol[False]["numbers"]["n_cells"] == by_protocol[True]["numbers"]["n_cells"] == len(POW2)
    assert ", tuned" in _series_kind(union, by_protocol[True]["cells"])["label"]
    assert ", untuned" in _series_kind(union, by_protocol[False]["cells"])["label"]
    assert TUNED_RUN not in _series_kind(union, by_protocol[True]["cells"])["label"]
    # Without a tuned run the table has no such column: earlier reports come back unchanged.
    alone, _ = boolean_verdicts([untuned], {"lr"})
    assert TUNED_RUN not in alone.columns


def test_l2_leaves_out_a_group_whose_bound_does_not_settle_its_order():
    # At T = 2048: B = 1 "≤ 508" (budget-limited, an upper bound) against B = 2 at 388 exactly:
    # m* at B = 1 may lie above or below 388, so the group has no rank order and is left out
    # (ranking 508 as a value would give rho = -1). "≤ 300" against 388 settles it: kept.
    def group(upper):
        table = cells([({"T": 2048, "norm_bound": 1.0}, upper), ({"T": 2048, "norm_bound": 2.0}, 388.0)])
        return table.with_columns(
            bound=pl.when(pl.col("norm_bound") == 1.0).then(pl.lit("upper")).otherwise(pl.lit("exact"))
        )

    unsettled = l2_norm_bound(group(508.0))
    assert unsettled["verdict"] == "inconclusive" and "order against the other cells is not known" in unsettled["why"]
    settled = l2_norm_bound(group(300.0))
    assert "rho of m* with norm_bound = 1.00 over 1 group" in settled["statistic"], settled


# --- a growth law named only where robust; a short span's direction ---------------------------
# (stats/fits.py robust_law; constructed tables whose right answers follow from how they are built)

from scipy.optimize import least_squares  # noqa: E402

from attnsweep.stats.fits import MIN_LAW_POINTS, aicc, robust_law  # noqa: E402

# Half a polylog, half a power law, times noise, rounded: a table on which the m* scale and the
# ln m* scale disagree about the best law (checked independently below).
T_MIX = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
M_MIX = [6, 11, 17, 30, 44, 75, 92, 105, 165, 240]


def _rss(law, T, y, log_scale):
    """Least squares of a T^c (law "power") or a (ln T)^k ("polylog") on m* or on ln m*."""
    x = T if law == "power" else np.log(T)
    f = lambda p: p[0] * x ** p[1]  # noqa: E731
    resid = (lambda p: np.log(np.maximum(f(p), 1e-12)) - np.log(y)) if log_scale else (lambda p: f(p) - y)
    best = min(
        (least_squares(resid, p0, method="lm") for p0 in ([1.0, 0.5], [1.0, 2.0], [5.0, 1.0])),
        key=lambda r: r.cost,
    )
    return 2 * best.cost


def test_the_two_fitting_scales_disagree_so_no_law_is_named():
    T, y = np.array(T_MIX, float), np.array(M_MIX, float)
    # Built so: on m* the power law fits better than the polylog law, on ln m* the other way round.
    assert _rss("power", T, y, False) < _rss("polylog", T, y, False)
    assert _rss("polylog", T, y, True) < _rss("power", T, y, True)
    r = robust_law(T, y)
    assert r["winners"]["m, all"] == "power" and r["winners"]["ln m, all"] == "polylog"
    assert r["law"] == "undecided"
    # 2 scales x (all cells + each of 10 left out).
    assert r["n_variants"] == 22
    v = l1_log_growth(cells([({"T": t}, m) for t, m in zip(T_MIX, M_MIX, strict=True)], noise=0.05))
    numbers = v["series"][0]["numbers"]
    assert numbers["law"] == "undecided" and numbers["reading"] in (
        "faster than log, law undecided",
        "law undecided",
    )
    assert "power" not in numbers["reading"] and "polylog" not in numbers["reading"]
    assert "the best law by AICc changes with the variant" in v["statistic"]


def test_four_cells_name_no_law_even_when_a_law_fits_them_exactly():
    # m* = 5 sqrt(T) at 4 T over 3 decades: the power law fits exactly, but with 3 parameters
    # per law AICc = AIC + 2k(k+1)/(n-k-1) has n - k - 1 = 0: undefined, so no law is named.
    Ts = [8, 64, 1024, 8192]
    assert math.isnan(aicc(1.0, 4)) and MIN_LAW_POINTS == 5
    r = robust_law(np.array(Ts, float), np.array([5 * math.sqrt(t) for t in Ts]))
    assert r["law"] == "too few cells"
    v = l1_log_growth(cells(along_T(lambda t: 5 * math.sqrt(t), Ts)))
    numbers = v["series"][0]["numbers"]
    assert numbers["law"] == "too few cells"
    assert numbers["reading"] == "no law named (4 exact cells; a law needs 5)"
    assert "growth law named: no law named" in v["statistic"]
    assert "power growth fits" not in v["why"]


def test_five_exact_power_cells_name_the_power_law():
    # The same law at 5 T: it wins every variant (its fit is exact on both scales).
    Ts = [8, 64, 512, 2048, 8192]
    r = robust_law(np.array(Ts, float), np.array([5 * math.sqrt(t) for t in Ts]))
    assert r["law"] == "power" and set(r["winners"].values()) == {"power"}
    assert r["direction"] == "faster than log"


def test_a_short_span_with_a_large_log_law_deficit_is_inconclusive_with_its_direction():
    # m* = 5 sqrt(T) over T = 4..1024: 2.4 decades, short of the rule's 3, so L1 stays
    # inconclusive; but the log law misses a square root by far on every scale and with any T
    # left out, and the verdict must say so, with the deficit as numbers.
    Ts = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    T, y = np.array(Ts, float), 5 * np.sqrt(np.array(Ts, float))
    b, a = np.polyfit(np.log(T), y, 1)
    log_rss = float(np.sum((y - a - b * np.log(T)) ** 2))
    # Independently: the log law's AICc against an exact power law (RSS floored at 1e-12) is far behind.
    assert aicc(log_rss, len(Ts)) - aicc(1e-12, len(Ts)) > 100
    v = l1_log_growth(cells(along_T(lambda t: 5 * math.sqrt(t), Ts)))
    s = v["series"][0]
    assert v["verdict"] == "inconclusive"
    numbers = s["numbers"]
    assert numbers["direction"] == "faster than log" and numbers["span_short"] is True
    assert numbers["log_deficit_aicc"]["least"] > 2 and numbers["log_deficit_aicc"]["variants"] == 2 * (1 + len(Ts))
    assert numbers["decades"] == pytest.approx(math.log10(256))
    assert s["why"].startswith("faster than log: the log law trails by ")
    assert "over 2.4 decades; the rule's 3 decades (max T / min T >= 1000) not reached" in s["why"]


def test_a_short_span_of_log_growth_says_log_like_not_faster():
    Ts = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    v = l1_log_growth(cells(along_T(lambda t: 20 + 10 * math.log(t), Ts)))
    numbers = v["series"][0]["numbers"]
    assert v["verdict"] == "inconclusive" and numbers["direction"] == "log"
    assert v["series"][0]["why"].startswith("log-like: the log law leads by ")


def test_r_reports_the_ratio_against_T_with_its_trend():
    # Ours = the paper's m* times (T / 128)^0.3: the ratio rises from 1 at T = 128 to 2 at
    # T = 1024, so its log-log slope on T is 0.3 exactly, and the verdict says it rises.
    Ts = [128, 256, 512, 1024]
    v = r_reference(cells(along_T(lambda T: paper_at(T) * (T / 128) ** 0.3, Ts=Ts), noise=0.01))
    n = v["series"][0]["numbers"]
    assert n["ratio_by_T"] == pytest.approx([(t / 128) ** 0.3 for t in Ts], rel=1e-9)
    assert n["trend_slope"]["estimate"] == pytest.approx(0.3, abs=1e-9)
    assert n["trend_slope"]["ci_lo"] > 0.2 and n["trend_slope"]["ci_hi"] < 0.4
    assert "trend: ours rises against the paper's as T grows" in v["why"] and "trend slope CI" in v["interval"]
    # A flat ratio shows no trend.
    flat = r_reference(cells(along_T(paper_at, Ts=Ts), noise=0.01))
    assert "no trend of the ratio with T is shown" in flat["why"]


def test_m_star_across_the_bound_is_the_geometric_mean_of_the_per_T_ratios():
    # B = 2 needs 1.1, 1.2 and 1.4 times B = 1's samples at three T; at a fourth T the B = 2
    # cell is beyond the grid: a bound, left out, never a value.
    Ts = [8, 64, 512]
    factor = {8: 1.1, 64: 1.2, 512: 1.4}
    b1 = along_T(lambda T: 10 * math.sqrt(T), Ts=Ts + [4096], positions="fixed", norm_bound=1.0)
    b2 = along_T(lambda T: factor[T] * 10 * math.sqrt(T), Ts=Ts, positions="fixed", norm_bound=2.0)
    b2 += [({"T": 4096, "positions": "fixed", "norm_bound": 2.0}, math.inf)]
    v = l1_log_growth(cells(b1 + b2, noise=0.01))
    two = next(s for s in v["series"] if s["cells"].get("norm_bound") == 2.0)
    pair = two["numbers"]["across_bound"]
    assert pair["bounds"] == [1.0, 2.0] and pair["T"] == Ts and pair["left_out"] == [4096]
    assert pair["ratios"] == pytest.approx([1.1, 1.2, 1.4], rel=1e-9)
    assert pair["geomean"]["estimate"] == pytest.approx((1.1 * 1.2 * 1.4) ** (1 / 3), rel=1e-9)
    assert pair["geomean"]["ci_lo"] < pair["geomean"]["estimate"] < pair["geomean"]["ci_hi"]
