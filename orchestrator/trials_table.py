"""The columns of the ``trials`` table: every config field, typed, plus the measurements; and
the per-cell row counts a run record keeps at its end (:func:`cell_counts`).

One schema serves every experiment (the union of their config fields and results; a
column an experiment does not use is null), so every part file of every run has the same
columns and all readers see one table.
"""

from __future__ import annotations

import json
import types
import typing

import polars as pl
import pyarrow as pa

from attnsweep.workers import EXPERIMENTS
from attnsweep.workers.config import LATER_FIELDS

# Measurements a worker reports (workers/train_boolean.py) and what the driver adds.
RESULT_COLUMNS: dict[str, pa.DataType] = {
    "status": pa.string(),
    "error_type": pa.string(),
    "error": pa.string(),
    "support": pa.list_(pa.int64()),
    "redraws": pa.int64(),
    "train_acc": pa.float64(),
    "train_loss": pa.float64(),
    "test_acc": pa.float64(),
    "test_loss": pa.float64(),
    "epochs": pa.int64(),
    "converged": pa.bool_(),
    "diverged_epoch": pa.int64(),
    "norm_qk": pa.float64(),
    "norm_v": pa.float64(),
    "norm_hidden": pa.float64(),
    "norm_readout": pa.float64(),
    "input_norm": pa.float64(),  # B_X, the largest norm of a head's input (workers/margins.py)
    "margin": pa.float64(),  # min over the training set of y f(x), y = +-1
    "margin_normalised": pa.float64(),  # margin / the capacity bound's complexity term
    "train_error": pa.float64(),
    "test_error": pa.float64(),
    "eq_error_median": pa.float64(),
    "eq_error_max": pa.float64(),
    "eq_error32_median": pa.float64(),
    "eq_error32_max": pa.float64(),
    "perm_error_median": pa.float64(),
    "perm_error_max": pa.float64(),
    "wall_s": pa.float64(),
    "attempts": pa.int64(),
    "search_phase": pa.string(),  # adaptive search: tune, search or budget; null in a grid sweep
    "search_round": pa.int64(),  # adaptive search: the round (batch) of the run that ran the trial
    "reused_from": pa.string(),  # budget check: the trial id whose result this row repeats (not rerun)
    "pack_size": pa.int64(),
    "worker_host": pa.string(),
    "device": pa.string(),
    "device_group": pa.int64(),  # slots of a stacked group on a GPU (workers/stacked.py); null on a CPU
    "code_version": pa.string(),
    "finished_at": pa.timestamp("us", tz="UTC"),
}


LATER_RESULTS = ("input_norm", "margin", "margin_normalised", "device_group")
"""Measurements added after trial rows were first published: a file written before them has
no such column, and its trials read as null there (nothing was measured)."""


def _arrow_type(annotation: typing.Any) -> pa.DataType:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _arrow_type(args[0])
    if typing.get_origin(annotation) is typing.Literal:
        return pa.string()
    return {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}[annotation]


def trial_schema() -> pa.Schema:
    """Arrow schema of a trial row: ``trial_id``, ``experiment``, every experiment's config
    fields, then RESULT_COLUMNS.

    Raises:
        TypeError: two experiments give one field different column types.
    """
    fields = [
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("experiment", pa.string()),
    ]
    types: dict[str, pa.DataType] = {}
    for exp in EXPERIMENTS.values():
        for name, info in exp.config.model_fields.items():
            t = _arrow_type(info.annotation)
            if types.setdefault(name, t) != t:
                raise TypeError(f"field {name!r} is {types[name]} in one experiment and {t} in another")
    fields += [pa.field(name, t) for name, t in types.items()]
    fields += [pa.field(name, t) for name, t in RESULT_COLUMNS.items()]
    return pa.schema(fields)


def run_schema(failure: bool = False) -> pa.Schema:
    """Arrow schema of a ``runs`` record (one row per run).

    Args:
        failure: with the two nullable columns the driver's records carry (older records lack them),
            ``error`` (why the last attempt failed) and ``rescue_file`` (the file holding the
            rows the store refused). Records written before read them as null; published
            run records (presentation/publish.py, finished runs) are written and checked
            without them, so folders published before still load.
    """
    ts = pa.timestamp("us", tz="UTC")
    extra = [("error", pa.string()), ("rescue_file", pa.string())] if failure else []
    return pa.schema(
        [
            ("status", pa.string()),
            ("started_at", ts),
            ("ended_at", ts),
            ("wall_s", pa.float64()),
            ("n_trials", pa.int64()),
            ("n_done", pa.int64()),
            ("n_failed", pa.int64()),
            ("n_diverged", pa.int64()),
            ("n_lost", pa.int64()),
            ("spec_name", pa.string()),
            ("spec_hash", pa.string()),
            ("spec_yaml", pa.string()),
            ("executor", pa.string()),
            ("host", pa.string()),
            ("code_version", pa.string()),
            ("packages", pa.string()),
            ("experiment", pa.string()),
            ("trial_fields", pa.string()),
            (
                "cell_counts",
                pa.string(),
            ),  # JSON rows per cell at the run's end (analysis/completeness.py)
            (
                "attempts",
                pa.list_(
                    pa.struct(
                        [
                            ("attempt", pa.int64()),
                            ("started_at", ts),
                            ("ended_at", ts),
                            ("status", pa.string()),
                            ("host", pa.string()),
                            ("pid", pa.int64()),
                            ("executor", pa.string()),
                            ("n_skipped", pa.int64()),
                            ("n_run", pa.int64()),
                            ("wall_s", pa.float64()),
                        ]
                    )
                ),
            ),
            *extra,
        ]
    )


def with_later_fields(frame):
    """``frame`` (a polars DataFrame or LazyFrame of trial rows) with every setting added
    after rows were first stored (:data:`workers.config.LATER_FIELDS`) filled with the value
    earlier trials had where a row has none: a file written before the column existed reads
    as null there, and those trials had that value."""
    import polars as pl

    names = frame.collect_schema().names() if isinstance(frame, pl.LazyFrame) else frame.columns
    fills = [pl.col(k).fill_null(pl.lit(v)) for k, v in LATER_FIELDS.items() if k in names]
    return frame.with_columns(fills) if fills else frame


NOT_COUNTED = ("seed", "fault")
"""Trial settings the per-cell counts do not split by: a cell holds every seed."""


def cell_counts(rows: pl.LazyFrame, fields: list[str]) -> str:
    """The per-cell row counts a run record keeps, as JSON:
    ``{"fields": [...], "cells": [[value, ..., rows], ...]}`` over the ``fields`` (trial
    settings, :data:`NOT_COUNTED` aside) that take more than one value in ``rows``."""
    fields = [f for f in fields if f not in NOT_COUNTED and f in rows.collect_schema()]
    if not fields:
        return json.dumps({"fields": [], "cells": [[rows.select(pl.len()).collect().item()]]})
    unique = rows.select(pl.col(fields).n_unique()).collect().row(0, named=True)
    varying = [f for f in fields if unique[f] > 1]
    counts = (
        rows.group_by(varying).len().sort(varying, nulls_last=True).collect()
        if varying
        else rows.select(pl.len()).collect()
    )
    return json.dumps({"fields": varying, "cells": [list(r) for r in counts.iter_rows()]})
