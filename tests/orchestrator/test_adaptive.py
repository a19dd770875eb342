"""The adaptive m* search: bisection rule, spec rules, and a real search on a LocalExecutor."""

import io
import math

import numpy as np
import optuna
import polars as pl
import pytest
from rich.console import Console

from attnsweep.analysis.boolean import analyze_run
from attnsweep.orchestrator.adaptive import (
    cell_key,
    deciding_points,
    initial_points,
    next_points,
    probe_m,
    robust_choice,
    study_dir,
)
from attnsweep.orchestrator.driver import run_sweep
from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.executors import LocalExecutor
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore

SPEC = """
name: adaptive
seeds: 4
grid: {T: [8, 16]}
fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 256, max_epochs: 200, lr: 1e-2}
search:
  mode: adaptive
  m: {min: 8, max: 128}
  rel_tol: 0.25
"""


def test_first_round_is_log_spaced_over_the_range_ends_included():
    # geomspace(8, 256, 4) = 8, 25.4, 80.6, 256
    assert initial_points(8, 256, 4) == [8, 25, 81, 256]
    assert next_points({}, 8, 256, 0.5, 0.1, 4, 1) == [8, 25, 81, 256]


def test_bisection_splits_the_bracket_at_its_geometric_middle():
    # rate reaches 1/2 first at 81; the largest m below it that fails is 25: sqrt(25 * 81) = 45
    assert next_points({8: 0.0, 25: 0.0, 81: 1.0, 256: 1.0}, 8, 256, 0.5, 0.1, 4, 1) == [45]
    # three points split [10, 100] at 10^(1/4), 10^(1/2), 10^(3/4) times 10
    assert next_points({10: 0.0, 100: 1.0}, 10, 100, 0.5, 0.1, 2, 3) == [18, 32, 56]


def test_a_noisy_rate_brackets_from_the_first_m_that_reaches_it():
    # 64 falls back below 1/2, but the bracket is [16, 32]: sqrt(512) = 22.6
    assert next_points({8: 0, 16: 0.25, 32: 0.75, 64: 0.25, 128: 1}, 8, 128, 0.5, 0.1, 4, 1) == [23]


def test_the_search_stops_when_pinned_or_beyond_the_range():
    assert next_points({20: 0.0, 22: 1.0}, 8, 256, 0.5, 0.1, 4, 1) == []  # 22 / 20 = 1.1
    assert next_points({20: 0.0, 21: 1.0}, 8, 256, 0.5, 0.01, 4, 1) == []  # adjacent integers
    assert next_points({8: 0.0, 256: 0.25}, 8, 256, 0.5, 0.1, 4, 1) == []  # m* above the range
    assert next_points({8: 0.75, 256: 1.0}, 8, 256, 0.5, 0.1, 4, 1) == []  # m* at or below its start
    assert next_points({8: 0.0, 100: 0.0}, 8, 256, 0.5, 0.1, 4, 1) == [256]  # the top not tried yet


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "grid: {T: [8, 16]}",
            "grid: {T: [8, 16], m: [8, 16]}",
            "grid.m: the adaptive search chooses m",
        ),
        (
            "  m: {min: 8, max: 128}\n",
            "  m: {min: 64, max: 8}\n",
            "search.m: max must be greater than min",
        ),
        ("  m: {min: 8, max: 128}\n", "", "search: mode adaptive needs the range of m"),
        ("  mode: adaptive\n", "  mode: adapt\n", "search.mode: value 'adapt'"),
        ("  rel_tol: 0.25\n", "  rel_tol: 0\n", "search.rel_tol: value 0"),
        (
            "  rel_tol: 0.25\n",
            "  tune: {lr: {min: 0.1, max: 0.01}}\n",
            "search.tune.lr: max must be greater than min",
        ),
        (
            "  mode: adaptive\n",
            "",
            "search: m, rel_tol apply only to an adaptive search: add mode: adaptive",
        ),
        (
            "  rel_tol: 0.25\n",
            "  tune: {lr: null, weight_decay: null}\n",
            "search.tune: nothing to tune",
        ),
        (
            "  rel_tol: 0.25\n",
            "  tune: {m: 4096, lr: null}\n",
            "search: tune.m (4096) must lie in the searched range",
        ),
        (
            "  rel_tol: 0.25\n",
            "  tune: {seeds: 5, lr: null}\n",
            "search.tune.seeds: value 5: more than the spec's 4 seeds",
        ),
        ("  rel_tol: 0.25\n", "  budget_check: 'yes'\n", "search.budget_check: value 'yes'"),
        (
            "  rel_tol: 0.25\n",
            "  tune: {confidence: 0.3}\n",
            "search.tune.confidence: value 0.3: Input should be greater than or equal to 0.5 (allowed: 0.5..1)",
        ),
        (
            "  rel_tol: 0.25\n",
            "  tune: {momentum: 3}\n",
            "search.tune.momentum: value 3: unknown field; allowed: "
            "['batch', 'confidence', 'lr', 'm', 'n_trials', 'seeds', 'weight_decay']",
        ),
        (
            "  m: {min: 8, max: 128}\n",
            "  m: 5\n",
            "search.m: value 5: must be a mapping of settings",
        ),
    ],
)
def test_spec_errors_name_the_field(old, new, message):
    with pytest.raises(SpecError) as exc:
        parse_spec(SPEC.replace(old, new))
    assert message in str(exc.value)
    assert "m: required" not in str(exc.value)  # an adaptive spec is not asked for an m axis


