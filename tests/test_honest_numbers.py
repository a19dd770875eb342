"""Numbers stated no more strongly than the rows allow (docs/claims.md 2), on constructed stores
whose right answer follows from how they are built: each store holds trial rows written as
the driver writes them, and the analysis, the report, verdicts.json and the Python API read
them back.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import yaml

import attnsweep
from attnsweep.analysis.boolean import analyze_run
from attnsweep.orchestrator.spec import trial_id
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.presentation.report import build_report
from attnsweep.results import ResultsStore
from attnsweep.stats.fits import MODELS
from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig

START = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _write(store: ResultsStore, sweep: str, run_id: str, rows: list[dict], spec: dict, experiment: str) -> None:
    """``rows`` (config fields and results) as one part file, and a finished run record."""
    schema = trial_schema()
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    store.write_trials(sweep, run_id, table)
    record = dict(
        status="finished",
        started_at=START,
        ended_at=START + dt.timedelta(minutes=5),
        wall_s=300.0,
        n_trials=len(rows),
        n_done=sum(r["status"] == "done" for r in rows),
        n_failed=0,
        n_diverged=0,
        n_lost=0,
        spec_name=sweep,
        spec_hash="0" * 16,
        spec_yaml=yaml.safe_dump(spec),
        executor="actors",
        host="test",
        code_version="test",
        packages="{}",
        experiment=experiment,
        trial_fields=None,
        cell_counts=None,
        attempts=[],
    )
    store.write_run(sweep, run_id, record, run_schema())


def _boolean_row(
    T: int,
    m: int,
    seed: int,
    ok: bool,
    *,
    model: str = "transformer",
    out_of_epochs: bool = False,
    max_epochs: int = 500,
    **settings,
) -> dict:
    """A finished sparse-Boolean trial: success (test accuracy 1.0) or failure (0.6); a failure
    that ran out of epochs has not fit its training set (train accuracy 0.8, not converged),
    another has (train accuracy 1.0, converged: it stopped early)."""
    config = BooleanTrialConfig(
        task="and",
        T=T,
        s=3,
        m=m,
        seed=seed,
        model=model,
        d=16,
        heads=2,
        lr=3e-3,
        max_epochs=max_epochs,
        n_test=1000,
        **settings,
    )
    fit = ok or not out_of_epochs
    return dict(
        config.model_dump(),
        trial_id=trial_id(config),
        experiment="sparse_boolean",
        status="done",
        test_acc=1.0 if ok else 0.6,
        train_acc=1.0 if fit else 0.8,
        converged=fit,
        epochs=100 if fit else max_epochs,
        test_loss=0.1,
        train_loss=0.1,
    )


def _rows(T: int, table: dict[int, tuple[int, int]], seeds: int, **kw) -> list[dict]:
    """``{m: (successes, of which failures ran out of epochs)}`` over ``seeds`` seeds."""
    rows = []
    for m, (k, ran_out) in table.items():
        for seed in range(seeds):
            ok = seed < k
            rows.append(_boolean_row(T, m, seed, ok, out_of_epochs=not ok and seed - k < ran_out, **kw))
    return rows


SPEC = dict(
    name="constructed",
    seeds=4,
    grid={"T": [8]},
    fixed=dict(task="and", s=3, d=16, heads=2, lr=3e-3),
    analysis=dict(n_boot=400),
)


@pytest.fixture(scope="module")
def parity_like(tmp_path_factory):
    """The issue's grid cell: 4 seeds, m = 64 .. 1024; success 0, 0, 1, 2, 0 of 4, and no trial
    at m = 1024 fit its training set within the epoch budget; beside it a clean cell at
    T = 16 (m* between 128 and 256) and a cell beyond the grid at T = 32."""
    store = ResultsStore(tmp_path_factory.mktemp("parity") / "store")
    rows = (
        _rows(8, {64: (0, 0), 128: (0, 0), 256: (1, 0), 512: (2, 0), 1024: (0, 4)}, 4)
        + _rows(16, {64: (0, 0), 128: (0, 0), 256: (4, 0), 512: (4, 0), 1024: (4, 0)}, 4)
        + _rows(32, {64: (0, 0), 128: (0, 0), 256: (0, 0), 512: (0, 0), 1024: (0, 0)}, 4)
    )
    _write(store, "constructed", "20261202-090000-aaaaaa", rows, SPEC, "sparse_boolean")
    return store


def test_a_non_monotone_budget_decided_cell_is_a_flagged_bound_not_a_value(parity_like):
    table = analyze_run(parity_like, "20261202-090000-aaaaaa").m_star
    row = table.filter(pl.col("T") == 8).row(0, named=True)
    # The rate reaches 2/4 at m = 512 and falls to 0/4 at 1024: non-monotone. At 1024 the four
    # failures ran out of epochs and alone put the rate below half: budget-decided, so m* is
    # an upper bound, at the first crossing (512), not the logistic fit's edge value 1024.
    assert set(row["flags"].split("; ")) >= {"non-monotone", "out-of-epochs"}
    assert row["bound"] == "upper" and row["m_star"] == 512.0 and row["m_star_grid"] == 512.0


def test_a_budget_check_whose_own_trials_ran_out_of_epochs_settles_nothing(tmp_path):
    # T = 4096: every seed fails at m = 256 and 2048 with 500 epochs, out of epochs; with 1000
    # (the budget check) 3 of 8 succeed at 2048 and the other 5 still run out. Both are beyond
    # the grid, but the twin's own failures ran out: twice the epochs were still too few, so the
    # cell is budget-limited and m* only "> 32" (the optimistic count reaches half at 256).
    # T = 1024: the same search rows, but at 1000 epochs the failures fit their training sets:
    # the check is clean and m* > 2048 stands.
    store = ResultsStore(tmp_path / "store")
    rows = []
    for T, twin_ran_out in ((4096, (8, 5)), (1024, (0, 0))):
        rows += [dict(r, search_phase="search") for r in _rows(T, {32: (0, 0), 256: (0, 8), 2048: (0, 8)}, 8)]
        twin = _rows(
            T,
            {32: (0, 0), 256: (0, twin_ran_out[0]), 2048: (3, twin_ran_out[1])},
            8,
            max_epochs=1000,
        )
        rows += [dict(r, search_phase="budget") for r in twin]
    _write(store, "constructed", "20261202-090000-dddddd", rows, SPEC, "sparse_boolean")
    table = analyze_run(store, "20261202-090000-dddddd").m_star
    limited = table.filter(pl.col("T") == 4096).row(0, named=True)
    assert limited["budget"] == "budget-limited" and "budget-limited" in limited["flags"]
    assert (limited["bound"], limited["m_star"]) == ("lower", 32.0)
    assert limited["fit_at_m_max"] == 0.0 and limited["fit_at_m_max_2x"] == pytest.approx(3 / 8)
    clean = table.filter(pl.col("T") == 1024).row(0, named=True)
    assert clean["budget"] == "ok" and (clean["bound"], clean["m_star"]) == ("lower", 2048.0)
    assert clean["fit_at_m_max_2x"] == 1.0


def test_an_interval_with_few_seeds_holds_the_grid_bracket(parity_like):
    row = analyze_run(parity_like, "20261202-090000-aaaaaa").m_star.filter(pl.col("T") == 16).row(0, named=True)
    # Every seed fails at 128 and succeeds at 256: the grid says only 128 < m* <= 256, whatever
    # the bootstrap's replicates (all equal) say.
    assert row["bound"] == "exact" and row["flags"] == "few-seeds"
    assert row["ci_lo"] <= 128 and row["ci_hi"] >= 256


def test_the_api_gives_a_bound_with_its_real_end(parity_like, tmp_path):
    result = attnsweep.open_store(parity_like.root).analyze("20261202-090000-aaaaaa", figures=tmp_path)
    beyond = result.m_star_of(T=32)
    # Beyond the grid: m* > 1024, the largest m tried; the interval starts there, not at inf.
    assert (beyond.bound, beyond.estimate, beyond.ci_lo, beyond.ci_hi) == (
        "lower",
        1024.0,
        1024.0,
        math.inf,
    )
    assert beyond.text == "> 1024" and beyond.cell["T"] == 32
    inside = result.m_star_of(T=16, model="transformer")
    assert inside.bound == "exact" and 128 < inside.estimate <= 256 and inside.flags == ("few-seeds",)
    with pytest.raises(attnsweep.AttnsweepError, match="no cell with T=64.*T: \\[8, 16, 32\\]"):
        result.m_star_of(T=64)
    with pytest.raises(attnsweep.AttnsweepError, match="no setting width"):
        result.m_star_of(width=3)


def test_verdicts_json_says_not_tested_and_carries_numbers(parity_like, tmp_path):
    build_report(parity_like, ["20261202-090000-aaaaaa"], tmp_path / "rep")
    record = json.loads((tmp_path / "rep" / "verdicts.json").read_text())
    by = {v["id"]: v for v in record["verdicts"]}
    # No symmetry run: S1-S4 are not tested (not "inconclusive"); no MLP: L4 is not tested. A claim
    # the run does not test has no verdict, only what a run needs to test it.
    assert not {"S1", "S2", "S3", "S4", "L4"} & set(by)
    needs = {v["id"]: v["needs"] for v in record["not_tested"]}
    assert [needs[c] for c in ("S1", "S2", "S3", "S4")] == ["a symmetry run"] * 4
    assert needs["L4"] == "needs transformer and MLP cells of equal settings"
    # L1: one series, T = 8, 16, 32 (under a decade): inconclusive, with its numbers as numbers.
    l1 = by["L1"]
    assert l1["verdict"] == "inconclusive"
    numbers = l1["series"][0]["numbers"]
    assert numbers["n_cells"] == 1 and numbers["T"] == [16]
    assert [(x["T"], x["m_star"]["bound"], x["m_star"]["estimate"]) for x in numbers["left_out"]] == [
        (8, "upper", 512.0),
        (32, "lower", 1024.0),
    ]
    m_star_csv = pl.read_csv(tmp_path / "rep" / "m_star.csv")
    assert set(m_star_csv.columns) >= {"bound", "flags", "ci_lo", "ci_hi"}
    assert m_star_csv.filter(pl.col("T") == 32)["ci_hi"].to_list() == [math.inf]


# --- fits use exact m* only, and a fit's verdict names what it left out ----------------------


def test_l1_over_three_decades_fits_exact_cells_and_names_the_bounds(tmp_path):
    # m* = 8 + 4 ln T... placed exactly on the grid with 8 seeds: seeds succeed from m = m*,
    # every one at m >= m*, none below, so the grid bracket pins each cell; T = 4096 is beyond
    # the grid (m <= 64 tried).
    store = ResultsStore(tmp_path / "store")
    rows = []
    for T, first in ((8, 16), (64, 24), (512, 32), (4096, None)):
        grid = {m: ((8 if first is not None and m >= first else 0), 0) for m in (8, 12, 16, 24, 32, 48, 64)}
        rows += _rows(T, grid, 8)
    _write(store, "constructed", "20261202-090000-bbbbbb", rows, SPEC, "sparse_boolean")
    result = attnsweep.open_store(store.root).analyze("20261202-090000-bbbbbb", figures=tmp_path / "fig")
    l1 = next(v for v in result.verdicts if v["id"] == "L1")
    numbers = l1["series"][0]["numbers"]
    assert numbers["T"] == [8, 64, 512] and [x["T"] for x in numbers["left_out"]] == [4096]
    assert "T=4096: > 64" in l1["why"]  # named, with its bound
    # Three exact cells span 1.8 decades: the claim needs 3.
    assert l1["verdict"] == "inconclusive" and "1.8 decades" in l1["why"]
    fits = result.fits
    assert fits.columns[0] == "law" and fits.height == len(MODELS)  # one series: no setting tells series apart


# --- the symmetry side: the floor, an advantage that is a bound, a flat slope -----------------


def _symmetry_rows(
    d: int,
    first: dict[str, int | None],
    ms: list[int],
    seeds: int = 5,
    e_slope: float = -0.5,
    fit_ip: bool = True,
) -> list[dict]:
    """Symmetry trials of one (d, n, k) group on the equivariant teacher: student ``s``
    succeeds from m = ``first[s]`` (None: never); the generic transformer's E = m^e_slope."""
    rows = []
    students = {
        "inner-product": ("transformer", "orthogonal"),
        "transformer": ("transformer", "none"),
    }
    for student, (model, eq) in students.items():
        for m in ms:
            for seed in range(seeds):
                cfg = SymmetryTrialConfig(
                    teacher="equivariant",
                    n=6,
                    k=4,
                    d=d,
                    m=m,
                    seed=seed,
                    model=model,
                    equivariance=eq,
                    max_epochs=400,
                )
                ok = first[student] is not None and m >= first[student]
                e = 1e-15 if student == "inner-product" else (1 + 0.01 * seed) * m**e_slope
                rows.append(
                    dict(
                        cfg.model_dump(),
                        trial_id=trial_id(cfg),
                        experiment="symmetry",
                        status="done",
                        test_error=0.01 if ok else 0.5,
                        train_error=0.0 if ok or fit_ip else 0.3,
                        converged=False,
                        epochs=400,
                        eq_error_median=e,
                        eq_error_max=2 * e,
                        perm_error_median=e,
                    )
                )
    return rows


