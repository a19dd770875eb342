"""The project's packages as pyproject.toml lists them: the one list every test reads.

``package-dir`` maps each package of the ``attnsweep`` namespace to a folder at the top of the
repository (``attnsweep`` itself to ``interface/``, ``attnsweep.results`` to ``results/``...).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGES: list[str] = SETUPTOOLS["packages"]
"""Every package that installs, ``attnsweep`` first."""


def folder(package: str) -> Path:
    """The repository folder of ``package`` (``attnsweep.results`` -> ``ROOT/results``)."""
    return ROOT / SETUPTOOLS["package-dir"][package]


CODE_PACKAGES = [p for p in PACKAGES if (folder(p) / "__init__.py").exists()]
"""The packages of code; the others (``attnsweep.examples``: sweeps/) ship data only."""


def package_data(package: str) -> list[str]:
    """The glob patterns of the data files ``package`` ships (``*`` in package-data: every package)."""
    data = SETUPTOOLS.get("package-data", {})
    return [*data.get("*", []), *data.get(package, [])]
