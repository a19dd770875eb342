"""The m* table saved with a run (analysis/saved_m_star.py, results/derived.py): ``run`` saves
it, a later analysis reads it back equal to a fresh computation, and other rows, settings or
code find nothing and compute again."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from boolean_rows import boolean_row
from polars.testing import assert_frame_equal

from attnsweep.analysis import saved_m_star
from attnsweep.analysis.boolean import analyze_run
from attnsweep.orchestrator.spec import AnalysisSettings
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore
from attnsweep.results.derived import DERIVED

START = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _rows(T: int, seeds: range, rng: np.random.Generator) -> list[dict]:
    # success grows with m: m* near 24, with noise
    return [boolean_row(T, m, seed, rng.random() < min(1.0, m / 48)) for m in (8, 16, 32, 64, 128) for seed in seeds]


def _write(store: ResultsStore, rows: list[dict]) -> None:
    schema = trial_schema()
    store.write_trials(
        "sw", "r1", pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    )


@pytest.fixture()
def store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path / "store")
    rng = np.random.default_rng(0)
    _write(store, [r for T in (8, 16, 32) for r in _rows(T, range(6), rng)])
    record = dict(
        status="finished",
        started_at=START,
        ended_at=START + dt.timedelta(minutes=5),
        n_trials=90,
        n_done=90,
        spec_name="sw",
        spec_hash="0" * 16,
        spec_yaml="name: sw\nanalysis:\n  n_boot: 200\n",
        experiment="sparse_boolean",
        attempts=[],
    )
    store.write_run("sw", "r1", {f.name: record.get(f.name) for f in run_schema()}, run_schema())
    return store


def _counting(monkeypatch) -> list[int]:
    """How often the m* computation runs (the bootstrap the saved table spares)."""
    calls: list[int] = []
    real = saved_m_star.m_star_saved

    def counted(*args, **kwargs):
        compute = args[7]
        args = (*args[:7], lambda data, cols: calls.append(1) or compute(data, cols), *args[8:])
        return real(*args, **kwargs)

    monkeypatch.setattr("attnsweep.analysis.boolean.m_star_saved", counted)
    return calls


def _same(a, b) -> None:
    assert_frame_equal(a.m_star, b.m_star)
    assert a.replicates.keys() == b.replicates.keys()
    for key, reps in a.replicates.items():
        np.testing.assert_array_equal(reps, b.replicates[key])


def test_a_saved_table_is_read_back_equal_to_a_fresh_computation(store, monkeypatch):
    calls = _counting(monkeypatch)
    fresh = analyze_run(store, "r1")  # analyze before any save: computes, writes nothing
    assert len(calls) == 1 and not (store.root / DERIVED).exists()
    saved = analyze_run(store, "r1", save=True)  # what run does
    assert len(calls) == 2 and list((store.root / DERIVED).rglob("m_star-search.parquet"))
    again = analyze_run(store, "r1")  # analyze and report afterwards: read back
    assert len(calls) == 2
    _same(fresh, saved)
    _same(fresh, again)
    assert again.fits.keys() == fresh.fits.keys()
    for label, fit in fresh.fits.items():
        assert_frame_equal(fit, again.fits[label])


def test_other_rows_settings_or_code_compute_again(store, monkeypatch):
    calls = _counting(monkeypatch)
    analyze_run(store, "r1", save=True)
    analyze_run(store, "r1", settings=AnalysisSettings(n_boot=200, success_frac=0.6))
    assert len(calls) == 2  # other settings: not the saved table
    # A resume adds rows: the saved table is of other rows.
    _write(store, _rows(64, range(6), np.random.default_rng(1)))
    grown = analyze_run(store, "r1")
    assert len(calls) == 3 and 64 in grown.m_star["T"].to_list()
    # Other code: the key holds the source of stats/critical.py.
    analyze_run(store, "r1", save=True)
    calls.clear()
    monkeypatch.setattr(saved_m_star, "_key", lambda *a: "another code version")
    analyze_run(store, "r1")
    assert len(calls) == 1


def test_a_store_that_cannot_take_the_table_still_analyses(store, monkeypatch):
    """Saving is a convenience: where the file cannot be written (here derived/ is a file, which
    no user, root included, can make a folder in) the analysis goes on and computes each time."""
    calls = _counting(monkeypatch)
    (store.root / DERIVED).write_text("not a folder")
    first = analyze_run(store, "r1", save=True)
    second = analyze_run(store, "r1", save=True)
    assert len(calls) == 2
    _same(first, second)
