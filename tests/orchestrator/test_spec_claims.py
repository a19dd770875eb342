"""The ``claims:`` section of a spec (orchestrator/spec_claims.py): valid claims parse; every fault
is a spec error naming the claim (its index and id), the field and what is allowed; stating a
claim does not change the spec's hash (the trials are the same)."""

from __future__ import annotations

import pytest

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec import parse_spec

BASE = """name: mine
seeds: 2
grid: {T: [8, 16, 32], m: [8, 16], model: [transformer, mlp]}
fixed: {task: and, s: 2}
"""


def _problems(claims: str, base: str = BASE) -> list[str]:
    with pytest.raises(SpecError) as err:
        parse_spec(base + "claims:\n" + claims)
    return err.value.problems


def test_the_three_kinds_parse():
    spec = parse_spec(
        BASE
        + """claims:
  - {id: mine-1, kind: growth, axis: T, law: log}
  - {id: mine-2, kind: fewer_samples, axis: model, less: transformer, more: mlp}
  - {id: mine-3, kind: trend, quantity: test_error, direction: falls}
"""
    )
    assert [c.kind for c in spec.claims] == ["growth", "fewer_samples", "trend"]
    assert spec.claims[2].along == "m"  # the default axis of a trend
    assert spec.spec_hash() == parse_spec(BASE).spec_hash()  # claims make no new trials


def test_an_axis_that_is_not_the_grids_names_the_claim_and_the_axes():
    assert _problems("  - {id: mine-1, kind: growth, axis: s, law: log}\n") == [
        "claims[0] (mine-1).axis: value 's': not an axis of the grid; allowed: ['T', 'model']"
    ]


def test_m_on_the_grid_is_named_as_what_m_star_is_read_over_not_a_missing_axis():
    assert _problems("  - {id: mine-1, kind: growth, axis: m, law: log}\n") == [
        "claims[0] (mine-1).axis: value 'm': m* is measured over m and the seeds, so a growth claim compares it "
        "along another axis; allowed: ['T', 'model']"
    ]


def test_every_fault_at_once():
    problems = _problems(
        """  - {id: a, kind: growth, axis: T, law: quadratic}
  - {id: b, kind: fewer_samples, axis: model, less: transformer, more: cnn}
  - {id: c, kind: trend, quantity: accuracy, direction: falls}
  - {id: d, kind: slope}
  - {id: L1, kind: growth, axis: model, law: log}
"""
    )
    # Each problem names its claim's id where the claim has a valid one, as the grid's checks do.
    assert problems[0] == "claims[0] (a).law: value 'quadratic': Input should be 'log', 'polylog', 'linear' or 'power'"
    assert problems[1] == "claims[3] (d).kind: value 'slope': must be one of ['growth', 'fewer_samples', 'trend']"
    assert "claims[1] (b).more: value 'cnn': not a value of model; allowed: ['transformer', 'mlp']" in problems
    assert any(p.startswith("claims[2] (c).quantity: value 'accuracy': allowed: ['test_error',") for p in problems)
    assert "claims[4] (L1).id: 'L1' is a claim of the paper; give your own name" in problems
    assert any(p.startswith("claims[4] (L1).axis: 'model' has values") for p in problems)  # not numbers


def test_m_star_claims_are_refused_on_a_symmetry_run():
    base = "name: s\nexperiment: symmetry\nseeds: 2\ngrid: {m: [8, 16], d: [4, 8]}\nfixed: {teacher: equivariant, n: 4, k: 2}\n"
    problems = _problems("  - {id: x, kind: growth, axis: d, law: log}\n", base)
    assert problems == [
        "claims[0] (x).kind: growth judges m*, which claims judge on sparse_boolean runs; a symmetry run takes "
        "trend claims"
    ]
    spec = parse_spec(base + "claims:\n  - {id: y, kind: trend, quantity: eq_error_median, direction: falls}\n")
    assert spec.claims[0].quantity == "eq_error_median"
    # A sparse-Boolean measurement is not a symmetry trial's: the allowed list is the symmetry run's.
    assert _problems("  - {id: z, kind: trend, quantity: margin, direction: falls}\n", base) == [
        "claims[0] (z).quantity: value 'margin': allowed: ['test_error', 'train_error', 'eq_error_median', "
        "'eq_error_max', 'perm_error_median', 'perm_error_max', 'epochs', 'wall_s']"
    ]


def test_claims_must_be_a_list_and_unknown_fields_are_named():
    assert _problems("  {id: x}\n") == [
        "claims: must be a list of claims (each with id and kind: one of ['growth', 'fewer_samples', 'trend'])"
    ]
    (problem,) = _problems("  - {id: x, kind: growth, axis: T, law: log, along: m}\n")
    assert problem.startswith("claims[0] (x).along: value 'm': unknown field; allowed: ['axis', 'id', 'kind', 'law'")


def test_validate_lists_the_claims_in_words(tmp_path):
    from typer.testing import CliRunner

    from attnsweep.cli import app

    path = tmp_path / "spec.yaml"
    path.write_text(
        BASE
        + """claims:
  - {id: mine-1, kind: growth, axis: T, law: log}
  - {id: mine-2, kind: fewer_samples, axis: model, less: transformer, more: mlp}
  - {id: mine-3, kind: trend, quantity: test_error, direction: falls, text: "errors fall\\e]8;;x\\a"}
"""
    )
    result = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("  3 claims of your own, judged first by analyze and report:")
    assert lines[start + 1 : start + 4] == [
        "    mine-1: m* grows along T like a + b ln T (log)",
        "    mine-2: model=transformer needs fewer samples (a lower m*) than model=mlp",
        "    mine-3: errors fall\\x1b]8;;x\\x07",  # an escape in a claim's text is shown, not sent
    ]
    path.write_text(BASE)
    assert "claims of your own" not in CliRunner().invoke(app, ["validate", str(path)]).output
