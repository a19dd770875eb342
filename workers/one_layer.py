"""The one-layer CLS transformer of workers/models.py, forward and backward by hand, one trial
at a time: the training step of the sparse-Boolean experiment at large T.

The model is :class:`workers.models.CLSTransformer` with one block (Edelman et al., ICML
2022, section 5): its parameters are the same tensors under the same names, and
:func:`forward` computes the same function as :meth:`CLSTransformer.forward_matmul` (whose
docstring derives the one-product form). What this module adds is the backward pass written
out, so that a training step is a handful of matrix products over the ``(2T, .)`` tables and
one pair over the training set, with no autograd graph and no ``vmap``:

* forward: the tables of the 2T (position, bit) pairs: LayerNorm of tok[b] + pos[t], their
  [CLS]-query scores ``S`` ``(2T, H)`` and values ``V`` ``(2T, d)``; ``W = [E | E * V]``
  with ``E = exp(S - M)``, in two halves ``W0``, ``W1`` by bit; then the sums over the
  samples' picks ``ACC = (1 - X) W0 + X W1`` ``(m, H + d)``, the softmax ratio, the
  feed-forward layer and the readout;
* backward: ``dW1 = dACC^T X``, ``dW0 = dACC^T (1 - X)``, then back through the tables
  (the chain rule of each line of the forward, in reverse; derivations inline).

The products over the samples run over the T bits, not the 2T one-hot columns
(``(1 - X) W0 + X W1 = 1 W0 + X (W1 - W0)``, and ``dACC^T (1 - X) = colsum(dACC) - dACC^T X``),
which halves their arithmetic and the bytes of the training set they read. Both forms can
cancel: when a few entries of ``E`` dominate and a sample avoids them, its denominator is
small (and its ``dACC`` large), and a rounding of the large terms would swamp it.
:func:`tables` therefore bounds that loss by ``kappa`` (the ratio of the largest to the
smallest denominator any sample can have), and the T-bit forms are taken only while
``kappa <= KAPPA_MAX``; beyond it, the two products of the one-hot form, whose terms are
picked, not subtracted.

One trial's arithmetic is the same whatever else runs beside it: every product and every
elementwise pass is over that trial's own tensors, of shapes fixed by its settings (T, d,
H, m), so a trial's result does not depend on its packmates (tests/workers/test_one_layer.py
compares trials trained alone and in packs bit for bit).

Shapes: d the width, H heads, dh = d / H, T context length, m samples; ``x`` is the samples'
bits ``(m, T)`` as 0.0/1.0 in the parameters' dtype (:func:`bits_as_float`). LayerNorm uses
eps 1e-5 and GELU the exact erf form, as torch.nn's defaults do in the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

EPS = 1e-5
"""LayerNorm's epsilon (``torch.nn.LayerNorm``'s default, which the model uses)."""

KAPPA_MAX = 32.0
"""Largest ``kappa`` for which :func:`head` and :func:`backward` sum over the T bits
(``1 W0 + X (W1 - W0)``, ``colsum(dACC) - dACC^T X``).

