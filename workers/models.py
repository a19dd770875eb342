"""Models for the sparse Boolean experiment.

``CLSTransformer`` is the model of Edelman et al. (ICML 2022, section 5): token and position
embeddings, a learned [CLS] token, L pre-LayerNorm self-attention blocks and a linear
readout of the [CLS] position ("scalar self-attention output"). ``MLP`` is the baseline on
the flattened bits. Both map ``(n, T)`` bits to ``(n,)`` logits.
"""

from __future__ import annotations

import math

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


class CLSTransformer(nn.Module):
    """Bits ``(n, T)`` -> logits ``(n,)`` read off the [CLS] position.

    The last block computes only the [CLS] query, since no other position reaches the
    readout: memory per sample is O(T d) instead of O(T^2) for a one-layer model.
    """

    def __init__(self, T: int, d: int = 32, layers: int = 1, heads: int = 1):
        super().__init__()
        self.tok = nn.Embedding(2, d)
        self.pos = nn.Parameter(torch.randn(T + 1, d) * 0.02)  # position 0 is [CLS]
        self.cls = nn.Parameter(torch.randn(d) * 0.02)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.readout = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.blocks) == 1:
            return self.forward_one_layer(x)
        return self.forward_general(x)

    def forward_general(self, x: torch.Tensor) -> torch.Tensor:
        """Any depth: embeds every sample's sequence, ``(n, T)`` -> ``(n,)``."""
        n = x.shape[0]
        h = torch.cat([self.cls.expand(n, 1, -1), self.tok(x.long())], dim=1)  # (n, T+1, d)
        h = h + self.pos
        for i, block in enumerate(self.blocks):
            h = block(h, cls_only=i == len(self.blocks) - 1)
        return self.readout(self.ln_f(h[:, 0])).squeeze(-1)  # (n,)

    def forward_one_layer(self, x: torch.Tensor) -> torch.Tensor:
        """One block, computed exactly but without materialising ``(n, T+1, d)``.

        Position j > 0 holds tok[x_j] + pos[j], so its LayerNorm, key and value take one of
        2T values, computed once as tables; the [CLS] query is the same for every sample.
        Scores are gathered from a ``(2, T, H)`` table and the attention output is
        a_cls v_cls + (a * (1 - x)) @ V[0] + (a * x) @ V[1]: O(n T H) memory, not O(n T d).
        """
        blk, H = self.blocks[0], self.blocks[0].attn.heads
        attn, dh = blk.attn, self.blocks[0].attn.dh
        tab = blk.ln1(self.tok.weight[:, None, :] + self.pos[None, 1:])  # (2, T, d)
        cls_in = self.cls + self.pos[0]  # (d,)
        cls_ln = blk.ln1(cls_in)
        q = attn.q(cls_ln).view(H, dh)
        k_tab = attn.k(tab).view(2, -1, H, dh)  # (2, T, H, dh)
        v_tab = attn.v(tab).view(2, -1, H, dh)
        score_tab = (k_tab * q).sum(-1) / math.sqrt(dh)  # (2, T, H)
        score_cls = (attn.k(cls_ln).view(H, dh) * q).sum(-1) / math.sqrt(dh)  # (H,)
        bit = x.to(score_tab.dtype)[..., None]  # (n, T, 1)
        scores = score_tab[0] + bit * (score_tab[1] - score_tab[0])  # (n, T, H)
        scores = torch.cat([score_cls.expand(x.shape[0], 1, H), scores], dim=1)  # (n, T+1, H)
        a = torch.softmax(scores, dim=1)
        a_tok = a[:, 1:]  # (n, T, H)
        out = (
            a[:, 0, :, None] * attn.v(cls_ln).view(H, dh)
            + torch.einsum("nth,thd->nhd", a_tok * (1 - bit), v_tab[0])
            + torch.einsum("nth,thd->nhd", a_tok * bit, v_tab[1])
        ).reshape(x.shape[0], -1)  # (n, d)
        h = cls_in + out
        h = h + blk.ffn(blk.ln2(h))
        return self.readout(self.ln_f(h)).squeeze(-1)  # (n,)


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


def build_model(model: str, T: int, d: int, layers: int, heads: int, mlp_width: int) -> nn.Module:
    """The model a trial names (``"transformer"`` or ``"mlp"``).

    Raises:
        ValueError: unknown model name.
    """
    if model == "transformer":
        return CLSTransformer(T, d, layers, heads)
    if model == "mlp":
        return MLP(T, mlp_width, layers)
    raise ValueError(f"model must be 'transformer' or 'mlp', got {model!r}")


def logistic_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the last dim: ``(..., n)`` -> ``(...)``."""
    return F.binary_cross_entropy_with_logits(logits, y, reduction="none").mean(-1)
