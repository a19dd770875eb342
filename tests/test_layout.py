"""The project's layout, read from its source with ``ast``: layers, cycles, sizes, README.

Layers, from the top: the face (``attnsweep`` itself, in ``interface/``: the CLI and the Python
API) imports anything below it; ``presentation`` (analysis printing, reports, findings, query
output) imports what is below it; then ``analysis`` (judging runs), ``orchestrator`` (the sweep
machinery), ``stats`` (m*, fits, verdicts, figures), ``results`` (the store), ``workers`` and
``tasks``. No package imports one above it, so there is no
cycle between packages; within a package no two modules import each other, even lazily.
Every import of the project's code is absolute, under ``attnsweep``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

from project_layout import CODE_PACKAGES, PACKAGES, ROOT
from project_layout import folder as _folder

LAYERS = ["tasks", "workers", "results", "stats", "orchestrator", "analysis", "presentation", "attnsweep"]
"""From the bottom; ``attnsweep`` is the face (the modules of ``interface/``)."""
ALLOWED = {"tasks": set(), "results": set(), "workers": {"tasks"}, "stats": {"results"}}
"""Packages that promise more than their layer: README says these import (almost) nothing."""
MAX_LINES = 500
"""The most lines of code a source module may have (:func:`_code_lines`, as the package sizes
are counted): past that, it holds more than one job. Blank lines, comments and docstrings do not
count: the formatter lays a call out one argument per line where it does not fit, so a count
of all lines would measure layout as much as size."""


BARE = tuple(p.removeprefix("attnsweep.") for p in CODE_PACKAGES if p != "attnsweep")
"""The folders mapped into the namespace: importing one bare (``import results``) finds
another distribution's module, or none, so every import names ``attnsweep.``."""


