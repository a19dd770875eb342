"""A sparse-Boolean model for attnsweep, added through its extension point (entry-point group
``attnsweep.models``).

``bagpos`` (a :class:`~attnsweep.workers.boolean_models.BooleanModel`): a bag of positions. Each
position t has a learned code e_t in R^d; a sample x in {-1, +1}^T is the sum of its positions'
codes signed by their bits, h = sum_t x_t e_t, read by a GELU layer of width d and a linear
readout. It sees every position at once (as the MLP does) but through d numbers, not a hidden
layer of T inputs per unit. A plain ``nn.Module`` with no in-place operations and no branch on
tensor values: it trains stacked under ``torch.func.vmap`` like attnsweep's own models.

It bounds the Frobenius norm of its readout (``norm_bound``, ``norm_kind: frobenius``) and reports
that norm in the ``norm_readout`` column; it has no margin bound, so ``margin_normalised`` is null.
"""

from __future__ import annotations

import torch
from torch import nn

from attnsweep.workers.boolean_models import BooleanModel


class BagOfPositions(nn.Module):
    """x ``(b, T)`` float32 +-1 -> logits ``(b,)``: ``readout(GELU(W sum_t x_t e_t + c))``."""

    def __init__(self, T: int, d: int):
        super().__init__()
        self.codes = nn.Parameter(torch.randn(T, d) / T**0.5)
        self.hidden = nn.Linear(d, d)
        self.readout = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(nn.functional.gelu(self.hidden(x @ self.codes))).squeeze(-1)


def readout_norm(params: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """The Frobenius norm of the readout, per trial of stacked parameters ``(trials, 1, d)``."""
    return {"norm_readout": params["readout.weight"].flatten(1).norm(dim=1)}


def project_readout(params: dict[str, torch.Tensor], bound: torch.Tensor, cfg) -> None:
    """Scale each trial's readout in place onto the Frobenius ball of radius ``bound`` ``(trials,)``."""
    if cfg.norm_kind != "frobenius":
        raise ValueError(f"bagpos bounds the Frobenius norm of its readout, not the {cfg.norm_kind} norm")
    w = params["readout.weight"]
    norm = w.flatten(1).norm(dim=1)
    w.mul_(torch.clamp(bound / norm.clamp_min(1e-30), max=1.0).view(-1, 1, 1))


BAGPOS = BooleanModel(
    name="bagpos",
    build=lambda cfg: BagOfPositions(cfg.T, cfg.d),
    norms=readout_norm,
    project=project_readout,
    stackable=True,
    # No param_count: attnsweep counts the parameters on torch's meta device.
    # Kept for backward, per sample: the (T,) input, h (d), the hidden layer before and after GELU (2d).
    activations=lambda cfg: cfg.T + 3 * cfg.d,
    settings=("d",),
    description="bag of positions: signed sum of learned position codes, a GELU layer, a readout",
)
