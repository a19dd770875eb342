"""Whether the rows a read finds are all the rows a run wrote, and if not, where and why.

At its end a run records how many rows it stored, in total and per cell (``cell_counts``
in its ``runs`` record: rows per value of the trial settings that vary, the seed aside).
``analyze``, ``report`` and ``replicate`` compare the rows they read with those counts, so a
result computed from part of a run says so: which cells lack rows, how many, and why (a file
left out as damaged or incompatible, moved to quarantine, or gone).
"""

from __future__ import annotations

import json

import polars as pl

from attnsweep.analysis.context import RunContext
from attnsweep.results import ResultsStore, StoreError
from attnsweep.results.layout import QUARANTINE
from attnsweep.results.roots import listing

SHOWN_CELLS = 12
"""Incomplete cells named in a note at most (the rest are counted)."""


def as_stored(store: ResultsStore, sweep: str, run_id: str, record: dict) -> dict:
    """``record`` as a page shows it: a run recorded as still running carries the counts of its
    start (none) until it ends, so its ``n_done``, ``n_failed``, ``n_diverged`` and ``n_lost``
    become those of the trial rows the store holds now (one per trial id, as
    ``analysis.boolean.unfinished_note`` counts them). Any other record is returned as it is;
    ``record`` itself is not changed."""
    if record.get("status") != "running":
        return record
    try:
        counts = dict(store.scan_run_trials(sweep, run_id).group_by("status").len().collect().iter_rows())
    except StoreError:  # no trial stored yet
        counts = {}
    return {**record, **{f"n_{s}": counts.get(s, 0) for s in ("done", "failed", "diverged", "lost")}}


def incomplete_note(store: ResultsStore, sweep: str, run_id: str, context: RunContext | None = None) -> str | None:
    """A warning naming the cells of a run whose rows in the store are fewer (or more) than
    the run recorded, and why; None when every recorded row is read, or while the run is
    still running (its counts are not final; ``analysis.boolean.unfinished_note`` speaks then).

    Args:
        context: the run's record, if already read (:class:`analysis.context.RunContext`).

    Raises:
        StoreError: no such run.
    """
    record = context.record if context is not None else store.read_run(sweep, run_id)
    if record["status"] == "running":
        return None
    try:
        rows = store.scan_run_trials(sweep, run_id, once=False)
    except StoreError:
        rows = None
    recorded = sum(record.get(k) or 0 for k in ("n_done", "n_failed", "n_diverged", "n_lost"))
    read, distinct = (0, 0) if rows is None else rows.select(pl.len(), pl.col("trial_id").n_unique()).collect().row(0)
    if rows is not None and distinct < read:
        rows = rows.unique(subset="trial_id")
    cells = _cells(record.get("cell_counts"), rows)
    repeated = (
        (
            f"; {read - distinct} rows repeat a trial id already read (a file copied in or restored twice; "
            "every analysis counts each trial once)"
        )
        if distinct < read
        else ""
    )
    if distinct == recorded and not cells:
        return f"run {run_id} holds {read} rows for its {recorded} trials{repeated}" if repeated else None
    shown = "; ".join(cells[:SHOWN_CELLS]) + (
        f"; and {len(cells) - SHOWN_CELLS} more cells" if len(cells) > SHOWN_CELLS else ""
    )
    where = f" (trials read / trials recorded: {shown})" if cells else ""
    if distinct > recorded:
        return (
            f"run {run_id} holds more trials than it recorded: {distinct} read, {recorded} recorded{where}{repeated}; "
            "rows were added after it ended (attnsweep store check)"
        )
    return (
        f"run {run_id} is incomplete: {distinct} of the {recorded} trials it recorded are read{where}{repeated}; "
        f"{_why(store, sweep, run_id)}"
    )


