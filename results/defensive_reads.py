"""Defensive reading of the store's files: which files a read uses, each read in full and
checked once per file version, and why the others are left out (damaged files moved to
quarantine, the rest set aside where they are, each with a :class:`StoreWarning`).

Every file is read in full and checked before a read uses it (:mod:`results.parquet_check`:
page CRC checksums, which every file written here carries, and a decode by pyarrow and by
polars; :func:`read_checked`, after its magic bytes and footer length are checked), once per
file version (:mod:`results.checked`). A file is never read or decoded beyond a limit
(:func:`max_file_bytes`): its footer, parsed from its own bytes, and its page headers say what
it holds and decodes to before any page is decompressed, and a file beyond the limit is
skipped where it is (:class:`TooLarge`). A damaged file is moved to ``quarantine/`` under the
store root with a :class:`StoreWarning` (skipped where it is when the store cannot be
written), and the rest still reads. A trial file that holds no trial rows of its run (no
trial id where the run's other files have one, or rows naming another run) is set aside, and
a run's record is its ``run.parquet`` alone. A file the file system refuses to read (a
permission, an I/O error) is not known to be damaged: it is skipped where it is, with a
warning naming the reason. Files written by different versions read as one table
(:mod:`results.schemas`): a column missing from older files reads as null, an int column that
became a float reads as float, an all-null column takes the other files' type; a file whose
column type cannot join the others' is set aside, named with the column and both types.
:attr:`DefensiveReader.set_aside` lists what a read left out and why. A file written by
``store compact`` names the files it replaces in its metadata; those are skipped if a crash
left them behind.
"""

from __future__ import annotations

import stat
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.results.checked import CheckedFiles
from attnsweep.results.curve_commits import committed_names
from attnsweep.results.curves_table import schema_problem
from attnsweep.results.errors import StoreError
from attnsweep.results.file_limits import FILE_MAX_ENV, TooLarge, max_file_bytes
from attnsweep.results.layout import QUARANTINE, REPLACES_KEY, RUN_FILE, TRIAL_COLUMNS, partition_ok
from attnsweep.results.parquet_check import Unreadable, os_reason, read_checked, read_footer
from attnsweep.results.record_text import load_json
from attnsweep.results.roots import client_error, listing
from attnsweep.results.schemas import unify

MAX_REPLACES_BYTES = 16 << 20
"""The most bytes of a compacted file's list of the files it replaces that are parsed (a name
is about 40 bytes: 400,000 part files; beyond it the list is read as damaged, and the files it
names stay read)."""

RACY_S = 2.0
"""A file version changed less than this many seconds ago is not recorded as checked: a
change within the file system clock's tick would keep its size and times."""


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


