"""The ``curves`` table: learning curves of the trials of runs that asked for them
(``execution.curves`` of the spec), one row per kept epoch of a trial.

Layout beside ``trials``, written with the same atomic part-file protocol::

    curves/sweep=<name>/run_id=<id>/part-<seq>-<uid>.parquet

A pack returns a trial's curve inside its row, under :data:`CURVE_KEY` (columns of
:meth:`workers.curves.Curve.columns`); :func:`split_curves` takes it out before the row is
written to ``trials``, so a trial's row is the same with curves on or off.
"""

from __future__ import annotations

import pyarrow as pa

CURVE_KEY = "curve"
"""The key of a row holding its trial's curve (``workers.curves.CURVE_KEY``: the same name;
the store does not import the workers)."""

CURVE_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("epoch", pa.int64()),
        ("train_loss", pa.float64()),
        ("train_acc", pa.float64()),
        ("train_error", pa.float64()),
    ]
)
"""One point of a trial's curve: ``epoch`` (optimiser epochs done when the training set was
measured; 0 is the initialisation), ``train_loss`` (sparse Boolean: mean logistic loss;
symmetry: mean squared error), ``train_acc`` (sparse Boolean: fraction right; symmetry null),
``train_error`` (symmetry: relative error ||pred - Y||^2 / ||Y||^2; sparse Boolean null);
null also where the value was not finite."""


def split_curves(rows: list[dict]) -> pa.Table | None:
    """Take each row's curve out of it (rows are changed in place) and return the points of
    all of them as one table of :data:`CURVE_SCHEMA`, or None when no row held a point."""
    columns: dict[str, list] = {name: [] for name in CURVE_SCHEMA.names}
    for row in rows:
        curve = row.pop(CURVE_KEY, None)
        if not curve or not curve.get("epoch"):
            continue
        n = len(curve["epoch"])
        columns["trial_id"] += [row["trial_id"]] * n
        for name in CURVE_SCHEMA.names[1:]:
            columns[name] += list(curve.get(name) or [None] * n)
    if not columns["trial_id"]:
        return None
    return pa.table(columns, schema=CURVE_SCHEMA)


NOT_CURVES = "not a file of curve points"
"""How :func:`schema_problem` begins (``store compact`` moves such files to quarantine)."""


def schema_problem(schema: pa.Schema) -> str | None:
    """Why a part file of ``schema`` is not a file of curve points (``trial_id`` or ``epoch``
    missing, or a column of :data:`CURVE_SCHEMA` of a type that does not cast to it; a missing
    measure reads as null), or None."""
    lacking = [name for name in ("trial_id", "epoch") if name not in schema.names]
    if lacking:
        return f"{NOT_CURVES}: it lacks the column(s) {', '.join(lacking)}"
    for want in CURVE_SCHEMA:
        if want.name not in schema.names:
            continue
        got = schema.field(want.name).type
        if pa.types.is_dictionary(got):  # a writer's dictionary encoding: its values are what count
            got = got.value_type
        text = pa.types.is_string(got) or pa.types.is_large_string(got) or pa.types.is_string_view(got)
        fits = (
            pa.types.is_null(got)
            or (text if pa.types.is_string(want.type) else False)
            or (pa.types.is_integer(got) if pa.types.is_integer(want.type) else False)
            or ((pa.types.is_floating(got) or pa.types.is_integer(got)) if pa.types.is_floating(want.type) else False)
        )
        if not fits:
            return f"{NOT_CURVES}: its column {want.name} is {got}, where curves hold {want.type}"
    return None
