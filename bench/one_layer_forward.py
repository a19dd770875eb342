"""One-layer CLS transformer: the exact forward paths side by side.

Same weights, same inputs, one process: forward+backward of ``forward_general`` (embeds
every position), ``before``: the one-layer path as it was before issue 12 (per-sample
softmax over a (2, T, H) score table, keys projected for all 2T rows; kept here verbatim
as the baseline), ``forward_table`` (the same with the query folded into the keys, now
the fallback) and ``forward_matmul`` (one (n, 2T) @ (2T, H (1+dh)) product, from the
bits). Prints the median of several timed repeats and the ratios.

    python bench/one_layer_forward.py [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time

import torch

from attnsweep.workers.models import CLSTransformer

CASES = [(64, 256), (256, 256), (1024, 256), (4096, 256), (8192, 256)]


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def before(model: CLSTransformer, x: torch.Tensor) -> torch.Tensor:
    """The one-layer forward as it was before issue 12 (commit a9f4b8e)."""
    blk, H = model.blocks[0], model.blocks[0].attn.heads
    attn, dh = blk.attn, model.blocks[0].attn.dh
    tab = blk.ln1(model.tok.weight[:, None, :] + model.pos[None, 1:])
    cls_in = model.cls + model.pos[0]
    cls_ln = blk.ln1(cls_in)
    q = attn.q(cls_ln).view(H, dh)
    k_tab = attn.k(tab).view(2, -1, H, dh)
    v_tab = attn.v(tab).view(2, -1, H, dh)
    score_tab = (k_tab * q).sum(-1) / math.sqrt(dh)
    score_cls = (attn.k(cls_ln).view(H, dh) * q).sum(-1) / math.sqrt(dh)
    bit = x.to(score_tab.dtype)[..., None]
    scores = score_tab[0] + bit * (score_tab[1] - score_tab[0])
    scores = torch.cat([score_cls.expand(x.shape[0], 1, H), scores], dim=1)
    a = torch.softmax(scores, dim=1)
    a_tok = a[:, 1:]
    out = (
        a[:, 0, :, None] * attn.v(cls_ln).view(H, dh)
        + torch.einsum("nth,thd->nhd", a_tok * (1 - bit), v_tab[0])
        + torch.einsum("nth,thd->nhd", a_tok * bit, v_tab[1])
    ).reshape(x.shape[0], -1)
    h = cls_in + out
    h = h + blk.ffn(blk.ln2(h))
    return model.readout(model.ln_f(h)).squeeze(-1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}"
    )
    print("| T | n | general (s) | before (s) | table (s) | matmul (s) | matmul vs before | matmul vs general |")
    print("|---|---|---|---|---|---|---|---|")
    for T, n in CASES:
        print(_row(T, n, args.repeats))


def _row(T: int, n: int, repeats: int) -> str:
    """One table row: the timings of each forward path at sequence length ``T``, batch ``n``."""
    model = CLSTransformer(T, d=32, layers=1, heads=4)
    x = torch.randint(0, 2, (n, T), dtype=torch.uint8)

    def run(path):
        model.zero_grad()
        path(x).sum().backward()

    general = _time(lambda: run(model.forward_general), repeats) if T <= 4096 else float("nan")
    old = _time(lambda: run(lambda v: before(model, v)), repeats)
    table = _time(lambda: run(model.forward_table), repeats)
    matmul = _time(lambda: run(lambda v: model.forward_matmul(v)[0]), repeats)
    torch.testing.assert_close(model.forward_matmul(x)[0], before(model, x), atol=1e-4, rtol=1e-4)
    return f"| {T} | {n} | {general:.4f} | {old:.4f} | {table:.4f} | {matmul:.4f} | {old / matmul:.1f}x | {general / matmul:.1f}x |"


if __name__ == "__main__":
    main()
