"""Fixtures shared by test files, and the guard of the ``slow`` marker (the tiers: docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from project_layout import PACKAGES, ROOT, folder

ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def pytest_sessionstart(session):
    """A strict editable install links each module once, when it is installed: a module added
    since is missing from the tree and one removed since is a dangling link there; either would
    fail later (an ImportError, mypy stopping at a file it cannot read) far from the cause."""
    import importlib.util

    spec = importlib.util.find_spec("attnsweep")
    if spec is None or spec.origin is None or not Path(spec.origin).is_symlink():
        return  # a wheel, or a lenient editable install: nothing links modules one by one
    tree = Path(spec.origin).parent
    linked = {package: tree.joinpath(*package.split(".")[1:]) for package in PACKAGES}
    added = [
        str(source.relative_to(ROOT))
        for package in PACKAGES
        for source in folder(package).glob("*.py")
        if not (linked[package] / source.name).exists()
    ]
    removed = [
        str(folder(package).relative_to(ROOT) / link.name)
        for package in PACKAGES
        for link in linked[package].glob("*.py")
        if link.is_symlink() and not link.exists()
    ]
    if added or removed:
        changes = [*(f"{p} (added)" for p in added), *(f"{p} (removed)" for p in removed)]
        pytest.exit(
            f"the editable install predates {', '.join(changes)}: run `make setup` (or "
            ".venv/bin/pip install -e '.[test,dev]' --config-settings editable_mode=strict) to relink it",
            returncode=2,
        )


def pytest_configure(config):
    """The tiers are by marker, not by folder: a test is fast unless it, its class or its module
    says ``pytest.mark.slow`` (``pytestmark = pytest.mark.slow`` at the top of a module, or
    ``@pytest.mark.slow`` on a test). What a test costs decides, measured with ``--durations``:
    real Ray sweeps, the job server, the CLI in a subprocess that trains, wheel builds, published
    findings rebuilt. A file that decides nothing is fast, and ``make test-fast``
    (``pytest -m "not slow"``) runs it. The guard: ``slow`` stays registered in pyproject, where
    ``--strict-markers`` turns a misspelt mark (``slwo``) into an error instead of a costly test
    quietly left in the fast tier."""
    if not any(line.split(":")[0].strip() == "slow" for line in config.getini("markers")):
        raise pytest.UsageError("the `slow` marker is not registered in pyproject's [tool.pytest.ini_options]")
    _ctrl_c_as_at_a_terminal()


def _ctrl_c_as_at_a_terminal() -> None:
    """The tests that press Ctrl-C stand for a user at a terminal, where SIGINT is not ignored.
    A runner that starts the suite in the background (``cmd &`` in a script, ``nohup``) hands it
    SIGINT ignored; Python records that, and code that restores a handler it read (an in-process
    ray.init) makes it ignored for real, which every process the tests start then inherits
    across exec: the CLI they press Ctrl-C in would never see it."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session")
def attnsweep_wheel(tmp_path_factory) -> Path:
    """attnsweep's wheel, built from a copy of what the build reads (tests/test_packaging.py,
    tests/test_extension.py)."""
    out = tmp_path_factory.mktemp("wheel")
    # From a copy of what the build reads: setuptools' build/ folder in a checkout may hold
    # modules of an earlier layout, which a build there would put in the wheel again.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(
            folder(package),
            source / folder(package).relative_to(ROOT),
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    # No build isolation: the build uses this environment's setuptools, so the test needs no index.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr
    # Package data is declared, never guessed: setuptools has no folder to warn about.
    assert "would be ignored" not in proc.stderr and "absent from the `packages`" not in proc.stderr, proc.stderr
    [built] = out.glob("attnsweep-*.whl")
    return built
