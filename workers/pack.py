"""What every pack trainer shares: mixed precision, exploded weights, test-only faults and
failed rows. A pack's trials train stacked (workers/stacked.py) or one after the other, each
on its own tensors (workers/train_boolean.py, workers/train_symmetry.py); workers/stacking.py decides."""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Iterable, Sequence

import torch

from attnsweep.workers.status import TrialStatus


class TrialFault(RuntimeError):
    """Raised inside a trial whose config asks for ``fault: raise`` (tests only)."""


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


# A weight this large (in absolute value) has exploded: no trial of this project trains
# weights beyond a few hundred, and float32 arithmetic on it is already losing digits.
EXPLODED_WEIGHT = 1e6


def device_label(dev: torch.device) -> str:
    """What a row's ``device`` says: ``"cpu"``, or for a GPU what a bitwise rerun must match
    (docs/claims.md 4), e.g. ``"cuda:0 (NVIDIA H200; CUDA 13.0; torch 2.11.0+cu130)"``."""
    if dev.type != "cuda":
        return str(dev)
    return f"{dev} ({torch.cuda.get_device_name(dev)}; CUDA {torch.version.cuda}; torch {torch.__version__})"


@torch.no_grad()
def exploded(params: Iterable[torch.Tensor]) -> bool:
    """Whether one trial's weights hold a NaN/inf or a value beyond ``EXPLODED_WEIGHT``.

    One pass over all of them (``amax`` propagates NaN, and ``NaN <= x`` is false): checked
    every epoch, so three ops rather than five per tensor, which at small T cost more than
    the step (bench/train_step.py)."""
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    return not bool(flat.abs().amax() <= EXPLODED_WEIGHT)


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
        status=TrialStatus.FAILED.value,
        error_type=type(exc).__name__,
        error=f"{exc}\n{''.join(traceback.format_exception(exc)[-3:])}".strip(),
    )


def finite_or_none(v: torch.Tensor) -> float | None:
    """A 0-d tensor as a float, or None when it is NaN or infinite."""
    f = float(v)
    return f if math.isfinite(f) else None
