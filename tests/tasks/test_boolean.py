"""Tests of the sparse Boolean data generators (tasks.boolean).

Expected values are derived independently: labels with numpy on the raw bits, ambiguity
by brute force over every s-subset of columns.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from attnsweep import tasks
from attnsweep.tasks import AmbiguousTrainingSetError, TaskError

# NB: ``tasks.test_chunks`` is only ever used through the module, never imported by
# name, so that pytest does not collect it as a test function.


# -- independent reference implementations -------------------------------------------


def np_labels(task: str, x: np.ndarray, support) -> np.ndarray:
    """AND / XOR of the bits at ``support``, with numpy, on ``(..., n, T)`` bits."""
    bits = np.asarray(x).astype(bool)[..., list(support)]
    if task == "and":
        return np.logical_and.reduce(bits, axis=-1)
    return np.logical_xor.reduce(bits, axis=-1)


def brute_ambiguous(task: str, x, y, support) -> bool:
    """Whether an s-subset other than ``support`` explains every sample exactly."""
    x = np.asarray(x).astype(bool)
    y = np.asarray(y) > 0.5
    T, s = x.shape[1], len(support)
    target = tuple(sorted(int(i) for i in support))
    for subset in itertools.combinations(range(T), s):
        if subset == target:
            continue
        cols = x[:, list(subset)]
        f = cols.all(axis=1) if task == "and" else (cols.sum(axis=1) % 2 == 1)
        if np.array_equal(f, y):
            return True
    return False


def all_test_samples(task, T, s, seeds, support, n_test, chunk_size):
    xs, ys = zip(*tasks.test_chunks(task, T, s, seeds, support, n_test, chunk_size), strict=True)
    return torch.cat(xs, dim=1), torch.cat(ys, dim=1)


# -- label balance and correctness ------------------------------------------------------


@pytest.mark.parametrize("task", ["and", "parity"])
@pytest.mark.parametrize("s", [1, 2, 3, 5])
def test_labels_are_balanced(task, s):
    T, n = 16, 20000
    support = tasks.draw_support(task, T, s, seed=0)[None]
    x, y = all_test_samples(task, T, s, [0], support, n, 5000)
    assert x.shape == (1, n, T) and x.dtype == torch.uint8
    assert y.shape == (1, n) and y.dtype == torch.float32
    # sd of the mean of n fair coins is 0.5 / sqrt(20000) ~ 0.0035: 0.02 is ~6 sd.
    assert abs(float(y.mean()) - 0.5) < 0.02
    # The bits themselves have P(1) = 2^(-1/s) for AND (so P(y=1) = p^s = 1/2), 1/2 for parity.
    p = 2.0 ** (-1.0 / s) if task == "and" else 0.5
    assert abs(float(x.float().mean()) - p) < 0.01
    assert tasks.bit_probability(task, s) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize("task", ["and", "parity"])
@pytest.mark.parametrize("s", [1, 2, 4])
def test_test_labels_match_numpy(task, s):
    T, seeds = 12, [3, 4, 5]
    support = torch.stack([tasks.draw_support(task, T, s, sd) for sd in seeds])
    x, y = all_test_samples(task, T, s, seeds, support, 300, 64)
    assert x.shape == (3, 300, T) and y.shape == (3, 300)
    for t in range(3):
        expected = np_labels(task, x[t].numpy(), support[t].tolist())
        np.testing.assert_array_equal(y[t].numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("task", ["and", "parity"])
@pytest.mark.parametrize("s", [1, 3])
def test_training_labels_match_numpy(task, s):
    x, y, support, _ = tasks.sample_training_set(task, T=20, s=s, m=200, seed=7)
    assert x.shape == (200, 20) and x.dtype == torch.uint8
    assert y.shape == (200,) and y.dtype == torch.float32
    assert set(np.unique(x.numpy())) <= {0, 1}
    np.testing.assert_array_equal(y.numpy(), np_labels(task, x.numpy(), support.tolist()).astype(np.float32))


def test_labels_function_on_hand_built_bits():
    x = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.uint8)
    support = torch.tensor([0, 1])
    # AND of columns 0, 1: rows -> 1, 0, 0, 1; XOR -> 0, 1, 1, 0.
    assert tasks.labels("and", x, support).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert tasks.labels("parity", x, support).tolist() == [0.0, 1.0, 1.0, 0.0]
    support3 = torch.tensor([0, 2, 3])
    # AND of columns 0, 2, 3: 0, 1, 0, 0; XOR: 1^0^1=0, 1^1^1=1, 0^1^1=0, 1^1^0=0.
    assert tasks.labels("and", x, support3).tolist() == [0.0, 1.0, 0.0, 0.0]
    assert tasks.labels("parity", x, support3).tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("T", [40, 41])  # 41: a chunk of 37 samples ends in the middle of a 64-bit draw
def test_test_set_does_not_depend_on_chunking_or_pack(T):
    s = 3
    seeds = [0, 1, 2]
    support = torch.stack([tasks.draw_support("and", T, s, sd) for sd in seeds])
    x_big, y_big = all_test_samples("and", T, s, seeds, support, 500, 500)
    x_small, y_small = all_test_samples("and", T, s, seeds, support, 500, 37)
    assert torch.equal(x_big, x_small) and torch.equal(y_big, y_small)
    # A trial's test set is the same whether or not other trials share the call.
    x_alone, y_alone = all_test_samples("and", T, s, [1], support[1:2], 500, 128)
    assert torch.equal(x_alone[0], x_big[1]) and torch.equal(y_alone[0], y_big[1])


def test_test_chunks_sizes():
    support = tasks.draw_support("parity", 10, 2, 0)[None]
    sizes = [x.shape[1] for x, _ in tasks.test_chunks("parity", 10, 2, [0], support, 250, 100)]
    assert sizes == [100, 100, 50]


# -- the support -----------------------------------------------------------------------


@pytest.mark.parametrize("task", ["and", "parity"])
@pytest.mark.parametrize("T,s", [(2, 1), (5, 4), (64, 3), (1000, 7)])
def test_support_is_sorted_distinct_in_range(task, T, s):
    for seed in range(10):
        sup = tasks.draw_support(task, T, s, seed)
        assert sup.dtype == torch.int64 and sup.shape == (s,)
        values = sup.tolist()
        assert values == sorted(values)
        assert len(set(values)) == s
        assert all(0 <= v < T for v in values)


@pytest.mark.parametrize("task", ["and", "parity"])
def test_support_does_not_depend_on_m(task):
    T, s = 32, 2
    for seed in range(4):
        expected = tasks.draw_support(task, T, s, seed)
        for m in (40, 80, 150):
            _, _, support, _ = tasks.sample_training_set(task, T, s, m, seed)
            assert torch.equal(support, expected)


def test_supports_differ_across_seeds():
    supports = {tuple(tasks.draw_support("and", 64, 3, seed).tolist()) for seed in range(20)}
    # C(64, 3) = 41664 possible supports: 20 seeds give (nearly) all different ones.
    assert len(supports) >= 18


# -- determinism -----------------------------------------------------------------------


@pytest.mark.parametrize("task", ["and", "parity"])
def test_training_set_is_deterministic(task):
    a = tasks.sample_training_set(task, T=24, s=2, m=100, seed=11)
    b = tasks.sample_training_set(task, T=24, s=2, m=100, seed=11)
    for u, v in zip(a[:3], b[:3], strict=True):
        assert torch.equal(u, v)
    assert a[3] == b[3]
    c = tasks.sample_training_set(task, T=24, s=2, m=100, seed=12)
    assert not torch.equal(a[0], c[0])


# -- the ambiguity check ---------------------------------------------------------------


@pytest.mark.parametrize("task", ["and", "parity"])
def test_is_ambiguous_matches_brute_force(task):
    rng = np.random.default_rng(1234)
    results = []
    for _ in range(300):
        T = int(rng.integers(4, 12))
        s = int(rng.integers(1, min(4, T - 1) + 1))
        m = int(rng.integers(1, 21))
        # Vary the bit density so that both outcomes occur often.
        p = float(rng.choice([2.0 ** (-1.0 / s), 0.5, 0.8])) if task == "and" else 0.5
        x = (rng.random((m, T)) < p).astype(np.uint8)
        support = np.sort(rng.choice(T, size=s, replace=False))
        y = np_labels(task, x, support).astype(np.float32)
        expected = brute_ambiguous(task, x, y, support)
        got = tasks.is_ambiguous(task, torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(support))
        assert got == expected, (T, s, m, x.tolist(), support.tolist())
        results.append(expected)
    # The sample exercises both answers.
    assert 30 <= sum(results) <= 270


@pytest.mark.parametrize("task", ["and", "parity"])
def test_duplicate_support_column_is_ambiguous(task):
    rng = np.random.default_rng(5)
    T, m = 8, 30
    x = (rng.random((m, T)) < 0.5).astype(np.uint8)
    x[:, 5] = x[:, 2]  # column 5 is a copy of support column 2
    support = np.array([2, 6])
    y = np_labels(task, x, support).astype(np.float32)
    # {5, 6} gives exactly the same labels as {2, 6}.
    assert np.array_equal(np_labels(task, x, [5, 6]), y > 0.5)
    assert tasks.is_ambiguous(task, torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(support))


@pytest.mark.parametrize("task", ["and", "parity"])
def test_unique_support_is_not_ambiguous(task):
    # Identity rows: for s = 1, the label column equals column 0 only.
    x = torch.eye(4, dtype=torch.uint8)
    support = torch.tensor([0])
    y = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert not tasks.is_ambiguous(task, x, y, support)
    # s = 2, T = 3 with all 4 two-bit patterns on columns 0, 1 and column 2 = 0:
    x = torch.tensor([[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0]], dtype=torch.uint8)
    support = torch.tensor([0, 1])
    y = tasks.labels(task, x, support)
    # {0,2} and {1,2} give all-zero AND labels (vs 0,0,0,1) and XOR labels = one column
    # (0,0,1,1 or 0,1,0,1 vs 0,1,1,0): neither matches.
    assert not tasks.is_ambiguous(task, x, y, support)


@pytest.mark.parametrize("task,T,s,m", [("and", 8, 2, 5), ("and", 10, 3, 10), ("parity", 8, 2, 5), ("parity", 9, 3, 6)])
def test_accepted_training_sets_are_unambiguous(task, T, s, m):
    redraws = []
    for seed in range(25):
        x, y, support, r = tasks.sample_training_set(task, T, s, m, seed)
        assert not brute_ambiguous(task, x.numpy(), y.numpy(), support.tolist())
        redraws.append(r)
        if r > 0:
            # The first draw (no rejection) is the same generator's first draw, and it
            # was ambiguous; allowing one draw fewer than needed fails.
            x0, y0, s0, r0 = tasks.sample_training_set(task, T, s, m, seed, reject_ambiguous=False)
            assert r0 == 0 and torch.equal(s0, support)
            assert brute_ambiguous(task, x0.numpy(), y0.numpy(), s0.tolist())
            with pytest.raises(AmbiguousTrainingSetError):
                tasks.sample_training_set(task, T, s, m, seed, max_redraws=r - 1)
            x1, _, _, r1 = tasks.sample_training_set(task, T, s, m, seed, max_redraws=r)
            assert r1 == r and torch.equal(x1, x)
    # m is small for T: some draws are rejected.
    assert any(r > 0 for r in redraws)


def test_redraw_cap_raises():
    with pytest.raises(AmbiguousTrainingSetError) as info:
        tasks.sample_training_set("and", T=64, s=3, m=2, seed=0, max_redraws=3)
    assert "reject_ambiguous" in str(info.value)
    assert isinstance(info.value, TaskError)


@pytest.mark.parametrize(
    "task,T,s,m",
    [
        ("and", 5, 5, 10),
        ("and", 5, 6, 10),
        ("parity", 5, 0, 10),
        ("and", 1, 1, 10),
        ("and", 8, 2, 0),
    ],
)
def test_bad_shapes_raise(task, T, s, m):
    with pytest.raises(TaskError):
        tasks.sample_training_set(task, T, s, m, seed=0)


def test_bad_shapes_in_draw_support():
    with pytest.raises(TaskError):
        tasks.draw_support("and", 4, 4, 0)
    with pytest.raises(TaskError):
        tasks.draw_support("and", 4, 0, 0)


def test_unknown_task_raises():
    with pytest.raises(TaskError):
        tasks.sample_training_set("majority", T=8, s=2, m=10, seed=0)
    with pytest.raises(TaskError):
        tasks.bit_probability("or", 2)
    with pytest.raises(TaskError):
        tasks.labels("xor", torch.zeros((2, 4), dtype=torch.uint8), torch.tensor([0]))
    # The many-trial version reports the error per trial instead of raising.
    batch, ok, errors = tasks.sample_training_sets("xor", 8, 2, 10, [0, 1])
    assert batch is None and ok == [] and sorted(errors) == [0, 1]
    assert all(type(e) is TaskError for e in errors.values())


# -- many trials at once ---------------------------------------------------------------


def test_sample_training_sets_all_fail_when_m_is_hopeless():
    # Parity, s = 2, m = 1, T = 64: with n1 ones and n0 = 64 - n1 zeros among the columns,
    # the pairs with XOR = y number n1*n0 (y = 1) or C(n1,2) + C(n0,2) (y = 0); neither
    # can be 1 when n1 + n0 = 64, so every draw is ambiguous.
    batch, ok, errors = tasks.sample_training_sets("parity", 64, 2, 1, [0, 1, 2], max_redraws=2)
    assert batch is None and ok == []
    assert sorted(errors) == [0, 1, 2]
    assert all(isinstance(e, AmbiguousTrainingSetError) for e in errors.values())


def test_sample_training_sets_feasible_m_works_for_all():
    seeds = [0, 1, 2, 3, 4]
    batch, ok, errors = tasks.sample_training_sets("and", 64, 2, 200, seeds)
    assert ok == [0, 1, 2, 3, 4] and errors == {}
    assert batch.x.shape == (5, 200, 64) and batch.x.dtype == torch.uint8
    assert batch.y.shape == (5, 200) and batch.support.shape == (5, 2) and batch.redraws.shape == (5,)
    for i, seed in enumerate(seeds):
        x, y, support, r = tasks.sample_training_set("and", 64, 2, 200, seed)
        assert torch.equal(batch.x[i], x) and torch.equal(batch.y[i], y)
        assert torch.equal(batch.support[i], support) and int(batch.redraws[i]) == r


def test_sample_training_sets_mixed_failures_do_not_stop_the_rest():
    # AND, s = 1, T = 8, m = 3 and one draw allowed: the draw is ambiguous iff another
    # column equals y, which happens with probability 1 - (7/8)^7 ~ 0.6 per seed.
    task, T, s, m = "and", 8, 1, 3
    seeds = list(range(100, 116))
    expected_fail = []
    for seed in seeds:
        x0, y0, s0, _ = tasks.sample_training_set(task, T, s, m, seed, reject_ambiguous=False)
        expected_fail.append(brute_ambiguous(task, x0.numpy(), y0.numpy(), s0.tolist()))
    assert 0 < sum(expected_fail) < len(seeds)  # the seed list really mixes both outcomes

    batch, ok, errors = tasks.sample_training_sets(task, T, s, m, seeds, max_redraws=0)
    assert sorted(errors) == [i for i, f in enumerate(expected_fail) if f]
    assert ok == [i for i, f in enumerate(expected_fail) if not f]
    assert all(isinstance(e, AmbiguousTrainingSetError) for e in errors.values())
    assert batch.x.shape == (len(ok), m, T)
    for row, i in enumerate(ok):
        x0, y0, s0, _ = tasks.sample_training_set(task, T, s, m, seeds[i], reject_ambiguous=False)
        assert torch.equal(batch.x[row], x0) and torch.equal(batch.y[row], y0)
        assert int(batch.redraws[row]) == 0


def test_derive_seed_is_stable_and_in_range():
    a = tasks.derive_seed("train", "and", 8, 2, 10, 0)
    assert a == tasks.derive_seed("train", "and", 8, 2, 10, 0)
    assert a != tasks.derive_seed("train", "and", 8, 2, 10, 1)
    assert 0 <= a < 2**63
