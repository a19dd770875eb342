"""The student registry (workers/student_registry.py): a package's student is found by its entry
point, sized for memory, trained (alone and stacked) and scored like a built-in one; an unknown
name lists those there are; a broken entry point or a student that breaks its contract fails
only its own trials, with one error naming it."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from attnsweep.tasks.errors import TaskError
from attnsweep.workers import builtin_students, student_registry
from attnsweep.workers.builtin_students import MLP, TRANSFORMER, build_student, student_of
from attnsweep.workers.builtin_students import working_bytes as symmetry_working_bytes
from attnsweep.workers.config import SymmetryTrialConfig
from attnsweep.workers.student_registry import Student
from attnsweep.workers.train_symmetry import train_symmetry_pack

MODULE = __name__


class RowMLP(nn.Module):
    """One MLP per row of X beside the mean of K: permutation-equivariant, vmap-safe."""

    def __init__(self, d: int, width: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2 * d, width), nn.GELU(), nn.Linear(width, d))

    def forward(self, X, K):
        return self.mlp(torch.cat([X, K.mean(-2, keepdim=True).expand(-1, X.shape[-2], -1)], dim=-1))


class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, X, K):
        return self.w * X.sum(-1)


class Doubled(Flat):
    def forward(self, X, K):
        return (self.w * X).double()


class Raises(Flat):
    def forward(self, X, K):
        raise RuntimeError("no forward today")


OK_STUDENT = Student("rowmlp", lambda n, k, d, w, h: RowMLP(d, w), activations=lambda n, k, d, w, h: 7)
NOT_A_STUDENT = object()
NOT_A_MODULE = Student("not_module", lambda n, k, d, w, h: "a model")
NO_PARAMS = Student("no_params", lambda n, k, d, w, h: nn.Identity())
BAD_SHAPE = Student("flat", lambda n, k, d, w, h: Flat())
BAD_DTYPE = Student("doubled", lambda n, k, d, w, h: Doubled())
RAISES = Student("raises", lambda n, k, d, w, h: Raises())


def _with_entry_points(monkeypatch, *points: tuple[str, str]) -> None:
    ours = student_registry.ENTRY_POINTS
    found = [EntryPoint(name, value, ours) for name, value in points]
    monkeypatch.setattr(student_registry, "entry_points", lambda group: found if group == ours else [])
    student_registry.plugin_student.cache_clear()
    student_registry._param_count.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_caches():
    yield
    student_registry.plugin_student.cache_clear()
    student_registry._param_count.cache_clear()


def cfg(**kw):
    base = dict(teacher="equivariant", n=4, k=2, d=4, m=16, seed=0, n_test=64, max_epochs=40, n_q=4, width=8)
    return SymmetryTrialConfig(**{**base, **kw})


def test_built_in_students_are_student_values_and_keep_their_estimates():
    assert student_registry.student_names() == ["transformer", "mlp"]
    assert student_of("transformer") is TRANSFORMER and student_of("mlp") is MLP
    for name, width in (("transformer", 16), ("mlp", 32)):
        built = build_student(name, "none", 5, 3, 4, width, 4)
        assert student_of(name).param_count(5, 3, 4, width, 4) == sum(p.numel() for p in built.parameters())


def test_a_package_student_is_found_sized_and_trained_alone_and_stacked(monkeypatch):
    _with_entry_points(monkeypatch, ("rowmlp", f"{MODULE}:OK_STUDENT"))
    assert student_registry.student_names() == ["transformer", "mlp", "rowmlp"]
    c = cfg(model="rowmlp")
    built = build_student("rowmlp", "none", c.n, c.k, c.d, c.width, c.heads)
    # Counted on the meta device (the student gives no count), its own activation count read.
    assert builtin_students.param_count(c) == sum(p.numel() for p in built.parameters())
    assert builtin_students.activations(c) == 7
    configs = [cfg(model="rowmlp", seed=s) for s in range(2)] + [cfg(model="rowmlp", seed=5, equivariance="augment")]
    alone = train_symmetry_pack(configs[:2], stacked=False)
    stacked = train_symmetry_pack(configs[:2], stacked=True)  # vmap over functional_call, as on a GPU
    for a, s in zip(alone, stacked, strict=True):
        assert a["status"] == s["status"] == "done", (a["error"], s["error"])
        assert a["epochs"] == s["epochs"] and a["test_error"] == pytest.approx(s["test_error"], rel=1e-4)
        assert a["perm_error_max"] < 1e-10 < a["eq_error_median"]  # permutation-equivariant, not O(d)
    (augmented,) = train_symmetry_pack(configs[2:], stacked=True)
    assert augmented["status"] == "done", augmented["error"]


def test_an_unknown_student_is_refused_listing_those_there_are(monkeypatch):
    _with_entry_points(monkeypatch, ("rowmlp", f"{MODULE}:OK_STUDENT"))
    with pytest.raises(ValidationError, match=r"must be one of \['transformer', 'mlp', 'rowmlp'\]"):
        cfg(model="cnn")
    with pytest.raises(TaskError, match=r"model must be one of \['transformer', 'mlp', 'rowmlp'\]"):
        build_student("cnn", "none", 4, 2, 4, 8, 4)
    for equivariance in ("orthogonal", "permutation"):  # these pick attnsweep's own architectures
        with pytest.raises(ValidationError, match="model"):
            cfg(model="rowmlp", equivariance=equivariance)


@pytest.mark.parametrize(
    "point, message",
    [
        (("rowmlp", f"{MODULE}:NOT_A_STUDENT"), "not an attnsweep.workers.student_registry.Student"),
        (("rowmlp", f"{MODULE}:NO_SUCH_NAME"), "does not load"),
        (("other_name", f"{MODULE}:OK_STUDENT"), "need one name"),
    ],
)
def test_a_broken_package_student_fails_only_its_trials_naming_its_entry_point(monkeypatch, point, message):
    _with_entry_points(monkeypatch, point, ("broken_too", f"{MODULE}:NO_SUCH_NAME_EITHER"))
    c = cfg(model=point[0])  # the name is valid: validation loads nothing
    # Packs are sized without it (erring high), not stopped by it.
    assert symmetry_working_bytes(c) > symmetry_working_bytes(cfg(model="transformer"))
    for stacked in (False, True):
        rows = train_symmetry_pack([c, cfg(model=point[0], seed=1)], stacked=stacked)
        for row in rows:
            assert row["status"] == "failed" and row["error_type"] == "TaskError"
            assert message in row["error"] and f"entry point {point[0]!r}" in row["error"]
    (other,) = train_symmetry_pack([cfg(model="transformer")])
    assert other["status"] == "done"


@pytest.mark.parametrize(
    "name, attribute, message",
    [
        ("not_module", "NOT_A_MODULE", "student 'not_module': its build function gave a str, not a torch.nn.Module"),
        ("no_params", "NO_PARAMS", "student 'no_params': its module has no parameters"),
        ("flat", "BAD_SHAPE", r"student 'flat': its forward gave \(2, 4\) torch.float32 for X \(2, 4, 4\)"),
        ("doubled", "BAD_DTYPE", r"student 'doubled': its forward gave \(2, 4, 4\) torch.float64"),
        ("raises", "RAISES", "student 'raises': its forward.*raised RuntimeError: no forward today"),
    ],
)
def test_a_package_student_that_breaks_its_contract_fails_its_trial_naming_it(monkeypatch, name, attribute, message):
    _with_entry_points(monkeypatch, (name, f"{MODULE}:{attribute}"))
    with pytest.raises(TaskError, match=message):
        build_student(name, "none", 4, 2, 4, 8, 4)
    (row,) = train_symmetry_pack([cfg(model=name)])
    assert row["status"] == "failed" and row["error_type"] == "TaskError" and f"student {name!r}" in row["error"]


CLAIMS_FORMS = Student(
    "claims",
    lambda n, k, d, w, h: RowMLP(d, w),
    forms=student_registry.BuiltInForms(permutation=OK_STUDENT),
)


def test_a_package_student_may_not_declare_built_in_forms(monkeypatch):
    # Validation does not load a package, so forms it declared could not be read there.
    _with_entry_points(monkeypatch, ("claims", f"{MODULE}:CLAIMS_FORMS"))
    with pytest.raises(TaskError, match="student 'claims' .* sets forms, which only built-ins have"):
        student_of("claims")
    (row,) = train_symmetry_pack([cfg(model="claims")])
    assert row["status"] == "failed" and "sets forms" in row["error"]


def test_the_validation_messages_read_the_registry_and_keep_their_wording(monkeypatch):
    _with_entry_points(monkeypatch, ("rowmlp", f"{MODULE}:OK_STUDENT"))
    for model in ("mlp", "rowmlp"):
        with pytest.raises(
            ValidationError,
            match=r"model must be left out for the inner-product student \(equivariance 'orthogonal'\): "
            "it has no model choice",
        ):
            cfg(model=model, equivariance="orthogonal")
        with pytest.raises(
            ValidationError,
            match=r"equivariance 'permutation' needs model 'transformer' \(an MLP has no position-free form\)",
        ):
            cfg(model=model, equivariance="permutation")
    for equivariance in ("none", "augment", "permutation"):
        with pytest.raises(ValidationError, match=r"heads must divide width \(got width=30, heads=4\)"):
            cfg(equivariance=equivariance, width=30)
    # The width belongs to the transformer's forms: the inner-product student and the MLP take any.
    assert cfg(equivariance="orthogonal", width=30).width == 30
    assert cfg(model="mlp", width=30).width == 30
    with pytest.raises(
        ValueError,
        match=r"model must be 'transformer' when equivariance='permutation' \(the MLP has no "
        r"permutation-equivariant form\), got 'mlp'",
    ):
        build_student("mlp", "permutation", 4, 2, 4, 8, 4)
