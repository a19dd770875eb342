"""Defaults made visible: `validate --show` lists every trial setting of every grid block and
where it came from; `init` writes a starter spec; the example specs can be listed and copied."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnsweep.orchestrator.spec import load_spec
from attnsweep.workers.config import BooleanTrialConfig, SymmetryTrialConfig

ROOT = Path(__file__).resolve().parents[1]
TWO_BLOCKS = """name: two-blocks
seeds: 2
grid:
  - {T: [8, 16], m: [16, 32]}
  - {T: [8], m: [64], model: [mlp], lr: [0.01, 0.02]}
fixed: {task: and, s: 2, d: 8, max_epochs: 50}
"""


def _cli(*args: str, cwd: Path, columns: int = 200) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rows(text: str, fields) -> dict[str, tuple[str, str]]:
    """setting -> (value, from) parsed from the table's lines."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] in fields and len(cells) >= 3:
            source = next(c for c in cells[1:] if c in ("grid", "fixed", "seeds", "search", "default"))
            rows.setdefault(cells[0], (" ".join(cells[1 : cells.index(source, 1)]), source))
    return rows


def test_show_lists_every_setting_of_every_block_with_its_source(tmp_path):
    (tmp_path / "spec.yaml").write_text(TWO_BLOCKS)
    proc = _cli("validate", "--show", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fields = list(BooleanTrialConfig.model_fields)
    first, second = proc.stdout.split("trial settings of grid block 1")
    assert "trial settings of grid block 0" in first
    for block in (first, second):
        assert set(_rows(block, fields)) == set(fields)  # every setting, none left out
    one, two = _rows(first, fields), _rows(second, fields)
    # what the spec left out runs with the trial config's defaults, and says so
    assert one["heads"] == (str(BooleanTrialConfig.model_fields["heads"].default), "default")
    assert one["lr"] == (str(BooleanTrialConfig.model_fields["lr"].default), "default")
    assert one["model"] == ("transformer", "default") and two["model"] == ("[mlp]", "grid")
    assert two["lr"] == ("[0.01, 0.02]", "grid")
    assert one["T"] == ("[8, 16]", "grid") and two["T"] == ("[8]", "grid")
    assert one["s"] == ("2", "fixed") and one["max_epochs"] == ("50", "fixed") and one["seed"] == ("[0, 1]", "seeds")
    assert one["norm_bound"] == ("null", "default") and one["reject_ambiguous"] == (
        "true",
        "default",
    )


def test_show_marks_what_an_adaptive_search_chooses(tmp_path):
    spec = load_spec(ROOT / "sweeps" / "symmetry.yaml")
    rows = {name: (value, source) for name, value, source, _ in spec.resolved_settings(0)}
    assert set(rows) == set(spec.family.config.model_fields)
    adaptive = next(p for p in sorted((ROOT / "sweeps").glob("*.yaml")) if load_spec(p).search.adaptive)
    spec = load_spec(adaptive)
    rows = {name: (value, source) for name, value, source, _ in spec.resolved_settings(0)}
    assert rows["m"] == (f"searched in {spec.search.m.min}..{spec.search.m.max}", "search")
    assert isinstance(SymmetryTrialConfig.model_fields["lr"].default, float)


def test_show_keeps_its_headers_whole_in_a_narrow_terminal(tmp_path):
    (tmp_path / "spec.yaml").write_text(TWO_BLOCKS)
    for columns in (40, 60, 80):
        proc = _cli("validate", "--show", "spec.yaml", cwd=tmp_path, columns=columns)
        assert proc.returncode == 0, proc.stderr
        headers = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] == ["setting"]]
        assert len(headers) == 2 and all(h[:3] == ["setting", "value", "from"] for h in headers), proc.stdout
        assert all(len(line) <= columns for line in proc.stdout.splitlines())
        assert "…" not in proc.stdout