SYMMETRY_SPEC = dict(
    name="constructed-symmetry",
    experiment="symmetry",
    seeds=5,
    grid={"d": [4]},
    fixed=dict(teacher="equivariant", n=6, k=4),
    analysis=dict(n_boot=400),
)


@pytest.mark.slow
def test_an_inner_product_m_star_at_m_1_is_exact_and_above_it_makes_the_advantage_a_bound(tmp_path):
    store = ResultsStore(tmp_path / "store")
    # d = 4: m from 1, the inner-product student succeeds at m = 1 (m* = 1 exactly: no fewer
    # samples exist), the transformer from m = 32 -> advantage exactly about 32 / 1.
    # d = 8: m from 2 only: the inner-product m* <= 2, so the advantage is a lower bound.
    rows = _symmetry_rows(4, {"inner-product": 1, "transformer": 32}, [1, 2, 4, 8, 16, 32, 64]) + _symmetry_rows(
        8, {"inner-product": 2, "transformer": 32}, [2, 4, 8, 16, 32, 64]
    )
    _write(store, "constructed-symmetry", "20261202-090000-cccccc", rows, SYMMETRY_SPEC, "symmetry")
    result = attnsweep.open_store(store.root).analyze("20261202-090000-cccccc", figures=tmp_path / "fig")
    ip4 = result.m_star_of(student="inner-product", d=4)
    assert (ip4.bound, ip4.estimate, ip4.text) == ("exact", 1.0, "1.0")
    ip8 = result.m_star_of(student="inner-product", d=8)
    assert (ip8.bound, ip8.estimate, ip8.text) == ("upper", 2.0, "≤ 2")
    adv = {
        r["d"]: r
        for r in result.detail.scale.advantage.filter(pl.col("student") == "transformer").iter_rows(named=True)
    }
    assert adv[4]["bound"] == "exact" and adv[4]["ratio"] == pytest.approx(
        result.m_star_of(student="transformer", d=4).estimate
    )
    assert adv[8]["bound"] == "lower" and adv[8]["text"].startswith(">")
    # The bound stays out of the advantage's slope along d, and is named.
    slope = result.detail.scale.advantage_slopes.filter(
        (pl.col("student") == "transformer") & (pl.col("axis") == "d")
    ).row(0, named=True)
    assert math.isnan(slope["slope"]) and "d=8: >" in slope["left_out"]


