"""Fixtures shared by test files, and the ``slow`` marker of the end-to-end tier."""

from __future__ import annotations

import socket
import threading

import pytest


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test in a module directly in tests/: the end-to-end tier (real Ray
    sweeps, the CLI in a subprocess, the job server, published findings rebuilt). The unit
    tests live in tests/<package>/ (orchestrator, results, stats, tasks, workers);
    ``make test-fast`` (``pytest -m "not slow"``) runs only those."""
    for item in items:
        if item.path.parent.name == "tests":
            item.add_marker(pytest.mark.slow)


@pytest.fixture()
def tcp_server():
    """``start(handle) -> "http://127.0.0.1:PORT"``: a TCP server on localhost whose every
    accepted connection goes to ``handle(conn, stop)`` in a thread of its own (``stop``: an
    Event set when the test ends); the servers and the connections are closed then."""
    stop = threading.Event()
    listeners: list[socket.socket] = []
    conns: list[socket.socket] = []

    def start(handle) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.2)
        listeners.append(listener)

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                conns.append(conn)
                threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    stop.set()
    for s in [*listeners, *conns]:
        s.close()
