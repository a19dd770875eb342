"""Training the trials of a pack together: stacked parameters, one vmapped forward and backward
and one AdamW step per epoch for the whole pack, each trial still its own.

The trials' parameters are stacked along a leading *slot* axis (``torch.func.stack_module_state``)
and the model runs under ``torch.func.vmap`` over ``functional_call``; the loss is the sum of the
slots' losses, so each slot's gradient is its own loss's gradient exactly, and AdamW is
elementwise, so each slot's optimiser state is its own. A trial that fits, diverges or explodes
leaves with a copy of its weights at that moment; its slot may go on computing, but nothing it
computes reaches another slot.

Why the slot count is a multiple of :data:`LANES`. An elementwise kernel on the CPU runs the body
of a tensor in SIMD vectors and its last ``numel mod (2 x vector width)`` elements one at a time,
and the two round differently (torch 2.13 here: ``sigmoid`` differed in 76 of 1000 elements,
fused AdamW in 2). Which of a trial's elements fall in that tail depends on the pack's size and
the trial's slot. With the slot count a multiple of :data:`LANES` (twice the float vector: 16 with AVX2, 32 with
AVX-512)
every stacked tensor's size is too, there is no tail, and each element takes the same path in
every slot of every pack. Empty slots are filled with copies of a trial (*padding*) whose results
are dropped; when enough trials have left, the pack is compacted to a smaller multiple, which
moves trials between slots, harmless since no slot position matters. Intra-op threads are held
at one while a stacked pack trains: a thread split cuts the flat range at a point set by the
pack's size, and each piece has its own tail.

So a trial's row is a function of its settings, seed, code version and device kind, whatever its
packmates (tests/workers/test_pack_invariance.py).

On a GPU the same holds by another layout. There kernels are chosen by a tensor's whole shape
(cuBLAS picks its batched product by the batch count) and some backward passes add with atomics
in whatever order threads finish, so on an H200 a trial's row moved at round-off with its pack's
size and even between two runs of one pack (bench/gpu_invariance.py, BENCHMARKS.md). So off the
CPU a pack trains in groups of exactly the group size's slots (:data:`DEVICE_SLOTS` unless
``execution.device_group`` says otherwise, :func:`device_group`), one group after another, padded
and never compacted, so every kernel sees the same shapes whatever the pack; and with torch's
deterministic algorithms on (:func:`reproducible`). A pack of 256 may so train as one group of
256, with rows that are its own for that group size.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
from collections.abc import Iterator, Sequence

import torch
from torch.func import functional_call, stack_module_state, vmap

from attnsweep.workers.adamw import AdamW


def _lanes() -> int:
    """Twice the float32 SIMD width torch's CPU kernels use here: 16 with AVX2 (8 floats), 32 with
    AVX-512 and wherever the width is not known."""
    return 16 if torch.backends.cpu.get_cpu_capability() == "AVX2" else 32


LANES = _lanes()
"""Slot granularity of a stacked pack: twice the float32 SIMD width, so that no stacked tensor has
an elementwise tail (module docstring). It is a property of the processor, as a row's bits are."""


DEVICE_SLOTS = 32
"""The default slots of every stacked group off the CPU (module docstring; ``execution.device_group``
sets another, :func:`device_group`). Packs of a cell's seeds hold 8 to 32 trials, and on an H200
a group of 32 tiny trials took as long as one of 8 (BENCHMARKS.md, GPU), so 32 pads little; a
bigger pack trains group after group, and more workers per GPU (``resources.gpus_per_worker``
below 1) keep the device busy."""

_group = [DEVICE_SLOTS]  # the group size in force in this process (device_group)


def device_slots() -> int:
    """The slots of every stacked group off the CPU in this process now (:func:`device_group`)."""
    return _group[-1]


@contextlib.contextmanager
def device_group(slots: int | None) -> Iterator[None]:
    """For the duration, every stacked group off the CPU has ``slots`` slots (None:
    :data:`DEVICE_SLOTS`). Like the thread count on a CPU, the group size is part of what a
    GPU row reproduces: a trial's numbers there are the same bit for bit in every pack for one
    group size, and may differ at round-off between two (module docstring), so a row records it
    (``device_group``).

    Raises:
        ValueError: ``slots`` below 1.
    """
    slots = DEVICE_SLOTS if slots is None else int(slots)
    if slots < 1:
        raise ValueError(f"device_group must be at least 1, got {slots}")
    _group.append(slots)
    try:
        yield
    finally:
        _group.pop()


# cuBLAS is deterministic only with a fixed workspace; it reads this when its first handle is
# made, so it is set before any CUDA work (a process that made one before importing this keeps
# its own, and torch warns).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def slot_count(trials: int, dev: torch.device | None = None) -> int:
    """Slots for ``trials`` trials: on a CPU the next multiple of :data:`LANES` (at least one);
    on another device the group size (:func:`device_slots`), for ``trials`` up to that
    (:func:`groups`)."""
    if dev is not None and dev.type != "cpu":
        return device_slots()
    return max(1, math.ceil(trials / LANES)) * LANES


def group_slots(dev: torch.device) -> int:
    """The trials scored together in one padded group: :data:`LANES` on a CPU, else the group
    size (:func:`device_slots`)."""
    return LANES if dev.type == "cpu" else device_slots()


