"""What every pack trainer shares: stacking models for vmap, masked optimiser steps,
per-trial divergence, test-only faults and failed rows.

A pack's trials are independent: the loss is a sum of per-trial losses, so each trial's
gradient is its own, and AdamW is elementwise, so its state per trial is that trial's
own. A finished or diverged trial stops changing because its parameters are restored
after every later step.
"""

from __future__ import annotations

import copy
import math
import os
import traceback
from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state

from workers.status import TrialStatus


class TrialFault(RuntimeError):
    """Raised inside a trial whose config asks for ``fault: raise`` (tests only)."""


def stack(models: Sequence[nn.Module], dev: torch.device):
    """Stack P models of one architecture for ``torch.func.vmap``.

    Returns:
        ``(forward, params, buffers, base)``: ``forward(params, buffers, *inputs)`` maps
        inputs with a leading ``(P, ...)`` dim to outputs with the same; ``params`` (leaf
        tensors ``(P, ...)`` that require grad) and ``buffers`` are keyed by parameter name;
        ``base`` is the architecture on the meta device, for ``functional_call`` on one
        trial's slice.
    """
    params, buffers = stack_module_state(list(models))
    params = {k: v.to(dev).detach().requires_grad_() for k, v in params.items()}
    buffers = {k: v.to(dev) for k, v in buffers.items()}
    base = copy.deepcopy(models[0]).to("meta")

    def one(p, b, *inputs, **options):
        return functional_call(base, (p, b), inputs, options)

    call = torch.func.vmap(one)  # keyword options are passed to every trial unbatched
    # A model may decide pack-wide how to compute (CLSTransformer.pack_forward).
    forward = base.pack_forward(call) if hasattr(base, "pack_forward") and _one_layer(base) else call
    return forward, params, buffers, base


def _one_layer(model: nn.Module) -> bool:
    return len(getattr(model, "blocks", ())) == 1


def autocast(dev: torch.device, precision: str):
    """The context a training forward pass runs in: bfloat16 autocast for ``precision``
    ``"bfloat16"`` (mixed precision: parameters, gradients and AdamW state stay float32;
    on CPU and CUDA alike), a no-op for ``"float32"``.

    Raises:
        ValueError: another precision.
    """
    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"precision must be 'float32' or 'bfloat16', got {precision!r}")
    return torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def masked_step(opt: torch.optim.Optimizer, params: dict[str, torch.Tensor], total: torch.Tensor,
                active: torch.Tensor) -> None:
    """One optimiser step on the stacked parameters; trials with ``active`` False ``(P,)``
    keep their values."""
    frozen = None if active.all() else {k: v.detach().clone() for k, v in params.items()}
    opt.zero_grad(set_to_none=False)
    total.backward()
    opt.step()
    if frozen is not None:
        with torch.no_grad():
            for k, v in params.items():
                v.copy_(torch.where(active.view(-1, *([1] * (v.dim() - 1))), v, frozen[k]))


# A weight this large (in absolute value) has exploded: no trial of this project trains
# weights beyond a few hundred, and float32 arithmetic on it is already losing digits.
EXPLODED_WEIGHT = 1e6


@torch.no_grad()
def exploded(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Trials ``(P,)`` whose weights hold a NaN/inf or a value beyond ``EXPLODED_WEIGHT``."""
    out = None
    for v in params.values():
        flat = v.detach().reshape(v.shape[0], -1)
        bad = ~torch.isfinite(flat).all(1) | (flat.abs().amax(1) > EXPLODED_WEIGHT)
        out = bad if out is None else out | bad
    return out


def mark_diverged(bad: torch.Tensor, active: torch.Tensor, diverged_epoch: list, epoch: int) -> None:
    """Record ``epoch`` for the trials in ``bad`` ``(P,)`` and deactivate them."""
    for j in torch.nonzero(bad).flatten().tolist():
        diverged_epoch[j] = epoch
    active &= ~bad


@torch.no_grad()
def inject_nan(params: dict[str, torch.Tensor], mask: torch.Tensor) -> None:
    """Set the parameters of the trials in ``mask`` ``(P,)`` to NaN (``fault: nan``)."""
    if mask.any():
        for v in params.values():
            v[mask] = math.nan


def apply_faults(configs: Sequence, rows: list[dict]) -> list[int]:
    """Act out test-only faults: ``raise`` fails that trial's row, ``exit`` kills the worker
    process (as a segfault or OOM kill would). Returns the indices of trials to train."""
    runnable = []
    for i, cfg in enumerate(configs):
        try:
            if cfg.fault == "raise":
                raise TrialFault(f"fault injected into trial with seed {cfg.seed}")
            if cfg.fault == "exit":
                os._exit(17)
            runnable.append(i)
        except TrialFault as exc:
            fail_row(rows[i], exc)
    return runnable


def fail_row(row: dict, exc: BaseException) -> None:
    """Mark a row failed with the error's class, message and the end of its traceback."""
    row.update(
        status=TrialStatus.FAILED.value, error_type=type(exc).__name__,
        error=f"{exc}\n{''.join(traceback.format_exception(exc)[-3:])}".strip(),
    )


def finite_or_none(v: torch.Tensor) -> float | None:
    """A 0-d tensor as a float, or None when it is NaN or infinite."""
    f = float(v)
    return f if math.isfinite(f) else None
