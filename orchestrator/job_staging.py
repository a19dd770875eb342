"""What a sweep's Ray job carries: its working directory, holding only the spec and this
project's source copied in the installed layout (``attnsweep/`` with its packages inside),
and the command that runs the spec there.

The cluster thus runs the submitter's code (its git commit is recorded in the run as usual)
and never sees private files, virtual environments or local stores. Third-party packages
(torch, ray, polars...) come from the cluster's own environment (cluster.yaml installs them).
"""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from attnsweep.orchestrator.job_answers import printable

# What the job's command falls back to when no --store is given: the store the cluster
# itself names (cluster.yaml exports ATTNSWEEP_STORE on every node).
CLUSTER_STORE = '"${ATTNSWEEP_STORE:?set ATTNSWEEP_STORE on the cluster or give --store}"'


def entrypoint(store: str | None, progress_interval_s: float | None) -> str:
    """The job's command: run ``spec.yaml`` (in the working directory) on the cluster into
    ``store`` (None: the cluster's ``ATTNSWEEP_STORE``)."""
    target = shlex.quote(store) if store else CLUSTER_STORE
    # No figures on the cluster (they would land in the job's temporary directory):
    # analyze the run from any machine that reaches the store.
    command = f"python -m attnsweep.cli run spec.yaml --address auto --store {target} --no-analyze"
    if progress_interval_s is not None:
        command += f" --progress-interval {float(progress_interval_s):g}"
    return command


SOURCE_SUFFIXES = frozenset({".py", ".pyi", ".j2", ".csv"})
"""What counts as the project's source when a job is staged: its modules, and the package
data that pyproject.toml ships (report templates, reference read-offs). Nothing else in the
package folders travels to the cluster (no .env, keys, stores, notebooks, caches)."""
SECRET_NAMES = re.compile(
    r"(^\.env(\..*)?$|^\.netrc$|^\.pgpass$|^id_(rsa|dsa|ecdsa|ed25519)|\.(pem|key|p12|pfx|jks|keystore)$"
    r"|credential|secret|token)",
    re.IGNORECASE,
)
"""File names that look like secrets: never staged, even with a source suffix (a warning names them)."""


def stage_sources(staging: Path, warn: Callable[[str], None] | None = None) -> Path:
    """Copy the source into ``staging`` as it installs: ``attnsweep/`` (its own modules) with
    ``attnsweep/orchestrator``, ``attnsweep/results``... inside, wherever each folder lives
    here (``interface/``, ``orchestrator/``... in a checkout, inside ``attnsweep/`` when installed).
    Only source files go (:func:`copy_source`). ``python -m attnsweep.cli`` then runs in
    ``staging``; returns ``staging / "attnsweep"``.

    Args:
        warn: told each file left out because its name looks like a secret (default: stderr).
    """
    top = staging / "attnsweep"
    # Found, not imported: the face (attnsweep/__init__.py) sits above this package. Resolved:
    # a strict editable install finds each module through a link into the checkout, and
    # copy_source follows no link out of the folder it copies.
    face = Path(importlib.util.find_spec("attnsweep").origin).resolve().parent
    inside = packages()
    copy_source(face, top, warn, skip=set(inside))
    for package in inside:
        source = Path(importlib.util.find_spec(f"attnsweep.{package}").origin).resolve().parent
        copy_source(source, top / package, warn)
    return top


def packages() -> list[str]:
    """The code packages inside the ``attnsweep`` namespace (``orchestrator``, ``results``...).

    From a checkout (an editable install, strict or not) they are pyproject.toml's package-dir,
    the one list; a wheel ships no pyproject.toml, and its installed tree holds exactly them."""
    import tomllib

    spec = importlib.util.find_spec("attnsweep")
    if spec is None or spec.origin is None:
        return []
    pyproject = Path(spec.origin).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        mapped = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
        root = pyproject.parent
        return sorted(
            name.removeprefix("attnsweep.")
            for name, folder in mapped.items()
            if name != "attnsweep" and (root / folder / "__init__.py").is_file()
        )
    return sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations or []) if m.ispkg)


def copy_source(
    source: Path,
    target: Path,
    warn: Callable[[str], None] | None = None,
    skip: set[str] = frozenset(),
) -> list[Path]:
    """Copy the source files under ``source`` to ``target`` (same relative paths); returns
    the paths copied, relative to ``source``.

    A source file has a suffix in :data:`SOURCE_SUFFIXES` and a name that does not look
    like a secret (:data:`SECRET_NAMES`; those are named to ``warn``). Links are never
    followed out of ``source``: a link (to a file or a folder) whose target lies outside it
    is left out, one inside is copied as the file it names. Hidden folders and caches are
    not walked. Top-level folders named in ``skip`` are left out.
    """
    warn = warn or (lambda text: print(text, file=sys.stderr))
    root = source.resolve()
    copied: list[Path] = []
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        rel_dir = here.relative_to(source)
        kept = []
        for name in sorted(dirs):
            path = here / name
            if name.startswith(".") or name == "__pycache__" or (rel_dir == Path(".") and name in skip):
                continue
            if path.is_symlink():  # os.walk does not enter it; a link inside the tree names files seen anyway
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            path = here / name
            if Path(name).suffix not in SOURCE_SUFFIXES:
                if SECRET_NAMES.search(name):
                    warn(f"not staged (looks like a secret): {printable(str(path))}")
                continue
            if SECRET_NAMES.search(name):
                warn(f"not staged (looks like a secret): {printable(str(path))}")
                continue
            resolved = path.resolve()
            if not resolved.is_file() or not resolved.is_relative_to(root):
                continue  # a link out of the tree (or to nothing): never followed
            dest = target / rel_dir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resolved, dest)
            copied.append(rel_dir / name)
    return copied