@pytest.mark.slow
def test_a_flat_equivariance_error_is_not_reported_as_falling(tmp_path):
    # E ~ m^-0.02 over m = 1..64: below zero, but by less than the required effect (-0.05).
    rows = _symmetry_rows(4, {"inner-product": 1, "transformer": 32}, [1, 2, 4, 8, 16, 32, 64], e_slope=-0.02)
    store = ResultsStore(tmp_path / "store")
    _write(store, "constructed-symmetry", "20261202-090000-dddddd", rows, SYMMETRY_SPEC, "symmetry")
    result = attnsweep.open_store(store.root).analyze("20261202-090000-dddddd", figures=tmp_path / "fig")
    s3 = next(v for v in result.verdicts if v["id"] == "S3")
    slope = s3["series"][0]["numbers"]["slope"]
    assert slope["estimate"] == pytest.approx(-0.02, abs=1e-6) and slope["ci_hi"] < 0
    assert s3["verdict"] == "not supported" and "practically flat" in s3["why"]


@pytest.mark.slow
def test_the_symmetry_error_figure_draws_one_panel_per_group(tmp_path, monkeypatch):
    # Two groups tried different m (as an adaptive search does): a pooled line would mix them.
    import matplotlib.pyplot as plt

    from attnsweep.stats.figures_symmetry import plot_test_error
    from attnsweep.stats.symmetry import with_student

    rows = _symmetry_rows(4, {"inner-product": 1, "transformer": 8}, [1, 4, 16]) + _symmetry_rows(
        32, {"inner-product": 1, "transformer": None}, [1, 64, 256]
    )
    trials = with_student(pl.DataFrame(rows)).collect()
    drawn = []
    monkeypatch.setattr(plt, "close", lambda fig=None: drawn.append(fig))  # keep the figure to look at it
    plot_test_error(trials, tmp_path / "t.png")
    fig = drawn[-1]
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title())
    assert titles == ["d=32, n=6, k=4", "d=4, n=6, k=4"]
    for ax in fig.axes:
        xs = {x for line in ax.get_lines() for x in line.get_xdata()}
        want = {1, 4, 16} if ax.get_title().startswith("d=4,") else {1, 64, 256}
        assert xs <= want | {np.nan}, (ax.get_title(), xs)


