"""Checking and compacting a results store (``attnsweep store check|compact``).

``check_store`` first makes sure the folder is a store (:func:`recognise`: a folder with
``trials/`` or ``runs/`` of ``sweep=NAME`` folders, or an empty or new one), then reads every
file (quarantining damaged ones, as any read does; skipping, not moving, files the file
system will not let it read, or beyond the limit on a file), unifies each table's schema, and
looks for duplicate trial ids within a run, ended runs whose trials differ from what their
record counts, second run records, temporary files whose writer is gone, files a compaction
replaced but did not delete, and runs that failed (with the file holding the rows the store
refused) or whose driver died. ``compact_store`` rewrites each run's part files as one file
(a few, for a run beyond a quarter of the limit on a file) without changing a row: each new
file is written atomically and names the files it replaces in its metadata, so
readers skip the old files even if a crash leaves them behind, and the next compaction
deletes them; it also removes the temporary files of those runs whose writer is provably gone.
"""

from __future__ import annotations

import fnmatch
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.atomic_write import write_parquet_atomic
from attnsweep.results.curve_commits import committed_names, unreadable_keys
from attnsweep.results.curves_table import CURVE_SCHEMA, NOT_CURVES
from attnsweep.results.errors import StoreError
from attnsweep.results.file_limits import decoded_estimate
from attnsweep.results.layout import CURVES_KEY, QUARANTINE, REPLACES_KEY, RUN_FILE, partition_ok
from attnsweep.results.locks import RunLock
from attnsweep.results.parquet_check import os_reason
from attnsweep.results.roots import listing, listing_tree
from attnsweep.results.store import FILE_COLUMN, VALID_POINT, ResultsStore

STORE_FOLDERS = ("trials", "runs", "curves", "derived", "locks", "quarantine", "studies")
"""The folders attnsweep makes at a store's root."""


def recognise(store: ResultsStore) -> bool:
    """Whether ``store``'s root is a store holding runs (True) or an empty or new one (False):
    a store has ``trials/`` or ``runs/`` with ``sweep=NAME`` folders in it; a folder holding
    nothing but attnsweep's own folders (or nothing, or hidden files) is an empty store.

    Raises:
        StoreError: the path is empty, does not exist, is not a folder, cannot be listed,
            or is a folder that is not a store (``/``, a home folder, ``/proc``).
    """
    root = store.root
    if not store.uri.strip():
        raise StoreError("an empty store path; give the store's folder (default results-store)")
    try:
        if not root.exists():
            raise StoreError(f"no store at {root}: no such folder")
        if not root.is_dir():
            raise StoreError(f"{root} is a file, not a store's folder")
        entries = [p.name for p in root.iterdir()]
        if any(_has_sweeps(root / table) for table in ("trials", "runs")):
            return True
    except OSError as exc:
        raise StoreError(f"cannot list the store at {root}: {os_reason(exc)}") from exc
    foreign = sorted(n for n in entries if n not in STORE_FOLDERS and not n.startswith("."))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise StoreError(
            f"{root} is not an attnsweep store: it has no trials/ or runs/ folder of sweep=NAME folders, "
            f"and holds other things ({shown}); give the store's folder with --store"
        )
    return False


def _has_sweeps(folder) -> bool:
    return folder.is_dir() and any(p.name.startswith("sweep=") for p in folder.iterdir())


