"""How long judging a published findings folder takes (``attnsweep report --from FOLDER``: a
scratch store rebuilt from the folder's rows, every run analysed, the claims judged, the report
and figures written), for this checkout's attnsweep against the one at another commit, side by
side and alternating, in scratch copies of the folder.

The other commit is installed into a folder of its own (``pip install --no-deps --target``) and
put first on ``PYTHONPATH``; both run on this environment's Python and libraries.

Usage: ``python bench/report_time.py [--base COMMIT] [--folder docs/findings] [--repeats 2]``
(about 2 minutes on 2 cores for the sparse-Boolean findings).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def install(commit: str, into: Path) -> Path:
    """attnsweep at ``commit``, installed into ``into/pkg``; the folder to put on PYTHONPATH."""
    tree = into / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True, capture_output=True)
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--target",
                str(into / "pkg"),
                str(tree),
            ],
            check=True,
            capture_output=True,
        )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    return into / "pkg"


def once(folder: Path, pythonpath: str | None, scratch: Path) -> float:
    """Seconds of one ``report --from`` of a fresh copy of ``folder`` (only its own runs' files)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    copy = scratch / folder
    shutil.copytree(
        ROOT / folder, copy, ignore=lambda d, names: [n for n in names if (Path(d) / n / "runs.parquet").exists()]
    )
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "report", "--from", str(folder)],
        cwd=scratch,
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="4f0141a", help="the commit to compare with")
    ap.add_argument("--folder", default="docs/findings")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = install(args.base, Path(tmp))
        times: dict[str, list[float]] = {"base": [], "this checkout": []}
        for _ in range(args.repeats):
            times["base"].append(once(Path(args.folder), str(base), Path(tmp) / "scratch"))
            times["this checkout"].append(once(Path(args.folder), None, Path(tmp) / "scratch"))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"report --from {args.folder}, {args.repeats} alternating runs each (seconds)")
    print("| attnsweep | runs | median |")
    print("|---|---|---|")
    for k, v in times.items():
        print(f"| {k} ({args.base if k == 'base' else 'HEAD'}) | {', '.join(f'{x:.1f}' for x in v)} | {med[k]:.1f} |")
    print(f"| this checkout / base | | **{med['this checkout'] / med['base']:.2f}** |")


if __name__ == "__main__":
    main()
