"""Fail when a section of BENCHMARKS.md outlives the code it measured.

Each ``## `` section of BENCHMARKS.md carries one marker line,

    <!-- measured: commit=<sha> date=YYYY-MM-DD files=path/a.py,path/b.py -->

naming the commit its numbers were measured at and the files whose code they measure (the
bench script among them). A section is stale when one of those files' code differs from what
it was at that commit (under its old name, if it moved since): for a Python file its syntax
tree without docstrings, each block of imports sorted (so a comment, a docstring, reformatting,
sorted imports or a move, which cannot change a measurement, leaves it current), for any other
file its bytes; this script lists every stale section, and every section without a marker, a commit
this clone lacks or a file that does not exist, and exits 1; 0 when every section is current.
``.ci/run`` runs it, so no claim silently outlives its code: re-measure the section (and move
its marker to the new commit) or remove it.

One exception, never silent: a section measured on a GPU, which a session without one cannot
re-measure, may carry a second line,

    <!-- not re-measured: commit=<sha> device=gpu -->

naming the last commit whose change to its files it has not been measured on. Its files are then
compared with that commit (a further change makes it stale again), its text must say "Not
re-measured" where a reader sees it, and this script lists it on every run.

Usage: ``python bench/stale.py [BENCHMARKS.md]``
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

MARKER = re.compile(r"<!-- measured: commit=([0-9a-f]{7,40}) date=(\d{4}-\d\d-\d\d) files=([^ ]+) -->")
CARRIED = re.compile(r"<!-- not re-measured: commit=([0-9a-f]{7,40}) device=(\w+) -->")


def git(*args: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def sections(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` of every ``## `` section."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return [(p.splitlines()[0].strip(), p) for p in parts]


def carried(path: Path) -> list[str]:
    """The sections that carry a GPU measurement over a change not re-measured, one line each."""
    out = []
    for title, body in sections(path.read_text()):
        for commit, device in CARRIED.findall(body):
            out.append(f"{title!r}: not re-measured on a {device} since {commit}")
    return out


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
        later = CARRIED.findall(body)
        if later:
            if len(later) > 1 or later[0][1] != "gpu" or "Not re-measured" not in body:
                out.append(
                    f"{title!r}: a 'not re-measured' marker needs device=gpu, one marker, and the words "
                    "'Not re-measured' in the section's text"
                )
                continue
            commit = later[0][0]
        if git("cat-file", "-e", f"{commit}^{{commit}}", root=root).returncode != 0:
            out.append(f"{title!r}: commit {commit} is not in this clone")
            continue
        names = files.split(",")
        missing = [f for f in names if not (root / f).exists()]
        if missing:
            out.append(f"{title!r}: no such file {', '.join(missing)}")
            continue
        changed = [
            name
            for name in names
            if _code(name, _text_at(commit, name, root)) != _code(name, git("show", f"HEAD:{name}", root=root).stdout)
        ]
        if changed:
            later = git("log", "--format=%h %s", f"{commit}..HEAD", "--", *changed, root=root).stdout.splitlines()
            latest = f", the latest {later[0][:100]!r}" if later else ""
            out.append(
                f"{title!r}: measured at {commit}, but the code of {', '.join(changed)} changed since"
                f"{latest}: re-measure it or remove it"
            )
    return out


def _text_at(commit: str, name: str, root: Path) -> str:
    """``name``'s text at ``commit``, following renames: a file moved since is compared with
    what it was under its old name ("" when it did not exist)."""
    shown = git("show", f"{commit}:{name}", root=root)
    if shown.returncode == 0:
        return shown.stdout
    log = git(
        "log",
        "--follow",
        "-M",
        "--name-only",
        "--format=",
        f"{commit}..HEAD",
        "--",
        name,
        root=root,
    )
    names = [line for line in log.stdout.splitlines() if line.strip()]
    for old in reversed(names):  # oldest last in the log: walk back from the oldest name
        shown = git("show", f"{commit}:{old}", root=root)
        if shown.returncode == 0:
            return shown.stdout
    return ""


def _code(name: str, text: str) -> str:
    """What of a file a measurement depends on: a Python file's syntax tree without its
    docstrings and with its imports sorted (comments and layout are not in the tree), any
    other file's text."""
    if not name.endswith(".py"):
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not body:
            continue
        first = body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            body = body[1:] or [ast.Pass()]
        node.body = _sorted_imports(body)
    return ast.dump(tree)


def _sorted_imports(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with each run of import statements as one sorted list of the names it binds:
    sorting imports (as ruff's isort does) or moving a project module leaves what a
    measurement runs as it was."""
    out: list[ast.stmt] = []
    run: list[tuple] = []
    for stmt in [*body, None]:
        if isinstance(stmt, ast.Import):
            run += [("import", a.name, a.asname) for a in stmt.names]
            continue
        if isinstance(stmt, ast.ImportFrom):
            # A project module's place is not what a measurement runs: a moved module is
            # imported from its new package with the same code (its own file, if measured,
            # is compared under its old name).
            module = "attnsweep" if (stmt.module or "").startswith("attnsweep") else stmt.module or ""
            run += [(module, stmt.level, a.name, a.asname) for a in stmt.names]
            continue
        if run:
            out.append(ast.Expr(ast.Constant(repr(sorted(run, key=repr)))))
            run = []
        if stmt is not None:
            out.append(stmt)
    return out


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "BENCHMARKS.md")
    found = problems(path)
    for line in found:
        print(f"stale benchmark: {line}", file=sys.stderr)
    for line in carried(path):
        print(f"carried without re-measurement: {line}")
    if not found:
        print(f"{path.name}: every section is current with the code it measured")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
