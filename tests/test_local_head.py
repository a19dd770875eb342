"""`attnsweep head start` and `head stop` on real `ray start --head` processes, on a machine where
another head already runs (started as a user would, with Ray's default ports wherever they are
free): ours comes up beside it, takes jobs, and is stopped mid-job leaving no process of its
own, the renamed `ray::` agents and workers included, while the other head keeps every one of
its processes; then the other is stopped the same way.

Which processes belong to a head is read here from /proc directly (command lines, open files,
parent links), not through the command's own search (psutil, and a rule for what a Ray process
is), so the two are checked against each other.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from attnsweep.results import ResultsStore

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc (Linux)")

SPEC = (
    "name: headsweep\nseeds: 1\ngrid: {T: [8], m: [16]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 20}\nexecution: {pack_size: 1}\n"
)
# Long enough to be running when the head is stopped; its rows flushed one by one.
LONG_SPEC = (
    "name: longsweep\nseeds: 4\ngrid: {T: [8, 16, 32, 64], m: [16, 32, 64, 128]}\n"
    "fixed: {task: and, s: 3, d: 8, heads: 2, n_test: 100, max_epochs: 3000}\n"
    "execution: {pack_size: 1, flush_rows: 1, flush_s: 0.2}\n"
)


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state letter, start time in clock ticks) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), fields[0], int(fields[19])


def _live(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] not in "ZX"  # a zombie holds no port, file or memory


def _names_folder(pid: int, folder: str) -> bool:
    try:
        if folder + "/" in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
            return True
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(folder + "/"):
                return True
        except OSError:
            continue
    return False


def _scan(folder: Path, spared: set[int] = frozenset()) -> dict[int, str]:
    """Every live process whose command line names ``folder`` or that holds a file under it, and
    every process below one of those, but for ``spared``: pid -> its command line."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[1] not in "ZX":
            parents[int(entry)] = stat[0]
    spared = set(spared) | {os.getpid()}
    found = {pid for pid in parents if pid not in spared and _names_folder(pid, str(folder))}
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found and pid not in found | spared}
        found |= below
        grew = bool(below)
    out = {}
    for pid in found:
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
    return out


def _trial_workers(procs: dict[int, str]) -> set[str]:
    """The titles of the Ray workers among ``procs`` that run something of the job's (not Ray's
    agents, not its job supervisor, not an idle worker)."""
    titles = {c.split()[0] for c in procs.values() if c.startswith("ray::")}
    return {t for t in titles if not t.endswith("Agent") and "JobSupervisor" not in t and t != "ray::IDLE"}


