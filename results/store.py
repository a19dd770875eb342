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

Reading is defensive (:mod:`results.parquet_check`): every file is read in full and checked
before a read uses it (page CRC checksums, which every file written here carries, and a
decode by pyarrow and by polars; :func:`read_checked`, after its magic bytes and footer
length are checked), once per file version (:mod:`results.checked`). A file is never read or
decoded beyond a limit (:func:`max_file_bytes`): its footer, parsed from its own bytes, and
its page headers say what it holds and decodes to before any page is decompressed, and a
file beyond the limit is skipped where it is (:class:`TooLarge`). A damaged file is moved to ``quarantine/`` under the
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
import fnmatch
import json
import os
import re
import socket
import stat
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

from attnsweep.results.checked import CheckedFiles
from attnsweep.results.errors import StoreError
from attnsweep.results.parquet_check import (FILE_MAX_ENV, TooLarge, Unreadable, max_file_bytes, os_reason, read_checked,
                                   read_footer)
from attnsweep.results.parquet_check import decoded_estimate  # noqa: F401 - results/integrity.py imports it from here still
from attnsweep.results.schemas import POLARS_CASTS, unify

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")  # \Z: "$" would also take a name ending in a newline
TMP_PREFIX = ".tmp-"
TMP_RE = re.compile(r"\.tmp-(\d+)@([A-Za-z0-9._-]*)~([0-9a-f]{8})-(.+)\.partial\Z")
"""A temporary file's name: ``.tmp-<pid>@<host>~<8 hex>-<final name>.partial``, naming the
process that writes it (:func:`temp_name`), which also holds an OS lock on it while it writes."""
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
STORE_SCHEMES = ("file", "memory", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "hdfs", "webhdfs",
                 "sftp", "ssh", "ftp", "smb", "oci", "oss")
"""URI schemes a store can have: fsspec's file systems and object stores, which list folders
(each needs its fsspec package, e.g. s3fs for ``s3://``). Others that fsspec knows cannot hold
a store: ``data://`` (one value in the URI), ``http(s)://`` (no listing), archives, caches."""


