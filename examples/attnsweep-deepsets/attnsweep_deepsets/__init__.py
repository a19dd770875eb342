"""A teacher and a student for attnsweep's symmetry experiment, added through its extension points.

* ``knowledge_mean`` (a :class:`~attnsweep.tasks.teachers.Teacher`): Y = a X + b 1 mean(K), each
  row of X scaled and shifted by the mean knowledge row, with a, b ~ U[0.5, 1.5] per seed. It
  commutes with every rotation Q (X Q^T and K Q^T give Y Q^T) and with every permutation of
  X's rows, so it has both symmetries and sides with the ``equivariant`` teacher in claim S2.
* ``deepsets`` (a :class:`~attnsweep.workers.student_registry.Student`): one GELU MLP applied
  to every row x_i of X beside mean(X) and mean(K) (Zaheer et al., NeurIPS 2017, "Deep sets"),
  so permutation-equivariant over X's rows by construction, never O(d)-equivariant. A plain
  ``nn.Module`` with no in-place operations: it trains stacked under ``torch.func.vmap`` like
  attnsweep's own students.
"""

from __future__ import annotations

import torch
from torch import nn

from attnsweep.tasks.teachers import Teacher
from attnsweep.workers.student_registry import Student


def knowledge_mean_params(n: int, k: int, d: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """The teacher's two mixing weights, 0-d float64, drawn from attnsweep's seeded generator."""
    return {name: 0.5 + torch.rand((), generator=g, dtype=torch.float64) for name in ("a", "b")}


def knowledge_mean(params: dict[str, torch.Tensor], X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """X ``(..., n, d)``, K ``(..., k, d)`` float64 -> Y = a X + b mean(K) ``(..., n, d)``."""
    return params["a"] * X + params["b"] * K.mean(-2, keepdim=True)


KNOWLEDGE_MEAN = Teacher(
    name="knowledge_mean",
    params=knowledge_mean_params,
    outputs=knowledge_mean,
    symmetries=frozenset({"orthogonal", "permutation"}),
    description="Y = a X + b mean(K): O(d)- and permutation-equivariant",
)


class DeepSets(nn.Module):
    """X ``(b, n, d)``, K ``(b, k, d)`` -> Y ``(b, n, d)``: an MLP of [x_i, mean(X), mean(K)] per row."""

    def __init__(self, d: int, width: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3 * d, width), nn.GELU(), nn.Linear(width, d))

    def forward(self, X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        context = torch.cat([X.mean(-2, keepdim=True), K.mean(-2, keepdim=True)], dim=-1)  # (b, 1, 2d)
        return self.mlp(torch.cat([X, context.expand(-1, X.shape[-2], -1)], dim=-1))


DEEPSETS = Student(
    name="deepsets",
    build=lambda n, k, d, width, heads: DeepSets(d, width),
    # No param_count: attnsweep counts the parameters on torch's meta device.
    # Kept for backward, per sample: the (n, 3d) input, the (n, width) hidden layer before and after GELU.
    activations=lambda n, k, d, width, heads: n * (3 * d + 2 * width) + 2 * d,
    description="DeepSets: one MLP per row of X beside mean(X) and mean(K); permutation-equivariant",
)
