"""Training a pack of symmetry trials together, stacked (workers/stacked.py): every student of
workers/students.py under ``vmap``.

Each trial follows the rule of :func:`workers.train_symmetry.train_alone` step for step:
full-batch AdamW on the mean squared error; before each step it stops when its relative
training error is not finite (diverged) or below ``FIT_ERROR`` (fit); after it, when its weights
explode. An augmented trial draws a fresh Haar rotation per sample and step from its own
generator. A trial that stops leaves with its weights of that moment and is scored alone.
"""

from __future__ import annotations

import math

import torch

from attnsweep import tasks
from attnsweep.workers.config import SymmetryTrialConfig
from attnsweep.workers.curves import Curve
from attnsweep.workers.pack import EXPLODED_WEIGHT, autocast
from attnsweep.workers.slot_book import MAX_EVERY, READ_EVERY, SlotBook, note_curves
from attnsweep.workers.stacked import StackedPack, follow, reproducible, slot_count


def fit_stacked(
    configs: list[SymmetryTrialConfig],
    models: list[torch.nn.Module],
    X: torch.Tensor,
    K: torch.Tensor,
    Y: torch.Tensor,
    fit_error: float,
    dev: torch.device,
    curves: list[Curve | None] | None = None,
    every: int = READ_EVERY,
) -> list[dict]:
    """Train the trials together from their initialised ``models``; the host reads the pack's
    state every ``every`` epochs and at the end, never inside an epoch (workers/slot_book.py),
    and a trial's results do not depend on ``every``.

    Args:
        configs: the trials (one shape key).
        models: each trial's initialised student.
        X, K, Y: ``(trials, m, n, d)``, ``(trials, m, k, d)``, ``(trials, m, n, d)`` training sets.
        fit_error: relative training error below which a trial has fit its data.
        curves: per trial, its learning curve to note (workers/curves.py), or None.
        every: epochs between two host reads (1 to :data:`workers.slot_book.MAX_EVERY`; clipped).

    Returns:
        Per trial: ``params`` (its weights when it stopped), ``epochs``, ``converged``,
        ``diverged_epoch``.
    """
    with reproducible(dev):
        return _fit(configs, models, X, K, Y, fit_error, dev, curves, max(1, min(every, MAX_EVERY)))


def _fit(configs, models, X, K, Y, fit_error, dev, curves=None, every=READ_EVERY) -> list[dict]:
    cfg = configs[0]
    names = {k for k, _ in models[0].named_parameters()}
    pack = StackedPack(models, names, cfg.lr, cfg.weight_decay, dev)
    out = [dict(params=None, epochs=0, converged=False, diverged_epoch=None) for _ in configs]
    faulty = [c.fault == "nan" for c in configs]
    y_norm = Y.pow(2).sum((1, 2, 3))  # (trials,)
    scale = cfg.m * cfg.n * cfg.d
    augment = cfg.equivariance == "augment"
    book = SlotBook(pack, out, every=every)
    # One generator per slot, padding included (a padding slot never draws from its trial's).
    gens = (
        [tasks.generator(tasks.derive_seed("augment", configs[t].seed), dev) for t in book.trial] if augment else None
    )

    def window() -> tuple[torch.Tensor, ...]:  # changes only at a read (compaction)
        t = pack.trial.to(dev)
        return t, X[t], K[t], Y[t]

    slot_trial, xs, ks, ys = window()
    noted: list[tuple] = []  # learning-curve measurements on the device since the last read
    exploded: torch.Tensor | None = None  # slots whose weights exploded in the last epoch, not yet booked
    flat = book.flatten()  # the weights as the last explosion test saw them (workers/slot_book.py)
    epoch = 0
    while epoch < cfg.max_epochs:
        gone = (exploded if exploded is not None else torch.zeros_like(book.alive), epoch - 1, False)
        xb, kb, yb = xs, ks, ys
        if augment:
            Q = rotations(cfg.d, cfg.m, gens, X.dtype).to(dev)  # (slots, m, d, d)
            Qt = Q.transpose(-1, -2)
            xb, kb, yb = xb @ Qt, kb @ Qt, yb @ Qt
        with autocast(dev, cfg.precision):
            pred = pack.call(xb, kb).float()  # (slots, m, n, d)
        sq = (pred - yb).pow(2).sum((1, 2, 3))  # (slots,)
        rel = sq.detach() / y_norm[slot_trial]
        if curves is not None:
            noted.append((epoch, book.alive & ~gone[0], sq.detach() / scale, None, rel))
        book.leave(gone, (~torch.isfinite(rel), epoch, False), (rel < fit_error, None, True), flat=flat)
        book.count_epoch()
        pack.step(sq / scale)
        if epoch == 0 and any(faulty):
            with torch.no_grad():
                hit = torch.tensor([faulty[t] for t in book.trial], device=dev)
                for v in pack.params.values():
                    v[hit] = math.nan
        flat = book.flatten()
        exploded = ~(book.largest(flat) <= EXPLODED_WEIGHT)
        epoch += 1
        if epoch % every and epoch < cfg.max_epochs:
            continue
        # The read: nothing above it reads the device.
        end = [(book.alive, None, False)] if epoch == cfg.max_epochs else []  # out of epochs
        book.leave((exploded, epoch - 1, False), *end, flat=flat)
        exploded = None
        note_curves(curves, book.trial, noted)
        keep = book.read()
        if not keep:
            break
        if slot_count(len(keep), dev) < pack.slots:  # a lane group's worth has left: drop it
            book = book.compact(keep)
            flat = book.flatten()
            slot_trial, xs, ks, ys = window()
            if gens is not None:
                gens = follow(gens, keep, pack.slots)
    return out


def rotations(d: int, m: int, gens: list[torch.Generator], dtype: torch.dtype) -> torch.Tensor:
    """A Haar rotation per sample from each slot's generator: ``(slots, m, d, d)`` of ``dtype``;
    slot s's are what :func:`workers.equivariance.haar_orthogonal` gives from ``gens[s]``
    (the Gaussians drawn per slot, the QR and sign fix for all at once: per matrix either way)."""
    Z = torch.stack([torch.randn((m, d, d), generator=g, dtype=torch.float64, device=g.device) for g in gens])
    Q, R = torch.linalg.qr(Z)
    signs = torch.where(torch.diagonal(R, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(Q.dtype)
    return (Q * signs[..., None, :]).to(dtype)
