"""The task registry (tasks/registry.py): the exact check by enumeration agrees with the
built-in tasks' own checks, and a package's broken or clashing task is one clear error."""

from __future__ import annotations

import itertools
from importlib.metadata import EntryPoint

import numpy as np
import pytest
import torch

from attnsweep.tasks import registry
from attnsweep.tasks.boolean import AND, PARITY, boolean_tasks, labels, task_of
from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.registry import BooleanTask, ambiguous_by_enumeration


def _naive_ambiguous(label_of, x: np.ndarray, y: np.ndarray, support: tuple[int, ...]) -> bool:
    """Another s-subset explains every sample: one sample and one subset at a time."""
    for other in itertools.combinations(range(x.shape[1]), len(support)):
        if other != support and all(label_of([int(x[i, j]) for j in other]) == y[i] for i in range(len(y))):
            return True
    return False


NAIVE = {"and": lambda bits: all(bits), "parity": lambda bits: sum(bits) % 2 == 1}


@pytest.mark.parametrize("task", [AND, PARITY], ids=["and", "parity"])
@pytest.mark.parametrize("T, s, m", [(6, 2, 3), (7, 3, 5), (8, 2, 8), (9, 3, 12)])
def test_the_enumeration_agrees_with_each_built_in_check_and_a_naive_one(task, T, s, m):
    rng = np.random.default_rng(T * 100 + s * 10 + m)
    for _ in range(25):
        x = rng.random((m, T)) < task.bit_probability(s)
        support = tuple(sorted(rng.choice(T, s, replace=False).tolist()))
        y = np.array([NAIVE[task.name](x[i, list(support)].tolist()) for i in range(m)])
        naive = _naive_ambiguous(NAIVE[task.name], x, y, support)
        assert ambiguous_by_enumeration(task, x, y, support) == naive
        assert task.is_ambiguous(x, y, support) == naive


def test_a_task_without_a_check_of_its_own_is_checked_by_enumeration():
    first = BooleanTask("first", lambda s: 0.5, lambda bits: bits[..., 0].to(torch.float32))
    x = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], dtype=bool)
    # y is the first support bit: with s = 2, the subset (0, 1) starts at position 0 too.
    assert ambiguous_by_enumeration(first, x, x[:, 0], (0, 2))
    # s = 1: column 1 is (0, 1, 1) and no other column is; column 0 is (1, 0, 1) and so is column 3.
    assert not ambiguous_by_enumeration(first, x, x[:, 1], (1,))
    assert ambiguous_by_enumeration(first, x, x[:, 0], (0,))


def test_built_in_tasks_keep_their_labels_and_probabilities():
    x = torch.tensor([[[1, 1, 0, 1], [1, 0, 1, 1]]], dtype=torch.uint8)
    support = torch.tensor([[0, 3]])
    assert labels("and", x, support).tolist() == [[1.0, 1.0]]
    assert labels("parity", x, support).tolist() == [[0.0, 0.0]]
    assert task_of("and").bit_probability(3) == 2.0 ** (-1.0 / 3) and task_of("parity").bit_probability(3) == 0.5
    assert list(boolean_tasks())[:2] == ["and", "parity"]
    with pytest.raises(TaskError, match=r"must be one of \['and', 'parity'"):
        task_of("or")


MODULE = __name__
OK_TASK = BooleanTask("odd_one", lambda s: 0.5, lambda bits: bits[..., 0].to(torch.float32))
NOT_A_TASK = object()


def _with_entry_points(monkeypatch, *points: tuple[str, str]) -> None:
    found = [EntryPoint(name, value, registry.ENTRY_POINTS) for name, value in points]
    monkeypatch.setattr(registry, "entry_points", lambda group: found if group == registry.ENTRY_POINTS else [])
    registry.plugin_task.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_caches():
    yield
    registry.plugin_task.cache_clear()


def test_a_package_task_is_found_by_its_entry_point(monkeypatch):
    _with_entry_points(monkeypatch, ("odd_one", f"{MODULE}:OK_TASK"))
    assert registry.task_names() == ["and", "parity", "odd_one"]
    assert registry.plugin_tasks() == {"odd_one": OK_TASK}


@pytest.mark.parametrize(
    "point, message",
    [
        (("odd_one", f"{MODULE}:NOT_A_TASK"), "not an attnsweep.tasks.registry.BooleanTask"),
        (("odd_one", f"{MODULE}:NO_SUCH_NAME"), "does not load"),
        (("other_name", f"{MODULE}:OK_TASK"), "need one name"),
    ],
)
def test_a_broken_package_task_is_one_error_naming_its_entry_point(monkeypatch, point, message):
    _with_entry_points(monkeypatch, point)
    with pytest.raises(TaskError, match=message) as err:
        registry.plugin_tasks()
    assert point[0] in str(err.value)


def test_a_broken_package_task_stops_only_the_sweeps_that_use_it(monkeypatch):
    _with_entry_points(monkeypatch, ("odd_one", f"{MODULE}:OK_TASK"), ("broken", f"{MODULE}:NO_SUCH_NAME"))
    assert task_of("odd_one") is OK_TASK and task_of("and") is AND
    x = torch.tensor([[[1, 0, 1]]], dtype=torch.uint8)
    assert labels("odd_one", x, torch.tensor([[0, 2]])).tolist() == [[1.0]]
    with pytest.raises(TaskError, match="'broken'.*does not load"):
        task_of("broken")


BAD_PROBABILITY = BooleanTask("too_likely", lambda s: 1.5, lambda bits: bits[..., 0].to(torch.float32))
BAD_SHAPE = BooleanTask("flat", lambda s: 0.5, lambda bits: bits.sum().to(torch.float32))
BAD_VALUES = BooleanTask("counts", lambda s: 0.5, lambda bits: bits.sum(-1).to(torch.float32))


@pytest.mark.parametrize(
    "name, attribute, message",
    [
        ("too_likely", "BAD_PROBABILITY", r"bit_probability\(2\) = 1.5, not a probability"),
        ("flat", "BAD_SHAPE", r"not a float32 tensor of shape \(1, 2\)"),
        ("counts", "BAD_VALUES", "values other than 0 and 1"),
    ],
)
def test_a_package_task_that_breaks_its_contract_is_one_error_naming_it(monkeypatch, name, attribute, message):
    _with_entry_points(monkeypatch, (name, f"{MODULE}:{attribute}"))
    from attnsweep.tasks.boolean import bit_probability

    x = torch.tensor([[[1, 1, 1], [0, 1, 1]]], dtype=torch.uint8)
    with pytest.raises(TaskError, match=message):
        bit_probability(name, 2)
        labels(name, x, torch.tensor([[1, 2]]))


@pytest.mark.parametrize("name", ["and", "Bad-Name"])
def test_a_package_cannot_take_a_built_in_or_invalid_name(monkeypatch, name):
    _with_entry_points(monkeypatch, (name, f"{MODULE}:OK_TASK"))
    with pytest.raises(TaskError, match="lower-case letters"):
        registry.task_names()
