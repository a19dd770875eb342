"""The Python API (interface/api.py): the README's example runs as written, and bad input
is one clear error."""

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

import attnsweep
from attnsweep.orchestrator.errors import AttnsweepError, SpecError

ROOT = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    """The whole example of docs/api.md (the README shows a shorter one and links it)."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("## From Python (a notebook)") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_example_runs_as_written(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", readme_example()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert re.match(r"\d{8}-\d{6}-[0-9a-f]{6} ", out)  # the run id, first
    # 3 values of T x 5 of m x 4 seeds, every one a row in the store's own files
    rows = ds.dataset(tmp_path / "results-store" / "trials", format="parquet", partitioning="hive").count_rows()
    assert rows == 60
    assert "shape: (15, 3)" in out  # the mean accuracy per (T, m)
    assert "shape: (3, 6)" in out  # m* per T with its bound, interval and flags
    assert "CriticalSampleSize(cell={" in out and "T': 32" in out  # one cell's m*
    assert re.search(r"│ log +┆", out) and re.search(r"│ power +┆", out)  # the fitted growth laws
    for claim in ("L1", "L2", "L3", "L4", "R"):  # every claim has a row, judged or "not tested"
        assert re.search(rf"│ {claim} +┆ (supported|not supported|inconclusive|not tested)", out), claim
    # analyze(figures="figures") draws them there and nowhere else (issue 49: no file without figures=)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png")) == [
        "figures/m_star_vs_T.png",
        "figures/success_rate_grid.png",
    ]
    assert [ln for ln in out.splitlines() if ln.endswith(".png")] == [  # show() in a script: the paths
        str(Path("figures") / name) for name in ("m_star_vs_T.png", "success_rate_grid.png")
    ]
    assert out.rstrip().endswith("True")  # the resume found nothing left to run


def test_a_spec_dict_with_a_bad_field_names_it_and_writes_nothing(tmp_path):
    store = tmp_path / "store"
    with pytest.raises(SpecError, match="seeds"):
        attnsweep.run(
            {
                "name": "x",
                "seeds": -1,
                "grid": {"T": [8], "m": [8]},
                "fixed": {"task": "and", "s": 1},
            },
            store=store,
            local=True,
        )
    assert not store.exists()


def test_a_spec_of_another_type_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="spec: give a spec file's path, the spec as a dict"):
        attnsweep.run(["sweeps/quickstart.yaml"], store=tmp_path / "store")


def test_the_errors_are_the_packages_own(tmp_path):
    assert attnsweep.SpecError is SpecError and issubclass(attnsweep.SpecError, attnsweep.AttnsweepError)
    with pytest.raises(attnsweep.StoreError):
        attnsweep.open_store(tmp_path / "empty").latest_run("nosuch")


def test_a_store_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(AttnsweepError, match="not a folder"):
        attnsweep.open_store(tmp_path / "f")
    with pytest.raises(AttnsweepError, match="empty path"):
        attnsweep.open_store("  ")


def test_import_attnsweep_loads_neither_torch_nor_ray():
    code = "import sys, attnsweep; attnsweep.open_store; print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'ray'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
