"""One growth-law rule in every output, bounds kept out of the exported ``m_star`` column, no
fit on an interval open above, and a tuned setting at the edge of its search range named
(analysis/boolean.py, analysis/tuning.py, presentation/terminal.py, the CSV and JSON exports).
Constructed m* tables, and small stores of trial rows written without training."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from boolean_rows import boolean_row
from typer.testing import CliRunner

from attnsweep.analysis.boolean import _checks, _fits, analyze_run, m_star_table
from attnsweep.analysis.exports import export_m_star
from attnsweep.analysis.tuning import EDGE_FRACTION, range_edge, with_range_binds
from attnsweep.cli import app
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore
from attnsweep.stats.boolean_wording import law_reading
from attnsweep.stats.fits import MIN_LAW_POINTS, compare_growth, robust_law

START = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)
GRID = (8, 16, 32, 64, 128, 256, 512)


def _store(tmp_path, first: dict[int, int | None], seeds: int = 8) -> ResultsStore:
    """One finished run ``r1`` of sweep ``sw``: at each T every seed succeeds from m =
    ``first[T]`` on and fails below it (None: at no m of :data:`GRID`, so m* > 512)."""
    store = ResultsStore(tmp_path / "store")
    rows = [
        boolean_row(T, m, seed, f is not None and m >= f)
        for T, f in first.items()
        for m in GRID
        for seed in range(seeds)
    ]
    schema = trial_schema()
    store.write_trials(
        "sw", "r1", pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    )
    record = dict(
        status="finished",
        started_at=START,
        ended_at=START + dt.timedelta(minutes=5),
        n_trials=len(rows),
        n_done=len(rows),
        spec_name="sw",
        spec_hash="0" * 16,
        spec_yaml="name: sw\nanalysis: {n_boot: 200}\n",
        experiment="sparse_boolean",
        attempts=[],
    )
    store.write_run("sw", "r1", {f.name: record.get(f.name) for f in run_schema()}, run_schema())
    return store


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def _cell(T: int, m_star: float, bound: str = "exact", ci_hi: float | None = None, **more) -> dict:
    """A cell of an m* table as stats/critical.py writes it (one series, ``all``)."""
    return dict(
        task="and",
        model="transformer",
        T=T,
        m_star=m_star,
        ci_lo=m_star * 0.9,
        ci_hi=m_star * 1.1 if ci_hi is None else ci_hi,
        bound=bound,
        censored="above" if bound == "lower" else "",
        flags="",
        series="all",
        **more,
    )


# --- one law rule: no law named from fewer than MIN_LAW_POINTS exact cells ------------------


def test_a_run_with_three_values_of_T_names_no_law_in_the_cli_or_the_api(tmp_path):
    store = _store(tmp_path, {8: 16, 16: 32, 32: 64})
    out = " ".join(_cli("analyze", "r1", "--store", str(store.root), "--figures", str(tmp_path / "f")).split())
    no_law = f"no law named (3 exact cells; a law needs {MIN_LAW_POINTS})"
    assert MIN_LAW_POINTS == 5 and no_law in out
    # The fits are still shown, but not ranked: no AIC column, no ΔAIC, no "ranked" title.
    assert "m* against T [all]: growth laws" in out and "ranked" not in out and "ΔAIC" not in out
    assert "best law" not in out
    result = analyze_run(store, "r1")
    assert result.laws["all"]["law"] == "too few cells"
    assert set(result.fit_table()["named_law"]) == {no_law}
    grows = next(c for c in result.checks if c["check"].startswith("m* grows with T"))
    assert f"slope b = 24.6 (CI 24.6 .. 24.6); {no_law};" in grows["detail"] and "best law" not in grows["detail"]


def test_from_five_exact_cells_the_checks_name_the_reports_law_not_the_lowest_aic():
    # Noisy power-law cells: find one draw whose robust reading (stats/fits.py) is "undecided",
    # though the AIC ranking, as always, has a lowest law.
    T = np.array([8.0, 32.0, 128.0, 512.0, 2048.0])
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = 20 * T**0.3 * np.exp(rng.normal(0, 0.15, T.size))
        robust = robust_law(T, m, ("linear", "power"), 2.0)
        if robust["law"] == "undecided":
            break
    else:
        pytest.fail("no draw with an undecided law")
    table = pl.DataFrame([_cell(int(t), float(v)) for t, v in zip(T, m, strict=True)])
    fit = compare_growth(T, m)  # no replicates: no polylog interval, so the rivals are linear and power
    (check,) = _checks(table, {"all": fit})
    assert f"); {law_reading(robust)} (the best law by AICc changes with the variant: " in check["detail"]
    assert "law undecided" in check["detail"] and "best law by AIC:" not in check["detail"]
    # A law every variant names is named as the report names it.
    exact = 10 + 2 * T
    (check,) = _checks(
        pl.DataFrame([_cell(int(t), float(v)) for t, v in zip(T, exact, strict=True)]),
        {"all": compare_growth(T, exact)},
    )
    assert "growth law named: linear (lowest AICc in all 12 variants" in check["detail"]
    # As the report keeps it (stats/boolean_wording.py, agreed): a law stands only where every
    # estimator of m* names it; here the grid m* follows an exact power law.
    cells = [_cell(int(t), float(v), m_star_grid=float(20 * t**0.3)) for t, v in zip(T, exact, strict=True)]
    (check,) = _checks(pl.DataFrame(cells), {"all": compare_growth(T, exact)})
    assert (
        "law undecided (the estimators of m* disagree (logistic: linear, grid: power, interpolated: linear)"
        in (check["detail"])
    )
    assert "growth law named" not in check["detail"]


# --- no fit uses a cell whose interval is open above --------------------------------------


def test_a_cell_with_an_infinite_upper_end_is_not_fitted():
    cells = [_cell(8, 20.0), _cell(16, 24.0), _cell(32, 28.0), _cell(64, 30.0, ci_hi=math.inf)]
    fits = _fits(pl.DataFrame(cells), {}, ["task", "model", "T"], 0.95)
    assert fits["all"]["n_points"].to_list() == [3] * 4  # T = 64 left out though its bound reads exact
    assert _fits(pl.DataFrame(cells[1:]), {}, ["task", "model", "T"], 0.95) == {}  # two cells left: no fit


# --- exports: a bound is never a value in m_star ---------------------------------------------


def test_a_lower_bound_is_exported_with_an_empty_m_star_and_its_value_in_m_star_bound():
    table = pl.DataFrame(
        [
            dict(_cell(8, 40.0), replicates=[39.0, 41.0], replicates_grid=[40.0], replicates_interp=[40.0]),
            dict(_cell(16, 512.0, "lower", math.inf), replicates=None, replicates_grid=None, replicates_interp=None),
        ]
    )
    out = export_m_star(table)
    assert not {"replicates", "replicates_grid", "replicates_interp"} & set(out.columns)
    assert out.columns.index("m_star_bound") == out.columns.index("m_star") + 1
    rows = list(csv.DictReader(io.StringIO(out.write_csv())))
    assert [(r["m_star"], r["m_star_bound"], r["bound"]) for r in rows] == [
        ("40.0", "", "exact"),
        ("", "512.0", "lower"),
    ]
    cells = json.loads(out.write_json())
    assert [(c["m_star"], c["m_star_bound"]) for c in cells] == [(40.0, None), (None, 512.0)]
    assert table["m_star"].to_list() == [40.0, 512.0]  # the table in memory keeps the bound's value


def test_analyze_csv_json_and_the_reports_csv_leave_the_bound_out_of_m_star(tmp_path):
    from attnsweep.presentation.report import build_report

    store = _store(tmp_path, {8: 16, 16: 32, 32: None})  # T = 32: no m tried succeeds, m* > 512
    args = ("analyze", "r1", "--store", str(store.root), "--format")
    rows = {int(r["T"]): r for r in csv.DictReader(io.StringIO(_cli(*args, "csv")))}
    assert (rows[32]["m_star"], float(rows[32]["m_star_bound"]), rows[32]["bound"]) == ("", 512.0, "lower")
    assert rows[8]["m_star_bound"] == "" and 8 < float(rows[8]["m_star"]) <= 16 and rows[8]["bound"] == "exact"
    assert "replicates" not in rows[8]
    cells = {c["T"]: c for c in json.loads(_cli(*args, "json"))}
    assert (cells[32]["m_star"], cells[32]["m_star_bound"]) == (None, 512.0) and cells[8]["m_star_bound"] is None
    build_report(store, ["r1"], tmp_path / "rep")
    report = pl.read_csv(tmp_path / "rep" / "m_star.csv").sort("T")
    assert report["m_star"][2] is None and report["m_star_bound"].to_list() == [None, None, 512.0]
    assert "replicates" not in report.columns


# --- the tuned settings' search range --------------------------------------------------------


def test_an_adopted_lr_within_a_tenth_of_its_log_range_of_the_cap_is_named():
    # Range 1e-4 .. 1e-2: two decades on the log scale the search samples; a tenth is 0.2
    # decade, so the upper edge's zone starts at 10^-2.2 = 0.00631 and the lower one ends at
    # 10^-3.8 = 0.000158. 0.0095 sits at (log10 0.0095 + 4) / 2 = 0.989 of the range: at the
    # cap; 1e-3 at 0.5; 0.006 at 0.889 (inside); 1.5e-4 at 0.088 (at the floor).
    assert EDGE_FRACTION == 0.1
    assert range_edge(0.0095, 1e-4, 1e-2) == "upper" and range_edge(1e-3, 1e-4, 1e-2) is None
    assert range_edge(0.006, 1e-4, 1e-2) is None and range_edge(0.0065, 1e-4, 1e-2) == "upper"
    assert range_edge(1.5e-4, 1e-4, 1e-2) == "lower"
    table = pl.DataFrame(
        [
            _cell(8, 20.0, lr=0.0095, settings="tuned", tuning="tuned"),
            _cell(16, 24.0, lr=1e-3, settings="tuned", tuning="tuned"),
            _cell(32, 28.0, lr=0.0099, settings="default", tuning="spec kept"),  # not adopted: its m* is the spec's
        ]
    )
    out = with_range_binds(table, {"lr": (1e-4, 1e-2)})
    assert out["range_binds"].to_list() == ["lr (at the upper edge 0.01)", "", ""]
    check = next(c for c in _checks(out, {}, {"lr"}) if c["check"] == "the tuned settings' search range does not bind")
    assert check["verdict"] == "no" and "all, T=8: lr (at the upper edge 0.01)" in check["detail"]
    assert "in 1 of 2 cells with tuned settings" in check["detail"]
    inside = with_range_binds(table.filter(pl.col("T") != 8), {"lr": (1e-4, 1e-2)})
    check = next(c for c in _checks(inside, {}, {"lr"}) if c["check"].startswith("the tuned settings' search range"))
    assert check["verdict"] == "yes"
    untuned = with_range_binds(table.drop("settings"), {})
    assert untuned["range_binds"].to_list() == ["", "", ""]
    assert not [c for c in _checks(untuned, {}) if "search range" in c["check"]]


def test_range_binds_reaches_the_union_table_the_report_judges(tmp_path):
    from attnsweep.analysis.boolean import boolean_verdicts

    result = analyze_run(_store(tmp_path, {8: 16, 16: 32, 32: 64}), "r1")
    assert result.m_star["range_binds"].to_list() == ["", "", ""]  # an untuned run: nothing binds
    table = m_star_table(result)
    assert "range_binds" in table.columns
    union, _ = boolean_verdicts([table, table.drop("range_binds").with_columns(T=pl.col("T") * 64)], set())
    assert union.height == 6 and union["range_binds"].to_list() == [""] * 6


def test_a_cell_in_two_runs_keeps_the_first_runs_m_star_and_takes_the_margins_of_the_run_that_has_them(tmp_path):
    from attnsweep.analysis.boolean import boolean_verdicts

    table = m_star_table(analyze_run(_store(tmp_path, {8: 16, 16: 32, 32: 64}), "r1"))
    old = table.with_columns(margin_success=pl.lit(None, pl.Float64), margin_failure=pl.lit(None, pl.Float64))
    new = table.with_columns(
        m_star=pl.col("m_star") * 2, margin_success=pl.Series([0.3, 0.2, 0.1]), margin_failure=pl.lit(0.05)
    )
    union, _ = boolean_verdicts([old, new], set())
    assert union.height == 3
    assert union.sort("T")["m_star"].to_list() == table.sort("T")["m_star"].to_list()  # the first run's m*
    assert union.sort("T")["margin_success"].to_list() == [0.3, 0.2, 0.1]
    assert union["margin_failure"].to_list() == [0.05] * 3


def test_the_growth_check_reads_growth_as_l1_does_and_names_few_seeds(tmp_path):
    # A new user read "m* grows with T: yes" from 3 seeds a cell: the check now says how few.
    store = _store(tmp_path, {8: 32, 16: 32, 32: 64, 64: 64, 128: 128}, seeds=3)
    grows = next(c for c in analyze_run(store, "r1").checks if c["check"].startswith("m* grows with T"))
    assert grows["verdict"] == "yes", grows
    assert "; grows = above 0.05)" in grows["detail"]
    assert grows["detail"].endswith("; cells of 3 seeds (intervals from fewer than 8 are rough)"), grows
    flat = _store(tmp_path / "flat", {8: 32, 16: 32, 32: 32, 64: 32, 128: 32})
    check = next(c for c in analyze_run(flat, "r1").checks if c["check"].startswith("m* grows with T"))
    assert check["verdict"] != "yes" and "seeds (intervals" not in check["detail"], check
