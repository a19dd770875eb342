"""One namespace: the installed project is ``attnsweep`` and nothing else at the top level.

The repository keeps its folders at the top (``orchestrator/``, ``results/``...); pyproject's
``package-dir`` maps them to ``attnsweep.orchestrator``, ``attnsweep.results``... These tests
build the wheel, read its file list, install it into a fresh virtual environment and check
that a user's own ``results`` and ``tasks`` packages are not shadowed; and that the editable
install imports from any directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from project_layout import PACKAGES, ROOT, folder, package_data

pytestmark = pytest.mark.slow  # a wheel built, venvs installed, mypy and pyright run: minutes

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(attnsweep_wheel) -> Path:
    return attnsweep_wheel


def test_the_wheel_holds_only_the_attnsweep_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1 and next(iter(dist_info)).startswith("attnsweep-")
    top = {n.split("/")[0] for n in names} - dist_info
    assert top == {"attnsweep"}, f"top-level names besides attnsweep: {sorted(top - {'attnsweep'})}"
    for bare in ("orchestrator", "results", "tasks", "workers", "presentation", "stats", "analysis", "interface"):
        assert not any(n.startswith(f"{bare}/") for n in names)
    # Every module of every package, at its place in the namespace.
    for package in PACKAGES:
        for module in folder(package).glob("*.py"):
            assert f"{package.replace('.', '/')}/{module.name}" in names, module
    # Package data: the report's templates and the paper's read-off.
    for package in PACKAGES:
        for pattern in package_data(package):
            files = list(folder(package).glob(pattern))
            assert files or pattern == "*.pyi", (package, pattern)
            for f in files:
                assert f"{package.replace('.', '/')}/{f.relative_to(folder(package)).as_posix()}" in names
    assert any(n.endswith(".j2") for n in names) and any(n.endswith(".csv") for n in names)
    # Every example spec, as `attnsweep examples` finds it in an installed wheel.
    specs = sorted((ROOT / "sweeps").glob("*.yaml"))
    assert specs and all(f"attnsweep/examples/{p.name}" in names for p in specs)
    assert {n for n in names if n.startswith("attnsweep/examples/")} == {f"attnsweep/examples/{p.name}" for p in specs}
    assert all(zipfile.ZipFile(wheel).read(f"attnsweep/examples/{p.name}") == p.read_bytes() for p in specs)
    entry_points = zipfile.ZipFile(wheel).read(f"{next(iter(dist_info))}/entry_points.txt").decode()
    assert "attnsweep = attnsweep." in entry_points


USER_CHECK = """
import importlib.metadata, sys
from pathlib import Path
import results, tasks
assert results.MARKER == "the user's results", results.__file__
assert tasks.MARKER == "the user's tasks", tasks.__file__
import attnsweep, attnsweep.results.store, attnsweep.tasks.errors, attnsweep.orchestrator.spec, attnsweep.workers.config
import results as again
assert again is results and sys.modules["tasks"] is tasks
site = Path(sys.argv[1]).resolve()
for module in (attnsweep, attnsweep.results.store, attnsweep.orchestrator.spec):
    assert Path(module.__file__).resolve().is_relative_to(site / "attnsweep"), module.__file__
