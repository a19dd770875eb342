"""``analyze`` (the CLI command and ``Store.analyze``) writes no file unless asked: figures
only into a folder given with ``--figures`` / ``figures=`` (issue 49: ``store.analyze()``
rewrote figure files as a side effect). ``report`` still writes its figures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import attnsweep

SPEC = (
    "name: quiet\nseeds: 2\ngrid: {m: [8, 16]}\n"
    "fixed: {task: and, T: 8, s: 1, d: 8, heads: 2, max_epochs: 20, n_test: 100}\nanalysis: {n_boot: 50}\n"
)
"""4 trials, a few seconds with --local."""


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (ns)."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """A folder holding spec.yaml and a store with one run of it, made without its analysis."""
    folder = tmp_path_factory.mktemp("quiet")
    (folder / "spec.yaml").write_text(SPEC)
    proc = _cli("run", "spec.yaml", "--local", "--no-analyze", "--store", "store", cwd=folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder, attnsweep.open_store(folder / "store").latest_run()


@pytest.mark.slow
def test_cli_analyze_prints_the_analysis_and_writes_no_file(stored_run):
    folder, run_id = stored_run
    before = _files(folder)
    proc = _cli("analyze", run_id, "--store", "store", cwd=folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "critical sample size m*" in proc.stdout
    assert _files(folder) == before  # no figure, nothing in the store


@pytest.mark.slow
def test_cli_analyze_writes_figures_into_the_folder_figures_names(stored_run, tmp_path):
    folder, run_id = stored_run
    proc = _cli("analyze", run_id, "--store", str(folder / "store"), "--figures", "figs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written and all(p.startswith("figs/") and p.endswith(".png") for p in written), written


@pytest.mark.slow
def test_store_analyze_writes_no_file_unless_given_a_folder(stored_run, tmp_path, monkeypatch):
    folder, run_id = stored_run
    monkeypatch.chdir(tmp_path)  # where the figures went by default (figures/SWEEP/RUN_ID)
    store = attnsweep.open_store(folder / "store")
    before = _files(folder)
    quiet = store.analyze(run_id)
    assert quiet.figures == [] and quiet.m_star.height == 1  # one cell: T=8 (m and the seed are no cell setting)
    assert list(tmp_path.iterdir()) == [] and _files(folder) == before
    drawn = store.analyze(run_id, figures=tmp_path / "f")
    assert drawn.figures and sorted(drawn.figures) == sorted((tmp_path / "f").glob("*.png"))
    assert drawn.m_star.equals(quiet.m_star)  # the same analysis, figures or not


@pytest.mark.slow
def test_report_still_writes_its_figures(stored_run, tmp_path):
    folder, run_id = stored_run
    proc = _cli("report", run_id, "--store", str(folder / "store"), "--out", "rep", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list((tmp_path / "rep").rglob("*.png"))
