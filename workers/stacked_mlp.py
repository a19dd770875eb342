"""The sparse-Boolean MLP (:class:`workers.models.MLP`) on a stacked pack's parameters
(workers/stacked.py), written out rather than vmapped: its forward (:func:`mlp_logits`) and a
hand-written training step (:func:`mlp_step`).

Why a hand-written step. Autograd through :func:`mlp_logits` allocated fresh ``(slots, m,
width)`` tensors every step (page faults and cold caches on each) and took the readout's weight
gradient as ``h^T g`` with ``h`` transposed, a strided matrix-vector product about 7x slower
than the same sum as ``g^T h`` (32 slots, m = 256, T = 16, width 256: 2.3 against 0.35 ms).
:func:`mlp_step` computes the same gradients by the same kernels (``baddbmm``, ``gelu``,
``gelu_backward``, ``bmm``) into buffers a pack keeps from step to step (``work``), with the two
weight gradients as contiguous ``g^T h`` and ``dz^T h``, and the rank-one ``g r^T`` as a product
instead of a K = 1 ``bmm`` (the same single rounding). What it cannot remove is GELU: its
forward and derivative (torch's kernels, about 0.5 and 0.9 ns an element on this project's
machine) cost about as much as all the products of a T = 16 MLP (bench/packing_cells.py).

Rounding. The forward, the loss and its gradient are autograd's own ops, so the logits and loss
are those of :func:`mlp_logits` bit for bit. The weight gradients sum the same products over the
samples in another operand layout, which MKL may order differently: on the sweeps' MLP shapes
(width 256, T = 8..256) they equal autograd's bit for bit (tests/workers/test_stacked_mlp.py);
at widths 50 and 100 they differed by up to 1.3 float32 ulps of the largest gradient. Every
slot's numbers are its own: each kernel works slot by slot, and every elementwise tensor holds
a multiple of :data:`workers.stacked.LANES` slots, as a pack's do.
"""

from __future__ import annotations

import torch

from attnsweep.workers.models import logistic_loss


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


def mlp_logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """:class:`workers.models.MLP` on stacked parameters, written out: bits ``x`` ``(slots, b, T)``
    -> logits ``(slots, b)`` float32. The same function as ``vmap`` of the model, without its
    per-call overhead, which was three quarters of a tiny MLP's step (bench/packing.py). Without
    a graph (scoring) in runs of samples (:data:`SCORE_ROWS`)."""
    width = params["readout.weight"].shape[-1]
    rows = max(1, SCORE_ROWS // width)
    if torch.is_grad_enabled() or x.shape[1] < 2 * rows:
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


def mlp_step(
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    work: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Each slot's mean logistic loss, logits and parameter gradients of the stacked MLP, by
    hand (module docstring): what ``logistic_loss(mlp_logits(params, x), y)`` and autograd of
    its sum give, in float32.

    Args:
        params: name -> ``(slots, ...)`` float32 stacked parameters of
            :class:`workers.models.MLP` (``hidden.{i}.0.weight`` ``(slots, out, in)``,
            ``hidden.{i}.0.bias`` ``(slots, out)``, ``readout.weight`` ``(slots, 1, width)``,
            ``readout.bias`` ``(slots, 1)``); read, never written or differentiated.
        x: ``(slots, b, T)`` bits (0/1, any dtype).
        y: ``(slots, b)`` float32 labels (0/1).
        work: a dict the caller keeps from one step to the next (one per pack) for the
            ``(slots, b, width)`` buffers, which are reused while their shapes hold; None: fresh
            buffers (the same numbers, slower). The returned logits and gradients never alias it.

    Returns:
        ``(loss, logits, grads)``: ``loss`` ``(slots,)`` float32 (detached), ``logits``
        ``(slots, b)`` float32, ``grads`` name -> a contiguous float32 tensor shaped as
        ``params[name]``, for every name of ``params``.

    Raises:
        KeyError: ``params`` lacks a name above. RuntimeError (torch's): shapes that disagree.
    """
    work = {} if work is None else work

    def buf(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        key = (name, shape)
        if key not in work:
            work[key] = torch.empty(shape, dtype=torch.float32, device=x.device)
        return work[key]

    p = {k: v.detach() for k, v in params.items()}
    slots, b, _ = x.shape
    h = torch.mul(x.float(), 2.0, out=buf("h", tuple(x.shape))).sub_(1.0)  # (slots, b, T): +-1
    hs, zs = [h], []  # each layer's input and pre-activation
    for i in range(hidden_layers(p)):
        w, bias = p[f"hidden.{i}.0.weight"], p[f"hidden.{i}.0.bias"]  # (slots, out, in), (slots, out)
        z = torch.baddbmm(bias[:, None, :], h, w.transpose(1, 2), out=buf(f"z{i}", (slots, b, w.shape[1])))
        h = torch.ops.aten.gelu.out(z, out=buf(f"a{i}", tuple(z.shape)))
        zs.append(z)
        hs.append(h)
    r, br = p["readout.weight"], p["readout.bias"]  # (slots, 1, width), (slots, 1)
    logits = torch.baddbmm(br[:, None, :], h, r.transpose(1, 2)).squeeze(-1)  # (slots, b)
    # The loss and its gradient by autograd's own ops on the logits alone: as the full graph's.
    leaf = logits.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = logistic_loss(leaf, y)
        (g,) = torch.autograd.grad(loss.sum(), leaf)  # (slots, b)
    g3 = g[:, :, None]  # (slots, b, 1)
    grads = {
        "readout.bias": g3.sum(1, keepdim=True).squeeze(-1),  # (slots, 1)
        "readout.weight": torch.bmm(g3.transpose(1, 2), h),  # (slots, 1, width)
    }
    dh = torch.mul(g3, r, out=buf("dh", tuple(h.shape)))  # the rank-one g r^T, exactly as bmm's K = 1
    for i in reversed(range(len(zs))):
        dz = torch.ops.aten.gelu_backward.grad_input(dh, zs[i], grad_input=buf("dz", tuple(zs[i].shape)))
        grads[f"hidden.{i}.0.weight"] = torch.bmm(dz.transpose(1, 2), hs[i])  # (slots, out, in)
        grads[f"hidden.{i}.0.bias"] = dz.sum(1, keepdim=True).squeeze(1)  # (slots, out)
        if i:
            w = p[f"hidden.{i}.0.weight"]
            dh = torch.bmm(dz, w, out=buf("dh", (slots, b, w.shape[2])))
    return loss.detach(), logits, grads