@dataclass
class CheckReport:
    """What ``check_store`` found; ``ok`` when nothing needs attention.

    Attributes:
        files: readable Parquet files per table.
        rows: rows per table.
        empty: the store holds no run (a new or empty store; nothing else was checked).
        quarantined: files found damaged, now (or earlier) under ``quarantine/``.
        skipped: damaged files left in place (the store cannot be written), with why.
        unreadable: files the file system would not let this check read (a permission, an
            I/O error), with why: skipped where they are, not known to be damaged.
        too_large: files holding more than the store's limit on a file (on disk, or decoded;
            :func:`results.file_limits.max_file_bytes`), with why: skipped where they are.
        schema_problems: files whose column types cannot join their table's other files (or
            a run file that is not one run's record), with why.
        foreign: trial files of a run's folder holding no trial rows of that run (no trial id
            column, or rows whose own ``sweep``/``run_id`` name another run), with why: set
            aside where they are.
        extra_records: ``(sweep, run_id, path)`` of files in a run's ``runs`` folder other than
            its record ``run.parquet``: not read (a copy would be a second record of the run).
        row_counts: ``(sweep, run_id, read, recorded, detail)`` of ended runs whose trials in the
            store (distinct trial ids) differ from the counts their record keeps: ``detail``
            gives the statuses that differ (``done 4 of 8``).
        no_trial_id: ``(sweep, run_id, rows)`` of rows whose trial id is null.
        duplicates: ``(sweep, run_id, trial_id, copies)`` of trial ids stored more than once in a run.
        curve_duplicates: ``(sweep, run_id, points)``: curve points (trial id, epoch) stored more
            than once in a run's committed curves files (reads see each once; store compact
            keeps that copy alone).
        uncommitted_curves: curves files no trial file commits (results/curve_commits.py:
            points of rows never stored, written before a kill): not read; store compact
            deletes them.
        curves_without_rows: ``(sweep, run_id, points)``: committed curve points whose trial
            has no row in the run (not drawn; store compact deletes them).
        curve_bad_points: ``(sweep, run_id, points)``: committed curve points without a trial
            id, or with no epoch or a negative one: never read; store compact drops them.
        curve_keys: trial files whose list of committed curves files (metadata
            ``attnsweep.curves``) is not a list of file names: their curves are committed by
            age (results/curve_commits.py); store compact writes the list again.
        temp_files: ``(path, age in seconds, writer)`` of temporary files whose writer is gone
            (the next run or ``store compact`` removes them) or cannot be checked from here.
        writing: ``(path, age in seconds, writer)`` of temporary files being written now (not a problem).
        superseded: old part files a compaction replaced (skipped by readers).
        orphans: ``(sweep, run_id)`` with trial rows but no readable run record.
        stray: Parquet files outside any valid ``sweep=<name>/run_id=<id>`` folder (not read).
        failed_runs: ``(sweep, run_id, error, rescue file)`` of runs recorded ``failed``: why,
            and the file holding the rows the store refused (None if none).
        died_runs: ``(sweep, run_id)`` of runs recorded ``running`` whose lock nobody holds:
            their driver was killed, or could not write the record's end.
    """

    files: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    empty: bool = False
    quarantined: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    too_large: list[str] = field(default_factory=list)
    schema_problems: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    extra_records: list[tuple[str, str, str]] = field(default_factory=list)
    row_counts: list[tuple[str, str, int, int, str]] = field(default_factory=list)
    no_trial_id: list[tuple[str, str, int]] = field(default_factory=list)
    duplicates: list[tuple[str, str, str, int]] = field(default_factory=list)
    curve_duplicates: list[tuple[str, str, int]] = field(default_factory=list)
    uncommitted_curves: list[str] = field(default_factory=list)
    curves_without_rows: list[tuple[str, str, int]] = field(default_factory=list)
    curve_bad_points: list[tuple[str, str, int]] = field(default_factory=list)
    curve_keys: list[str] = field(default_factory=list)
    temp_files: list[tuple[str, float, str]] = field(default_factory=list)
    writing: list[tuple[str, float, str]] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    orphans: list[tuple[str, str]] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)
    failed_runs: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    died_runs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.quarantined
            or self.skipped
            or self.unreadable
            or self.too_large
            or self.schema_problems
            or self.foreign
            or self.extra_records
            or self.row_counts
            or self.no_trial_id
            or self.duplicates
            or self.curve_duplicates
            or self.uncommitted_curves
            or self.curves_without_rows
            or self.curve_bad_points
            or self.curve_keys
            or self.temp_files
            or self.orphans
            or self.stray
            or self.failed_runs
            or self.died_runs
        )