The rounding of that form, relative to a sample's denominator Z (and to the largest value
for the numerators), is at most about ``3 kappa`` times the unit round-off, against about
one for the one-hot form (whose terms are all positive): with kappa <= 32 the T-bit form
rounds at most ~100 units (6e-6 in float32) off, below the float32 noise of the LayerNorms
around it, and the test compares both forms with float64. Measured while training (T = 64
to 8192, the decades' settings), kappa starts near 1.5, stays below 7 at T = 8192 and
passes 32 only near the end of training at T <= 256, where the products are cheap anyway.
"""

NAMES = (
    "pos",
    "cls",
    "tok.weight",
    "blocks.0.ln1.weight",
    "blocks.0.ln1.bias",
    "blocks.0.ln2.weight",
    "blocks.0.ln2.bias",
    "blocks.0.attn.q.weight",
    "blocks.0.attn.k.weight",
    "blocks.0.attn.v.weight",
    "blocks.0.ffn.0.weight",
    "blocks.0.ffn.0.bias",
    "blocks.0.ffn.2.weight",
    "blocks.0.ffn.2.bias",
    "ln_f.weight",
    "ln_f.bias",
    "readout.weight",
    "readout.bias",
)
"""The parameters of a one-layer ``CLSTransformer``, in the order its ``named_parameters`` gives them."""


@dataclass
class Tables:
    """What the forward pass over the 2T (position, bit) pairs leaves for the backward."""

    tab_in: torch.Tensor  # (2T, d) tok[b] + pos[1 + t], bit-major
    tab_mean: torch.Tensor  # (2T, 1)
    tab_rstd: torch.Tensor  # (2T, 1)
    tab: torch.Tensor  # (2T, d) LN1 of tab_in
    cls_in: torch.Tensor  # (d,)
    cls_mean: torch.Tensor  # (1, 1)
    cls_rstd: torch.Tensor  # (1, 1)
    cls_ln: torch.Tensor  # (d,)
    q: torch.Tensor  # (H, dh)
    proj: torch.Tensor  # (H + d, d): [qf^T; W_V], qf the [CLS] query folded into the keys, / sqrt(dh)
    v: torch.Tensor  # (d, 2T) values of the pairs, one row per value coordinate
    e_cls: torch.Tensor  # (H,)
    v_cls: torch.Tensor  # (d,)
    w: torch.Tensor  # (H + d, 2T): [E; E * V], E = exp(score - shift), one row per head or coordinate
    score_range: float  # max_h (shift_h - low_h): the matmul form is exact while within range
    kappa: float  # max_h (e_cls + sum_t max(E0, E1)) / (e_cls + sum_t min(E0, E1)): see KAPPA_MAX

    @property
    def e(self) -> torch.Tensor:
        """E ``(H, 2T)``, a view of ``w``."""
        return self.w[: self.e_cls.shape[0]]


@dataclass
class Head:
    """What the forward pass over the samples leaves for the backward (m samples)."""

    z: torch.Tensor  # (m, H) softmax denominators
    out: torch.Tensor  # (m, d) attention output
    h: torch.Tensor  # (m, d) [CLS] residual after attention
    ln2_mean: torch.Tensor
    ln2_rstd: torch.Tensor
    ln2: torch.Tensor  # (m, d)
    u: torch.Tensor  # (m, 4d) pre-activation
    g: torch.Tensor  # (m, 4d) GELU(u)
    r: torch.Tensor  # (m, d) after the feed-forward layer
    lnf_mean: torch.Tensor
    lnf_rstd: torch.Tensor
    lnf: torch.Tensor  # (m, d)
    logits: torch.Tensor  # (m,)


def tables(p: dict[str, torch.Tensor], heads: int) -> Tables:
    """The forward pass over the 2T (position, bit) pairs (no sample enters here).

    The pairs' scores and values come from one product, ``[qf^T; W_V] @ tab^T`` ``(H + d,
    2T)``, kept with the pairs along rows so that the max, exp and the per-head products run
    over contiguous memory.

    Args:
        p: the trial's parameters (:data:`NAMES`).
        heads: H.
    """
    tok, pos = p["tok.weight"], p["pos"]
    d = tok.shape[1]
    dh = d // heads
    g1, b1 = p["blocks.0.ln1.weight"], p["blocks.0.ln1.bias"]
    tab_in = (tok[:, None, :] + pos[None, 1:, :]).reshape(-1, d)  # (2T, d): bit-major, then position
    tab, tab_mean, tab_rstd = torch.native_layer_norm(tab_in, [d], g1, b1, EPS)  # one fused pass
    cls_in = p["cls"] + pos[0]
    cls_ln, cls_mean, cls_rstd = torch.native_layer_norm(cls_in[None], [d], g1, b1, EPS)
    cls_ln = cls_ln[0]
    wq, wk, wv = (
        p["blocks.0.attn.q.weight"],
        p["blocks.0.attn.k.weight"],
        p["blocks.0.attn.v.weight"],
    )
    q = (wq @ cls_ln).view(heads, dh)
    # q_h . (W_K,h u) = (W_K,h^T q_h) . u: the query folded into the keys (CLSTransformer._score_tables).
    qf_t = torch.einsum("hkd,hk->hd", wk.view(heads, dh, d), q) / math.sqrt(dh)  # (H, d)
    proj = torch.cat([qf_t, wv], 0)  # (H + d, d)
    sv = proj @ tab.t()  # (H + d, 2T): scores, then values
    score, v = sv[:heads], sv[heads:]
    score_cls, v_cls = proj[:heads] @ cls_ln, wv @ cls_ln  # (H,), (d,)
    T = tab.shape[0] // 2
    shift = torch.maximum(score_cls, score.amax(1))  # (H,): every exponential <= 1
    low = torch.maximum(score_cls, torch.minimum(score[:, :T], score[:, T:]).amax(1))
    w = torch.empty_like(sv)
    e = w[:heads]
    torch.exp(score - shift[:, None], out=e)
    _times_heads(v, e, w[heads:])
    e_cls = torch.exp(score_cls - shift)
    # The largest and smallest denominator a sample can have, per head (every pick the larger
    # or the smaller entry of E at each position): their ratio bounds the T-bit form's rounding.
    big = e_cls + torch.maximum(e[:, :T], e[:, T:]).sum(1)
    small = e_cls + torch.minimum(e[:, :T], e[:, T:]).sum(1)
    score_range, kappa = torch.stack([(shift - low).amax(), (big / small).amax()]).tolist()  # one host sync
    return Tables(
        tab_in,
        tab_mean,
        tab_rstd,
        tab,
        cls_in,
        cls_mean,
        cls_rstd,
        cls_ln,
        q,
        proj,
        v,
        e_cls,
        v_cls,
        w,
        score_range,
        kappa,
    )


def _times_heads(rows: torch.Tensor, e: torch.Tensor, out: torch.Tensor) -> None:
    """``out[k] = rows[k] * e[head of k]`` for the ``(d, n)`` rows of the value coordinates
    (head h owns rows h dh .. (h + 1) dh) and ``e`` ``(H, n)``: one multiply per head, since
    torch's kernel broadcasting ``e`` over the middle axis of ``(H, dh, n)`` ran at a third
    of memory speed here (bench/pack_profile.py)."""
    dh = rows.shape[0] // e.shape[0]
    for h in range(e.shape[0]):
        torch.mul(rows[h * dh : (h + 1) * dh], e[h], out=out[h * dh : (h + 1) * dh])


def head(p: dict[str, torch.Tensor], t: Tables, x: torch.Tensor, x0: torch.Tensor | None = None) -> Head:
    """The forward pass over the samples: bits ``x`` ``(m, T)`` as 0.0/1.0 in the tables'
    dtype (and ``x0 = 1 - x`` if the caller keeps it) -> logits ``(m,)`` and what the
    backward needs."""
    heads, d = t.e_cls.shape[0], t.cls_in.shape[0]
    dh = d // heads
    acc = picked_sums(t, x, x0)  # (m, H + d)
    z = t.e_cls + acc[:, :heads]  # (m, H)
    num = (t.e_cls[:, None] * t.v_cls.view(heads, dh)).view(d) + acc[:, heads:]  # (m, d)
    out = (num.view(-1, heads, dh) / z[:, :, None]).view(-1, d)
    h = t.cls_in + out
    ln2, ln2_mean, ln2_rstd = torch.native_layer_norm(h, [d], p["blocks.0.ln2.weight"], p["blocks.0.ln2.bias"], EPS)
    u = torch.addmm(p["blocks.0.ffn.0.bias"], ln2, p["blocks.0.ffn.0.weight"].t())  # (m, 4d)
    g = torch.nn.functional.gelu(u)  # exact (erf) GELU, as nn.GELU()
    r = h + torch.addmm(p["blocks.0.ffn.2.bias"], g, p["blocks.0.ffn.2.weight"].t())
    lnf, lnf_mean, lnf_rstd = torch.native_layer_norm(r, [d], p["ln_f.weight"], p["ln_f.bias"], EPS)
    logits = torch.addmv(p["readout.bias"], lnf, p["readout.weight"][0])
    return Head(z, out, h, ln2_mean, ln2_rstd, ln2, u, g, r, lnf_mean, lnf_rstd, lnf, logits)


def bits_as_float(bits: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Bits ``(..., T)`` (any integer or bool dtype) as 0.0/1.0 in ``dtype``, the form
    :func:`head` multiplies; on CPU through numpy, several times faster than torch's
    uint8-to-float copy here."""
    if bits.device.type == "cpu" and dtype in (torch.float32, torch.float64):
        return torch.from_numpy(
            bits.to(torch.uint8).numpy().astype(np.float32 if dtype == torch.float32 else np.float64)
        )
    return bits.to(dtype)