def test_a_tuned_setting_may_be_fixed_as_the_default_to_beat_but_is_no_grid_axis():
    tuned = SPEC.replace("  rel_tol: 0.25\n", "  rel_tol: 0.25\n  tune: {n_trials: 2}\n")
    assert parse_spec(tuned).fixed["lr"] == 1e-2
    with pytest.raises(SpecError, match="grid.lr: search.tune tunes lr per cell"):
        parse_spec(tuned.replace("grid: {T: [8, 16]}", "grid: {T: [8, 16], lr: [1e-3, 1e-2]}"))


def test_an_adaptive_spec_counts_at_most_trials_and_hashes_its_search():
    spec = parse_spec(SPEC)
    # cells x seeds x (first + max rounds), plus the budget check of the one series
    assert spec.n_trials() == 2 * 4 * (4 + 20) + 1 * 4 * (4 + 20)
    other = parse_spec(SPEC.replace("rel_tol: 0.25", "rel_tol: 0.2"))
    assert spec.spec_hash() != other.spec_hash()
    grid = "name: g\nseeds: 2\ngrid: {T: [8], m: [8, 16]}\nfixed: {task: and, s: 2}\n"
    assert parse_spec(grid).spec_hash() == parse_spec(grid + "search: {mode: grid}\n").spec_hash()


def _run(tmp_path, text, run_id="r1"):
    spec = parse_spec(text)
    store = ResultsStore(tmp_path / "store")
    run_sweep(
        spec,
        store,
        LocalExecutor(spec.execution),
        run_id=run_id,
        console=Console(file=io.StringIO()),
    )
    return spec, store, store.scan_run_trials(spec.name, run_id).collect()