# --- the headline: one row per L1 series, named by what the theorem covers ------------------


@pytest.mark.slow
def test_the_headline_table_has_a_row_per_series_and_says_which_is_the_theorems_class(tmp_path):
    # Three series over 3 decades of T: the paper's protocol (learned positions, no bound), the
    # theorem's class (fixed positions, norm bound 1, inputs of norm sqrt(d): no LayerNorm gain
    # before the head) and the same with a trained gain, whose inputs' norm no bound covers.
    # Seeds succeed from m = first on.
    from attnsweep.presentation.findings_boolean import series_table

    store = ResultsStore(tmp_path / "store")
    grid_ms = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    rows = []
    for T, learned_first, fixed_first in (
        (8, 12, 16),
        (64, 24, 24),
        (512, 48, 32),
        (8192, 192, 48),
    ):
        rows += _rows(T, {m: (8 if m >= learned_first else 0, 0) for m in grid_ms}, 8)
        rows += _rows(
            T,
            {m: (8 if m >= fixed_first else 0, 0) for m in grid_ms},
            8,
            positions="fixed",
            norm_bound=1.0,
            ln_affine=False,
        )
        rows += _rows(
            T,
            {m: (8 if m >= fixed_first else 0, 0) for m in grid_ms},
            8,
            positions="fixed",
            norm_bound=1.0,
        )
    _write(store, "constructed", "20261202-090000-cccccc", rows, SPEC, "sparse_boolean")
    result = attnsweep.open_store(store.root).analyze("20261202-090000-cccccc")
    l1 = next(v for v in result.verdicts if v["id"] == "L1")
    assert len(l1["series"]) == 3
    lines = series_table(result.verdicts, result.m_star)
    body = [line for line in lines if line.startswith("| ") and not line.startswith("| series")]
    assert len(body) == 3
    by_label = {line.split(" | ")[0][2:]: line for line in body}
    theory, near, protocol = (
        "fixed positions, norm bound 1, inputs of norm sqrt(d), untuned, 500 epochs",
        "fixed positions, norm bound 1, untuned, 500 epochs",
        "learned positions, no norm bound, untuned, 500 epochs",
    )
    assert set(by_label) == {theory, near, protocol}
    assert "theorem's class" in by_label[theory] and "near the" not in by_label[theory]
    assert "not the theorem's class" not in by_label[theory]
    assert "inputs' norm is not bounded" in by_label[near]
    assert "outside the theorem's class" in by_label[protocol]
    for s in l1["series"]:
        cells = s["cells"]
        line = by_label[
            protocol
            if cells.get("positions", "learned") == "learned"
            else theory
            if cells.get("ln_affine") is False
            else near
        ]
        c = s["numbers"]["c"]
        assert f"{c['estimate']:.3f} ({c['ci_lo']:.3f} .. {c['ci_hi']:.3f})" in line
        assert "8..8192 (4 cells, 3.0 decades)" in line and f"| {s['verdict']} |" in line
    # The figure draws each series that spans T, named by its setting; a side block at one T does not.
    from attnsweep.presentation.m_star_figure import main_series

    side = result.m_star.head(1).with_columns(norm_bound=pl.lit(0.25), T=pl.lit(64, result.m_star.schema["T"]))
    drawn = main_series(pl.concat([result.m_star, side], how="diagonal_relaxed"))
    assert sorted(drawn["series"].unique()) == [
        "transformer, fixed positions, B=1",
        "transformer, fixed positions, B=1, inputs of norm sqrt(d)",
        "transformer, no bound",
    ]
    assert drawn.group_by("series").agg(pl.col("T").n_unique())["T"].to_list() == [4, 4, 4]


