"""Property test: any spec text either validates or raises SpecError; never a traceback
of another kind, never a hang on a huge grid."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnsweep.orchestrator import SpecError, parse_spec

KEYS = [
    "name",
    "seeds",
    "grid",
    "fixed",
    "execution",
    "resources",
    "analysis",
    "experiment",
    "description",
    "T",
    "m",
    "s",
    "task",
    "model",
    "d",
    "heads",
    "lr",
    "pack_size",
    "cpus_per_worker",
    "fault",
    "norm_bound",
    "start",
    "stop",
    "num",
    "scale",
    "teacher",
    "n",
    "k",
    "equivariance",
    "bogus",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "and",
            "parity",
            "transformer",
            "mlp",
            "auto",
            "log",
            "x",
            "",
            "1e-3",
            "sparse_boolean",
            "symmetry",
            "equivariant",
        ]
    ),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=25,
)
specs = st.dictionaries(st.sampled_from(KEYS), values, max_size=8)
# Mostly-valid specs with one field perturbed, so validation gets past the first checks.
near_valid = st.builds(
    lambda T, m, s, extra: {
        "name": "f",
        "seeds": 2,
        "grid": {"T": T, "m": m},
        "fixed": {"task": "and", "s": s, **extra},
    },
    st.one_of(st.lists(st.integers(-5, 70), max_size=4), values),
    st.one_of(st.lists(st.integers(-5, 300), max_size=4), values),
    st.one_of(st.integers(-2, 70), values),
    st.dictionaries(st.sampled_from(KEYS), values, max_size=2),
)


def _check(text: str) -> None:
    try:
        spec = parse_spec(text, max_trials=5000)
    except SpecError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return
    assert 1 <= spec.n_trials() <= 5000
    first = next(spec.trials())
    assert all(not isinstance(v, float) or math.isfinite(v) for v in first.model_dump().values())


@pytest.mark.slow  # 300 generated specs: about 10 s
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(specs, near_valid))
def test_generated_specs_validate_or_raise_spec_error(raw):
    _check(yaml.safe_dump(raw, allow_unicode=True))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_validates_or_raises_spec_error(text):
    _check(text)