def check_store(store: ResultsStore) -> CheckReport:
    """Verify a store: every page of every file read and checked (the record of checked
    versions is ignored, and refreshed), no file beyond the store's limit on a file, one
    schema per table, one row per trial id and run, as many trials in each ended run as its
    record counts (per status), one record per run, no temporary files. Damaged files are
    moved to quarantine (as on any read; skipped in place when the store cannot be written).

    Raises:
        StoreError: the path is empty, does not exist, or is not a store (:func:`recognise`).
    """
    report = CheckReport()
    if not recognise(store):
        report.empty = True
        report.files = report.rows = {"trials": 0, "runs": 0}
        return report
    # Every file is read in full, whatever the record of checked files says (results/checked.py).
    store.check_every_version()
    for table in ("trials", "runs", "curves"):
        if table == "curves" and not (store.root / table).is_dir():
            continue  # no run kept curves: the table does not exist
        files = store._files(table)
        report.files[table] = len(files)
        report.rows[table] = sum(store.metadata(p).num_rows for p in files)
        base = store.root / table
        for p in sorted((p for p in listing_tree(base) if fnmatch.fnmatchcase(p.name, "*.parquet")), key=str):
            if p.name.startswith("."):
                continue
            if not _in_run_folder(p, base):
                report.stray.append(str(p.relative_to(store.root)))
            elif table == "runs" and p.name != RUN_FILE:
                report.extra_records.append((*run_of(p.parent), str(p.relative_to(store.root))))
    report.superseded = sorted(str(p.relative_to(store.root)) for p in store.superseded)
    for path, why in sorted(store.set_aside.items(), key=lambda kv: str(kv[0])):
        listed = f"{path.relative_to(store.root)}: {why}"
        if why.unreadable:
            report.unreadable.append(listed)
        elif why.too_large:
            report.too_large.append(listed)
        elif why.foreign:
            report.foreign.append(listed)
        elif not why.damaged or path.exists():  # a moved file is listed from quarantine/ below
            (report.skipped if why.damaged else report.schema_problems).append(listed)
    stored: dict[tuple[str, str], dict[str, int]] = {}
    if report.files["trials"] and "trial_id" in store.schema("trials").names:  # hand-made rows may have no ids
        trials = store.scan_trials()
        dup = (
            trials.filter(pl.col("trial_id").is_not_null())
            .group_by("sweep", "run_id", "trial_id")
            .agg(copies=pl.len())
            .filter(pl.col("copies") > 1)
            .sort("sweep", "run_id", "trial_id")
            .collect()
        )
        report.duplicates = [tuple(r) for r in dup.iter_rows()]
        nulls = (
            trials.filter(pl.col("trial_id").is_null())
            .group_by("sweep", "run_id")
            .agg(rows=pl.len())
            .sort("sweep", "run_id")
            .collect()
        )
        report.no_trial_id = [tuple(r) for r in nulls.iter_rows()]
        # Each trial once, the row of the latest file, as every analysis reads it (scan_run_trials).
        status = pl.col("status").cast(pl.String) if "status" in trials.collect_schema() else pl.lit(None, pl.String)
        per_status = (
            trials.filter(pl.col("trial_id").is_not_null())
            .unique(subset=["sweep", "run_id", "trial_id"], keep="last", maintain_order=True)
            .group_by("sweep", "run_id", status.alias("status"))
            .agg(n=pl.len())
            .collect()
        )
        for sweep, run_id, st, n in per_status.iter_rows():
            stored.setdefault((sweep, run_id), {})[st] = n

    _check_curves(store, report)

    recorded = {run_of(f.parent) for f in store._files("runs")}
    for sweep, run_id in sorted(recorded):
        try:
            record = store.read_run(sweep, run_id)
        except StoreError as exc:
            report.schema_problems.append(str(exc))
            continue
        if record.get("status") == "failed":
            report.failed_runs.append((sweep, run_id, record.get("error"), record.get("rescue_file")))
        # An object store's run lock lives on its driver's machine (results/locks.py): there, a
        # free lock names a dead driver as it does beside a local store; elsewhere held() is None.
        elif record.get("status") == "running" and RunLock(store, sweep, run_id).held() is False:
            report.died_runs.append((sweep, run_id))
        if record.get("status") != "running":  # a running run's counts are not final (its end writes them)
            counted = _row_counts(sweep, run_id, record, stored.get((sweep, run_id), {}))
            if counted is not None:
                report.row_counts.append(counted)
    report.orphans = sorted({run_of(f.parent) for f in store._files("trials")} - recorded)
    qdir = store.root / QUARANTINE
    report.quarantined = (
        sorted(str(p.relative_to(store.root)) for p in listing_tree(qdir) if p.is_file()) if qdir.exists() else []
    )
    now = time.time()
    for temp in store.temp_files():
        try:
            age = now - temp.path.stat().st_mtime
        except FileNotFoundError:  # renamed into place meanwhile
            continue
        listed = (str(temp.path.relative_to(store.root)), age, temp.writer)
        (report.writing if temp.state == "writing" else report.temp_files).append(listed)
    return report


