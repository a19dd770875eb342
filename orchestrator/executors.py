"""Where packs run: one small interface, a Ray backend and an in-process backend.

An executor takes packs (``submit``) and hands back finished ones (``wait``) as
``(handle, rows | exception)``. The driver never blocks on one pack, so work in flight
stays bounded while results stream back in completion order.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from attnsweep.orchestrator.errors import RayDiedError, RunError
from attnsweep.orchestrator.packing import Pack
from attnsweep.orchestrator.ray_auth import auth_refused, is_auth_failure, use_token_if_present
from attnsweep.orchestrator.spec import ExecutionSettings, ResourceSettings

Outcome = list[dict] | BaseException


class Executor(abc.ABC):
    """Runs packs. Subclasses implement the three primitives below."""

    @abc.abstractmethod
    def submit(self, pack: Pack, isolated: bool = False) -> Any:
        """Start a pack; returns a handle. ``isolated``: run it on a worker that has nothing
        else queued, so that if it kills that worker no other pack is harmed (used for the
        trials of a lost pack, one of which may be killing its workers); only call it when
        :meth:`can_isolate` says so."""

    def can_isolate(self) -> bool:
        """Whether a worker with nothing queued is free for an isolated pack now."""
        return True

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

    def __init__(self, settings: ExecutionSettings, resources: ResourceSettings | None = None):
        self.settings = settings
        self.resources = resources or ResourceSettings()
        self._queue: dict[int, Pack] = {}
        self._next = 0

    def submit(self, pack: Pack, isolated: bool = False) -> int:
        self._next += 1
        self._queue[self._next] = pack
        return self._next

    def wait(self, handles, timeout_s):
        from attnsweep.workers.entry import run_pack

        handle = handles[0]
        pack = self._queue.pop(handle)
        try:
            configs = [c.model_dump() for c in pack.configs]
            curves = _curves(self.settings)
            rows = run_pack(
                configs,
                _threads(self.resources),
                experiment=pack.experiment,
                curves=curves,
                group=self.settings.device_group,
            )
            return [(handle, rows)]
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - becomes the pack's failed rows
            # SystemExit too: a package's code that calls sys.exit() in a trial (its teacher's
            # params, a task's label) fails that pack's trials; it must not end the run as if it
            # had succeeded, with half its trials missing. Its text names the class and the
            # place, since str(SystemExit(0)) is "0".
            if not isinstance(exc, Exception):
                import traceback

                where = "".join(traceback.format_exception(exc)[-3:]).strip()
                exc.args = (f"the pack's code raised {type(exc).__name__}: {exc}\n{where}",)
            return [(handle, exc)]

    def slots(self) -> int:
        return 1

    def describe(self) -> str:
        return "local (in-process)"


class RayExecutor(Executor):
    """Runs packs on the Ray cluster at ``address`` (None: a local Ray started in-process,
    the embedded default).

    ``max_workers`` caps the actors started (e.g. at the sweep's trial count: a 2-trial sweep
    needs no more than 2 workers, whatever the resources would hold).

    With ``execution.workers: actors`` (the default) it starts ``resources.num_workers``
    long-lived :class:`workers.entry.PackWorker` actors (default: as many as the cluster's
    CPUs and GPUs hold now) and gives each new pack to the actor with the fewest packs
    queued; torch and CUDA start once per actor, in its constructor, which runs while the
    driver plans (this process never imports torch). With ``tasks`` each pack is one Ray task.
    Either way Ray retries a pack whose worker process or node dies (``max_retries``;
    an actor is restarted in place); a pack that still fails comes back as the exception.

    With an ``address``, Ray's token authentication is turned on when a token is found
    (:mod:`orchestrator.ray_auth`), so a ``ray start --head`` cluster needs no setting.

    Raises:
        RunError: Ray cannot be started or reached, the cluster refuses this client's token
            (the message says what to set), or an embedded local Ray can never offer the
            resources a worker asks for.
    """

    def __init__(
        self,
        settings: ExecutionSettings,
        address: str | None = None,
        resources: ResourceSettings | None = None,
        max_workers: int | None = None,
    ):
        if (
            address is not None
        ):  # a cluster of the user's: its token, found as Ray finds it, before Ray reads its config
            use_token_if_present()
        import ray

        self.settings = settings
        self.max_workers = max_workers
        self.resources = resources or ResourceSettings()
        self._ray = ray
        _check_reachable(address)
        # Shut down only a Ray this executor started, never one the caller runs.
        self._owns_ray = address is None and not ray.is_initialized()
        if not (sys.stderr.isatty() and sys.stdout.isatty()):
            # Ray wraps the lines it relays (raylet, autoscaler) in colour codes unless told not to.
            os.environ.setdefault("RAY_COLOR_PREFIX", "0")
        try:
            if not ray.is_initialized():
                # address="local": always a new private cluster; None would join whatever
                # RAY_ADDRESS or the last `ray start` on this machine points at.
                if address is None:
                    with _quiet(AUTH_NOTICE_LOGGER):  # a notice about our private cluster, not the user's business
                        ray.init(
                            address="local",
                            include_dashboard=False,
                            log_to_driver=False,
                            configure_logging=False,
                            object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                            _system_config=LOCAL_RAY_CONFIG,
                        )
                else:
                    _connect(ray, address)
        except RunError:
            raise
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RunError(f"cannot start or reach Ray at {address or 'a new local cluster'}: {exc}") from exc
        self.address = address
        self._threads = _threads(self.resources)
        self._actors: list = []
        self._owner: dict = {}  # object ref -> index of the actor running it
        self._queued: list[int] = []
        self._check_resources()
        from attnsweep.workers.entry import run_pack_remote

        self._remote = run_pack_remote.options(
            num_cpus=self.resources.cpus_per_worker,
            num_gpus=self.resources.gpus_per_worker,
            max_retries=settings.max_retries,
            retry_exceptions=False,
        )
        if settings.workers == "actors":
            self._start_actors()

    def _fits_now(self) -> int:
        """Workers the cluster's current resources hold (at least 1)."""
        have = self._ray.cluster_resources()
        n = have.get("CPU", os.cpu_count() or 1) / self.resources.cpus_per_worker
        if self.resources.gpus_per_worker > 0:
            n = min(n, have.get("GPU", 0) / self.resources.gpus_per_worker)
        return max(1, int(n + 1e-9))

    def _check_resources(self) -> None:
        """Refuse workers that an embedded local Ray can never schedule (Ray would wait for
        them forever); on a remote cluster the autoscaler may still add such nodes."""
        if self.address is not None:
            return
        have = self._ray.cluster_resources()
        for name, need in (
            ("CPU", self.resources.cpus_per_worker),
            ("GPU", self.resources.gpus_per_worker),
        ):
            if need > have.get(name, 0):
                self.shutdown()
                field = "cpus_per_worker" if name == "CPU" else "gpus_per_worker"
                raise RunError(
                    f"resources.{field}: value {need:g}: the local Ray has {have.get(name, 0):g} "
                    f"{name}(s); lower it, or run on a cluster with --address"
                )
        wanted = self.resources.num_workers
        if wanted is not None and wanted > self._fits_now():
            fits = self._fits_now()
            self.shutdown()
            raise RunError(
                f"resources.num_workers: value {wanted}: the local Ray holds {fits} worker(s) of "
                f"{self.resources.cpus_per_worker:g} CPU and {self.resources.gpus_per_worker:g} GPU; "
                "lower it, or run on a cluster with --address"
            )

    def _start_actors(self) -> None:
        """Ask Ray for the actors and return at once: each loads torch and the training code
        in its constructor (:func:`workers.entry.warm_up`) while the driver goes on planning."""
        from attnsweep.workers.entry import PackWorkerActor  # light: torch loads on the workers

        # max_restarts=-1: a killed actor always comes back, so the pool never shrinks;
        # max_task_retries bounds how often one pack is retried, so a pack that keeps
        # killing its worker ends as lost instead of looping.
        options = dict(
            num_cpus=self.resources.cpus_per_worker,
            num_gpus=self.resources.gpus_per_worker,
            max_restarts=-1,
            max_task_retries=self.settings.max_retries,
        )
        n = self.resources.num_workers or self._fits_now()
        if self.max_workers is not None:  # no more workers than the sweep has trials to give them
            n = max(1, min(n, self.max_workers))
        self._actors = [PackWorkerActor.options(**options).remote(self._threads) for _ in range(n)]
        self._queued = [0] * n

    def can_isolate(self) -> bool:
        # A task holds its worker process alone; an actor must have nothing queued.
        return not self._actors or 0 in self._queued

    def submit(self, pack: Pack, isolated: bool = False):
        configs = [c.model_dump() for c in pack.configs]
        curves = _curves(self.settings)
        if not self._actors:
            return self._remote.remote(
                configs, self._threads, None, pack.experiment, curves, self.settings.device_group
            )
        i = min(range(len(self._actors)), key=self._queued.__getitem__)
        if isolated and self._queued[i]:
            raise RuntimeError("no idle worker for an isolated pack: check can_isolate() first")
        ref = self._actors[i].run.remote(configs, pack.experiment, curves, self.settings.device_group)
        self._owner[ref] = i
        self._queued[i] += 1
        return ref

    def wait(self, handles, timeout_s):
        handles = list(handles)
        ready, rest = self._ray.wait(handles, num_returns=1, timeout=timeout_s)
        if not ready:
            self._check_alive()
        if ready and rest:  # collect every pack that is already done, not just the first
            more, _ = self._ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        out = []
        for ref in ready:
            if ref in self._owner:
                self._queued[self._owner.pop(ref)] -= 1
            try:
                out.append((ref, self._ray.get(ref)))
            except Exception as exc:  # noqa: BLE001 - Ray errors become the pack's rows
                out.append((ref, exc))
        return out

    def _check_alive(self) -> None:
        """Fail instead of waiting forever when the Ray this executor started has died
        (killed by ``ray stop``, the OOM killer...): Ray's client keeps retrying for long.

        Raises:
            RunError: a process of the embedded Ray is gone.
        """
        if not self._owns_ray:
            return
        node = getattr(self._ray._private.worker, "_global_node", None)
        dead = node.dead_processes() if node is not None else []
        if dead:
            raise RayDiedError(
                f"the local Ray died under this sweep ({', '.join(name for name, _ in dead)} exited); "
                "finished trials are saved: resume the run"
            )

    def slots(self) -> int:
        return len(self._actors) if self._actors else self._fits_now()

    def describe(self) -> str:
        mode = f"{len(self._actors)} actors" if self._actors else "tasks"
        return f"ray ({self.address or 'local'}, {mode})"

    def shutdown(self) -> None:
        """Kill the actors (and stop an embedded Ray). Packs still in flight (a Ctrl-C) make
        Ray's error listener print each killed task as "failed ... will be retried", which it
        will not be: those lines are dropped from what Ray writes meanwhile (on stdout and
        stderr), the rest passed on as written."""
        import tempfile

        with tempfile.TemporaryFile() as out_held, tempfile.TemporaryFile() as err_held:
            restores = [_hold_stderr(out_held, fd=1), _hold_stderr(err_held, fd=2)]
            try:
                for actor in self._actors:
                    self._ray.kill(actor)
                self._actors = []
                if self._owns_ray:
                    self._ray.shutdown()
            finally:
                for restore in reversed(restores):
                    restore()
                for held, stream in ((out_held, sys.stdout), (err_held, sys.stderr)):
                    held.seek(0)
                    said = held.read(1 << 20).decode("utf-8", "replace")
                    kept = "".join(line for line in said.splitlines(keepends=True) if not _KILLED_TASK.search(line))
                    if kept:
                        stream.write(kept)
                        stream.flush()


