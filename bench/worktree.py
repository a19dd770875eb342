"""An earlier commit of this repository, checked out in a temporary git worktree (for the
before/after benchmarks)."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checkout(rev: str):
    """Yield the folder of a detached worktree at ``rev``; removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(folder), rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield folder
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True)


def prefix(code_root: Path) -> str:
    """How the code at ``code_root`` names its packages: ``"attnsweep."`` from the namespace
    on (issue 27: ``attnsweep.workers.config``), ``""`` before it (``workers.config``). A
    child process of a benchmark imports the earlier commit's modules by their own names,
    so that the installed namespace (the current code) does not stand in for them."""
    return "attnsweep." if (Path(code_root) / "attnsweep" / "cli.py").is_file() else ""
