"""The results store: a directory of Parquet files, hive-partitioned by sweep and run.

Layout under the store root::

    trials/sweep=<name>/run_id=<id>/part-<seq>-<uid>.parquet   one row per trial
    runs/sweep=<name>/run_id=<id>/run.parquet                   one row per run

The partition columns (``sweep``, ``run_id``) live in the paths only, as hive
partitioning expects, so the files read as they are with ``polars.scan_parquet``,
``pyarrow.dataset`` (``partitioning="hive"``) and DuckDB (``read_parquet(...,
hive_partitioning = true)``). Every file is written to a hidden temporary name in its
final folder and renamed into place (atomic on POSIX), so a reader never sees half a
file: temporary names start with a dot and end in ``.partial``, so neither ``*.parquet``
globs (polars, DuckDB) nor pyarrow's discovery pick them up. A temporary name carries its
writer's pid and host, and the writer holds an OS lock on the file until the rename, so a
cleaner removes only files whose writer is provably gone (:func:`temp_file_state`), never
another run's file in progress.

The root is a local folder or any URI fsspec understands (``s3://bucket/store``,
``gs://...``, ``file:///abs/path``, ``memory://`` in tests), handled through
``universal_pathlib``. Local roots (``file://`` included) are read by polars directly;
remote ones through a pyarrow dataset over the fsspec filesystem. On object stores a file is
written in one PUT, which readers also see whole or not at all; credentials come from the
environment or the machine's role as fsspec and pyarrow find them, never from the store URI
in specs or logs.

Reading is defensive: every file is read in full and checked before a read uses it (page
CRC checksums, which every file written here carries, and a decode by pyarrow and by polars;
:func:`read_checked`, after its magic bytes and footer length are checked), once per file
version (:mod:`results.checked`). A file is never read or decoded beyond a limit
(:func:`max_file_bytes`): its footer, parsed from its own bytes, and its page headers say
what it holds and decodes to before any page is decompressed, and a file beyond the limit is
skipped where it is (:class:`TooLarge`). A damaged file is moved to ``quarantine/`` under the
store root with a :class:`StoreWarning` (skipped where it is when the store cannot be
written), and the rest still reads. A trial file that holds no trial rows of its run (no
trial id where the run's other files have one, or rows naming another run) is set aside, and
a run's record is its ``run.parquet`` alone. A file the file system refuses to read (a
permission, an I/O error) is not known to be damaged: it is skipped where it is, with a
warning naming the reason. Files written by different versions read as one table (:mod:`results.schemas`): a column missing from older files reads
as null, an int column that became a float reads as float, an all-null column takes the other
files' type; a file whose column type cannot join the others' is set aside, named with the
column and both types. :attr:`ResultsStore.set_aside` lists what a read left out and why. A
file written by ``store compact`` names the files it replaces in its metadata; those are
skipped if a crash left them behind.
"""

from __future__ import annotations

import errno
import inspect
import io
import json
import os
import re
import socket
import stat
import struct
import time
import uuid
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

try:
    import fcntl
except ImportError:  # Windows: temporary files are told by their name's pid and host only
    fcntl = None

from results.checked import CheckedFiles
from results.errors import StoreError
from results.schemas import POLARS_CASTS, unify

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")  # \Z: "$" would also take a name ending in a newline
TMP_PREFIX = ".tmp-"
TMP_RE = re.compile(r"\.tmp-(\d+)@([A-Za-z0-9._-]*)~([0-9a-f]{8})-(.+)\.partial\Z")
"""A temporary file's name: ``.tmp-<pid>@<host>~<8 hex>-<final name>.partial``, naming the
process that writes it (:func:`temp_name`), which also holds an OS lock on it while it writes."""
PARQUET_MAGIC = b"PAR1"
FOOTER_MAX = 8 * 2**20
"""The largest footer a store file may claim (bytes): the store's footers are a few KB per
row group (one row group per 1 Mi rows, so one or two in a file within :data:`FILE_MAX_MB`),
and a footer is read whole and parsed: pyarrow takes about 9 bytes of memory per footer byte
(a 21 MB footer of 200,000 column chunks took 186 MB), so 8 MiB bounds that at about 75 MB."""
FILE_MAX_MB = 256
"""The most a store file may hold, in MiB (``ATTNSWEEP_MAX_FILE_MB`` changes it): its size on
disk, and what it decodes to (:func:`decoded_estimate` from the footer before any page is
read; the strings it expands to once decoded). Checking a file holds its bytes and one decoded
copy in memory (pyarrow's, then polars'), so this bounds a check's memory at a few times it. A
part file of 5,000 trials (the writer's ``flush_rows``) decodes to about 6 MiB, 10,000 failed
trials with long tracebacks to about 40 MiB; ``store compact`` writes files of at most a
quarter of it."""
FILE_MAX_ENV = "ATTNSWEEP_MAX_FILE_MB"
TRIAL_COLUMNS = ("trial_id",)
"""Columns that tell a run's trial rows apart (every attnsweep version writes them): a file of
a run whose other files have them, and it not, is no file of its trials (set aside)."""
QUARANTINE = "quarantine"
# Parquet key-value metadata of a compacted file: JSON list of the file names it replaces.
REPLACES_KEY = b"attnsweep.replaces"
RUN_FILE = "run.parquet"
"""The one name of a run's record in its ``runs`` folder: another file there is not read."""
RUN_COLUMNS = ("status", "started_at", "n_trials", "spec_hash", "spec_yaml")
"""Columns without which a ``runs`` file is not the record of a run (:meth:`ResultsStore.read_run`)."""
RACY_S = 2.0
"""A file version changed less than this many seconds ago is not recorded as checked: a
change within the file system clock's tick would keep its size and times."""
PARTITION_SCHEMA = pa.schema([("sweep", pa.string()), ("run_id", pa.string())])


class StoreWarning(UserWarning):
    """A store file was left out of a read: damaged (moved to the quarantine folder, or
    skipped where it is in a store that cannot be written), unreadable here (the file
    system refused the read: skipped where it is), or with a column type that cannot join
    the other files'."""


class Unreadable(Exception):
    """The file system refused to read a file (no permission, an I/O error, gone midway):
    no evidence that the file is damaged, so it is skipped where it is, never moved."""


class TooLarge(Exception):
    """A file holds more than :func:`max_file_bytes` (on disk, or decoded): not evidence of
    damage (a store may hold a file made under a larger limit), so it is skipped where it is,
    never moved, and reads again under a limit that takes it."""


@dataclass(frozen=True)
class LeftOut:
    """Why a file is left out of reads: ``damaged`` (moved to quarantine, or skipped in
    place), ``unreadable`` (the file system refused the read: skipped in place), ``too_large``
    (beyond :func:`max_file_bytes`: skipped in place), ``foreign`` (no trial rows of the run
    whose folder it lies in: no trial id column, or rows naming another run), or none of these
    (column types that cannot join the other files', a run file that is not one record)."""

    reason: str
    damaged: bool
    unreadable: bool = False
    too_large: bool = False
    foreign: bool = False

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class TempFile:
    """A temporary file in the store and what is known of its writer.

    Attributes:
        path: the file.
        pid, host: the process named in its name (None for a name of an older attnsweep).
        state: ``writing`` (its writer is alive: it holds the file's lock, or its pid runs on
            this host), ``gone`` (provably: the lock is free and its pid runs no more on this
            host; :meth:`ResultsStore.clean_temp_files` removes it) or ``unknown`` (another
            host's, or a name without a writer: never removed automatically).
    """

    path: Path
    pid: int | None
    host: str | None
    state: str

    @property
    def writer(self) -> str:
        return f"pid {self.pid} on host {self.host}" if self.pid is not None else "an unknown writer (an older attnsweep's name)"


