"""One writer per run: a lock file per run, held by the driver that writes it.

The lock is ``locks/<sweep>/<run_id>.lock`` under the store root, an OS file lock
(``filelock``, flock on POSIX): the kernel releases it when its process exits, however it
exits (kill -9 included), so a crashed driver never leaves a stale lock. Beside it,
``<run_id>.holder.json`` says who holds it (pid, host, since) for the error message of a
second driver. On shared filesystems without working file locks (some NFS set-ups) the
guard does not hold: run one driver per run there. A store on an object store (``s3://``...)
has no file locks at all: its lock lives on the driver's machine
(``~/.cache/attnsweep/locks/<hash of the store URI>/``), so it guards against a second
driver on the same machine only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
from pathlib import Path

import filelock

from attnsweep.results.errors import StoreError
from attnsweep.results.outputs import read_text_capped
from attnsweep.results.record_text import load_json
from attnsweep.results.store import ResultsStore

HOLDER_BYTES = 64 * 1024
"""The most a lock's holder file is read (a driver writes about 100 bytes)."""


class RunLockedError(StoreError):
    """Another driver holds the run's lock."""


class RunLock:
    """Context manager that holds the lock of one run of a store.

    Raises:
        RunLockedError: on enter, when another process holds it.
    """

    def __init__(self, store: ResultsStore, sweep: str, run_id: str):
        store.run_dir("trials", sweep, run_id)  # validates the names
        if store.local:
            folder = store.root / "locks" / sweep
        else:
            key = hashlib.sha256(store.uri.encode()).hexdigest()[:16]
            folder = Path.home() / ".cache" / "attnsweep" / "locks" / key / sweep
        self.path = folder / f"{run_id}.lock"
        self.holder_path = folder / f"{run_id}.holder.json"
        self.run_id = run_id
        self._lock = filelock.FileLock(self.path, timeout=0)

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise RunLockedError(
                f"run {self.run_id} is being written by {self._holder()}; wait for it to "
                "finish or stop it (two drivers on one run would both write its trials)"
            ) from None
        self.holder_path.write_text(
            json.dumps(
                dict(
                    pid=os.getpid(),
                    host=socket.gethostname(),
                    since=dt.datetime.now(dt.UTC).isoformat(),
                )
            )
        )
        return self

    def __exit__(self, *exc) -> None:
        self.holder_path.unlink(missing_ok=True)
        self._lock.release()

    def held(self) -> bool | None:
        """Whether a process (this one included) holds the run's lock now: True, False, or
        None when it cannot be told (no lock file: the run never ran here; a store whose
        lock folder this user cannot open). Takes and drops the lock when it is free, so a
        driver starting on this run at that instant would find it held."""
        if not self.path.exists():
            return None
        probe = filelock.FileLock(self.path, timeout=0)
        try:
            probe.acquire()
        except filelock.Timeout:
            return True
        except OSError:
            return None
        probe.release()
        return False

    def _holder(self) -> str:
        try:
            text = read_text_capped(self.holder_path, "lock holder", limit=HOLDER_BYTES)
            h = load_json(text, "holder", str(self.holder_path), HOLDER_BYTES)  # 64 KiB of '[' is too deep to parse
            return f"pid {h['pid']} on host {h['host']} since {h['since']}"
        except (OSError, ValueError, KeyError, TypeError, StoreError):
            return "another process"
