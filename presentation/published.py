"""Reading a published findings folder back: its checksums, run records and trial rows checked
field by field, then loaded into a results store (``attnsweep report --from FOLDER``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.orchestrator.spec_loading import read_yaml
from attnsweep.orchestrator.trials_table import LATER_RESULTS, run_schema, trial_schema
from attnsweep.presentation.folder import RUNS, SUMS, TRIALS
from attnsweep.presentation.publish import sha256_file
from attnsweep.results import ResultsStore
from attnsweep.results.outputs import read_text_capped
from attnsweep.workers.config import LATER_FIELDS


def _check_sums(folder: Path) -> None:
    """Raise AttnsweepError unless runs.parquet and trials.parquet match :data:`SUMS`."""
    try:
        listed: dict[str, str] = dict(
            (name, digest)
            for digest, name in (
                line.split(None, 1)
                for line in read_text_capped(folder / SUMS, "--from", limit=64 * 1024, encoding="ascii").splitlines()
                if line.strip()
            )
        )
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AttnsweepError(f"--from: cannot read {folder / SUMS}: {exc}") from exc
    for name in (RUNS, TRIALS):
        want = listed.get(name) or listed.get(f"*{name}")
        if want is None:
            raise AttnsweepError(f"--from: {folder / SUMS} lists no digest of {name}")
        if sha256_file(folder / name) != want.strip():
            raise AttnsweepError(
                f"--from: {folder / name} does not match its SHA-256 in {SUMS}: it changed or was "
                "damaged after it was published"
            )


def load(folder: Path, store: ResultsStore) -> list[str]:
    """Write the runs of a published findings folder (its runs.parquet and trials.parquet)
    into ``store``, as the driver wrote them.

    Returns:
        The run ids, in the folder's order.

    Raises:
        AttnsweepError: the folder lacks a file, a file does not match its SHA-256 in
            SHA256SUMS, is not Parquet or not the file publish writes, or the two files do
            not hold the same runs.
    """
    folder = Path(folder)
    missing = [name for name in (RUNS, TRIALS, SUMS) if not (folder / name).is_file()]
    if missing:
        raise AttnsweepError(
            f"--from: {folder} has no {' or '.join(missing)} (`attnsweep report RUN_ID --publish` "
            "writes all three; a folder published before runs.parquet existed is remade from its "
            "store)"
        )
    _check_sums(folder)
    runs, trials = _read(folder / RUNS, run_schema()), _read(folder / TRIALS, trial_schema())
    if runs.num_rows == 0:
        raise AttnsweepError(f"--from: {folder / RUNS} holds no run")
    listed = set(zip(runs["sweep"].to_pylist(), runs["run_id"].to_pylist(), strict=True))
    other = sorted(
        {
            f"{r} (sweep {s})"
            for s, r in zip(trials["sweep"].to_pylist(), trials["run_id"].to_pylist(), strict=True)
            if (s, r) not in listed
        }
    )
    if other:
        raise AttnsweepError(
            f"--from: {folder / TRIALS} holds rows of run(s) that {folder / RUNS} does not list: {', '.join(other)}"
        )
    schema = trial_schema()
    ids = []
    for rec in runs.to_pylist():
        sweep, run_id = rec.pop("sweep"), rec.pop("run_id")
        rows = trials.filter(pc.and_(pc.equal(trials["sweep"], sweep), pc.equal(trials["run_id"], run_id)))
        if rows.num_rows == 0:
            raise AttnsweepError(f"--from: {folder / TRIALS} has no trial rows of run {run_id} (sweep {sweep})")
        _check_run(folder, sweep, run_id, rec, rows)
        columns = [rows[f.name].cast(f.type) for f in schema]
        store.write_trials(sweep, run_id, pa.Table.from_arrays(columns, schema=schema))
        store.write_run(sweep, run_id, rec, run_schema())
        ids.append(run_id)
    return ids


RUN_STATUSES = ("running", "finished", "interrupted", "failed", "died")
"""What a run record's ``status`` can be (orchestrator/driver.py)."""


