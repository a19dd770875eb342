"""A finished sparse-Boolean run with learning curves written to a real store the way the driver
writes it (results/writer.py's TrialWriter: each row carries its curve, which the writer splits
into the ``curves`` table), without training: for tests of what reads curves."""

from __future__ import annotations

import datetime as dt

from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore
from attnsweep.results.curves_table import CURVE_KEY
from attnsweep.results.writer import TrialWriter
from attnsweep.workers import BooleanTrialConfig

START = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def write_run(store: ResultsStore, sweep: str, run_id: str, rows: list[dict], flush_rows: int = 100) -> None:
    """Write ``rows`` (a row may hold its curve under ``curve``: columns ``epoch``,
    ``train_loss``, ``train_acc``, ``train_error``) in part files of ``flush_rows`` rows, and
    the run's finished record."""
    writer = TrialWriter(store, sweep, run_id, trial_schema(), flush_rows=flush_rows, flush_s=1e9)
    for start in range(0, len(rows), flush_rows):
        writer.append([dict(r) for r in rows[start : start + flush_rows]])
    writer.flush()
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
        spec_name=sweep,
        spec_hash="0" * 16,
        spec_yaml=f"name: {sweep}\nanalysis:\n  n_boot: 50\n",
        executor="actors",
        host="test",
        code_version="test",
        packages="{}",
        experiment="sparse_boolean",
        trial_fields=",".join(BooleanTrialConfig.model_fields),
        cell_counts=None,
        attempts=[],
    )
    store.write_run(sweep, run_id, record, run_schema())


def with_curve(row: dict, epochs: list[int], acc: list[float | None]) -> dict:
    """``row`` holding a curve of these epochs and training accuracies (loss ``1 - acc``)."""
    loss = [None if a is None else 1.0 - a for a in acc]
    return {**row, CURVE_KEY: {"epoch": epochs, "train_loss": loss, "train_acc": acc, "train_error": None}}
