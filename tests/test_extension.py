"""The extension points, as a user meets them: the example packages (examples/attnsweep-majority,
a task; examples/attnsweep-deepsets, a symmetry teacher and student) are installed beside
attnsweep in a fresh virtual environment, what they add is used in a spec, the sweeps run on an
embedded local Ray and are analysed; without the packages the specs are refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a wheel built and installed in a venv with a plugin package, sweeps run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "attnsweep-majority"
SPEC = EXAMPLE / "attnsweep_majority" / "majority.yaml"
SYMMETRY_EXAMPLE = ROOT / "examples" / "attnsweep-deepsets"
SYMMETRY_SPEC = SYMMETRY_EXAMPLE / "attnsweep_deepsets" / "deepsets.yaml"
MODEL_EXAMPLE = ROOT / "examples" / "attnsweep-bagpos"
MODEL_SPEC = MODEL_EXAMPLE / "attnsweep_bagpos" / "bagpos.yaml"


def _run(args: list, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, attnsweep_wheel) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """A fresh venv holding attnsweep (its wheel) and the examples, installed from copies of
    their folders as a user would (``pip install``; a build in place would leave build/ in the
    checkout), and what ``validate`` said of the examples' specs before they were installed.
    Their dependencies (torch, Ray, polars...) come from this suite's environment through a
    path file, so nothing is downloaded twice."""
    root = tmp_path_factory.mktemp("fresh")
    proc = _run([sys.executable, "-m", "venv", root / "venv"], root)
    assert proc.returncode == 0, proc.stderr
    site = Path(sysconfig.get_paths(vars={"base": str(root / "venv"), "platbase": str(root / "venv")})["purelib"])
    # This environment's site folder and any it adds through path files of its own (a worktree's
    # venv that borrows another's packages): a path file's folders are not searched for path files.
    borrowed = [p for p in sys.path if p.rstrip("/").endswith("site-packages")]
    (site / "zz_dependencies.pth").write_text("\n".join([sysconfig.get_paths()["purelib"], *borrowed]) + "\n")
    pip = root / "venv" / "bin" / "pip"
    ignore = shutil.ignore_patterns("build", "*.egg-info")
    examples = [shutil.copytree(e, root / e.name, ignore=ignore) for e in (EXAMPLE, SYMMETRY_EXAMPLE, MODEL_EXAMPLE)]
    before = None
    for source in (attnsweep_wheel, *examples):
        proc = _run([pip, "install", "--quiet", "--no-deps", source], root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if before is None:  # attnsweep alone: no package adds the task, model, teacher or student yet
            before = [
                _run([root / "venv" / "bin" / "attnsweep", "validate", spec], root)
                for spec in (SPEC, SYMMETRY_SPEC, MODEL_SPEC)
            ]
    return root / "venv" / "bin", before


def test_a_task_from_an_installed_package_runs_and_is_analysed(venv, tmp_path):
    venv, _ = venv
    shown = _run([venv / "attnsweep", "validate", SPEC, "--show"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^ task +majority +fixed ", shown.stdout, re.M), shown.stdout
    run = _run([venv / "attnsweep", "run", SPEC, "--store", "store", "--no-analyze"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", run.stderr).group(1)
    rows = _run(
        [
            venv / "attnsweep",
            "query",
            "SELECT task, status, count(*) AS n FROM trials GROUP BY ALL",
            "--store",
            "store",
            "--format",
            "json",
        ],
        tmp_path,
    )
    assert rows.returncode == 0, rows.stderr
    assert json.loads(rows.stdout) == [{"task": "majority", "status": "done", "n": 18}]
    analysed = _run([venv / "attnsweep", "analyze", run_id, "--store", "store", "--format", "json"], tmp_path)
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    cells = json.loads(analysed.stdout)
    assert sorted(c["T"] for c in cells) == [8, 16] and all(c["task"] == "majority" for c in cells)


def test_without_the_package_the_task_is_refused_naming_those_there_are(venv):
    _, (proc, _, _) = venv
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "fixed.task: value 'majority': must be one of ['and', 'parity']" in proc.stderr, proc.stderr


def test_a_teacher_and_a_student_from_an_installed_package_run_and_are_analysed(venv, tmp_path):
    venv, _ = venv
    run = _run([venv / "attnsweep", "run", SYMMETRY_SPEC, "--store", "store", "--no-analyze"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", run.stderr).group(1)
    rows = _run(
        [
            venv / "attnsweep",
            "query",
            "SELECT teacher, model, equivariance, status, count(*) AS n FROM trials GROUP BY ALL ORDER BY ALL",
            "--store",
            "store",
            "--format",
            "json",
        ],
        tmp_path,
    )
    assert rows.returncode == 0, rows.stderr
    assert json.loads(rows.stdout) == [
        {"teacher": "equivariant", "model": "deepsets", "equivariance": "none", "status": "done", "n": 4},
        {"teacher": "knowledge_mean", "model": "deepsets", "equivariance": "none", "status": "done", "n": 4},
        {"teacher": "knowledge_mean", "model": "transformer", "equivariance": "orthogonal", "status": "done", "n": 4},
    ]
    analysed = _run([venv / "attnsweep", "analyze", run_id, "--store", "store", "--format", "json"], tmp_path)
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    cells = {(c["teacher"], c["student"]) for c in json.loads(analysed.stdout)}
    assert cells == {("equivariant", "deepsets"), ("knowledge_mean", "deepsets"), ("knowledge_mean", "inner-product")}


def test_without_the_package_its_teacher_and_student_are_refused_naming_those_there_are(venv):
    _, (_, proc, _) = venv
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "value 'knowledge_mean': must be one of ['equivariant', 'control', 'positional']" in proc.stderr, proc.stderr
    assert "value 'deepsets': must be one of ['transformer', 'mlp']" in proc.stderr, proc.stderr


def test_a_model_from_an_installed_package_runs_beside_the_transformer_and_is_analysed(venv, tmp_path):
    venv, _ = venv
    run = _run([venv / "attnsweep", "run", MODEL_SPEC, "--store", "store", "--no-analyze"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", run.stderr).group(1)
    rows = _run(
        [
            venv / "attnsweep",
            "query",
            "SELECT model, status, count(*) AS n, count(norm_readout) AS normed, count(norm_qk) AS qk "
            "FROM trials GROUP BY ALL ORDER BY ALL",
            "--store",
            "store",
            "--format",
            "json",
        ],
        tmp_path,
    )
    assert rows.returncode == 0, rows.stderr
    # 2 T x 3 m x 2 seeds per model; bagpos reports the readout norm it defines and no attention norms.
    assert json.loads(rows.stdout) == [
        {"model": "bagpos", "status": "done", "n": 12, "normed": 12, "qk": 0},
        {"model": "transformer", "status": "done", "n": 12, "normed": 12, "qk": 12},
    ]
    analysed = _run([venv / "attnsweep", "analyze", run_id, "--store", "store", "--format", "json"], tmp_path)
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    cells = json.loads(analysed.stdout)
    assert sorted((c["model"], c["T"]) for c in cells) == [
        ("bagpos", 8),
        ("bagpos", 16),
        ("transformer", 8),
        ("transformer", 16),
    ]
    # bagpos fits the 2-AND at T = 8 within the grid (m* = 32 on this machine): its m* is its own.
    bagpos_8 = next(c for c in cells if c["model"] == "bagpos" and c["T"] == 8)
    assert bagpos_8["m_star"] is not None and 8 <= bagpos_8["m_star"] <= 128, bagpos_8


def test_without_the_package_its_model_is_refused_naming_those_there_are(venv):
    _, (_, _, proc) = venv
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "value 'bagpos': must be one of ['transformer', 'mlp']" in proc.stderr, proc.stderr
