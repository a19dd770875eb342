"""AdamW for one trial's or one stacked pack's parameters, without ``torch.optim.Optimizer``.

The update is torch's own: :func:`torch.optim.adamw.adamw` (Loshchilov & Hutter, ICLR 2019,
"Decoupled weight decay regularization", Algorithm 2), with the fused kernel on CPU and CUDA,
so every number is what ``torch.optim.AdamW(params, lr, weight_decay=..., fused=True)`` gives
(tests/workers/test_adamw.py compares them step by step). Why not that class: constructing
any ``torch.optim.Optimizer`` imports torch's compiler (``torch._dynamo``), about 1 s of a
worker's start on this project's machine (cProfile of a first pack), paid by every fresh Ray
worker before its first trial.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adamw import adamw

BETAS = (0.9, 0.999)
EPS = 1e-8
# Devices with torch's fused AdamW kernel; elsewhere the single-tensor loop.
FUSED_DEVICES = ("cpu", "cuda")


class AdamW:
    """AdamW at torch's defaults (betas 0.9, 0.999; eps 1e-8) over ``params``.

    ``state`` maps a parameter to its ``step`` (a float32 scalar tensor), ``exp_avg`` and
    ``exp_avg_sq`` (its shape), the names ``torch.optim.AdamW`` uses, created at a
    parameter's first step; a caller may read and replace a parameter's entry (a stacked
    pack keeps only some slots, workers/stacked.py). A parameter without a gradient is left
    alone, as torch does.

    Args:
        params: float32 parameters, all on one device.
        lr: learning rate.
        weight_decay: decoupled weight decay.
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float, weight_decay: float):
        self.params, self.lr, self.weight_decay = list(params), lr, weight_decay
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        self.fused = bool(self.params) and self.params[0].device.type in FUSED_DEVICES

    def zero_grad(self) -> None:
        """Drop every gradient (sets it to None)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One AdamW update of every parameter that has a gradient."""
        params = [p for p in self.params if p.grad is not None]
        if not params:
            return
        for p in params:
            if p not in self.state:
                self.state[p] = {
                    "step": torch.zeros((), dtype=torch.float32, device=p.device),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        states = [self.state[p] for p in params]
        adamw(
            params,
            [p.grad for p in params],  # type: ignore[misc]
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=False,
            fused=self.fused,
            capturable=False,
            differentiable=False,
            has_complex=False,
            amsgrad=False,
            beta1=BETAS[0],
            beta2=BETAS[1],
            lr=self.lr,
            weight_decay=self.weight_decay,
            eps=EPS,
            maximize=False,
        )