def test_a_series_too_short_to_judge_still_says_what_its_span_shows():
    from attnsweep.presentation.findings_boolean import _meaning

    kind = dict(label="fixed positions, norm bound 2, inputs of norm sqrt(d), untuned", theory=True)
    deficit = dict(full=24.12, least=18.95, most=38.2, variants=20)
    text = _meaning(
        kind,
        "inconclusive",
        dict(
            best_law="polylog",
            law="undecided",
            decades=2.7,
            log_margin_aic=-24.12,
            direction="faster than log",
            log_deficit_aicc=deficit,
        ),
    )
    assert text == (
        "inconclusive for the theorem's class by the rule (T spans 2.7 decades, L1 needs 3), but over "
        "that span m* grows faster than log T: the log law trails by 19 to 38 AICc in all 20 fitting "
        "variants (m* and ln m* scales, each T left out)."
    )
    mixed = _meaning(
        kind,
        "inconclusive",
        dict(
            law="undecided",
            decades=2.7,
            log_margin_aic=-3.0,
            direction="undecided",
            log_deficit_aicc=dict(least=-4, most=9, variants=20),
        ),
    )
    assert "the direction is undecided (the log law's deficit ranges -4 to +9 AICc" in mixed
    over_three = _meaning(kind, "inconclusive", dict(best_law="power", decades=3.0, log_margin_aic=-1.0))
    assert over_three == "the rows cannot tell log growth from faster growth for the theorem's class."