def _check_run(folder: Path, sweep: str, run_id: str, record: dict, rows: pa.Table) -> None:
    """Raise AttnsweepError unless a published run's record and rows are ones a run could
    have written: names a run can have, a known status and experiment, every row of that
    experiment, and every row's settings valid for it (the experiment's config, which names
    the field and the allowed values). A folder whose files were edited and checksummed
    again is read only as far as its contents are sound."""
    from attnsweep.results.layout import NAME_RE
    from attnsweep.workers import EXPERIMENTS

    where = f"--from: {folder / RUNS}: run {run_id!r} (sweep {sweep!r})"
    for label, value in (("sweep", sweep), ("run_id", run_id)):
        if not isinstance(value, str) or not NAME_RE.match(value):
            raise AttnsweepError(
                f"{where}: {label} must be letters, digits, '_', '.', '-' (starting with a letter or "
                "digit): it is not a name a run could have"
            )
    if record.get("status") not in RUN_STATUSES:
        raise AttnsweepError(f"{where}: status {record.get('status')!r} is not one of {', '.join(RUN_STATUSES)}")
    experiment = record.get("experiment") or "sparse_boolean"
    if experiment not in EXPERIMENTS:
        raise AttnsweepError(f"{where}: experiment {experiment!r} is not one of {', '.join(sorted(EXPERIMENTS))}")
    other = sorted(
        {e for e in rows["experiment"].to_pylist() if (e or "sparse_boolean") != experiment},
        key=str,
    )
    if other:
        raise AttnsweepError(
            f"{where}: its record says experiment {experiment!r} but {folder / TRIALS} holds rows of "
            f"{', '.join(map(repr, other))} for it"
        )
    _check_record(where, record, rows.column_names)
    _check_rows(folder, run_id, rows)
    config = EXPERIMENTS[experiment].config
    fields = [f for f in config.model_fields if f in rows.column_names]
    for i, row in enumerate(rows.select(["trial_id", *fields]).to_pylist()):
        trial = row.pop("trial_id")
        try:
            config.model_validate({k: v for k, v in row.items() if v is not None})
        except ValidationError as exc:
            problem = exc.errors()[0]
            field = ".".join(str(p) for p in problem.get("loc", ())) or "settings"
            raise AttnsweepError(
                f"--from: {folder / TRIALS}: trial {trial!r} of run {run_id!r} (row {i}): {field}: "
                f"{problem.get('msg')} (got {row.get(field)!r}): not a trial a run could have "
                "written"
            ) from None


COUNTS = ("n_trials", "n_done", "n_failed", "n_diverged", "n_lost")
"""A run record's counts of trials (orchestrator/driver.py)."""


FRACTIONS = ("train_acc", "test_acc")
"""Measurements that are fractions of samples: in [0, 1] or null, never NaN."""


def _check_record(where: str, record: dict, columns: list[str]) -> None:
    """Raise AttnsweepError unless the record's counts, per-cell counts and spec are ones a
    run writes: counts whole and not negative, ``cell_counts`` the JSON
    analysis/completeness.py writes, ``spec_yaml`` YAML whose analysis settings are valid; its
    text first held to the sizes and depths a run writes (:func:`results.record_text.check_record`),
    before either is parsed."""
    import yaml

    from attnsweep.orchestrator.spec import AnalysisSettings
    from attnsweep.results.record_text import check_record

    check_record(record, where)

    for name in COUNTS:
        if (record.get(name) or 0) < 0:
            raise AttnsweepError(f"{where}: {name} is {record[name]}: a count of trials is not negative")
    text = record.get("cell_counts")
    if text is not None:
        try:
            counts = json.loads(text)
            fields, cells = counts["fields"], counts["cells"]
            sound = (
                isinstance(fields, list)
                and all(isinstance(f, str) and f in columns for f in fields)
                and isinstance(cells, list)
                and all(
                    isinstance(c, list) and len(c) == len(fields) + 1 and type(c[-1]) is int and c[-1] >= 0
                    for c in cells
                )
            )
        except (ValueError, TypeError, KeyError):
            sound = False
        if not sound:
            raise AttnsweepError(
                f"{where}: cell_counts is not the per-cell counts a run records (JSON "
                '{"fields": [trial columns], "cells": [[values..., rows >= 0], ...]})'
            )
    try:
        spec = read_yaml(record.get("spec_yaml") or "") or {}
        AnalysisSettings(**((spec.get("analysis") or {}) if isinstance(spec, dict) else {}))
    except (yaml.YAMLError, ValidationError, TypeError) as exc:
        raise AttnsweepError(
            f"{where}: spec_yaml is not a spec a run could have recorded: {str(exc).splitlines()[0]}"
        ) from None


