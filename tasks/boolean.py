"""Sparse Boolean functions of a length-T bit string (Edelman et al., ICML 2022, section 5).

A trial's target is an s-sparse function of T bits: its label depends only on the bits at
s relevant positions (the *support*), drawn uniformly without replacement from ``range(T)``
by the trial's seed.

* ``and``: y = x[i1] AND ... AND x[is], bits i.i.d. Bernoulli(p) with p = 2^(-1/s), so that
  P(y = 1) = p^s = 1/2 and the labels are balanced.
* ``parity``: y = x[i1] XOR ... XOR x[is], bits i.i.d. Bernoulli(1/2).

Training sets that are compatible with more than one support (another s-subset S' != S
with f_S'(x) = y on every training sample) are rejected and redrawn, as in the paper's
protocol, so that the m samples identify the target. The check is exact:

* ``and``: S' must lie inside C, the positions that are 1 in every positive sample, and
  must contain a 0 of every negative sample (a hitting set). A depth-first search over C
  branches on the zeros of the first negative sample not yet hit and stops at the first
  consistent S' != S.
* ``parity``: S' is consistent iff the XOR of its columns equals y. Columns are hashed to
  64-bit words with a random GF(2)-linear map (so hash(a XOR b) = hash(a) XOR hash(b)),
  every (s-1)-subset R is matched against a sorted table of single columns (hash(j) ==
  hash(y) XOR hash(R)), scanned in chunks, and every hash match is verified on the bits.

Redraws use the same generator, so they are deterministic too; after ``max_redraws``
rejected draws an :class:`AmbiguousTrainingSetError` says that m is too small for T and s.

The two tasks are :class:`~attnsweep.tasks.registry.BooleanTask` values, looked up by name in
:func:`boolean_tasks` beside the tasks other packages add (tasks/registry.py); a task without
its own uniqueness check gets the exact one that tries every other s-subset.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnsweep.tasks.errors import AmbiguityCheckTooLargeError, AmbiguousTrainingSetError, TaskError
from attnsweep.tasks.registry import BooleanTask, ambiguous_by_enumeration, plugin_task, plugin_tasks, task_names
from attnsweep.tasks.seeding import derive_seed, generator

# Most (s-1)-subsets of columns the parity check scans (about 0.1 s per million).
_MAX_PARITY_SUBSETS = 100_000_000
# Largest number of search nodes the AND check visits before giving up.
_MAX_AND_NODES = 2_000_000


@dataclass(frozen=True)
class BooleanBatch:
    """Training sets of several trials that share (task, T, s, m).

    Attributes:
        x: ``(trials, m, T)`` uint8 bits.
        y: ``(trials, m)`` float32 labels in {0, 1}.
        support: ``(trials, s)`` int64 relevant positions, sorted.
        redraws: ``(trials,)`` int64, rejected draws before the accepted one.
    """

    x: torch.Tensor
    y: torch.Tensor
    support: torch.Tensor
    redraws: torch.Tensor


def bit_probability(task: str, s: int) -> float:
    """P(bit = 1): 2^(-1/s) for ``and`` (balanced labels), 1/2 for ``parity``, what a task
    added by a package says for the others.

    Raises:
        TaskError: unknown task, or a package's task gives no probability in (0, 1).
    """
    p = task_of(task).bit_probability(s)
    if task not in BUILT_IN_TASKS and not (isinstance(p, (int, float)) and 0 < p < 1):
        raise TaskError(f"task {task!r}: bit_probability({s}) = {p!r}, not a probability in (0, 1) (its package)")
    return p


def labels(task: str, x: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """The target's labels.

    Args:
        task: a name of :func:`boolean_tasks` (``"and"``, ``"parity"``, or one a package adds).
        x: ``(..., n, T)`` bits (any integer or bool dtype).
        support: ``(..., s)`` int64 positions, broadcastable against x's leading dims.

    Returns:
        ``(..., n)`` float32 labels in {0, 1}.

    Raises:
        TaskError: unknown task, or a package's label function gives another shape, dtype or value.
    """
    target = task_of(task)
    idx = support.unsqueeze(-2).expand(*x.shape[:-1], support.shape[-1])
    bits = torch.gather(x, -1, idx).to(torch.int64)  # (..., n, s); gather first: x may be large
    y = target.label(bits)
    if task not in BUILT_IN_TASKS:  # a package's label function is held to what the trainer reads
        _check_labels(task, y, tuple(bits.shape[:-1]))
    return y


def _check_labels(task: str, y: object, shape: tuple[int, ...]) -> None:
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != shape or y.dtype != torch.float32:
        got = f"{tuple(y.shape)} {y.dtype}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise TaskError(f"task {task!r}: its label function gave {got}, not a float32 tensor of shape {shape}")
    if not bool(((y == 0) | (y == 1)).all()):
        raise TaskError(f"task {task!r}: its label function gave values other than 0 and 1")


def draw_support(task: str, T: int, s: int, seed: int) -> torch.Tensor:
    """The relevant positions of a trial: ``(s,)`` int64, sorted, distinct, in ``[0, T)``.

    They depend on (task, T, s, seed) only, so trials that differ only in m, the model
    or the norm bound share their target.

    Raises:
        TaskError: s < 1 or s >= T.
    """
    _check_shape(T, s)
    g = generator(derive_seed("support", task, T, s, seed))
    return torch.randperm(T, generator=g)[:s].sort().values


# Test only: the fraction of training labels to flip, a broken data generator that
# `attnsweep replicate` must catch (tests/test_replicate.py). Never set in real use.
PLANTED_NOISE_ENV = "ATTNSWEEP_TEST_FLIP_LABELS"


def _planted_label_noise(y: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    frac = float(os.environ.get(PLANTED_NOISE_ENV) or 0)
    if frac <= 0:
        return y
    return torch.where(torch.rand(y.shape, generator=g, device=y.device) < frac, 1 - y, y)


def sample_training_set(
    task: str,
    T: int,
    s: int,
    m: int,
    seed: int,
    *,
    reject_ambiguous: bool = True,
    max_redraws: int = 100,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """One trial's training set.

    Args:
        task, T, s, m, seed: the trial's settings (m samples of T bits).
        reject_ambiguous: redraw sets that more than one support explains.
        max_redraws: rejected draws allowed before giving up.
        device: where the tensors are made.

    Returns:
        ``x`` ``(m, T)`` uint8, ``y`` ``(m,)`` float32, ``support`` ``(s,)`` int64 and the
        number of rejected draws.

    Raises:
        TaskError: bad task or shape.
        AmbiguousTrainingSetError: every one of ``max_redraws + 1`` draws was ambiguous.
        AmbiguityCheckTooLargeError: the parity check would need too large a table.
    """
    task_of(task)
    _check_shape(T, s)
    if m < 1:
        raise TaskError(f"m must be >= 1, got {m}")
    support = draw_support(task, T, s, seed).to(device)
    g = generator(derive_seed("train", task, T, s, m, seed), device)
    p = bit_probability(task, s)
    for redraw in range(max_redraws + 1):
        x = (torch.rand((m, T), generator=g, device=device) < p).to(torch.uint8)
        y = labels(task, x, support)
        if not reject_ambiguous or not is_ambiguous(task, x, y, support):
            return x, _planted_label_noise(y, g), support, redraw
    raise AmbiguousTrainingSetError(
        f"{max_redraws + 1} training sets of m={m} samples for task={task}, T={T}, s={s}, "
        f"seed={seed} were all explained by more than one support: m is too small to "
        "identify the target. Use a larger m, or set reject_ambiguous: false."
    )


def sample_training_sets(
    task: str,
    T: int,
    s: int,
    m: int,
    seeds: Sequence[int],
    *,
    reject_ambiguous: bool = True,
    max_redraws: int = 100,
    device: str | torch.device = "cpu",
) -> tuple[BooleanBatch | None, list[int], dict[int, Exception]]:
    """Training sets for many trials at once; a trial whose draw fails does not stop the rest.

    Returns:
        ``(batch, ok, errors)``: the stacked sets of the trials that succeeded (None if
        none did), their indices into ``seeds``, and the exception of each that failed.
    """
    xs, ys, supports, redraws, ok, errors = [], [], [], [], [], {}
    for i, seed in enumerate(seeds):
        try:
            x, y, support, r = sample_training_set(
                task,
                T,
                s,
                m,
                seed,
                reject_ambiguous=reject_ambiguous,
                max_redraws=max_redraws,
                device=device,
            )
        except TaskError as exc:
            errors[i] = exc
            continue
        xs.append(x), ys.append(y), supports.append(support), redraws.append(r)
        ok.append(i)
    if not ok:
        return None, ok, errors
    batch = BooleanBatch(
        x=torch.stack(xs),
        y=torch.stack(ys),
        support=torch.stack(supports),
        redraws=torch.tensor(redraws, dtype=torch.int64),
    )
    return batch, ok, errors


def test_chunks(
    task: str,
    T: int,
    s: int,
    seeds: Sequence[int],
    support: torch.Tensor,
    n_test: int,
    chunk_size: int,
    device: str | torch.device = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Held-out samples from the training distribution, in chunks so memory stays bounded.

    The test set of a trial depends on (task, T, s, seed) and the kind of device only:
    trials that differ in m are scored on the same samples. On CPU it is drawn from
    numpy's PCG64 (raw 32-bit words against p 2^32), on an accelerator with that device's
    torch generator (torch's CPU and CUDA generators never gave the same stream either).

    Args:
        support: ``(trials, s)`` int64, the trials' relevant positions.
        n_test: samples per trial; the last chunk may be shorter than ``chunk_size``.

    Yields:
        ``x`` ``(trials, c, T)`` uint8 and ``y`` ``(trials, c)`` float32, c <= chunk_size.
    """
    p = bit_probability(task, s)
    seeds_ = [derive_seed("test", task, T, s, seed) for seed in seeds]
    on_cpu = torch.device(device).type == "cpu"
    # On CPU each bit is one 32-bit word of PCG64's raw stream below p 2^32 (P = p to within
    # 2^-33, finer than a float32 uniform's 2^-24): about 2x faster than numpy's float32
    # uniforms, 4x faster than torch's generator, and at T in the thousands the test set is
    # most of a trial's draw (bench/pack_profile.py).
    bits = [_Words(k) for k in seeds_] if on_cpu else [generator(k, device) for k in seeds_]
    threshold = np.uint32(min(round(p * 2**32), 2**32 - 1))
    for start in range(0, n_test, chunk_size):
        c = min(chunk_size, n_test - start)
        if on_cpu:
            x = torch.from_numpy(np.stack([(b.take(c * T).reshape(c, T) < threshold).view(np.uint8) for b in bits]))
        else:
            x = torch.stack([(torch.rand((c, T), generator=g, device=device) < p).to(torch.uint8) for g in bits])
        yield x, labels(task, x, support.to(x.device))