class DefensiveReader:
    """The reading side of a store rooted at ``root`` (a local ``Path``, or a ``UPath`` when
    not ``local``): the files a read uses, each checked whole once per version, and the
    record of those it left out (:attr:`set_aside`, :attr:`quarantined`, :attr:`superseded`).

    Raises:
        StoreError: an ``ATTNSWEEP_MAX_FILE_MB`` that is not a whole number of MiB in range
            (:func:`~results.file_limits.max_file_bytes`).
    """

    def __init__(self, root: Path, local: bool, check_every_file: bool = False):
        self.root, self.local = root, local
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
        """Files a read of this object left out, with why: damaged (moved, or skipped in a
        store that cannot be written) or with a column type that cannot join the others'."""
        self.uncommitted: dict[Path, Path] = {}
        """``curves`` files no trial file commits (:mod:`results.curve_commits`), skipped by
        reads: path -> its run folder."""
        self.superseded: dict[Path, Path] = {}
        """Files a compacted file replaces (and holds every row of), skipped by reads: old -> new."""

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
            found = sorted(
                listing(folder, "*.parquet")
                if folder is not None
                else listing(self.root / table, "sweep=*/run_id=*/*.parquet"),
                key=str,
            )
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - an object store client's own errors, as a local listing's OSError
            raise client_error(exc) from exc
        good = []
        for p in found:
            if p.name.startswith(".") or not partition_ok(p.parent):
                continue  # temporary files; folders no run of ours could have (store check lists them)
            try:
                str(p).encode("utf-8")
            except UnicodeEncodeError:  # the readers take text paths; the store writes none such
                self._set_aside(
                    p,
                    "its name is not UTF-8 text (the store writes none such), so it is not read; rename or remove it",
                    damaged=False,
                    unreadable=True,
                )
                continue
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
                self._set_aside(
                    p,
                    "not a regular file (the store writes only regular files), so it is not opened",
                    damaged=False,
                )
        self._checked.commit()
        if table == "runs":
            for p in good:
                if self.metadata(p).num_rows != 1:
                    self._set_aside(
                        p,
                        f"not a run record: it holds {self.metadata(p).num_rows} rows, a run record one",
                        damaged=False,
                    )
        else:
            # A run's trial rows are told apart by their trial ids: where a run's files have
            # them, one without is no file of its trials (stores of hand-made rows that carry no
            # trial id in any file still read, as they always did).
            identified = {p.parent for p in good if all(c in self._arrow_schema(p).names for c in TRIAL_COLUMNS)}
            for p in good:
                why = self._not_trials(p, p.parent in identified)
                if why is not None:
                    self._set_aside(
                        p,
                        f"{why}; set aside where it is (store check lists it)",
                        damaged=False,
                        foreign=True,
                    )
        if table == "curves":
            for p in good:
                why = schema_problem(self._arrow_schema(p))
                if why is not None:
                    self._set_aside(p, f"{why} (store compact moves it to {QUARANTINE}/)", damaged=False)
        good = [p for p in good if p not in self.set_aside]
        if table == "curves":
            good = self._committed(good)
        self.superseded = {**self.superseded, **self._replaced(good)}
        good = [p for p in good if p not in self.superseded]
        _, conflicts = self._unify(good)
        for p, conflict in conflicts.items():
            self._set_aside(p, f"{conflict} (fix or move the file; store check lists it)", damaged=False)
        return [p for p in good if p not in conflicts]

    def _committed(self, curves: list[Path]) -> list[Path]:
        """The files of ``curves`` that their run's trial files commit
        (:mod:`results.curve_commits`); the others go to :attr:`uncommitted`."""
        by_run: dict[Path, list[Path]] = {}
        for p in curves:
            by_run.setdefault(p.parent, []).append(p)
        kept = []
        for folder, files in by_run.items():
            trials = self.root / "trials" / folder.parent.name / folder.name
            try:
                trial_files = self._files("trials", trials) if trials.is_dir() else []
            except FileNotFoundError:
                trial_files = []
            named = committed_names([(t.name, self.metadata(t).metadata) for t in trial_files], [p.name for p in files])
            for p in files:
                if p.name in named:
                    kept.append(p)
                    self.uncommitted.pop(p, None)
                else:
                    self.uncommitted[p] = folder
        return kept

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
        sweep, run_id = (
            path.parent.parent.name.removeprefix("sweep="),
            path.parent.name.removeprefix("run_id="),
        )
        lacking = [c for c in TRIAL_COLUMNS if c not in names]
        why = None
        if lacking and identified:
            why = (
                f"not a trial file of run {run_id} (sweep {sweep}): it lacks the column(s) {', '.join(lacking)}, "
                "which every trial row of the run has"
            )
        elif own := [c for c in ("sweep", "run_id") if c in names]:
            try:
                with path.open("rb") as fh:
                    stated = pq.read_table(fh, columns=own)
            except OSError as exc:  # checked whole moments ago: the file system refuses it now
                self._unreadable(path, exc)
                return None
            folder = {"sweep": sweep, "run_id": run_id}
            other = {
                c: sorted({str(v) for v in stated[c].unique().to_pylist() if v is not None} - {folder[c]}) for c in own
            }
            if any(other.values()):
                named = ", ".join(f"{c} {', '.join(v[:3])}" for c, v in other.items() if v)
                why = (
                    f"its rows name another run ({named}) than the folder they lie in (run {run_id} of sweep "
                    f"{sweep}): rows copied in from elsewhere, not read as this run's"
                )
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
            raw = self.key_values(p).get(REPLACES_KEY)
            if raw is None:
                continue
            try:  # bounded: the footer is anyone's to write, and 200,000 '[' made json.loads recurse out
                listed = load_json(raw.decode("utf-8"), REPLACES_KEY.decode(), str(p), MAX_REPLACES_BYTES)
                names = [n for n in listed if isinstance(n, str)]
            except (ValueError, TypeError, StoreError):
                names = []
            olds = [
                p.parent / n for n in names if n == Path(n).name and not n.startswith(".") and n.endswith(".parquet")
            ]
            olds = [o for o in olds if o in present and o != p]
            if not olds:
                continue
            held = set(_trial_ids(p))
            out.update({o: p for o in olds if set(_trial_ids(o)) <= held})
        return out

    def key_values(self, path: Path) -> dict[bytes, bytes]:
        """The Parquet key-value metadata of ``path`` (empty for a file a read leaves out)."""
        meta = self.metadata(path)
        return dict(meta.metadata or {}) if meta is not None else {}

    def num_rows(self, path: Path) -> int:
        """The rows ``path`` holds (0 for a file a read leaves out)."""
        meta = self.metadata(path)
        return meta.num_rows if meta is not None else 0

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
        key = (
            str(path),
            st.st_size,
            getattr(st, "st_mtime_ns", None) or getattr(st, "st_mtime", None),
            getattr(st, "st_ctime_ns", None),
            getattr(st, "st_ino", None),
        )
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
                self._set_aside(
                    path,
                    f"too large to read: {exc}; skipped where it is, not moved (set "
                    f"{FILE_MAX_ENV} higher to read it, or delete it)",
                    damaged=False,
                    too_large=True,
                )
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
        self._set_aside(
            path,
            f"cannot be read here ({reason}); skipped where it is, not moved: the file system "
            "refused the read, which says nothing of the file's contents",
            damaged=False,
            unreadable=True,
        )

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
            self._set_aside(
                path,
                f"damaged ({reason}); skipped where it is, as the store cannot be written here "
                f"({move.strerror or move})",
            )
            return
        self.quarantined.append(dest)
        self._set_aside(path, f"damaged ({reason}); moved to {QUARANTINE}/{rel}")

    def _set_aside(
        self,
        path: Path,
        reason: str,
        damaged: bool = True,
        unreadable: bool = False,
        too_large: bool = False,
        foreign: bool = False,
    ) -> None:
        """Record why ``path`` is left out of reads, and say it once."""
        if path not in self.set_aside:
            self.set_aside[path] = LeftOut(reason, damaged, unreadable, too_large, foreign)
            warnings.warn(
                f"Parquet file {path.relative_to(self.root)} left out: {reason}; its rows are not read, "
                "the rest of the store still reads",
                StoreWarning,
                stacklevel=5,
            )

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
            self._schemas[id(meta)] = (
                meta,
                meta.schema.to_arrow_schema(),
            )  # meta kept: its id stays its own
        return self._schemas[id(meta)][1]


def _trial_ids(path: Path) -> list:
    with path.open("rb") as fh:
        return pq.read_table(fh, columns=["trial_id"])["trial_id"].to_pylist()
