"""The teacher registry (tasks/teachers.py): a package's teacher is found by its entry point and
drawn like a built-in one; an unknown name lists those there are; a broken entry point or a
teacher that breaks its contract is one error naming it; the built-ins go through the same lookup."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import torch
from pydantic import ValidationError

from attnsweep.tasks import seq2seq, teachers
from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.seq2seq import sample_dataset, teacher_of, teacher_params
from attnsweep.tasks.teachers import Teacher
from attnsweep.workers.config import SymmetryTrialConfig

MODULE = __name__


def _mean_params(n, k, d, g):
    return {"a": torch.rand((), generator=g, dtype=torch.float64)}


OK_TEACHER = Teacher(
    "shifted",
    _mean_params,
    lambda p, X, K: p["a"] * X + K.mean(-2, keepdim=True),
    frozenset({"orthogonal", "permutation"}),
)
NOT_A_TEACHER = object()
BAD_SYMMETRY = Teacher("odd_sym", _mean_params, lambda p, X, K: X, frozenset({"scaling"}))
BAD_SHAPE = Teacher("flat", _mean_params, lambda p, X, K: X.sum(-1))
BAD_DTYPE = Teacher("single", _mean_params, lambda p, X, K: X.float())
NOT_FINITE = Teacher("blows_up", _mean_params, lambda p, X, K: X / 0.0)
BAD_PARAMS = Teacher("no_dict", lambda n, k, d, g: [1.0], lambda p, X, K: X)


def _with_entry_points(monkeypatch, *points: tuple[str, str]) -> None:
    found = [EntryPoint(name, value, teachers.ENTRY_POINTS) for name, value in points]
    monkeypatch.setattr(teachers, "entry_points", lambda group: found if group == teachers.ENTRY_POINTS else [])
    teachers.plugin_teacher.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_caches():
    yield
    teachers.plugin_teacher.cache_clear()


def test_built_in_teachers_are_teacher_values_with_their_symmetries():
    assert teachers.teacher_names() == ["equivariant", "control", "positional"]
    assert teacher_of("equivariant") is seq2seq.EQUIVARIANT and teacher_of("control").symmetries == {"permutation"}
    assert teachers.teacher_symmetries("positional") == {"orthogonal"}
    assert teachers.teacher_symmetries("nobody") is None


def test_a_package_teacher_is_found_and_drawn_like_a_built_in(monkeypatch):
    _with_entry_points(monkeypatch, ("shifted", f"{MODULE}:OK_TEACHER"))
    assert teachers.teacher_names() == ["equivariant", "control", "positional", "shifted"]
    assert teacher_of("shifted") is OK_TEACHER
    assert teachers.teacher_symmetries("shifted") == {"orthogonal", "permutation"}
    X, K, Y = sample_dataset("shifted", 3, 2, 4, 5, seed=7)
    assert X.shape == Y.shape == (5, 3, 4) and K.shape == (5, 2, 4) and Y.dtype == torch.float32
    a = teacher_params("shifted", 3, 2, 4, 7)["a"]
    assert torch.allclose(Y, (a * X.double() + K.double().mean(-2, keepdim=True)).float())
    again = sample_dataset("shifted", 3, 2, 4, 5, seed=7)
    assert all(torch.equal(u, v) for u, v in zip((X, K, Y), again, strict=True))  # the trial's seed alone decides
    assert not torch.equal(teacher_params("shifted", 3, 2, 4, 8)["a"], a)
    SymmetryTrialConfig(teacher="shifted", n=3, k=2, d=4, m=5, seed=0)


def test_an_unknown_teacher_is_refused_listing_those_there_are(monkeypatch):
    _with_entry_points(monkeypatch, ("shifted", f"{MODULE}:OK_TEACHER"))
    with pytest.raises(
        TaskError, match=r"teacher must be one of \['equivariant', 'control', 'positional', 'shifted'\]"
    ):
        sample_dataset("rotating", 3, 2, 4, 5, seed=0)
    with pytest.raises(ValidationError, match=r"must be one of \['equivariant', 'control', 'positional', 'shifted'\]"):
        SymmetryTrialConfig(teacher="rotating", n=3, k=2, d=4, m=5, seed=0)


@pytest.mark.parametrize(
    "point, message",
    [
        (("shifted", f"{MODULE}:NOT_A_TEACHER"), "not an attnsweep.tasks.teachers.Teacher"),
        (("shifted", f"{MODULE}:NO_SUCH_NAME"), "does not load"),
        (("other_name", f"{MODULE}:OK_TEACHER"), "need one name"),
        (("odd_sym", f"{MODULE}:BAD_SYMMETRY"), "a frozenset of"),
    ],
)
def test_a_broken_package_teacher_is_one_error_naming_its_entry_point(monkeypatch, point, message):
    _with_entry_points(monkeypatch, point, ("shifted_too", f"{MODULE}:NO_SUCH_NAME"))
    with pytest.raises(TaskError, match=message) as err:
        sample_dataset(point[0], 3, 2, 4, 5, seed=0)
    assert f"entry point {point[0]!r}" in str(err.value) and teachers.ENTRY_POINTS in str(err.value)
    assert teachers.teacher_symmetries(point[0]) is None  # the analysis reads no claim from it


def test_a_broken_package_teacher_stops_only_its_own_trials(monkeypatch):
    _with_entry_points(monkeypatch, ("shifted", f"{MODULE}:OK_TEACHER"), ("broken", f"{MODULE}:NO_SUCH_NAME"))
    assert sample_dataset("shifted", 3, 2, 4, 5, seed=0)[2].shape == (5, 3, 4)
    assert sample_dataset("equivariant", 3, 2, 4, 5, seed=0)[2].shape == (5, 3, 4)
    with pytest.raises(TaskError, match="'broken'.*does not load"):
        sample_dataset("broken", 3, 2, 4, 5, seed=0)


@pytest.mark.parametrize(
    "name, attribute, message",
    [
        ("flat", "BAD_SHAPE", r"teacher 'flat': its outputs function gave \(5, 3\) torch.float64, not a"),
        ("single", "BAD_DTYPE", r"teacher 'single': its outputs function gave \(5, 3, 4\) torch.float32"),
        ("blows_up", "NOT_FINITE", "teacher 'blows_up': its outputs function gave values that are not finite"),
        ("no_dict", "BAD_PARAMS", "teacher 'no_dict': its params function gave list, not a dict of tensors"),
    ],
)
def test_a_package_teacher_that_breaks_its_contract_is_one_error_naming_it(monkeypatch, name, attribute, message):
    _with_entry_points(monkeypatch, (name, f"{MODULE}:{attribute}"))
    with pytest.raises(TaskError, match=message):
        sample_dataset(name, 3, 2, 4, 5, seed=0)


@pytest.mark.parametrize("name", ["control", "Bad-Name"])
def test_a_package_cannot_take_a_built_in_or_invalid_teacher_name(monkeypatch, name):
    _with_entry_points(monkeypatch, (name, f"{MODULE}:OK_TEACHER"))
    with pytest.raises(TaskError, match="a teacher name is lower-case letters"):
        teachers.teacher_names()
