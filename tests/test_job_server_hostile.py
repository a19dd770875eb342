"""`submit`, `status`, `logs` and `cancel` against job servers that misbehave: each a real
HTTP server on 127.0.0.1 (every loop it runs is bounded), answering as a head without a
dashboard agent does, or with an endless body, a huge Content-Length, deeply nested JSON,
a body that drips one byte at a time, or a log full of terminal escapes.

What must hold: one clear error (a RunError, exit 2 from the CLI), no traceback, memory
bounded, and each command done within its --timeout, retries included.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from attnsweep.orchestrator import jobs
from attnsweep.orchestrator.errors import RunError

pytestmark = pytest.mark.slow  # the job server and sweeps submitted to it

SPEC = (
    "name: hostile\nseeds: 1\ngrid: {T: [8], m: [16]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 20}\n"
)
VERSION = {"version": "4", "ray_version": "2.60.0", "ray_commit": "0" * 40, "session_name": "s"}
AGENT_TRACEBACK = (
    'Traceback (most recent call last):\n  File "job_head.py", line 1, in stop_job\n'
    "TimeoutError: Failed to get head node agent within 10 seconds. The last exception is x\n"
)
ESCAPES = "step 1\rOVERWRITTEN \x1b[2J\x1b]0;pwned\x07 \u202eevil\tend\n"
BIG = 20_000  # pieces of 64 KiB an endless body sends at most: 1.3 GB, far above any bound tested here


class Misbehaving(BaseHTTPRequestHandler):
    """Answers by the server's ``mode``; the version endpoint answers as Ray 2.60 does."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "application/json",
        length: int | None = None,
    ):
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self):
        mode = self.server.mode
        if self.command == "PUT" or self.headers.get("content-length"):
            self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/api/version" and mode not in ("endless-version",):
            return self._send(200, json.dumps(VERSION).encode())
        if self.path.startswith("/api/packages/"):
            return self._send(404 if self.command == "GET" else 200, b"")
        if mode == "agentless":
            time.sleep(0.5)  # Ray's head waits for an agent before it answers
            if self.path == "/api/jobs/" and self.command == "POST":
                return self._send(500, b"No available agent to submit job, please try again later.", "text/plain")
            if self.path.endswith("/stop"):
                return self._send(500, AGENT_TRACEBACK.encode(), "text/plain")
            return self._send(200, json.dumps({"status": "PENDING", "message": ""}).encode())
        if mode in ("endless", "endless-version"):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("connection", "close")
            self.end_headers()
            piece = b"[" + b"0," * 32_767 + b"0"
            for _ in range(BIG):
                self.wfile.write(piece)
            return None
        if mode == "huge-length":
            return self._send(200, b'{"status": "RUNNING", "message": "', length=10**12)
        if mode == "deep":
            return self._send(200, b"[" * 200_000 + b"]" * 200_000)
        if mode == "drip":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "1000")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
            return None
        if mode == "escapes":
            if self.path.endswith("/logs"):
                return self._send(200, json.dumps({"logs": ESCAPES}).encode())
            return self._send(200, json.dumps({"status": "FAILED\x1b[31m", "message": "bad\r\x1b[1Aup"}).encode())
        if mode == "error-escapes":
            return self._send(500, b"Traceback\nValueError: \x1b[2J\rgone", "text/plain")
        return self._send(500, b"unknown mode", "text/plain")

    def do_GET(self):  # noqa: N802 - the http.server hook names
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up reading: as it should
            self._answer()

    do_POST = do_PUT = do_GET  # noqa: N815


