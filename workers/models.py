"""Models for the sparse Boolean experiment.

``CLSTransformer`` is the model of Edelman et al. (ICML 2022, section 5): token and position
embeddings, a learned [CLS] token, L pre-LayerNorm self-attention blocks and a linear
readout of the [CLS] position ("scalar self-attention output"). ``MLP`` is the baseline on
the flattened bits. Both map ``(n, T)`` bits to ``(n,)`` logits.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class SelfAttention(nn.Module):
    """Multi-head softmax attention with separate W_Q, W_K, W_V and no output projection.

    Head h scores tokens with the bilinear form x_i^T (W_Q,h^T W_K,h) x_j / sqrt(d/H) and
    outputs W_V,h x_j; the heads are concatenated. Keeping W_Q, W_K, W_V as plain
    ``(d, d)`` matrices lets the norm bound act on exactly the products the theory uses.
    """

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)

    def forward(self, h: torch.Tensor, cls_only: bool = False) -> torch.Tensor:
        """``h`` ``(n, L, d)`` -> ``(n, L, d)``, or ``(n, 1, d)`` for the [CLS] query alone."""
        n, L, d = h.shape
        queries = h[:, :1] if cls_only else h
        q = self.q(queries).view(n, -1, self.heads, self.dh).transpose(1, 2)  # (n, H, Lq, dh)
        k = self.k(h).view(n, L, self.heads, self.dh).transpose(1, 2)  # (n, H, L, dh)
        v = self.v(h).view(n, L, self.heads, self.dh).transpose(1, 2)  # (n, H, L, dh)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)  # (n,H,Lq,L)
        return (att @ v).transpose(1, 2).reshape(n, -1, d)


class Block(nn.Module):
    """Pre-LayerNorm attention then a 4d-wide GELU feed-forward layer, each residual."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, h: torch.Tensor, cls_only: bool = False) -> torch.Tensor:
        h = (h[:, :1] if cls_only else h) + self.attn(self.ln1(h), cls_only)
        return h + self.ffn(self.ln2(h))


