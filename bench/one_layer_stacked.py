"""One stacked one-layer step for S trials against S one-trial steps, side by side.

Same weights and data: ``workers.one_layer_stacked.loss_and_grads_stacked`` on S stacked
trials against S calls of ``workers.one_layer.loss_and_grads``, float32, on the CPU with
``--threads`` threads (and on CUDA too when ``--cuda`` and a GPU is there). Prints the median
of ``--repeats`` timed calls of each and their ratio; nothing is asserted.

    python bench/one_layer_stacked.py [--S 32] [--T 16] [--d 16] [--heads 2] [--m 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch.func import stack_module_state

from attnsweep.workers import one_layer
from attnsweep.workers.models import CLSTransformer
from attnsweep.workers.one_layer_stacked import loss_and_grads_stacked


def _time(fn, repeats: int, sync=lambda: None) -> float:
    fn()  # warm-up
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--S", type=int, default=32)
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    models = [CLSTransformer(a.T, a.d, 1, a.heads) for _ in range(a.S)]
    params, _ = stack_module_state(models)
    stacked = {k: v.detach() for k, v in params.items()}
    singles = [{n: q.detach() for n, q in mdl.named_parameters()} for mdl in models]
    x = torch.randint(0, 2, (a.S, a.m, a.T)).float()
    y = torch.randint(0, 2, (a.S, a.m)).float()
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {a.threads} thread(s); "
        f"S={a.S} T={a.T} d={a.d} H={a.heads} m={a.m} float32, median of {a.repeats}"
    )
    t_stacked = _time(lambda: loss_and_grads_stacked(stacked, a.heads, x, y), a.repeats)
    t_loop = _time(
        lambda: [one_layer.loss_and_grads(singles[s], a.heads, x[s], y[s]) for s in range(a.S)],
        a.repeats,
    )
    print(
        f"cpu  stacked step: {t_stacked * 1e3:8.3f} ms   {a.S} one-trial steps: {t_loop * 1e3:8.3f} ms   "
        f"ratio {t_loop / t_stacked:5.1f}x"
    )
    if a.cuda and torch.cuda.is_available():
        dev = {k: v.cuda() for k, v in stacked.items()}
        singles_dev = [{k: v.cuda() for k, v in s.items()} for s in singles]
        xd, yd = x.cuda(), y.cuda()
        sync = torch.cuda.synchronize
        t_stacked = _time(lambda: loss_and_grads_stacked(dev, a.heads, xd, yd), a.repeats, sync)
        t_loop = _time(
            lambda: [one_layer.loss_and_grads(singles_dev[s], a.heads, xd[s], yd[s]) for s in range(a.S)],
            a.repeats,
            sync,
        )
        print(
            f"cuda stacked step: {t_stacked * 1e3:8.3f} ms   {a.S} one-trial steps: {t_loop * 1e3:8.3f} ms   "
            f"ratio {t_loop / t_stacked:5.1f}x  ({torch.cuda.get_device_name()})"
        )


if __name__ == "__main__":
    main()
