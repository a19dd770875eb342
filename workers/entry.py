"""The code that runs on a Ray worker: train one pack and return its rows.

This is the only module of ``workers`` that knows Ray. Configs travel as plain dicts
and are validated again on the worker, so a worker never trusts the wire.
"""

from __future__ import annotations

import ray
import torch

from workers.experiments import EXPERIMENTS


def run_pack(configs: list[dict], num_threads: int = 1, device: str | None = None,
             experiment: str = "sparse_boolean") -> list[dict]:
    """Train a pack of ``experiment`` in this process with ``num_threads`` torch threads;
    rows as in :func:`workers.train.train_pack` or :func:`workers.train_symmetry.train_symmetry_pack`.

    Raises:
        KeyError: unknown experiment.
    """
    torch.set_num_threads(max(1, num_threads))
    exp = EXPERIMENTS[experiment]
    return exp.train([exp.config(**c) for c in configs], device)


# CPU tasks reuse their worker processes, so torch is imported once per worker.
run_pack_remote = ray.remote(run_pack)