class ResultsStore:
    """A store rooted at a local directory or an fsspec URI (created on first write).

    Args:
        root: the store's directory, or a URI such as ``s3://bucket/store``.

    Raises:
        StoreError: a URI whose scheme no installed fsspec backend handles, or an
            ``ATTNSWEEP_MAX_FILE_MB`` that is not a whole number of MiB in range
            (:func:`max_file_bytes`).
    """

    def __init__(self, root: str | os.PathLike, check_every_file: bool = False):
        self.uri = str(root)
        self.root, self.local = store_root(root)
        self.max_file_bytes = max_file_bytes()
        """The most a file of this store may hold on disk and decoded (bytes); larger files are skipped."""
        self.check_every_file = check_every_file
        """Read every file in full, even versions the record of checked files knows."""
        self._checked = CheckedFiles(enabled=self.local)
        self._meta: dict[tuple, pq.FileMetaData | None] = {}
        self._schemas: dict[int, tuple[pq.FileMetaData, pa.Schema]] = {}
        self._why_not: dict[tuple[int, bool], str | None] = {}
        self._unified: dict[tuple, tuple[pa.Schema, dict]] = {}
        self.quarantined: list[Path] = []
        """Damaged files this object moved to ``quarantine/`` (their new paths)."""
        self.set_aside: dict[Path, LeftOut] = {}
        self.superseded: dict[Path, Path] = {}
        """Files a compacted file replaces (and holds every row of), skipped by reads: old -> new."""
        """Files a read of this object left out, with why: damaged (moved, or skipped in a
        store that cannot be written) or with a column type that cannot join the others'."""

    # -- paths -------------------------------------------------------------------------
    def run_dir(self, table: str, sweep: str, run_id: str) -> Path:
        """Folder of one run's files of ``table`` ("trials" or "runs").

        Raises:
            StoreError: a sweep name or run id that is not a safe path component.
        """
        for label, value in (("sweep", sweep), ("run_id", run_id)):
            if not NAME_RE.match(value):
                raise StoreError(
                    f"{label} {value!r} must start with a letter or digit and hold only letters, "
                    "digits, '_', '.', '-' (at most 100)"
                )
        return self.root / table / f"sweep={sweep}" / f"run_id={run_id}"

    # -- writing -----------------------------------------------------------------------
    def check_writable(self, sweep: str, run_id: str) -> None:
        """Check, before a run trains anything, that its rows and record can be written:
        ``trials``, ``runs`` and ``locks`` are folders (or absent), and a probe file can be
        written and removed in the run's trial folder.

        Raises:
            StoreError: naming the path and what is wrong with it.
        """
        for table in ("trials", "runs", "locks"):
            path = self.root / table
            if path.exists() and not path.is_dir():
                raise StoreError(f"the store at {self.root} is not laid out as a store: {path} is a file, not a "
                                 "folder; move it away or give another --store")
        folder = self.run_dir("trials", sweep, run_id)
        probe = folder / temp_name("probe")  # named as a writer's temporary file: a kill leaves nothing unknown
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreError(f"cannot write to the store at {self.root}: {folder}: {exc.strerror or exc}") from exc

    def write_trials(self, sweep: str, run_id: str, table: pa.Table) -> Path:
        """Write one part file of trial rows atomically; returns its path."""
        folder = self.run_dir("trials", sweep, run_id)
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        return write_parquet_atomic(table, folder / name)

    def write_run(self, sweep: str, run_id: str, record: dict, schema: pa.Schema | None = None) -> Path:
        """Write (or replace) the one-row ``runs`` record of a run atomically."""
        folder = self.run_dir("runs", sweep, run_id)
        return write_parquet_atomic(pa.Table.from_pylist([record], schema=schema), folder / RUN_FILE)

    # -- reading -----------------------------------------------------------------------
    def has_trials(self) -> bool:
        """Whether any trial file exists (checks no file: a cheap look before a read)."""
        base = self.root / "trials"
        return base.exists() and any(not p.name.startswith(".") for p in base.glob("*/*/*.parquet"))

    def _files(self, table: str, folder: Path | None = None) -> list[Path]:
        """The files of ``table`` (or of one run's ``folder``) a read uses: regular files in
        ``sweep=<name>/run_id=<id>`` folders with valid names, every one checked whole
        (:meth:`metadata`); temporary files excluded; files a compaction replaced skipped
        (only when the compacted file holds every trial id of theirs); of ``runs``, only
        :data:`RUN_FILE` (a run has one record: a second file beside it, a copy, would be read
        as a second record of the run; store check names it); and set aside, with a
        :class:`StoreWarning` (:attr:`set_aside`), trial files that lack the
        :data:`TRIAL_COLUMNS` or hold rows naming another run, run files that are not one
        run's record, and files whose column types cannot join the others'."""
        found = folder.glob("*.parquet") if folder is not None else (self.root / table).glob("sweep=*/run_id=*/*.parquet")
        good = []
        for p in sorted(found, key=str):
            if p.name.startswith(".") or not partition_ok(p.parent):
                continue  # temporary files; folders no run of ours could have (store check lists them)
            if table == "runs" and p.name != RUN_FILE:
                continue  # not the run's record (store check lists it)
            try:
                regular = not self.local or stat.S_ISREG(p.lstat().st_mode)
            except FileNotFoundError:
                continue  # gone since the listing (a compaction's delete)
            except OSError as exc:  # a folder this user may list but not search
                self._unreadable(p, exc)
                continue
            if regular:
                if self.metadata(p) is not None:
                    good.append(p)
            elif p not in self.set_aside:  # a FIFO, a device, a link: never opened
                self._set_aside(p, "not a regular file (the store writes only regular files), so it is not opened",
                                damaged=False)
        self._checked.commit()
        if table == "runs":
            for p in good:
                if self.metadata(p).num_rows != 1:
                    self._set_aside(p, f"not a run record: it holds {self.metadata(p).num_rows} rows, a run record one",
                                    damaged=False)
        else:
            # A run's trial rows are told apart by their trial ids: where a run's files have
            # them, one without is no file of its trials (stores of hand-made rows that carry no
            # trial id in any file still read, as they always did).
            identified = {p.parent for p in good if all(c in self._arrow_schema(p).names for c in TRIAL_COLUMNS)}
            for p in good:
                why = self._not_trials(p, p.parent in identified)
                if why is not None:
                    self._set_aside(p, f"{why}; set aside where it is (store check lists it)", damaged=False,
                                    foreign=True)
        good = [p for p in good if p not in self.set_aside]
        self.superseded = {**self.superseded, **self._replaced(good)}
        good = [p for p in good if p not in self.superseded]
        _, conflicts = self._unify(good)
        for p, conflict in conflicts.items():
            self._set_aside(p, f"{conflict} (fix or move the file; store check lists it)", damaged=False)
        return [p for p in good if p not in conflicts]

    def _not_trials(self, path: Path, identified: bool) -> str | None:
        """Why the checked file ``path`` of a run's trial folder holds no trial rows of that
        run, or None: it lacks a :data:`TRIAL_COLUMNS` column that the run's other files have
        (``identified``; every reader would count its rows as one more trial, of id null), or
        it has ``sweep``/``run_id`` columns of its own (the store keeps them in the folder
        names only) whose values name another run than its folder: rows copied in from
        elsewhere, which readers would file under this run."""
        meta = self.metadata(path)
        if (id(meta), identified) in self._why_not:
            return self._why_not[id(meta), identified]
        names = self._arrow_schema(path).names  # keeps meta alive: its id stays its own
        sweep, run_id = path.parent.parent.name.removeprefix("sweep="), path.parent.name.removeprefix("run_id=")
        lacking = [c for c in TRIAL_COLUMNS if c not in names]
        why = None
        if lacking and identified:
            why = (f"not a trial file of run {run_id} (sweep {sweep}): it lacks the column(s) {', '.join(lacking)}, "
                   "which every trial row of the run has")
        elif own := [c for c in ("sweep", "run_id") if c in names]:
            try:
                with path.open("rb") as fh:
                    stated = pq.read_table(fh, columns=own)
            except OSError as exc:  # checked whole moments ago: the file system refuses it now
                self._unreadable(path, exc)
                return None
            folder = {"sweep": sweep, "run_id": run_id}
            other = {c: sorted({str(v) for v in stated[c].unique().to_pylist() if v is not None} - {folder[c]})
                     for c in own}
            if any(other.values()):
                named = ", ".join(f"{c} {', '.join(v[:3])}" for c, v in other.items() if v)
                why = (f"its rows name another run ({named}) than the folder they lie in (run {run_id} of sweep "
                       f"{sweep}): rows copied in from elsewhere, not read as this run's")
        self._why_not[id(meta), identified] = why
        return why

    def _replaced(self, files: list[Path]) -> dict[Path, Path]:
        """``{old: compacted}`` for the files among ``files`` that a compacted file replaces:
        named (a plain file name, in its own folder) in its metadata, and every trial id of
        the old file in it. A name that is not plain, or a file whose rows the compacted
        one does not hold, is not replaced (and stays read)."""
        present = set(files)
        out = {}
        for p in files:
            raw = (self.metadata(p).metadata or {}).get(REPLACES_KEY)
            if raw is None:
                continue
            try:
                names = [n for n in json.loads(raw) if isinstance(n, str)]
            except ValueError:
                names = []
            olds = [p.parent / n for n in names if n == Path(n).name and not n.startswith(".") and n.endswith(".parquet")]
            olds = [o for o in olds if o in present and o != p]
            if not olds:
                continue
            held = set(_trial_ids(p))
            out.update({o: p for o in olds if set(_trial_ids(o)) <= held})
        return out
    def metadata(self, path: Path) -> pq.FileMetaData | None:
        """The Parquet footer of ``path`` once every page of the file has been read and
        checked (:func:`read_checked`), once per file version: a local version checked
        before, by any process, is known from the record of checked files
        (:mod:`results.checked`) and only its footer is read again. A damaged file gives
        None: it is moved to ``quarantine/`` or, when the store cannot be written, skipped
        where it is (:attr:`set_aside`)."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:  # e.g. a folder this user may not search
            self._unreadable(path, exc)
            return None
        key = (str(path), st.st_size, getattr(st, "st_mtime_ns", None) or getattr(st, "st_mtime", None),
               getattr(st, "st_ctime_ns", None), getattr(st, "st_ino", None))
        if key not in self._meta:
            try:
                if self.local and not self.check_every_file and self._checked.known(path, st):
                    # This version's pages were checked before; its sizes are checked again, as
                    # the limit may have been lowered since.
                    self._meta[key] = read_footer(path, self.max_file_bytes)
                else:
                    self._meta[key] = read_checked(path, self.max_file_bytes)
                    # A version younger than the clock's tick could still change unseen ("racy").
                    if self.local and time.time() - st.st_ctime > RACY_S:
                        self._checked.add(path, st)
            except Unreadable as exc:  # the file system said no: not damage, so not moved
                self._meta[key] = None
                self._unreadable(path, exc.__cause__ or exc)
            except TooLarge as exc:  # a size, not damage: skipped where it is, as an unreadable file is
                self._meta[key] = None
                self._set_aside(path, f"too large to read: {exc}; skipped where it is, not moved (set "
                                      f"{FILE_MAX_ENV} higher to read it, or delete it)", damaged=False, too_large=True)
            except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes the reader raise
                self._meta[key] = None
                if self.local:
                    self._checked.forget(path)
                self._damaged(path, exc)
        return self._meta[key]

    def _unreadable(self, path: Path, exc: BaseException) -> None:
        """Skip a file the file system would not let this process read, where it is."""
        if isinstance(exc, FileNotFoundError):
            return  # gone between the listing and the read (a compaction's delete): nothing to say
        reason = os_reason(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
        self._set_aside(path, f"cannot be read here ({reason}); skipped where it is, not moved: the file system "
                              "refused the read, which says nothing of the file's contents", damaged=False,
                        unreadable=True)

    def _damaged(self, path: Path, exc: BaseException) -> None:
        rel = path.relative_to(self.root)
        dest = self.root / QUARANTINE / rel
        reason = str(exc).strip() or type(exc).__name__
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            path.rename(dest)
        except FileNotFoundError:
            return
        except OSError as move:  # a read-only store (a snapshot, an archive, another user's)
            self._set_aside(path, f"damaged ({reason}); skipped where it is, as the store cannot be written here "
                                  f"({move.strerror or move})")
            return
        self.quarantined.append(dest)
        self._set_aside(path, f"damaged ({reason}); moved to {QUARANTINE}/{rel}")

    def _set_aside(self, path: Path, reason: str, damaged: bool = True, unreadable: bool = False,
                   too_large: bool = False, foreign: bool = False) -> None:
        """Record why ``path`` is left out of reads, and say it once."""
        if path not in self.set_aside:
            self.set_aside[path] = LeftOut(reason, damaged, unreadable, too_large, foreign)
            warnings.warn(f"Parquet file {path.relative_to(self.root)} left out: {reason}; its rows are not read, "
                          "the rest of the store still reads", StoreWarning, stacklevel=5)

    def check_every_version(self) -> None:
        """From now on read every file in full, whatever the record of checked versions
        says, including files this object has already read (``store check``)."""
        self.check_every_file = True
        self._meta.clear()
        self._unified.clear()

    def _unify(self, files: list[Path]) -> tuple[pa.Schema, dict]:
        """:func:`results.schemas.unify` of ``files``, remembered for the same files."""
        key = tuple(files)
        if key not in self._unified:
            self._unified[key] = unify([(p, self._arrow_schema(p), self.metadata(p).num_rows) for p in files])
        return self._unified[key]

    def _arrow_schema(self, path: Path) -> pa.Schema:
        meta = self.metadata(path)
        if id(meta) not in self._schemas:
            self._schemas[id(meta)] = (meta, meta.schema.to_arrow_schema())  # meta kept: its id stays its own
        return self._schemas[id(meta)][1]

    def schema(self, table: str, files: list[Path] | None = None) -> pa.Schema:
        """The unified Arrow schema of ``table``'s files (without the partition columns),
        by :func:`results.schemas.unify`.

        Raises:
            StoreError: ``files`` (given) include ones whose column types cannot join.
        """
        files = self._files(table) if files is None else files
        schema, conflicts = self._unify(files)
        if conflicts:
            path, conflict = next(iter(conflicts.items()))
            raise StoreError(f"the {table} file {path} does not fit the others: {conflict}")
        return schema

    def scan_trials(self) -> pl.LazyFrame:
        """All trial rows as a lazy frame, with ``sweep`` and ``run_id`` columns.

        Raises:
            StoreError: the store holds no trial files.
        """
        return self._scan("trials")

    def scan_runs(self) -> pl.LazyFrame:
        """All run records as a lazy frame.

        Raises:
            StoreError: the store holds no run records.
        """
        return self._scan("runs")

    def _scan(self, table: str, folder: Path | None = None) -> pl.LazyFrame:
        files = self._files(table, folder)
        if not files:
            where = f"run folder {folder}" if folder is not None else f"store at {self.root}"
            raise StoreError(f"no {table} in the {where}: run a sweep first")
        if not self.local:
            return pl.scan_pyarrow_dataset(self._dataset(table, files, partitioned=folder is None))
        schema = pl.from_arrow(self.schema(table, files).empty_table()).schema
        return pl.scan_parquet(
            files, schema=schema, hive_partitioning=folder is None,
            hive_schema={"sweep": pl.String, "run_id": pl.String} if folder is None else None,
            try_parse_hive_dates=False, missing_columns="insert", extra_columns="ignore",
            cast_options=pl.ScanCastOptions(**POLARS_CASTS),
        )

    def arrow_dataset(self, table: str = "trials"):
        """``table`` as one ``pyarrow.dataset.Dataset`` over the readable files, with the
        unified schema and the ``sweep``/``run_id`` partition columns.

        Raises:
            StoreError: no files, or incompatible column types.
        """
        files = self._files(table)
        if not files:
            raise StoreError(f"no {table} in the store at {self.root}: run a sweep first")
        return self._dataset(table, files)

    def _dataset(self, table: str, files: list[Path], partitioned: bool = True):
        import pyarrow.dataset as ds

        schema = self.schema(table, files)
        fs = None if self.local else self.root.fs
        paths = [str(p) if self.local else p.path for p in files]
        base = self.root / table
        if not partitioned:
            return ds.dataset(paths, schema=schema, format="parquet", filesystem=fs)
        return ds.dataset(paths, schema=pa.unify_schemas([schema, PARTITION_SCHEMA]), format="parquet",
                          filesystem=fs, partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
                          partition_base_dir=str(base) if self.local else base.path)

    def scan_run_trials(self, sweep: str, run_id: str, once: bool = True) -> pl.LazyFrame:
        """The trial rows of one run, with ``sweep`` and ``run_id`` columns.

        Args:
            once: one row per trial id: a run writes each trial once, so a repeated id is a
                file copied in or restored twice; the row of the latest file is kept.
                ``False``: every stored row (what ``store check`` and the completeness
                check count).

        Raises:
            StoreError: the run has no trial files.
        """
        folder = self.run_dir("trials", sweep, run_id)
        try:
            scan = self._scan("trials", folder)
        except StoreError:
            raise StoreError(f"run {run_id} of sweep {sweep} has no trials in the store at {self.root}") from None
        if once and "trial_id" in scan.collect_schema():  # files are read in name order; part names start with their write time
            scan = scan.unique(subset="trial_id", keep="last", maintain_order=True)
        return scan.with_columns(sweep=pl.lit(sweep), run_id=pl.lit(run_id))

    def run_trial_ids(self, sweep: str, run_id: str) -> set[str]:
        """The trial ids one run already holds (empty if none)."""
        try:
            return set(self.scan_run_trials(sweep, run_id).select("trial_id").collect()["trial_id"].to_list())
        except StoreError:
            return set()

    def read_run(self, sweep: str, run_id: str) -> dict:
        """The ``runs`` record of one run, as a dict.

        Raises:
            StoreError: no such run.
        """
        path = self.run_dir("runs", sweep, run_id) / RUN_FILE
        if not path.exists() and path not in self.set_aside:
            raise StoreError(f"no run {run_id!r} of sweep {sweep!r} in the store at {self.root}")
        if self.metadata(path) is None:
            raise StoreError(f"the record of run {run_id!r} of sweep {sweep!r} is {self.set_aside.get(path, 'gone')}")
        if self.metadata(path).num_rows != 1:
            raise StoreError(f"the record of run {run_id!r} of sweep {sweep!r} ({path}) is not a run record: it holds "
                             f"{self.metadata(path).num_rows} rows, a run record one")
        lacking = [c for c in RUN_COLUMNS if c not in self._arrow_schema(path).names]
        if lacking:
            raise StoreError(f"the record of run {run_id!r} of sweep {sweep!r} ({path}) is not a run record: it lacks "
                             f"the column(s) {', '.join(lacking)}")
        with path.open("rb") as fh:
            return pl.from_arrow(pq.read_table(fh)).row(0, named=True)

    def latest_run(self) -> tuple[str, str]:
        """``(sweep, run_id)`` of the run that started last.

        Raises:
            StoreError: the store holds no runs.
        """
        runs = self.scan_runs().select("sweep", "run_id", "started_at").sort("started_at").collect()
        return runs["sweep"][-1], runs["run_id"][-1]

    def sweep_of(self, run_id: str) -> str:
        """The sweep a run belongs to.

        Raises:
            StoreError: no run with that id.
        """
        found = self.scan_runs().filter(pl.col("run_id") == run_id).select("sweep").collect()
        if found.is_empty():
            raise StoreError(f"no run {run_id!r} in the store at {self.root}")
        return found["sweep"][0]

    def temp_files(self, folder: Path | None = None) -> list[TempFile]:
        """Temporary files in the run folders of ``trials`` and ``runs`` (or in one
        ``folder``), each with its writer and whether that writer is alive
        (:func:`temp_file_state`): a file in progress, or one left by a killed writer."""
        if not self.local:
            return []  # an object store has no temporary files: each file is one PUT
        if folder is not None:
            found = folder.glob(f"{TMP_PREFIX}*") if folder.is_dir() else []
        else:
            found = [p for table in ("trials", "runs") if (self.root / table).is_dir()
                     for p in (self.root / table).glob(f"sweep=*/run_id=*/{TMP_PREFIX}*")]
        return [temp_file_state(p) for p in sorted(found, key=str)]

    def clean_temp_files(self, folder: Path | None = None) -> list[Path]:
        """Delete the temporary files (of the whole store, or of one ``folder``) whose
        writer is provably gone, and only those; returns them. A file another process is
        writing (another run's, a compaction's) is never touched, nor is one whose writer
        cannot be checked from here (another host's, an older attnsweep's): ``store check``
        lists those."""
        removed = []
        for temp in self.temp_files(folder):
            if temp.state == "gone":
                try:
                    temp.path.unlink()
                except FileNotFoundError:
                    continue
                except OSError:  # a store this user cannot write: left for its owner
                    continue
                removed.append(temp.path)
        return removed


def store_root(root: str | os.PathLike) -> tuple[Path, bool]:
    """``(path, local)``: a local ``Path`` for folders and ``file://`` URIs, a ``UPath``
    (fsspec) for other URIs.

    Raises:
        StoreError: no fsspec backend for the URI's scheme (e.g. s3fs not installed).
    """
    text = os.fspath(root)
    if "://" not in text:
        return Path(text), True
    from upath import UPath

    try:
        path = UPath(text)
    except (ValueError, ImportError) as exc:
        raise StoreError(f"store {text!r}: no filesystem for this URI ({exc}); install its fsspec "
                         "backend (s3fs, gcsfs, adlfs...)") from exc
    if path.protocol in ("file", "local"):
        return Path(path.path), True
    return path, False


def host_tag() -> str:
    """This machine's name as temporary file names carry it (characters a file name keeps)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64]


