"""The job commands' REST calls against a small real HTTP server on localhost (no Ray): the
requests they send (path, escaping, token), what each answer becomes, and their deadline.

The answers a real Ray job server gives are checked beside Ray's own client in
tests/test_jobs.py; here the server says whatever a test needs, fast.
"""

from __future__ import annotations

import json
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

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-0123456789abcdef"
VERSION = (200, {"version": "3", "ray_version": "2.60.0", "ray_commit": "x"})


class FakeJobServer:
    """A threaded HTTP server on 127.0.0.1 that answers each path from ``routes``
    (``path -> (status, JSON value or bytes[, headers])``, 404 when absent) and records
    every request as ``(method, raw path, headers)``."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.requests: list[tuple[str, str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                server.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, body, *extra = server.routes.get(self.path, (404, b"404: Not Found"))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def serve():
    servers: list[FakeJobServer] = []

    def start(routes: dict) -> FakeJobServer:
        servers.append(FakeJobServer(routes))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def token_env(monkeypatch, tmp_path):
    """No token from this machine: a fresh home, no RAY_AUTH_* variables."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_three_calls_send_the_documented_requests_and_return_their_answers(serve):
    server = serve(
        {
            "/api/jobs/raysubmit_A": (
                200,
                {"status": "RUNNING", "message": "Job is currently running."},
            ),
            "/api/jobs/raysubmit_A/logs": (200, {"logs": "line 1\nline 2\n"}),
            "/api/jobs/raysubmit_A/stop": (200, {"stopped": True}),
            "/api/jobs/raysubmit_B": (200, {"status": "SUCCEEDED", "message": None}),
        }
    )
    assert jobs.status(server.address, "raysubmit_A") == ("RUNNING", "Job is currently running.")
    assert jobs.status(server.address, "raysubmit_B") == ("SUCCEEDED", "")
    out: list[str] = []
    jobs.logs(server.address, "raysubmit_A", write=out.append)
    assert out == ["line 1\nline 2\n"]
    assert jobs.cancel(server.address, "raysubmit_A") is True
    assert [(m, p) for m, p, _ in server.requests] == [
        ("GET", "/api/jobs/raysubmit_A"),
        ("GET", "/api/jobs/raysubmit_B"),
        ("GET", "/api/jobs/raysubmit_A/logs"),
        ("POST", "/api/jobs/raysubmit_A/stop"),
    ]
    assert all("authorization" not in headers for *_, headers in server.requests)  # no token here: none sent


def test_an_address_without_scheme_or_with_a_trailing_slash_is_the_same_server(serve):
    server = serve({"/api/jobs/j": (200, {"status": "PENDING", "message": "m"})})
    for address in (server.address + "/", server.address.removeprefix("http://")):
        assert jobs.status(address, "j") == ("PENDING", "m")


@pytest.mark.parametrize("address", ["ray://127.0.0.1:10001", "http://", "ftp://host:1"])
def test_an_address_that_is_not_http_is_refused_naming_it(address):
    with pytest.raises(RunError, match="--address"):
        jobs.status(address, "j")


@pytest.mark.parametrize(
    "job_id, path",
    [
        ("a/b", "/api/jobs/a%2Fb"),
        ("../version", "/api/jobs/..%2Fversion"),
        ("x?y#z", "/api/jobs/x%3Fy%23z"),
        ("a b", "/api/jobs/a%20b"),
        ("ü", "/api/jobs/%C3%BC"),
    ],
)
def test_a_job_id_is_escaped_so_it_names_no_other_endpoint(serve, job_id, path):
    server = serve({"/api/version": VERSION})
    with pytest.raises(RunError) as caught:
        jobs.status(server.address, job_id)
    assert str(caught.value) == f"no job {job_id!r} at {server.address}"
    assert server.requests[0][:2] == ("GET", path)


@pytest.mark.parametrize("job_id", ["", ".", ".."])
def test_a_job_id_the_api_cannot_name_is_refused_without_a_request(serve, job_id):
    server = serve({})
    with pytest.raises(RunError, match=f"no job {job_id!r} at "):
        jobs.cancel(server.address, job_id)
    assert server.requests == []


@pytest.mark.parametrize("call", ["status", "logs", "cancel"])
def test_a_404_from_a_ray_job_server_is_no_such_job_and_from_another_server_is_no_job_server(serve, call):
    ray_server = serve({"/api/version": VERSION})
    with pytest.raises(RunError) as caught:
        _call(call, ray_server.address, "raysubmit_gone")
    assert str(caught.value) == f"no job 'raysubmit_gone' at {ray_server.address}"
    other = serve({})  # 404 to everything
    with pytest.raises(RunError, match=f"no Ray job server answers at {other.address}.*ray start --head"):
        _call(call, other.address, "raysubmit_gone")


def test_nothing_listening_gives_the_start_hint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when the block ends
    with pytest.raises(RunError, match=f"no Ray job server answers at {address}: .*refused.*ray start --head"):
        jobs.status(address, "j")


