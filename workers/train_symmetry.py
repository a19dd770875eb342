"""Training a pack of symmetry trials (docs/claims.md 1b): stacked together
(workers/stacked_symmetry.py), or one trial after the other.

Students learn Y = f(X, K) from a teacher by full-batch AdamW on the mean squared error. Each
trial has its own optimiser state and its own random streams (its rotations too), and stacked
packs keep every slot's arithmetic its own (workers/stacked.py), so its row does not depend on
its packmates. Each
trial is scored by its relative test error and by its equivariance errors: orthogonal
(float64 and float32) and permutation, over random rotations / permutations
(workers/equivariance.py).
"""

from __future__ import annotations

import copy
import math
import socket
import time
from collections.abc import Sequence

import torch
from torch.func import functional_call

from attnsweep import tasks
from attnsweep.tasks.seq2seq import sample_dataset
from attnsweep.workers.adamw import AdamW
from attnsweep.workers.builtin_students import build_student, width_of
from attnsweep.workers.config import SymmetryTrialConfig
from attnsweep.workers.curves import Curve, CurvePlan, attach
from attnsweep.workers.equivariance import (
    haar_orthogonal,
    orthogonal_equivariance_error,
    permutation_equivariance_error,
    summarize,
)
from attnsweep.workers.pack import apply_faults, autocast, exploded, fail_row, finite_or_none
from attnsweep.workers.stacked import groups
from attnsweep.workers.stacked_symmetry import fit_stacked
from attnsweep.workers.stacking import symmetry_stacks
from attnsweep.workers.status import TrialStatus

# Held-out samples on which the equivariance errors are measured.
EQUIVARIANCE_SAMPLES = 64
# Train relative error below which a trial has fit its data and stops.
FIT_ERROR = 1e-7