def picked_sums(t: Tables, x: torch.Tensor, x0: torch.Tensor | None = None) -> torch.Tensor:
    """``ACC = (1 - X) W0 + X W1`` ``(m, H + d)``: each sample's sums of the table entries its
    bits pick (``W0``, ``W1`` the halves of :attr:`Tables.w` by bit, ``(H + d, T)`` each).

    ``1 W0 + X (W1 - W0)``, one product over the T bits, while ``t.kappa <= KAPPA_MAX``;
    else ``(1 - X) W0 + X W1``, two products whose sums have positive terms only (module
    docstring), with ``x0 = 1 - X`` when the caller keeps it (a training set, every epoch).
    """
    T = x.shape[1]
    w0, w1 = t.w[:, :T], t.w[:, T:]
    if t.kappa <= KAPPA_MAX:
        return torch.addmm(w0.sum(1), x, (w1 - w0).t())
    return torch.addmm(x @ w1.t(), 1 - x if x0 is None else x0, w0.t())


def forward(p: dict[str, torch.Tensor], heads: int, x: torch.Tensor) -> torch.Tensor:
    """Logits ``(m,)`` of the samples' bits ``x`` ``(m, T)`` (0.0/1.0); the score range is
    not checked here (see :func:`tables`, :func:`workers.models.score_range_safe`)."""
    return head(p, tables(p, heads), x).logits