def groups(trials: int, dev: torch.device) -> list[range]:
    """The groups of a pack of ``trials`` trials that train as one stacked pack each: on a CPU
    all of them (padded to the lanes and compacted as they leave); on another device runs of
    the group size (:func:`device_slots`), trained one after another (module docstring)."""
    size = trials if dev.type == "cpu" else device_slots()
    return [range(i, min(i + size, trials)) for i in range(0, trials, max(size, 1))]


@contextlib.contextmanager
def reproducible(dev: torch.device) -> Iterator[None]:
    """For the duration, what keeps a slot's numbers its own (module docstring): one intra-op
    thread on the CPU; torch's deterministic algorithms elsewhere (a warning, not an error, for
    an operation that has none)."""
    if dev.type != "cpu":
        before_mode, before_warn = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(before_mode, warn_only=before_warn)
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class StackedPack:
    """The slots of a pack: stacked parameters and buffers, their AdamW, and which slot holds
    which trial.

    Args:
        models: one initialised model per trial, all of one architecture.
        trained: the names of the parameters that train (others are read, never stepped).
        lr, weight_decay: AdamW's (Loshchilov & Hutter, ICLR 2019), the same for every trial of
            a pack (they are part of its shape key).
        dev: the device.

    Attributes:
        params: name -> ``(slots, ...)`` tensors (leaves that require grad for trained names).
        buffers: name -> ``(slots, ...)`` tensors.
        trial: ``(slots,)`` the trial index each slot holds (padding repeats a trial).
        active: ``(slots,)`` bool, whether the slot's trial is still training (never for padding).
    """

    def __init__(
        self,
        models: Sequence[torch.nn.Module],
        trained: set[str],
        lr: float,
        weight_decay: float,
        dev: torch.device,
    ):
        self.lr, self.weight_decay, self.trained, self.dev = lr, weight_decay, trained, dev
        n = len(models)
        slots = slot_count(n, dev)
        order = list(range(n)) + [0] * (slots - n)
        params, buffers = stack_module_state([models[i] for i in order])
        self.base = copy.deepcopy(models[0]).to("meta")
        self.params = {k: v.detach().to(dev).requires_grad_(k in trained) for k, v in params.items()}
        self.buffers = {k: v.to(dev) for k, v in buffers.items()}
        self.trial = torch.tensor(order)
        self.active = torch.tensor([i < n for i in range(slots)])
        self.opt = AdamW([v for k, v in self.params.items() if k in trained], lr, weight_decay)

    @property
    def slots(self) -> int:
        return int(self.trial.shape[0])

    def call(self, *inputs: torch.Tensor, **kwargs) -> torch.Tensor:
        """The model's forward on every slot: ``inputs`` ``(slots, ...)`` each -> ``(slots, ...)``;
        ``kwargs`` (not batched) go to every call."""

        def one(p, b, *x):
            return functional_call(self.base, (p, b), x, kwargs)

        return vmap(one)(self.params, self.buffers, *inputs)

    def step(self, loss: torch.Tensor | None = None, grads: dict[str, torch.Tensor] | None = None) -> None:
        """One AdamW step from ``loss`` ``(slots,)`` (each slot's own loss; summed, each slot's
        gradient is its own loss's), or from ``grads`` computed by hand (name -> ``(slots, ...)``;
        only the trained names are read)."""
        self.opt.zero_grad()
        if grads is None:
            loss.sum().backward()
        else:
            for k in self.trained:
                # Contiguous: torch 2.13's fused CPU AdamW reads a strided gradient as if it were
                # contiguous (a view's step was off by 2 lr in tests/workers/test_stacked.py).
                self.params[k].grad = grads[k].to(self.params[k].dtype).contiguous()
        self.opt.step()

    def slot_params(self, slot: int) -> dict[str, torch.Tensor]:
        """A copy of one slot's parameters, by name, shaped as the model's own."""
        return {k: v[slot].detach().clone() for k, v in self.params.items()}

    def compact(self, keep: list[int]) -> list[int]:
        """Keep the slots ``keep`` (each holding an active trial), in that order, padded to
        :func:`slot_count`, with their optimiser state. Returns the old slot of each new one."""
        slots = slot_count(len(keep), self.dev)
        old = keep + [keep[0]] * (slots - len(keep))
        index = torch.tensor(old, device=self.dev)
        state = {k: self.opt.state.get(v, {}) for k, v in self.params.items() if k in self.trained}
        self.params = {k: v.detach()[index].clone().requires_grad_(k in self.trained) for k, v in self.params.items()}
        self.buffers = {k: v[index] for k, v in self.buffers.items()}
        self.trial = self.trial[torch.tensor(old)]
        self.active = torch.tensor([i < len(keep) for i in range(slots)])
        self.opt = AdamW([v for k, v in self.params.items() if k in self.trained], self.lr, self.weight_decay)
        for k, s in state.items():
            if s:
                self.opt.state[self.params[k]] = {
                    name: (t[index].clone() if t.dim() > 0 else t.clone()) for name, t in s.items()
                }
        return old


def follow(gens: list[torch.Generator], keep: list[int], slots: int) -> list[torch.Generator]:
    """Per-slot generators after :meth:`StackedPack.compact` kept ``keep``: the kept slots' own,
    then for each padding slot a new generator in the first kept one's state (padding draws are
    never used, and must not advance a trial's own stream)."""
    kept = [gens[s] for s in keep]
    return kept + [copy_generator(kept[0]) for _ in range(slots - len(keep))]


def copy_generator(g: torch.Generator) -> torch.Generator:
    """A new generator in ``g``'s state, on its device."""
    new = torch.Generator(device=g.device)
    new.set_state(g.get_state())
    return new
