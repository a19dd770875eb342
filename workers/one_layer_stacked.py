"""The hand-written one-layer training step of workers/one_layer.py for S trials at once, with
every parameter stacked along a leading *slot* axis.

The model is :class:`workers.models.CLSTransformer` with one block (Edelman et al., ICML 2022,
section 5), and each slot computes exactly what :func:`workers.one_layer.loss_and_grads`
computes for that trial alone: the function of :meth:`CLSTransformer.forward_matmul`, its mean
logistic loss over the slot's m samples and every parameter's gradient of it. The derivations
are those of workers/one_layer.py, line for line; here every product is a batched product over
the slot axis (``torch.bmm``, ``baddbmm`` or an ``einsum`` with the slot first) and every
elementwise pass covers all slots at once.

Two differences from the one-trial step, both so that nothing depends on the values:

* the sums over the samples' picks always take the one-hot form, ``ACC = (1 - X) W0^T + X
  W1^T`` and ``dW0 = dACC^T (1 - X)``, ``dW1 = dACC^T X``, whose terms are all positive, so
  no slot ever needs the T-bit form's ``kappa`` test (workers/one_layer.py, ``KAPPA_MAX``);
* the score range is returned as a ``(S,)`` tensor, with no host sync, and the caller
  decides what to do with a slot beyond :func:`workers.models.score_range_safe`.

The LayerNorm gains and biases differ per slot, and torch's fused LayerNorm kernels take one
1-D weight, so the kernels normalise only (``weight=None``) and the affine part and its
gradients are written out here.

A slot's numbers depend on that slot's tensors only: no reduction runs across the slot axis,
and every operation has the same per-slot shape whatever S is. On the CPU with one thread they
are the same bit for bit wherever the slot sits, in stacks of 32 or 64 with any packmates
(tests/workers/test_one_layer_stacked.py); elsewhere (several threads, CUDA, whose batched
products may pick their kernel by the batch count) that is not tested here.

Shapes: S slots, d the width, H heads, dh = d / H, T context length, m samples per slot.
Parameters as :data:`workers.one_layer.NAMES`, each with a leading S: ``pos`` ``(S, T + 1,
d)``, ``cls`` ``(S, d)``, ``tok.weight`` ``(S, 2, d)``, LayerNorm weights and biases ``(S,
d)``, ``attn.{q,k,v}.weight`` ``(S, d, d)``, ``ffn.0.weight`` ``(S, 4d, d)``, ``ffn.0.bias``
``(S, 4d)``, ``ffn.2.weight`` ``(S, d, 4d)``, ``ffn.2.bias`` ``(S, d)``, ``readout.weight``
``(S, 1, d)``, ``readout.bias`` ``(S, 1)`` (the layout ``torch.func.stack_module_state``
gives). LayerNorm eps 1e-5 and the exact (erf) GELU, as the model's torch.nn defaults.
"""

from __future__ import annotations

import math

import torch

from attnsweep.workers.one_layer import EPS

_P = "blocks.0."