def _modules() -> dict[str, Path]:
    """``attnsweep.results.store`` -> ``results/store.py``, for every installed module."""
    out = {}
    for package in PACKAGES:
        for path in sorted(_folder(package).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and f"attnsweep.{parts[1]}" in PACKAGES else "attnsweep"


def _imports(path: Path, module: str) -> set[str]:
    """The project modules (or packages) ``path`` imports anywhere, lazily too."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for a in node.names:  # `from attnsweep.results import store` imports a module
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {name for name in found if name == "attnsweep" or name.startswith("attnsweep.")}


GRAPH = {module: _imports(path, module) for module, path in MODULES.items()}


def test_no_package_imports_one_above_it():
    wrong = []
    for module, targets in GRAPH.items():
        here = _layer(module)
        for target in targets:
            there = _layer(target)
            if there == here:
                continue
            if LAYERS.index(there) > LAYERS.index(here) or (here in ALLOWED and there not in ALLOWED[here]):
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    assert not wrong, "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), or a node importing itself."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_cycle_between_packages():
    packages = defaultdict(set)
    for module, targets in GRAPH.items():
        packages[_layer(module)].update(_layer(t) for t in targets if _layer(t) != _layer(module))
    assert _cycles(packages) == []


def test_no_cycle_between_modules():
    """A package's ``__init__`` only names its modules (lazily), so imports of a package
    itself are left out; module to module, nothing imports itself back."""
    graph = {
        m: {t for t in targets if t in MODULES and t not in PACKAGES}
        for m, targets in GRAPH.items()
        if m not in PACKAGES
    }
    assert _cycles(graph) == []
    assert "attnsweep.orchestrator.driver" not in GRAPH["attnsweep.orchestrator.adaptive"]


def test_project_imports_are_absolute_and_under_attnsweep():
    """Not `import results` nor `from .store import`: an installed project has no top-level
    `results`, and one spelling per module keeps each module loaded once."""
    wrong = []
    files = [
        p
        for d in [
            *(_folder(p) for p in PACKAGES),
            ROOT / "tests",
            ROOT / "bench",
            ROOT / "scripts",
        ]
        for p in d.rglob("*.py")
    ]
    # At a line's start, after `;` or after a `\n` written in a string.
    pattern = re.compile(rf"(?:^|;|\\n)[ \t]*(from|import)[ \t]+(({'|'.join(BARE)})\b)", re.M)
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: relative import")
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in BARE]
        # Code in strings (scripts the tests run in a subprocess) too; test_packaging's
        # script imports a user's own `results` on purpose.
        for match in pattern.finditer(path.read_text()):
            line = path.read_text()[: match.start()].count("\n") + 1
            if path.name != "test_packaging.py" and f"{path.relative_to(ROOT)}:{line}" not in " ".join(wrong):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0).strip()}")
    assert not wrong, "\n".join(wrong)


def _code_lines(source: str) -> int:
    """Lines holding code: not blank, not comments, not docstrings."""
    docs = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    skip = (
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    )
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docs)


def test_no_package_holds_a_third_of_the_code():
    sizes = defaultdict(int)
    for module, path in MODULES.items():
        sizes[_layer(module)] += _code_lines(path.read_text())
    total = sum(sizes.values())
    biggest = max(sizes, key=sizes.get)
    assert sizes[biggest] < 0.3 * total, f"{biggest}: {sizes[biggest]} of {total} lines of code ({dict(sizes)})"


def test_every_package_names_its_public_api():
    assert set(PACKAGES) - set(CODE_PACKAGES) == {"attnsweep.examples"}  # data only, and no .py there
    assert not list(_folder("attnsweep.examples").glob("*.py"))
    for package in CODE_PACKAGES:
        source = (_folder(package) / "__init__.py").read_text()
        assert "__all__" in source, package


def test_every_public_name_is_listed_once_and_loads():
    # One list per package, its __init__.pyi: type checkers read it, and lazy_loader attaches
    # the same names at run time (attach_stub). Each name must load from the module it names.
    import importlib

    for package in CODE_PACKAGES:
        assert "lazy.attach_stub(__name__, __file__)" in (_folder(package) / "__init__.py").read_text(), package
        assert (_folder(package) / "__init__.pyi").is_file(), package
        module = importlib.import_module(package)
        missing = [name for name in module.__all__ if not _loads(module, name)]
        assert missing == [], f"{package} lists names that do not load: {missing}"


def _loads(module, name: str) -> bool:
    try:
        getattr(module, name)
    except (AttributeError, ImportError):
        return False
    return True


def test_the_readme_layout_lists_exactly_the_packages():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([\w/]+?)/?` \|", section, re.M))
    packages = {str(_folder(p).relative_to(ROOT)) for p in CODE_PACKAGES}
    folders = {f for f in listed if (ROOT / f / "__init__.py").exists()}
    assert folders == packages, f"README lists {sorted(folders)}, the packages are {sorted(packages)}"


def test_the_package_list_is_pyprojects_everywhere():
    # The job staging copies these folders to the cluster; a wheel ships no pyproject.toml, so
    # the running code holds the list once, and here it is held to pyproject's.
    from attnsweep.orchestrator.job_staging import packages

    assert packages() == sorted(BARE)


def test_no_module_is_longer_than_one_job_needs():
    long = {
        str(path.relative_to(ROOT)): n for path in MODULES.values() if (n := _code_lines(path.read_text())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines of code: split them along their jobs: {long}"


def test_code_lines_leave_out_blank_lines_comments_and_docstrings():
    source = '"""Doc\nstring."""\n\n# a comment\nx = (\n    1,  # why\n)\n\n\ndef f():\n    """Doc."""\n    return x\n'
    assert _code_lines(source) == 5  # x = (, 1, ), def f():, return x


def test_no_module_has_a_second_path():
    """One path per module: no link in a package folder, no ``attnsweep/`` folder at the top
    to shadow the installed tree, and mypy skips the folders where they lie (it reads them
    through the editable install's link tree, under their import names)."""
    import tomllib

    links = [str(p.relative_to(ROOT)) for package in PACKAGES for p in _folder(package).rglob("*") if p.is_symlink()]
    assert links == []
    assert not (ROOT / "attnsweep").exists()
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    skipped = re.fullmatch(r"\^\(([\w|]+)\)/", mypy["exclude"][0])
    assert skipped, mypy["exclude"]
    assert set(skipped.group(1).split("|")) == {str(_folder(p).relative_to(ROOT)) for p in PACKAGES}