def _port(default: int) -> int:
    """``default`` when it is free, else a free port."""
    with socket.socket() as s:
        try:
            s.bind(("", default))
        except OSError:
            s.bind(("", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    return dict(env, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200", **extra)


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _kill_all(pids) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def folders():
    """(root, the other head's temp folder, ours): short paths, as Ray's sockets need. Whatever
    of either head is left when the test ends is killed by its pids."""
    root = Path(tempfile.mkdtemp(prefix="ahd", dir="/tmp"))
    other, ours = root / "f", root / "o"
    other.mkdir()
    try:
        yield root, other, ours
    finally:
        _kill_all([*_scan(other), *_scan(ours)])
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow  # two Ray heads and two jobs: one to two minutes
def test_own_head_beside_another_takes_a_job_and_stops_alone(folders):
    root, other, ours = folders
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    # The other head: a plain `ray start --head` with its own RAY_TMPDIR, on Ray's default ports
    # (6379, 8265, the agent's 52365, the client's 10001...) wherever they are free.
    started = subprocess.run(
        [
            ray_bin,
            "start",
            "--head",
            f"--temp-dir={other}",
            f"--port={_port(6379)}",
            f"--dashboard-port={_port(8265)}",
            "--num-cpus=1",
            "--disable-usage-stats",
        ],
        env=_env(RAY_TMPDIR=str(other), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    theirs = _scan(other)
    assert {"gcs_server", "raylet"} <= {Path(c.split()[0]).name for c in theirs.values()}
    their_start = {pid: _stat(pid) for pid in theirs}

    # Ours, with the documented command, beside it.
    up = _cli("head", "start", "--dir", str(ours), "--num-cpus", "1", cwd=root)
    assert up.returncode == 0, up.stderr[-3000:]
    address = up.stdout.strip()
    assert address.startswith("http://127.0.0.1:") and up.stderr.count("\n") == 1
    assert f"attnsweep head stop --dir {ours}" in up.stderr
    again = _cli("head", "start", "--dir", str(ours), cwd=root)
    assert again.returncode == 2 and "already runs in" in again.stderr and again.stderr.count("\n") == 1

    # It takes a job...
    (root / "spec.yaml").write_text(SPEC)
    job = _cli("submit", "spec.yaml", "--address", address, "--store", str(root / "store"), "--wait", cwd=root)
    assert job.returncode == 0, job.stderr[-3000:]
    rows = ResultsStore(root / "store").scan_trials().collect()
    assert rows.height == 1 and set(rows["status"]) == {"done"}

    # ... and is stopped in the middle of another, with its workers running.
    (root / "long.yaml").write_text(LONG_SPEC)
    long_store = root / "long-store"
    job = _cli("submit", "long.yaml", "--address", address, "--store", str(long_store), cwd=root)
    assert job.returncode == 0, job.stderr[-3000:]
    job_id = job.stdout.strip()
    deadline = time.time() + 600  # a loaded machine: minutes
    while not _trial_workers(_scan(ours)):
        if time.time() > deadline or not _cli("status", job_id, "--address", address, cwd=root).stdout.startswith(
            ("PENDING", "RUNNING")
        ):
            log = _cli("logs", job_id, "--address", address, cwd=root).stdout
            pytest.fail(f"the long job has no worker running a trial: {log[-3000:]}")
        time.sleep(2)
    # Bystanders that are not Ray but use the folder: a tail of its log, a shell-like process
    # started with RAY_TMPDIR set to it. Neither is part of the head.
    tail = subprocess.Popen(["tail", "-f", str(next(ours.glob("session_*/logs/raylet.out")))])
    idle = subprocess.Popen(["sleep", "600"], env=_env(RAY_TMPDIR=str(ours)))
    bystanders = {tail.pid, idle.pid}
    try:
        mine = _scan(ours, spared=bystanders)
        mine_start = {pid: _stat(pid) for pid in mine}
        titles = {c.split()[0] for c in mine.values()}
        assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= titles
        assert {Path(c.split()[0]).name for c in mine.values()} >= {"gcs_server", "raylet"}
        assert _trial_workers(mine), titles

        down = _cli("head", "stop", "--dir", str(ours), cwd=root, env=_env(RAY_TMPDIR=str(ours)))
        assert down.returncode == 0, down.stderr[-3000:]
        assert down.stdout.startswith(f"stopped Ray in {ours}: ") and down.stdout.count("\n") == 1
        assert "ray::DashboardAgent" in down.stdout and "ray::RuntimeEnvAgent" in down.stdout
        left = _scan(ours, spared=bystanders)
        assert left == {}, left
        outlived = [pid for pid in mine if _live(pid) and _stat(pid) == mine_start[pid]]
        assert outlived == [], {pid: mine[pid] for pid in outlived}
        assert all(_live(pid) for pid in bystanders)
        # The other head has every process it had, the same ones (same start times).
        assert {pid: _stat(pid) for pid in theirs} == their_start
        assert all(_live(pid) for pid in theirs)
    finally:
        tail.kill()
        idle.kill()
        tail.wait()
        idle.wait()

    nothing = _cli("head", "stop", "--dir", str(ours), cwd=root)
    assert nothing.returncode == 0 and "nothing to stop" in nothing.stdout

    # The other head, with its dashboard agent orphaned first (as a stop by command line leaves
    # it, `ray::DashboardAgent` naming no folder): held stopped so that it cannot see its raylet
    # go, then its raylet killed; it is found by the log files it holds open.
    titles = {pid: Path(c.split()[0]).name for pid, c in _scan(other).items()}
    agent = next(pid for pid, t in titles.items() if t == "ray::DashboardAgent")
    raylet = next(pid for pid, t in titles.items() if t == "raylet")
    os.kill(agent, signal.SIGSTOP)
    os.kill(raylet, signal.SIGKILL)
    deadline = time.time() + 60
    while (_stat(agent) or (raylet,))[0] == raylet:  # until it is reparented
        assert time.time() < deadline
        time.sleep(0.2)
    down = _cli("head", "stop", "--dir", str(other), "--grace", "5", cwd=root)
    assert down.returncode == 0, down.stderr[-3000:]
    assert "ray::DashboardAgent" in down.stdout and "raylet" not in down.stdout  # the raylet was gone
    assert _scan(other) == {}
    assert not any(_live(pid) for pid in theirs)


def test_stop_and_start_refuse_bad_folders_in_one_line(tmp_path):
    missing = _cli("head", "stop", "--dir", str(tmp_path / "none"), cwd=tmp_path)
    assert missing.returncode == 2 and "no such folder" in missing.stderr and missing.stderr.count("\n") == 1
    long = "/tmp/" + "x" * 40
    refused = _cli("head", "start", "--dir", long, cwd=tmp_path)
    assert refused.returncode == 2 and "45 characters" in refused.stderr and refused.stderr.count("\n") == 1
    assert not Path(long).exists()  # refused before anything was made
