"""Training a pack of symmetry trials (docs/claims.md 1b) at once with torch.func.

Students learn Y = f(X, K) from a teacher by full-batch AdamW on the mean squared error,
vmapped over the pack's stacked parameters as in :mod:`workers.train`. Each trial is scored
by its relative test error and by its equivariance errors: orthogonal (float64 and float32)
and permutation, over random rotations / permutations (workers/equivariance.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

import torch
from torch.func import functional_call

import tasks
from tasks.seq2seq import sample_dataset
from workers.config import SymmetryTrialConfig
from workers.equivariance import (
    haar_orthogonal, orthogonal_equivariance_error, permutation_equivariance_error, summarize,
)
from workers.status import TrialStatus
from workers.students import build_student
from workers.pack import apply_faults, autocast, fail_row, finite_or_none, exploded, inject_nan, mark_diverged, masked_step, stack

# Held-out samples on which the equivariance errors are measured.
EQUIVARIANCE_SAMPLES = 64
# Train relative error below which a trial has fit its data and stops.
FIT_ERROR = 1e-7


def train_symmetry_pack(configs: Sequence[SymmetryTrialConfig], device: str | None = None) -> list[dict]:
    """Train and score every trial of a pack of equal ``shape_key()``.

    Returns:
        One dict per trial: ``status``, ``error_type``, ``error``, ``train_error`` and
        ``test_error`` (relative MSE, ||pred - Y||^2 / ||Y||^2 over the set), ``epochs``,
        ``converged``, ``diverged_epoch``, ``eq_error_median``/``eq_error_max`` (orthogonal
        equivariance error in float64), ``eq_error32_median``/``eq_error32_max`` (float32),
        ``perm_error_median``/``perm_error_max`` (float64), ``wall_s``, ``pack_size``,
        ``worker_host``, ``device``.

    Raises:
        ValueError: the configs do not share one shape key.
    """
    if not configs:
        return []
    if any(c.shape_key() != configs[0].shape_key() for c in configs):
        raise ValueError("all trials of a pack must share shape_key()")
    t0 = time.perf_counter()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = [dict(status=TrialStatus.FAILED.value, error_type=None, error=None) for _ in configs]
    runnable = apply_faults(configs, rows)
    if runnable:
        try:
            _fit([configs[i] for i in runnable], [rows[i] for i in runnable], dev)
        except Exception as exc:  # noqa: BLE001 - a pack-wide error fails its trials, not the sweep
            for i in runnable:
                fail_row(rows[i], exc)
    wall = time.perf_counter() - t0
    for row in rows:
        row.update(wall_s=wall / len(configs), pack_size=len(configs), worker_host=socket.gethostname(), device=str(dev))
    return rows


def _student(c: SymmetryTrialConfig) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(tasks.derive_seed("init", c.model, c.equivariance, c.n, c.k, c.d, c.width, c.heads, c.seed))
        width = c.mlp_width if c.model == "mlp" and c.equivariance in ("none", "augment") else c.width
        return build_student(c.model, c.equivariance, c.n, c.k, c.d, width, c.heads)


def _fit(configs: list[SymmetryTrialConfig], rows: list[dict], dev: torch.device) -> None:
    cfg, P = configs[0], len(configs)
    train = [sample_dataset(cfg.teacher, cfg.n, cfg.k, cfg.d, cfg.m, c.seed, "train", device=dev) for c in configs]
    test = [sample_dataset(cfg.teacher, cfg.n, cfg.k, cfg.d, cfg.n_test, c.seed, "test", device=dev) for c in configs]
    X, K, Y = (torch.stack(t) for t in zip(*train))  # (P, m, n, d), (P, m, k, d), (P, m, n, d)
    models = [_student(c) for c in configs]
    forward, params, buffers, base = stack(models, dev)  # (P, m, n, d), (P, m, k, d) -> (P, m, n, d)
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    active = torch.ones(P, dtype=torch.bool, device=dev)
    epochs = torch.zeros(P, dtype=torch.int64)
    converged = torch.zeros(P, dtype=torch.bool)
    diverged = [None] * P
    y_norm = Y.pow(2).sum((1, 2, 3))  # (P,)
    rot_gen = tasks.generator(tasks.derive_seed("augment", cfg.seed, P), dev)
    nan_fault = torch.tensor([c.fault == "nan" for c in configs], device=dev)

    for epoch in range(cfg.max_epochs):
        if cfg.equivariance == "augment":
            # A fresh Haar rotation per sample and step: (X Q^T, K Q^T) -> Y Q^T.
            Q = haar_orthogonal(cfg.d, P * cfg.m, rot_gen, dtype=X.dtype).to(dev).view(P, cfg.m, cfg.d, cfg.d)
            xb, kb, yb = rotate_rows(X, Q), rotate_rows(K, Q), rotate_rows(Y, Q)
        else:
            xb, kb, yb = X, K, Y
        with autocast(dev, cfg.precision):
            pred = forward(params, buffers, xb, kb).float()
        sq = (pred - yb).pow(2).sum((1, 2, 3))  # (P,)
        rel = (sq / y_norm).detach()
        mark_diverged(active & ~torch.isfinite(rel), active, diverged, epoch)
        fit = active & (rel < FIT_ERROR)
        converged |= fit.cpu()
        active &= ~fit
        if not active.any():
            break
        epochs += active.cpu().long()
        masked_step(opt, params, torch.where(active, sq / (cfg.m * cfg.n * cfg.d), 0.0).sum(), active)
        if epoch == 0:
            inject_nan(params, nan_fault)
        mark_diverged(active & exploded(params), active, diverged, epoch)

    with torch.no_grad():
        train_err = _relative_error(forward, params, buffers, X, K, Y)
        Xt, Kt, Yt = (torch.stack(t) for t in zip(*test))
        test_err = _relative_error(forward, params, buffers, Xt, Kt, Yt)
    for j, (c, row) in enumerate(zip(configs, rows)):
        row.update(
            status=(TrialStatus.DIVERGED if diverged[j] is not None else TrialStatus.DONE).value,
            train_error=finite_or_none(train_err[j]), test_error=finite_or_none(test_err[j]), epochs=int(epochs[j]),
            converged=bool(converged[j]), diverged_epoch=diverged[j],
        )
        if diverged[j] is None:
            p_j = {k: v[j].detach() for k, v in params.items()}
            b_j = {k: v[j] for k, v in buffers.items()}
            row.update(_equivariance(base, p_j, b_j, Xt[j, :EQUIVARIANCE_SAMPLES], Kt[j, :EQUIVARIANCE_SAMPLES], c))


def rotate_rows(t: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """Every row x of each sample mapped to Q x by that sample's rotation: ``t`` ``(P, m, r, d)``,
    ``Q`` ``(P, m, d, d)`` -> ``(P, m, r, d)``, i.e. ``t Q^T`` per sample.

    One ``(r, d) @ (d, d)`` product per sample, not one ``(1, d) @ (d, d)`` per row: the same
    numbers; an augmented pack trains about 10% faster (BENCHMARKS.md).
    """
    return t @ Q.transpose(-1, -2)


def _relative_error(forward, params, buffers, X, K, Y, chunk: int = 512) -> torch.Tensor:
    """||pred - Y||^2 / ||Y||^2 per trial ``(P,)`` over ``(P, N, n, d)`` data, in chunks."""
    num = den = 0
    for i in range(0, X.shape[1], chunk):
        pred = forward(params, buffers, X[:, i:i + chunk], K[:, i:i + chunk])
        num = num + (pred - Y[:, i:i + chunk]).pow(2).sum((1, 2, 3))
        den = den + Y[:, i:i + chunk].pow(2).sum((1, 2, 3))
    return (num / den).cpu()


def _equivariance(base, params: dict, buffers: dict, X: torch.Tensor, K: torch.Tensor, c: SymmetryTrialConfig) -> dict:
    """Equivariance errors of one trained student (median and max over ``c.n_q`` draws)."""
    out = {}
    for dtype, suffix in ((torch.float64, ""), (torch.float32, "32")):
        p = {k: v.to(dtype) for k, v in params.items()}
        b = {k: v.to(dtype) if v.is_floating_point() else v for k, v in buffers.items()}

        def f(x, kn, p=p, b=b):
            return functional_call(base, (p, b), (x, kn))

        g = tasks.generator(tasks.derive_seed("equivariance", c.seed), "cpu")
        med, mx = summarize(orthogonal_equivariance_error(f, X.to(dtype), K.to(dtype), c.n_q, g))
        out[f"eq_error{suffix}_median"], out[f"eq_error{suffix}_max"] = med, mx
        if dtype == torch.float64:
            g = tasks.generator(tasks.derive_seed("permutation", c.seed), "cpu")
            out["perm_error_median"], out["perm_error_max"] = summarize(
                permutation_equivariance_error(f, X.to(dtype), K.to(dtype), c.n_q, g)
            )
    return out
