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
from attnsweep.workers.curves import Curve, note_slots
from attnsweep.workers.pack import EXPLODED_WEIGHT, autocast
from attnsweep.workers.stacked import StackedPack, follow, per_slot_max_abs, reproducible, slot_count


def fit_stacked(
    configs: list[SymmetryTrialConfig],
    models: list[torch.nn.Module],
    X: torch.Tensor,
    K: torch.Tensor,
    Y: torch.Tensor,
    fit_error: float,
    dev: torch.device,
    curves: list[Curve | None] | None = None,
) -> list[dict]:
    """Train the trials together from their initialised ``models``.

    Args:
        configs: the trials (one shape key).
        models: each trial's initialised student.
        X, K, Y: ``(trials, m, n, d)``, ``(trials, m, k, d)``, ``(trials, m, n, d)`` training sets.
        fit_error: relative training error below which a trial has fit its data.
        curves: per trial, its learning curve to note (workers/curves.py), or None.

    Returns:
        Per trial: ``params`` (its weights when it stopped), ``epochs``, ``converged``,
        ``diverged_epoch``.
    """
    with reproducible(dev):
        return _fit(configs, models, X, K, Y, fit_error, dev, curves)


def _fit(configs, models, X, K, Y, fit_error, dev, curves=None) -> list[dict]:
    cfg = configs[0]
    names = {k for k, _ in models[0].named_parameters()}
    pack = StackedPack(models, names, cfg.lr, cfg.weight_decay, dev)
    out = [dict(params=None, epochs=0, converged=False, diverged_epoch=None) for _ in configs]
    nan_fault = torch.tensor([c.fault == "nan" for c in configs])
    y_norm = Y.pow(2).sum((1, 2, 3))  # (trials,)
    scale = cfg.m * cfg.n * cfg.d
    augment = cfg.equivariance == "augment"
    # One generator per slot, padding included (a padding slot never draws from its trial's).
    gens = (
        [tasks.generator(tasks.derive_seed("augment", configs[int(t)].seed), dev) for t in pack.trial]
        if augment
        else None
    )

    def leave(slot: int, **fields) -> None:
        t = int(pack.trial[slot])
        out[t].update(params=pack.slot_params(slot), **fields)
        pack.active[slot] = False

    for epoch in range(cfg.max_epochs):
        xb, kb, yb = X[pack.trial], K[pack.trial], Y[pack.trial]
        if augment:
            Q = rotations(cfg.d, cfg.m, gens, X.dtype).to(dev)  # (slots, m, d, d)
            Qt = Q.transpose(-1, -2)
            xb, kb, yb = xb @ Qt, kb @ Qt, yb @ Qt
        with autocast(dev, cfg.precision):
            pred = pack.call(xb, kb).float()  # (slots, m, n, d)
        sq = (pred - yb).pow(2).sum((1, 2, 3))  # (slots,)
        rel = (sq.detach() / y_norm[pack.trial]).cpu()
        if curves is not None:
            loss = (sq.detach() / scale).tolist()
            note_slots(curves, pack.trial.tolist(), pack.active.tolist(), epoch, loss, None, rel.tolist())
        for s in torch.nonzero(pack.active & ~torch.isfinite(rel)).flatten().tolist():
            leave(s, diverged_epoch=epoch)
        for s in torch.nonzero(pack.active & (rel < fit_error)).flatten().tolist():
            leave(s, converged=True)
        if not pack.active.any():
            break
        for s in torch.nonzero(pack.active).flatten().tolist():
            out[int(pack.trial[s])]["epochs"] += 1
        pack.step(sq / scale)
        if epoch == 0 and bool(nan_fault.any()):
            with torch.no_grad():
                hit = nan_fault[pack.trial].to(dev)
                for v in pack.params.values():
                    v[hit] = math.nan
        big = per_slot_max_abs(pack.params).cpu()
        for s in torch.nonzero(pack.active & ~(big <= EXPLODED_WEIGHT)).flatten().tolist():
            leave(s, diverged_epoch=epoch)
        keep = torch.nonzero(pack.active).flatten().tolist()
        if not keep:
            break
        if slot_count(len(keep), dev) < pack.slots:  # a lane group's worth has left: drop it
            pack.compact(keep)
            if gens is not None:
                gens = follow(gens, keep, pack.slots)
    for s in torch.nonzero(pack.active).flatten().tolist():  # out of epochs
        leave(s)
    return out


def rotations(d: int, m: int, gens: list[torch.Generator], dtype: torch.dtype) -> torch.Tensor:
    """A Haar rotation per sample from each slot's generator: ``(slots, m, d, d)`` of ``dtype``;
    slot s's are what :func:`workers.equivariance.haar_orthogonal` gives from ``gens[s]``
    (the Gaussians drawn per slot, the QR and sign fix for all at once: per matrix either way)."""
    Z = torch.stack([torch.randn((m, d, d), generator=g, dtype=torch.float64, device=g.device) for g in gens])
    Q, R = torch.linalg.qr(Z)
    signs = torch.where(torch.diagonal(R, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(Q.dtype)
    return (Q * signs[..., None, :]).to(dtype)
