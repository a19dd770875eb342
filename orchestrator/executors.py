"""Where packs run: one small interface, a Ray backend and an in-process backend.

An executor takes packs (``submit``) and hands back finished ones (``wait``) as
``(handle, rows | exception)``. The driver never blocks on one pack, so work in flight
stays bounded while results stream back in completion order.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence
from typing import Any

from orchestrator.errors import RunError
from orchestrator.packing import Pack
from orchestrator.spec import ExecutionSettings

Outcome = list[dict] | BaseException


class Executor(abc.ABC):
    """Runs packs. Subclasses implement the three primitives below."""

    @abc.abstractmethod
    def submit(self, pack: Pack) -> Any:
        """Start a pack; returns a handle."""

    @abc.abstractmethod
    def wait(self, handles: Sequence[Any], timeout_s: float) -> list[tuple[Any, Outcome]]:
        """Finished packs among ``handles`` (at least one unless ``timeout_s`` passes)."""

    @abc.abstractmethod
    def slots(self) -> int:
        """How many packs can run at once (for the default work-in-flight bound)."""

    def describe(self) -> str:
        """One line for logs and the runs table."""
        return type(self).__name__

    def shutdown(self) -> None:
        """Release what the executor started."""


class LocalExecutor(Executor):
    """Runs each pack in this process, at ``wait`` time: for debugging and tests."""

    def __init__(self, settings: ExecutionSettings):
        self.settings = settings
        self._queue: dict[int, Pack] = {}
        self._next = 0

    def submit(self, pack: Pack) -> int:
        self._next += 1
        self._queue[self._next] = pack
        return self._next

    def wait(self, handles, timeout_s):
        from workers.entry import run_pack

        handle = handles[0]
        pack = self._queue.pop(handle)
        try:
            configs = [c.model_dump() for c in pack.configs]
            return [(handle, run_pack(configs, int(self.settings.cpus_per_worker), experiment=pack.experiment))]
        except Exception as exc:  # noqa: BLE001 - becomes the pack's failed rows
            return [(handle, exc)]

    def slots(self) -> int:
        return 1

    def describe(self) -> str:
        return "local (in-process)"


class RayExecutor(Executor):
    """Runs each pack as a Ray task on the cluster at ``address`` (None: a local Ray
    started in-process, the embedded default).

    Ray retries a pack whose worker process or node dies (``max_retries``); a pack that
    still fails comes back as the exception, which the driver records as ``lost``.
    """

    def __init__(self, settings: ExecutionSettings, address: str | None = None):
        import ray

        self.settings = settings
        self._ray = ray
        _check_reachable(address)
        try:
            if not ray.is_initialized():
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False) if address is None else ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RunError(f"cannot start or reach Ray at {address or 'a new local cluster'}: {exc}") from exc
        self.address = address
        from workers.entry import run_pack_remote

        threads = max(1, int(settings.cpus_per_worker))
        self._remote = run_pack_remote.options(
            num_cpus=settings.cpus_per_worker, num_gpus=settings.gpus_per_worker,
            max_retries=settings.max_retries, retry_exceptions=False,
        )
        self._threads = threads
        self._check_resources()

    def _check_resources(self) -> None:
        """Refuse a pack that no node of an embedded local Ray can ever schedule (Ray would
        wait for it forever); on a remote cluster the autoscaler may still add such nodes."""
        if self.address is not None:
            return
        have = self._ray.cluster_resources()
        for name, need in (("CPU", self.settings.cpus_per_worker), ("GPU", self.settings.gpus_per_worker)):
            if need > have.get(name, 0):
                self.shutdown()
                field = "cpus_per_worker" if name == "CPU" else "gpus_per_worker"
                raise RunError(f"execution.{field}: value {need:g}: the local Ray has {have.get(name, 0):g} "
                               f"{name}(s); lower it, or run on a cluster with --address")

    def submit(self, pack: Pack):
        return self._remote.remote([c.model_dump() for c in pack.configs], self._threads, None, pack.experiment)

    def wait(self, handles, timeout_s):
        ready, _ = self._ray.wait(list(handles), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            try:
                out.append((ref, self._ray.get(ref)))
            except Exception as exc:  # noqa: BLE001 - Ray errors become the pack's rows
                out.append((ref, exc))
        return out

    def slots(self) -> int:
        resources = self._ray.cluster_resources()
        by_cpu = resources.get("CPU", os.cpu_count() or 1) / self.settings.cpus_per_worker
        if self.settings.gpus_per_worker > 0:
            return max(1, int(min(by_cpu, resources.get("GPU", 0) / self.settings.gpus_per_worker)))
        return max(1, int(by_cpu))

    def describe(self) -> str:
        return f"ray ({self.address or 'local'})"

    def shutdown(self) -> None:
        if self.address is None:
            self._ray.shutdown()


def is_lost(exc: BaseException) -> bool:
    """Whether a pack's exception means its workers died (lost) rather than its code failed."""
    try:
        from ray import exceptions as rex
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    lost_types = tuple(
        t for t in (
            getattr(rex, "WorkerCrashedError", None), getattr(rex, "NodeDiedError", None),
            getattr(rex, "OutOfMemoryError", None), getattr(rex, "TaskCancelledError", None),
            getattr(rex, "ObjectLostError", None), getattr(rex, "LocalRayletDiedError", None),
        ) if t is not None
    )
    return isinstance(exc, lost_types)


def _check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``host:port`` nobody listens on (Ray itself retries for minutes).

    Raises:
        RunError: the address does not accept a TCP connection within ``timeout_s``.
    """
    import socket

    if not address or address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise RunError(f"no Ray cluster answers at {address} ({exc}); start one with `ray start --head` "
                       "or leave out --address to use an embedded local Ray") from exc