def test_init_writes_a_valid_starter_and_never_overwrites(tmp_path):
    proc = _cli("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spec = load_spec(tmp_path / "sweep.yaml")
    assert spec.name == "sweep" and spec.n_trials() > 0 and spec.fixed["heads"] == 4
    before = (tmp_path / "sweep.yaml").read_bytes()
    again = _cli("init", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert (tmp_path / "sweep.yaml").read_bytes() == before
    (tmp_path / "link.yaml").symlink_to(tmp_path / "elsewhere.yaml")  # dangling: writing through it would create that
    linked = _cli("init", "link.yaml", cwd=tmp_path)
    assert linked.returncode == 2 and not (tmp_path / "elsewhere.yaml").exists()
    assert _cli("init", "no/such/folder/x.yaml", cwd=tmp_path).returncode == 2
    named = _cli("init", "my exp.yaml", cwd=tmp_path)
    assert named.returncode == 0 and load_spec(tmp_path / "my exp.yaml").name == "my-exp"


def test_examples_are_listed_and_copied_byte_for_byte(tmp_path):
    names = sorted(p.stem for p in (ROOT / "sweeps").glob("*.yaml"))
    listed = _cli("examples", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == names
    assert _cli("examples", "list", cwd=tmp_path).stdout == listed.stdout
    copied = _cli("examples", "copy", "quickstart", "mine.yaml", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "mine.yaml").read_bytes() == (ROOT / "sweeps" / "quickstart.yaml").read_bytes()
    (tmp_path / "into").mkdir()
    assert _cli("examples", "copy", "parity", "into", cwd=tmp_path).returncode == 0
    assert (tmp_path / "into" / "parity.yaml").read_bytes() == (ROOT / "sweeps" / "parity.yaml").read_bytes()
    refused = _cli("examples", "copy", "parity", "mine.yaml", cwd=tmp_path)
    assert (
        refused.returncode == 2
        and (tmp_path / "mine.yaml").read_bytes() == (ROOT / "sweeps" / "quickstart.yaml").read_bytes()
    )
    unknown = _cli("examples", "copy", "../pyproject", cwd=tmp_path)
    assert unknown.returncode == 2 and "quickstart" in unknown.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "sweeps").glob("*.yaml")))
def test_every_example_spec_is_valid(name):
    assert load_spec(ROOT / "sweeps" / name).n_trials() > 0


def test_show_lists_every_run_setting_with_its_source(tmp_path):
    # Execution, resources and analysis settings are defaults a run depends on too: each one is
    # listed, and says whether the spec gave it.
    from attnsweep.orchestrator.spec import AnalysisSettings, ExecutionSettings, ResourceSettings

    (tmp_path / "spec.yaml").write_text(
        TWO_BLOCKS + "execution: {pack_size: 8}\nresources: {num_workers: 1}\nanalysis: {n_boot: 200}\n"
    )
    proc = _cli("validate", "--show", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = {}
    for line in proc.stdout.split("run settings", 1)[1].splitlines():
        cells = line.split()
        if len(cells) >= 3 and cells[0].count(".") == 1 and cells[2] in ("spec", "default"):
            shown[cells[0]] = (cells[1], cells[2])
    sections = {"execution": ExecutionSettings, "resources": ResourceSettings, "analysis": AnalysisSettings}
    assert set(shown) == {f"{name}.{field}" for name, cls in sections.items() for field in cls.model_fields}
    assert shown["execution.pack_size"] == ("8", "spec") and shown["resources.num_workers"] == ("1", "spec")
    assert shown["analysis.n_boot"] == ("200", "spec")
    assert shown["execution.max_retries"] == (str(ExecutionSettings.model_fields["max_retries"].default), "default")
    assert shown["analysis.ci"] == ("0.95", "default") and shown["execution.curves"] == ("null", "default")
    assert "search.rel_tol" not in proc.stdout  # a grid sweep has no search settings to show
