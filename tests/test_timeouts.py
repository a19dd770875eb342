"""A job server that accepts the connection and never answers: every CLI command that calls
it gives up after its --timeout (or ATTNSWEEP_TIMEOUT) with exit 2, naming the address."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the job server and sweeps submitted to it

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def silent_server(tcp_server):
    """A TCP server on localhost that accepts connections, reads, and never writes a byte."""
    return tcp_server(lambda conn, stop: None)  # the connection stays open until the test ends


def _cli(*args, env=None):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="250", **(env or {}))
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, time.monotonic() - t0


@pytest.mark.parametrize(
    "command",
    [
        ["status", "raysubmit_x"],
        ["logs", "raysubmit_x"],
        ["logs", "raysubmit_x", "--follow"],
        ["cancel", "raysubmit_x"],
        ["submit", "sweeps/quickstart.yaml"],
    ],
)
def test_a_silent_job_server_ends_the_command_after_its_timeout(silent_server, command):
    done, took = _cli(*command, "--address", silent_server, "--timeout", "2")
    assert done.returncode == 2, done.stderr[-2000:]
    said = " ".join(done.stderr.split())
    assert f"no answer from the job server at {silent_server} within 2 s" in said
    assert took < 60  # start-up (imports) included; the call itself gave up at 2 s


def test_the_timeout_comes_from_the_environment_too(silent_server):
    done, _ = _cli("status", "raysubmit_x", "--address", silent_server, env={"ATTNSWEEP_TIMEOUT": "1.5"})
    assert done.returncode == 2 and "within 1.5 s" in " ".join(done.stderr.split())


def test_run_on_a_silent_cluster_address_ends_after_the_timeout(silent_server, tmp_path):
    address = silent_server.removeprefix("http://")
    done, _ = _cli(
        "run",
        "sweeps/quickstart.yaml",
        "--address",
        address,
        "--store",
        str(tmp_path / "s"),
        "--no-analyze",
        env={"ATTNSWEEP_TIMEOUT": "3"},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"no answer from the Ray cluster at {address} within 3 s" in " ".join(done.stderr.split())
    assert not (tmp_path / "s" / "runs").exists()  # nothing recorded: nothing ran


@pytest.mark.parametrize("value", ["0", "inf", "soon"])
def test_a_timeout_that_is_not_a_sane_number_of_seconds_is_refused(value):
    done, _ = _cli("status", "raysubmit_x", "--timeout", value)
    assert done.returncode == 2 and "--timeout" in done.stderr