@pytest.fixture
def server():
    """A function mode -> address of a server that misbehaves that way (stopped after the test)."""
    started: list[ThreadingHTTPServer] = []

    def start(mode: str) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
        httpd.daemon_threads = True
        httpd.mode = mode
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def no_token(tmp_path, monkeypatch):
    """No token on this machine: the calls under test leave this process's environment alone."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)


def _timed(fn):
    started = time.monotonic()
    with pytest.raises(RunError) as caught:
        fn()
    return str(caught.value), time.monotonic() - started


def test_submit_to_a_head_without_an_agent_keeps_to_its_timeout_and_names_the_agent(server, tmp_path):
    import ray.job_submission  # noqa: F401 - imported before the clock starts: its import is not the server's time

    address = server("agentless")
    (tmp_path / "spec.yaml").write_text(SPEC)
    message, took = _timed(lambda: jobs.submit(tmp_path / "spec.yaml", address, "/shared/store", timeout_s=4))
    assert took <= 4 + 1.5, took  # Ray's own retries went on for minutes
    assert "dashboard agent" in message and "No available agent" in message and "port" in message, message
    assert "ray status" in message and "dashboard_agent.log" in message


def test_status_logs_and_cancel_keep_to_their_timeout(server, tmp_path):
    address = server("drip")
    for call in (
        lambda: jobs.status(address, "j", timeout_s=1.5),
        lambda: jobs.cancel(address, "j", timeout_s=1.5),
        lambda: jobs.logs(address, "j", write=lambda _: None, timeout_s=1.5),
    ):
        message, took = _timed(call)
        assert took <= 1.5 + 0.5 and "within 1.5 s" in message, (took, message)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    message, took = _timed(lambda: jobs.status(f"http://127.0.0.1:{port}", "j", timeout_s=3))
    assert took <= 3.5 and "no Ray job server answers" in message


def test_cancel_on_a_head_without_an_agent_names_the_agent(server):
    message, _ = _timed(lambda: jobs.cancel(server("agentless"), "raysubmit_1", timeout_s=5))
    assert "dashboard agent" in message and "Traceback" not in message


@pytest.mark.parametrize("mode", ["endless", "huge-length", "deep"])
def test_an_answer_out_of_bounds_is_one_clear_error(server, mode):
    address = server(mode)
    for call in (
        jobs.status,
        jobs.cancel,
        lambda a, j, timeout_s: jobs.logs(a, j, write=lambda _: None, timeout_s=timeout_s),
    ):
        message, took = _timed(lambda call=call: call(address, "j", timeout_s=20))
        assert took < 20
        expected = "nested too deeply" if mode == "deep" else "longer than 64 MiB"
        assert expected in message, message


def _cli_peak(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI run with ``args`` in a fresh process, and its peak resident memory in bytes."""
    wrapper = (
        "import atexit, sys\n"
        "def peak():\n"
        "    line = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "    sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
        "atexit.register(peak)\n"
        "sys.argv = ['attnsweep', *sys.argv[1:]]\n"
        "from attnsweep.cli import main\n"
        "main()\n"
    )
    env = dict(os.environ, HOME=str(cwd), RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    peak = [int(line.split()[1]) * 1024 for line in proc.stderr.splitlines() if line.startswith("PEAK ")]
    return proc, peak[-1]


@pytest.mark.parametrize("command", ["status", "submit"])
def test_an_endless_answer_leaves_memory_bounded_and_no_traceback(server, tmp_path, command):
    (tmp_path / "spec.yaml").write_text(SPEC)
    mode = "endless" if command == "status" else "endless-version"  # submit: Ray's client reads the version first
    args = ["status", "j"] if command == "status" else ["submit", "spec.yaml", "--store", "/shared/store"]
    proc, peak = _cli_peak([*args, "--address", server(mode), "--timeout", "30"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "longer than 64 MiB" in proc.stderr and "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert peak < 700 * 2**20, peak  # the server would have sent 1.3 GB


def test_server_text_is_printed_escaped(server, tmp_path):
    address = server("escapes")
    logs = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "logs", "j", "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert logs.returncode == 0, logs.stderr
    assert "\x1b" not in logs.stdout and "\r" not in logs.stdout and "\u202e" not in logs.stdout
    assert logs.stdout == "step 1\\rOVERWRITTEN \\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\tend\n"
    status = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "status", "j", "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert status.stdout == "FAILED\\x1b[31m: bad\\r\\x1b[1Aup\n", status.stdout
    failing = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "cancel",
            "j",
            "--address",
            server("error-escapes"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert failing.returncode == 2 and "\x1b" not in failing.stderr and "\r" not in failing.stderr
    assert "\\x1b[2J\\rgone" in failing.stderr, failing.stderr


def test_submit_refuses_a_deeply_nested_answer_in_one_line(server, tmp_path):
    import ray.job_submission  # noqa: F401 - imported before the clock starts

    (tmp_path / "spec.yaml").write_text(SPEC)
    message, took = _timed(lambda: jobs.submit(tmp_path / "spec.yaml", server("deep"), "/shared/store", timeout_s=20))
    assert "nested too deeply" in message and took < 20, message
