"""The Python API's running side: run or resume a sweep as ``attnsweep run`` and ``resume``
do, without the terminal output (the store and its analysis: interface/api_store.py).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from attnsweep.api_store import DEFAULT_STORE, Store, check_names
from attnsweep.orchestrator.errors import ArgumentError, AttnsweepError
from attnsweep.orchestrator.progress import PROGRESS_INTERVAL_S

if TYPE_CHECKING:
    from rich.console import Console

    from attnsweep.orchestrator.driver import RunSummary
    from attnsweep.orchestrator.spec import SweepSpec
    from attnsweep.results import ResultsStore


def _whole(key: str, value, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ArgumentError(f"{key}: give a whole number >= {least}, not {value!r}")


def _options(max_in_flight, progress_interval_s, address=None, local=False) -> None:
    """The run options' types and ranges, as the CLI's options check them."""
    if not isinstance(local, bool):
        raise ArgumentError(f"local: give True or False, not {local!r}")
    if address is not None and not isinstance(address, str):
        raise ArgumentError(f"address: give the Ray cluster as a str ('auto', 'HOST:PORT'), not {address!r}")
    if local and address is not None:
        raise ArgumentError(f"address {address!r} and local=True: a run without Ray has no cluster; give one of them")
    if max_in_flight is not None:
        _whole("max_in_flight", max_in_flight, 1)
    value = progress_interval_s
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 86_400:
        raise ArgumentError(f"progress_interval_s: give seconds from 0.1 to 86400, not {value!r}")


def _plain(value, where: str):
    """A spec dict's values as YAML can hold them: numpy numbers and arrays as Python numbers
    and lists, a Path as its text, tuples as lists; anything else YAML has no type for is an
    ArgumentError naming where it is."""
    import numbers

    if isinstance(value, Mapping):
        return {
            str(k) if isinstance(k, (str, int, float, bool)) else _bad_key(k, where): _plain(v, f"{where}.{k}")
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # a numpy scalar or array (also torch, jax)
        return _plain(value.tolist(), where)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise ArgumentError(
        f"{where}: a {type(value).__name__} ({value!r}) is no value a spec can hold (numbers, text, "
        "booleans, lists and mappings of them)"
    )


def _bad_key(key, where: str):
    raise ArgumentError(f"{where}: key {key!r} ({type(key).__name__}): spec keys are text")


def run(
    spec: str | Path | Mapping | SweepSpec,
    store: str | Path = DEFAULT_STORE,
    *,
    address: str | None = None,
    local: bool = False,
    max_in_flight: int | None = None,
    max_trials: int = 1_000_000,
    resume: str | None = None,
    run_id: str | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    console: Console | None = None,
) -> RunSummary:
    """Run a sweep as ``attnsweep run`` does and stream its rows into ``store``.

    Args:
        spec: a spec file, the spec as a dict (what the YAML holds), or a parsed spec.
        store: the results store.
        address: a Ray cluster (``auto``, ``HOST:PORT``); None: an embedded local Ray,
            started and stopped by the run.
        local: no Ray: packs run in this process.
        max_in_flight: packs submitted at once (default: the spec's, else 2 per worker).
        max_trials: refuse grids above this many trials.
        resume: continue this run of the same spec (trials it holds are skipped).
        run_id: the new run's id (default: a fresh one, ``YYYYmmdd-HHMMSS-xxxxxx``).
        progress_interval_s: seconds between progress lines when the console is not a
            terminal (on a terminal and in Jupyter: a live bar).
        console: where progress goes (default: stderr).

    Returns:
        The run's summary: ``run_id``, ``counts`` per status, ``wall_s`` (seconds) and
        ``status`` (``finished`` or ``failed``). A resume of a run that holds every trial
        returns at once: ``already_complete`` true, ``counts`` empty.

    Raises:
        orchestrator.ArgumentError (a TypeError too): an argument of the wrong type or out of
            its range (``spec`` none of a path, a dict or a parsed spec; a value in the spec dict
            that YAML cannot hold; a run id that is not a str; ``progress_interval_s`` not in
            0.1..86400 seconds; ``local`` not a bool; ``local`` and ``address`` both given),
            or another run is under way in this process.
        orchestrator.SpecError: the spec is invalid (nothing is started or written).
        orchestrator.RunError: Ray cannot be started or reached, or ``resume`` names a run
            of another spec.
        results.StoreError: the store cannot be written.
        KeyboardInterrupt: Ctrl-C, or SIGTERM while the sweep runs (from the main thread):
            re-raised after the finished trials are saved and the run is recorded as
            interrupted; resume it. One that comes as the run ends (its record being
            written, its workers stopping) is raised once the record says how it ended
            (``finished``: nothing to resume).
    """
    from attnsweep.orchestrator.spec import SweepSpec, load_spec, parse_spec

    check_names(resume=resume, run_id=run_id)
    _whole("max_trials", max_trials, 1)
    _options(max_in_flight, progress_interval_s, address, local)
    if isinstance(spec, Mapping):
        import yaml

        spec = parse_spec(
            yaml.safe_dump(_plain(spec, "spec"), sort_keys=False),
            source="the spec dict",
            max_trials=max_trials,
        )
    elif isinstance(spec, (str, Path)):
        spec = load_spec(spec, max_trials=max_trials)
    elif not isinstance(spec, SweepSpec):
        raise ArgumentError(
            f"spec: give a spec file's path, the spec as a dict, or a parsed spec; got {type(spec).__name__}"
        )
    if resume is not None and run_id not in (None, resume):
        raise AttnsweepError(f"run_id {run_id!r} and resume {resume!r}: a resumed run keeps its id; give one of them")
    return _execute(
        spec,
        Store(store),
        address,
        local,
        max_in_flight,
        resume,
        resume or run_id,
        progress_interval_s,
        console,
    )


def resume(
    run_id: str,
    store: str | Path = DEFAULT_STORE,
    *,
    address: str | None = None,
    local: bool = False,
    max_in_flight: int | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    console: Console | None = None,
) -> RunSummary:
    """Continue an interrupted or crashed run with the spec stored in its record (as
    ``attnsweep resume``): only the trials it does not hold yet run.

    Returns:
        The run's summary, as :func:`run` returns it (``already_complete`` true, at once,
        where the run holds every trial).

    Raises:
        results.StoreError: no such run.
        orchestrator.RunError: as :func:`run`.
    """
    check_names(run_id=run_id)
    if run_id is None:
        raise ArgumentError("run_id: give the id of the run to resume")
    _options(max_in_flight, progress_interval_s, address, local)
    results = Store(store)
    spec = stored_spec(results.results, run_id)
    return _execute(spec, results, address, local, max_in_flight, run_id, run_id, progress_interval_s, console)


def stored_spec(results: ResultsStore, run_id: str) -> SweepSpec:
    """The spec stored in run ``run_id``'s record, parsed.

    Raises:
        results.StoreError: no such run.
    """
    from attnsweep.orchestrator.spec import parse_spec

    record = results.read_run(results.sweep_of(run_id), run_id)
    return parse_spec(record["spec_yaml"], source=f"the spec of run {run_id}")


def _execute(
    spec: SweepSpec,
    store: Store,
    address,
    local: bool,
    max_in_flight,
    resume_id: str | None,
    run_id: str | None,
    progress_interval_s: float,
    console,
) -> RunSummary:
    if not _RUNNING.acquire(blocking=False):
        raise ArgumentError(
            "another attnsweep run is under way in this process: one Ray session serves one run at a "
            "time; wait for it (or run the second from another process)"
        )
    try:
        return _execute_alone(
            spec,
            store,
            address,
            local,
            max_in_flight,
            resume_id,
            run_id,
            progress_interval_s,
            console,
        )
    finally:
        _RUNNING.release()


_RUNNING = threading.Lock()
"""Held while a run executes: ``ray.init`` and the SIGTERM handler belong to the process."""


def _execute_alone(
    spec: SweepSpec,
    store: Store,
    address,
    local: bool,
    max_in_flight,
    resume_id: str | None,
    run_id: str | None,
    progress_interval_s: float,
    console,
) -> RunSummary:
    from attnsweep.orchestrator.executors import LocalExecutor, RayExecutor

    results = store.results
    if resume_id is not None:  # refuse a wrong, held or finished run before starting Ray
        from attnsweep.orchestrator.driver import RunSummary, resumable_record
        from attnsweep.results.locks import RunLock

        record = resumable_record(spec, results, resume_id)
        with RunLock(results, spec.name, resume_id):
            pass
        stored = len(results.run_trial_ids(spec.name, resume_id))
        if record["status"] == "finished" and (spec.search.adaptive or stored >= spec.n_trials()):
            return RunSummary(spec.name, resume_id, stored, status="finished", already_complete=True)
    before = signal.getsignal(signal.SIGTERM)  # the caller's, put back at the end (not Ray's)
    executor = (
        LocalExecutor(spec.execution, spec.resources)
        if local
        else RayExecutor(spec.execution, address, spec.resources, max_workers=spec.n_trials())
    )
    # After the executor: ray.init installs a SIGTERM handler of its own (sys.exit), which
    # would end the run as failed instead of interrupted and resumable.
    previous = _sigterm_interrupts()
    try:
        # The driver's own modules load after the executor has asked for its workers, whose
        # start-up (torch, about a second) then overlaps them and the sweep's planning.
        from attnsweep.orchestrator.driver import new_run_id, run_sweep

        return run_sweep(
            spec,
            results,
            executor,
            console=console,
            max_in_flight=max_in_flight,
            run_id=run_id or new_run_id(),
            resume=resume_id is not None,
            progress_interval_s=progress_interval_s,
        )
    finally:
        from attnsweep.orchestrator.driver import signals_held

        try:
            with signals_held():  # a signal while the workers stop: acted on once they have
                executor.shutdown()
        finally:
            # The caller's handler, not Ray's (sys.exit, silent): a SIGTERM after the run is
            # the caller's to handle (the CLI prints the run's summary).
            if previous is not None:
                signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


def _sigterm_interrupts():
    """Make SIGTERM (a scheduler, ``timeout``, ``ray job stop``) end the run as Ctrl-C does;
    returns the handler it replaced (None off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, stop)
