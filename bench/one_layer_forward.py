"""One-layer CLS transformer: the three exact forward paths side by side.

Same weights, same inputs, one process: forward+backward of ``forward_general`` (embeds
every position), ``forward_table`` (per-sample softmax over a (2, T, H) score table, the
one-layer path until issue 12) and ``forward_matmul`` (one (n, 2T) @ (2T, H (1+dh))
product). Prints the median of several timed repeats and the ratios.

    python bench/one_layer_forward.py [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from workers.models import CLSTransformer

CASES = [(64, 256), (256, 256), (1024, 256), (4096, 256), (8192, 256)]


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("| T | n | general (s) | table (s) | matmul (s) | matmul vs table | matmul vs general |")
    print("|---|---|---|---|---|---|---|")
    for T, n in CASES:
        model = CLSTransformer(T, d=32, layers=1, heads=4)
        x = torch.randint(0, 2, (n, T), dtype=torch.uint8)

        def run(path):
            model.zero_grad()
            path(x).sum().backward()

        general = _time(lambda: run(model.forward_general), args.repeats) if T <= 4096 else float("nan")
        table = _time(lambda: run(model.forward_table), args.repeats)
        matmul = _time(lambda: run(lambda v: model.forward_matmul(v)[0]), args.repeats)
        print(f"| {T} | {n} | {general:.4f} | {table:.4f} | {matmul:.4f} | {table / matmul:.1f}x | {general / matmul:.1f}x |")


if __name__ == "__main__":
    main()