def train_symmetry_pack(
    configs: Sequence[SymmetryTrialConfig],
    device: str | None = None,
    stacked: bool | None = None,
    curves: CurvePlan | None = None,
) -> list[dict]:
    """Train and score every trial of a pack of equal ``shape_key()``: together, stacked
    (workers/stacked_symmetry.py), or with ``stacked=False`` one after the other (what
    benchmarks compare against). With ``curves``, each row also holds ``curve``
    (workers/curves.py): per kept epoch the training loss (mean squared error, the loss
    AdamW minimises) and the relative training error the stopping rule reads.

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
    kept = [curves.curve(c.max_epochs) if curves is not None else None for c in configs]
    if runnable and (symmetry_stacks(configs[0], dev.type) if stacked is None else stacked):
        for g in groups(len(runnable), dev):
            pick = [runnable[j] for j in g]
            _train_stacked([configs[i] for i in pick], [rows[i] for i in pick], dev, [kept[i] for i in pick])
    elif runnable:
        for i in runnable:
            try:
                _fit(configs[i], rows[i], dev, kept[i])
            except Exception as exc:  # noqa: BLE001 - a trial's error fails its row, not the pack or the sweep
                fail_row(rows[i], exc)
    if curves is not None:
        attach(rows, kept)
    wall = time.perf_counter() - t0
    for row in rows:
        row.update(
            wall_s=wall / len(configs),
            pack_size=len(configs),
            worker_host=socket.gethostname(),
            device=str(dev),
        )
    return rows


def _student(c: SymmetryTrialConfig) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        # The CPU generator alone (the student is built on the CPU; workers/train_boolean.py says why).
        torch.default_generator.manual_seed(
            tasks.derive_seed("init", c.model, c.equivariance, c.n, c.k, c.d, c.width, c.heads, c.seed)
        )
        return build_student(c.model, c.equivariance, c.n, c.k, c.d, width_of(c), c.heads)


def _train_stacked(
    configs: list[SymmetryTrialConfig], rows: list[dict], dev: torch.device, curves: list[Curve | None]
) -> None:
    """Train the trials together, then score each alone."""
    try:
        data = [sample_dataset(c.teacher, c.n, c.k, c.d, c.m, c.seed, "train", device=dev) for c in configs]
        X, K, Y = (torch.stack(t) for t in zip(*data))  # (trials, m, n, d), (trials, m, k, d), (trials, m, n, d)
        models = [_student(c).to(dev) for c in configs]
        ends = fit_stacked(configs, models, X, K, Y, FIT_ERROR, dev, curves)
    except Exception as exc:  # noqa: BLE001 - a pack-wide error fails its trials, not the sweep
        for row in rows:
            fail_row(row, exc)
        return
    for c, row, model, (x, k, y), end in zip(configs, rows, models, data, ends):
        try:
            with torch.no_grad():
                every = dict(model.named_parameters())
                for name, v in end["params"].items():
                    every[name].copy_(v)
            _score(c, row, model, x, k, y, end["epochs"], end["converged"], end["diverged_epoch"], dev)
        except Exception as exc:  # noqa: BLE001 - a trial's error fails its row, not the pack or the sweep
            fail_row(row, exc)


def _fit(c: SymmetryTrialConfig, row: dict, dev: torch.device, curve: Curve | None = None) -> None:
    """Train one trial to its end and score it; ``curve`` (when given) notes the loss and
    relative error the loop measures before each step."""
    X, K, Y = sample_dataset(
        c.teacher, c.n, c.k, c.d, c.m, c.seed, "train", device=dev
    )  # (m, n, d), (m, k, d), (m, n, d)
    model = _student(c).to(dev)
    params = list(model.parameters())
    opt = AdamW(params, c.lr, c.weight_decay)
    epochs, converged, diverged = 0, False, None
    y_norm = Y.pow(2).sum()
    rot_gen = tasks.generator(tasks.derive_seed("augment", c.seed), dev)  # the trial's own rotations
    for epoch in range(c.max_epochs):
        if c.equivariance == "augment":
            # A fresh Haar rotation per sample and step: (X Q^T, K Q^T) -> Y Q^T.
            Q = haar_orthogonal(c.d, c.m, rot_gen, dtype=X.dtype).to(dev)  # (m, d, d)
            xb, kb, yb = rotate_rows(X, Q), rotate_rows(K, Q), rotate_rows(Y, Q)
        else:
            xb, kb, yb = X, K, Y
        opt.zero_grad()
        with autocast(dev, c.precision):
            pred = model(xb, kb).float()
        sq = (pred - yb).pow(2).sum()
        rel = float(sq.detach() / y_norm)
        if curve is not None:
            curve.note(epoch, sq.detach() / (c.m * c.n * c.d), None, rel)
        if not math.isfinite(rel):
            diverged = epoch
            break
        if rel < FIT_ERROR:
            converged = True
            break
        epochs += 1
        (sq / (c.m * c.n * c.d)).backward()
        opt.step()
        if epoch == 0 and c.fault == "nan":
            with torch.no_grad():
                for p in params:
                    p.fill_(math.nan)
        if exploded(model.parameters()):
            diverged = epoch
            break
    _score(c, row, model, X, K, Y, epochs, converged, diverged, dev)


def _score(
    c: SymmetryTrialConfig,
    row: dict,
    model: torch.nn.Module,
    X: torch.Tensor,
    K: torch.Tensor,
    Y: torch.Tensor,
    epochs: int,
    converged: bool,
    diverged: int | None,
    dev: torch.device,
) -> None:
    """Fill a trained trial's row: relative errors on its training set and on fresh test
    samples, equivariance errors, and how training ended."""
    Xt, Kt, Yt = sample_dataset(c.teacher, c.n, c.k, c.d, c.n_test, c.seed, "test", device=dev)
    with torch.no_grad():
        train_err = _relative_error(model, X, K, Y)
        test_err = _relative_error(model, Xt, Kt, Yt)
    row.update(
        status=(TrialStatus.DIVERGED if diverged is not None else TrialStatus.DONE).value,
        train_error=finite_or_none(train_err),
        test_error=finite_or_none(test_err),
        epochs=epochs,
        converged=converged,
        diverged_epoch=diverged,
    )
    if diverged is None:
        base = copy.deepcopy(model).to("meta")
        p_j = {k: v.detach() for k, v in model.named_parameters()}
        b_j = dict(model.named_buffers())
        row.update(_equivariance(base, p_j, b_j, Xt[:EQUIVARIANCE_SAMPLES], Kt[:EQUIVARIANCE_SAMPLES], c))


def rotate_rows(t: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """Every row x of each sample mapped to Q x by that sample's rotation: ``t`` ``(..., m, r, d)``,
    ``Q`` ``(..., m, d, d)`` -> ``(..., m, r, d)``, i.e. ``t Q^T`` per sample.

    One ``(r, d) @ (d, d)`` product per sample, not one ``(1, d) @ (d, d)`` per row: the same
    numbers; an augmented pack trains about 10% faster (BENCHMARKS.md).
    """
    return t @ Q.transpose(-1, -2)


def _relative_error(model: torch.nn.Module, X, K, Y, chunk: int = 512) -> torch.Tensor:
    """||pred - Y||^2 / ||Y||^2 (0-d) over ``(N, n, d)`` data, in chunks of a fixed size."""
    num = den = 0
    for i in range(0, X.shape[0], chunk):
        pred = model(X[i : i + chunk], K[i : i + chunk])
        num = num + (pred - Y[i : i + chunk]).pow(2).sum()
        den = den + Y[i : i + chunk].pow(2).sum()
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
