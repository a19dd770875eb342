"""Overrides on the command line (issue 49): ``--set grid.T=[16,64,256] --set seeds=8`` on
validate, run and submit; each validated as the field it names; the resolved spec is what a
run records and what resume reads back."""

import os
import subprocess
import sys

import pytest
import yaml

from attnsweep.orchestrator import SpecError, parse_spec
from attnsweep.orchestrator.spec import load_spec
from attnsweep.orchestrator.spec_loading import MAX_SPEC_BYTES
from attnsweep.results import ResultsStore

SPEC = """\
# the file's own comment
name: ov
seeds: 2
grid:
  T: [8]
  m: [16, 32]
fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 5}
"""


def _edited(**changes) -> str:
    """SPEC as a user would edit it by hand: its mapping with ``changes`` (dotted keys)."""
    raw = yaml.safe_load(SPEC)
    for path, value in changes.items():
        *above, last = path.split("__")
        node = raw
        for key in above:
            node = node.setdefault(key, {})
        node[last] = value
    return yaml.safe_dump(raw)


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def test_overrides_give_the_spec_an_edited_file_gives(spec_file):
    s = load_spec(spec_file, overrides=["grid.T=[16,64,256]", "seeds=8", "execution.pack_size=4"])
    by_hand = parse_spec(_edited(grid__T=[16, 64, 256], seeds=8, execution__pack_size=4))
    assert s.grids == by_hand.grids == [{"T": [16, 64, 256], "m": [16, 32]}]
    assert s.seeds == list(range(8))
    assert s.execution.pack_size == 4
    assert s.spec_hash() == by_hand.spec_hash() != load_spec(spec_file).spec_hash()
    # What a run records is the resolved spec: read back, it is the same spec.
    assert parse_spec(s.source_yaml).spec_hash() == s.spec_hash()
    assert s.source_yaml.startswith(f'# "{spec_file}" with --set grid.T, seeds, execution.pack_size\n')
    assert "the file's own comment" not in s.source_yaml


def test_a_later_override_wins_and_none_leaves_the_file_as_it_is(spec_file):
    assert load_spec(spec_file, overrides=["seeds=3", "seeds=5"]).seeds == list(range(5))
    assert load_spec(spec_file).source_yaml == SPEC


@pytest.mark.parametrize("text", ["'1e3'", "'yes'", "'1:30'", "'0x10'", "'null'", "'~'", "'010'", "'.inf'"])
def test_a_string_value_that_looks_like_a_number_reads_back_as_the_string(spec_file, text):
    s = load_spec(spec_file, overrides=[f"description={text}"])
    assert s.description == text.strip("'")
    assert parse_spec(s.source_yaml).description == text.strip("'")


@pytest.mark.parametrize(
    ("override", "said"),
    [
        # A path a file could get wrong gets the file's message, naming the --set.
        ("fixed.pack_size=4", "--set fixed.pack_size: pack_size belongs under execution:, not under fixed:"),
        ("execution.pack_sise=4", "--set execution.pack_sise: value 4: unknown field (did you mean 'pack_size'?)"),
        (
            "fixed.max_epoch=4",
            "--set fixed.max_epoch: unknown sparse_boolean trial setting (did you mean 'max_epochs'?)",
        ),
        ("sedes=8", "--set sedes: unknown top-level field (did you mean 'seeds'?)"),
        ("pack_size=8", "--set pack_size: pack_size belongs under execution:, not at the top level"),
        # What only an override can get wrong.
        ("grid.T.x=3", "--set grid.T.x: grid.T is a list of 1; give an item's index 0..0"),
        ("fixed.s.x=3", "--set fixed.s.x: fixed.s is 1, not a section with fields; set it whole: --set fixed.s=..."),
        ("seeds", '--set "seeds": give PATH=VALUE'),
        ("grid..T=3", '--set "grid..T": the path must be names joined by dots'),
        ("fixed.lr=*x", "--set fixed.lr: the value is not valid YAML: aliases (*name) are not allowed in specs"),
        ("fixed.lr=[1, 2", "--set fixed.lr: the value is not valid YAML"),
    ],
)
def test_a_wrong_override_is_refused_naming_its_set(spec_file, override, said):
    with pytest.raises(SpecError) as err:
        load_spec(spec_file, overrides=[override])
    assert said in str(err.value)
    assert str(err.value).startswith(f"{spec_file} is invalid (1 problem(s)):")


@pytest.mark.parametrize(("path", "value"), [("grid.T", [0]), ("seeds", 0), ("analysis.success_frac", 1.5)])
def test_a_bad_value_gets_the_files_message_for_its_field_with_the_set(spec_file, path, value):
    *above, last = path.split(".")
    with pytest.raises(SpecError) as by_file:
        parse_spec(_edited(**{"__".join(path.split(".")): value}))
    (problem,) = by_file.value.problems
    assert problem.startswith(f"{path}:")
    with pytest.raises(SpecError) as by_set:
        load_spec(spec_file, overrides=[f"{path}={yaml.safe_dump(value, default_flow_style=True).strip()}"])
    assert by_set.value.problems == [f"--set {problem}"]


