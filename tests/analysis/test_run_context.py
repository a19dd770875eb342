"""A run's record and settings read once (analysis/context.py): a stored spec without an
``analysis`` section gets the defaults, one with an invalid section is an error naming the run
and the field (exit code 2 at the CLI), never a silent fall back to the defaults."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
import yaml
from boolean_rows import boolean_row
from typer.testing import CliRunner

from attnsweep.analysis.boolean import analyze_run, run_caveats, settings_of, tuned_fields
from attnsweep.analysis.context import RunContext
from attnsweep.api_store import Store
from attnsweep.cli import app
from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec import AnalysisSettings
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore, StoreError

START = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _store(tmp_path, spec_yaml: str | None, run_id: str = "r1", experiment: str = "sparse_boolean") -> ResultsStore:
    """A store holding one finished sparse-Boolean run (m* between 16 and 32 at T=16) whose
    record keeps ``spec_yaml`` as its stored spec, written as the driver writes them."""
    store = ResultsStore(tmp_path / "store")
    rows = [boolean_row(16, m, seed, m >= 32) for m in (8, 16, 32, 64) for seed in range(3)]
    schema = trial_schema()
    store.write_trials(
        "sw", run_id, pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    )
    record = dict(
        status="finished",
        started_at=START,
        ended_at=START + dt.timedelta(minutes=5),
        wall_s=300.0,
        n_trials=len(rows),
        n_done=len(rows),
        n_failed=0,
        n_diverged=0,
        n_lost=0,
        spec_name="sw",
        spec_hash="0" * 16,
        spec_yaml=spec_yaml,
        executor="actors",
        host="test",
        code_version="test",
        packages="{}",
        experiment=experiment,
        trial_fields=None,
        cell_counts=None,
        attempts=[],
    )
    store.write_run("sw", run_id, record, run_schema())
    return store


@pytest.mark.parametrize("spec_yaml", [None, "", "name: sw\n", "name: sw\nanalysis:\n"])
def test_a_record_without_an_analysis_section_gets_the_default_settings(tmp_path, spec_yaml):
    store = _store(tmp_path, spec_yaml)
    ctx = RunContext.load(store, "sw", "r1")
    assert ctx.settings == AnalysisSettings()
    assert not ctx.search.adaptive and ctx.tuned == set()
    assert settings_of(store, "sw", "r1") == AnalysisSettings()
    assert analyze_run(store, "r1", settings=AnalysisSettings(n_boot=0)).m_star.height == 1


def test_the_context_holds_the_record_and_the_settings_of_the_stored_spec(tmp_path):
    store = _store(tmp_path, yaml.safe_dump(dict(name="sw", analysis=dict(n_boot=0, acc_threshold=0.9))))
    ctx = RunContext.load(store, "sw", "r1")
    assert (ctx.sweep, ctx.run_id, ctx.record["status"], ctx.experiment) == ("sw", "r1", "finished", "sparse_boolean")
    assert ctx.spec["name"] == "sw" and ctx.settings == AnalysisSettings(n_boot=0, acc_threshold=0.9)
    # Passed down, it gives what each function finds by reading the record itself.
    assert run_caveats(store, "sw", "r1", ctx) == run_caveats(store, "sw", "r1") == []
    by_context = analyze_run(store, context=ctx).m_star
    assert by_context.equals(analyze_run(store, "r1").m_star)
    assert by_context["m_star"].to_list() != [None]


@pytest.mark.parametrize(
    "section, field",
    [
        ("analysis: {n_boot: -3}", "analysis.n_boot"),
        ("analysis: {acc_treshold: 0.9}", "analysis.acc_treshold"),
        ("analysis: [0.9]", "analysis"),
        ("search: {mode: fast}", "search.mode"),
    ],
)
def test_an_invalid_settings_section_is_an_error_naming_the_run_and_the_field(tmp_path, section, field):
    store = _store(tmp_path, f"name: sw\n{section}\n", run_id="r-bad")
    for read in (
        lambda: RunContext.load(store, "sw", "r-bad"),
        lambda: settings_of(store, "sw", "r-bad"),
        lambda: tuned_fields(store, "sw", "r-bad"),
        lambda: analyze_run(store, "r-bad"),
        lambda: run_caveats(store, "sw", "r-bad"),
        lambda: Store(store.root).analyze("r-bad", figures=tmp_path / "fig"),
    ):
        with pytest.raises(SpecError) as caught:
            read()
        assert "run r-bad" in str(caught.value) and f"- {field}" in str(caught.value)


def test_a_stored_spec_that_is_not_yaml_is_an_error_naming_the_run(tmp_path):
    store = _store(tmp_path, "name: sw\n  bad: : :\n", run_id="r-bad")
    # the run record's reader refuses it before any analysis: the file names the sweep and the run
    with pytest.raises(StoreError, match=r"sweep=sw/run_id=r-bad/run\.parquet: spec_yaml is not YAML"):
        RunContext.load(store, "sw", "r-bad")


def test_analyze_exits_with_code_2_and_names_the_field(tmp_path):
    store = _store(tmp_path, "name: sw\nanalysis: {ci: 7}\n", run_id="r-bad")
    result = CliRunner().invoke(app, ["analyze", "r-bad", "--store", str(store.root), "--figures", str(tmp_path / "f")])
    assert result.exit_code == 2
    assert "run r-bad" in result.output and "analysis.ci" in result.output


def test_a_record_of_an_experiment_no_analysis_knows_is_an_error_naming_the_run_and_the_field(tmp_path):
    store = _store(tmp_path, "name: sw\n", run_id="r-odd", experiment="parity_games")
    with pytest.raises(SpecError) as caught:
        RunContext.load(store, "sw", "r-odd")
    said = str(caught.value)
    assert "run r-odd" in said and "experiment" in said and "'parity_games'" in said
    assert "['sparse_boolean', 'symmetry']" in said
    result = CliRunner().invoke(app, ["analyze", "r-odd", "--store", str(store.root)])
    assert result.exit_code == 2 and "'parity_games'" in result.output and "Traceback" not in result.output


def test_a_model_none_of_whose_trials_trained_is_named_with_the_query_that_shows_why(tmp_path):
    import polars as pl

    store = ResultsStore(tmp_path / "store")
    ok = [boolean_row(16, m, seed, m >= 32) for m in (8, 16, 32, 64) for seed in range(3)]
    dead = [
        {**boolean_row(16, m, seed, False), "model": "mine", "trial_id": f"dead-{m}-{seed}", "status": "failed"}
        | {"test_acc": None, "error": "entry point 'mine' does not load"}
        for m in (8, 16)
        for seed in range(2)
    ]
    schema = trial_schema()
    store.write_trials(
        "sw", "r1", pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in ok + dead], schema=schema)
    )
    base = _store(tmp_path / "other", None)  # its record, written as the driver writes one
    record = base.read_run("sw", "r1")
    store.write_run("sw", "r1", {f.name: record.get(f.name) for f in run_schema()}, run_schema())
    notes = run_caveats(store, "sw", "r1")
    said = [n for n in notes if n.startswith("every trial of")]
    assert said == [
        "every trial of model=mine (4 trials) failed or was lost: no m* and no claim reads it; their error column "
        "says why: attnsweep query \"SELECT model, status, error FROM trials WHERE run_id = 'r1' AND status IN "
        "('failed', 'lost')\""
    ], notes
    # The query it gives lists exactly those trials.
    from attnsweep.results.query import run_query

    rows = run_query(
        store, "SELECT model, status, error FROM trials WHERE run_id = 'r1' AND status IN ('failed', 'lost')"
    )
    assert isinstance(rows, pl.DataFrame) and rows.height == 4 and set(rows["model"]) == {"mine"}
    assert run_caveats(_store(tmp_path / "fine", None), "sw", "r1") == []
