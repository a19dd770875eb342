"""Spec validation, expansion and trial ids."""

import hashlib
import json
import re

import pytest

from attnsweep.orchestrator import SpecError, parse_spec, trial_id
from attnsweep.orchestrator.packing import make_packs
from attnsweep.workers import BooleanTrialConfig

GOOD = """
name: demo
seeds: 3
grid:
  T: [8, 16]
  m: {start: 8, stop: 64, num: 4, scale: log}
  model: [transformer, mlp]
fixed:
  task: and
  s: 3
  lr: 1e-3
"""


def test_good_spec_expands_to_the_full_grid():
    spec = parse_spec(GOOD)
    assert spec.grids[0]["m"] == [8, 16, 32, 64]  # geomspace(8, 64, 4) = 8, 16, 32, 64
    assert spec.fixed["lr"] == 0.001  # YAML 1.1 would read 1e-3 as a string
    trials = list(spec.trials())
    assert len(trials) == spec.n_trials() == 2 * 4 * 2 * 3
    assert {(t.T, t.m, t.model, t.seed) for t in trials} == {
        (T, m, model, seed)
        for T in (8, 16)
        for m in (8, 16, 32, 64)
        for model in ("transformer", "mlp")
        for seed in range(3)
    }
    assert [t.seed for t in trials[:3]] == [0, 1, 2]  # seeds vary fastest


def test_trial_id_is_the_hash_of_the_canonical_config():
    cfg = BooleanTrialConfig(task="and", T=16, s=3, m=32, seed=4)
    # A setting added later (workers.config.LATER_FIELDS) enters only away from its earlier value.
    later = ("positions", "ln_affine", "restart", "stop", "margin_target")
    canon = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in later}
    expected = hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest()[:16]
    assert trial_id(cfg) == expected
    assert trial_id(BooleanTrialConfig(task="and", T=16, s=3, m=32, seed=4)) == expected
    assert trial_id(BooleanTrialConfig(task="and", T=16, s=3, m=32, seed=5)) != expected
    assert trial_id(BooleanTrialConfig(task="and", T=16, s=3, m=32, seed=4, lr=0.002)) != expected


def test_trial_ids_are_unique_across_a_sweep():
    ids = [trial_id(t) for t in parse_spec(GOOD).trials()]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "change, field",
    [
        ("  bogus: [1]\n", "grid.bogus"),  # unknown field
        ("  m: [-4]\n", "grid.m"),  # negative m
        ("  task: [adn]\n", "grid.task"),  # typo in a task name
        ("  lr: [abc]\n", "grid.lr"),  # string where a number belongs
        ("  norm_bound: [.nan]\n", "grid.norm_bound"),  # NaN
    ],
)
def test_bad_grid_values_name_their_field(change, field):
    text = "name: bad\nseeds: 2\nfixed: {s: 3}\ngrid:\n  T: [8]\n  m: [8]\n  task: [and]\n"
    text = text.replace("  task: [and]\n", "") if "task" in change else text
    text = text.replace("  m: [8]\n", "") if change.startswith("  m:") else text
    with pytest.raises(SpecError) as info:
        parse_spec(text + change)
    assert field in str(info.value)


def test_T_not_above_s_is_refused():
    with pytest.raises(SpecError, match="T must be greater than s"):
        parse_spec("name: x\ngrid: {T: [3, 8]}\nfixed: {task: and, s: 3, m: 8}\n")


@pytest.mark.parametrize(
    "axis, needle",
    [
        ("ln_affine: [true, false]", "ln_affine is a setting of the transformer"),
        ("positions: [learned, sinusoidal]", "positions 'sinusoidal' is a setting"),
    ],
)
def test_a_transformer_only_setting_on_a_grid_beside_the_mlp_is_refused_before_anything_runs(axis, needle):
    # One grid crossing the model with a transformer-only setting: the (mlp, setting) trials
    # cannot exist, so the spec is refused whole, as the same value in `fixed` is.
    with pytest.raises(SpecError, match=needle):
        parse_spec(
            f"name: x\ngrid: {{T: [8], m: [16], model: [transformer, mlp], {axis}}}\nfixed: {{task: and, s: 3}}\n"
        )


def test_all_problems_are_reported_at_once():
    with pytest.raises(SpecError) as info:
        parse_spec("name: x\ngrid: {T: [8], m: [0]}\nfixed: {task: parity, s: 3, lr: -1}\nexecution: {pack_size: 0}\n")
    assert len(info.value.problems) == 3
    text = str(info.value)
    assert "grid.m" in text and "fixed.lr" in text and "execution.pack_size" in text