def _check_curves(store: ResultsStore, report: CheckReport) -> None:
    """The ``curves`` table's share of :func:`check_store`: files no trial file commits,
    points stored twice in committed files, committed points of trials without a row."""
    files = store._files("curves")  # committed ones; the rest land in store.uncommitted
    for folder in sorted({p.parent for p in [*files, *store.uncommitted]}, key=str):
        trials = store.root / "trials" / folder.parent.name / folder.name
        kept = store._files("trials", trials) if trials.is_dir() else []
        names = unreadable_keys([(t.name, store.key_values(t)) for t in kept])
        report.curve_keys += [str((trials / n).relative_to(store.root)) for n in names]
    report.uncommitted_curves = sorted(str(p.relative_to(store.root)) for p in store.uncommitted if p.exists())
    by_run: dict[tuple[str, str], list[Path]] = {}
    for p in files:
        by_run.setdefault(run_of(p.parent), []).append(p)
    for (sweep, run_id), run_files in sorted(by_run.items()):
        points = store._scan("curves", run_files[0].parent).select("trial_id", "epoch")
        bad = points.filter(~VALID_POINT.fill_null(False)).select(pl.len()).collect().item()
        if bad:
            report.curve_bad_points.append((sweep, run_id, int(bad)))
        points = points.filter(VALID_POINT)
        twice = (
            points.group_by("trial_id", "epoch").agg(n=pl.len()).filter(pl.col("n") > 1).select((pl.col("n") - 1).sum())
        ).collect()
        extra = int(twice.item() or 0) if twice.height else 0
        if extra:
            report.curve_duplicates.append((sweep, run_id, extra))
        try:
            ids = store.scan_run_trials(sweep, run_id).select("trial_id")
        except StoreError:
            ids = pl.LazyFrame({"trial_id": []}, schema={"trial_id": pl.String})
        rowless = points.join(ids, on="trial_id", how="anti").select(pl.len()).collect().item()
        if rowless:
            report.curves_without_rows.append((sweep, run_id, int(rowless)))