class StoreWarning(UserWarning):
    """A store file was left out of a read: damaged (moved to the quarantine folder, or
    skipped where it is in a store that cannot be written), unreadable here (the file
    system refused the read: skipped where it is), or with a column type that cannot join
    the other files'."""


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
        StoreError: a URI whose scheme cannot hold a store (:data:`STORE_SCHEMES`) or no
            installed fsspec backend handles, or an ``ATTNSWEEP_MAX_FILE_MB`` that is not a
            whole number of MiB in range (:func:`~results.parquet_check.max_file_bytes`).
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

    def holds(self, path: str | os.PathLike) -> bool:
        """Whether ``path``, its links followed, is inside this store's folder (or is it), for
        a local store. Folders are compared by device and inode, so another path to the store
        (a link to a folder above it, a bind mount) is inside too; a path in a store that does
        not exist yet, or in a remote one, is not.

        Args:
            path: a file or folder; for a descriptor of this process (``/dev/stdout``) the file
                it is open on.
        """
        if not self.local:
            return False
        try:
            root = os.stat(self.root)
        except OSError:
            return False
        real = Path(os.path.realpath(path))
        for folder in (real, *real.parents):
            try:
                st = os.stat(folder)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino):
                return True
        return False

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
        return base.exists() and any(not p.name.startswith(".") for p in listing(base, "*/*/*.parquet"))

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
        if not self.local:
            # fsspec keeps one client per URI and process, with a cache of listings (s3fs,
            # gcsfs) shared by every store object: another process's files would stay unseen.
            self.root.fs.invalidate_cache()
        try:
            found = sorted(listing(folder, "*.parquet") if folder is not None
                           else listing(self.root / table, "sweep=*/run_id=*/*.parquet"), key=str)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - an object store client's own errors, as a local listing's OSError
            raise client_error(exc) from exc
        good = []
        for p in found:
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
        except Exception as exc:  # noqa: BLE001 - a folder this user may not search; an object store client's
            self._unreadable(path, exc)  # own errors (botocore's, the server out of reach): no damage
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
        return pl.scan_parquet(  # glob=False: a '[', '*' or '?' in a path is part of the name
            files, glob=False, schema=schema, hive_partitioning=folder is None,
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

    def resolve_run(self, name: str) -> tuple[str, int]:
        """``name`` as a run id, and how many runs its sweep has when it named a sweep: a run
        id is itself (count 0); a sweep's name means that sweep's latest run by start; a
        name that is neither comes back as it is (count 0), for the caller's own message."""
        try:
            runs = self.scan_runs().select("sweep", "run_id", "started_at").collect()
        except StoreError:
            return name, 0
        if name in set(runs["run_id"].to_list()):
            return name, 0
        mine = runs.filter(pl.col("sweep") == name).sort("started_at")
        return (name, 0) if mine.is_empty() else (mine["run_id"][-1], mine.height)

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
            found = listing(folder, f"{TMP_PREFIX}*") if folder.is_dir() else []
        else:
            found = [p for table in ("trials", "runs") if (self.root / table).is_dir()
                     for p in listing(self.root / table, f"sweep=*/run_id=*/{TMP_PREFIX}*")]
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
        StoreError: a URI whose scheme cannot hold a store (not in :data:`STORE_SCHEMES`),
            naming the schemes a store can have; no fsspec backend for the URI's scheme (e.g.
            s3fs not installed).
    """
    text = os.fspath(root)
    if "://" not in text:
        return Path(text), True
    scheme = text.split("://", 1)[0]
    if scheme.lower() not in STORE_SCHEMES:
        import fsspec

        known = any(part in fsspec.available_protocols() for part in re.split("::|:", scheme.lower()))
        unknown = "" if known else " (no filesystem for this URI)"  # a typo, or a backend's name it lacks
        raise StoreError(f"--store {text!r}: a store cannot live at a {scheme}:// URI{unknown}; give a folder or a "
                         f"URI of a file system or object store: {', '.join(f'{s}://' for s in STORE_SCHEMES)}")
    from upath import UPath

    try:
        path = UPath(text)
    except (ValueError, ImportError) as exc:
        raise StoreError(f"store {text!r}: no filesystem for this URI ({exc}); install its fsspec "
                         "backend (s3fs, gcsfs, adlfs...)") from exc
    if path.protocol in ("file", "local"):
        return Path(path.path), True
    return path, False


_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP, errno.EACCES, errno.EPERM)
_IGNORED_TYPES = (FileNotFoundError, NotADirectoryError, PermissionError)  # fsspec's carry no errno


def listing(base: Path, pattern: str) -> list[Path]:
    """The paths under ``base`` whose names match ``pattern`` (``/``-separated parts, each an
    ``fnmatch`` pattern matched against one level's names), with ``base`` itself taken
    literally: a store at ``results [v2]`` or ``st*`` lists its own files, never those of a
    folder its name matches as a pattern (fsspec's glob, which a remote ``Path.glob`` calls,
    would expand the whole path). Folders that vanish or cannot be searched are skipped, as
    ``Path.glob`` skips them; an object store client's own errors propagate."""
    level = [base]
    for part in pattern.split("/"):
        found = []
        for folder in level:
            try:
                entries = list(folder.iterdir())
            except OSError as exc:
                if isinstance(exc, _IGNORED_TYPES) or exc.errno in _IGNORED:
                    continue
                raise
            found += [p for p in entries if fnmatch.fnmatchcase(p.name, part)]
        level = found
    return level


def listing_tree(base: Path) -> list[Path]:
    """Every path below ``base`` (``base`` taken literally, as in :func:`listing`), without
    entering linked folders."""
    out, folders = [], [base]
    while folders:
        folder = folders.pop()
        try:
            entries = list(folder.iterdir())
        except OSError as exc:
            if isinstance(exc, _IGNORED_TYPES) or exc.errno in _IGNORED:
                continue
            raise
        out += entries
        folders += [p for p in entries if not p.is_symlink() and p.is_dir()]
    return out


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
        # An object store has no rename. The file is made whole in memory and sent in one PUT
        # (fsspec's pipe_file: s3fs aborts a multipart upload that fails), so a failure midway
        # leaves no object; path.open("wb") would commit the bytes written so far on any
        # exception (fsspec's file closes, i.e. uploads, on leaving its with block).
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, write_page_checksum=True)
        try:
            path.fs.pipe_file(path.path, sink.getvalue().to_pybytes())
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client's own errors, as the OSError a local disk raises
            raise client_error(exc) from exc  # callers rescue refused rows on OSError (results/writer.py)
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


def client_error(exc: Exception) -> OSError:
    """An object store client's own error as the ``OSError`` a local file system raises (botocore
    raises ``EndpointConnectionError``, no ``OSError``, when the server is out of reach), so that
    what copes with a refused write or listing of a local store copes with it too."""
    return OSError(f"{type(exc).__name__}: {exc}")


def partition_ok(folder: Path) -> bool:
    """Whether ``folder`` is ``sweep=<name>/run_id=<id>`` with names a run of ours can have
    (no ``%``: pyarrow would decode ``%32`` as ``2`` and merge the folder into another run)."""
    sweep, run = folder.parent.name, folder.name
    return (sweep.startswith("sweep=") and run.startswith("run_id=")
            and bool(NAME_RE.match(sweep.removeprefix("sweep="))) and bool(NAME_RE.match(run.removeprefix("run_id="))))


def _trial_ids(path: Path) -> list:
    with path.open("rb") as fh:
        return pq.read_table(fh, columns=["trial_id"])["trial_id"].to_pylist()


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) as an Arrow table with exactly ``schema``'s columns and types."""
    return pa.Table.from_pylist(list(rows), schema=schema)