@pytest.mark.parametrize("text", ["", "just a string", "[1, 2]", "a: [", "a: &x [1]\nb: *x\n"])
def test_not_a_spec_is_a_spec_error(text):
    with pytest.raises(SpecError):
        parse_spec(text)


def test_grid_size_limit():
    with pytest.raises(SpecError, match="more than the limit"):
        parse_spec(GOOD, max_trials=10)


def test_packs_share_shapes_and_respect_the_size():
    spec = parse_spec(GOOD)
    packs = list(make_packs(((trial_id(c), c) for c in spec.trials()), pack_size=2))
    assert sum(len(p) for p in packs) == spec.n_trials()
    for p in packs:
        assert len(p) <= 2
        assert len({c.shape_key() for c in p.configs}) == 1
    # 16 shape keys of 3 seeds each, cut into packs of at most 2: 2 packs per key.
    assert len(packs) == 16 * 2


@pytest.mark.parametrize(
    "text, needle",
    [
        ("name: a\nname: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3}\n", "duplicate key"),
        ("name: a\ngrid: {T: [8], T: [16], m: [8]}\nfixed: {task: and, s: 3}\n", "duplicate key"),
        (
            "name: a\ngrid: {T: [8], m: [16, 16]}\nfixed: {task: and, s: 3}\n",
            "grid.m: repeated value",
        ),
        (
            "name: a\ngrid: {T: [8], m: [true, 16]}\nfixed: {task: and, s: 3}\n",
            "grid.m: value True",
        ),
    ],
)
def test_silent_surprises_are_refused(text, needle):
    with pytest.raises(SpecError, match=needle):
        parse_spec(text)


def test_a_dead_address_fails_fast():
    from attnsweep.orchestrator.errors import RunError
    from attnsweep.orchestrator.executors import _check_reachable

    with pytest.raises(RunError, match="no Ray cluster answers"):
        _check_reachable("127.0.0.1:1", timeout_s=2)


SYMMETRY = """
name: sym
experiment: symmetry
seeds: 2
grid:
  - teacher: [equivariant, control]
    m: [4, 16]
    equivariance: [orthogonal]
  - teacher: [equivariant]
    m: [4, 16]
    model: [transformer, mlp]
fixed: {n: 4, k: 2, d: 4}
"""


def test_grid_blocks_run_the_union_of_their_grids():
    spec = parse_spec(SYMMETRY)
    trials = list(spec.trials())
    # 2 teachers x 2 m x 1 student + 1 teacher x 2 m x 2 students = 8 cells, 2 seeds each.
    assert spec.n_trials() == len(trials) == 16
    assert {(t.teacher, t.equivariance, t.model) for t in trials} == {
        ("equivariant", "orthogonal", "transformer"),
        ("control", "orthogonal", "transformer"),
        ("equivariant", "none", "transformer"),
        ("equivariant", "none", "mlp"),
    }


def test_overlapping_grid_blocks_are_refused():
    text = SYMMETRY.replace("equivariance: [orthogonal]", "model: [transformer]")
    with pytest.raises(SpecError, match="blocks overlap"):
        parse_spec(text)