def _check_rows(folder: Path, run_id: str, rows: pa.Table) -> None:
    """Raise AttnsweepError unless each trial is one row with an id and its fractions are
    fractions: a crafted copy of a trial, or an accuracy of 1e300, would change m*."""
    where = f"--from: {folder / TRIALS}: run {run_id!r}"
    ids = rows["trial_id"]
    if ids.null_count:
        raise AttnsweepError(f"{where}: {ids.null_count} row(s) have no trial_id: not rows a run could have written")
    counts = pc.value_counts(ids)
    repeated = [v["values"] for v in counts.to_pylist() if v["counts"] > 1]
    if repeated:
        raise AttnsweepError(
            f"{where}: trial {repeated[0]!r} has {max(v['counts'] for v in counts.to_pylist())} rows "
            f"({len(repeated)} trial(s) repeated): a published run holds each trial once"
        )
    for name in FRACTIONS:
        values = rows[name].cast(pa.float64())
        bad = (
            pc.sum(
                pc.invert(pc.fill_null(pc.and_(pc.greater_equal(values, 0.0), pc.less_equal(values, 1.0)), True))
            ).as_py()
            or 0
        )
        if bad:
            raise AttnsweepError(
                f"{where}: {bad} row(s) have a {name} outside [0, 1] (or NaN): not a fraction of "
                "samples, so not a row a run could have written"
            )


def published_rows(folder: Path) -> dict[str, int]:
    """The trial rows a published findings folder holds, per run id: counted in its
    trials.parquet, with every run its runs.parquet lists (0 where it has no rows there); {}
    where the folder has neither. A link at either name is not read: the report replaces the
    link and never writes through it, so what it points at loses nothing.

    Raises:
        AttnsweepError: a file there cannot be read as the file publish writes, so what
            writing over the folder would drop cannot be told.
    """
    counts: dict[str, int] = {}
    for name in (TRIALS, RUNS):
        path = Path(folder) / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            ids = pq.read_table(path, columns=["run_id"])["run_id"]
        except (pa.ArrowException, OSError, KeyError, UnicodeDecodeError) as exc:
            raise AttnsweepError(
                f"--out: {path} cannot be read as published findings, so a report there could drop "
                "the rows it holds; give another --out, or move that folder away first "
                f"({exc.__class__.__name__})"
            ) from exc
        for entry in pc.value_counts(ids).to_pylist():
            if entry["values"] is not None:
                counts[entry["values"]] = counts.get(entry["values"], 0) + (entry["counts"] if name == TRIALS else 0)
    return counts


def published_within(out_dir: Path) -> Path | None:
    """The published findings folder whose ``figures`` folder holds ``out_dir`` (a report there
    would write over that folder's figures), or None."""
    out = Path(out_dir).resolve()
    for folder in out.parents:
        if (folder / RUNS).is_file() or (folder / SUMS).is_file():
            inside = out.relative_to(folder).parts
            if inside and inside[0] == "figures":
                return folder
    return None


def _read(path: Path, schema: pa.Schema) -> pa.Table:
    """A published Parquet file, its page checksums verified, with every column of
    ``schema`` (and ``sweep``, ``run_id``) of a type that casts to the schema's.

    Raises:
        AttnsweepError: the file is damaged, not Parquet, or not this kind of file.
    """
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        names = table.column_names  # a damaged footer can hold a name that is not UTF-8
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise AttnsweepError(
            f"--from: {path} cannot be read as Parquet (damaged or not a published file): {exc}"
        ) from exc
    schema = pa.schema([*schema, pa.field("sweep", pa.string()), pa.field("run_id", pa.string())])
    # A folder published before a setting or a measurement existed: its trials had the earlier
    # value of the setting (filled in later), and no value of the measurement.
    for name in (*LATER_FIELDS, *LATER_RESULTS):
        if name in schema.names and name not in names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
            names = table.column_names
    missing = [f.name for f in schema if f.name not in names]
    if missing:
        raise AttnsweepError(
            f"--from: {path} lacks the column(s) {', '.join(missing)}: it is not the {path.name} "
            "that `attnsweep report --publish` writes"
        )
    for f in schema:
        if f.name in ("sweep", "run_id") and not (
            pa.types.is_string(table[f.name].type) or pa.types.is_large_string(table[f.name].type)
        ):
            raise AttnsweepError(
                f"--from: {path}: column {f.name} is {table[f.name].type}, not string: it is not "
                f"the {path.name} that `attnsweep report --publish` writes (or it is damaged)"
            )
        try:
            table[f.name].cast(f.type)
        except (pa.ArrowException, TypeError) as exc:
            raise AttnsweepError(
                f"--from: {path}: column {f.name} is {table[f.name].type}, not {f.type}: it is not "
                f"the {path.name} that `attnsweep report --publish` writes"
            ) from exc
    return table
