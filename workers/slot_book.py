"""What a stacked pack's epoch loop keeps about its slots on the device, so that the host reads
it only every few epochs (:data:`READ_EVERY`), never inside an epoch.

Which slots still train, each slot's epoch count, how and when it left (fitted, or the epoch
at which it diverged) and its weights at that moment live in device tensors, updated by masks
(``torch.where``, ``masked_fill``): an epoch launches work and reads nothing back. Between two
reads a slot that has left keeps computing, as it always did (workers/stacked.py): what it
computes reaches no other slot, and the weights it left with were kept when it left. At a read
(:meth:`SlotBook.read`) the host learns, in one copy, which trials left, writes their results,
and may compact the pack; so a row is the same bit for bit whatever the read interval
(tests/workers/test_host_reads.py), and a pack whose trials all stopped runs at most
``READ_EVERY - 1`` epochs in vain.

A step that must choose on the host (the one-layer step's float32 range, workers/stacked_boolean.py
``hand_step``) does not read inside an epoch either: it flags the choice on the device, and when
the flag is found at a read the loop restores the :class:`Snapshot` taken at the window's start
and runs the window again, reading every epoch.
"""

from __future__ import annotations

import torch

from attnsweep.workers.curves import Curve, note_slots
from attnsweep.workers.stacked import StackedPack

MAX_EVERY = 64
"""The longest read interval a loop takes (a longer one is clipped): the book holds ``every + 2``
flat copies of the pack's weights."""

KEPT = -2  # SlotBook.left_with: the slot's weights are in SlotBook.kept

READ_EVERY = 8
"""Epochs between two host reads of a stacked pack's state. Rows do not depend on it; it trades
the synchronisations of a GPU (one per read) against the epochs a pack runs after its last trial
stopped (at most ``READ_EVERY - 1``) and the compaction it delays on a CPU."""


