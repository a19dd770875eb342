"""Housekeeping on a shared store (issue 23): a cleanup removes only temporary files whose
writer is provably gone; a reader moves a file to quarantine only for damage, never because
the file system refused the read; a file is checked to be Parquet before it is read whole."""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from rich.console import Console

import attnsweep.results.atomic_write as atomic_write
import attnsweep.results.defensive_reads as defensive_reads
import attnsweep.results.parquet_check as parquet_check
from attnsweep.orchestrator import LocalExecutor, parse_spec, run_sweep
from attnsweep.results import ResultsStore
from attnsweep.results.atomic_write import host_tag
from attnsweep.results.defensive_reads import StoreWarning
from attnsweep.results.integrity import check_store, compact_store

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", COLUMNS="250")
RUN = "20261201-000000-aaaaaa"
OTHER = "20261201-000000-bbbbbb"
SPEC = (
    "name: mine\nseeds: 2\ngrid: {T: [8], m: [16]}\nfixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, "
    "max_epochs: 3}\nexecution: {pack_size: 1, flush_rows: 1}\n"
)

# A second writer in its own process: it writes a part file of run OTHER and stops between the
# write of its temporary file and the rename, until it reads a line on stdin.
SLOW_WRITER = """
import sys
import pyarrow as pa
import attnsweep.results.store as st
real = st.pq.write_table
def slow(table, where, **kw):
    real(table, where, **kw)
    print("written", flush=True)
    sys.stdin.readline()
st.pq.write_table = slow
path = st.ResultsStore(sys.argv[1]).write_trials("other", sys.argv[2], pa.table({"trial_id": ["x", "y"]}))
print(path, flush=True)
"""


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _part(store: ResultsStore, run: str, n: int, start: int = 0) -> Path:
    return store.write_trials(
        "sw",
        run,
        pa.table(
            {
                "trial_id": [f"t{i}" for i in range(start, start + n)],
                "seed": list(range(start, start + n)),
            }
        ),
    )


@pytest.mark.slow
def test_a_run_starting_and_store_compact_leave_another_writers_file_alone(tmp_path):
    store = ResultsStore(tmp_path / "store")
    other = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(store.root), OTHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert other.stdout.readline().strip() == "written"
        (temp,) = store.root.glob("trials/sweep=other/run_id=*/.tmp-*")
        assert f".tmp-{other.pid}@{host_tag()}~" in temp.name
        # A run starts in this store (its start cleans up), a compaction and a check run.
        spec = parse_spec(SPEC)
        run_sweep(
            spec,
            store,
            LocalExecutor(spec.execution),
            run_id=RUN,
            console=Console(file=io.StringIO()),
        )
        assert temp.exists()
        assert compact_store(ResultsStore(store.root)).deleted_temp == 0 and temp.exists()
        report = check_store(ResultsStore(store.root))
        assert [p for p, *_ in report.writing] == [str(temp.relative_to(store.root))] and report.temp_files == []
        assert store.clean_temp_files() == [] and temp.exists()
        other.stdin.write("\n")
        other.stdin.flush()
        final = Path(other.stdout.readline().strip())
        assert other.wait(timeout=60) == 0, other.stderr.read()
    finally:
        other.kill()
    assert final.exists() and not temp.exists()
    assert ResultsStore(store.root).scan_run_trials("other", OTHER).collect()["trial_id"].to_list() == ["x", "y"]
    assert ResultsStore(store.root).read_run("mine", RUN)["status"] == "finished"


