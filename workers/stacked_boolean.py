"""Training a pack of sparse-Boolean trials together, stacked (workers/stacked.py): the CLS
transformer at any depth (through its general forward) and the MLP.

Each trial follows the rule of :func:`workers.train_boolean._fit` step for step: full-batch, it stops
before a step when it classifies every training sample right (fit) or its loss is not finite
(diverged), counts the epoch, is projected onto its norm ball, and stops when its weights
explode; with minibatches it checks its fit on the whole set at the start of each epoch and
shuffles with its own generator. A trial that stops leaves with its weights of that moment,
and is scored alone (:func:`workers.train_boolean.score`).
"""

from __future__ import annotations

import math

import torch
from torch.func import functional_call, vmap

from attnsweep import tasks
from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.curves import Curve, note_slots
from attnsweep.workers.models import logistic_loss, score_range_safe
from attnsweep.workers.norms import project_mlp, project_transformer
from attnsweep.workers.one_layer_stacked import loss_and_grads_stacked
from attnsweep.workers.pack import EXPLODED_WEIGHT, autocast
from attnsweep.workers.stacked import StackedPack, follow, one_thread, per_slot_max_abs, slot_count


def fit_stacked(
    configs: list[BooleanTrialConfig],
    models: list[torch.nn.Module],
    trained: set[str],
    x: torch.Tensor,
    y: torch.Tensor,
    chunk: int,
    dev: torch.device,
    curves: list[Curve | None] | None = None,
) -> list[dict]:
    """Train the trials together from their initialised ``models`` on their training sets.

    Args:
        configs: the trials (one shape key).
        models: each trial's initialised model.
        trained: the names of the parameters that train.
        x: ``(trials, m, T)`` uint8 bits; y: ``(trials, m)`` float32 labels.
        chunk: samples per slot per chunk when the whole training set is scored (minibatch
            training checks its fit every epoch): :func:`workers.train_boolean.eval_chunk`.
        curves: per trial, its learning curve to note (workers/curves.py), or None: the
            loss and accuracy the loop measures before each epoch's step, read from the
            device only when some curve is kept.

    Returns:
        Per trial: ``params`` (its weights when it stopped, by name), ``epochs``, ``converged``,
        ``diverged_epoch``.
    """
    with one_thread(dev):
        return _fit(configs, models, trained, x, y, chunk, dev, curves)