class SlotBook:
    """Per slot of ``pack``, on its device: ``alive`` ``(slots,)`` bool (still training; never for
    padding), ``epochs`` ``(slots,)`` int64 (epochs counted), ``converged`` ``(slots,)`` bool,
    ``diverged`` ``(slots,)`` int64 (the epoch it diverged at, -1 for none), ``left_with``
    ``(slots,)`` int64 (which of the window's flat weights, :attr:`flats`, a slot left with; -1
    none, :data:`KEPT` a copy in ``kept``) and ``beyond`` (0-d bool: a step
    computed some slot in a form its numbers had outgrown). Read by the host only in
    :meth:`read`, where results are written into ``out`` (one dict per trial: ``params``,
    ``epochs``, ``converged``, ``diverged_epoch``).

    Args:
        pack: the stacked pack; its ``active`` (CPU) marks the slots that hold a trial.
        out: per trial, the dict its results go into.
        epochs: ``(slots,)`` int64 epoch counts to start from (after a compaction), or None
            for zeros.
    """

    def __init__(self, pack: StackedPack, out: list[dict], epochs: torch.Tensor | None = None, every: int = READ_EVERY):
        dev = pack.dev
        self.pack, self.out = pack, out
        self.trial: list[int] = pack.trial.tolist()
        self.real: list[bool] = pack.active.tolist()
        self.written = [False] * pack.slots
        self.alive = pack.active.to(dev, copy=True)
        self.epochs = torch.zeros(pack.slots, dtype=torch.int64, device=dev) if epochs is None else epochs
        self.converged = torch.zeros(pack.slots, dtype=torch.bool, device=dev)
        self.diverged = torch.full((pack.slots,), -1, dtype=torch.int64, device=dev)
        # Trained weights first, so that the explosion test reads one leading block of the flat form.
        self.names = sorted(pack.params, key=lambda k: k not in pack.trained)
        self.shapes = [pack.params[k].shape[1:] for k in self.names]
        self.sizes = [pack.params[k][0].numel() for k in self.names]
        self.trained_width = sum(n for k, n in zip(self.names, self.sizes, strict=True) if k in pack.trained)
        # Flat weights are written in turn into every + 2 buffers made once (fresh ones each epoch
        # cost more than the rest of the book), so a window's flats and the one a snapshot holds
        # (the last of the window before) stay intact until the next read.
        width = sum(self.sizes)
        self.ring = [torch.empty(pack.slots, width, device=dev) for _ in range(every + 2)]
        self.turn = 0
        self.flats: list[torch.Tensor] = []  # the weights, flattened, that slots left with since the last read
        self.left_with = torch.full((pack.slots,), -1, dtype=torch.int64, device=dev)  # index into flats
        self.kept: torch.Tensor | None = None  # weights of slots that left mid-epoch (minibatches), copied
        self.beyond = torch.zeros((), dtype=torch.bool, device=dev)

    def exceeded(self) -> bool:
        """Read whether a step flagged a slot beyond its float32 form since the last read
        (workers/stacked_boolean.py ``hand_step``): if so, the window must run again."""
        return bool(self.beyond)

    def flatten(self) -> torch.Tensor:
        """Every slot's weights now as one row: ``(slots, weights)`` (float32, the parameters in
        :attr:`names` order, trained ones first). The loop takes it once an epoch, for the
        explosion test, and slots that leave then are booked by a reference to it and their
        index, not a copy: a masked copy per parameter cost a tenth of a small pack's epoch, one
        of the flat form still 5% of a pack of 128's (bench/host_reads.py). It is written into
        the next of the book's buffers (``every + 2`` of them), so it stays intact for the
        window and the next: what is booked by reference is read before it is written again."""
        out = self.ring[self.turn]
        self.turn = (self.turn + 1) % len(self.ring)
        return torch.cat([self.pack.params[k].detach().reshape(self.pack.slots, -1) for k in self.names], 1, out=out)

    def largest(self, flat: torch.Tensor) -> torch.Tensor:
        """``(slots,)`` each slot's largest absolute trained weight in ``flat`` (:meth:`flatten`;
        NaN where it holds one: ``amax`` propagates it)."""
        return flat[:, : self.trained_width].abs().amax(1)

    def leave(self, *events: tuple[torch.Tensor, int | None, bool], flat: torch.Tensor | None = None) -> None:
        """Alive slots leave now with their weights of this moment: ``flat``, the :meth:`flatten`
        of them, which must not change until the next read (it is kept by reference), or None
        to copy them now (a masked copy). ``events`` are ``(mask, epoch, converged)``, ``mask``
        ``(slots,)`` bool on the device, each taking the alive slots no earlier event took, as
        fitted (``converged``), as diverged at ``epoch``, or, with neither, out of epochs."""
        free, taken = self.alive, None
        for mask, epoch, converged in events:
            mask = mask & free
            if converged:
                self.converged |= mask
            elif epoch is not None:
                self.diverged.masked_fill_(mask, epoch)
            taken = mask if taken is None else taken | mask
            free = free & ~mask
        if taken is None:
            return
        if flat is None:
            now = torch.cat([self.pack.params[k].detach().reshape(self.pack.slots, -1) for k in self.names], 1)
            self.kept = now if self.kept is None else torch.where(taken[:, None], now, self.kept)
            self.left_with.masked_fill_(taken, KEPT)
        else:
            if not self.flats or self.flats[-1] is not flat:
                self.flats.append(flat)
            self.left_with.masked_fill_(taken, len(self.flats) - 1)
        self.alive = free

    def count_epoch(self) -> None:
        """One more epoch for every alive slot."""
        self.epochs += self.alive

    def read(self) -> list[int]:
        """The one host read: writes the results of every trial that left since the last read
        into its ``out`` dict, forgets the window's weights, and returns the slots still alive."""
        alive, epochs, converged, diverged, left_with = torch.stack(
            [self.alive.long(), self.epochs, self.converged.long(), self.diverged, self.left_with]
        ).tolist()
        for s, t in enumerate(self.trial):
            if self.real[s] and not self.written[s] and not alive[s]:
                flat = self.kept if left_with[s] == KEPT else self.flats[left_with[s]]
                assert flat is not None  # a slot booked as KEPT was copied into kept
                self.out[t].update(
                    params={
                        k: w.reshape(shape).clone()
                        for k, shape, w in zip(self.names, self.shapes, flat[s].split(self.sizes), strict=True)
                    },
                    epochs=epochs[s],
                    converged=bool(converged[s]),
                    diverged_epoch=None if diverged[s] < 0 else diverged[s],
                )
                self.written[s] = True
        self.forget()
        return [s for s in range(len(alive)) if alive[s]]

    def forget(self) -> None:
        """Drop the window's weights (after a read, or when the window is run again)."""
        self.flats, self.kept = [], None
        self.left_with.fill_(-1)

    def compact(self, keep: list[int]) -> SlotBook:
        """Compact the pack to the alive slots ``keep`` (:meth:`StackedPack.compact`) and
        return the book of the compacted pack."""
        old = self.pack.compact(keep)
        return SlotBook(self.pack, self.out, self.epochs[torch.tensor(old, device=self.pack.dev)], len(self.ring) - 2)