@pytest.mark.slow
def test_each_cell_ends_pinned_within_the_tolerance(tmp_path):
    spec, store, rows = _run(tmp_path, SPEC)
    assert rows["trial_id"].n_unique() == rows.height
    search = rows.filter(pl.col("search_phase") == "search")
    assert set(search["T"]) == {8, 16}
    for (T,), cell in search.group_by(["T"]):
        rates = (
            cell.with_columns(ok=(pl.col("status") == "done") & (pl.col("test_acc") >= 0.95))
            .group_by("m")
            .agg(pl.col("ok").mean())
            .sort("m")
        )
        ms, ok = rates["m"].to_list(), rates["ok"].to_list()
        assert ms[0] == 8 and ms[-1] == 128  # the first round's ends
        reached = [m for m, r in zip(ms, ok, strict=True) if r >= 0.5]
        if reached and reached[0] > 8:  # a bracket: it must be pinned (rel_tol 0.25 or adjacent m)
            hi = reached[0]
            lo = max(m for m in ms if m < hi)
            assert hi / lo <= 1.25 or hi - lo <= 1, (T, ms, ok)
        # every tried m ran all seeds, in one round
        assert (
            cell.group_by("m")
            .agg(pl.col("seed").n_unique(), pl.col("search_round").n_unique())
            .select((pl.col("seed") == 4) & (pl.col("search_round") == 1))
            .to_series()
            .all()
        )
    # the budget check searched the largest T again at twice the epochs
    budget = rows.filter(pl.col("search_phase") == "budget")
    assert set(budget["T"]) == {16} and set(budget["max_epochs"]) == {400}
    result = analyze_run(store, "r1")
    assert set(result.m_star["budget"]) <= {"ok", "budget-limited", "not checked"}
    assert result.m_star.filter(pl.col("T") == 16)["budget"][0] != "not checked"
    assert result.m_star.filter(pl.col("T") == 8)["budget"][0] == "not checked"
    assert result.m_star["max_epochs"].to_list() == [200, 200]  # budget rows stay out of m*


@pytest.mark.slow
def test_the_budget_check_reuses_trials_that_stopped_before_the_cap_and_retrains_the_rest(tmp_path):
    # 30 epochs: some trials fit their training set before the cap (their run with 60 epochs
    # would be the same), others run out and must be trained again with 60.
    spec, store, rows = _run(tmp_path, SPEC.replace("max_epochs: 200", "max_epochs: 30"))
    search = {r["trial_id"]: r for r in rows.filter(pl.col("search_phase") == "search").iter_rows(named=True)}
    budget = rows.filter(pl.col("search_phase") == "budget")
    assert set(budget["max_epochs"]) == {60} and budget["trial_id"].n_unique() == budget.height
    reused = budget.filter(pl.col("reused_from").is_not_null())
    assert reused.height > 0
    for row in budget.iter_rows(named=True):
        twin_config = {k: row[k] for k in ("T", "m", "seed")}
        twin = next((r for r in search.values() if all(r[k] == v for k, v in twin_config.items())), None)
        if row["reused_from"] is not None:  # the twin stopped on its own: same result, nothing trained
            assert twin is not None and row["reused_from"] == twin["trial_id"]
            assert (twin["status"] in ("done", "diverged") and twin["epochs"] < 30) or twin["status"] == "failed"
            for k in ("status", "test_acc", "train_acc", "epochs", "converged", "support"):
                assert row[k] == twin[k], k
            assert row["wall_s"] == 0.0 and row["attempts"] == 0
        else:  # trained again: its twin ran out of epochs (or the search never tried that m)
            assert twin is None or (twin["status"] in ("done", "diverged") and twin["epochs"] == 30), twin
            assert row["attempts"] == 1 and (row["epochs"] is None or row["epochs"] <= 60)
    assert search and all(r["reused_from"] is None for r in search.values())


def test_the_choice_needs_the_best_set_to_beat_the_default_on_most_seed_resamples():
    default = np.full(8, 0.6)
    # better on every seed: every resample has it above the default
    c = robust_choice(np.array([np.full(8, 0.7), np.full(8, 0.65)]), default, 0.9, n_boot=2000)
    assert (c.best, c.win_frac, c.beats_default, c.adopted) == (0, 1.0, 1.0, True)
    # equal on every seed: a tie in every resample counts one half, and ties go to the default
    c = robust_choice(np.array([default.copy()]), default, 0.9, n_boot=2000)
    assert (c.beats_default, c.win_frac, c.adopted) == (0.5, 0.0, False)
    # better on one seed of eight: a resample ties when it misses that seed, with probability
    # (7/8)^8 = 0.344, so it beats the default in 1 - 0.344 / 2 = 0.828 of them: not adopted
    one = default.copy()
    one[3] = 1.0
    c = robust_choice(np.array([one]), default, 0.9, n_boot=20000)
    assert abs(c.beats_default - (1 - (7 / 8) ** 8 / 2)) < 0.01 and not c.adopted
    assert robust_choice(np.array([one]), default, 0.8, n_boot=20000).adopted
    with pytest.raises(ValueError, match="seeds"):
        robust_choice(np.ones((2, 3)), np.ones(4), 0.9)