def _ln(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    """LayerNorm over the last dim of ``x`` ``(S, rows, d)`` with per-slot ``weight``, ``bias``
    ``(S, d)``: returns (y, xhat, mean, rstd), xhat the normalised rows (what the gain's
    gradient needs), mean and rstd ``(S, rows, 1)`` for the fused backward."""
    xhat, mean, rstd = torch.native_layer_norm(x, [x.shape[-1]], None, None, EPS)
    return torch.addcmul(bias[:, None, :], xhat, weight[:, None, :]), xhat, mean, rstd


def _ln_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    xhat: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) through y = xhat * weight + bias per slot: dweight = sum over rows
    of dy * xhat, dbias = sum over rows of dy (each ``(S, d)``), and dx from torch's fused
    backward of the normalisation fed dxhat = dy * weight."""
    dx = torch.ops.aten.native_layer_norm_backward(
        dy * weight[:, None, :], x, [x.shape[-1]], mean, rstd, None, None, [True, False, False]
    )[0]
    return dx, (dy * xhat).sum(1), dy.sum(1)


def loss_and_grads_stacked(
    p: dict[str, torch.Tensor], heads: int, x: torch.Tensor, y: torch.Tensor, backward: bool = True
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """One training step for S stacked trials of the same (T, d, H, m).

    Args:
        p: every name of :data:`workers.one_layer.NAMES` (``pos`` included, learned or not) to
            its stacked tensor ``(S, *shape)`` (module docstring), float32 or float64, all one
            dtype and device.
        heads: H (d divisible by H).
        x: the samples' bits ``(S, m, T)`` as 0.0/1.0 in ``p``'s dtype
            (:func:`workers.one_layer.bits_as_float`).
        y: the labels ``(S, m)`` as 0.0/1.0 in ``p``'s dtype.
        backward: False to stop after the forward (scoring): ``grads`` is then empty.

    Returns:
        ``loss`` ``(S,)``: each slot's mean of softplus(z) - y z over its m samples (binary
        cross-entropy with logits, as ``workers.models.logistic_loss``); ``logits`` ``(S,
        m)``; ``grads``: each name of ``p`` to the gradient of that slot's loss, shaped as
        ``p[name]`` (``pos`` too: a caller with untrained positions ignores it);
        ``score_range`` ``(S,)``: max over heads of M_h - L_h
        (:meth:`workers.models.CLSTransformer.forward_matmul`), the logits being exact while
        it is within :func:`workers.models.score_range_safe`. All in ``p``'s dtype, on its
        device; nothing is copied to the host.
    """
    # ---- forward over the 2T (position, bit) pairs: one_layer.tables, per slot ----
    tok, pos = p["tok.weight"], p["pos"]
    S, _, d = tok.shape
    T = pos.shape[1] - 1
    dh = d // heads
    scale = 1.0 / math.sqrt(dh)
    g1, b1 = p[_P + "ln1.weight"], p[_P + "ln1.bias"]
    tab_in = (tok[:, :, None, :] + pos[:, None, 1:, :]).reshape(S, 2 * T, d)  # bit-major, then position
    tab, tab_hat, tab_mean, tab_rstd = _ln(tab_in, g1, b1)  # (S, 2T, d)
    cls_in = (p["cls"] + pos[:, 0])[:, None, :]  # (S, 1, d)
    cls_ln, cls_hat, cls_mean, cls_rstd = _ln(cls_in, g1, b1)  # (S, 1, d)
    wq, wk, wv = p[_P + "attn.q.weight"], p[_P + "attn.k.weight"], p[_P + "attn.v.weight"]
    q = torch.bmm(cls_ln, wq.mT).view(S, heads, dh)
    # q_h . (W_K,h u) = (W_K,h^T q_h) . u: the query folded into the keys.
    qf_t = torch.einsum("shkd,shk->shd", wk.view(S, heads, dh, d), q) * scale  # (S, H, d)
    proj = torch.cat([qf_t, wv], 1)  # (S, H + d, d): [qf^T; W_V]
    sv = torch.bmm(proj, tab.mT)  # (S, H + d, 2T): scores, then values
    sv_cls = torch.bmm(proj, cls_ln.mT)[..., 0]  # (S, H + d)
    score, v = sv[:, :heads], sv[:, heads:]
    score_cls, v_cls = sv_cls[:, :heads], sv_cls[:, heads:]
    shift = torch.maximum(score_cls, score.amax(2))  # (S, H): every exponential <= 1
    low = torch.maximum(score_cls, torch.minimum(score[..., :T], score[..., T:]).amax(2))
    score_range = (shift - low).amax(1)  # (S,)
    e = torch.exp(score - shift[..., None])  # (S, H, 2T)
    ev = (v.view(S, heads, dh, 2 * T) * e[:, :, None, :]).view(S, d, 2 * T)
    w = torch.cat([e, ev], 1)  # (S, H + d, 2T): [E; E * V]
    e_cls = torch.exp(score_cls - shift)  # (S, H)

    # ---- forward over the samples: one_layer.head, one-hot form ----
    x0 = 1 - x
    acc = torch.baddbmm(torch.bmm(x, w[..., T:].mT), x0, w[..., :T].mT)  # (S, m, H + d)
    m = x.shape[1]
    z = e_cls[:, None, :] + acc[..., :heads]  # (S, m, H) softmax denominators
    num = (e_cls[..., None] * v_cls.view(S, heads, dh)).view(S, 1, d) + acc[..., heads:]  # (S, m, d)
    out = (num.view(S, m, heads, dh) / z[..., None]).view(S, m, d)
    h = cls_in + out
    ln2, ln2_hat, ln2_mean, ln2_rstd = _ln(h, p[_P + "ln2.weight"], p[_P + "ln2.bias"])
    w1, w2 = p[_P + "ffn.0.weight"], p[_P + "ffn.2.weight"]
    u = torch.baddbmm(p[_P + "ffn.0.bias"][:, None, :], ln2, w1.mT)  # (S, m, 4d)
    g = torch.nn.functional.gelu(u)  # exact (erf) GELU, as nn.GELU()
    r = h + torch.baddbmm(p[_P + "ffn.2.bias"][:, None, :], g, w2.mT)  # (S, m, d)
    lnf, lnf_hat, lnf_mean, lnf_rstd = _ln(r, p["ln_f.weight"], p["ln_f.bias"])
    ro = p["readout.weight"]  # (S, 1, d)
    logits = torch.baddbmm(p["readout.bias"][:, :, None], lnf, ro.mT)[..., 0]  # (S, m)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none").mean(1)
    if not backward:
        return loss, logits, {}, score_range
    dlogits = (torch.sigmoid(logits) - y) / m  # d loss / d z per slot

    # ---- backward over the samples: one_layer.backward, first half ----
    grads: dict[str, torch.Tensor] = {}
    grads["readout.weight"] = torch.bmm(dlogits[:, None, :], lnf)  # (S, 1, d)
    grads["readout.bias"] = dlogits.sum(1, keepdim=True)  # (S, 1)
    dlnf = dlogits[..., None] * ro  # (S, m, d)
    dr, grads["ln_f.weight"], grads["ln_f.bias"] = _ln_backward(dlnf, r, lnf_hat, lnf_mean, lnf_rstd, p["ln_f.weight"])
    # r = h + W2 GELU(W1 LN2(h) + b1) + b2.
    grads[_P + "ffn.2.weight"] = torch.bmm(dr.mT, g)  # (S, d, 4d)
    grads[_P + "ffn.2.bias"] = dr.sum(1)
    du = torch.ops.aten.gelu_backward(torch.bmm(dr, w2), u)  # GELU'(u) = Phi(u) + u phi(u)
    grads[_P + "ffn.0.weight"] = torch.bmm(du.mT, ln2)  # (S, 4d, d)
    grads[_P + "ffn.0.bias"] = du.sum(1)
    dh_ln2, grads[_P + "ln2.weight"], grads[_P + "ln2.bias"] = _ln_backward(
        torch.bmm(du, w1), h, ln2_hat, ln2_mean, ln2_rstd, p[_P + "ln2.weight"]
    )
    dh_ = dr + dh_ln2  # (S, m, d): h = cls_in + out feeds both the residual and LN2
    dcls_in = dh_.sum(1)  # (S, d)
    # out = num / z per head: dNUM = dout / z, dz = -sum_k dout_k out_k / z.
    dnum = dh_.view(S, m, heads, dh) / z[..., None]
    dz = -(dnum * out.view(S, m, heads, dh)).sum(-1)  # (S, m, H)
    dacc = torch.cat([dz, dnum.view(S, m, d)], -1)  # (S, m, H + d)
    dnum_sum = dnum.sum(1)  # (S, H, dh)
    de_cls = dz.sum(1) + (dnum_sum * v_cls.view(S, heads, dh)).sum(-1)  # (S, H)
    dv_cls = (e_cls[..., None] * dnum_sum).view(S, d)
    # ACC = (1 - X) W0^T + X W1^T: both products, every term picked, never subtracted.
    dw = torch.cat([torch.bmm(dacc.mT, x0), torch.bmm(dacc.mT, x)], -1)  # (S, H + d, 2T): [dW0 | dW1]

    # ---- backward over the tables: one_layer.backward, second half ----
    dwv = dw[:, heads:].view(S, heads, dh, 2 * T)
    # dE = dW_E + sum over the head's coordinates of dW_V * V; then E = exp(S - M).
    de = dw[:, :heads] + (dwv * v.view(S, heads, dh, 2 * T)).sum(2)  # (S, H, 2T)
    dsv = torch.cat([de * e, (dwv * e[:, :, None, :]).view(S, d, 2 * T)], 1)  # (S, H + d, 2T): [dscore; dV]
    dscore_cls = de_cls * e_cls  # the shift M carries no gradient (softmax is shift-invariant)
    # [S; V] = proj @ tab^T; [s_cls; v_cls] = proj @ cls_ln.
    dsv_cls = torch.cat([dscore_cls, dv_cls], 1)[:, :, None]  # (S, H + d, 1)
    dtab = torch.bmm(dsv.mT, proj)  # (S, 2T, d)
    dproj = torch.baddbmm(torch.bmm(dsv, tab), dsv_cls, cls_ln)  # (S, H + d, d)
    dcls_ln = torch.bmm(dsv_cls.mT, proj)  # (S, 1, d)
    grads[_P + "attn.v.weight"] = dproj[:, heads:]
    dqf_t = dproj[:, :heads]  # (S, H, d)
    # qf^T[h] = W_K,h^T q_h / sqrt(dh).
    grads[_P + "attn.k.weight"] = (torch.einsum("shk,shd->shkd", q, dqf_t) * scale).reshape(S, d, d)
    dq = (torch.einsum("shkd,shd->shk", wk.view(S, heads, dh, d), dqf_t) * scale).reshape(S, 1, d)
    grads[_P + "attn.q.weight"] = torch.bmm(dq.mT, cls_ln)  # (S, d, d)
    dcls_ln = torch.baddbmm(dcls_ln, dq, wq)
    # LN1, shared by the [CLS] input and the 2T table rows.
    dtab_in, dg1, db1 = _ln_backward(dtab, tab_in, tab_hat, tab_mean, tab_rstd, g1)
    dcls_in_ln, dg1_cls, db1_cls = _ln_backward(dcls_ln, cls_in, cls_hat, cls_mean, cls_rstd, g1)
    grads[_P + "ln1.weight"], grads[_P + "ln1.bias"] = dg1 + dg1_cls, db1 + db1_cls
    dcls_in = dcls_in + dcls_in_ln[:, 0]
    # tab_in[b, t] = tok[b] + pos[1 + t]; cls_in = cls + pos[0].
    dtab_in = dtab_in.view(S, 2, T, d)
    grads["tok.weight"] = dtab_in.sum(2)
    grads["pos"] = torch.cat([dcls_in[:, None, :], dtab_in[:, 0] + dtab_in[:, 1]], 1)  # (S, T + 1, d)
    grads["cls"] = dcls_in
    return loss, logits, grads, score_range