class Snapshot:
    """A pack's weights, optimiser state, book and minibatch generators at a read, to run the
    epochs after it again (module docstring). Copies on the device; nothing is read.

    Args:
        epoch: the epoch the loop goes on from.
        flat: the pack's weights now (:meth:`SlotBook.flatten`), kept by reference: the loop
            makes a new one each epoch and never writes it.
    """

    def __init__(
        self, epoch: int, pack: StackedPack, book: SlotBook, gens: list[torch.Generator] | None, flat: torch.Tensor
    ):
        self.epoch, self.pack, self.flat = epoch, pack, flat
        self.state = {id(p): {n: t.clone() for n, t in s.items()} for p, s in pack.opt.state.items()}
        self.book = (book.alive.clone(), book.epochs.clone(), book.converged.clone(), book.diverged.clone())
        self.gens = None if gens is None else [g.get_state() for g in gens]

    @torch.no_grad()
    def restore(self, book: SlotBook, gens: list[torch.Generator] | None) -> int:
        """Put the pack, ``book`` and ``gens`` back as they were; returns the epoch to go on from."""
        pieces = self.flat.split(book.sizes, 1)
        for k, shape, w in zip(book.names, book.shapes, pieces, strict=True):
            self.pack.params[k].copy_(w.reshape(self.pack.slots, *shape))
        for p in self.pack.opt.params:
            saved = self.state.get(id(p))
            if saved is None:
                self.pack.opt.state.pop(p, None)
            else:
                self.pack.opt.state[p] = {n: t.clone() for n, t in saved.items()}
        book.alive, book.epochs, book.converged, book.diverged = (t.clone() for t in self.book)
        book.beyond = torch.zeros((), dtype=torch.bool, device=self.pack.dev)
        book.forget()
        if gens is not None and self.gens is not None:
            for g, state in zip(gens, self.gens, strict=True):
                g.set_state(state)
        return self.epoch


def note_curves(curves: list[Curve | None] | None, trial_of_slot: list[int], noted: list[tuple]) -> None:
    """Note the learning-curve measurements kept on the device since the last read, in one copy,
    and forget them: ``noted`` holds per epoch ``(epoch, alive, loss, acc, error)``, each a
    ``(slots,)`` tensor (``acc`` or ``error`` None where the experiment has none;
    :func:`workers.curves.note_slots`)."""
    if curves is None or not noted:
        return
    rows = [
        [a.double(), loss.double()] + [t.double() for t in (acc, err) if t is not None]
        for _, a, loss, acc, err in noted
    ]
    values = torch.stack([torch.stack(r) for r in rows]).tolist()
    for (epoch, _, _, acc, err), (alive, loss, *rest) in zip(noted, values, strict=True):
        more = iter(rest)
        note_slots(
            curves,
            trial_of_slot,
            [bool(a) for a in alive],
            epoch,
            loss,
            None if acc is None else next(more),
            None if err is None else next(more),
        )
    noted.clear()