def test_probe_is_where_the_spec_settings_just_fail():
    assert probe_m({8: 0.0, 20: 0.25, 51: 0.75, 128: 1.0}, 0.5, 128) == 20
    assert probe_m({8: 0.0, 128: 0.25}, 0.5, 128) == 128  # m* above the range
    assert probe_m({8: 0.5, 128: 1.0}, 0.5, 128) is None  # m* at the range's start: nothing to gain


@pytest.mark.slow
def test_tuning_runs_after_the_default_search_and_a_robustly_better_set_is_searched_again(tmp_path):
    # lr 3e-4 cannot fit in 200 epochs where lr >= 3e-3 does: the tuned set must win, and the
    # search with it must find a lower m*.
    text = (
        SPEC.replace("lr: 1e-2", "lr: 3e-4")
        + "  tune: {n_trials: 3, batch: 3, seeds: 4, lr: {min: 3e-3, max: 3e-2}, weight_decay: null}\n"
        "  budget_check: false\n"
    )
    spec, store, rows = _run(tmp_path, text)
    folder = study_dir(store, spec.name, "r1")
    assert len(sorted(folder.glob("*.journal"))) == 2  # one per cell
    ok = (pl.col("status") == "done") & (pl.col("test_acc") >= 0.95)
    for T in (8, 16):
        cell = {**spec.fixed, "T": T}
        search = rows.filter((pl.col("search_phase") == "search") & (pl.col("T") == T))
        assert set(search["lr"]) == {3e-4}
        rates = dict(search.group_by("m").agg(ok.mean()).iter_rows())
        reached = min(m for m, r in rates.items() if r >= 0.5) if any(r >= 0.5 for r in rates.values()) else None
        probe = 128 if reached is None else max(m for m in rates if m < reached)
        tune = rows.filter((pl.col("search_phase") == "tune") & (pl.col("T") == T))
        assert set(tune["m"]) == {probe} and tune.height == 3 * 4
        storage = optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(folder / f"{cell_key(cell)}.journal"))
        )
        study = optuna.load_study(study_name=cell_key(cell), storage=storage)
        assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3
        for t in study.trials:  # the mean test accuracy of its four trials (0.5 if one did not train)
            part = tune.filter(pl.col("lr") == t.params["lr"])
            accs = [r["test_acc"] if r["status"] == "done" else 0.5 for r in part.iter_rows(named=True)]
            assert part.height == 4 and math.isclose(t.value, sum(accs) / 4)
        tuned = rows.filter((pl.col("search_phase") == "tuned") & (pl.col("T") == T))
        assert set(tuned["lr"]) == {study.best_trial.params["lr"]}
    result = analyze_run(store, "r1")
    table = result.m_star
    assert set(table["settings"]) == {"tuned"} and set(table["tuning"]) == {"tuned"}
    assert (table["m_star_tuned"] < table["m_star_default"]).all()
    for row in table.iter_rows(named=True):
        # m* counts the tuned search's m values, each with every seed, and the adopted set's own
        # tuning trials at the probe m (the same rule in every tuned cell); the sets not adopted stay out.
        tuned = rows.filter((pl.col("search_phase") == "tuned") & (pl.col("T") == row["T"]))
        adopted = rows.filter(
            (pl.col("search_phase") == "tune") & (pl.col("T") == row["T"]) & (pl.col("lr") == row["lr"])
        )
        assert adopted.height == 4
        assert row["n_trials"] == tuned.height + adopted.height == 4 * tuned["m"].n_unique() + 4
        assert row["n_seeds"] == 4
    assert result.m_star["series"].n_unique() == 1  # tuned values do not split the series
    assert result.tuning.height == 2 and result.tuning["adopted"].all()
    assert result.tuning["probe_m"].to_list() == [
        rows.filter((pl.col("search_phase") == "tune") & (pl.col("T") == T))["m"][0] for T in (8, 16)
    ]
    check = next(c for c in result.checks if c["check"] == "tuning did not make m* worse")
    assert check["verdict"] == "yes"
    # the growth laws of the spec's settings alone are given beside (a series needs 3 values of T: none here)
    assert not [c for c in result.checks if c["check"].startswith("growth law with the spec's settings")]


