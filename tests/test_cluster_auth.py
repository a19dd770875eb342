"""The cluster path as written, against a real `ray start --head` with token authentication.

The head runs with a private HOME that holds a token (as any earlier local `ray.init()`
leaves it in ~/.ray/auth_token), so `ray start --head` turns authentication on, and a
private RAY_TMPDIR; it is stopped through the pid that started it. The commands run with
that HOME and no RAY_AUTH_* variable at all, as a user (or cron) would run them.
"""

from __future__ import annotations

import os
import secrets
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

pytestmark = pytest.mark.slow  # a sweep on a Ray cluster started for the test: half a minute

REPO = Path(__file__).resolve().parents[1]
SPEC = (
    "name: authsweep\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 20}\nexecution: {pack_size: 2}\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _user_env(home: Path, tmpdir: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who set nothing about Ray's authentication."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_") and k != "RAY_ADDRESS"}
    return dict(
        env,
        HOME=str(home),
        RAY_TMPDIR=str(tmpdir),
        RAY_USAGE_STATS_ENABLED="0",
        COLUMNS="200",
        **extra,
    )


@pytest.fixture(scope="module")
def head():
    """(GCS address, HOME with the token, RAY_TMPDIR) of a token-authenticated head."""
    # Short paths: Ray's Unix sockets live under RAY_TMPDIR (at most about 100 characters).
    root = Path(tempfile.mkdtemp(prefix="asauth", dir="/tmp"))
    home, tmpdir = root / "home", root / "t"
    (home / ".ray").mkdir(parents=True)
    tmpdir.mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(16) + "\n")
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    gcs = _free_port()
    ports = [
        f"--{name}={_free_port()}"
        for name in (
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "metrics-export-port",
            "ray-client-server-port",
            "runtime-env-agent-port",
            "node-manager-port",
            "object-manager-port",
            "dashboard-port",
        )
    ]
    log = root / "ray-start.log"
    proc = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            "--block",
            f"--port={gcs}",
            "--dashboard-host=127.0.0.1",
            "--num-cpus=2",
            "--disable-usage-stats",
            *ports,
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=dict(
            _user_env(home, tmpdir),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ),
    )
    address = f"127.0.0.1:{gcs}"
    try:
        deadline = time.time() + 180
        while "Ray runtime started" not in log.read_text():
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"ray start --head did not come up: {log.read_text()[-2000:]}")
            time.sleep(1)
        # That the head enforces the token is shown by the test of a wrong token (refused).
        yield address, home, tmpdir
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # --block: the cluster stops with the process that started it
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_and_the_nightly_script_authenticate_with_nothing_set(head, tmp_path):
    address, home, tmpdir = head
    (tmp_path / "spec.yaml").write_text(SPEC)
    store = tmp_path / "store"
    run = _cli(
        "run",
        "spec.yaml",
        "--address",
        address,
        "--store",
        str(store),
        "--no-analyze",
        env=_user_env(home, tmpdir),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    results = ResultsStore(store)
    _, baseline = results.latest_run()
    assert results.scan_trials().collect().height == 4

    # deploy/nightly.sh as cron runs it: a bare environment (HOME, PATH, LOGNAME, SHELL) plus
    # what the crontab line sets; the checkout's sweeps/nightly.yaml is the tiny spec here.
    checkout = tmp_path / "checkout"
    (checkout / "sweeps").mkdir(parents=True)
    (checkout / "sweeps" / "nightly.yaml").write_text(SPEC)
    cron_env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "LOGNAME": os.environ.get("USER", "user"),
        "SHELL": "/bin/sh",
        "RAY_TMPDIR": str(tmpdir),
        "RAY_USAGE_STATS_ENABLED": "0",
        "ATTNSWEEP_HOME": str(checkout),
        "ATTNSWEEP_BASELINE": baseline,
        "ATTNSWEEP_STORE": str(store),
        "ATTNSWEEP_ADDRESS": address,
        "ATTNSWEEP_PYTHON": sys.executable,
    }
    nightly = subprocess.run(
        ["bash", str(REPO / "deploy" / "nightly.sh")],
        env=cron_env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert nightly.returncode == 0, nightly.stdout[-2000:] + nightly.stderr[-3000:]
    assert f"vs baseline {baseline}): passed" in nightly.stdout, nightly.stdout


def test_a_wrong_or_missing_token_says_in_one_line_what_to_set(head, tmp_path):
    address, _, tmpdir = head
    (tmp_path / "spec.yaml").write_text(SPEC)
    other = tmp_path / "home"
    (other / ".ray").mkdir(parents=True)
    (other / ".ray" / "auth_token").write_text(secrets.token_hex(16))  # another cluster's token
    for home in (other, tmp_path / "empty-home"):
        home.mkdir(exist_ok=True)
        started = time.monotonic()
        proc = _cli(
            "run",
            "spec.yaml",
            "--address",
            address,
            "--store",
            str(tmp_path / "store"),
            "--no-analyze",
            env=_user_env(home, tmpdir, ATTNSWEEP_TIMEOUT="60"),
            cwd=tmp_path,
            timeout=200,
        )
        assert proc.returncode == 2, proc.stderr[-3000:]
        message = proc.stderr.strip()
        assert "Traceback" not in message and "RAY_AUTH_TOKEN_PATH" in message and address in message, message
        assert len([line for line in message.splitlines() if line.strip()]) <= 3, message
        assert time.monotonic() - started < 120
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("part-*.parquet"))