def test_an_error_answer_is_quoted_by_its_last_line_naming_the_job(serve):
    traceback_text = b"Traceback (most recent call last):\n  File x\nRuntimeError: the agent is gone\n"
    server = serve(
        {
            "/api/jobs/j/stop": (500, traceback_text),
            "/api/jobs/j/logs": (400, b"Can only get logs of submission type jobs"),
            "/api/jobs/j": (200, b"<html>not json</html>"),
        }
    )
    with pytest.raises(RunError, match=r"cannot stop job 'j' at .*HTTP 500: RuntimeError: the agent is gone$"):
        jobs.cancel(server.address, "j")
    with pytest.raises(RunError, match="cannot read the log of job 'j' at .*HTTP 400: Can only get logs"):
        jobs.logs(server.address, "j")
    with pytest.raises(RunError, match="not a JSON object: <html>not json</html>"):
        jobs.status(server.address, "j")


def test_the_token_is_sent_as_rays_client_sends_it_and_never_shown(serve, monkeypatch, token_env, tmp_path):
    server = serve({"/api/jobs/j": (200, {"status": "RUNNING", "message": ""})})
    sent = lambda: server.requests[-1][2].get("authorization")  # noqa: E731
    (token_env / ".ray").mkdir(parents=True)
    (token_env / ".ray" / "auth_token").write_text(f"{TOKEN}-home\nignored second line\n")
    jobs.status(server.address, "j")
    assert sent() == f"Bearer {TOKEN}-home"
    (tmp_path / "token").write_text(f"  {TOKEN}-path  \n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "token"))
    jobs.status(server.address, "j")
    assert sent() == f"Bearer {TOKEN}-path"
    monkeypatch.setenv("RAY_AUTH_TOKEN", f" {TOKEN} ")
    jobs.status(server.address, "j")
    assert sent() == f"Bearer {TOKEN}"
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as Ray's client: no header then
    jobs.status(server.address, "j")
    assert sent() is None


def test_a_token_path_with_no_token_is_an_error_naming_the_path(serve, monkeypatch, tmp_path):
    server = serve({})
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
    with pytest.raises(RunError, match="RAY_AUTH_TOKEN_PATH=.*missing: no token there"):
        jobs.status(server.address, "j")
    assert server.requests == []


def test_a_refused_or_missing_token_says_what_to_do_without_showing_it(serve, monkeypatch):
    server = serve({"/api/jobs/j": (401, b"Unauthorized: Missing authentication token")})
    with pytest.raises(RunError, match="wants a token .*RAY_AUTH_TOKEN"):
        jobs.status(server.address, "j")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(RunError, match="RAY_AUTH_MODE=disabled here sends none"):
        jobs.status(server.address, "j")
    monkeypatch.delenv("RAY_AUTH_MODE")
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    server.routes["/api/jobs/j"] = (
        403,
        f"Forbidden: Invalid authentication token {TOKEN}".encode(),
    )
    with pytest.raises(RunError) as caught:
        jobs.status(server.address, "j")
    assert "refused the token from RAY_AUTH_TOKEN (HTTP 403)" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(serve, monkeypatch):
    elsewhere = serve({"/api/jobs/j": (200, {"status": "RUNNING", "message": ""})})
    server = serve({"/api/jobs/j": (307, b"", {"Location": f"{elsewhere.address}/api/jobs/j"})})
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    with pytest.raises(RunError, match="HTTP 307"):
        jobs.status(server.address, "j")
    assert elsewhere.requests == []


@pytest.fixture()
def trickling_server(tcp_server):
    """Answers with headers promising 10,000 bytes, then sends one byte every 0.2 s: no single
    socket read waits long, so only an overall deadline ends the call."""

    def serve(conn, stop):
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")
        while not stop.wait(0.2):
            try:
                conn.sendall(b" ")
            except OSError:
                return

    return tcp_server(serve)


@pytest.mark.slow
@pytest.mark.parametrize("call", ["status", "logs", "cancel"])
def test_a_server_that_trickles_bytes_meets_the_overall_deadline(trickling_server, call):
    t0 = time.monotonic()
    with pytest.raises(RunError, match=f"no answer from the job server at {trickling_server} within 1.5 s"):
        _call(call, trickling_server, "j", timeout_s=1.5)
    assert time.monotonic() - t0 < 10


def test_importing_the_module_and_calling_status_loads_no_ray(serve):
    server = serve({"/api/jobs/j": (200, {"status": "SUCCEEDED", "message": "done"})})
    code = (
        "import sys, attnsweep.orchestrator.jobs as j; print(j.status(sys.argv[1], 'j')); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'torch', 'pydantic', 'numpy', 'polars'}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, server.address],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["('SUCCEEDED', 'done')", "[]"]


def _call(name: str, address: str, job_id: str, timeout_s: float = 10.0):
    if name == "logs":
        return jobs.logs(address, job_id, write=lambda _: None, timeout_s=timeout_s)
    return getattr(jobs, name)(address, job_id, timeout_s=timeout_s)


def test_a_status_with_control_characters_is_shown_escaped(serve):
    # A server (or a job's message) with escape sequences must not recolour or rewrite the terminal.
    server = serve(
        {
            "/api/jobs/j": (
                200,
                {"status": "RUNNING\x1b[2J", "message": "ok\r\x1b[31mFAKE\n\u202egnp.exe"},
            )
        }
    )
    state, message = jobs.status(server.address, "j")
    # The message's line break stays one (a failed job's message ends with its last log lines).
    # A colour code in the message is dropped (it can only restyle text); the rest is written out.
    assert state == "RUNNING\\x1b[2J" and message == "ok\\rFAKE\n\\u202egnp.exe"
    assert all(ch.isprintable() for ch in state + message.replace("\n", ""))