def test_only_temporary_files_whose_writer_is_provably_gone_are_removed(tmp_path):
    store = ResultsStore(tmp_path)
    folder = store.run_dir("trials", "sw", RUN)
    folder.mkdir(parents=True)
    dead = folder / f".tmp-{_dead_pid()}@{host_tag()}~0000000a-part-1.parquet.partial"
    alive = folder / f".tmp-{os.getpid()}@{host_tag()}~0000000b-part-2.parquet.partial"
    elsewhere = folder / f".tmp-{_dead_pid()}@another-host~0000000c-part-3.parquet.partial"
    # Its pid is not alive here, but a live process holds its lock: a writer in another pid
    # namespace (a container on the same volume) looks like this.
    locked = folder / f".tmp-{_dead_pid()}@{host_tag()}~0000000d-part-4.parquet.partial"
    legacy = folder / ".tmp-0123abcd-part-5.parquet.partial"  # an older attnsweep's: no writer named
    for p in (dead, alive, elsewhere, locked, legacy):
        p.write_bytes(b"PAR1 half a file")
    fd = os.open(locked, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        states = {t.path: t.state for t in store.temp_files()}
        assert states == {
            dead: "gone",
            alive: "writing",
            elsewhere: "unknown",
            locked: "writing",
            legacy: "unknown",
        }
        report = check_store(ResultsStore(tmp_path))
        assert sorted(p for p, *_ in report.temp_files) == sorted(
            str(p.relative_to(tmp_path)) for p in (dead, elsewhere, legacy)
        )
        assert store.clean_temp_files() == [dead]
    finally:
        os.close(fd)
    assert [p.exists() for p in (dead, alive, elsewhere, locked, legacy)] == [
        False,
        True,
        True,
        True,
        True,
    ]


def test_a_failed_write_leaves_no_temporary_file_and_says_enospc(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    real = atomic_write.pq.write_table

    def half_then_full(table, where, **kw):
        where.write(b"PAR1 the first bytes")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_write.pq, "write_table", half_then_full)
    with pytest.raises(OSError) as info:
        _part(store, RUN, 2)
    assert (
        info.value.errno == errno.ENOSPC and parquet_check.os_reason(info.value) == "No space left on device (ENOSPC)"
    )
    monkeypatch.setattr(atomic_write.pq, "write_table", real)
    assert list(tmp_path.rglob(".tmp-*")) == [] and list(tmp_path.rglob("*.parquet")) == []


def _refuse_open(monkeypatch, victim: Path, error: OSError) -> None:
    """Make opening ``victim`` fail as the file system would for this user (tests run as root
    too, where chmod does not stop a read)."""
    real = Path.open

    def open_(self, *args, **kwargs):
        if self == victim:
            raise error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)