def _fit(configs, models, trained, x, y, chunk, dev, curves=None) -> list[dict]:
    cfg = configs[0]
    pack = StackedPack(models, trained, cfg.lr, cfg.weight_decay, dev)
    n = len(configs)
    out = [dict(params=None, epochs=0, converged=False, diverged_epoch=None) for _ in range(n)]
    bounds = torch.tensor([c.norm_bound or math.inf for c in configs], device=dev)
    nan_fault = torch.tensor([c.fault == "nan" for c in configs])
    inputs = x if cfg.model == "transformer" else x.float()  # (trials, m, T)
    bs = cfg.batch_size if cfg.batch_size and cfg.batch_size < cfg.m else None
    # One generator per slot, padding included, so that a padding slot never draws from its trial's.
    gens = (
        [tasks.generator(tasks.derive_seed("batches", configs[int(t)].seed), dev) for t in pack.trial] if bs else None
    )
    # Any depth through the general forward; one layer through the exact table form (O(m T H),
    # no data-dependent branch), and in float32 through the hand-written step.
    kwargs = dict(path="table" if cfg.layers == 1 else "general") if cfg.model == "transformer" else {}
    hand = cfg.model == "transformer" and cfg.layers == 1 and cfg.precision == "float32"
    if hand:
        inputs = x.float()

    def forward(xs: torch.Tensor) -> torch.Tensor:
        with autocast(dev, cfg.precision):
            if cfg.model == "mlp":
                return mlp_logits(pack.params, xs).float()
            return pack.call(xs, **kwargs).float()  # (slots, b)

    def leave(slot: int, **fields) -> None:
        t = int(pack.trial[slot])
        out[t].update(params=pack.slot_params(slot), **fields)
        pack.active[slot] = False

    def project() -> None:
        if bounds.isfinite().any():
            with torch.no_grad():
                b = bounds[pack.trial.to(dev)]
                if cfg.model == "transformer":
                    project_transformer(pack.params, b, cfg.heads, cfg.norm_kind)
                else:
                    project_mlp(pack.params, b, cfg.norm_kind)

    project()
    for epoch in range(cfg.max_epochs):
        xs, ys = inputs[pack.trial], y[pack.trial]  # (slots, m, T), (slots, m)
        if bs is None:
            if hand:
                loss, logits, grads = hand_step(pack, cfg.heads, xs, ys)
            else:
                logits = forward(xs)
                loss = logistic_loss(logits, ys)  # (slots,)
            if curves is not None:
                acc = ((logits.detach() > 0).float() == ys).double().mean(-1)  # right / m exactly
                note_slots(curves, pack.trial.tolist(), pack.active.tolist(), epoch, loss.tolist(), acc.tolist())
            fit = ((logits.detach() > 0).float() == ys).all(-1).cpu()
            finite = torch.isfinite(loss.detach()).cpu()
            for s in torch.nonzero(pack.active & fit).flatten().tolist():
                leave(s, converged=True)
            for s in torch.nonzero(pack.active & ~finite).flatten().tolist():
                leave(s, diverged_epoch=epoch)
            if not pack.active.any():
                break
            pack.step(grads=grads) if hand else pack.step(loss)
        else:
            with torch.no_grad():
                fit, measured = _fits(forward, xs, ys, chunk, measure=curves is not None)
                fit = fit.cpu()
            if measured is not None:
                note_slots(curves, pack.trial.tolist(), pack.active.tolist(), epoch, *measured)
            for s in torch.nonzero(pack.active & fit).flatten().tolist():
                leave(s, converged=True)
            if not pack.active.any():
                break
            order = torch.stack([torch.randperm(cfg.m, generator=g, device=dev) for g in gens])  # (slots, m)
            for start in range(0, cfg.m, bs):
                idx = order[:, start : start + bs]
                xb, yb = (
                    torch.gather(xs, 1, idx[..., None].expand(-1, -1, xs.shape[-1])),
                    torch.gather(ys, 1, idx),
                )
                if hand:
                    loss, _, grads = hand_step(pack, cfg.heads, xb, yb)
                else:
                    loss = logistic_loss(forward(xb), yb)
                finite = torch.isfinite(loss.detach()).cpu()
                for s in torch.nonzero(pack.active & ~finite).flatten().tolist():
                    leave(s, diverged_epoch=epoch)
                if not pack.active.any():
                    break
                pack.step(grads=grads) if hand else pack.step(loss)
            if not pack.active.any():
                break
        for s in torch.nonzero(pack.active).flatten().tolist():
            out[int(pack.trial[s])]["epochs"] += 1
        project()
        if epoch == 0 and bool(nan_fault.any()):
            with torch.no_grad():
                hit = nan_fault[pack.trial].to(dev)
                for k in trained:
                    pack.params[k][hit] = math.nan
        big = per_slot_max_abs({k: pack.params[k] for k in trained}).cpu()
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


def _fits(
    forward, xs: torch.Tensor, ys: torch.Tensor, chunk: int, measure: bool = False
) -> tuple[torch.Tensor, tuple[list[float], list[float]] | None]:
    """``(slots,)`` whether each slot classifies all its samples right, in chunks of ``chunk``
    samples per slot (a function of the trial's settings only); with ``measure`` also each
    slot's mean logistic loss and accuracy over its samples from the same logits (lists over
    the slots, for a learning curve), else None."""
    ok = torch.ones(xs.shape[0], dtype=torch.bool, device=xs.device)
    loss_sum = right_sum = None
    for i in range(0, xs.shape[1], chunk):
        logits = forward(xs[:, i : i + chunk])
        right = (logits > 0).float() == ys[:, i : i + chunk]
        ok &= right.all(-1)
        if measure:  # sums over chunks, as workers.train_boolean._evaluate sums a trial's
            part = logistic_loss(logits, ys[:, i : i + chunk]) * right.shape[1]
            loss_sum = part if loss_sum is None else loss_sum + part
            count = right.double().sum(-1)  # exact: right / m is the row's accuracy, not float32's
            right_sum = count if right_sum is None else right_sum + count
    if loss_sum is None or right_sum is None:
        return ok, None
    m = xs.shape[1]
    return ok, ((loss_sum / m).tolist(), (right_sum / m).tolist())


