"""The code that runs on a Ray worker: train one pack and return its rows.

This is the only module of ``workers`` that knows Ray. Configs travel as plain dicts
and are validated again on the worker, so a worker never trusts the wire.

Light to import (no torch): the driver names this module's actor class and task function
to Ray without loading torch itself. A :class:`PackWorker` loads torch and the training
code in its constructor (:func:`warm_up`), which Ray runs as soon as the driver asks for
the actor, so that start-up overlaps the driver's planning and the first pack finds a warm
worker.
"""

from __future__ import annotations

import importlib
import os
import socket

import ray

from attnsweep.workers.curves import CurvePlan
from attnsweep.workers.experiments import EXPERIMENTS

TRAINING_MODULES = (
    "torch",
    "attnsweep.workers.pack",
    "attnsweep.workers.train_boolean",
    "attnsweep.workers.train_symmetry",
)
"""What a worker loads before its first pack: torch and every experiment's training code
(each experiment's ``train`` imports its own on first use)."""


def warm_up() -> None:
    """Import :data:`TRAINING_MODULES` in this process now (about a second, nearly all torch)."""
    for name in TRAINING_MODULES:
        importlib.import_module(name)


def run_pack(
    configs: list[dict],
    num_threads: int = 1,
    device: str | None = None,
    experiment: str = "sparse_boolean",
    curves: dict | None = None,
    group: int | None = None,
) -> list[dict]:
    """Train a pack of ``experiment`` in this process with ``num_threads`` torch threads;
    rows as in :func:`workers.train_boolean.train_pack` or :func:`workers.train_symmetry.train_symmetry_pack`.
    ``curves``: the spec's ``execution.curves`` as a dict (``every``, ``max_points``), or None
    (no learning curves). ``group``: the spec's ``execution.device_group``, the slots of a
    stacked group off the CPU (None: :data:`workers.stacked.DEVICE_SLOTS`).

    Raises:
        KeyError: unknown experiment.
        ValueError: a ``curves`` out of range, a ``group`` below 1.
    """
    import torch

    torch.set_num_threads(max(1, num_threads))
    return _train(configs, device, experiment, curves, group)


def _train(
    configs: list[dict], device: str | None, experiment: str, curves: dict | None, group: int | None
) -> list[dict]:
    from attnsweep.workers.stacked import device_group

    exp = EXPERIMENTS[experiment]
    with device_group(group):
        rows = exp.train([exp.config(**c) for c in configs], device, curves=CurvePlan.from_wire(curves))
    return _labelled(rows, group)


def _labelled(rows: list[dict], group: int | None = None) -> list[dict]:
    """Rows labelled with what a bitwise rerun must match: ``device`` (:func:`workers.pack.device_label`:
    a GPU's model, CUDA and torch; ``cpu`` unchanged) and, off the CPU, ``device_group`` (the
    slots of a stacked group, workers/stacked.py); null on a CPU."""
    import torch

    from attnsweep.workers.pack import device_label
    from attnsweep.workers.stacked import DEVICE_SLOTS

    for row in rows:
        if row.get("device"):
            dev = torch.device(row["device"])
            row["device"] = device_label(dev)
            row["device_group"] = None if dev.type == "cpu" else (group or DEVICE_SLOTS)
    return rows


# Ray reuses the worker processes of CPU tasks, but by default starts a fresh one for every
# GPU task (so CUDA would initialise once per pack); PackWorker actors avoid both costs.
run_pack_remote = ray.remote(run_pack)


class PackWorker:
    """A long-lived worker that trains packs one after another in one process, so torch
    (and CUDA) start once per worker, not once per pack; the constructor loads them
    (:func:`warm_up`), before the first pack arrives.

    Args:
        num_threads: torch intra-op threads; the driver passes the worker's CPU share so
            that workers on one node do not oversubscribe its cores.
        device: ``"cpu"``, ``"cuda"``...; None: CUDA when Ray gave this worker a GPU.
    """

    def __init__(self, num_threads: int = 1, device: str | None = None):
        warm_up()
        import torch

        torch.set_num_threads(max(1, num_threads))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.packs = 0

    def run(
        self,
        configs: list[dict],
        experiment: str = "sparse_boolean",
        curves: dict | None = None,
        group: int | None = None,
    ) -> list[dict]:
        """Train one pack; see :func:`run_pack`."""
        self.packs += 1
        return _train(configs, self.device, experiment, curves, group)

    def info(self) -> dict:
        """Where this worker runs: ``host``, ``pid``, ``device``, ``threads``, packs trained."""
        import torch

        return dict(
            host=socket.gethostname(),
            pid=os.getpid(),
            device=self.device,
            threads=torch.get_num_threads(),
            packs=self.packs,
        )


PackWorkerActor = ray.remote(PackWorker)
