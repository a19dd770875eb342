"""Line coverage per package of attnsweep, and the floor each must reach (`make coverage`, .ci/run).

Reads the coverage data (``.coverage`` and the ``.coverage.*`` of each process), prints one line per
package (statements, missed, percent, floor) and exits 1 when any package is below its floor.
The floors are here and nowhere else; docs/testing.md gives them with the values measured.
A module belongs to the package whose folder holds it (pyproject's package-dir: interface/ is
``attnsweep`` itself), whatever path coverage recorded: the folder in the checkout or the
editable install's link tree (``build/__editable__*/attnsweep/results/...``).
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import coverage

ROOT = Path(__file__).resolve().parents[1]

# Percent of lines run by the whole suite (make coverage). Each floor sits 2.5-3 points under the
# value a whole `make coverage` run measured in a fresh clone (docs/testing.md, "Coverage"), so a
# timing-dependent branch does not fail CI, and never under 80.
FLOORS: dict[str, float] = {
    "attnsweep": 89,
    "attnsweep.presentation": 92,
    "attnsweep.analysis": 92,
    "attnsweep.orchestrator": 93,
    "attnsweep.stats": 94,
    "attnsweep.results": 89,
    "attnsweep.workers": 93,
    "attnsweep.tasks": 95,
}


def package_of(path: str, folders: dict[str, str]) -> str | None:
    """The package of a measured file of this checkout (a path in the editable install's link
    tree resolves to it); None for any other file, such as the copies of the source that the
    job-submission tests stage into a Ray working directory."""
    try:
        relative = Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return folders.get(relative.parts[0]) if len(relative.parts) > 1 else None


def main() -> int:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder: package for package, folder in setuptools["package-dir"].items()}
    cov = coverage.Coverage(config_file=str(ROOT / "pyproject.toml"))
    cov.load()
    cov.combine(strict=False)  # the .coverage.* files of the processes, if coverage run left any
    totals: dict[str, list[int]] = {package: [0, 0] for package in FLOORS}
    # The JSON report (kept in build/ for a closer look) lists every module of source_pkgs,
    # the ones no test imported too.
    out = ROOT / "build" / "coverage.json"
    out.parent.mkdir(exist_ok=True)
    cov.json_report(outfile=str(out))
    report = json.loads(out.read_text())
    for path, entry in report["files"].items():
        package = package_of(path, folders)
        if package not in totals:
            continue
        totals[package][0] += entry["summary"]["num_statements"]
        totals[package][1] += entry["summary"]["missing_lines"]
    failed = []
    print(f"{'package':<26} {'stmts':>6} {'miss':>6} {'cover':>7} {'floor':>6}")
    for package, (statements, missing) in totals.items():
        percent = 100.0 * (statements - missing) / statements if statements else 0.0  # no data: a failure
        floor = FLOORS[package]
        mark = "" if percent >= floor else "  BELOW FLOOR"
        print(f"{package:<26} {statements:>6} {missing:>6} {percent:>6.1f}% {floor:>5.0f}%{mark}")
        if percent < floor:
            failed.append(package)
    if failed:
        print(f"coverage below the floor (.ci/coverage_floors.py): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
