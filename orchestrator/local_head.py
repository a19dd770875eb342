"""A Ray head of your own on a shared machine: started on free ports in a temp folder of its
own (``attnsweep head start``), and stopped by that folder (``attnsweep head stop``), never
touching another Ray on the machine (``ray stop`` stops them all).

A head is the set of processes that use its temp folder (Ray's ``--temp-dir``, which
``RAY_TMPDIR`` also sets): the Ray processes whose command line names the folder, or that hold
a file open under it (their logs), or that were started with ``RAY_TMPDIR`` set to it, and
every process below those (workers, agents, job drivers). Ray renames its agents and workers
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``, ``ray::IDLE``), which wipes their command
line and environment, so the log files they hold open are what names those: an agent left
running after its raylet went (no longer below any process of the head) is still found.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from attnsweep.orchestrator.errors import RunError

MAX_DIR_CHARS = 40
"""The longest temp folder a head may have: Ray puts Unix sockets at
``DIR/session_<date>_<time>_<micros>_<pid>/sockets/plasma_store`` (the folder's length plus
about 65 characters), and a socket path is at most 107 bytes."""
DEFAULT_GRACE_S = 15.0
"""Seconds between SIGTERM and SIGKILL when stopping a head (``ray stop`` waits 16 s)."""
DEFAULT_START_TIMEOUT_S = 180.0
"""Seconds ``ray start --head`` and its job server's agent may take to come up (6 to 14 s on
this project's 2-core machine shared with other work)."""
START_LOG = "attnsweep-head-start.log"
"""``ray start``'s output, in the head's temp folder (outside its session folders)."""

# Each port a head listens on at a number of its own (Ray's `ray start` options). The rest
# (the workers' ports, the dashboard's gRPC port, the monitor's) are left to the system, which
# hands out free ones: workers through --min-worker-port=0 --max-worker-port=0, as Ray allows.
PORT_OPTIONS = (
    "port",
    "dashboard-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "metrics-export-port",
    "runtime-env-agent-port",
    "ray-client-server-port",
    "node-manager-port",
    "object-manager-port",
)

# A Ray process by its command line: renamed by Ray (ray::..., ray-dashboard-...), a Ray binary,
# a Python file of the ray package, or `python -m ray.<module>`. A `tail -f` of a head's log, a
# shell started with RAY_TMPDIR set, an editor: none of them is, and none is stopped.
_RAY_ARG = re.compile(r"(^|[\\/])ray[\\/].*(\.py|[\\/]gcs_server|[\\/]raylet)$")


@dataclass(frozen=True)
class Head:
    """A head that ``start`` brought up.

    Attributes:
        temp_dir: its temp folder (absolute).
        job_address: its job server (``http://127.0.0.1:PORT``), for ``submit --address``.
        gcs_address: its GCS (``HOST:PORT``), for ``run --address`` and ``ray start --address``.
        ports: the port of each ``ray start`` option in :data:`PORT_OPTIONS`, by option name.
    """

    temp_dir: Path
    job_address: str
    gcs_address: str
    ports: dict[str, int]


@dataclass(frozen=True)
class Stopped:
    """What ``stop`` ended.

    Attributes:
        processes: (pid, name) of each process of the head that was running, in pid order.
        killed: (pid, name) of those that outlived the SIGTERM grace and were sent SIGKILL.
    """

    processes: list[tuple[int, str]]
    killed: list[tuple[int, str]]


def head_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a head's temp folder: absolute, ``~`` expanded, links resolved (Ray writes
    the resolved one in its processes' command lines). Raises RunError for a folder whose
    sockets would not fit Ray's limit (:data:`MAX_DIR_CHARS`)."""
    folder = Path(path).expanduser().resolve()
    if len(str(folder)) > MAX_DIR_CHARS:
        raise RunError(
            f"--dir {folder} is {len(str(folder))} characters: Ray's Unix sockets under it would pass "
            f"the 107-byte limit of a socket path; take a folder of at most {MAX_DIR_CHARS} (e.g. /tmp/ray-$USER)"
        )
    return folder


def _names_dir(text: str, folder: str) -> bool:
    """Whether ``text`` names ``folder`` or a path under it (``/tmp/r`` is not ``/tmp/r2``)."""
    at = text.find(folder)
    while at >= 0:
        end = at + len(folder)
        if end == len(text) or text[end] in "/\\'\" ,;:=":
            return True
        at = text.find(folder, at + 1)
    return False