@pytest.mark.slow
def test_a_symmetry_search_uses_the_test_error(tmp_path):
    text = (
        "name: sym-adaptive\nexperiment: symmetry\nseeds: 2\ngrid: {teacher: [equivariant]}\n"
        "fixed: {n: 3, k: 2, d: 4, equivariance: orthogonal, max_epochs: 200, lr: 1e-2, n_q: 2, n_test: 64}\n"
        "search: {mode: adaptive, m: {min: 2, max: 32}, rel_tol: 0.5, budget_check: false}\n"
        "analysis: {target_error: 0.05, n_boot: 50}\n"
    )
    spec, store, rows = _run(tmp_path, text)
    assert set(rows["search_phase"]) == {"search"}  # budget_check: false
    rates = (
        rows.with_columns(ok=(pl.col("status") == "done") & (pl.col("test_error") <= 0.05))
        .group_by("m")
        .agg(pl.col("ok").mean())
        .sort("m")
    )
    ms, ok = rates["m"].to_list(), rates["ok"].to_list()
    assert ms[0] == 2 and ms[-1] == 32
    reached = [m for m, r in zip(ms, ok, strict=True) if r >= 0.5]
    if reached and reached[0] > 2:
        hi = reached[0]
        lo = max(m for m in ms if m < hi)
        assert hi / lo <= 1.5 or hi - lo <= 1, (ms, ok)


@pytest.mark.slow
def test_a_search_out_of_rounds_says_which_cells_are_not_pinned(tmp_path):
    spec = parse_spec(SPEC.replace("rel_tol: 0.25", "rel_tol: 0.01\n  max_rounds: 1\n  budget_check: false"))
    out = io.StringIO()
    run_sweep(
        spec,
        ResultsStore(tmp_path),
        LocalExecutor(spec.execution),
        run_id="r1",
        console=Console(file=out, width=300),
    )
    rows = ResultsStore(tmp_path).scan_run_trials(spec.name, "r1").collect()
    assert rows["search_round"].max() == 1  # round 0 and one bisection round
    assert "left untried after search.max_rounds = 1" in out.getvalue()


# --- smallest m first (issue 26) ----------------------------------------------------------------------------


def test_smallest_first_tries_the_start_alone_and_settles_a_cell_that_succeeds_there():
    assert next_points({}, 8, 256, 0.5, 0.1, 4, 1, smallest_first=True) == [8]
    assert next_points({8: 0.5}, 8, 256, 0.5, 0.1, 4, 1, smallest_first=True) == []  # m* <= 8: settled
    assert next_points({8: 0.25}, 8, 256, 0.5, 0.1, 4, 1, smallest_first=True) == [
        25,
        81,
        256,
    ]  # the other first points
    # then bisection as before
    assert next_points({8: 0.0, 25: 0.0, 81: 1.0, 256: 1.0}, 8, 256, 0.5, 0.1, 4, 1, smallest_first=True) == [45]


def test_smallest_first_leaves_the_hash_of_specs_recorded_before_it():
    spec = parse_spec(SPEC)
    assert spec.spec_hash() == parse_spec(SPEC + "  smallest_first: false\n").spec_hash()
    assert spec.spec_hash() != parse_spec(SPEC + "  smallest_first: true\n").spec_hash()


