"""Students for the seq2seq-with-knowledge experiment (docs/claims.md 1b).

Every student maps X ``(b, n, d)`` and K ``(b, k, d)`` to Y ``(b, n, d)``:

* :class:`SeqTransformer`: a generic model with free weights (no symmetry built in, or only
  permutation symmetry over the rows of X when it has no positional embedding).
* :class:`SeqMLP`: the flattened-input baseline, no symmetry at all.
* :class:`InnerProductStudent`: the form Y = G1 X + G2 K with G1, G2 functions of inner
  products (Ma & Ying, arXiv 2210.06741; Villar et al., NeurIPS 2021), so O(d)-equivariant
  exactly, by construction.

All are written to run under ``torch.func.functional_call`` inside ``torch.func.vmap`` over
stacked parameters: no in-place operations, no Python branches on tensor values. Weights
are initialised from torch's global generator, as ``nn.Module`` does; callers fix it per
trial (``torch.random.fork_rng`` plus a derived seed, as :mod:`workers.train_boolean` does).

The generic models are :class:`~attnsweep.workers.student_registry.Student` values
(workers/builtin_students.py ``TRANSFORMER``, ``MLP``, with their closed-form sizes and forms,
and ``build_student``), looked up by name in ``student_of`` beside the students other packages add
(workers/student_registry.py); a package's student is checked on a tiny input
(:func:`check_student`) before it trains.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from attnsweep.tasks.errors import TaskError
from attnsweep.workers.student_registry import BUILT_IN

MODELS = BUILT_IN
"""The built-in students' names; :func:`student_of` finds those of installed packages too."""


