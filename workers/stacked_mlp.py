"""The sparse-Boolean MLP (:class:`workers.models.MLP`) on a stacked pack's parameters
(workers/stacked.py), written out rather than vmapped."""

from __future__ import annotations

import torch


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
