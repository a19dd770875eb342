"""Fixtures shared by test files, and the ``slow`` marker of the end-to-end tier."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _package_folder(package: str) -> Path:
    """The repository folder of ``package`` (``attnsweep.results`` -> ``results/``)."""
    return ROOT / SETUPTOOLS.get("package-dir", {}).get(package, package.replace(".", "/"))


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
    for package in SETUPTOOLS["packages"]:
        folder = _package_folder(package)
        shutil.copytree(
            folder,
            source / folder.relative_to(ROOT),
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