@pytest.mark.parametrize(
    "fixed, field",
    [
        ("{n: 4, k: 2, d: 1}", "fixed.d"),  # d < 2
        ("{n: 4, k: 0, d: 4}", "fixed.k"),  # the teachers need knowledge
        (
            "{n: 4, k: 2, d: 4, width: 30, heads: 4}",
            "heads must divide width",
        ),  # shapes that do not match
        ("{n: 4, k: 2, d: 4, T: 8}", "fixed.T"),  # a sparse-Boolean setting in a symmetry spec
    ],
)
def test_bad_symmetry_settings_name_their_field(fixed, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        parse_spec(SYMMETRY.replace("fixed: {n: 4, k: 2, d: 4}", f"fixed: {fixed}"))


def test_permutation_student_needs_a_transformer():
    text = SYMMETRY.replace("model: [transformer, mlp]", "model: [mlp]\n    equivariance: [permutation]")
    with pytest.raises(SpecError, match="equivariance"):
        parse_spec(text)


def test_unknown_experiment_lists_the_allowed_ones():
    with pytest.raises(SpecError, match="sparse_boolean"):
        parse_spec(SYMMETRY.replace("experiment: symmetry", "experiment: symetry"))


@pytest.mark.parametrize(
    "axis, needle",
    [
        ("T: [8, '16']", "a number is required, not a string"),
        ("T: [8, 8.0]", "repeated value"),  # 8.0 is the int 8 once validated
        ("m: [32, 3.2e1]", "repeated value"),
    ],
)
def test_numbers_are_numbers_and_coerced_values_do_not_repeat(axis, needle):
    text = "name: x\nfixed: {task: and, s: 3}\ngrid:\n  T: [8]\n  m: [8]\n"
    key = axis.split(":")[0]
    text = text.replace(f"  {key}: [8]\n", f"  {axis}\n")
    with pytest.raises(SpecError, match=needle):
        parse_spec(text)


def test_a_device_file_is_not_read(tmp_path):
    from attnsweep.orchestrator import load_spec

    with pytest.raises(SpecError, match="not a regular file"):
        load_spec("/dev/zero")
    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(tmp_path)


def test_per_value_checks_leave_cross_field_rules_to_the_combinations():
    # width 10 with 4 heads is fine for the inner-product student, which has no width rule.
    text = SYMMETRY.replace("fixed: {n: 4, k: 2, d: 4}", "fixed: {n: 4, k: 2, d: 4, width: 10, heads: 4}")
    text = text.replace("    model: [transformer, mlp]\n", "    model: [mlp]\n")
    assert parse_spec(text).n_trials() == 12


def test_the_inner_product_student_takes_no_model():
    text = SYMMETRY.replace("equivariance: [orthogonal]", "equivariance: [orthogonal]\n    model: [transformer, mlp]")
    with pytest.raises(SpecError, match="model must be left out"):
        parse_spec(text)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "the spec is empty"),
        ("description: " + "[" * 3000 + "]" * 3000 + "\nname: x\n", "nested too deeply"),
        (
            "name: x\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3}\nresources: {gpus_per_worker: 1.5}\n",
            "resources.gpus_per_worker",
        ),
    ],
)
def test_empty_deep_and_fractional_gpu_specs_are_spec_errors(text, needle):
    with pytest.raises(SpecError, match=re.escape(needle)):
        parse_spec(text)


@pytest.mark.parametrize("axis", ["{start: 8, stop: 4, num: 3}", "{start: 8, stop: 8, num: 3, scale: linear}"])
def test_a_range_that_does_not_run_upward_is_refused_naming_it(axis):
    with pytest.raises(SpecError, match=r"grid\.m: .*stop \(\d+\) must be greater than start \(8\)"):
        parse_spec(f"name: x\nseeds: 1\ngrid: {{T: [16], m: {axis}}}\nfixed: {{task: and, s: 2}}\n")


@pytest.mark.parametrize("n_test", [1, 99])
def test_a_held_out_set_too_small_for_the_accuracy_threshold_is_refused(n_test):
    with pytest.raises(SpecError, match=rf"fixed.n_test: value {n_test}: .*greater than or equal to 100"):
        parse_spec(f"name: x\nseeds: 1\ngrid: {{T: [16], m: [8]}}\nfixed: {{task: and, s: 2, n_test: {n_test}}}\n")
    assert parse_spec("name: x\nseeds: 1\ngrid: {T: [16], m: [8]}\nfixed: {task: and, s: 2, n_test: 100}\n")


def test_block_overlap_is_counted_exactly_without_listing_trials():
    text = (
        "name: x\nseeds: 3\nfixed: {task: and}\ngrid:\n  - {T: [8, 16, 32], m: [8, 16], s: [2]}\n"
        "  - {T: [16, 32, 64], m: [16, 32], s: [2, 3]}\n"
    )
    with pytest.raises(SpecError, match="blocks 0 and 1 share 6 trials") as info:
        parse_spec(text)
    # the same count by listing: T in {16, 32}, m = 16, s = 2, three seeds
    blocks = [
        {(T, m, 2, seed) for T in (8, 16, 32) for m in (8, 16) for seed in range(3)},
        {(T, m, s, seed) for T in (16, 32, 64) for m in (16, 32) for s in (2, 3) for seed in range(3)},
    ]
    assert len(blocks[0] & blocks[1]) == 6 and len(info.value.problems) == 1


def test_a_million_trial_grid_of_two_blocks_is_checked_for_overlap():
    text = (
        "name: x\nseeds: 1\nfixed: {task: and, s: 2}\ngrid:\n"
        "  - {T: {start: 8, stop: 1007, num: 1000, scale: linear}, m: {start: 8, stop: 507, num: 500, scale: linear}}\n"
        "  - {T: {start: 2000, stop: 2999, num: 1000, scale: linear}, m: {start: 8, stop: 507, num: 500, scale: linear}}\n"
    )
    assert parse_spec(text).n_trials() == 1_000_000
    # shifted to start at T = 508: T = 508..1007 (500 values) x 500 m in both
    with pytest.raises(SpecError, match="blocks 0 and 1 share 250000 trials"):
        parse_spec(text.replace("start: 2000, stop: 2999", "start: 508, stop: 1507"))


