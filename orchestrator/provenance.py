"""What produced a run: code version, package versions, host."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import platform
import socket
import subprocess
from pathlib import Path

PACKAGES = ("attnsweep", "torch", "ray", "polars", "pyarrow", "numpy", "scipy", "pydantic")


@functools.cache
def code_version() -> str:
    """The git commit of the source tree (with ``-dirty`` if it has local changes), or the
    installed package version when the code is not in a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return f"{sha}-dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return _version("attnsweep") or "unknown"


def package_versions() -> str:
    """JSON object of the versions of the packages a result depends on."""
    return json.dumps({p: _version(p) for p in PACKAGES} | {"python": platform.python_version()})


def host() -> str:
    """This machine's host name."""
    return socket.gethostname()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
