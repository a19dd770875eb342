"""Training a pack of sparse-Boolean trials together, stacked (workers/stacked.py): the CLS
transformer at any depth (through its general forward) and the MLP.

Each trial follows the rule of :func:`workers.train_boolean._fit` step for step: full-batch, it stops
before a step when its stop rule is met (by default: it classifies every training sample right;
:func:`workers.train_boolean.stop_rule`) or its loss is not finite
(diverged), counts the epoch, is projected onto its norm ball, and stops when its weights
explode; with minibatches it checks its fit on the whole set at the start of each epoch and
shuffles with its own generator. A trial that stops leaves with its weights of that moment.
When all have stopped, the pack is scored together (:func:`score_stacked`): the same measures
as a lone trial's (:func:`workers.train_boolean.score`) on the same samples, from the stacked
forward, each trial's still a function of its own weights and samples only.
"""

from __future__ import annotations

import math

import torch
from torch.func import functional_call, vmap

from attnsweep import tasks
from attnsweep.workers.boolean_models import model_norms, plus_minus_one
from attnsweep.workers.boolean_models import project as project_onto
from attnsweep.workers.builtin_models import model_of, uses_one_layer_step
from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.curves import Curve
from attnsweep.workers.margins import signed_margin
from attnsweep.workers.models import logistic_loss, score_range_safe
from attnsweep.workers.one_layer_stacked import loss_and_grads_stacked
from attnsweep.workers.pack import EXPLODED_WEIGHT, autocast
from attnsweep.workers.slot_book import MAX_EVERY, READ_EVERY, SlotBook, Snapshot, note_curves
from attnsweep.workers.stacked import StackedPack, follow, group_slots, reproducible, slot_count


def fit_stacked(
    configs: list[BooleanTrialConfig],
    models: list[torch.nn.Module],
    trained: set[str],
    x: torch.Tensor,
    y: torch.Tensor,
    chunk: int,
    dev: torch.device,
    curves: list[Curve | None] | None = None,
    every: int = READ_EVERY,
) -> list[dict]:
    """Train the trials together from their initialised ``models`` on their training sets.

    Nothing is read back to the host inside an epoch: the stop rules, divergence and exploded
    weights are tested on the device and booked there (workers/slot_book.py), and the host reads
    the book every ``every`` epochs and at the end. A trial's results do not depend on ``every``.

    Args:
        configs: the trials (one shape key).
        models: each trial's initialised model.
        trained: the names of the parameters that train.
        x: ``(trials, m, T)`` uint8 bits; y: ``(trials, m)`` float32 labels.
        chunk: samples per slot per chunk when the whole training set is scored (minibatch
            training checks its fit every epoch): :func:`workers.train_boolean.eval_chunk`.
        curves: per trial, its learning curve to note (workers/curves.py), or None: the
            loss and accuracy the loop measures before each epoch's step, kept on the device
            and noted at each read, only when some curve is kept.
        every: epochs between two host reads (1 to :data:`workers.slot_book.MAX_EVERY`; clipped).

    Returns:
        Per trial: ``params`` (its weights when it stopped, by name), ``epochs``, ``converged``,
        ``diverged_epoch``.
    """
    with reproducible(dev):
        return _fit(configs, models, trained, x, y, chunk, dev, curves, max(1, min(every, MAX_EVERY)))