def test_thousands_of_grid_blocks_are_refused_and_long_errors_are_capped():
    from attnsweep.orchestrator.spec_grid import MAX_GRID_BLOCKS

    blocks = "".join(f"  - {{T: [{8 + i}], m: [16]}}\n" for i in range(MAX_GRID_BLOCKS + 1))
    with pytest.raises(SpecError, match=f"{MAX_GRID_BLOCKS + 1} blocks, more than the {MAX_GRID_BLOCKS} allowed"):
        parse_spec("name: b\nseeds: 1\ngrid:\n" + blocks + "fixed: {task: and, s: 2}\n")
    many = "".join(f"  - {{q{i}: 1}}\n" for i in range(300))  # 300 unknown fields, and T missing in each
    with pytest.raises(SpecError) as caught:
        parse_spec("name: b\nseeds: 1\ngrid:\n" + many + "fixed: {task: and, s: 2}\n")
    lines = str(caught.value).splitlines()
    assert len(caught.value.problems) >= 300 and len(lines) == 52 and lines[-1].startswith("  - ... and ")


def test_a_setting_that_takes_true_or_false_says_so():
    with pytest.raises(SpecError) as info:
        parse_spec(
            "name: x\ngrid: {T: [8], m: [16]}\nfixed: {task: and, s: 3, ln_affine: maybe, reject_ambiguous: null}\n"
        )
    assert info.value.problems == [
        "fixed.ln_affine: value 'maybe': Input should be a valid boolean (allowed: true or false)",
        "fixed.reject_ambiguous: value null: Input should be a valid boolean (allowed: true or false)",
    ]


@pytest.mark.parametrize(
    "curves, needle",
    [
        ("{every: 0}", "execution.curves.every: value 0: .* \\(allowed: 1..1e\\+07\\)"),
        ("{max_points: 1}", "execution.curves.max_points: value 1: must be from 2 to 52,428"),
        # The byte ceiling: 16 MiB a trial at 320 bytes a point is 52,428 points; 52,429 are
        # 16,777,280 bytes, 16.0 MiB (workers/memory.py, measured).
        (
            "{max_points: 52429}",
            "execution.curves.max_points: value 52429: must be from 2 to 52,428: a trial's curve holds up to "
            "320 bytes a point in its worker until its pack ends, 16.0 MiB at 52,429 points, and the ceiling is "
            "16 MiB a trial",
        ),
        ("{each: 3}", "execution.curves.each: value 3: unknown field; allowed: \\['every', 'max_points'\\]"),
        ("5", "execution.curves: value 5: must be a mapping of settings"),
    ],
)
def test_a_bad_curves_setting_names_its_field_and_the_allowed_values(curves, needle):
    with pytest.raises(SpecError, match=needle):
        parse_spec(GOOD + f"execution: {{curves: {curves}}}\n")


def test_max_points_up_to_the_byte_ceiling_is_valid():
    assert parse_spec(GOOD + "execution: {curves: {max_points: 52428}}\n").execution.curves.max_points == 52_428


def test_keeping_curves_changes_no_trial_id_and_not_the_spec_hash():
    # A run-level recording choice (docs/decisions.md): not a trial setting.
    off, on = parse_spec(GOOD), parse_spec(GOOD + "execution: {curves: {every: 5, max_points: 20}}\n")
    assert off.execution.curves is None and on.execution.curves.every == 5
    assert [trial_id(c) for c in off.trials()] == [trial_id(c) for c in on.trials()]
    assert off.spec_hash() == on.spec_hash()


def test_a_misspelled_setting_is_answered_with_the_closest_name():
    spec = (
        "name: typo\nseeds: 2\ngrid: {T: [8], m: [16], modle: [mlp]}\n"
        "fixed: {task: and, s: 2, max_epoch: 10, zzz: 1}\nexecution: {pack_sise: 4}\n"
    )
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    text = str(err.value)
    assert "grid.modle: unknown sparse_boolean trial setting (did you mean 'model'?)" in text
    assert "fixed.max_epoch: unknown sparse_boolean trial setting (did you mean 'max_epochs'?)" in text
    assert "execution.pack_sise: value 4: unknown field (did you mean 'pack_size'?)" in text
    assert "fixed.zzz: unknown sparse_boolean trial setting; allowed:" in text  # nothing close: no guess