SAFE32, SAFE64 = score_range_safe(torch.float32), score_range_safe(torch.float64)


def hand_step(
    pack: StackedPack, heads: int, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Each slot's mean logistic loss ``(slots,)``, logits ``(slots, b)`` and gradients from the
    hand-written one-layer step (workers/one_layer_stacked.py) on samples ``x`` ``(slots, b, T)``
    (0.0/1.0 float32), ``y`` ``(slots, b)``.

    A slot whose score range is beyond the float32 form (:func:`workers.models.score_range_safe`,
    60) takes the same form in float64 (safe to 489), and beyond that the exact table form
    through autograd, as :meth:`workers.train_boolean._Trial.step` does alone. Those slots are computed
    again in a pack of their own, padded to a multiple of the lanes, so what they get depends
    on themselves only."""
    p = {k: v.detach() for k, v in {**pack.params, **pack.buffers}.items()}
    loss, logits, grads, score_range = loss_and_grads_stacked(p, heads, x, y)
    wide = torch.nonzero(~(score_range <= SAFE32) & pack.active.to(score_range.device)).flatten().tolist()
    if not wide:
        return loss, logits, grads
    sub = _padded(wide)
    p64 = {k: v[sub].double() for k, v in p.items()}
    l64, z64, g64, r64 = loss_and_grads_stacked(p64, heads, x[sub].double(), y[sub].double())
    table = [s for i, s in enumerate(wide) if not bool(r64[i] <= SAFE64)]
    for i, s in enumerate(wide):
        loss[s], logits[s] = l64[i].float(), z64[i].float()
        for k in grads:
            grads[k][s] = g64[k][i].to(grads[k].dtype)
    if table:
        sub = _padded(table)
        lt, zt, gt = table_step(
            {k: v[sub] for k, v in pack.params.items()},
            {k: v[sub] for k, v in pack.buffers.items()},
            pack.base,
            x[sub],
            y[sub],
        )
        for i, s in enumerate(table):
            loss[s], logits[s] = lt[i], zt[i]
            for k in gt:
                grads[k][s] = gt[k][i]
    return loss, logits, grads


def _padded(slots: list[int]) -> torch.Tensor:
    """``slots`` padded with copies of the first to a multiple of the lanes (workers/stacked.py)."""
    return torch.tensor(slots + [slots[0]] * (slot_count(len(slots)) - len(slots)))


def table_step(
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    base: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Loss ``(slots,)``, logits and gradients of stacked one-layer models through
    :meth:`workers.models.CLSTransformer.forward_table` (exact for any weights) and autograd."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        logits = vmap(lambda p, b, xs: functional_call(base, (p, b), (xs,), dict(path="table")))(leaves, buffers, x)
        loss = logistic_loss(logits, y)
        grads = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
    return loss.detach(), logits.detach(), {k: g for k, g in zip(leaves, grads) if g is not None}


def mlp_logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """:class:`workers.models.MLP` on stacked parameters, written out: bits ``x`` ``(slots, b, T)``
    -> logits ``(slots, b)``. The same function as ``vmap`` of the model, without its per-call
    overhead, which was three quarters of a tiny MLP's step (bench/packing.py)."""
    h = 2.0 * x.float() - 1.0
    layers = sum(1 for k in params if k.startswith("hidden.") and k.endswith(".0.weight"))
    for i in range(layers):
        w, b = (
            params[f"hidden.{i}.0.weight"],
            params[f"hidden.{i}.0.bias"],
        )  # (slots, out, in), (slots, out)
        h = torch.nn.functional.gelu(torch.baddbmm(b[:, None, :], h, w.transpose(1, 2)))
    w, b = params["readout.weight"], params["readout.bias"]
    return torch.baddbmm(b[:, None, :], h, w.transpose(1, 2)).squeeze(-1)