def _cells(counts_json: str | None, rows: pl.LazyFrame | None) -> list[str]:
    """``"T=64, model=mlp: 38/40"`` for each recorded cell whose read count differs."""
    if not counts_json:
        return []
    try:
        counts = json.loads(counts_json)
        fields, cells = counts["fields"], counts["cells"]
        if not (isinstance(fields, list) and all(isinstance(f, str) for f in fields) and isinstance(cells, list)):
            return []  # not what a run writes (a record made by hand): the totals still say what is missing
        if not fields:
            return []
        expected = pl.DataFrame(cells, schema=[*fields, "recorded"], orient="row", infer_schema_length=None)
    except (ValueError, TypeError, KeyError, pl.exceptions.PolarsError):  # ValueError: an int past 4,300 digits too
        return []
    if rows is None:
        found = expected.select(fields).with_columns(read=pl.lit(0, pl.UInt32))
    else:
        found = rows.group_by(fields).agg(read=pl.len()).collect()
        expected = expected.with_columns([pl.col(f).cast(found.schema[f]) for f in fields])
    both = expected.join(found, on=fields, how="full", coalesce=True, nulls_equal=True)
    both = both.with_columns(pl.col("recorded", "read").fill_null(0).cast(pl.Int64))
    shown = [f for f in fields if f != "m"]
    if not shown:  # m is the only axis: each m is a cell
        shown = fields
    off = pl.col("read") != pl.col("recorded")
    detail = (
        pl.concat_str(
            [
                pl.lit("m="),
                pl.col("m").cast(pl.String),
                pl.lit(": "),
                pl.col("read").cast(pl.String),
                pl.lit("/"),
                pl.col("recorded").cast(pl.String),
            ]
        ).filter(off)
        if "m" in fields and shown != fields
        else pl.lit(None, pl.String).filter(off)
    )
    by_cell = (
        both.sort(fields, nulls_last=True)
        .group_by(shown, maintain_order=True)
        .agg(pl.col("read", "recorded").sum(), detail.alias("at"))
        .filter(off)
    )
    return [
        ", ".join(f"{f}={r[f]}" for f in shown)
        + f": {r['read']}/{r['recorded']}"
        + (f" (at {', '.join(a for a in r['at'] if a)})" if any(r["at"]) else "")
        for r in by_cell.iter_rows(named=True)
    ]


def _why(store: ResultsStore, sweep: str, run_id: str) -> str:
    folder = store.run_dir("trials", sweep, run_id)
    left = {p.name: why for p, why in store.set_aside.items() if p.parent == folder}
    quarantine = store.root / QUARANTINE / folder.relative_to(store.root)
    earlier = [p for p in sorted(listing(quarantine, "*.parquet")) if p.name not in left]
    parts = []
    if left:
        parts.append("files left out of this read: " + "; ".join(f"{name}: {why}" for name, why in left.items()))
    if earlier:
        parts.append(
            f"{len(earlier)} damaged file(s) of this run were moved to {quarantine.relative_to(store.root)} "
            "by an earlier read"
        )
    if not parts:
        return "its missing files were moved or deleted after it ended (attnsweep store check)"
    return "; ".join(parts) + f" (attnsweep resume {run_id} reruns the missing trials of a grid sweep)"


TRAINED = ("done", "diverged")
"""Statuses of a trial that trained (a diverged one is an unsuccessful seed, not a missing one)."""


def untrained_note(store: ResultsStore, sweep: str, run_id: str, context: RunContext) -> str | None:
    """A warning naming each value of a text setting of the run's cells (a model, a teacher, a
    task) none of whose trials trained, every one failed or lost (a package's model that does
    not load): it has no m*, no claim reads it, and the tables would otherwise lose it without
    a word. None where every such value trained, or the run varies no text setting.

    Raises:
        StoreError: the run has no trial rows.
    """
    from attnsweep.workers.experiments import EXPERIMENTS

    scan = store.scan_run_trials(sweep, run_id)
    schema = scan.collect_schema()
    settings = EXPERIMENTS[context.experiment].config.model_fields
    cols = [c for c in settings if c in schema and schema[c] == pl.String and c not in ("trial_id", "fault")]
    if not cols or "status" not in schema:
        return None
    rows = scan.select(*cols, "status").collect()
    parts, named = [], []
    for c in cols:
        counts = rows.group_by(c).agg(n=pl.len(), trained=pl.col("status").is_in(TRAINED).sum())
        if counts.height < 2:  # one value: every trial failed, which the run's counts say already
            continue
        dead = counts.filter((pl.col("trained") == 0) & pl.col(c).is_not_null()).sort(c)
        parts += [f"{c}={r[c]} ({r['n']} trial{'s' * (r['n'] > 1)})" for r in dead.iter_rows(named=True)]
        named += [c] * (not dead.is_empty())
    if not parts:
        return None
    return (
        f"every trial of {', '.join(parts)} failed or was lost: no m* and no claim reads it; their error column "
        f"says why: attnsweep query \"SELECT {', '.join(named)}, status, error FROM trials WHERE run_id = '{run_id}' "
        "AND status IN ('failed', 'lost')\""
    )