def _curves(settings: ExecutionSettings) -> dict | None:
    """``execution.curves`` as the plain dict a worker takes (None: no learning curves)."""
    return settings.curves.model_dump() if settings.curves is not None else None


def _threads(resources: ResourceSettings) -> int:
    """torch threads of a worker: its whole CPUs, at least 1."""
    return max(1, int(resources.cpus_per_worker))


def is_lost(exc: BaseException) -> bool:
    """Whether a pack's exception means its workers died (lost) rather than its code failed."""
    try:
        from ray import exceptions as rex
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    lost_types = tuple(
        t
        for t in (
            getattr(rex, "WorkerCrashedError", None),
            getattr(rex, "NodeDiedError", None),
            getattr(rex, "OutOfMemoryError", None),
            getattr(rex, "TaskCancelledError", None),
            getattr(rex, "ObjectLostError", None),
            getattr(rex, "LocalRayletDiedError", None),
            getattr(rex, "RayActorError", None),
        )
        if t is not None
    )
    return isinstance(exc, lost_types)


LOCAL_OBJECT_STORE_BYTES = 512 * 2**20
"""Object store of the embedded local Ray. Packs and their rows are small; Ray's default (30%
of the machine's memory, in /dev/shm) would compete with every other Ray on the machine."""

AUTH_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
"""The logger of Ray's notice that a new local cluster uses token authentication (it keeps
using it: only the notice is held back while the embedded Ray starts)."""