def temp_name(final: str) -> str:
    """The temporary name of a file on its way to ``final``: hidden and not ending in
    ``.parquet`` (no reader's glob or discovery picks it up), naming this process and host."""
    return f"{TMP_PREFIX}{os.getpid()}@{host_tag()}~{uuid.uuid4().hex[:8]}-{final}.partial"


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (a zombie or another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and is another user's
        return True
    return True


def _lock_held(path: Path) -> bool | None:
    """Whether a process holds the OS lock on ``path`` (the lock its writer holds while
    writing): True, False, or None when it cannot be told (no locks on this file system,
    no access, no fcntl)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR)  # read-write: NFS emulates flock with a write lock
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # releases the lock if it was taken
    return False


def temp_file_state(path: Path) -> TempFile:
    """What is known of the writer of the temporary file ``path``.

    ``gone`` needs its pid to run no more on this host (the host its name carries) and nobody
    to hold the file's lock: the pid alone can mislead (it lives in another container's pid
    namespace on a shared volume), the lock alone too (a file system without working locks,
    some NFS set-ups, grants it whoever writes). Where no lock can be taken (no such locks
    here) the pid decides. ``writing``: its lock is held, or its pid runs here.
    """
    m = TMP_RE.match(path.name)
    if m is None:
        return TempFile(path, None, None, "unknown")
    pid, host = int(m[1]), m[2]
    if _lock_held(path):
        state = "writing"
    elif host != host_tag():
        state = "unknown"
    else:
        state = "writing" if _pid_alive(pid) else "gone"
    return TempFile(path, pid, host, state)


def write_parquet_atomic(table: pa.Table, path: Path) -> Path:
    """Write ``table`` to ``path`` so that readers see all of it or nothing: locally through
    a temporary file in the same folder (:func:`temp_name`) and a rename; on an object store
    in one PUT.

    The temporary file is locked (``flock``) by the writing process until it is renamed, so a
    cleaner can tell it from a dead writer's (:func:`temp_file_state`). Every page gets a CRC
    checksum, which :func:`read_checked` verifies."""
    if not isinstance(path, Path) or type(path).__module__.startswith("upath"):
        with path.open("wb") as fh:
            pq.write_table(table, fh, write_page_checksum=True)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(temp_name(path.name))
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without locks: the name's pid and host still tell
                pass
        # Written through our descriptor: closing another one would drop an NFS (POSIX) lock.
        with open(fd, "wb", closefd=False) as fh:
            pq.write_table(table, fh, write_page_checksum=True)
        os.fsync(fd)
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink(missing_ok=True)  # before the lock goes: nobody else may take it for a dead writer's
        except OSError:
            pass
        os.close(fd)
    return path


def os_reason(exc: OSError) -> str:
    """An OS error as people and scripts read it: ``No space left on device (ENOSPC)``."""
    name = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    text = exc.strerror or str(exc) or type(exc).__name__
    return f"{text} ({name})" if name and name not in text else text


def partition_ok(folder: Path) -> bool:
    """Whether ``folder`` is ``sweep=<name>/run_id=<id>`` with names a run of ours can have
    (no ``%``: pyarrow would decode ``%32`` as ``2`` and merge the folder into another run)."""
    sweep, run = folder.parent.name, folder.name
    return (sweep.startswith("sweep=") and run.startswith("run_id=")
            and bool(NAME_RE.match(sweep.removeprefix("sweep="))) and bool(NAME_RE.match(run.removeprefix("run_id="))))


def _trial_ids(path: Path) -> list:
    with path.open("rb") as fh:
        return pq.read_table(fh, columns=["trial_id"])["trial_id"].to_pylist()


def _read_at(fh, offset: int, n: int) -> bytes:
    """``n`` bytes of ``fh`` from ``offset``; file system errors raise :class:`Unreadable`."""
    try:
        fh.seek(offset)
        data = fh.read(n)
    except OSError as exc:
        raise Unreadable(os_reason(exc)) from exc
    if len(data) != n:
        raise Unreadable(f"it changed while it was read ({len(data)} of {n} bytes at {offset})")
    return data


class _Opened:
    """``path`` opened for reading, its size known; file system errors raise :class:`Unreadable`."""

    def __init__(self, path: Path):
        try:
            self.fh = path.open("rb")
            self.size = self.fh.seek(0, os.SEEK_END)
        except OSError as exc:
            raise Unreadable(os_reason(exc)) from exc

    def __enter__(self) -> _Opened:
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def check_format(opened: _Opened) -> int:
    """Check that an opened file can be a Parquet file before reading it: the magic bytes
    ``PAR1`` at both ends, and a footer that fits in the file (and in :data:`FOOTER_MAX`).
    Reads 12 bytes. Returns the footer's length.

    Raises:
        StoreError: it cannot be a Parquet file (the file is damaged, or another file).
        Unreadable: the file system refused the read.
    """
    size = opened.size
    if size < 12:
        raise StoreError(f"{size} bytes: too short to be a Parquet file (12 at least)")
    head, tail = _read_at(opened.fh, 0, 4), _read_at(opened.fh, size - 8, 8)
    if head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC:
        where = " and ".join(w for w, ok in (("start", head == PARQUET_MAGIC), ("end", tail[4:] == PARQUET_MAGIC))
                             if not ok)
        raise StoreError(f"not a Parquet file: no {PARQUET_MAGIC.decode()} magic bytes at its {where}")
    (footer,) = struct.unpack("<I", tail[:4])
    if footer > size - 12:
        raise StoreError(f"its footer length ({footer:,} bytes) does not fit in the file ({size:,} bytes)")
    if footer > FOOTER_MAX:
        raise StoreError(f"its footer claims {footer:,} bytes; a store file's is a few KB (at most {FOOTER_MAX:,} "
                         "are read)")
    return footer


def max_file_bytes() -> int:
    """The most a store file may hold on disk and decoded, in bytes: ``ATTNSWEEP_MAX_FILE_MB``
    MiB if set, else :data:`FILE_MAX_MB`.

    Raises:
        StoreError: the variable is not a whole number of MiB from 1 to 1,048,576 (1 TiB).
    """
    text = os.environ.get(FILE_MAX_ENV)
    if text is None or not text.strip():
        return FILE_MAX_MB * 2**20
    try:
        mb = int(text.strip())
    except ValueError:
        mb = 0
    if not 1 <= mb <= 2**20:
        raise StoreError(f"{FILE_MAX_ENV}={text.strip()[:40]!r}: give the most a store file may hold as a whole "
                         f"number of MiB from 1 to {2**20:,} (default {FILE_MAX_MB})")
    return mb * 2**20


VALUE_BYTES = 16
"""Bytes a decoded value may take beyond its page bytes: 8 for a number, 16 for a string
(polars keeps each as a 16-byte view; pyarrow as an offset and a validity bit)."""

# Parquet's enums (parquet.thrift) as the footer stores them, and pyarrow's names for them.
BYTE_ARRAY = 6  # Type
ENCODINGS = {"PLAIN": 0, "PLAIN_DICTIONARY": 2, "RLE": 3, "BIT_PACKED": 4, "DELTA_BINARY_PACKED": 5,
             "DELTA_LENGTH_BYTE_ARRAY": 6, "DELTA_BYTE_ARRAY": 7, "RLE_DICTIONARY": 8, "BYTE_STREAM_SPLIT": 9}
TYPES = {"BOOLEAN": 0, "INT32": 1, "INT64": 2, "INT96": 3, "FLOAT": 4, "DOUBLE": 5, "BYTE_ARRAY": 6,
         "FIXED_LEN_BYTE_ARRAY": 7}
DICTIONARY_ENCODINGS = frozenset({2, 8})
PREFIX_ENCODING = 7  # DELTA_BYTE_ARRAY: a value is a prefix of the one before it and a suffix
NO_DICTIONARY_FORM = frozenset({6, 7})
"""String encodings (DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY) pyarrow cannot decode into a
dictionary (``Not yet implemented``): a column using one is decoded as plain strings by
:func:`read_checked`."""


@dataclass(frozen=True)
class _Chunk:
    """What a footer says of one column chunk: where its pages lie and what they hold."""

    group: int
    column: int
    path: str
    physical: int | None  # Type
    width: int  # the fixed length of a FIXED_LEN_BYTE_ARRAY value, else 0
    start: int  # offset of its first page (dictionary page, if any)
    compressed: int  # bytes of its pages as stored, headers included
    uncompressed: int  # bytes of its pages uncompressed, headers included
    values: int
    encodings: frozenset[int]

    @property
    def where(self) -> str:
        return f"column {self.path} of row group {self.group}"


def _chunks_of(meta: pq.FileMetaData) -> list[_Chunk]:
    """The column chunks of a footer pyarrow has already read pages under (:func:`read_checked`
    passed on it): pyarrow aborts the process on some damaged chunk metadata when Python asks
    for it (``ColumnChunkMetaData``), so an unchecked footer is parsed by :func:`_footer_chunks`."""
    widths = [meta.schema.column(j).length or 0 for j in range(meta.num_columns)]
    out = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            cc = rg.column(j)
            start = [o for o in (cc.dictionary_page_offset if cc.has_dictionary_page else None, cc.data_page_offset)
                     if o is not None and o > 0]
            out.append(_Chunk(i, j, cc.path_in_schema, TYPES.get(cc.physical_type), widths[j],
                              min(start) if start else cc.data_page_offset, cc.total_compressed_size,
                              cc.total_uncompressed_size, cc.num_values,
                              frozenset(ENCODINGS.get(e, -1) for e in cc.encodings)))
    return out


def _plain_strings(chunks: list[_Chunk]) -> set[int]:
    """The string columns :func:`read_checked` decodes as plain strings (not as dictionaries)."""
    return {c.column for c in chunks if c.physical == BYTE_ARRAY and NO_DICTIONARY_FORM & c.encodings}


def decoded_estimate(meta: pq.FileMetaData | list[_Chunk]) -> int:
    """What a file decodes to at most, in bytes, from its footer alone (``meta``, of a file
    :func:`read_checked` passed, or its chunks): each column chunk's pages uncompressed
    (``total_uncompressed_size``, which :func:`read_checked` holds its page headers to) plus
    :data:`VALUE_BYTES` (or the fixed length, if longer) per value. Strings from a dictionary
    can expand beyond this; :func:`read_checked` keeps them as dictionaries and measures them
    before any reader expands them, except in a column it cannot (a :data:`NO_DICTIONARY_FORM`
    encoding), where a chunk with dictionary or prefix-encoded strings is counted at its values
    times its bytes: no value is longer than the bytes its chunk holds."""
    chunks = _chunks_of(meta) if isinstance(meta, pq.FileMetaData) else meta
    plain = _plain_strings(chunks)
    total = 0
    for c in chunks:
        pages, values = max(c.uncompressed, 0), max(c.values, 0)
        total += pages + values * max(VALUE_BYTES, c.width)
        if c.column in plain and c.encodings & (DICTIONARY_ENCODINGS | {PREFIX_ENCODING}):
            total += values * pages
    return total


def check_sizes(chunks: list[_Chunk], rows: int, size: int, footer: int, limit: int, decoded: bool = True) -> None:
    """Check, before any page is read, that a file of ``size`` bytes whose footer (of
    ``footer`` bytes) lists ``chunks`` and ``rows`` is within ``limit`` bytes (on disk, and,
    if ``decoded``, by :func:`decoded_estimate`), and that each chunk lies in the file's data
    (between the leading magic and the footer).

    Raises:
        TooLarge: beyond ``limit`` (not damage: skipped in place).
        StoreError: a column chunk outside the data (damage).
    """
    data_end = size - footer - 8
    for c in chunks:
        if c.compressed == 0:
            continue  # nothing stored (pyarrow writes a chunk of no rows of a null column so, at offset 0)
        if c.start < 4 or c.compressed < 0 or c.start + c.compressed > data_end:
            raise StoreError(f"its footer puts {c.where} at bytes {c.start:,} to {c.start + c.compressed:,}, "
                             f"outside its data (bytes 4 to {data_end:,})")
    limit_mb = f"{limit // 2**20:,} MiB"
    if size > limit:
        raise TooLarge(f"it is {size:,} bytes on disk, more than the {limit_mb} a store file may hold")
    estimate = decoded_estimate(chunks) if decoded else 0
    if estimate > limit:
        pages = sum(max(c.uncompressed, 0) for c in chunks)
        raise TooLarge(f"its footer says it decodes to about {estimate:,} bytes (pages of {pages:,} bytes "
                       f"uncompressed, {_rows(rows)}), more than the {limit_mb} a store file may hold")


def read_footer(path: Path, limit: int | None = None) -> pq.FileMetaData:
    """The Parquet footer of a file :func:`read_checked` passed before, parsed from its own
    bytes after :func:`check_format`, and :func:`check_sizes` against ``limit`` bytes (default
    :func:`max_file_bytes`: it may be lower now); reads the footer only.

    Raises:
        Unreadable: the file system refused a read.
        TooLarge: the file holds more than ``limit`` bytes, on disk or decoded.
        Exception: the file is damaged (see :func:`read_checked`).
    """
    limit = max_file_bytes() if limit is None else limit
    with _Opened(path) as opened:
        footer = check_format(opened)
        tail = _read_at(opened.fh, opened.size - footer - 8, footer + 8)
        size = opened.size
    meta = pq.read_metadata(pa.BufferReader(tail))
    check_sizes(_chunks_of(meta), meta.num_rows, size, footer, limit)
    return meta


def read_checked(path: Path, limit: int | None = None) -> pq.FileMetaData:
    """Read every page of the Parquet file at ``path`` and return its footer, reading and
    decoding at most ``limit`` bytes (default :func:`max_file_bytes`).

    In order: :func:`check_format` looks at the file's first and last 12 bytes, so a large
    file that is no Parquet file is refused at once; the footer is read and parsed from its own
    bytes (:func:`_footer_chunks`), and :func:`check_sizes` refuses a file larger than
    ``limit`` on disk. Then the file is held in memory (at most ``limit`` bytes) and every page
    header is parsed (:func:`_check_pages`): pages must tile each column chunk and claim no
    more bytes and values than the footer says, so the footer's sizes bound what
    decompression allocates; and :func:`check_sizes` refuses a file whose footer says it
    decodes to more than ``limit``, before any page is decompressed.
    Pages written with a CRC checksum (every file this store writes: see
    :func:`write_parquet_atomic`) are verified against it; every page is decompressed and
    decoded by pyarrow, strings kept as dictionaries, so the bytes they expand to in a reader
    (a short dictionary repeated over many rows) are counted (:func:`_plain_nbytes`) before
    anything expands them; then polars decodes it all (local reads are polars', and it parses
    the footer more strictly); the rows decoded must add up to the footer's count. Files
    written before page checksums get the decoding only. Every read of the file system is made
    here, and the parsing only from memory, so a file system error (:class:`Unreadable`) is
    told apart from damage: pyarrow reports both as ``OSError``.

    A single changed byte anywhere in a file this store wrote either fails this or changes
    no row a read returns (tests/results/test_damage.py tries every byte).

    Raises:
        Unreadable: the file system refused a read (no permission, an I/O error).
        TooLarge: the file holds more than ``limit`` bytes, on disk or decoded.
        Exception: the file is damaged (any error the Parquet readers raise on it:
            ``OSError``, ``pyarrow.ArrowException``, ``UnicodeDecodeError``, polars'
            ``ComputeError``...), or :class:`StoreError` when it is no Parquet file, its
            footer or a page header does not parse, its pages disagree with its footer, or
            the row counts disagree.
    """
    limit = max_file_bytes() if limit is None else limit
    with _Opened(path) as opened:
        footer = check_format(opened)
        chunks, rows = _footer_chunks(_read_at(opened.fh, opened.size - footer - 8, footer))
        check_sizes(chunks, rows, opened.size, footer, limit, decoded=False)
        data = _read_at(opened.fh, 0, opened.size)
    # The page headers first: a footer its pages contradict is damage, whatever it claims.
    _check_pages(data, chunks)
    check_sizes(chunks, rows, len(data), footer, limit)
    # Every string column as a dictionary (pyarrow ignores it where the column is no string
    # or binary, e.g. a decimal, whose values are fixed width); extension types such as JSON are
    # read as their strings, so that they too stay dictionaries. The rest is bounded in
    # decoded_estimate.
    plain = _plain_strings(chunks)
    strings = sorted({c.column for c in chunks if c.physical == BYTE_ARRAY} - plain)
    pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True, read_dictionary=strings,
                        **_NO_EXTENSIONS)
    meta = pf.metadata
    decoded = expanded = 0
    for i in range(meta.num_row_groups):
        table = pf.read_row_group(i)
        table.validate(full=True)  # dictionary indices in range: kept as dictionaries, they are not looked up
        decoded += table.num_rows
        expanded += sum(_plain_nbytes(chunk) for column in table.columns for chunk in column.chunks)
        del table
        if expanded > limit:
            raise TooLarge(f"it expands to at least {expanded:,} bytes when read ({_rows(meta.num_rows)}: strings "
                           f"of a dictionary repeated row after row), more than the {limit // 2**20:,} MiB a store "
                           "file may hold")
    if decoded != meta.num_rows:
        raise StoreError(f"its pages hold {decoded} rows, its footer says {meta.num_rows}")
    # polars parses the footer and pages itself (local reads are polars'), and more strictly.
    if pl.read_parquet(io.BytesIO(data), use_statistics=False).height != decoded:
        raise StoreError(f"polars reads another row count than its footer's {meta.num_rows}")
    return meta


_NO_EXTENSIONS = ({"arrow_extensions_enabled": False}
                  if "arrow_extensions_enabled" in inspect.signature(pq.ParquetFile).parameters else {})
"""pyarrow 20 reads JSON columns as an extension type, and keeps no dictionary for them; older ones as strings."""


def _rows(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


def _plain_nbytes(arr: pa.Array) -> int:
    """Bytes ``arr`` takes once its dictionaries are expanded, as a reader that keeps no
    dictionary (pyarrow's default, DuckDB through it) makes it: a dictionary array's
    values looked up per row, lists and structs through their children."""
    import pyarrow.compute as pc  # here: 50 ms of import that the light commands' start-up need not pay

    t = arr.type
    if pa.types.is_dictionary(t):
        lengths = pc.binary_length(arr.dictionary)
        return int(pc.sum(pc.take(lengths, arr.indices)).as_py() or 0) + 8 * len(arr)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_fixed_size_list(t):
        return 8 * len(arr) + _plain_nbytes(arr.values)
    if pa.types.is_struct(t):
        return len(arr) // 8 + sum(_plain_nbytes(arr.field(k)) for k in range(t.num_fields))
    return arr.nbytes


# -- Thrift ---------------------------------------------------------------------------------
# A footer (FileMetaData) and a page header (PageHeader) are Thrift structs in the compact
# protocol (parquet.thrift). The sizes, offsets and counts in them are read here, so that no
# page is decompressed on the word of a footer that its pages contradict, and no footer is
# handed to pyarrow's Python metadata objects before pyarrow's reader has accepted it (some
# damaged chunk metadata aborts the process there instead of raising).

class _Thrift(ValueError):
    """Bytes that are no Thrift compact struct (a damaged footer or page header)."""


def _varint(b, i: int) -> tuple[int, int]:
    if i < len(b) and b[i] < 0x80:  # most numbers in a footer take one byte
        return b[i], i + 1
    out = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise _Thrift("it runs past its end")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7


def _int(b, i: int, kind: int, depth: int = 0) -> tuple[int, int]:
    """An integer of compact type ``kind`` (byte, i16, i32, i64) at ``i``."""
    if kind == 3:
        if i >= len(b):
            raise _Thrift("it runs past its end")
        return (b[i] ^ 0x80) - 0x80, i + 1
    if kind not in (4, 5, 6):
        raise _Thrift(f"a number is of Thrift type {kind}")
    raw, i = _varint(b, i)
    return (raw >> 1) ^ -(raw & 1), i


def _text(b, i: int, kind: int, depth: int = 0) -> tuple[str, int]:
    if kind != 8:
        raise _Thrift(f"a string is of Thrift type {kind}")
    n, i = _varint(b, i)
    if i + n > len(b):
        raise _Thrift("it runs past its end")
    return bytes(b[i:i + n]).decode("utf-8", "replace"), i + n


def _skip(b, i: int, kind: int, depth: int) -> int:
    """The offset after a value of compact type ``kind`` at ``i`` (a bool field's value is in
    its header: see :func:`_element` for a bool in a collection)."""
    if kind in (4, 5, 6):  # the most frequent first
        return _varint(b, i)[1]
    if depth > 16:
        raise _Thrift("it nests too deep")
    if kind in (1, 2):
        return i
    if kind == 3:
        return i + 1
    if kind == 7:
        return i + 8
    if kind == 8:
        return _text(b, i, kind)[1]
    if kind in (9, 10, 11):
        return _collection(b, i, kind, depth, None)[1]
    if kind == 12:
        return _fields(b, i, depth + 1, {})[1]
    raise _Thrift(f"it holds an unknown Thrift type {kind}")


def _element(b, i: int, kind: int, depth: int) -> int:
    """The offset after an element of a list or map: a bool there takes a byte of its own."""
    i = i + 1 if kind in (1, 2) else _skip(b, i, kind, depth + 1)
    if i > len(b):
        raise _Thrift("it runs past its end")
    return i


def _collection(b, i: int, kind: int, depth: int, each) -> tuple[list, int]:
    """A list or set (``each(b, i, elem kind, depth) -> (value, i)`` reads an element; None
    skips them), or a map (skipped)."""
    if kind == 11:
        n, i = _varint(b, i)
        if n:
            _room(b, i, 2 * n)
            kv, i = b[i], i + 1
            for _ in range(n):
                i = _element(b, _element(b, i, kv >> 4, depth), kv & 15, depth)
        return [], i
    if i >= len(b):
        raise _Thrift("it runs past its end")
    n, elem, i = b[i] >> 4, b[i] & 15, i + 1  # size and element type in one byte; size 15: a varint follows
    if n == 15:
        n, i = _varint(b, i)
    _room(b, i, n)
    out = []
    for _ in range(n):
        if each is None:
            i = _element(b, i, elem, depth)
        else:
            value, i = each(b, i, elem, depth + 1)
            out.append(value)
    return out, i


def _room(b, i: int, n: int) -> None:
    """Refuse a collection of ``n`` elements that cannot fit in the bytes left (each takes one
    at least), before looping over them."""
    if n > len(b) - i:
        raise _Thrift(f"it claims {n:,} elements in {len(b) - i:,} bytes")


def _fields(b, i: int, depth: int, read: dict) -> tuple[dict, int]:
    """The struct at ``i``: the fields in ``read`` (field id -> reader of its value, called as
    ``reader(b, i, kind, depth)``), the others skipped; and the offset after it."""
    if depth > 16:
        raise _Thrift("it nests too deep")
    got: dict = {}
    fid = 0
    while True:
        if i >= len(b):
            raise _Thrift("it runs past its end")
        head, i = b[i], i + 1
        if head == 0:
            return got, i
        kind, delta = head & 15, head >> 4
        if delta:
            fid += delta
        else:
            fid, i = _int(b, i, 4)
        if fid in read and kind not in (1, 2):
            got[fid], i = read[fid](b, i, kind, depth)
        else:
            i = _skip(b, i, kind, depth)


def _struct_of(read: dict):
    def reader(b, i: int, kind: int, depth: int) -> tuple[dict, int]:
        if kind != 12:
            raise _Thrift(f"a struct is of Thrift type {kind}")
        return _fields(b, i, depth + 1, read)
    return reader


def _list_of(each):
    def reader(b, i: int, kind: int, depth: int) -> tuple[list, int]:
        if kind not in (9, 10):
            raise _Thrift(f"a list is of Thrift type {kind}")
        return _collection(b, i, kind, depth, each)
    return reader


_PAGE_HEADER = {1: _int, 2: _int, 3: _int, 5: _struct_of({1: _int}), 7: _struct_of({1: _int}),
                8: _struct_of({1: _int})}
"""PageHeader: type, uncompressed and compressed size; the number of values of a data page
(v1, v2) or a dictionary page."""
_DICTIONARY_PAGE = 2  # PageType
_COLUMN_META = {1: _int, 2: _list_of(_int), 3: _list_of(_text), 5: _int, 6: _int, 7: _int, 9: _int, 11: _int}
"""ColumnMetaData: type, encodings, path, values, uncompressed and compressed size, data and
dictionary page offsets."""
_FILE_META = {1: _int, 2: _list_of(_struct_of({1: _int, 2: _int, 5: _int})), 3: _int,
              4: _list_of(_struct_of({1: _list_of(_struct_of({3: _struct_of(_COLUMN_META)})), 3: _int}))}
"""FileMetaData: version, the schema (type, fixed length, children), rows, row groups (their
chunks, rows); all four are required by the format."""


def _footer_chunks(footer: bytes) -> tuple[list[_Chunk], int]:
    """The column chunks a footer lists, and its row count, parsed here (the footer's bytes
    only, without the trailing length and magic).

    Raises:
        StoreError: the footer does not parse, or its chunks do not match its schema (damage).
    """
    try:
        meta, _ = _fields(memoryview(footer), 0, 0, _FILE_META)
    except _Thrift as exc:
        raise StoreError(f"its footer does not parse: {exc}") from None
    lacking = [name for fid, name in ((1, "version"), (2, "schema"), (3, "num_rows"), (4, "row_groups"))
               if fid not in meta]
    if lacking or not meta[2] or any(1 not in g or 3 not in g for g in meta[4]):
        raise StoreError(f"its footer is no Parquet footer: it lacks {', '.join(lacking) or 'a required field'}")
    schema = meta[2]
    leaves = [e for e in schema[1:] if not e.get(5)]  # the root and groups have children
    chunks = []
    for g, group in enumerate(meta[4]):
        columns = group[1]
        if len(columns) != len(leaves):
            raise StoreError(f"its footer lists {len(columns)} column chunks in row group {g}, its schema "
                             f"{len(leaves)} columns")
        for j, (column, leaf) in enumerate(zip(columns, leaves)):
            cm = column.get(3)
            if cm is None or any(k not in cm for k in (5, 6, 7, 9)):
                raise StoreError(f"its footer lacks the sizes of column {j} of row group {g}")
            offsets = [o for o in (cm.get(11), cm[9]) if o is not None and o > 0]
            chunks.append(_Chunk(g, j, ".".join(cm.get(3) or []) or str(j), cm.get(1, leaf.get(1)), leaf.get(2) or 0,
                                 min(offsets) if offsets else cm[9], cm[7], cm[6], cm[5],
                                 frozenset(cm.get(2) or ())))
    return chunks, meta[3]


def _check_pages(data: bytes, chunks: list[_Chunk]) -> None:
    """Parse every page header of every column chunk: the pages must tile the chunk, their
    uncompressed sizes (with headers) add up to no more than the footer's
    ``total_uncompressed_size``, and their values to the footer's ``num_values``, so the
    footer's sizes (:func:`check_sizes`) bound what decoding allocates.

    Raises:
        StoreError: a page header that does not parse, or pages that contradict the footer.
    """
    for c in chunks:
        pos, end = c.start, c.start + c.compressed
        chunk = memoryview(data)[:end]  # a header may not run past its chunk
        uncompressed = values = 0
        while pos < end:
            try:
                header, after = _fields(chunk, pos, 0, _PAGE_HEADER)
            except _Thrift as exc:
                raise StoreError(f"a page header of {c.where} at byte {pos:,} does not parse: {exc}") from None
            size, packed = header.get(2), header.get(3)
            if size is None or packed is None or size < 0 or packed < 0 or after + packed > end:
                raise StoreError(f"the page at byte {pos:,} of {c.where} does not fit its column chunk")
            uncompressed += after - pos + size
            if header.get(1) != _DICTIONARY_PAGE:
                values += (header.get(5) or {}).get(1) or (header.get(8) or {}).get(1) or 0
            pos = after + packed
        if uncompressed > c.uncompressed:
            raise StoreError(f"the pages of {c.where} decompress to {uncompressed:,} bytes, its footer says "
                             f"{c.uncompressed:,}")
        if values != c.values:
            raise StoreError(f"the pages of {c.where} hold {values:,} values, its footer says {c.values:,}")


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) as an Arrow table with exactly ``schema``'s columns and types."""
    return pa.Table.from_pylist(list(rows), schema=schema)