def _fit(configs, models, trained, x, y, chunk, dev, curves=None, every=READ_EVERY) -> list[dict]:
    cfg = configs[0]
    pack = StackedPack(models, trained, cfg.lr, cfg.weight_decay, dev)
    out = [dict(params=None, epochs=0, converged=False, diverged_epoch=None) for _ in configs]
    limits = [c.norm_bound or math.inf for c in configs]
    bounds, bounded = torch.tensor(limits, device=dev), any(math.isfinite(b) for b in limits)
    faulty = [c.fault == "nan" for c in configs]
    spec = model_of(cfg.model)
    inputs = spec.paths.stacked_inputs(x) if spec.paths is not None else x.float()  # (trials, m, T)
    bs = cfg.batch_size if cfg.batch_size and cfg.batch_size < cfg.m else None
    book = SlotBook(pack, out, every=every)
    # One generator per slot, padding included, so that a padding slot never draws from its trial's.
    gens = [tasks.generator(tasks.derive_seed("batches", configs[t].seed), dev) for t in book.trial] if bs else None
    hand = _hand(cfg)
    if hand:
        inputs = x.float()

    def forward(xs: torch.Tensor) -> torch.Tensor:
        with autocast(dev, cfg.precision):
            return slot_logits(pack, cfg, xs)

    def step(xs: torch.Tensor, ys: torch.Tensor, alive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict | None]:
        if not hand:
            logits = forward(xs)
            return logistic_loss(logits, ys), logits, None
        if careful:
            return hand_step(pack, cfg.heads, xs, ys, alive=alive)
        return hand_step(pack, cfg.heads, xs, ys, alive=alive, beyond=book.beyond)

    def project() -> None:
        if bounded:
            with torch.no_grad():
                project_onto(spec, pack.params, bounds[slot_trial], cfg)

    def window() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # changes only at a read (compaction)
        t = pack.trial.to(dev)
        return t, inputs[t], y[t]  # (slots,), (slots, m, T), (slots, m)

    slot_trial, xs, ys = window()
    careful = False  # the one-layer step reads its float32 range each epoch once it was exceeded
    noted: list[tuple] = []  # learning-curve measurements on the device since the last read
    project()
    epoch = 0
    exploded: torch.Tensor | None = None  # slots whose weights exploded in the last epoch, not yet booked
    flat = book.flatten()  # the weights as the last explosion test saw them (workers/slot_book.py)
    snap = Snapshot(0, pack, book, gens, flat) if hand else None
    while epoch < cfg.max_epochs:
        # The weights are those the last epoch's explosion test saw, so the slots it found leave
        # here, first, in the same masked copy as this epoch's (workers/slot_book.py).
        gone = (exploded if exploded is not None else torch.zeros_like(book.alive), epoch - 1, False)
        live = book.alive & ~gone[0]  # the slots still training as this epoch starts
        if bs is None:
            loss, logits, grads = step(xs, ys, live)
            if curves is not None:
                acc = ((logits.detach() > 0).float() == ys).double().mean(-1)  # right / m exactly
                noted.append((epoch, live, loss.detach(), acc, None))
            fit = _stops(pack, cfg, logits.detach(), ys)
            book.leave(gone, (fit, None, True), (~torch.isfinite(loss.detach()), epoch, False), flat=flat)
            pack.step(grads=grads) if grads is not None else pack.step(loss)
        else:
            with torch.no_grad():
                fit, measured = _fits(forward, xs, ys, chunk, measure=curves is not None, rule=(pack, cfg))
            if measured is not None:
                noted.append((epoch, live, *measured, None))
            book.leave(gone, (fit, None, True), flat=flat)
            order = torch.stack([torch.randperm(cfg.m, generator=g, device=dev) for g in gens])  # (slots, m)
            for start in range(0, cfg.m, bs):
                idx = order[:, start : start + bs]
                xb, yb = torch.gather(xs, 1, idx[..., None].expand(-1, -1, xs.shape[-1])), torch.gather(ys, 1, idx)
                loss, _, grads = step(xb, yb, book.alive)
                book.leave((~torch.isfinite(loss.detach()), epoch, False))
                pack.step(grads=grads) if grads is not None else pack.step(loss)
        book.count_epoch()
        project()
        if epoch == 0 and any(faulty):
            with torch.no_grad():
                hit = torch.tensor([faulty[t] for t in book.trial], device=dev)
                for k in trained:
                    pack.params[k][hit] = math.nan
        flat = book.flatten()
        exploded = ~(book.largest(flat) <= EXPLODED_WEIGHT)
        epoch += 1
        if epoch % every and epoch < cfg.max_epochs and not careful:
            continue
        # The read: nothing above it reads the device.
        if snap is not None and not careful and book.exceeded():
            epoch, careful, exploded = snap.restore(book, gens), True, None
            flat = book.flatten()
            noted.clear()
            continue
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
            slot_trial, xs, ys = window()
            if gens is not None:
                gens = follow(gens, keep, pack.slots)
        if snap is not None and not careful:
            snap = Snapshot(epoch, pack, book, gens, flat)
    return out