def position_codes(T: int, d: int, kind: str) -> torch.Tensor:
    """Untrained position codes ``(T + 1, d)`` float32, row 0 for [CLS].

    ``"fixed"``: i.i.d. N(0, 1), drawn once from a generator seeded by (T, d) alone
    (``tasks.derive_seed("positions", "fixed", T, d)``), so every trial of a cell, and every
    cell of the same T and d, sees the same codes. ``"sinusoidal"``: Vaswani et al. (2017),
    section 3.5: ``PE[t, 2i] = sin(t / 10000^(2i/d))``, ``PE[t, 2i+1] = cos(t / 10000^(2i/d))``.

    Raises:
        ValueError: another kind.
    """
    if kind == "fixed":
        from attnsweep.tasks import derive_seed

        g = torch.Generator().manual_seed(derive_seed("positions", "fixed", T, d))
        return torch.randn(T + 1, d, generator=g)
    if kind == "sinusoidal":
        t = torch.arange(T + 1, dtype=torch.float64)[:, None]
        freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        pe = torch.zeros(T + 1, d, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(t * freq)
        pe[:, 1::2] = torch.cos(t * freq[: d // 2])
        return pe.float()
    raise ValueError(f"positions must be 'learned', 'fixed' or 'sinusoidal', got {kind!r}")


class CLSTransformer(nn.Module):
    """Bits ``(n, T)`` -> logits ``(n,)`` read off the [CLS] position.

    The last block computes only the [CLS] query, since no other position reaches the
    readout: memory per sample is O(T d) instead of O(T^2) for a one-layer model.
    """

    def __init__(self, T: int, d: int = 32, layers: int = 1, heads: int = 1, positions: str = "learned"):
        super().__init__()
        self.tok = nn.Embedding(2, d)
        if positions == "learned":
            self.pos = nn.Parameter(torch.randn(T + 1, d) * 0.02)  # position 0 is [CLS]
        else:  # a buffer: moved and cast with the model, never trained
            self.register_buffer("pos", position_codes(T, d, positions))
        self.cls = nn.Parameter(torch.randn(d) * 0.02)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.readout = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor, path: str = "auto"):
        """Bits ``(n, T)`` (or, with one layer, their :meth:`encode` ``(n, 2T)``) -> logits ``(n,)``.

        ``path`` picks the computation, all exact: ``"general"`` (any depth),
        ``"table"`` and ``"matmul"`` (one layer only; see the methods). ``"auto"`` takes
        the matmul path and falls back to the table path when the score range is too wide
        for the matmul path's arithmetic (:func:`score_range_safe`). ``"matmul"`` returns
        ``(logits, score_range)`` so that a caller can check the range.

        Raises:
            ValueError: unknown path, or a one-layer path for a deeper model.
        """
        if path == "general" or (path == "auto" and len(self.blocks) > 1):
            return self.forward_general(x)
        if len(self.blocks) != 1 or path not in ("auto", "table", "matmul"):
            raise ValueError(f"path must be 'auto' or 'general', or for one layer 'table' or 'matmul'; got {path!r}")
        if path == "table":
            return self.forward_table(x)
        logits, score_range = self.forward_matmul(x)
        if path == "matmul":
            return logits, score_range
        if score_range > score_range_safe(logits.dtype):
            return self.forward_table(x)
        return logits

    @staticmethod
    def encode(x: torch.Tensor) -> torch.Tensor:
        """Bits ``(..., n, T)`` -> their one-hot ``[1 - x, x]`` ``(..., n, 2T)`` float32.

        Every one-layer path accepts this form in place of the bits (it is what the
        matmul path multiplies), so a caller that uses the same samples many times (a
        training set, every epoch) converts them once. On CPU the conversion goes through
        numpy, about 5x faster here than torch's uint8-to-float copy (bench/pack_profile.py);
        not for use under vmap.
        """
        bits = x.to(torch.uint8)
        both = torch.cat([1 - bits, bits], -1)
        if both.device.type == "cpu":
            return torch.from_numpy(both.numpy().astype(np.float32))
        return both.float()

    def _bits(self, x: torch.Tensor) -> torch.Tensor:
        """The bits ``(n, T)`` of either input form (bits, or :meth:`encode`'s one-hot)."""
        T = self.pos.shape[0] - 1
        return x[..., T:] if x.shape[-1] == 2 * T and x.is_floating_point() else x

    def forward_general(self, x: torch.Tensor) -> torch.Tensor:
        """Any depth: embeds every sample's sequence, ``(n, T)`` -> ``(n,)``."""
        x = self._bits(x)
        n = x.shape[0]
        h = torch.cat([self.cls.expand(n, 1, -1), self.tok(x.long())], dim=1)  # (n, T+1, d)
        h = h + self.pos
        for i, block in enumerate(self.blocks):
            h = block(h, cls_only=i == len(self.blocks) - 1)
        return self.readout(self.ln_f(h[:, 0])).squeeze(-1)  # (n,)

    def _score_tables(self):
        """What one layer's [CLS] attention needs, computed once for all samples.

        Position t > 0 holds tok[x_t] + pos[t], so its LayerNorm, key and value take one
        of 2T values. Returns ``cls_in`` ``(d,)`` (the [CLS] residual), ``score_tab``
        ``(2, T, H)`` (the [CLS] query's score of position t holding bit b), ``score_cls``
        ``(H,)``, ``v_tab`` ``(2, T, H, dh)`` and ``v_cls`` ``(H, dh)``.
        """
        blk = self.blocks[0]
        attn, H, dh = blk.attn, blk.attn.heads, blk.attn.dh
        tab = blk.ln1(self.tok.weight[:, None, :] + self.pos[None, 1:])  # (2, T, d)
        cls_in = self.cls + self.pos[0]  # (d,)
        cls_ln = blk.ln1(cls_in)
        q = attn.q(cls_ln).view(H, dh)
        # q_h . (W_K,h u) = (W_K,h^T q_h) . u: the [CLS] query folded into the keys, so the
        # 2T rows need a (d, H) product instead of the (d, d) key projection.
        q_folded = torch.einsum("hkd,hk->dh", attn.k.weight.view(H, dh, -1), q) / math.sqrt(dh)  # (d, H)
        score_tab = tab @ q_folded  # (2, T, H)
        score_cls = cls_ln @ q_folded  # (H,)
        v_tab = attn.v(tab).view(2, -1, H, dh)
        return cls_in, score_tab, score_cls, v_tab, attn.v(cls_ln).view(H, dh)

    def _head_out(self, cls_in: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """[CLS] residual + attention output ``(n, d)``, then the feed-forward layer and readout."""
        blk = self.blocks[0]
        h = cls_in + out
        h = h + blk.ffn(blk.ln2(h))
        return self.readout(self.ln_f(h)).squeeze(-1)  # (n,)

    def forward_table(self, x: torch.Tensor) -> torch.Tensor:
        """One block, exact for any weights, without materialising ``(n, T+1, d)``.

        Scores are gathered from the ``(2, T, H)`` table, the softmax is taken per sample,
        and the output is a_cls v_cls + (a * (1 - x)) @ V[0] + (a * x) @ V[1]: O(n T H)
        memory and elementwise work. The reference for :meth:`forward_matmul`.
        """
        cls_in, score_tab, score_cls, v_tab, v_cls = self._score_tables()
        H = score_cls.shape[0]
        x = self._bits(x)
        bit = x.to(score_tab.dtype)[..., None]  # (n, T, 1)
        scores = score_tab[0] + bit * (score_tab[1] - score_tab[0])  # (n, T, H)
        scores = torch.cat([score_cls.expand(x.shape[0], 1, H), scores], dim=1)  # (n, T+1, H)
        a = torch.softmax(scores, dim=1)
        a_tok = a[:, 1:]  # (n, T, H)
        out = (
            a[:, 0, :, None] * v_cls
            + torch.einsum("nth,thd->nhd", a_tok * (1 - bit), v_tab[0])
            + torch.einsum("nth,thd->nhd", a_tok * bit, v_tab[1])
        ).reshape(x.shape[0], -1)  # (n, d)
        return self._head_out(cls_in, out)

    def forward_matmul(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One block as one matrix product: ``(n, T)`` -> logits ``(n,)`` and the score range.

        Position t's score is s_b[t, h] for its bit b, so with one shift M_h per head
        (the largest score any sample can have, so every exponential is <= 1) the
        softmax denominator and the value-weighted numerator of sample i are sums over t
        of a table entry picked by the bit:

            Z_ih   = e_cls,h + sum_t [(1 - x_it) e0_th + x_it e1_th]
            num_ih = e_cls,h v_cls,h + sum_t [(1 - x_it) e0_th v0_th + x_it e1_th v1_th]

        with e_b = exp(s_b - M). Both are one product ``[1 - X, X] (n, 2T)`` @ ``(2T, H (1
        + dh))``, and the output is num / Z; no ``(n, T, H)`` tensor is formed. The two
        bit values are kept as separate nonnegative terms (not e0 + x (e1 - e0)) so that
        Z has no cancellation.

        A sample's largest term is at least exp(L_h - M_h), L_h = max(s_cls,h, max_t
        min(s0, s1)), so the result is exact to the dtype's precision while the
        returned score range max_h (M_h - L_h) is within :func:`score_range_safe`;
        :meth:`forward` falls back to :meth:`forward_table` beyond it.
        """
        cls_in, score_tab, score_cls, v_tab, v_cls = self._score_tables()
        T, H, dh = v_tab.shape[1], v_tab.shape[2], v_tab.shape[3]
        with torch.no_grad():  # softmax is shift-invariant: the shift carries no gradient
            shift = torch.maximum(score_cls, score_tab.amax((0, 1)))  # (H,)
            low = torch.maximum(score_cls, score_tab.amin(0).amax(0))  # (H,)
            score_range = (shift - low).amax()
        e_tab = torch.exp(score_tab - shift)  # (2, T, H), each <= 1
        e_cls = torch.exp(score_cls - shift)  # (H,)
        w = torch.cat([e_tab[..., None], e_tab[..., None] * v_tab], -1)  # (2, T, H, 1 + dh)
        if x.shape[-1] == 2 * T and x.is_floating_point():
            both = x.to(w.dtype)  # already encoded
        else:
            bits = x.to(w.dtype)
            both = torch.cat([1 - bits, bits], -1)  # (n, 2T): one-hot of each position's bit
        acc = (both @ w.reshape(2 * T, H * (1 + dh))).view(-1, H, 1 + dh)
        z = e_cls + acc[..., 0]  # (n, H)
        num = e_cls[:, None] * v_cls + acc[..., 1:]  # (n, H, dh)
        out = (num / z[..., None]).reshape(x.shape[0], -1)  # (n, d)
        return self._head_out(cls_in, out), score_range


def score_range_safe(dtype: torch.dtype) -> float:
    """Widest score range (max_h of M_h - L_h, see :meth:`CLSTransformer.forward_matmul`)
    the matmul path takes in ``dtype``: 0.69 of -ln(smallest normal), 60 in float32 and
    bfloat16, 489 in float64, so every sample's largest exponential stays a normal number
    with room below it for the terms that matter."""
    return 0.69 * -math.log(torch.finfo(dtype).tiny)


class MLP(nn.Module):
    """Bits ``(n, T)`` mapped to +-1, then ``layers`` GELU hidden layers, then a logit ``(n,)``."""

    def __init__(self, T: int, width: int = 256, layers: int = 1):
        super().__init__()
        dims = [T] + [width] * layers
        hidden = [nn.Sequential(nn.Linear(a, b), nn.GELU()) for a, b in zip(dims, dims[1:])]
        self.hidden = nn.Sequential(*hidden)
        self.readout = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.hidden(2.0 * x.float() - 1.0)).squeeze(-1)


def logistic_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the last dim: ``(..., n)`` -> ``(...)``."""
    return F.binary_cross_entropy_with_logits(logits, y, reduction="none").mean(-1)
