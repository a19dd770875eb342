"""An earlier commit of this repository, checked out in a temporary git worktree (for the
before/after benchmarks)."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import tomllib
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


def import_root(code_root: Path) -> Path:
    """The folder to put first on ``PYTHONPATH`` so that a child process imports the code at
    ``code_root`` under the names it uses. A tree whose pyproject maps its folders into
    ``attnsweep`` (``package-dir``, one folder per package) gets a folder of links laid out as
    that package, inside the tree; one that holds ``attnsweep/`` (or its packages at the top,
    before the namespace) is its own root. The current tree (:data:`ROOT`) is imported as
    installed."""
    if code_root == ROOT or (code_root / "attnsweep").is_dir():
        return code_root
    project = code_root / "pyproject.toml"
    dirs = (
        tomllib.loads(project.read_text()).get("tool", {}).get("setuptools", {}).get("package-dir")
        if project.is_file()
        else None
    )
    if not dirs or "attnsweep" not in dirs:
        return code_root
    base = code_root / ".bench-import"
    top = base / "attnsweep"
    if not top.is_dir():
        top.mkdir(parents=True)
        for entry in (code_root / dirs["attnsweep"]).iterdir():
            (top / entry.name).symlink_to(entry)
        for name, folder in dirs.items():
            if name != "attnsweep":
                (top / name.removeprefix("attnsweep.")).symlink_to(code_root / folder)
    return base


def prefix(code_root: Path) -> str:
    """How the code at ``code_root`` names its packages: ``"attnsweep."`` from the namespace
    on (issue 27: ``attnsweep.workers.config``), ``""`` before it (``workers.config``). A
    child process of a benchmark imports the earlier commit's modules by their own names,
    so that the installed namespace (the current code) does not stand in for them."""
    if Path(code_root) == ROOT or import_root(Path(code_root)) != Path(code_root):
        return "attnsweep."
    return "attnsweep." if (Path(code_root) / "attnsweep" / "cli.py").is_file() else ""
