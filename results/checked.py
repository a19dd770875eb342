"""Which file versions have been read in full and found sound, so a read checks each only once.

Checking a file (:func:`results.parquet_check.read_checked`) reads all of it; on every command that
would be a full read of the store (about 2 s per million trial rows here, BENCHMARKS.md).
A file version that passed is recorded in a small SQLite database in the user's cache
folder, keyed by the file's absolute path and its ``(size, mtime_ns, ctime_ns, inode,
device)``: any change made through the file system (a write, a copy over it, a restore)
changes ``ctime`` at least, so that version is checked again. What this cannot see is damage
beneath the file system (a failing disk that flips a stored bit); ``attnsweep store check``
ignores the record and reads every file.

The database lives in ``$ATTNSWEEP_CACHE_DIR`` (default ``$XDG_CACHE_HOME/attnsweep``,
else ``~/.cache/attnsweep``); ``ATTNSWEEP_CACHE_DIR=off`` turns it off. A folder that cannot
be written turns it off too: every read then checks every file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

CHECK_VERSION = 2
"""What a check checks; a record kept by another version's check is not used (version 2: the
limit on a file, page headers against the footer, dictionary strings counted), so every file
is checked once again by the new check."""
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS checked (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
    "ctime_ns INTEGER, ino INTEGER, dev INTEGER)"
)


def cache_dir() -> Path | None:
    """The folder of the record of checked files, or None when it is turned off."""
    env = os.environ.get("ATTNSWEEP_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attnsweep"


def version(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What identifies one version of a local file: ``(size, mtime_ns, ctime_ns, inode, device)``."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


class CheckedFiles:
    """The record of local file versions read in full and found sound.

    Every method is a no-op (nothing is known, nothing kept) when the record is turned off
    (``enabled`` False, or :func:`cache_dir` None) or cannot be opened: the record only ever
    saves work, never decides what is sound. It is opened on first use.
    """

    def __init__(self, enabled: bool = True):
        self._enabled = enabled
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple] = []

    @property
    def _db(self) -> sqlite3.Connection | None:
        if self._enabled and self._conn is None:
            self._enabled = False  # one try
            folder = cache_dir()
            if folder is None:
                return None
            try:
                folder.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(folder / f"checked-files-v{CHECK_VERSION}.sqlite", timeout=5.0)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(SCHEMA)
                self._conn = conn
            except (OSError, sqlite3.Error):
                return None
        return self._conn

    def known(self, path: Path, st: os.stat_result) -> bool:
        """Whether this version of ``path`` (``st``: its ``os.stat``) was checked and found sound."""
        if self._db is None:
            return False
        try:
            row = self._db.execute(
                "SELECT size, mtime_ns, ctime_ns, ino, dev FROM checked WHERE path = ?",
                (str(Path(path).resolve()),),
            ).fetchone()
        except sqlite3.Error:
            return False
        return row is not None and tuple(row) == version(st)

    def add(self, path: Path, st: os.stat_result) -> None:
        """Record that this version of ``path`` was read in full and found sound (kept at :meth:`commit`)."""
        if self._enabled or self._conn is not None:
            self._pending.append((str(Path(path).resolve()), *version(st)))

    def forget(self, path: Path) -> None:
        """Drop ``path`` from the record (a file found damaged)."""
        if self._db is not None:
            try:
                self._db.execute("DELETE FROM checked WHERE path = ?", (str(Path(path).resolve()),))
                self._db.commit()
            except sqlite3.Error:
                pass

    def commit(self) -> None:
        """Keep the versions added since the last commit."""
        if self._db is None or not self._pending:
            return
        try:
            self._db.executemany("INSERT OR REPLACE INTO checked VALUES (?, ?, ?, ?, ?, ?)", self._pending)
            self._db.commit()
        except sqlite3.Error:
            pass
        self._pending = []
