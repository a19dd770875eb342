"""The s-sparse majority function of T bits, added to attnsweep as a task.

y = 1 when more than half of the s support bits are 1. With bits i.i.d. Bernoulli(1/2) and s
odd, P(y = 1) = 1/2 (no ties), so the labels are balanced; use odd s. No uniqueness check of
its own is given, so attnsweep tries every other s-subset of the T positions
(attnsweep.tasks.registry.ambiguous_by_enumeration), which is exact and fast for small T.
"""

from __future__ import annotations

import torch

from attnsweep.tasks.registry import BooleanTask


def majority(bits: torch.Tensor) -> torch.Tensor:
    """``(..., n, s)`` int64 bits at the support -> ``(..., n)`` float32 labels in {0, 1}."""
    return (2 * bits.sum(-1) > bits.shape[-1]).to(torch.float32)


MAJORITY = BooleanTask(
    name="majority",
    bit_probability=lambda s: 0.5,
    label=majority,
    description="y = 1 when most of the s support bits are 1 (odd s: balanced labels)",
)