class Attention(nn.Module):
    """Multi-head softmax attention from query rows to key/value rows, with an output projection.

    Head h computes softmax(q_h k_h^T / sqrt(dh)) v_h with q_h = W_Q,h u, k_h = W_K,h v,
    v_h = W_V,h v and dh = width / heads (Vaswani et al. 2017, "Attention is all you need",
    eq. 1 and section 3.2.2); the heads are concatenated and projected by W_O.
    """

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads, self.dh = heads, width // heads
        self.q = nn.Linear(width, width, bias=False)
        self.k = nn.Linear(width, width, bias=False)
        self.v = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``queries`` ``(b, Lq, w)``, ``keys`` ``(b, Lk, w)`` -> ``(b, Lq, w)``."""
        q = self._split(self.q(queries))  # (b, H, Lq, dh)
        k = self._split(self.k(keys))  # (b, H, Lk, dh)
        v = self._split(self.v(keys))  # (b, H, Lk, dh)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)  # (b, H, Lq, Lk)
        mixed = (att @ v).transpose(1, 2)  # (b, Lq, H, dh)
        return self.out(mixed.reshape(*mixed.shape[:2], -1))

    def _split(self, h: torch.Tensor) -> torch.Tensor:
        """``(b, L, w)`` -> ``(b, H, L, dh)``."""
        return h.reshape(*h.shape[:2], self.heads, self.dh).transpose(1, 2)


class SeqTransformer(nn.Module):
    """A generic transformer student: X ``(b, n, d)``, K ``(b, k, d)`` -> Y ``(b, n, d)``.

    Rows of X and K share one input projection; a learned ``(n, width)`` positional
    embedding is added to the X rows when ``positional`` (never to K, which is a set). One
    pre-LayerNorm block follows, each sub-layer residual: self-attention over X, then
    cross-attention from X (queries) to K (keys and values), then a 4*width GELU feed-forward
    layer; a final LayerNorm and a linear map back to R^d give Y.

    Without the positional embedding every operation acts on rows alike or through
    attention, so the model is permutation-equivariant over the rows of X by construction.
    It is never O(d)-equivariant: the projections act on coordinates.

    Raises:
        ValueError: ``width`` not divisible by ``heads``.
    """

    def __init__(self, n: int, k: int, d: int, width: int = 32, heads: int = 4, positional: bool = True):
        super().__init__()
        if width % heads:
            raise ValueError(f"width must be divisible by heads, got width={width}, heads={heads}")
        self.embed = nn.Linear(d, width)
        # Same small scale as the Boolean model's positions (workers.models.CLSTransformer).
        self.register_parameter("pos", nn.Parameter(torch.randn(n, width) * 0.02) if positional else None)
        self.ln_self, self.ln_cross, self.ln_knowledge = (
            nn.LayerNorm(width),
            nn.LayerNorm(width),
            nn.LayerNorm(width),
        )
        self.ln_ffn, self.ln_out = nn.LayerNorm(width), nn.LayerNorm(width)
        self.self_attn = Attention(width, heads)
        self.cross_attn = Attention(width, heads)
        self.ffn = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.readout = nn.Linear(width, d)

    def forward(self, X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        h = self.embed(X)  # (b, n, w)
        if self.pos is not None:
            h = h + self.pos
        knowledge = self.ln_knowledge(self.embed(K))  # (b, k, w)
        a = self.ln_self(h)
        h = h + self.self_attn(a, a)
        h = h + self.cross_attn(self.ln_cross(h), knowledge)
        h = h + self.ffn(self.ln_ffn(h))
        return self.readout(self.ln_out(h))  # (b, n, d)


class SeqMLP(nn.Module):
    """The flattened baseline: X, K -> ``(b, (n + k) d)`` -> ``layers`` GELU layers -> ``(b, n, d)``."""

    def __init__(self, n: int, k: int, d: int, width: int = 256, layers: int = 2):
        super().__init__()
        self.n, self.d = n, d
        dims = [(n + k) * d] + [width] * layers
        self.hidden = nn.Sequential(*(nn.Sequential(nn.Linear(a, b), nn.GELU()) for a, b in zip(dims, dims[1:])))
        self.readout = nn.Linear(dims[-1], n * d)

    def forward(self, X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        flat = torch.cat([X.reshape(X.shape[0], -1), K.reshape(K.shape[0], -1)], dim=-1)
        return self.readout(self.hidden(flat)).reshape(X.shape[0], self.n, self.d)


class PairScore(nn.Module):
    """``heads`` independent MLPs R^3 -> hidden -> R (GELU), applied to every pair of rows.

    A pair (u, v) enters as (u.v, |u|^2, |v|^2), so the score depends on inner products only.
    The last layer has no bias: a constant added to every score of a row is removed by
    the softmax that follows.
    """

    def __init__(self, heads: int, hidden: int):
        super().__init__()
        # Same uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) scale as nn.Linear, per head.
        self.w1 = nn.Parameter(torch.empty(heads, 3, hidden).uniform_(-(3**-0.5), 3**-0.5))
        self.b1 = nn.Parameter(torch.empty(heads, hidden).uniform_(-(3**-0.5), 3**-0.5))
        self.w2 = nn.Parameter(torch.empty(heads, hidden).uniform_(-(hidden**-0.5), hidden**-0.5))

    def forward(self, U: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """``U`` ``(b, p, d)``, ``V`` ``(b, q, d)`` -> scores ``(b, H, p, q)``."""
        feats = torch.stack(
            [
                U @ V.transpose(-1, -2),  # (b, p, q)
                (U * U).sum(-1, keepdim=True).expand(-1, -1, V.shape[-2]),
                (V * V).sum(-1)[:, None, :].expand(-1, U.shape[-2], -1),
            ],
            dim=-1,
        )  # (b, p, q, 3)
        pre = torch.einsum("bpqf,hfu->bhpqu", feats, self.w1) + self.b1[:, None, None, :]
        # The einsum leaves its result permuted, unlike the gradient that reaches the GELU, and
        # torch's CPU gelu_backward then runs element by element, not in SIMD vectors: a third
        # of a trial's time, 1.5x more than with both in one layout (bench/pack_bound.py).
        h = F.gelu(pre.contiguous())
        return torch.einsum("bhpqu,hu->bhpq", h, self.w2)


class InnerProductStudent(nn.Module):
    """The orthogonal form Y = G1 X + G2 K + lambda X: X ``(b, n, d)``, K ``(b, k, d)`` -> ``(b, n, d)``.

    G1 = sum_h a_h softmax_j(s^XX_h) and G2 = sum_h c_h softmax_j(s^XK_h), with scores
    s^XX_h,ij = phi_h(x_i.x_j, |x_i|^2, |x_j|^2) and s^XK_h,ij = psi_h(x_i.k_j, |x_i|^2, |k_j|^2)
    from tiny per-head MLPs; a_h, c_h and lambda are learned scalars. This is the form that
    Ma & Ying (arXiv 2210.06741) derive for orthogonally equivariant seq2seq functions with
    knowledge and Villar et al. (NeurIPS 2021, "Scalars are universal") for O(d)-equivariant
    vector functions, with softmax-normalised coefficients as in self-attention.

    Every learned function sees inner products only and Y is a combination of the rows of
    X and K, so f(X Q^T, K Q^T) = f(X, K) Q^T exactly (up to round-off) for any orthogonal
    Q. Permuting the rows of X permutes the rows and columns of G1 and the rows of G2 alike,
    so the model is permutation-equivariant over X too.
    """

    def __init__(self, n: int, k: int, d: int, heads: int = 4, hidden: int = 16):
        super().__init__()
        self.phi = PairScore(heads, hidden)
        self.psi = PairScore(heads, hidden)
        # Equal shares per head: at initialisation Y averages the rows of X and K.
        self.a = nn.Parameter(torch.full((heads,), 1.0 / heads))
        self.c = nn.Parameter(torch.full((heads,), 1.0 / heads))
        self.identity = nn.Parameter(torch.zeros(()))

    def forward(self, X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        G1 = torch.einsum("h,bhij->bij", self.a, torch.softmax(self.phi(X, X), dim=-1))  # (b, n, n)
        G2 = torch.einsum("h,bhij->bij", self.c, torch.softmax(self.psi(X, K), dim=-1))  # (b, n, k)
        return G1 @ X + G2 @ K + self.identity * X


def check_student(name: str, model: object, n: int, k: int, d: int) -> None:
    """Hold a package's student to the contract training reads (workers/student_registry.py
    ``Student``): an ``nn.Module`` with parameters whose forward maps X ``(2, n, d)`` and K
    ``(2, k, d)`` float32 to Y ``(2, n, d)`` float32. The forward runs on a copy, on a fixed
    input, without gradients, so the student and the random streams are as they were.

    Raises:
        TaskError: it breaks the contract; the message names the student.
    """
    if not isinstance(model, nn.Module):
        raise TaskError(f"student {name!r}: its build function gave a {type(model).__name__}, not a torch.nn.Module")
    if not any(True for _ in model.parameters()):
        raise TaskError(f"student {name!r}: its module has no parameters to train")
    X = torch.linspace(-1.0, 1.0, 2 * n * d).reshape(2, n, d) / d**0.5
    K = torch.linspace(1.0, -1.0, 2 * k * d).reshape(2, k, d) / d**0.5
    try:
        with torch.no_grad():
            Y = copy.deepcopy(model)(X, K)
    except Exception as exc:  # a broken plugin is named, whatever it raised
        raise TaskError(f"student {name!r}: its forward(X, K) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(Y, torch.Tensor) or Y.shape != X.shape or Y.dtype != X.dtype:
        got = f"{tuple(Y.shape)} {Y.dtype}" if isinstance(Y, torch.Tensor) else type(Y).__name__
        raise TaskError(
            f"student {name!r}: its forward gave {got} for X {tuple(X.shape)} float32, not a float32 tensor "
            f"of X's shape"
        )