def test_each_value_is_held_to_the_spec_files_size(spec_file):
    big = "x" * (MAX_SPEC_BYTES + 1)
    with pytest.raises(SpecError) as err:
        load_spec(spec_file, overrides=[f"description={big}"])
    assert f"--set description: the value is larger than {MAX_SPEC_BYTES} bytes" in str(err.value)
    # Values each under the cap but over it together: the resolved spec is refused too.
    half = "y" * (MAX_SPEC_BYTES // 2 + 10)
    with pytest.raises(SpecError) as err:
        load_spec(spec_file, overrides=[f"description={half}", f"fixed.task={half}"])
    assert f"the spec with its overrides is larger than {MAX_SPEC_BYTES} bytes" in str(err.value)


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_validate_shows_the_overridden_grid_and_refuses_a_bad_set_exit_2(spec_file):
    ok = _cli("validate", "spec.yaml", "--set", "grid.T=[16,64]", "--set", "seeds=3", cwd=spec_file.parent)
    assert ok.returncode == 0, ok.stderr
    # 2 T x 2 m x 3 seeds
    assert "12 trials" in ok.stdout and "T: [16, 64]" in ok.stdout and "seed: [0, 1, 2]" in ok.stdout
    bad = _cli("validate", "spec.yaml", "--set", "fixed.pack_size=4", cwd=spec_file.parent)
    assert bad.returncode == 2
    assert "--set fixed.pack_size: pack_size belongs under execution:" in bad.stderr


def test_submit_validates_its_overrides_before_any_job_server_is_asked(spec_file):
    # No job server listens at this address: the override's error comes first, exit 2.
    proc = _cli("submit", "spec.yaml", "--address", "http://127.0.0.1:9", "--set", "grid.T=[0]", cwd=spec_file.parent)
    assert proc.returncode == 2
    assert "--set grid.T: value 0:" in proc.stderr
    assert "job server" not in proc.stderr


@pytest.mark.slow
def test_run_records_the_resolved_spec_and_resume_reads_it_back(spec_file):
    folder = spec_file.parent
    proc = _cli("run", "spec.yaml", "--local", "--no-analyze", "--set", "grid.m=[16]", "--set", "seeds=3", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    store = ResultsStore(folder / "results-store")
    sweep, run_id = store.latest_run()
    record = store.read_run(sweep, run_id)
    by_hand = parse_spec(_edited(grid__m=[16], seeds=3))
    assert record["spec_hash"] == by_hand.spec_hash()
    assert parse_spec(record["spec_yaml"]).spec_hash() == by_hand.spec_hash()
    trials = store.scan_run_trials(sweep, run_id).collect()
    assert sorted(zip(trials["m"], trials["seed"], strict=True)) == [(16, 0), (16, 1), (16, 2)]
    # resume reads the recorded spec: the run is whole (the file's grid would be 4 trials more).
    resumed = _cli("resume", run_id, "--local", "--no-analyze", cwd=folder)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} is complete (3 trials); nothing to resume" in resumed.stderr
    # resume takes no overrides; run --resume with an override that changes the spec is refused.
    refused = _cli("resume", run_id, "--local", "--set", "seeds=4", cwd=folder)
    assert refused.returncode == 2 and "No such option: --set" in refused.stderr
    changed = _cli("run", "spec.yaml", "--local", "--resume", run_id, "--set", "seeds=4", cwd=folder)
    assert changed.returncode == 2
    assert f"cannot resume run {run_id} with this spec" in changed.stderr


CLAIMED = SPEC.replace("  T: [8]\n", "  T: [8, 16]\n  model: [transformer, mlp]\n") + (
    "claims:\n"
    "  - {id: mine-1, kind: growth, axis: T, law: log}\n"
    "  - {id: mine-2, kind: fewer_samples, axis: model, less: transformer, more: mlp}\n"
)


def test_a_claims_problem_an_override_made_names_its_set(tmp_path):
    path = tmp_path / "claimed.yaml"
    path.write_text(CLAIMED)
    load_spec(path)  # the file alone is valid
    with pytest.raises(SpecError) as err:
        load_spec(path, overrides=["claims.0.axis=s"])
    (problem,) = err.value.problems
    assert problem.startswith("--set claims[0] (mine-1).axis:") and "not an axis of the grid" in problem
    # A grid override that leaves a claim naming a value no longer there points at both.
    with pytest.raises(SpecError) as err:
        load_spec(path, overrides=["grid.model=[mlp]"])
    (problem,) = err.value.problems
    assert problem.startswith("claims[1] (mine-2).less:")
    assert problem.endswith(
        "(after --set grid.model: the spec's claims name the grid's axes and values; give --set claims=[...] too)"
    )
