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

import torch

import tasks
from workers.config import BooleanTrialConfig
from workers.models import build_model, logistic_loss
from workers.pack import apply_faults, autocast, fail_row, finite_or_none, exploded, inject_nan, mark_diverged, masked_step, stack
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
    bound = torch.tensor([c.norm_bound or math.inf for c in configs], device=dev)
    project = _projector(cfg, params, bound)
    project()
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    x, y = batch.x, batch.y  # (P, m, T), (P, m)
    active = torch.ones(P, dtype=torch.bool, device=dev)
    epochs = torch.zeros(P, dtype=torch.int64)
    converged = torch.zeros(P, dtype=torch.bool)
    diverged_epoch = [None] * P
    nan_fault = torch.tensor([c.fault == "nan" for c in configs], device=dev)
    bs = cfg.batch_size if cfg.batch_size and cfg.batch_size < cfg.m else None
    perm_gens = [tasks.generator(tasks.derive_seed("batches", c.seed), dev) for c in configs] if bs else []

    for epoch in range(cfg.max_epochs):
        if bs is None:
            with autocast(dev, cfg.precision):
                logits = forward(params, buffers, x)
                loss = logistic_loss(logits.float(), y)  # (P,)
            acc = ((logits > 0).float() == y).float().mean(-1)
        else:
            with torch.no_grad():
                acc = _accuracy_in_chunks(forward, params, buffers, x, y, _eval_chunk(cfg, P))
        fit = active & (acc >= 1.0)
        converged |= fit.cpu()
        active &= ~fit
        if bs is None:
            bad = active & ~torch.isfinite(loss)
            mark_diverged(bad, active, diverged_epoch, epoch)
        if not active.any():
            break
        epochs += active.cpu().long()
        if bs is None:
            masked_step(opt, params, torch.where(active, loss, 0.0).sum(), active)
        else:
            order = torch.stack([torch.randperm(cfg.m, generator=g, device=dev) for g in perm_gens])
            for start in range(0, cfg.m, bs):
                idx = order[:, start:start + bs]  # (P, b)
                xb = torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))
                with autocast(dev, cfg.precision):
                    loss = logistic_loss(forward(params, buffers, xb).float(), torch.gather(y, 1, idx))
                mark_diverged(active & ~torch.isfinite(loss), active, diverged_epoch, epoch)
                masked_step(opt, params, torch.where(active, loss, 0.0).sum(), active)
        project()
        if epoch == 0:
            inject_nan(params, nan_fault)
        mark_diverged(active & exploded(params), active, diverged_epoch, epoch)

    with torch.no_grad():
        train_loss, train_acc = _evaluate(forward, params, buffers, [(x, y)])
        chunk = _eval_chunk(cfg, P)
        test = tasks.test_chunks(cfg.task, cfg.T, cfg.s, [c.seed for c in configs], batch.support, cfg.n_test, chunk, dev)
        test_loss, test_acc = _evaluate(forward, params, buffers, test)
        norms = transformer_norms(params, cfg.heads, cfg.norm_kind) if cfg.model == "transformer" \
            else mlp_norms(params, cfg.norm_kind)
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


def _projector(cfg: BooleanTrialConfig, params: dict[str, torch.Tensor], bound: torch.Tensor):
    if torch.isinf(bound).all():
        return lambda: None
    if cfg.model == "transformer":
        return lambda: project_transformer(params, bound, cfg.heads, cfg.norm_kind)
    return lambda: project_mlp(params, bound, cfg.norm_kind)


def _eval_chunk(cfg: BooleanTrialConfig, P: int) -> int:
    """Samples per evaluation chunk so that activations fit ``EVAL_BUDGET_BYTES``.

    A transformer sample holds about 8 float32 tensors of ``(T+1, d)`` per layer; an MLP
    sample about 4 of width ``max(T, mlp_width)``.
    """
    if cfg.model == "transformer":
        per_sample = 8 * 4 * (cfg.T + 1) * cfg.d * cfg.layers
    else:
        per_sample = 4 * 4 * max(cfg.T, cfg.mlp_width) * cfg.layers
    return max(1, EVAL_BUDGET_BYTES // (per_sample * P))


def _accuracy_in_chunks(forward, params, buffers, x, y, chunk: int) -> torch.Tensor:
    parts = [(x[:, i:i + chunk], y[:, i:i + chunk]) for i in range(0, x.shape[1], chunk)]
    return _evaluate(forward, params, buffers, parts)[1]


def _evaluate(forward, params, buffers, parts) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean logistic loss and accuracy ``(P,)`` each, over ``(x, y)`` chunks of ``(P, c, T)``."""
    loss_sum = acc_sum = n = 0
    for x, y in parts:
        logits = forward(params, buffers, x)
        loss_sum = loss_sum + logistic_loss(logits, y) * y.shape[1]
        acc_sum = acc_sum + ((logits > 0).float() == y).float().sum(-1)
        n += y.shape[1]
    return (loss_sum / n).cpu(), (acc_sum / n).cpu()


def _empty_row() -> dict:
    return dict(
        status=TrialStatus.FAILED.value, error_type=None, error=None, support=None, redraws=None,
        train_acc=None, train_loss=None, test_acc=None, test_loss=None, epochs=None,
        converged=None, diverged_epoch=None, norm_qk=None, norm_v=None, norm_hidden=None,
        norm_readout=None,
    )
