"""The sparse-Boolean MLP (:class:`workers.models.MLP`) on a stacked pack's parameters
(workers/stacked.py), written out rather than vmapped (:func:`mlp_logits`), and scored in runs of
samples that stay in cache.

What bounds a stacked MLP's step on a CPU is GELU, not its products: its forward and derivative
(torch's kernels, about 0.5 and 0.9 ns an element on this project's machine) cost about as much
as all the products of a T = 16 MLP (bench/packing_cells.py), and they cost the same per trial
stacked or not, so stacking gains at most about 1.6x at m = 256. A hand-written step (the same
kernels into kept buffers, the weight gradients in contiguous layouts) gained 1.0-1.2x and gave
other last bits at some widths (50), so trained rows would have changed: it is not used
(docs/decisions.md). Every slot's numbers are its own: each kernel works slot by slot, and every
elementwise tensor holds a multiple of :data:`workers.stacked.LANES` slots, as a pack's do.
"""

from __future__ import annotations

import torch


def hidden_layers(params: dict[str, torch.Tensor]) -> int:
    """The number of GELU hidden layers of an MLP's (stacked or not) parameters, by name."""
    return sum(1 for k in params if k.startswith("hidden.") and k.endswith(".0.weight"))


SCORE_ROWS = 2**14
"""Without a graph, :func:`mlp_logits` runs ``SCORE_ROWS // width`` samples of every slot at a
time (64 at width 256: 2 MB per ``(32 slots, samples, width)`` tensor; the last run takes the
remainder), so a pack's scoring on
thousands of test samples stays in cache instead of filling ``(slots, n_test, width)`` tensors
of tens of MB: 3.5x faster on 2000 samples (T = 16, width 256, 32 slots) and bit for bit the
same (tests/workers/test_stacked_mlp.py). A function of the width alone, never of the pack."""


ALIGNED_WIDTH = 16
"""Runs of samples only for widths that are multiples of this many floats (64 bytes), where every
sample's hidden row starts aligned and a run's products give the one-run product's bits: at a
width of 50 they did not (tests/workers/test_stacked_mlp.py), and a row must not change with the
scoring's layout."""


def mlp_logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """:class:`workers.models.MLP` on stacked parameters, written out: bits ``x`` ``(slots, b, T)``
    -> logits ``(slots, b)`` float32. The same function as ``vmap`` of the model, without its
    per-call overhead, which was three quarters of a tiny MLP's step (bench/packing.py). Without
    a graph (scoring) in runs of samples (:data:`SCORE_ROWS`) where the width allows it
    (:data:`ALIGNED_WIDTH`)."""
    width = params["readout.weight"].shape[-1]
    rows = max(1, SCORE_ROWS // width)
    if torch.is_grad_enabled() or x.shape[1] < 2 * rows or width % ALIGNED_WIDTH:
        return _logits(params, x)
    # Runs of rows to 2 rows - 1 samples (the last takes the remainder): a run of 1-3 samples
    # took another product kernel in MKL, with other last bits.
    starts = list(range(0, x.shape[1] - rows + 1, rows))
    ends = starts[1:] + [x.shape[1]]
    return torch.cat([_logits(params, x[:, a:e]) for a, e in zip(starts, ends, strict=True)], 1)


def _logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    h = 2.0 * x.float() - 1.0
    for i in range(hidden_layers(params)):
        w, b = (
            params[f"hidden.{i}.0.weight"],
            params[f"hidden.{i}.0.bias"],
        )  # (slots, out, in), (slots, out)
        h = torch.nn.functional.gelu(torch.baddbmm(b[:, None, :], h, w.transpose(1, 2)))
    w, b = params["readout.weight"], params["readout.bias"]
    return torch.baddbmm(b[:, None, :], h, w.transpose(1, 2)).squeeze(-1)