def _stops(pack: StackedPack, cfg: BooleanTrialConfig, logits: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """``(slots,)`` bool on the pack's device: whether each slot's stop rule (``cfg.stop``, one
    per pack) is met by its logits ``(slots, m)`` of its whole training set ``ys`` ``(slots, m)``:
    the per-slot form of :func:`workers.train_boolean.stop_rule`. Nothing is read to the host:
    under the margin rule every slot's complexity is computed, fitted or not."""
    if cfg.stop == "budget":
        return torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    fit = ((logits > 0).float() == ys).all(-1)
    if cfg.stop == "margin":
        with torch.no_grad():
            measures = model_norms(model_of(cfg.model), pack.params, cfg)
            if "complexity" not in measures:
                raise ValueError(f"stop 'margin' needs a complexity term: model {cfg.model!r}'s norms give none")
            c = measures["complexity"]
            fit &= signed_margin(logits.double(), ys) / c.double() >= (cfg.margin_target or math.inf)
    return fit


def _hand(cfg: BooleanTrialConfig) -> bool:
    """Whether the trials take the hand-written one-layer step (workers/one_layer_stacked.py)."""
    return uses_one_layer_step(cfg)


def slot_logits(pack: StackedPack, cfg: BooleanTrialConfig, xs: torch.Tensor) -> torch.Tensor:
    """Every slot's logits ``(slots, b)`` float32 on its samples ``xs`` ``(slots, b, T)`` (bits,
    uint8 or as 0.0/1.0 floats), for any model but the hand-written step's: a built-in's own
    stacked forward (workers/boolean_models.py: the transformer through its general or table
    form, the MLP written out), a package's model under ``vmap`` over ``functional_call`` on
    the bits as +-1 float32."""
    paths = model_of(cfg.model).paths
    if paths is not None:
        return paths.stacked_logits(pack, cfg, xs)
    return pack.call(plus_minus_one(xs)).float()


def score_stacked(
    configs: list[BooleanTrialConfig],
    models: list[torch.nn.Module],
    trained: set[str],
    x: torch.Tensor,
    y: torch.Tensor,
    support: torch.Tensor,
    chunk: int,
    dev: torch.device,
) -> list[tuple[float, float, float, float] | BaseException]:
    """Score trained trials together: each one's mean logistic loss and accuracy on its own
    training set and on its own fresh test samples (:func:`tasks.test_chunks`, the samples a
    lone trial is scored on), from the stacked forward, lane group by lane group.

    What a trial gets depends on its own weights and samples only, as in training (module
    docstring of workers/stacked.py): every group is padded to its device's slot count
    (:func:`workers.stacked.group_slots`), and each slot's samples are cut into chunks of a size
    set by the trials' settings (``chunk`` over the group's slots, so a group holds what one
    trial's chunk holds). The forward is the one training took, in float32 whatever the training
    precision (as a lone trial is scored); the hand-written step's slots whose scores pass the
    float32 range are scored in float64, and past that through the table form
    (:func:`hand_step`). A group whose scoring raises is scored again trial by trial, so an
    error reaches the row of the trial that causes it only.

    Args:
        configs: the trials (one shape key), none diverged (their weights score nothing).
        models: each trial's model, holding its trained weights.
        trained: the names of the parameters that trained.
        x, y, support: ``(trials, m, T)`` uint8 bits, ``(trials, m)`` float32 labels,
            ``(trials, s)`` int64 relevant positions.
        chunk: samples per chunk of one trial scored alone
            (:func:`workers.train_boolean.eval_chunk`).

    Returns:
        Per trial, ``(train_loss, train_acc, test_loss, test_acc, margin)`` (accuracies right /
        n exactly; margin: min over the training set of y f(x), y = +-1, workers/margins.py),
        or the exception its scoring raised.
    """
    if not configs:
        return []
    size = group_slots(dev)
    chunk = max(1, chunk // size)
    out: list = [None] * len(configs)
    with reproducible(dev), torch.no_grad():
        for start in range(0, len(configs), size):
            group = list(range(start, min(start + size, len(configs))))
            try:
                _score_group(configs, models, trained, x, y, support, group, chunk, dev, out)
            except Exception:  # noqa: BLE001 - retried alone below, so the error finds its trial
                for j in group:
                    try:
                        _score_group(configs, models, trained, x, y, support, [j], chunk, dev, out)
                    except Exception as exc:  # noqa: BLE001 - the trial's row carries it
                        out[j] = exc
    return out


def _score_group(configs, models, trained, x, y, support, group, chunk, dev, out) -> None:
    cfg = configs[0]
    pack = StackedPack([models[j] for j in group], trained, cfg.lr, cfg.weight_decay, dev)
    pick = torch.tensor(group)[pack.trial]  # (slots,) the trial of each slot
    hand = _hand(cfg)

    def measure(xs: torch.Tensor, ys: torch.Tensor, sums: list[list[float]], least: list[float] | None = None) -> None:
        for i in range(0, xs.shape[1], chunk):
            xc, yc = xs[:, i : i + chunk], ys[:, i : i + chunk]
            if hand:
                _, logits, _ = hand_step(pack, cfg.heads, xc.float(), yc, backward=False)
            else:
                logits = slot_logits(pack, cfg, xc)
            loss = logistic_loss(logits, yc).tolist()  # (slots,) means over the chunk
            right = ((logits > 0).float() == yc).double().sum(-1).tolist()
            if least is not None:
                part = signed_margin(logits.double(), yc).tolist()
                least[:] = [min(a, b) for a, b in zip(least, part)]
            for s in range(len(group)):
                sums[s][0] += loss[s] * yc.shape[1]
                sums[s][1] += right[s]
                sums[s][2] += yc.shape[1]

    train = [[0.0, 0.0, 0] for _ in group]
    margins = [math.inf] * pack.slots
    measure(x[pick], y[pick], train, margins)
    test = [[0.0, 0.0, 0] for _ in group]
    seeds = [configs[j].seed for j in group]
    for xt, yt in tasks.test_chunks(cfg.task, cfg.T, cfg.s, seeds, support[group], cfg.n_test, chunk, dev):
        measure(xt[pack.trial], yt[pack.trial], test)
    for s, j in enumerate(group):
        (a, b, n), (c, e, k) = train[s], test[s]
        out[j] = (a / n, b / n, c / k, e / k, margins[s])


def _fits(
    forward, xs: torch.Tensor, ys: torch.Tensor, chunk: int, measure: bool = False, rule=None
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """``(slots,)`` bool on the device: whether each slot's stop rule is met on its samples
    (``rule``: the pack and config :func:`_stops` reads; None: whether it classifies them all
    right), in chunks of ``chunk`` samples per slot (a function of the trial's settings only);
    with ``measure`` also each slot's mean logistic loss and accuracy over its samples from the
    same logits (``(slots,)`` each, on the device, for a learning curve), else None."""
    ok = torch.ones(xs.shape[0], dtype=torch.bool, device=xs.device)
    loss_sum = right_sum = None
    kept = []
    for i in range(0, xs.shape[1], chunk):
        logits = forward(xs[:, i : i + chunk])
        right = (logits > 0).float() == ys[:, i : i + chunk]
        ok &= right.all(-1)
        if rule is not None and rule[1].stop == "margin":
            kept.append(logits)
        if measure:  # sums over chunks, as workers.train_boolean._evaluate sums a trial's
            part = logistic_loss(logits, ys[:, i : i + chunk]) * right.shape[1]
            loss_sum = part if loss_sum is None else loss_sum + part
            count = right.double().sum(-1)  # exact: right / m is the row's accuracy, not float32's
            right_sum = count if right_sum is None else right_sum + count
    if kept and rule is not None:
        ok = _stops(rule[0], rule[1], torch.cat(kept, 1), ys)
    elif rule is not None and rule[1].stop == "budget":
        ok = torch.zeros_like(ok)
    if loss_sum is None or right_sum is None:
        return ok, None
    m = xs.shape[1]
    return ok, (loss_sum / m, right_sum / m)


SAFE32, SAFE64 = score_range_safe(torch.float32), score_range_safe(torch.float64)


def hand_step(
    pack: StackedPack,
    heads: int,
    x: torch.Tensor,
    y: torch.Tensor,
    backward: bool = True,
    alive: torch.Tensor | None = None,
    beyond: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Each slot's mean logistic loss ``(slots,)``, logits ``(slots, b)`` and gradients from the
    hand-written one-layer step (workers/one_layer_stacked.py) on samples ``x`` ``(slots, b, T)``
    (0.0/1.0 float32), ``y`` ``(slots, b)``.

    A slot of ``alive`` (``(slots,)`` bool; None: ``pack.active``) whose score range is beyond the
    float32 form (:func:`workers.models.score_range_safe`, 60) takes the same form in float64
    (safe to 489), and beyond that the exact table form through autograd, as
    :meth:`workers.train_boolean._Trial.step` does alone. Those slots are computed again in a pack
    of their own, padded as a pack is (:func:`workers.stacked.slot_count`), so what they get
    depends on themselves only. Finding them reads the device; with ``beyond`` (a 0-d bool
    tensor on the device) nothing is read: whether any slot was beyond is or-ed into it and every
    slot keeps the float32 form's numbers, which the caller must then compute again
    (workers/slot_book.py). With ``backward`` False (scoring) no gradient is computed and
    ``grads`` is empty."""
    p = {k: v.detach() for k, v in {**pack.params, **pack.buffers}.items()}
    loss, logits, grads, score_range = loss_and_grads_stacked(p, heads, x, y, backward)
    over = ~(score_range <= SAFE32) & (pack.active.to(score_range.device) if alive is None else alive)
    if beyond is not None:
        beyond |= over.any()
        return loss, logits, grads
    wide = torch.nonzero(over).flatten().tolist()
    if not wide:
        return loss, logits, grads
    sub = _padded(wide, pack.dev)
    p64 = {k: v[sub].double() for k, v in p.items()}
    l64, z64, g64, r64 = loss_and_grads_stacked(p64, heads, x[sub].double(), y[sub].double(), backward)
    table = [s for i, s in enumerate(wide) if not bool(r64[i] <= SAFE64)]
    for i, s in enumerate(wide):
        loss[s], logits[s] = l64[i].float(), z64[i].float()
        for k in grads:
            grads[k][s] = g64[k][i].to(grads[k].dtype)
    if table:
        sub = _padded(table, pack.dev)
        lt, zt, gt = table_step(
            {k: v[sub] for k, v in pack.params.items()},
            {k: v[sub] for k, v in pack.buffers.items()},
            pack.base,
            x[sub],
            y[sub],
            backward,
        )
        for i, s in enumerate(table):
            loss[s], logits[s] = lt[i], zt[i]
            for k in gt:
                grads[k][s] = gt[k][i]
    return loss, logits, grads


def _padded(slots: list[int], dev: torch.device) -> torch.Tensor:
    """``slots`` padded with copies of the first to a pack's slot count on ``dev`` (workers/stacked.py)."""
    return torch.tensor(slots + [slots[0]] * (slot_count(len(slots), dev) - len(slots)))


def table_step(
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    base: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    backward: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Loss ``(slots,)``, logits and gradients of stacked one-layer models through
    :meth:`workers.models.CLSTransformer.forward_table` (exact for any weights) and autograd;
    with ``backward`` False, no gradients (an empty dict)."""
    leaves = {k: v.detach().requires_grad_(backward) for k, v in params.items()}
    with torch.set_grad_enabled(backward):
        logits = vmap(lambda p, b, xs: functional_call(base, (p, b), (xs,), dict(path="table")))(leaves, buffers, x)
        loss = logistic_loss(logits, y)
        if not backward:
            return loss, logits, {}
        grads = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
    return loss.detach(), logits.detach(), {k: g for k, g in zip(leaves, grads) if g is not None}
