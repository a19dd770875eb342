"""Fail when a section of BENCHMARKS.md outlives the code it measured.

Each ``## `` section of BENCHMARKS.md carries one marker line,

    <!-- measured: commit=<sha> date=YYYY-MM-DD files=path/a.py,path/b.py -->

naming the commit its numbers were measured at and the files whose code they measure (the
bench script among them). A section is stale when one of those files changed in a commit after
that one; this script lists every stale section, and every section without a marker, a commit
this clone lacks or a file that does not exist, and exits 1; 0 when every section is current.
``.ci/run`` runs it, so no claim silently outlives its code: re-measure the section (and move
its marker to the new commit) or remove it.

Usage: ``python bench/stale.py [BENCHMARKS.md]``
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MARKER = re.compile(r"<!-- measured: commit=([0-9a-f]{7,40}) date=(\d{4}-\d\d-\d\d) files=([^ ]+) -->")


def git(*args: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def sections(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` of every ``## `` section."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return [(p.splitlines()[0].strip(), p) for p in parts]


def problems(path: Path) -> list[str]:
    """What is wrong with each section of ``path``, one line each."""
    root = path.resolve().parent
    out = []
    for title, body in sections(path.read_text()):
        found = MARKER.findall(body)
        if len(found) != 1:
            out.append(f"{title!r}: {len(found)} 'measured' markers (one needed)")
            continue
        commit, _date, files = found[0]
        if git("cat-file", "-e", f"{commit}^{{commit}}", root=root).returncode != 0:
            out.append(f"{title!r}: commit {commit} is not in this clone")
            continue
        names = files.split(",")
        missing = [f for f in names if not (root / f).exists()]
        if missing:
            out.append(f"{title!r}: no such file {', '.join(missing)}")
            continue
        later = git("log", "--format=%h %s", f"{commit}..HEAD", "--", *names, root=root).stdout.splitlines()
        if later:
            out.append(f"{title!r}: measured at {commit}, but {len(later)} later commit(s) changed its code, "
                       f"the latest {later[0][:100]!r}: re-measure it or remove it")
    return out


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "BENCHMARKS.md")
    found = problems(path)
    for line in found:
        print(f"stale benchmark: {line}", file=sys.stderr)
    if not found:
        print(f"{path.name}: every section is current with the code it measured")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