def test_the_headline_names_the_fit_limits_of_a_bounded_series():
    from attnsweep.presentation.findings_boolean import fit_limit_lines

    table = pl.DataFrame(
        [
            dict(
                T=4096,
                norm_bound=1.0,
                positions="fixed",
                bound="lower",
                fit_at_m_max=0.125,
                fit_at_m_max_2x=0.25,
                m_max=2048,
            ),
            dict(
                T=1024,
                norm_bound=1.0,
                positions="fixed",
                bound="exact",
                fit_at_m_max=1.0,
                fit_at_m_max_2x=None,
                m_max=2048,
            ),
        ],
        schema_overrides={"fit_at_m_max_2x": pl.Float64},
    )
    (line, blank) = fit_limit_lines(table)
    assert line.startswith("Fit limits") and blank == ""
    assert (
        "T = 4096, norm bound 1 (fixed positions): 12% of the trials at m = 2048 fit their training set "
        "(25% with twice the epochs)"
        in line
        and "T = 1024" not in line
    )
    assert fit_limit_lines(table.filter(pl.col("T") == 1024)) == []


# --- the symmetry budget check: a deciding m whose outcome moves with twice the epochs -------


@pytest.mark.slow
def test_a_symmetry_cell_whose_deciding_m_succeeds_at_twice_the_epochs_is_budget_limited(tmp_path):
    # d = 4: the transformer succeeds from m = 32 (fails at 16, its bracket's lo); at twice the
    # epochs it succeeds at 16 too, so its m* measured the budget. d = 8: at twice the epochs
    # both deciding m (16 and 32) keep their outcome. The inner-product students are not checked.
    store = ResultsStore(tmp_path / "store")
    ms = [1, 2, 4, 8, 16, 32, 64]
    rows = _symmetry_rows(4, {"inner-product": 1, "transformer": 32}, ms) + _symmetry_rows(
        8, {"inner-product": 1, "transformer": 32}, ms
    )
    for d, first_2x in ((4, 16), (8, 32)):
        for r in _symmetry_rows(d, {"inner-product": None, "transformer": first_2x}, [16, 32]):
            if r["equivariance"] == "none":
                cfg = SymmetryTrialConfig(**{**{k: r[k] for k in SymmetryTrialConfig.model_fields}, "max_epochs": 800})
                rows.append({**r, **cfg.model_dump(), "trial_id": trial_id(cfg), "search_phase": "budget"})
    _write(store, "constructed-symmetry", "20261202-090000-dddddd", rows, SYMMETRY_SPEC, "symmetry")
    table = attnsweep.open_store(store.root).analyze("20261202-090000-dddddd").m_star
    budget = {(r["d"], r["student"]): r["budget"] for r in table.iter_rows(named=True)}
    assert budget == {
        (4, "transformer"): "budget-limited",
        (8, "transformer"): "ok",
        (4, "inner-product"): "not checked",
        (8, "inner-product"): "not checked",
    }
    limited = table.filter((pl.col("d") == 4) & (pl.col("student") == "transformer")).row(0, named=True)
    assert limited["bound"] == "upper" and "budget-limited" in limited["flags"]  # m* <= its estimate, not a value
    kept = table.filter((pl.col("d") == 8) & (pl.col("student") == "transformer")).row(0, named=True)
    assert kept["bound"] == "exact" and "budget-limited" not in kept["flags"]


