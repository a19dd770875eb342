"""A setting given in the wrong section of a spec is refused naming the section it belongs
under (issue 49: ``pack_size`` under ``fixed:`` was refused with no hint)."""

import subprocess
import sys

import pytest

from attnsweep.orchestrator import SpecError, parse_spec

BASE = {
    "grid": "grid:\n  T: [8, 16]\n  m: [8]\n",
    "fixed": "fixed:\n  task: and\n  s: 3\n",
}


def _spec(section: str, line: str) -> str:
    """A valid spec with ``line`` added under ``section`` (``""``: at the top level)."""
    parts = dict(BASE)
    if section == "":
        return "name: t\n" + line + "\n" + parts["grid"] + parts["fixed"]
    if section in parts:
        parts[section] += f"  {line}\n"
        return "name: t\n" + parts["grid"] + parts["fixed"]
    return "name: t\n" + parts["grid"] + parts["fixed"] + f"{section}:\n  {line}\n"


# (where it is given, the line, the problem's field, the section named): each home is where
# docs/spec.md lists the setting.
CASES = [
    ("fixed", "pack_size: 4", "fixed.pack_size", "pack_size belongs under execution:, not under fixed:"),
    ("grid", "flush_s: [3]", "grid.flush_s", "flush_s belongs under execution:, not under grid:"),
    ("fixed", "acc_threshold: 0.9", "fixed.acc_threshold", "acc_threshold belongs under analysis:, not under fixed:"),
    ("fixed", "num_workers: 2", "fixed.num_workers", "num_workers belongs under resources:, not under fixed:"),
    ("execution", "success_frac: 0.5", "execution.success_frac", "success_frac belongs under analysis:"),
    ("execution", "max_epochs: 10", "execution.max_epochs", "max_epochs belongs under fixed: or grid:"),
    ("analysis", "rel_tol: 0.1", "analysis.rel_tol", "rel_tol belongs under search:, not under analysis:"),
    ("search", "pack_memory_mb: 64", "search.pack_memory_mb", "pack_memory_mb belongs under execution:"),
    ("resources", "every: 2", "resources.every", "every belongs under execution.curves:, not under resources:"),
    ("", "pack_size: 4", "pack_size", "pack_size belongs under execution:, not at the top level"),
    ("", "task: and", "task", "task belongs under fixed: or grid:, not at the top level"),
    ("fixed", "seeds: 3", "fixed.seeds", "seeds belongs at the top level"),
]


@pytest.mark.parametrize(("section", "line", "field", "named"), CASES)
def test_a_setting_of_another_section_names_its_section(section, line, field, named):
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(section, line))
    problems = [p for p in str(err.value).splitlines() if p.strip().startswith(f"- {field}:")]
    assert len(problems) == 1, str(err.value)
    assert named in problems[0]
    assert "allowed:" not in problems[0]  # the section is named, not a list of what this one takes


def test_a_misspelling_still_gets_did_you_mean_and_the_spec_is_otherwise_valid():
    with pytest.raises(SpecError) as err:
        parse_spec(_spec("execution", "pack_sise: 4"))
    assert "execution.pack_sise: value 4: unknown field (did you mean 'pack_size'?)" in str(err.value)
    assert "belongs" not in str(err.value)
    assert parse_spec(_spec("execution", "pack_size: 4")).execution.pack_size == 4


def test_the_cli_names_the_section_in_one_line_exit_2(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(_spec("fixed", "pack_size: 4"))
    result = subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert "fixed.pack_size: pack_size belongs under execution:, not under fixed:" in result.stderr


def test_a_short_grid_key_with_a_stray_letter_gets_a_did_you_mean():
    from attnsweep.orchestrator.spec_problems import did_you_mean

    assert did_you_mean("TT", ["T", "m", "s", "d", "task"]) == " (did you mean 'T'?)"
    assert did_you_mean("x", ["T", "m", "s", "d"]) == ""  # nothing close: no guess
    with pytest.raises(SpecError) as err:
        parse_spec("name: g\nseeds: 2\ngrid: {TT: [8, 16], m: [8]}\nfixed: {task: and, s: 1}\n")
    assert any(
        p.startswith("grid.TT: unknown sparse_boolean trial setting (did you mean 'T'?)") for p in err.value.problems
    )
