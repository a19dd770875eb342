"""Training a *pack*: several trials with the same shapes, trained at once with torch.func.

The trials' parameters are stacked (``torch.func.stack_module_state``) and the model is
vmapped over the stack (``functional_call``), so a pack of P trials costs one batched
forward and backward per step instead of P. Trials are independent: the loss is the sum
of per-trial losses, so each trial's gradient is exactly its own, and AdamW is
elementwise, so its state per trial is that trial's own too. A trial that has fit its
training set (train accuracy 1), or whose loss became NaN/inf, stops changing: its
parameters are restored after every later step, and it reports its own epoch count.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Sequence
from collections import defaultdict
from dataclasses import dataclass

import torch

import tasks
from workers.config import BooleanTrialConfig
from workers.models import CLSTransformer, build_model, logistic_loss
from workers.pack import apply_faults, autocast, fail_row, finite_or_none, exploded, inject_nan, masked_step, stack
from workers.status import TrialStatus
from workers.norms import mlp_norms, project_mlp, project_transformer, transformer_norms

# Activation memory allowed for one evaluation chunk (bytes); chunks keep evaluation at
# T in the thousands within a fixed budget.
EVAL_BUDGET_BYTES = 256 * 2**20


def train_pack(configs: Sequence[BooleanTrialConfig], device: str | None = None) -> list[dict]:
    """Train and score every trial of a pack.

    Args:
        configs: trials whose ``shape_key()`` are all equal (they may differ in seed,
            norm bound and fault).
        device: ``"cpu"``, ``"cuda"``, ...; None picks CUDA when available.

    Returns:
        One dict per trial, in order: ``status`` ("done", "failed" or "diverged"),
        ``error_type``, ``error``, ``support`` (list of int), ``redraws``, ``train_acc``,
        ``train_loss``, ``test_acc``, ``test_loss``, ``epochs`` (optimiser epochs run),
        ``converged`` (fit the training set), ``diverged_epoch``, the achieved norms
        (``norm_qk``, ``norm_v``, ``norm_hidden``, ``norm_readout``; None where the model
        has no such matrix), ``wall_s`` (the pack's wall seconds divided by its size),
        ``pack_size``, ``worker_host``, ``device``.

    Raises:
        ValueError: the configs do not share one shape key.
    """
    if not configs:
        return []
    key = configs[0].shape_key()
    if any(c.shape_key() != key for c in configs):
        raise ValueError("all trials of a pack must share shape_key()")
    t0 = time.perf_counter()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = [_empty_row() for _ in configs]
    runnable = apply_faults(configs, rows)
    if runnable:
        _train_runnable([configs[i] for i in runnable], [rows[i] for i in runnable], dev)
    wall = time.perf_counter() - t0
    host = socket.gethostname()
    for row in rows:
        row.update(wall_s=wall / len(configs), pack_size=len(configs), worker_host=host, device=str(dev))
    return rows


def _train_runnable(configs: list[BooleanTrialConfig], rows: list[dict], dev: torch.device) -> None:
    cfg = configs[0]
    batch, ok, errors = tasks.sample_training_sets(
        cfg.task, cfg.T, cfg.s, cfg.m, [c.seed for c in configs],
        reject_ambiguous=cfg.reject_ambiguous, max_redraws=cfg.max_redraws, device=dev,
    )
    for i, exc in errors.items():
        fail_row(rows[i], exc)
    if batch is None:
        return
    configs = [configs[i] for i in ok]
    rows = [rows[i] for i in ok]
    try:
        _fit(configs, rows, batch, dev)
    except Exception as exc:  # noqa: BLE001 - a pack-wide error fails its trials, not the sweep
        for row in rows:
            fail_row(row, exc)


def _fit(configs: list[BooleanTrialConfig], rows: list[dict], batch: tasks.BooleanBatch, dev: torch.device) -> None:
    cfg, P = configs[0], len(configs)
    models = []
    for c in configs:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(tasks.derive_seed("init", c.model, c.T, c.d, c.layers, c.heads, c.mlp_width, c.seed))
            models.append(build_model(c.model, c.T, c.d, c.layers, c.heads, c.mlp_width))
    forward, params, buffers, _ = stack(models, dev)  # forward: (P, n, T) -> (P, n)
    encode = _encoder(cfg)
    live = _Live(
        params=params, buffers=buffers,
        opt=torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=cfg.weight_decay),
        index=torch.arange(P, device=dev),
        bound=torch.tensor([c.norm_bound or math.inf for c in configs], device=dev),
        x=encode(batch.x), y=batch.y,  # (P, m, T) or its one-hot (P, m, 2T), (P, m)
        nan_fault=torch.tensor([c.fault == "nan" for c in configs], device=dev),
        perm_gens=[tasks.generator(tasks.derive_seed("batches", c.seed), dev) for c in configs],
    )
    final = {k: v.detach().clone() for k, v in params.items()}  # every trial's weights at its end
    live.project(cfg)
    epochs = torch.zeros(P, dtype=torch.int64)
    converged = torch.zeros(P, dtype=torch.bool)
    diverged_epoch = [None] * P
    bs = cfg.batch_size if cfg.batch_size and cfg.batch_size < cfg.m else None

    for epoch in range(cfg.max_epochs):
        p, b, x, y = live.params, live.buffers, live.x, live.y
        if bs is None:
            with autocast(dev, cfg.precision):
                logits = forward(p, b, x)
                loss = logistic_loss(logits.float(), y)  # (live,)
            acc = ((logits > 0).float() == y).float().mean(-1)
        else:
            with torch.no_grad():
                acc = _accuracy_in_chunks(forward, p, b, x, y, _eval_chunk(cfg, len(live.index)))
        fit = acc >= 1.0
        converged[live.index[fit].cpu()] = True
        active = ~fit
        if bs is None:
            _mark(active & ~torch.isfinite(loss), active, diverged_epoch, live.index, epoch)
        if not active.any():
            break
        epochs[live.index[active].cpu()] += 1
        if bs is None:
            masked_step(live.opt, p, torch.where(active, loss, 0.0).sum(), active)
        else:
            order = torch.stack([torch.randperm(cfg.m, generator=g, device=dev) for g in live.perm_gens])
            for start in range(0, cfg.m, bs):
                idx = order[:, start:start + bs]  # (live, b)
                xb = torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))
                with autocast(dev, cfg.precision):
                    loss = logistic_loss(forward(p, b, xb).float(), torch.gather(y, 1, idx))
                _mark(active & ~torch.isfinite(loss), active, diverged_epoch, live.index, epoch)
                masked_step(live.opt, p, torch.where(active, loss, 0.0).sum(), active)
        live.project(cfg)
        if epoch == 0:
            inject_nan(p, live.nan_fault)
        _mark(active & exploded(p), active, diverged_epoch, live.index, epoch)
        if not active.all():  # finished trials leave the pack: later steps cost only the rest
            live.keep(active, final)
            if not len(live.index):
                break
    live.keep(torch.zeros(len(live.index), dtype=torch.bool, device=dev), final)

    with torch.no_grad():
        chunk = _eval_chunk(cfg, P)
        train_loss, train_acc = _evaluate(forward, final, buffers, [(batch.x, batch.y)], chunk, encode)
        test = tasks.test_chunks(cfg.task, cfg.T, cfg.s, [c.seed for c in configs], batch.support, cfg.n_test, chunk, dev)
        test_loss, test_acc = _evaluate(forward, final, buffers, test, None, encode)
        norms = transformer_norms(final, cfg.heads, cfg.norm_kind) if cfg.model == "transformer" \
            else mlp_norms(final, cfg.norm_kind)
    for j, row in enumerate(rows):
        if diverged_epoch[j] is not None:  # scores of NaN weights mean nothing
            train_acc[j] = train_loss[j] = test_acc[j] = test_loss[j] = math.nan
        row.update(
            status=(TrialStatus.DIVERGED if diverged_epoch[j] is not None else TrialStatus.DONE).value,
            support=batch.support[j].tolist(),
            redraws=int(batch.redraws[j]),
            train_acc=finite_or_none(train_acc[j]), train_loss=finite_or_none(train_loss[j]),
            test_acc=finite_or_none(test_acc[j]), test_loss=finite_or_none(test_loss[j]),
            epochs=int(epochs[j]), converged=bool(converged[j]),
            diverged_epoch=diverged_epoch[j],
            **{k: finite_or_none(v[j]) for k, v in norms.items()},
        )


def _mark(bad: torch.Tensor, active: torch.Tensor, diverged_epoch: list, index: torch.Tensor, epoch: int) -> None:
    """:func:`mark_diverged` for live rows ``bad`` ``(live,)``, recorded by trial ``index``."""
    for j in torch.nonzero(bad).flatten().tolist():
        diverged_epoch[int(index[j])] = epoch
    active &= ~bad


@dataclass
class _Live:
    """The trials of a pack still training: their stacked weights, optimiser state and data.

    Row r of every tensor belongs to trial ``index[r]``. :meth:`keep` drops the finished
    rows (saving their weights); every per-trial quantity is sliced alike, so a trial's
    run is the same with or without the others (AdamW is elementwise, batches come from
    the trial's own generator).
    """

    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    opt: torch.optim.Optimizer
    index: torch.Tensor  # (live,) int64
    bound: torch.Tensor  # (live,)
    x: torch.Tensor  # (live, m, T)
    y: torch.Tensor  # (live, m)
    nan_fault: torch.Tensor  # (live,)
    perm_gens: list[torch.Generator]

    def project(self, cfg: BooleanTrialConfig) -> None:
        _projector(cfg, self.params, self.bound)()

    def keep(self, rows: torch.Tensor, final: dict[str, torch.Tensor]) -> None:
        """Keep the live rows where ``rows`` ``(live,)`` is True; write the others' weights to ``final``."""
        gone = torch.nonzero(~rows).flatten()
        for k, v in self.params.items():
            final[k][self.index[gone]] = v.detach()[gone]
        kept = torch.nonzero(rows).flatten()
        params = {k: v.detach()[kept].clone().requires_grad_() for k, v in self.params.items()}
        state = defaultdict(dict)
        for k, old in self.params.items():
            if self.opt.state.get(old):  # per-trial moments are sliced, the shared step count copied
                state[params[k]] = {
                    name: (s[kept].clone() if s.dim() and s.shape[0] == len(self.index) else s.clone())
                    for name, s in self.opt.state[old].items()
                }
        (group,) = self.opt.param_groups
        group["params"] = list(params.values())
        self.opt.state = state
        self.params = params
        self.buffers = {k: v[kept] for k, v in self.buffers.items()}
        self.index, self.bound, self.nan_fault = self.index[kept], self.bound[kept], self.nan_fault[kept]
        self.x, self.y = self.x[kept], self.y[kept]
        self.perm_gens = [self.perm_gens[i] for i in kept.tolist()]


def _encoder(cfg: BooleanTrialConfig):
    """The input form the pack's forward takes: a one-layer transformer's one-hot
    (:meth:`workers.models.CLSTransformer.encode`, made once per training set), else bits."""
    if cfg.model == "transformer" and cfg.layers == 1:
        return CLSTransformer.encode
    return lambda x: x


def _projector(cfg: BooleanTrialConfig, params: dict[str, torch.Tensor], bound: torch.Tensor):
    if torch.isinf(bound).all():
        return lambda: None
    if cfg.model == "transformer":
        return lambda: project_transformer(params, bound, cfg.heads, cfg.norm_kind)
    return lambda: project_mlp(params, bound, cfg.norm_kind)


def _eval_chunk(cfg: BooleanTrialConfig, P: int) -> int:
    """Samples per evaluation chunk so that activations fit ``EVAL_BUDGET_BYTES``.

    A one-layer transformer sample holds its bits (uint8, twice while encoded) and their
    one-hot ``(2T,)`` as float32 (:meth:`workers.models.CLSTransformer.forward_matmul`); a deeper one about 8 float32
    tensors of ``(T+1, d)`` per layer; an MLP sample about 4 of width ``max(T, mlp_width)``.
    """
    if cfg.model == "transformer" and cfg.layers == 1:
        per_sample = 4 * (2 * (cfg.T + 1) + 16 * cfg.d) + 2 * (cfg.T + 1)
    elif cfg.model == "transformer":
        per_sample = 8 * 4 * (cfg.T + 1) * cfg.d * cfg.layers
    else:
        per_sample = 4 * 4 * max(cfg.T, cfg.mlp_width) * cfg.layers
    return max(1, EVAL_BUDGET_BYTES // (per_sample * P))


def _accuracy_in_chunks(forward, params, buffers, x, y, chunk: int) -> torch.Tensor:
    return _evaluate(forward, params, buffers, [(x, y)], chunk)[1]


def _evaluate(forward, params, buffers, parts, chunk: int | None = None, encode=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean logistic loss and accuracy ``(P,)`` each, over ``(x, y)`` parts of ``(P, c, T)``,
    each cut into chunks of at most ``chunk`` samples (None: as given) and passed through
    ``encode`` (None: as they are) before the forward."""
    loss_sum = acc_sum = n = 0
    for x, y in parts:
        step = chunk or x.shape[1]
        for i in range(0, x.shape[1], step):
            xc, yc = x[:, i:i + step], y[:, i:i + step]
            logits = forward(params, buffers, encode(xc) if encode else xc)
            loss_sum = loss_sum + logistic_loss(logits, yc) * yc.shape[1]
            acc_sum = acc_sum + ((logits > 0).float() == yc).float().sum(-1)
            n += yc.shape[1]
    return (loss_sum / n).cpu(), (acc_sum / n).cpu()


def _empty_row() -> dict:
    return dict(
        status=TrialStatus.FAILED.value, error_type=None, error=None, support=None, redraws=None,
        train_acc=None, train_loss=None, test_acc=None, test_loss=None, epochs=None,
        converged=None, diverged_epoch=None, norm_qk=None, norm_v=None, norm_hidden=None,
        norm_readout=None,
    )