SYMMETRY = (
    "name: sym-first\nexperiment: symmetry\nseeds: 2\n"
    "grid: {equivariance: [orthogonal, none]}\n"
    "fixed: {teacher: equivariant, n: 3, k: 2, d: 4, max_epochs: 150, lr: 1e-2, n_q: 2, n_test: 64}\n"
    "search: {mode: adaptive, m: {min: 2, max: 32}, rel_tol: 0.5}\n"
    "analysis: {target_error: 0.05, n_boot: 50}\n"
)


@pytest.mark.slow
def test_smallest_first_spends_nothing_past_a_cell_settled_at_the_start_and_finds_the_same_m_star(
    tmp_path,
):
    _, store_a, plain = _run(tmp_path / "plain", SYMMETRY)
    first_text = SYMMETRY.replace("rel_tol: 0.5}", "rel_tol: 0.5, smallest_first: true}")
    spec, store_b, first = _run(tmp_path / "first", first_text)
    # The inner-product student fits the equivariant teacher from the smallest m: one m, two seeds.
    inner = first.filter((pl.col("equivariance") == "orthogonal") & (pl.col("search_phase") == "search"))
    assert inner["m"].unique().to_list() == [2] and inner.height == 2
    assert plain.filter(pl.col("equivariance") == "orthogonal")["m"].n_unique() > 1
    assert first.height < plain.height
    # Where both decide, the same m*: the trials they share are the same trials (same ids, same rows).
    from attnsweep.analysis.boolean import settings_of
    from attnsweep.analysis.symmetry import analyze_symmetry_run

    a = analyze_symmetry_run(store_a, "sym-first", "r1", settings_of(store_a, "sym-first", "r1"), None).m_star
    b = analyze_symmetry_run(store_b, "sym-first", "r1", settings_of(store_b, "sym-first", "r1"), None).m_star
    both = a.join(b, on=["teacher", "student", "n", "k", "d"], suffix="_first")
    assert both.height == 2  # a bound at the start (inner product), a bound beyond the range (transformer)
    assert (both["m_star"] == both["m_star_first"]).all() and (both["bound"] == both["bound_first"]).all()
    # A resume replays the same choices from the stored rows: nothing left to run.
    run_sweep(
        spec,
        store_b,
        LocalExecutor(spec.execution),
        run_id="r1",
        resume=True,
        console=Console(file=io.StringIO()),
    )
    assert store_b.scan_run_trials(spec.name, "r1").collect().height == first.height


# --- the symmetry budget check (issue 26) -----------------------------------------------------------------


def test_deciding_points_are_the_bracket_or_the_largest_m_tried():
    assert deciding_points({2: 0.0, 8: 0.0, 32: 1.0}, 0.5) == [8, 32]
    assert deciding_points({2: 1.0, 8: 1.0}, 0.5) == [2]  # settled at the start: only the m that decides it
    assert deciding_points({2: 0.0, 8: 0.0, 32: 0.0}, 0.5) == [32]  # beyond the range: the largest m tried
    assert deciding_points({2: 0.0, 8: 0.5, 16: 0.0, 32: 1.0}, 0.5) == [
        2,
        8,
    ]  # the first m to reach it decides


@pytest.mark.slow
def test_a_symmetry_search_checks_each_cells_deciding_m_at_twice_the_epochs(tmp_path):
    spec, store, rows = _run(tmp_path, SYMMETRY)
    search = rows.filter(pl.col("search_phase") == "search")
    budget = rows.filter(pl.col("search_phase") == "budget")
    assert set(budget["max_epochs"]) == {300} and set(search["max_epochs"]) == {150}
    for (eq,), cell in search.group_by(["equivariance"]):
        ok = (pl.col("status") == "done") & (pl.col("test_error") <= 0.05)
        rates = cell.group_by("m").agg(ok.mean().alias("rate")).sort("m")
        ms, rate = rates["m"].to_list(), rates["rate"].to_list()
        reached = [m for m, r in zip(ms, rate, strict=True) if r >= 0.5]
        expected = (
            ([max(m for m in ms if m < reached[0])] if any(m < reached[0] for m in ms) else []) + reached[:1]
            if reached
            else [max(ms)]
        )
        checked = budget.filter(pl.col("equivariance") == eq)
        assert sorted(checked["m"].unique()) == expected, eq
        assert checked.height == len(expected) * 2  # every seed
        # A twin that fit its training set before its epochs ran out is reused, not trained again.
        twins = cell.filter(pl.col("m").is_in(expected))
        stopped = twins.filter(pl.col("epochs") < 150).height
        assert checked["reused_from"].is_not_null().sum() == stopped