class _Words:
    """PCG64's raw stream (numpy) as 32-bit words, taken in any counts: a count that ends in
    the middle of a 64-bit draw keeps the other half for the next, so the words are the same
    however a test set is cut into chunks."""

    def __init__(self, seed: int):
        self.bitgen = np.random.PCG64(seed)
        self.spare: np.uint32 | None = None

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` words, ``(n,)`` uint32."""
        first = [] if self.spare is None or n == 0 else [self.spare]
        if first:
            self.spare = None
        rest = n - len(first)
        words = self.bitgen.random_raw((rest + 1) // 2).view(np.uint32)
        if rest % 2:
            self.spare = words[rest]
        words = words[:rest]
        return np.concatenate([np.asarray(first, np.uint32), words]) if first else words


def is_ambiguous(task: str, x: torch.Tensor, y: torch.Tensor, support: torch.Tensor) -> bool:
    """Whether an s-subset other than ``support`` also explains every sample exactly.

    Args:
        x: ``(m, T)`` bits; y: ``(m,)`` labels; support: ``(s,)`` positions.

    Raises:
        AmbiguityCheckTooLargeError: the search would exceed its size limit.
    """
    target = task_of(task)
    xb = x.detach().to("cpu", torch.bool).numpy()
    yb = y.detach().to("cpu").numpy() > 0.5
    s_set = tuple(sorted(int(i) for i in support.tolist()))
    if target.is_ambiguous is None:
        return ambiguous_by_enumeration(target, xb, yb, s_set)
    return target.is_ambiguous(xb, yb, s_set)


def _and_ambiguous(x: np.ndarray, y: np.ndarray, support: tuple[int, ...]) -> bool:
    s = len(support)
    positives = x[y]
    cand = np.flatnonzero(positives.all(axis=0)) if len(positives) else np.arange(x.shape[1])
    if len(cand) == s:  # support is inside cand, so it is the only s-subset
        return False
    local_support = frozenset(int(np.searchsorted(cand, i)) for i in support)
    neg_zero = ~x[~y][:, cand]  # (negatives, |C|): True where a negative has a 0
    nodes = 0

    def search(chosen: tuple[int, ...], unhit: np.ndarray) -> bool:
        nonlocal nodes
        nodes += 1
        if nodes > _MAX_AND_NODES:
            raise AmbiguityCheckTooLargeError(
                f"the AND uniqueness check passed {_MAX_AND_NODES} search nodes; "
                "use a larger m or set reject_ambiguous: false"
            )
        if not unhit.any():
            # Every completion of `chosen` to s positions inside C is consistent; one
            # differs from the support unless `chosen` is part of it and C has no spare.
            if len(chosen) == s or not set(chosen) <= local_support:
                return set(chosen) != local_support
            return len(cand) > s
        if len(chosen) == s:
            return False
        first = int(np.argmax(unhit))
        for c in np.flatnonzero(neg_zero[first]):
            if search(chosen + (int(c),), unhit & ~neg_zero[:, c]):
                return True
        return False

    return search((), np.ones(len(neg_zero), dtype=bool))


def _parity_ambiguous(x: np.ndarray, y: np.ndarray, support: tuple[int, ...]) -> bool:
    m, T = x.shape
    s = len(support)
    n_subsets = math.comb(T, s - 1)
    if n_subsets > _MAX_PARITY_SUBSETS:
        raise AmbiguityCheckTooLargeError(
            f"the parity uniqueness check for T={T}, s={s} would scan {n_subsets} column "
            f"subsets (limit {_MAX_PARITY_SUBSETS}); set reject_ambiguous: false for this cell"
        )
    # A fixed random GF(2)-linear hash of columns (fixed seed: the check must not depend
    # on global random state).
    row_keys = np.random.default_rng(0x5EED + m).integers(0, 2**63, size=m, dtype=np.uint64)
    col_hash = np.bitwise_xor.reduce(np.where(x, row_keys[:, None], np.uint64(0)), axis=0)
    y_hash = np.bitwise_xor.reduce(np.where(y, row_keys, np.uint64(0)))
    order = np.argsort(col_hash, kind="stable")
    singles = col_hash[order]
    # S' = R + {j} with |R| = s - 1 is consistent iff hash(j) == y_hash ^ hash(R).
    for idx, val in _subset_chunks(col_hash, s - 1):
        targets = val ^ y_hash
        lo = np.searchsorted(singles, targets, side="left")
        hi = np.searchsorted(singles, targets, side="right")
        for i in np.flatnonzero(hi > lo):
            for j in order[lo[i] : hi[i]]:
                cols = set(idx[i].tolist()) | {int(j)}
                if len(cols) != s or tuple(sorted(cols)) == support:
                    continue
                if np.array_equal(x[:, sorted(cols)].sum(axis=1) % 2 == 1, y):
                    return True
    return False


def _subset_chunks(col_hash: np.ndarray, k: int, chunk: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """All k-subsets of columns, in chunks: ``(N, k)`` indices, ``(N,)`` XOR of their hashes."""
    T = len(col_hash)
    if k == 0:
        yield np.zeros((1, 0), dtype=np.int64), np.zeros(1, dtype=np.uint64)
    elif k == 1:
        yield np.arange(T)[:, None], col_hash
    elif k == 2 and T * (T - 1) // 2 <= chunk:  # all pairs at once: one pass, not T small ones
        first, second = np.triu_indices(T, 1)
        yield np.stack([first, second], 1), col_hash[first] ^ col_hash[second]
    elif k == 2:
        for i in range(T - 1):
            j = np.arange(i + 1, T)
            yield np.stack([np.full_like(j, i), j], 1), col_hash[i] ^ col_hash[j]
    else:
        combos = itertools.combinations(range(T), k)
        while block := list(itertools.islice(combos, chunk)):
            idx = np.array(block, dtype=np.int64)
            yield idx, np.bitwise_xor.reduce(col_hash[idx], axis=1)


AND = BooleanTask(
    "and",
    lambda s: 2.0 ** (-1.0 / s),
    lambda bits: bits.prod(-1).to(torch.float32),
    _and_ambiguous,
    "y = AND of the s support bits; bits Bernoulli(2^(-1/s)), balanced labels",
)
PARITY = BooleanTask(
    "parity",
    lambda s: 0.5,
    lambda bits: (bits.sum(-1) % 2).to(torch.float32),
    _parity_ambiguous,
    "y = XOR of the s support bits; bits Bernoulli(1/2)",
)


BUILT_IN_TASKS = {AND.name: AND, PARITY.name: PARITY}
"""attnsweep's own tasks, by name (tasks/registry.py ``BUILT_IN`` names them)."""


def boolean_tasks() -> dict[str, BooleanTask]:
    """Every Boolean task by name: ``and`` and ``parity``, then those installed packages add
    (tasks/registry.py).

    Raises:
        TaskError: a package's task does not load (:func:`attnsweep.tasks.registry.plugin_task`).
    """
    return {**BUILT_IN_TASKS, **plugin_tasks()}


def task_of(name: str) -> BooleanTask:
    """The task called ``name``; a package's task is loaded alone, so another package's broken
    entry point does not stop this one.

    Raises:
        TaskError: no task has that name (the message lists those that do), or its package's
            entry point does not load.
    """
    if name in BUILT_IN_TASKS:
        return BUILT_IN_TASKS[name]
    names = task_names()
    if name not in names:
        raise TaskError(f"task must be one of {names}, got {name!r}")
    return plugin_task(name)


def _check_shape(T: int, s: int) -> None:
    if s < 1 or s >= T:
        raise TaskError(f"need 1 <= s < T, got s={s}, T={T}")