assert attnsweep.results.store.ResultsStore is not None
from attnsweep.orchestrator.job_staging import packages
assert packages() == ["analysis", "orchestrator", "presentation", "results", "stats", "tasks", "workers"], packages()
print("ok", importlib.metadata.version("attnsweep"))
"""


def test_the_installed_wheel_leaves_a_users_results_and_tasks_alone(wheel, tmp_path):
    """A fresh venv (not --system-site-packages, which would see this editable install):
    the wheel goes in with --no-deps, and the dependencies come from this environment
    through a .pth file appended after the fresh site-packages (installing torch, Ray and
    polars again would take minutes). A .pth line only adds a folder to sys.path; the
    editable install's own .pth (its import hook) in that folder is not run."""
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    fresh_site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            env=ENV,
        ).stdout.strip()
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr
    (fresh_site / "zz-outer-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    user = tmp_path / "user"
    for name in ("results", "tasks"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(f'MARKER = "the user\'s {name}"\n')
    (user / "check.py").write_text(USER_CHECK)
    proc = subprocess.run(
        [python, "check.py", str(fresh_site)],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")
    # The console script of the wheel, from the user's folder.
    proc = subprocess.run(
        [venv / "bin" / "attnsweep", "--help"],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout
    # The example specs come from the wheel, not from a checkout.
    proc = subprocess.run(
        [venv / "bin" / "attnsweep", "examples", "copy", "quickstart", "qs.yaml"],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert (user / "qs.yaml").read_bytes() == (ROOT / "sweeps" / "quickstart.yaml").read_bytes()
    listed = subprocess.run(
        [venv / "bin" / "attnsweep", "examples"],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "PYTHONPATH": ""},
    )
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == sorted(
        p.stem for p in (ROOT / "sweeps").glob("*.yaml")
    )
    version = subprocess.run(
        [
            python,
            "-c",
            "import attnsweep, importlib.metadata as m; "
            "print(attnsweep.__version__ == m.version('attnsweep'), attnsweep.__version__)",
        ],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "PYTHONPATH": ""},
    )
    assert version.stdout.split() == ["True", PYPROJECT["project"]["version"]], version.stderr


def test_the_editable_install_imports_from_anywhere(tmp_path):
    """Outside the repository (no folder of it on sys.path), the editable install's link tree
    leads attnsweep.orchestrator to orchestrator/ and so on; the bare names are not there."""
    code = textwrap.dedent("""
        import importlib.util, sys
        from pathlib import Path
        import attnsweep.orchestrator.spec, attnsweep.results.store, attnsweep.workers.config, attnsweep.tasks.errors
        root = Path(sys.argv[1])
        assert Path(attnsweep.orchestrator.spec.__file__).resolve() == root / "orchestrator" / "spec.py"
        assert Path(attnsweep.results.store.__file__).resolve() == root / "results" / "store.py"
        for bare in ("orchestrator", "results", "tasks", "workers"):
            assert importlib.util.find_spec(bare) is None, bare
        print("ok")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


TYPED_USE = """
import attnsweep.orchestrator.spec as spec_module
from attnsweep.orchestrator.spec import load_spec

reveal_type(load_spec)
"""


def test_mypy_and_pyright_from_another_folder_resolve_the_package_to_its_source(tmp_path):
    """A user's editor or type checker, run outside the checkout, finds ``attnsweep.orchestrator``
    through the editable install's link tree (a path entry, no import hook) and so reads its
    source: mypy parses the file that links to orchestrator/spec.py, pyright knows the signature."""
    (tmp_path / "use.py").write_text(TYPED_USE)
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(
        [bin_dir / "mypy", "--python-executable", sys.executable, "--no-incremental", "-v", "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    parsed = [line.split()[2] for line in proc.stderr.splitlines() if line.endswith("(attnsweep.orchestrator.spec)")]
    assert len(parsed) == 1 and Path(parsed[0]).resolve() == ROOT / "orchestrator" / "spec.py", proc.stderr[-2000:]
    assert '-> attnsweep.orchestrator.spec.SweepSpec"' in proc.stdout, proc.stdout
    if not (bin_dir / "pyright").exists():
        pytest.skip("pyright is a dev extra: pip install -e '.[dev]'")
    proc = subprocess.run(
        [bin_dir / "pyright", "--pythonpath", sys.executable, "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stdout
    assert 'Type of "load_spec" is "(path: str | Path' in proc.stdout, proc.stdout


@pytest.mark.slow
def test_a_stale_link_tree_stops_the_tests_naming_the_module(tmp_path):
    """A module removed since the strict editable install leaves a dangling link in its tree:
    the next pytest session stops at once, naming it and what to run."""
    import importlib.util

    origin = Path(importlib.util.find_spec("attnsweep").origin)
    if not origin.is_symlink():
        pytest.skip("not a strict editable install: nothing is linked module by module")
    link = origin.parent / "orchestrator" / "zz_removed_since_install.py"
    link.symlink_to(ROOT / "orchestrator" / "zz_removed_since_install.py")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_doc_links.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env=ENV,
        )
    finally:
        link.unlink()
    assert proc.returncode == 2, proc.stdout
    assert "predates orchestrator/zz_removed_since_install.py (removed): run `make setup`" in proc.stdout