def _is_ray(cmdline: list[str]) -> bool:
    if not cmdline:
        return False
    if cmdline[0].startswith(("ray::", "ray-dashboard-")):
        return True
    return any(_RAY_ARG.search(arg) for arg in cmdline) or any(
        a == "-m" and b.startswith("ray.") for a, b in zip(cmdline, cmdline[1:], strict=False)
    )


def _uses(proc: psutil.Process, folder: str) -> bool:
    """Whether ``proc`` is a Ray process of the head in ``folder`` (module docstring)."""
    try:
        cmdline = proc.cmdline()
        if not _is_ray(cmdline):
            return False
        if any(_names_dir(arg, folder) for arg in cmdline):
            return True
        with contextlib.suppress(psutil.AccessDenied):
            if proc.environ().get("RAY_TMPDIR", "").rstrip("/") == folder:
                return True
        return any(_names_dir(f.path, folder) for f in proc.open_files())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


def head_processes(temp_dir: str | os.PathLike[str]) -> list[psutil.Process]:
    """Every running process of the head whose temp folder is ``temp_dir`` (module docstring), in
    pid order; never this process or one it runs under. Other users' processes are not read."""
    folder = str(Path(temp_dir).expanduser().resolve())
    me = psutil.Process()
    spared = {me.pid} | {p.pid for p in me.parents()}
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        if proc.pid in spared or proc.pid in found or not _running(proc) or not _uses(proc, folder):
            continue
        found[proc.pid] = proc
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            for child in proc.children(recursive=True):
                if child.pid not in spared and _running(child):
                    found[child.pid] = child
    return [found[pid] for pid in sorted(found)]


def _name(proc: psutil.Process) -> str:
    try:
        cmdline = proc.cmdline()
        if cmdline and cmdline[0].startswith(("ray::", "ray-dashboard-")):
            return cmdline[0].split()[0]
        name = proc.name()
        if name.startswith("python"):  # say which: monitor.py, dashboard.py, ray.util.client.server...
            for arg, after in zip(cmdline, [*cmdline[1:], ""], strict=True):
                if arg == "-m" and after:
                    return after
                if arg.endswith(".py"):
                    return Path(arg).name
        return name
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return "?"


def _signal_all(procs: Iterable[psutil.Process], how: str) -> None:
    """Call ``how`` (``terminate``: SIGTERM, ``kill``: SIGKILL, ``resume``: SIGCONT) on each of ``procs``."""
    for proc in procs:
        # Not ours to signal (another user's): left running, and named by stop's error.
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            getattr(proc, how)()