@contextlib.contextmanager
def _quiet(name: str):
    """Hold back the warnings of logger ``name`` inside the block (errors still show)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


LOCAL_RAY_CONFIG = {"health_check_timeout_ms": 30_000, "health_check_failure_threshold": 20}
"""The embedded Ray's node health checks, patient enough for a machine whose cores are all
busy: by default a raylet that answers no check for about a minute (5 checks, 10 s each) is
declared dead and exits, which a loaded laptop or CI runner can cause."""


_KILLED_TASK = re.compile(r"\bTask \S+ failed\. There (are|is) \d+ retr(y|ies) remaining.*killed by `ray\.kill`")
"""Ray's line for a task of an actor that :meth:`RayExecutor.shutdown` killed."""


def _connect(ray, address: str) -> None:
    """``ray.init`` to the cluster at ``address`` (``auto``: this machine's own, without a
    deadline, as a job's driver on the head; ``HOST:PORT``: within the default deadline, so a
    cluster that accepts the connection and never answers cannot hang the run).

    A cluster that refuses this client's token is not told apart by Ray's exception (a
    ConnectionError after about 20 s of retries, each logged by Ray's C++ core straight to
    file descriptor 2), so that stream is held aside while Ray connects: on success it is
    passed on as it was; on a refused token it gives way to one line saying what to set.

    Raises:
        RunError: the token was refused (or is missing), or no answer within the deadline.
        ConnectionError, RuntimeError, ValueError: Ray's own, for the caller to word.
    """
    import tempfile

    from attnsweep.orchestrator.deadline import default_timeout, within

    def init() -> None:
        ray.init(address=address, log_to_driver=False)

    with tempfile.TemporaryFile() as held:
        restore = _hold_stderr(held)
        failure: BaseException | None = None
        try:
            init() if address == "auto" else within(default_timeout(), f"the Ray cluster at {address}", init)
        except Exception as exc:  # noqa: BLE001 - re-raised below, reworded when it is the token
            failure = exc
        finally:
            restore()
        held.seek(0)
        said = held.read(1 << 20).decode("utf-8", "replace")
    if failure is not None and (is_auth_failure(failure) or "InvalidAuthToken" in said or "Unauthenticated" in said):
        raise RunError(auth_refused(address, failure)) from None
    if said:
        sys.stderr.write(said)
        sys.stderr.flush()
    if failure is not None:
        raise failure


def _hold_stderr(held, fd: int = 2) -> Callable[[], None]:
    """Point file descriptor ``fd`` (2: stderr, 1: stdout) at the file ``held``; returns the
    function that points it back (a no-op where the descriptor cannot be duplicated)."""
    stream = sys.stdout if fd == 1 else sys.stderr
    try:
        stream.flush()
        saved = os.dup(fd)
        os.dup2(held.fileno(), fd)
    except (OSError, ValueError, AttributeError):
        return lambda: None

    def restore() -> None:
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
        os.dup2(saved, fd)
        os.close(saved)

    return restore


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
        raise RunError(
            f"no Ray cluster answers at {address} ({exc}); start one with `ray start --head` "
            "or leave out --address to use an embedded local Ray"
        ) from exc