def test_a_tuning_trial_left_without_some_parameters_by_a_crash_gets_them_once(tmp_path):
    # The journal holds "new trial" and one parameter: the crash came between them. The trial
    # is given the missing one (a draw fixed by study and number), the same on every read.
    from attnsweep.orchestrator.adaptive import _asked

    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.journal")))
    study = optuna.create_study(study_name="abcdef0123", storage=storage)
    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 3e-2, log=True),
        "weight_decay": optuna.distributions.FloatDistribution(1e-6, 1e-1, log=True),
    }
    tid = storage.create_new_trial(study._study_id)
    storage.set_trial_param(tid, "weight_decay", dists["weight_decay"].to_internal_repr(1e-3), dists["weight_decay"])
    first = _asked(optuna.load_study(study_name="abcdef0123", storage=storage), range(0, 2), dists)
    number, params, told = first[0]
    assert number == 0 and not told and params["weight_decay"] == 1e-3 and 1e-4 <= params["lr"] <= 3e-2
    assert _asked(optuna.load_study(study_name="abcdef0123", storage=storage), range(0, 2), dists) == first


def test_a_study_lock_left_by_a_killed_driver_does_not_stop_the_resume(tmp_path):
    # A driver killed while it held a journal's lock, before the journal's first write, leaves
    # a symlink lock pointing at no file; Optuna's acquire spun on it forever (a CI resume hung).
    import threading

    from attnsweep.orchestrator import adaptive

    spec = parse_spec(
        "name: t\nseeds: 1\ngrid: {T: [8]}\nfixed: {task: and, s: 2, d: 8, heads: 2}\n"
        "search: {mode: adaptive, m: {min: 8, max: 64}, tune: {n_trials: 2, batch: 1, seeds: 1,"
        " lr: {min: 1.0e-3, max: 1.0e-2}}}\n"
    )
    cell = {"T": 8, "task": "and"}
    journal = tmp_path / f"{cell_key(cell)}.journal"
    (tmp_path / f"{journal.name}.lock").symlink_to(journal)  # dangling: the journal was never written
    made = {}
    worker = threading.Thread(
        target=lambda: made.update(study=adaptive._study(tmp_path, cell, spec.search.tune)),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "creating the study hung on the stale lock"
    assert made["study"].study_name == cell_key(cell) and journal.is_file()
    assert not (tmp_path / f"{journal.name}.lock").exists()  # released after the write


@pytest.mark.parametrize(
    "line",
    [
        '{"op_code": 0, "worker_id": "x", "study_name": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"op_code": 99, "worker_id": 5}',
    ],
)
def test_a_damaged_tuning_journal_is_one_error_naming_it(tmp_path, line):
    # The journals travel with store export: a line Optuna cannot replay ended resume in a
    # RecursionError or AssertionError traceback (a hostile pass).
    from types import SimpleNamespace

    from attnsweep.orchestrator.adaptive import _study, cell_key
    from attnsweep.orchestrator.errors import AttnsweepError

    cell = {"T": 8, "model": "transformer"}
    journal = tmp_path / f"{cell_key(cell)}.journal"
    journal.write_text(line + "\n")
    with pytest.raises(AttnsweepError) as caught:
        _study(tmp_path, cell, SimpleNamespace(batch=1, n_trials=2))
    said = str(caught.value)
    assert said.startswith(f"{journal}: the adaptive search's Optuna journal of this cell cannot be read (")
    assert said.endswith("the run cannot resume this cell's tuning from it") and "\n" not in said