@dataclass
class CompactReport:
    """What ``compact_store`` did: runs rewritten, files before and after, rows moved."""

    runs: int = 0
    files_before: int = 0
    files_after: int = 0
    rows: int = 0
    deleted_superseded: int = 0
    deleted_temp: int = 0
    """Temporary files of those runs whose writer was provably gone."""
    curve_files_before: int = 0
    curve_files_after: int = 0
    deleted_uncommitted_curves: int = 0
    """Curves files no trial file committed (points of rows never stored), deleted."""
    kept_uncommitted_curves: int = 0
    """Uncommitted curves files kept: a trial of theirs has a row and no points read from
    elsewhere (its trial file's commit lost), so they may hold the only copy (store check names them)."""
    curve_points_dropped: int = 0
    """Curve points removed: second copies of a (trial id, epoch) and points of trials without a row."""
    quarantined_curves: int = 0
    """Files in a run's curves folder that are not files of curve points, moved to ``quarantine/``."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """``(path, why)`` of folders under ``trials/`` that no run writes (a name no run can have, a
    file): left as they are; their files are not read (store check lists them as stray)."""


COMPACT_SHARE = 4
"""A compacted file holds at most 1/COMPACT_SHARE of the store's limit on a file
(:func:`results.file_limits.max_file_bytes`, by :func:`results.file_limits.decoded_estimate`), so that
every reader reads what ``store compact`` writes, even under a lower limit."""


def compact_store(store: ResultsStore, sweep: str | None = None, run_id: str | None = None) -> CompactReport:
    """Merge each run's trial part files into as few files as the store's limit on a file
    allows (one per :data:`COMPACT_SHARE`-th of it: a run of up to tens of thousands of trials
    becomes one file), rows and values unchanged, and their order too: a trial stored twice
    still reads as the row of the later file.

    Args:
        store: the store.
        sweep, run_id: limit to one sweep and/or run (default: all).

    Call it while no driver writes the runs it compacts (the CLI takes each run's lock).
    Folders under ``trials/`` no run writes (a name no run can have, a file) are left as they
    are and listed in the report's ``skipped``.

    Raises:
        StoreError: a run's files have incompatible column types.
    """
    report = CompactReport()
    for folder in sorted(listing(store.root / "trials", "sweep=*/run_id=*"), key=str):
        s, r = run_of(folder)
        if (sweep and s != sweep) or (run_id and r != run_id):
            continue
        why = not_a_run_folder(folder)
        if why is not None:
            report.skipped.append((str(folder.relative_to(store.root)), why))
            continue
        report.deleted_superseded += _delete_superseded(store, folder)
        for f in (
            folder,
            store.root / "runs" / folder.parent.name / folder.name,
        ):  # whose writer is provably gone
            report.deleted_temp += len(store.clean_temp_files(f))
        files = store._files("trials", folder)
        groups = _groups(store, files, store.max_file_bytes // COMPACT_SHARE)
        first = next((k for k, g in enumerate(groups) if len(g) > 1), None)
        if first is None:
            continue
        schema = store.schema("trials", files)
        curves = store.root / "curves" / folder.parent.name / folder.name
        curve_names = [p.name for p in listing(curves, "part-*.parquet")] if curves.is_dir() else []
        # From the first group of several files on, every group is rewritten, in order, so that
        # no file kept as it is lies after a rewritten one (names order the files: see above).
        for group in groups[first:]:
            table = pa.concat_tables([_read(p, schema) for p in group])
            # The new file commits the curves files its group committed (results/curve_commits.py).
            commits = committed_names([(p.name, store.key_values(p)) for p in group], curve_names)
            meta = {
                REPLACES_KEY: json.dumps([p.name for p in group]).encode(),
                CURVES_KEY: json.dumps(sorted(commits)).encode(),
            }
            name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
            try:
                write_parquet_atomic(table, folder / name)
            except OSError as exc:  # a full disk, a quota: said with the file, and nothing of the run changed
                raise StoreError(
                    f"store compact could not write {folder / name} ({os_reason(exc)}); the run's "
                    f"{len(group)} files it was to replace are as they were (free space and run it "
                    "again)"
                ) from None
            for p in group:
                p.unlink(missing_ok=True)
            report.files_before += len(group)
            report.files_after += 1
            report.rows += table.num_rows
            del table
        report.runs += 1
    for folder in sorted(listing(store.root / "curves", "sweep=*/run_id=*"), key=str):
        s, r = run_of(folder)
        if (sweep and s != sweep) or (run_id and r != run_id) or not_a_run_folder(folder) is not None:
            continue
        report.deleted_temp += len(store.clean_temp_files(folder))
        _compact_curves(store, folder, report)
    return report


def _compact_curves(store: ResultsStore, folder: Path, report: CompactReport) -> None:
    """Repair and merge one run's curves files: files no trial file commits are deleted, files
    that are not curve points are moved to quarantine, and the committed files are rewritten
    (in groups, as trial files are) holding each point a read sees, once. Each group's file is
    written over the name of its newest file, which the trial files already commit, then the
    group's other files are deleted: a crash between leaves copies that reads skip (a trial's
    points come from the newest committed file holding it) and the next compaction removes."""
    files = store._files("curves", folder)
    sweep, run_id = run_of(folder)
    try:
        with_rows = store.run_trial_ids(sweep, run_id)
    except StoreError:
        with_rows = set()
    seen = store.scan_run_curves(sweep, run_id, trial_ids=with_rows) if files else None
    drawn = set(seen.select("trial_id").unique().collect()["trial_id"].to_list()) if seen is not None else set()
    trials = store.root / "trials" / folder.parent.name / folder.name
    quarantined = store.root / QUARANTINE / "trials" / folder.parent.name / folder.name
    for p in [p for p in store.uncommitted if p.parent == folder]:
        # Its points are a kill's leftovers only if no trial file of its name exists (read, set
        # aside or quarantined: its rows may come back) and none of its trials has a row whose
        # points are not read from elsewhere: otherwise they may be the only copy, kept for
        # store check to name.
        if (trials / p.name).exists() or (quarantined / p.name).exists():
            report.kept_uncommitted_curves += 1
            continue
        try:
            ids = set(pq.read_table(p, columns=["trial_id"])["trial_id"].to_pylist())
        except (OSError, KeyError, pa.ArrowException):
            continue
        if (ids & with_rows) - drawn:
            report.kept_uncommitted_curves += 1
            continue
        p.unlink(missing_ok=True)
        del store.uncommitted[p]
        report.deleted_uncommitted_curves += 1
    for p, why in list(store.set_aside.items()):
        if p.parent == folder and p.exists() and why.reason.startswith(NOT_CURVES):
            dest = store.root / QUARANTINE / p.relative_to(store.root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            p.rename(dest)
            report.quarantined_curves += 1
    if not files:
        return
    stored = sum(store.num_rows(p) for p in files)
    chosen = store.scan_run_curves(sweep, run_id, trial_ids=with_rows, with_file=True)
    if chosen is None:
        return
    groups = _groups(store, files, store.max_file_bytes // COMPACT_SHARE)
    kept = 0
    for group in groups:
        table = chosen.filter(pl.col(FILE_COLUMN).is_in([p.name for p in group])).drop(FILE_COLUMN).collect().to_arrow()
        kept += table.num_rows
        held = sum(store.num_rows(p) for p in group)
        if len(group) == 1 and table.num_rows == held:
            report.curve_files_before += 1
            report.curve_files_after += 1
            continue
        newest = max(group, key=lambda p: p.name)
        try:
            # the curve columns in their types; any other column a file holds is kept as it is
            others = [f for f in table.schema if f.name not in CURVE_SCHEMA.names]
            for f in CURVE_SCHEMA:  # a measure no file of the group holds reads as null
                if f.name not in table.column_names:
                    table = table.append_column(f, pa.nulls(table.num_rows, f.type))
            table = table.select([*CURVE_SCHEMA.names, *(f.name for f in others)])
            write_parquet_atomic(table.cast(pa.schema([*CURVE_SCHEMA, *others])), newest)
        except OSError as exc:
            raise StoreError(
                f"store compact could not write {newest} ({os_reason(exc)}); the run's curves are as they were "
                "(free space and run it again)"
            ) from None
        for p in group:
            if p != newest:
                p.unlink(missing_ok=True)
        report.curve_files_before += len(group)
        report.curve_files_after += 1
    report.curve_points_dropped += stored - kept


def not_a_run_folder(folder: Path) -> str | None:
    """Why ``folder`` (``trials/sweep=*/run_id=*``) is not a folder a run writes, or None."""
    if not partition_ok(folder):
        return (
            "not a folder a run writes: sweep names and run ids start with a letter or digit and hold only "
            "letters, digits, '_', '.', '-' (at most 100)"
        )
    if not folder.is_dir():
        return "not a folder"
    return None


def _groups(store: ResultsStore, files: list[Path], most: int) -> list[list[Path]]:
    """``files`` in their order, cut into runs whose decoded sizes
    (:func:`results.file_limits.decoded_estimate`) add up to at most ``most`` bytes (a file larger
    alone is a group alone)."""
    groups: list[list[Path]] = []
    total = most + 1
    for p in files:
        meta = store.metadata(p)
        size = decoded_estimate(meta) if meta is not None else 0
        if total + size > most:
            groups.append([])
            total = 0
        groups[-1].append(p)
        total += size
    return groups


def _read(path: Path, schema: pa.Schema) -> pa.Table:
    """One part file in the unified schema: missing columns as nulls, types promoted."""
    with path.open("rb") as fh:
        t = pq.read_table(fh)
    cols = [t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def run_of(folder: Path) -> tuple[str, str]:
    """``(sweep, run_id)`` of a ``sweep=NAME/run_id=ID`` folder."""
    return folder.parent.name.removeprefix("sweep="), folder.name.removeprefix("run_id=")


RECORDED = {"done": "n_done", "failed": "n_failed", "diverged": "n_diverged", "lost": "n_lost"}
"""The run record's count of each final trial status (a run's end counts its rows by status)."""


def _row_counts(
    sweep: str, run_id: str, record: dict, stored: dict[str | None, int]
) -> tuple[str, str, int, int, str] | None:
    """``(sweep, run_id, read, recorded, detail)`` when the distinct trials ``stored`` per status
    differ from what the run's ``record`` counts (its end reads its rows back and counts them
    per status, so an ended run read whole matches them exactly), else None."""
    if not any(col in record for col in RECORDED.values()):
        return None  # a record without counts (none to compare with)
    want = {st: int(record.get(col) or 0) for st, col in RECORDED.items()}
    statuses = [*RECORDED, *sorted((s for s in stored if s not in RECORDED), key=str)]
    off = [
        f"{st or 'no status'} {stored.get(st, 0)} of {want.get(st, 0)}"
        for st in statuses
        if stored.get(st, 0) != want.get(st, 0)
    ]
    if not off:
        return None
    return sweep, run_id, sum(stored.values()), sum(want.values()), ", ".join(off)


def _in_run_folder(path: Path, base: Path) -> bool:
    """Whether ``path`` is a file right inside a valid ``sweep=/run_id=`` folder of ``base``."""
    return path.parent.parent.parent == base and partition_ok(path.parent)


def _delete_superseded(store: ResultsStore, folder: Path) -> int:
    """Delete part files a finished compaction replaced (left by a crash before deleting):
    only files the store found replaced, i.e. named by a compacted file in the same folder
    that holds every trial id of theirs; never a file set aside, never one elsewhere."""
    store._files("trials", folder)
    old = sorted(p for p in store.superseded if p.parent == folder and p.exists())
    for p in old:
        p.unlink(missing_ok=True)
        del store.superseded[p]
    return len(old)