def _ln_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) through y = LayerNorm(x) * weight + bias (torch's fused kernel)."""
    return torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean, rstd, weight, bias, [True, True, True])


def backward(
    p: dict[str, torch.Tensor],
    t: Tables,
    hd: Head,
    x: torch.Tensor,
    dlogits: torch.Tensor,
    x0: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Every parameter's gradient of sum(dlogits * logits), by the chain rule through
    :func:`head` and :func:`tables` in reverse.

    Args:
        dlogits: ``(m,)`` the loss's derivative with respect to each logit.

    Returns:
        The gradients keyed as :data:`NAMES`, each shaped as its parameter.
    """
    heads, d = t.e_cls.shape[0], t.cls_in.shape[0]
    dh = d // heads
    grads: dict[str, torch.Tensor] = {}
    # Readout and the final LayerNorm.
    grads["readout.weight"] = (dlogits @ hd.lnf)[None]
    grads["readout.bias"] = dlogits.sum()[None]
    dlnf = torch.outer(dlogits, p["readout.weight"][0])  # (m, d)
    dr, grads["ln_f.weight"], grads["ln_f.bias"] = _ln_backward(
        dlnf, hd.r, hd.lnf_mean, hd.lnf_rstd, p["ln_f.weight"], p["ln_f.bias"]
    )
    # Feed-forward layer: r = h + W2 GELU(W1 LN2(h) + b1) + b2.
    w1, w2 = p["blocks.0.ffn.0.weight"], p["blocks.0.ffn.2.weight"]
    grads["blocks.0.ffn.2.weight"] = dr.t() @ hd.g
    grads["blocks.0.ffn.2.bias"] = dr.sum(0)
    du = torch.ops.aten.gelu_backward(dr @ w2, hd.u)  # GELU'(u) = Phi(u) + u phi(u)
    grads["blocks.0.ffn.0.weight"] = du.t() @ hd.ln2
    grads["blocks.0.ffn.0.bias"] = du.sum(0)
    dh_ln2, grads["blocks.0.ln2.weight"], grads["blocks.0.ln2.bias"] = _ln_backward(
        du @ w1, hd.h, hd.ln2_mean, hd.ln2_rstd, p["blocks.0.ln2.weight"], p["blocks.0.ln2.bias"]
    )
    dh_ = dr + dh_ln2  # (m, d): h = cls_in + out feeds both the residual and LN2
    dcls_in = dh_.sum(0)
    # out = num / z per head: dNUM = dout / z, dz = -sum_k dout_k out_k / z.
    dacc = torch.empty(dh_.shape[0], heads + d, dtype=dh_.dtype, device=dh_.device)  # [dZ | dNUM]
    dnum = dacc[:, heads:].view(-1, heads, dh)
    torch.div(dh_.view(-1, heads, dh), hd.z[:, :, None], out=dnum)
    torch.neg(torch.linalg.vecdot(dnum, hd.out.view(-1, heads, dh)), out=dacc[:, :heads])
    dnum_sum = dnum.sum(0)  # (H, dh)
    de_cls = dacc[:, :heads].sum(0) + (dnum_sum * t.v_cls.view(heads, dh)).sum(-1)
    dv_cls = (t.e_cls[:, None] * dnum_sum).view(d)
    # ACC = (1 - X) W0^T + X W1^T, so dW1 = dACC^T X and dW0 = dACC^T (1 - X) (rows: heads, then
    # coordinates). dACC_i scales like 1 / Z_i, so colsum(dACC) - dW1 cancels as the forward's
    # T-bit form does: the same kappa decides.
    T = x.shape[1]
    dw1 = dacc.t() @ x  # (H + d, T)
    if t.kappa <= KAPPA_MAX:
        dw0 = torch.sub(dacc.sum(0)[:, None], dw1)
    else:
        dw0 = dacc.t() @ (1 - x if x0 is None else x0)
    e = t.e
    dsv = torch.empty_like(t.w)  # [dscore; dV] (H + d, 2T), filled half by half (bit 0, bit 1)
    for b, dwb in enumerate((dw0, dw1)):
        cols = slice(b * T, (b + 1) * T)
        # dE = dW_E + sum over the head's coordinates of dW_V * V; then E = exp(S - M).
        de = dwb[:heads] + (dwb[heads:].view(heads, dh, T) * t.v[:, cols].view(heads, dh, T)).sum(1)
        torch.mul(de, e[:, cols], out=dsv[:heads, cols])
        _times_heads(dwb[heads:], e[:, cols], dsv[heads:, cols])
    dscore_cls = de_cls * t.e_cls  # the shift M carries no gradient (softmax is shift-invariant)
    # [S; V] = proj @ tab^T (proj = [qf^T; W_V]); s_cls = qf^T cls_ln; v_cls = W_V cls_ln.
    wv = p["blocks.0.attn.v.weight"]
    dtab = dsv.t() @ t.proj  # (2T, d)
    dproj = dsv @ t.tab  # (H + d, d)
    dqf_t = dproj[:heads] + torch.outer(dscore_cls, t.cls_ln)  # (H, d)
    grads["blocks.0.attn.v.weight"] = dproj[heads:] + torch.outer(dv_cls, t.cls_ln)
    dcls_ln = t.proj[:heads].t() @ dscore_cls + wv.t() @ dv_cls
    # qf^T[h] = W_K,h^T q_h / sqrt(dh).
    wk = p["blocks.0.attn.k.weight"].view(heads, dh, d)
    scale = 1.0 / math.sqrt(dh)
    grads["blocks.0.attn.k.weight"] = (torch.einsum("hk,hd->hkd", t.q, dqf_t) * scale).reshape(d, d)
    dq = torch.einsum("hkd,hd->hk", wk, dqf_t).reshape(d) * scale
    wq = p["blocks.0.attn.q.weight"]
    grads["blocks.0.attn.q.weight"] = torch.outer(dq, t.cls_ln)
    dcls_ln = dcls_ln + wq.t() @ dq
    # LN1, shared by the [CLS] input and the 2T table rows.
    g1, b1 = p["blocks.0.ln1.weight"], p["blocks.0.ln1.bias"]
    dcls_in_ln, dg1_cls, db1_cls = _ln_backward(dcls_ln[None], t.cls_in[None], t.cls_mean, t.cls_rstd, g1, b1)
    dtab_in, dg1, db1 = _ln_backward(dtab, t.tab_in, t.tab_mean, t.tab_rstd, g1, b1)
    grads["blocks.0.ln1.weight"], grads["blocks.0.ln1.bias"] = dg1 + dg1_cls, db1 + db1_cls
    dcls_in = dcls_in + dcls_in_ln[0]
    # tab_in[b, t] = tok[b] + pos[1 + t]; cls_in = cls + pos[0].
    dtab_in = dtab_in.view(2, -1, d)
    grads["tok.weight"] = dtab_in.sum(1)
    dpos = torch.empty_like(p["pos"])
    dpos[0] = dcls_in
    torch.add(dtab_in[0], dtab_in[1], out=dpos[1:])
    grads["pos"] = dpos
    grads["cls"] = dcls_in
    return grads


def loss_and_grads(
    p: dict[str, torch.Tensor], heads: int, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], float]:
    """One training step's numbers: the mean logistic loss over the m samples (0-d), the
    logits ``(m,)``, every parameter's gradient of the loss, and the score range.

    The loss is the mean of softplus(z) - y z (binary cross-entropy with logits, as
    ``workers.models.logistic_loss``), so d loss / d z = (sigmoid(z) - y) / m.
    """
    t = tables(p, heads)
    hd = head(p, t, x)
    z = hd.logits
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    dlogits = (torch.sigmoid(z) - y) / z.shape[0]
    return loss, z, backward(p, t, hd, x, dlogits), t.score_range