# --- L4: a ratio over a censored MLP m* starts at the bound over the transformer's upper end ---


def test_the_l4_ratio_interval_carries_the_transformers_uncertainty(tmp_path):
    # At T = 512 the MLP fails at every m <= 64 (m* > 64) and the transformer succeeds from
    # m = 32 on; the ratio is above 64 / m*, and, the transformer's m* being anywhere in its
    # interval, the interval's lower end is 64 / (the transformer's upper end), not 64 / m*.
    store = ResultsStore(tmp_path / "store")
    ms = (8, 12, 16, 24, 32, 48, 64)
    rows = []
    for T, tr_first, mlp_first in ((8, 12, 32), (64, 16, 64), (512, 32, None)):
        rows += _rows(T, {m: (8 if m >= tr_first else 0, 0) for m in ms}, 8)
        rows += _rows(T, {m: (8 if mlp_first and m >= mlp_first else 0, 0) for m in ms}, 8, model="mlp")
    _write(store, "constructed", "20261202-090000-eeeeee", rows, SPEC, "sparse_boolean")
    result = attnsweep.open_store(store.root).analyze("20261202-090000-eeeeee")
    tr = result.m_star.filter((pl.col("model") == "transformer") & (pl.col("T") == 512)).row(0, named=True)
    l4 = next(v for v in result.verdicts if v["id"] == "L4")
    ratio = l4["series"][0]["numbers"]["ratio"]
    assert ratio["bound"] == "lower" and ratio["estimate"] == pytest.approx(64 / tr["m_star"])
    assert tr["ci_hi"] > tr["m_star"] and ratio["ci_lo"] == pytest.approx(64 / tr["ci_hi"])
    assert ratio["ci_lo"] < ratio["estimate"]


def test_a_run_that_stopped_early_says_how_many_trials_it_stored_not_its_plan():
    from attnsweep.presentation.markdown import run_line

    rec = dict(
        run_id="r1",
        sweep="s",
        n_trials=5280,
        n_done=1477,
        n_failed=122,
        status="interrupted",
        started_at=START,
        wall_s=3564.0,
        code_version="abc",
    )
    assert "(1599 trials stored of at most 5280 planned: 1477 done, 122 failed; interrupted;" in run_line(rec)
    assert "(5280 trials: " in run_line(dict(rec, status="finished", n_done=5158))
