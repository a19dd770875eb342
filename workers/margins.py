"""The training margin of a sparse-Boolean trial, and that margin relative to the norms the
capacity bound of Edelman et al. counts.

Edelman et al. (ICML 2022, section 4, Theorem 4.2) bound the capacity of one attention head
``f(X) = w^T W_V X^T softmax(X W_QK^T x_cls)`` by a covering number that grows with the
norms of the readout w, of W_V and of W_QK = W_Q W_K^T, and with the inputs' norm B_X, and only
like log T. A bound of that kind is a margin bound: it bounds the test error of a hypothesis
that separates its training set with margin gamma by a term in C / gamma, where C is the
bound's complexity term in those norms. So at a fixed norm bound the sample size the bound asks
for grows like (C / gamma)^2 log T, and a margin that shrinks with T is enough to make it grow
faster than log T.

Definitions (docs/method.md, "Margins"):

* ``margin``: gamma = min_i y_i f(x_i) over the training set, y_i = +-1 (the label 1 -> +1) and
  f the logit; negative when a sample is misclassified.
* ``input_norm``: B_X, the largest Euclidean norm of an input a head reads: the LayerNorm before
  each head gives sqrt(d) * max|gain| + ||bias||, so exactly sqrt(d) with ``ln_affine`` false
  (gain 1 and bias 0; LayerNorm's eps makes it smaller by a relative 1e-5 / 2 at most).
* ``margin_normalised``: gamma / C with
  ``C = ||w|| ||W_V|| B_X (1 + ||W_QK|| B_X^2 / sqrt(d_h))``: the two ways the head's output
  moves with its counted matrices, the value path (w and W_V, over inputs of norm B_X) and the
  score path (W_QK, whose scores x^T W_QK x' / sqrt(d_h) are at most ||W_QK|| B_X^2 / sqrt(d_h)
  in any norm at least the spectral one, through a softmax that is 1-Lipschitz), each norm the
  largest over heads and layers in the ``norm_kind`` the bound uses. The theorem combines the same
  norms with its own constants and powers; C keeps how it depends on each of them, which is what
  a comparison along T at a fixed bound reads (docs/decisions.md). Not counted, as the bound does
  not count them: the feed-forward layer and the LayerNorms after the head.

The MLP baseline has a margin but no normalised one (null): the theorem's bound is about the head.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from attnsweep.workers.norms import transformer_norms


def signed_margin(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """min_i y_i f(x_i) over the last axis: logits ``(..., m)`` and 0/1 labels ``(..., m)`` ->
    ``(...)`` in the logits' dtype (no host sync)."""
    return ((2 * y.to(logits.dtype) - 1) * logits).amin(-1)


def input_norm(params: Mapping[str, torch.Tensor], d: int) -> torch.Tensor:
    """B_X per trial of stacked parameters ``(trials, ...)``: the largest over layers of
    ``sqrt(d) max|gain| + ||bias||`` of the LayerNorm before each head, ``(trials,)`` float32;
    sqrt(d) where that LayerNorm does not train (its gain and bias are not in ``params``)."""
    bounds = []
    for name, gain in params.items():
        if name.endswith(".ln1.weight"):
            bias = params[name[: -len("weight")] + "bias"]
            bounds.append(math.sqrt(d) * gain.abs().amax(-1) + bias.norm(dim=-1))
    if not bounds:
        first = next(iter(params.values()))
        return torch.full((first.shape[0],), math.sqrt(d), dtype=torch.float32, device=first.device)
    return torch.stack(bounds).amax(0).float()


def complexity(norms: Mapping[str, torch.Tensor], b_x: torch.Tensor, d: int, heads: int) -> torch.Tensor:
    """C = ||w|| ||W_V|| B_X (1 + ||W_QK|| B_X^2 / sqrt(d/heads)) elementwise over ``(trials,)``
    (the module docstring; Edelman et al., section 4)."""
    score = norms["norm_qk"] * b_x**2 / math.sqrt(d // heads)
    return norms["norm_readout"] * norms["norm_v"] * b_x * (1 + score)


def head_measures(params: Mapping[str, torch.Tensor], d: int, heads: int, kind: str) -> dict[str, torch.Tensor]:
    """The achieved norms (:func:`workers.norms.transformer_norms`), ``input_norm`` and the
    complexity term ``complexity`` of stacked transformer parameters, each ``(trials,)``."""
    norms = transformer_norms(dict(params), heads, kind)
    b_x = input_norm(params, d)
    return {**norms, "input_norm": b_x, "complexity": complexity(norms, b_x, d, heads)}


def margin_columns(margin: float, measures: Mapping[str, float | None]) -> dict[str, float | None]:
    """A trial's ``margin``, ``margin_normalised`` (null without a complexity term, or when
    it is not a positive finite number) and ``input_norm`` for its row."""
    c = measures.get("complexity")
    finite = margin is not None and math.isfinite(margin)
    normalised = margin / c if finite and c is not None and math.isfinite(c) and c > 0 else None
    return dict(margin=margin if finite else None, margin_normalised=normalised, input_norm=measures.get("input_norm"))
