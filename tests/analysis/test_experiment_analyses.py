"""The analysis registry (analysis/experiments.py) and the training registry
(workers/experiments.py) name the same experiments, and what a report does with a run's
paper claims follows its entry: pooled over runs (sparse Boolean) or judged per run (symmetry)."""

from __future__ import annotations

import pytest

from attnsweep.analysis.experiments import ANALYSES, SECTIONS, analysis_of, analysis_of_record
from attnsweep.orchestrator.errors import SpecError
from attnsweep.presentation.verdict_table import EXPERIMENTS as TABLE_ROWS
from attnsweep.presentation.verdict_table import ROW_START
from attnsweep.stats.symmetry import CELL as SYMMETRY_CELL
from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.experiments import EXPERIMENTS


def test_every_experiment_that_trains_has_an_analysis():
    assert set(ANALYSES) == set(EXPERIMENTS)
    assert all(analysis_of(name).name == name for name in EXPERIMENTS)


def test_how_each_experiment_is_judged():
    boolean, symmetry = analysis_of("sparse_boolean"), analysis_of("symmetry")
    assert (boolean.pooled, symmetry.pooled) == (True, False)
    # A sparse-Boolean cell is every trial setting but m, seed and fault, and the learner; a
    # symmetry cell is stats/symmetry.py's CELL.
    assert boolean.cell() == [f for f in BooleanTrialConfig.model_fields if f not in ("m", "seed", "fault")] + [
        "learner"
    ]
    assert symmetry.cell() == SYMMETRY_CELL
    # Each section has its README row, in the table's order.
    assert TABLE_ROWS == SECTIONS == (boolean.section, symmetry.section) and set(ROW_START) == set(SECTIONS)


def test_a_record_is_read_as_its_experiment_and_an_old_one_as_sparse_boolean():
    assert analysis_of_record({"experiment": "symmetry"}).name == "symmetry"
    assert analysis_of_record({}).name == analysis_of_record({"experiment": None}).name == "sparse_boolean"
    with pytest.raises(
        SpecError, match=r"(?s)run r9 .*experiment: value 'maze'.*allowed: \['sparse_boolean', 'symmetry'\]"
    ):
        analysis_of_record({"experiment": "maze", "run_id": "r9"})
    with pytest.raises(ValueError, match="experiment must be one of"):
        analysis_of("maze")
