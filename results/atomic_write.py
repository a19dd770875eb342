"""How the store writes a file so that no reader sees half of it: a temporary name in the
file's final folder, an OS lock held while it is written, and a rename into place (atomic on
POSIX; one PUT on an object store); and what is known of the writer of a temporary file found
in the store.

Temporary names start with a dot and end in ``.partial``, so neither ``*.parquet`` globs
(polars, DuckDB) nor pyarrow's discovery pick them up. A temporary name carries its writer's
pid and host, and the writer holds an OS lock on the file until the rename, so a cleaner
removes only files whose writer is provably gone (:func:`temp_file_state`), never another
run's file in progress.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

try:
    import fcntl
except ImportError:  # Windows: temporary files are told by their name's pid and host only
    fcntl = None

from attnsweep.results.roots import client_error

TMP_PREFIX = ".tmp-"
TMP_RE = re.compile(r"\.tmp-(\d+)@([A-Za-z0-9._-]*)~([0-9a-f]{8})-(.+)\.partial\Z")
"""A temporary file's name: ``.tmp-<pid>@<host>~<8 hex>-<final name>.partial``, naming the
process that writes it (:func:`temp_name`), which also holds an OS lock on it while it writes."""


@dataclass(frozen=True)
class TempFile:
    """A temporary file in the store and what is known of its writer.

    Attributes:
        path: the file.
        pid, host: the process named in its name (None for a name of an older attnsweep).
        state: ``writing`` (its writer is alive: it holds the file's lock, or its pid runs on
            this host), ``gone`` (provably: the lock is free and its pid runs no more on this
            host; :meth:`results.store.ResultsStore.clean_temp_files` removes it) or ``unknown`` (another
            host's, or a name without a writer: never removed automatically).
    """

    path: Path
    pid: int | None
    host: str | None
    state: str

    @property
    def writer(self) -> str:
        return (
            f"pid {self.pid} on host {self.host}"
            if self.pid is not None
            else "an unknown writer (an older attnsweep's name)"
        )


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
    checksum, which :func:`results.parquet_check.read_checked` verifies."""
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
            with contextlib.suppress(OSError):  # a file system without locks: the name's pid and host still tell
                fcntl.flock(fd, fcntl.LOCK_EX)
        # Written through our descriptor: closing another one would drop an NFS (POSIX) lock.
        with open(fd, "wb", closefd=False) as fh:
            pq.write_table(table, fh, write_page_checksum=True)
        os.fsync(fd)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # before the lock goes: nobody else may take it for a dead writer's
        os.close(fd)
    return path
