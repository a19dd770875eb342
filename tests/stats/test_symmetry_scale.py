"""The symmetry statistics across scale (stats/symmetry_scale.py) on constructed runs whose
answers follow from how they are built, not from the code under test."""

import json
import math

import polars as pl
import pytest

from attnsweep.analysis.symmetry import ScaleAnalysis
from attnsweep.stats import symmetry_scale as scale
from attnsweep.stats.symmetry import critical_sample_sizes_and_replicates, verdicts

# One axis at a time around (d, n, k) = (8, 6, 4), as sweeps/symmetry-scale.yaml runs it.
GROUPS = [
    (6, 4, 4),
    (6, 4, 8),
    (6, 4, 16),
    (3, 4, 8),
    (12, 4, 8),
    (6, 2, 8),
    (6, 8, 8),
]  # (n, k, d)
# Seed s of the generic transformer succeeds from m = d * THRESHOLDS[s]: its cell, tried at
# m = d * BASE, is the d = 1 cell with every m scaled by d, and m* is fitted on ln m, so m*
# scales by d exactly; n and k change nothing.
THRESHOLDS = (2, 3, 3, 4, 6)
BASE = (1, 2, 3, 4, 6, 8)


def _run(transformer_thresholds=THRESHOLDS, rising_error_at=None, scale_of=lambda d: d):
    """A symmetry run over GROUPS, 5 seeds.

    * inner-product: exact (E 1e-15), learns the equivariant teacher from m = 1, never the control;
    * transformer: success from m = scale_of(d) * threshold (equivariant teacher only), tried at
      m = scale_of(d) * BASE, so its m* is scale_of(d) times the d = 1 cell's; E = 0.5 m^-0.5
      times a per-seed constant (so the log-log slope is -0.5 exactly), rising as m^+0.5 in
      the group ``rising_error_at``;
    * transformer + rotations: success from m = 4 d, tried at m = d/2 * (1, 2, 4, 8) up to 32 (so
      beyond the grid at d = 16);
    * mlp: never learns.
    """
    rows = []
    for n, k, d in GROUPS:
        for teacher in ("equivariant", "control"):
            eq = teacher == "equivariant"
            for seed, t in enumerate(transformer_thresholds):
                base = dict(teacher=teacher, n=n, k=k, d=d, seed=seed, status="done")
                for m in (1, 2, 4):
                    rows.append(
                        dict(
                            base,
                            m=m,
                            model="transformer",
                            equivariance="orthogonal",
                            test_error=1e-3 if eq else 0.9,
                            eq_error_median=1e-15,
                            eq_error_max=2e-15,
                            perm_error_median=1e-15,
                        )
                    )
                power = 0.5 if (n, k, d) == rising_error_at else -0.5
                for m in (scale_of(d) * b for b in BASE):
                    e = 0.5 * m**power * (1 + 0.1 * seed)
                    rows.append(
                        dict(
                            base,
                            m=m,
                            model="transformer",
                            equivariance="none",
                            test_error=0.01 if eq and m >= scale_of(d) * t else 0.5,
                            eq_error_median=e,
                            eq_error_max=2 * e,
                            perm_error_median=e,
                        )
                    )
                    rows.append(
                        dict(
                            base,
                            m=m,
                            model="mlp",
                            equivariance="none",
                            test_error=0.7,
                            eq_error_median=1.0,
                            eq_error_max=1.0,
                            perm_error_median=1.0,
                        )
                    )
                if eq:
                    for m in (d // 2 * b for b in (1, 2, 4, 8) if d // 2 * b <= 32):  # scaled copies, up to 32
                        rows.append(
                            dict(
                                base,
                                m=m,
                                model="transformer",
                                equivariance="augment",
                                test_error=0.01 if m >= 4 * d else 0.5,
                                eq_error_median=0.1,
                                eq_error_max=0.2,
                                perm_error_median=0.1,
                            )
                        )
    return pl.DataFrame(rows)


def _analyse(trials):
    m_star, reps = critical_sample_sizes_and_replicates(trials, 0.05, 400, 0.95)
    return m_star, reps


def test_every_claim_is_judged_in_every_group():
    trials = _run()
    m_star, _ = _analyse(trials)
    table = scale.group_verdicts(trials, m_star, 200, 0.95)
    assert table.height == len(GROUPS) * 4
    assert set(table.select("n", "k", "d").iter_rows()) == set(GROUPS)
    assert table["verdict"].to_list() == ["supported"] * table.height
    # Each group's verdict is the one-size verdict of that group's rows alone.
    n, k, d = 6, 4, 16
    alone = trials.filter((pl.col("n") == n) & (pl.col("k") == k) & (pl.col("d") == d))
    one = verdicts(alone, m_star.filter((pl.col("n") == n) & (pl.col("k") == k) & (pl.col("d") == d)), 200)
    got = table.filter((pl.col("d") == d) & (pl.col("n") == n) & (pl.col("k") == k)).sort("claim")
    assert got["statistic"].to_list() == [v["statistic"] for v in one]
    overall = scale.overall_verdicts(table, {c: f"{c}: text" for c in scale.CLAIMS})
    assert [v["verdict"] for v in overall] == ["supported"] * 4
    assert overall[0]["statistic"] == f"supported in {len(GROUPS)} of {len(GROUPS)} (d, n, k) groups"


def test_one_failing_group_makes_the_claim_not_supported_across_scale():
    trials = _run(rising_error_at=(6, 4, 16))
    m_star, _ = _analyse(trials)
    table = scale.group_verdicts(trials, m_star, 200, 0.95)
    s3 = table.filter(pl.col("claim") == "S3")
    assert s3.filter(pl.col("d") == 16)["verdict"].to_list() == ["not supported"]
    assert s3.filter(pl.col("d") != 16)["verdict"].unique().to_list() == ["supported"]
    overall = {v["claim"].split(":")[0]: v for v in scale.overall_verdicts(table, {c: f"{c}: t" for c in scale.CLAIMS})}
    assert overall["S3"]["verdict"] == "not supported"
    assert "d=16, n=6, k=4: not supported" in overall["S3"]["statistic"]
    assert overall["S1"]["verdict"] == "supported"


def test_advantage_scales_as_built():
    m_star, reps = _analyse(_run())
    adv = scale.advantage(m_star, reps, 0.95)
    tr = adv.filter(pl.col("student") == "transformer")
    assert tr["bound"].unique().to_list() == ["exact"]  # the inner-product m* is 1: exact, no fewer samples exist
    assert tr["m_star_baseline"].unique().to_list() == [1.0]
    by_d = {r["d"]: r["ratio"] for r in tr.filter((pl.col("n") == 6) & (pl.col("k") == 4)).iter_rows(named=True)}
    assert by_d[8] / by_d[4] == pytest.approx(2, rel=1e-9) and by_d[16] / by_d[8] == pytest.approx(2, rel=1e-9)
    assert all(r["ci_lo"] <= r["ratio"] <= r["ci_hi"] for r in tr.iter_rows(named=True))
    aug = adv.filter(pl.col("student") == "transformer + rotations").sort("d")
    at16 = aug.filter(pl.col("d") == 16).row(0, named=True)
    assert at16["bound"] == "lower" and at16["ratio"] == 32 and at16["text"] == "> 32"


def test_advantage_slopes_recover_the_built_exponents():
    m_star, reps = _analyse(_run())
    slopes = scale.advantage_slopes(m_star, reps, 0.95)
    tr = {r["axis"]: r for r in slopes.filter(pl.col("student") == "transformer").iter_rows(named=True)}
    assert set(tr) == {"d", "n", "k"}
    assert tr["d"]["slope"] == pytest.approx(1.0, abs=1e-9) and tr["d"]["fixed"] == "n=6, k=4"
    assert tr["d"]["ci_lo"] <= 1.0 <= tr["d"]["ci_hi"]
    assert tr["n"]["slope"] == pytest.approx(0.0, abs=1e-9) and tr["k"]["slope"] == pytest.approx(0.0, abs=1e-9)
    assert tr["d"]["values"] == "4, 8, 16" and tr["d"]["left_out"] == ""
    aug = slopes.filter((pl.col("student") == "transformer + rotations") & (pl.col("axis") == "d")).row(0, named=True)
    # m* = 4 d at d = 4 and 8 (slope 1 between them); d = 16 is beyond the grid and left out.
    assert aug["values"] == "4, 8" and aug["slope"] == pytest.approx(1.0, abs=1e-9)
    # Its bound still says something of the slope: from d = 8 (an advantage of 4 * 8 / 1 by the
    # built m*, whatever the fit gives) to > 32 at d = 16 is a slope of at least log2(32 / adv_8).
    adv8 = scale.advantage(m_star, reps, 0.95).filter(
        (pl.col("student") == "transformer + rotations") & (pl.col("d") == 8)
    )["ratio"][0]
    assert aug["left_out"] == f"d=16: > 32 (a slope of at least {math.log2(32 / adv8):.2f} from d=8)"


def test_a_bracketed_cell_gives_the_advantage_an_interval_of_nonzero_width():
    # Every seed flips between the same two m: the bootstrap repeats one m*, the table
    # widens it to the two m tried around it, and the advantage's interval follows.
    trials = _run(transformer_thresholds=(3, 3, 3, 3, 3))
    m_star, reps = _analyse(trials)
    cell = m_star.filter(
        (pl.col("student") == "transformer")
        & (pl.col("teacher") == "equivariant")
        & (pl.col("d") == 8)
        & (pl.col("n") == 6)
        & (pl.col("k") == 4)
    ).row(0, named=True)
    assert (cell["ci_lo"], cell["ci_hi"]) == (16.0, 24.0)  # m = 8 * 2 fails, 8 * 3 succeeds
    r = (
        scale.advantage(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("d") == 8) & (pl.col("n") == 6) & (pl.col("k") == 4))
        .row(0, named=True)
    )
    assert 16 <= r["ci_lo"] < r["ci_hi"] <= 24
    slope = (
        scale.advantage_slopes(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    assert slope["ci_hi"] - slope["ci_lo"] > 0.1


def test_error_slopes_per_group():
    slopes, medians = scale.error_against_m(_run(rising_error_at=(3, 4, 8)), 200, 0.95)
    assert slopes.height == len(GROUPS)
    for r in slopes.iter_rows(named=True):
        want = 0.5 if (r["n"], r["k"], r["d"]) == (3, 4, 8) else -0.5
        assert r["slope"] == pytest.approx(want, abs=1e-9) and r["m_min"] == r["d"] and r["m_max"] == 8 * r["d"]
    at = medians.filter((pl.col("d") == 4) & (pl.col("n") == 6) & (pl.col("k") == 4) & (pl.col("m") == 16))
    # median over seeds 0..4 of 0.5 * 16^-0.5 * (1 + 0.1 s) is seed 2's
    assert at["E"][0] == pytest.approx(0.5 * 16**-0.5 * 1.2) and at["trials"][0] == 5


def test_center_is_where_the_lines_cross():
    assert scale.center(_run()) == {"d": 8, "n": 6, "k": 4}


def test_a_censored_baseline_gives_a_bound_or_no_advantage():
    trials = _run().with_columns(
        test_error=pl.when(pl.col("equivariance") == "orthogonal").then(0.9).otherwise(pl.col("test_error"))
    )
    m_star, reps = _analyse(trials)
    adv = scale.advantage(m_star, reps, 0.95)
    # The inner-product m* is beyond its grid (m* > 4, the largest m tried): a generic m*
    # measured inside its own grid makes the advantage an upper bound (< m*/4); one beyond the
    # grid too leaves no number.
    for r in adv.iter_rows(named=True):
        assert r["baseline_bound"] == "lower" and r["m_star_baseline"] == 4
        if r["m_star_bound"] == "exact":
            assert r["bound"] == "upper" and r["ratio"] == pytest.approx(r["m_star"] / 4) and r["text"].startswith("≤")
        else:
            assert r["bound"] == "none" and math.isnan(r["ratio"])
    slopes = scale.advantage_slopes(m_star, reps, 0.95)
    assert slopes["slope"].is_nan().all()
    assert math.isnan(slopes["ci_lo"][0])


def test_curved_local_slopes_are_published_instead_of_one_slope():
    # The generic m* is 4 at d = 4 and 8 (local slope 0) and 32 at d = 16 (local slope 3): one
    # power law cannot fit the line, and each local slope's interval is far from the other's.
    m_star, reps = _analyse(_run(scale_of={4: 4, 8: 4, 16: 32}.get))
    row = (
        scale.advantage_slopes(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    local = json.loads(row["local_json"])
    assert [(x["from"], x["to"]) for x in local] == [(4, 8), (8, 16)]
    assert local[0]["slope"] == pytest.approx(0.0, abs=1e-9) and local[1]["slope"] == pytest.approx(3.0, abs=1e-9)
    assert local[0]["ci_hi"] < local[1]["ci_lo"]
    assert row["lack_of_fit"] is True
    # The inner-product m* is 1 in every group of the line: the advantage's denominator is the floor.
    assert row["floor"] is True
    # What the findings publish: the local slopes, not one slope.
    analysis = ScaleAnalysis(
        groups=pl.DataFrame(),
        advantage=pl.DataFrame(),
        advantage_slopes=scale.advantage_slopes(m_star, reps, 0.95),
        error_slopes=pl.DataFrame(
            schema=dict(
                d=pl.Int64,
                n=pl.Int64,
                k=pl.Int64,
                slope=pl.Float64,
                ci_lo=pl.Float64,
                ci_hi=pl.Float64,
                m_min=pl.Int64,
                m_max=pl.Int64,
            )
        ),
        error_medians=pl.DataFrame(),
        center={},
    )
    m = next(
        x
        for x in analysis.measurements()
        if x["measurement"].startswith("S2 advantage of the inner-product student over the transformer against d")
    )
    assert m["statistic"].startswith("no single slope (the local slopes disagree): d 4 -> 8: 0.00, d 8 -> 16: 3.00")
    assert m["numbers"]["lack_of_fit"] is True and len(m["numbers"]["local_slopes"]) == 2
    assert "floor of 1" in m["note"]


def test_a_straight_line_keeps_its_one_slope():
    # m* proportional to d: both local slopes are 1, their intervals overlap, one slope stands.
    m_star, reps = _analyse(_run())
    row = (
        scale.advantage_slopes(m_star, reps, 0.95)
        .filter((pl.col("student") == "transformer") & (pl.col("axis") == "d"))
        .row(0, named=True)
    )
    assert row["lack_of_fit"] is False
    assert [x["slope"] for x in json.loads(row["local_json"])] == pytest.approx([1.0, 1.0], abs=1e-9)


# --- S3 and S4 along d: what the groups show beside the rule's verdict across groups -----------


def test_s3_across_groups_says_up_to_which_d_every_group_shows_the_error_falling():
    # E rises with m in the d = 16 group only: S3 is not supported across groups, and every
    # group with d <= 8 (6 of the 7: d = 4 and the five d = 8 groups) shows it falling.
    trials = _run(rising_error_at=(6, 4, 16))
    m_star, _ = _analyse(trials)
    table = scale.group_verdicts(trials, m_star, 200, 0.95)
    overall = {v["id"]: v for v in scale.overall_verdicts(table, {c: f"{c}: t" for c in scale.CLAIMS})}
    s3 = overall["S3"]
    assert s3["verdict"] == "not supported"
    assert (
        "the generic transformer's O(d) equivariance error falls with m (supported) in every group with d ≤ 8 "
        "(6 of 7 groups); above it: not supported at d = 16" in s3["statistic"]
    )
    assert "the statistic says what the groups show along d" in s3["why"]
    assert (
        "its permutation equivariance error falls with m (supported) in every group with d ≤ 8"
        in (overall["S4"]["statistic"])
    )
    # S1 holds in every group: nothing to add beside it.
    assert "along d" not in overall["S1"]["why"] and "every group with d" not in overall["S1"]["statistic"]


def _groups(verdicts_by_d, flagged=(32, 64)):
    """A group table of S3 and S4 (n = 6, k = 4): ``verdicts_by_d`` {d: verdict}; the groups at
    ``flagged`` d used cells that ran out of epochs."""
    return pl.DataFrame(
        [
            dict(
                n=6,
                k=4,
                d=d,
                claim=claim,
                verdict=v,
                statistic="-",
                interval="-",
                why="-",
                numbers="{}",
                flags="out-of-epochs; few-seeds" if d in flagged else "few-seeds",
            )
            for d, v in verdicts_by_d.items()
            for claim in ("S3", "S4")
        ]
    )


def test_by_d_names_the_groups_that_ran_out_of_epochs():
    table = _groups({4: "supported", 8: "supported", 16: "supported", 32: "inconclusive", 64: "inconclusive"})
    along = scale.by_d(table.filter(pl.col("claim") == "S3"), "S3")
    assert along["d_max"] == 16 and (along["groups"], along["total"]) == (3, 5)
    assert along["text"] == (
        "the generic transformer's O(d) equivariance error falls with m (supported) in every group with d ≤ 16 "
        "(3 of 5 groups); above it: inconclusive at d = 32, 64 (the generic transformer's trials there ran out "
        "of epochs before fitting their training sets, so its error measures the training budget as much as "
        "the samples)"
    )
    assert along["short"] == (
        "it falls in every group with d ≤ 16, 3 of 5 groups; inconclusive at d = 32, 64, where the trials ran "
        "out of epochs"
    )
    # Nothing to add where every group supports it, or where the smallest d's groups do not.
    assert scale.by_d(_groups({4: "supported", 8: "supported"}).filter(pl.col("claim") == "S3"), "S3") is None
    assert scale.by_d(_groups({4: "inconclusive", 8: "supported"}).filter(pl.col("claim") == "S3"), "S3") is None
    assert scale.by_d(table.filter(pl.col("claim") == "S3"), "S2") is None


def test_the_readme_row_says_what_the_groups_at_small_d_show_where_s3_and_s4_are_left_open():
    from attnsweep.analysis.symmetry import SymmetryAnalysis
    from attnsweep.presentation.verdict_table import symmetry_row

    table = _groups({4: "supported", 8: "supported", 16: "supported", 32: "inconclusive", 64: "inconclusive"})
    texts = {c: f"{c}: t" for c in scale.CLAIMS}
    analysis = SymmetryAnalysis(
        sweep="s",
        run_id="r1",
        m_star=pl.DataFrame(),
        errors=pl.DataFrame(),
        verdicts=scale.overall_verdicts(table, texts),
        scale=ScaleAnalysis(
            groups=table,
            advantage=pl.DataFrame(),
            advantage_slopes=pl.DataFrame(),
            error_slopes=pl.DataFrame(),
            error_medians=pl.DataFrame(),
            center={},
        ),
    )
    row = symmetry_row([analysis], "docs/findings/symmetry/findings.md")
    assert (
        "They leave open whether the generic transformer's O(d) equivariance error falls as m grows (it falls in "
        "every group with d ≤ 16, 3 of 5 groups; inconclusive at d = 32, 64, where the trials ran out of epochs); "
        "whether its permutation equivariance error falls as m grows (it falls in every group with d ≤ 16, 3 of 5 "
        "groups; inconclusive at d = 32, 64, where the trials ran out of epochs)." in row
    )
