"""The weight norms of the theory, and the projection that keeps them within a bound B.

Edelman et al. (ICML 2022, section 3, Theorem 3.4) bound the capacity of a self-attention
head by norms of W_Q W_K^T, of W_V and of the readout; sample complexity grows with those
bounds and only like log T. Here the bound B is enforced on each of them after every
optimiser step by rescaling onto the norm ball: W <- W * min(1, B / ||W||). For the
bilinear form M_h = W_Q,h^T W_K,h both factors are scaled by sqrt(min(1, B / ||M_h||)), so
||M_h|| <= B afterwards (norms are homogeneous). For the MLP baseline B bounds every weight
matrix.

Norm kinds of a matrix W stored as ``(out, in)``:
    ``frobenius``: sqrt(sum W_ij^2);  ``spectral``: largest singular value;
    ``l21``: the (2,1) norm, sum over output rows of the Euclidean norm of each row.

All functions act on *stacked* parameters, ``(trials, ...)``, as made by
``torch.func.stack_module_state``, so one call projects every trial of a pack.
"""

from __future__ import annotations

import torch


def matrix_norm(w: torch.Tensor, kind: str) -> torch.Tensor:
    """Norm of each matrix in ``(..., out, in)`` -> ``(...)``.

    Raises:
        ValueError: unknown norm kind.
    """
    if kind == "frobenius":
        return torch.linalg.matrix_norm(w, ord="fro")
    if kind == "spectral":
        return torch.linalg.matrix_norm(w, ord=2)
    if kind == "l21":
        return w.norm(dim=-1).sum(-1)
    raise ValueError(f"norm_kind must be 'frobenius', 'spectral' or 'l21', got {kind!r}")


def _heads(w: torch.Tensor, heads: int) -> torch.Tensor:
    """``(trials, d, d)`` with head-major rows -> ``(trials, H, d/H, d)``."""
    t, d_out, d_in = w.shape
    return w.view(t, heads, d_out // heads, d_in)


def transformer_norms(params: dict[str, torch.Tensor], heads: int, kind: str) -> dict[str, torch.Tensor]:
    """Achieved norms per trial of a stacked ``CLSTransformer``.

    Returns:
        ``norm_qk``: max over layers and heads of ||W_Q,h^T W_K,h||; ``norm_v``: max of
        ||W_V,h||; ``norm_readout``: ||w_readout||; each ``(trials,)`` float32.
    """
    qk, v = [], []
    for name in params:
        if name.endswith("attn.q.weight"):
            prefix = name[: -len("q.weight")]
            wq = _heads(params[name], heads)
            wk = _heads(params[prefix + "k.weight"], heads)
            qk.append(matrix_norm(wq.transpose(-1, -2) @ wk, kind).amax(-1))
            v.append(matrix_norm(_heads(params[prefix + "v.weight"], heads), kind).amax(-1))
    return {
        "norm_qk": torch.stack(qk).amax(0),
        "norm_v": torch.stack(v).amax(0),
        "norm_readout": matrix_norm(params["readout.weight"], kind),
    }


def mlp_norms(params: dict[str, torch.Tensor], kind: str) -> dict[str, torch.Tensor]:
    """Achieved norms per trial of a stacked ``MLP``: ``norm_hidden`` (max over hidden
    layers) and ``norm_readout``, each ``(trials,)``."""
    hidden = [matrix_norm(w, kind) for n, w in params.items() if n.startswith("hidden") and n.endswith("weight")]
    return {
        "norm_hidden": torch.stack(hidden).amax(0),
        "norm_readout": matrix_norm(params["readout.weight"], kind),
    }


@torch.no_grad()
def project_transformer(params: dict[str, torch.Tensor], bound: torch.Tensor, heads: int, kind: str) -> None:
    """Rescale W_Q,h and W_K,h (jointly), W_V,h and the readout in place onto the ball of radius
    ``bound`` ``(trials,)``; ``inf`` leaves a trial unbounded."""
    for name in params:
        if name.endswith("attn.q.weight"):
            prefix = name[: -len("q.weight")]
            wq = _heads(params[name], heads)
            wk = _heads(params[prefix + "k.weight"], heads)
            f = _shrink(matrix_norm(wq.transpose(-1, -2) @ wk, kind), bound[:, None])  # (t, H)
            wq.mul_(f.sqrt()[..., None, None])
            wk.mul_(f.sqrt()[..., None, None])
            wv = _heads(params[prefix + "v.weight"], heads)
            wv.mul_(_shrink(matrix_norm(wv, kind), bound[:, None])[..., None, None])
    w = params["readout.weight"]
    w.mul_(_shrink(matrix_norm(w, kind), bound)[:, None, None])


@torch.no_grad()
def project_mlp(params: dict[str, torch.Tensor], bound: torch.Tensor, kind: str) -> None:
    """Rescale every weight matrix of a stacked ``MLP`` in place onto the ball of radius
    ``bound`` ``(trials,)``."""
    for name, w in params.items():
        if name.endswith("weight"):
            w.mul_(_shrink(matrix_norm(w, kind), bound)[:, None, None])


def _shrink(norm: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """min(1, bound / norm), elementwise; 1 where the norm is 0 or the bound is inf."""
    return torch.clamp(bound / norm.clamp_min(1e-30), max=1.0)