def _running(proc: psutil.Process) -> bool:
    """Whether ``proc`` still runs: a zombie does not (it holds no port or file; its parent, or
    init, reaps it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def _wait(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of ``procs`` still running after at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    alive = [p for p in procs if _running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if _running(p)]
    return alive


def stop(temp_dir: str | os.PathLike[str], grace_s: float = DEFAULT_GRACE_S) -> Stopped:
    """Stop the head (or a worker node's Ray) whose temp folder is ``temp_dir``: SIGTERM to each of its processes, SIGKILL
    to those still running ``grace_s`` seconds later, then again for any that Ray started
    meanwhile, until none is left. Another head on the machine is not touched.

    Returns what was stopped (nothing when no head runs there). Raises RunError when the folder
    does not exist, or when a process of the head outlives SIGKILL (one that is not yours)."""
    folder = Path(temp_dir).expanduser().resolve()
    if not folder.is_dir():
        raise RunError(f"--dir {folder}: no such folder, so no Ray runs there (give the folder `head start` printed)")
    seen: dict[int, str] = {}
    killed: list[tuple[int, str]] = []
    for _ in range(5):  # a raylet may start a worker while it stops: scan again until none is left
        procs = head_processes(folder)
        if not procs:
            break
        for proc in procs:
            seen.setdefault(proc.pid, _name(proc))
        _signal_all(procs, "terminate")
        _signal_all(procs, "resume")  # a stopped process (Ctrl-Z, SIGSTOP) takes its SIGTERM only once continued
        alive = _wait(procs, grace_s)
        killed += [(p.pid, seen[p.pid]) for p in alive]
        _signal_all(alive, "kill")
        alive = _wait(alive, 10)
        if alive:
            raise RunError(
                f"{len(alive)} processes of the Ray in {folder} still run after SIGKILL: "
                + ", ".join(f"{p.pid} ({seen.get(p.pid, '?')})" for p in alive)
            )
    else:
        left = head_processes(folder)
        if left:
            raise RunError(
                f"the Ray in {folder} kept starting processes while it was stopped; still running: "
                + ", ".join(f"{p.pid} ({_name(p)})" for p in left)
            )
    return Stopped(processes=sorted(seen.items()), killed=sorted(killed))


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on every interface now (each socket held until all are
    chosen, so no two are the same)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("", 0))
            ports.append(sock.getsockname()[1])
        return ports


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _last_error(log: Path) -> str:
    """The line of ``ray start``'s output that says why it failed (its last error, else its last line)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"Error|error:|ERROR|failed|Failed", ln)]
    return (errors or lines or ["(no output)"])[-1][:500]


def start(
    temp_dir: str | os.PathLike[str],
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> Head:
    """Start a Ray head in ``temp_dir`` with every port it opens free (:data:`PORT_OPTIONS`, the
    workers' ports left to the system), its job server and dashboard on 127.0.0.1, and the
    ``python`` of this environment first on its PATH (a job runs ``python -m attnsweep.cli``).
    Returns once its job server and dashboard agent accept connections.

    Raises RunError when a head already runs in ``temp_dir``, when ``ray start`` fails (its
    reason, and its log at ``temp_dir/attnsweep-head-start.log``), or when the head does not come
    up within ``timeout_s`` seconds; what it had started is stopped again then."""
    folder = head_dir(temp_dir)
    running = head_processes(folder)
    if running:
        raise RunError(
            f"a Ray head already runs in {folder} ({len(running)} processes, e.g. {running[0].pid} ({_name(running[0])})): "
            f"stop it with `attnsweep head stop --dir {folder}`, or give another --dir"
        )
    folder.mkdir(parents=True, exist_ok=True)
    ports = dict(zip(PORT_OPTIONS, _free_ports(len(PORT_OPTIONS)), strict=True))
    bindir = Path(sys.executable).parent
    ray_bin = shutil.which("ray", path=str(bindir)) or shutil.which("ray")
    if ray_bin is None:
        raise RunError(
            "no `ray` command beside this Python or on PATH: install attnsweep's dependencies (ray[default])"
        )
    command = [
        ray_bin,
        "start",
        "--head",
        f"--temp-dir={folder}",
        "--dashboard-host=127.0.0.1",
        *(f"--{name}={port}" for name, port in ports.items()),
        "--min-worker-port=0",
        "--max-worker-port=0",
        "--disable-usage-stats",
        *([f"--num-cpus={num_cpus}"] if num_cpus is not None else []),
        *([f"--num-gpus={num_gpus}"] if num_gpus is not None else []),
    ]
    env = dict(
        os.environ,
        RAY_TMPDIR=str(folder),
        RAY_USAGE_STATS_ENABLED="0",
        # As cluster.yaml: a cancelled job's driver gets 30 s to record its run as interrupted.
        RAY_JOB_STOP_WAIT_TIME_S=os.environ.get("RAY_JOB_STOP_WAIT_TIME_S", "30"),
        PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env.pop("RAY_ADDRESS", None)  # `ray start --head` would take it as a cluster to join
    log = folder / START_LOG
    deadline = time.monotonic() + timeout_s
    try:
        with log.open("w") as sink:
            # A session of its own: the head outlives this command and no Ctrl-C of its shell reaches it.
            done = subprocess.run(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                timeout=timeout_s,
                check=False,
            )
        if done.returncode != 0:
            raise RunError(f"ray start --head failed (exit {done.returncode}): {_last_error(log)} (its log: {log})")
        while not (_listening(ports["dashboard-port"]) and _listening(ports["dashboard-agent-listen-port"])):
            if time.monotonic() > deadline:
                raise RunError(
                    f"the Ray head in {folder} started, but its job server or dashboard agent did not listen "
                    f"within {timeout_s:g} s (see {folder}/session_latest/logs/dashboard_agent.log)"
                )
            time.sleep(0.5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(RunError):
            stop(folder)
        raise RunError(f"ray start --head did not finish within {timeout_s:g} s (its log: {log})") from None
    except BaseException:
        with contextlib.suppress(RunError):
            stop(folder)
        raise
    current = folder / "ray_current_cluster"  # Ray writes the GCS address it advertises there
    gcs = current.read_text().strip() if current.is_file() else f"127.0.0.1:{ports['port']}"
    return Head(
        temp_dir=folder, job_address=f"http://127.0.0.1:{ports['dashboard-port']}", gcs_address=gcs, ports=ports
    )