@pytest.mark.parametrize("known", [False, True], ids=["unchecked version", "version checked before"])
def test_a_file_the_file_system_refuses_is_skipped_not_moved(tmp_path, monkeypatch, known):
    monkeypatch.setenv("ATTNSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(defensive_reads, "RACY_S", -1.0)  # record versions at once
    store = ResultsStore(tmp_path / "store")
    victim = _part(store, RUN, 2)
    _part(store, RUN, 3, start=2)
    if known:
        assert ResultsStore(store.root).scan_trials().collect().height == 5  # records both versions as checked
    _refuse_open(monkeypatch, victim, PermissionError(errno.EACCES, "Permission denied", str(victim)))
    reader = ResultsStore(store.root)
    with pytest.warns(
        StoreWarning,
        match=rf"{victim.name} left out: cannot be read here \(Permission denied \(EACCES\)\); "
        "skipped where it is, not moved",
    ):
        assert reader.scan_trials().collect().height == 3
    assert victim.exists() and not (store.root / "quarantine").exists()
    assert reader.set_aside[victim].unreadable and not reader.set_aside[victim].damaged
    with pytest.warns(StoreWarning, match="Permission denied"):
        report = check_store(ResultsStore(store.root))
    assert not report.ok and report.quarantined == [] and report.skipped == []
    assert len(report.unreadable) == 1 and "Permission denied" in report.unreadable[0]
    monkeypatch.undo()
    assert ResultsStore(store.root).scan_trials().collect().height == 5  # readable again: every row is back


def test_an_io_error_midway_is_not_damage_either(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    victim = _part(store, RUN, 2)
    real = Path.open

    class FailingRead(io.BufferedReader):
        def read(self, n=-1):
            if n > 8:  # the magic bytes read; the full read fails
                raise OSError(errno.EIO, "Input/output error")
            return super().read(n)

    def open_(self, mode="r", *args, **kwargs):
        if self == victim and mode == "rb":
            return FailingRead(io.FileIO(str(self), "rb"))
        return real(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    with pytest.warns(StoreWarning, match=r"Input/output error \(EIO\)"):
        assert ResultsStore(tmp_path)._files("trials") == []
    assert victim.exists() and not (tmp_path / "quarantine").exists()


# `attnsweep query` twice in one process: on a copy of the store, as the user who runs the
# tests (loading every module a query needs: as nobody, Python's own files may be out of
# reach), then as nobody (uid 65534) when that user is root, on the store itself.
AS_NOBODY = """
import os, sys
from attnsweep.cli import main

def query(store):
    sys.argv = ["attnsweep", "query", "SELECT count(*) AS n FROM trials", "--format", "csv", "--store", store]
    try:
        main()
    except SystemExit as exc:
        return exc.code or 0
    return 0

warm, store = sys.argv[1:3]
assert query(warm) == 0
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
print("---", flush=True)
sys.exit(query(store))
"""


@pytest.mark.slow
def test_a_file_you_may_not_read_is_skipped_by_query_not_moved():
    """For real: a shared store (folders anyone may write), one part file mode 000 owned by
    another user; `attnsweep query` runs as a user who may not read it (as nobody when the
    tests run as root, where chmod does not stop a read)."""
    base = Path(tempfile.mkdtemp(prefix="attnsweep-shared-"))  # in /tmp: nobody can reach it
    try:
        store = ResultsStore(base / "store")
        victim = _part(store, RUN, 2)
        _part(store, RUN, 3, start=2)
        subprocess.run(["cp", "-r", str(store.root), str(base / "copy")], check=True)
        for folder in [base, *(p for p in base.rglob("*") if p.is_dir())]:
            folder.chmod(0o777)
        for f in base.rglob("*.parquet"):
            f.chmod(0o644)
        victim.chmod(0o000)
        env = dict(ENV, ATTNSWEEP_CACHE_DIR="off", HOME=str(base))
        proc = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(base / "copy"), str(store.root)],
            cwd=base,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["n", "5", "---", "n", "3"]
        flat = " ".join(proc.stderr.split())
        assert victim.name in flat and "Permission denied" in flat and "not moved" in flat
        assert victim.exists() and not (store.root / "quarantine").exists()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


GIB = 2**30
# The peak is this process's own (VmHWM): getrusage's ru_maxrss keeps the parent's peak across
# the fork and exec that start it, and pytest's process is large after other tests.
MEASURE = """
import json, re, resource, sys, warnings
from pathlib import Path
from attnsweep.results import ResultsStore
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    n = ResultsStore(sys.argv[1]).scan_trials().collect().height
status = Path("/proc/self/status")
peak_kb = (int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read_text())[1]) if status.exists()
           else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps(dict(rows=n, peak_mb=peak_kb / 1024, warnings=[str(w.message) for w in caught])))
"""


@pytest.mark.slow
def test_a_large_file_that_is_no_parquet_is_set_aside_in_small_memory(tmp_path):
    store = ResultsStore(tmp_path)
    _part(store, RUN, 3)
    folder = store.run_dir("trials", "sw", RUN)
    zeros = folder / "part-00000000000000000001-zeros000.parquet"
    with zeros.open("wb") as fh:  # 2 GiB of zeros, sparse: no disk used
        fh.truncate(2 * GIB)
    huge_footer = folder / "part-00000000000000000002-footer00.parquet"  # magic right, footer beyond the file
    with huge_footer.open("wb") as fh:
        fh.write(b"PAR1")
        fh.truncate(2 * GIB)
        fh.seek(2 * GIB - 8)
        fh.write((2**32 - 1).to_bytes(4, "little") + b"PAR1")
    big_footer = folder / "part-00000000000000000003-footer01.parquet"  # a 1 GiB footer inside the file
    with big_footer.open("wb") as fh:
        fh.write(b"PAR1")
        fh.truncate(2 * GIB)
        fh.seek(2 * GIB - 8)
        fh.write(GIB.to_bytes(4, "little") + b"PAR1")
    env = dict(ENV, ATTNSWEEP_CACHE_DIR="off")
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["rows"] == 3
    assert got["peak_mb"] < 600, got  # the files are 2 GiB each; reading one whole would take that
    said = " ".join(got["warnings"])
    assert "no PAR1 magic bytes at its start and end" in said
    assert "footer length (4,294,967,295 bytes) does not fit in the file" in said
    assert f"footer claims {GIB:,} bytes" in said
    quarantined = sorted(p.name for p in (tmp_path / "quarantine").rglob("*.parquet"))
    assert quarantined == sorted(p.name for p in (zeros, huge_footer, big_footer))  # damaged: set aside as before


def test_the_format_check_reads_a_few_bytes_before_refusing(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    folder = store.run_dir("trials", "sw", RUN)
    folder.mkdir(parents=True)
    zeros = folder / "part-1.parquet"
    with zeros.open("wb") as fh:
        fh.truncate(64 * 2**20)
    read = []
    real = parquet_check._read_at

    def counting(fh, offset, n):
        read.append(n)
        return real(fh, offset, n)

    monkeypatch.setattr(parquet_check, "_read_at", counting)
    with pytest.warns(StoreWarning, match="no PAR1 magic"):
        assert store.metadata(zeros) is None
    assert sum(read) == 12
