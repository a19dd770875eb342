"""Running a sweep: expand, pack, submit with bounded work in flight, stream rows to the store.

The driver holds at most ``max_in_flight`` packs and one write buffer: never a list of
all trials or all results, so a grid sweep's memory does not grow with the sweep. An
adaptive search also keeps the few columns it decides on (:data:`RESULT_COLUMNS`) of each
of the run's trials, about 1 KB per trial.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import secrets
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from rich.console import Console

from attnsweep.orchestrator.errors import RunError
from attnsweep.orchestrator.executors import Executor, is_lost
from attnsweep.orchestrator.packing import Pack, group_of, make_packs, pack_sizer, spec_pack_sizer
from attnsweep.orchestrator.progress import PROGRESS_INTERVAL_S, SweepProgress
from attnsweep.orchestrator.provenance import code_version, host, package_versions
from attnsweep.orchestrator.spec import SweepSpec, trial_id
from attnsweep.orchestrator.trial_order import smallest_first, trial_cost
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore, StoreError, TrialWriter
from attnsweep.results.locks import RunLock
from attnsweep.results.store import os_reason
from attnsweep.workers import TrialStatus

RESULT_COLUMNS = ["trial_id", "status", "test_acc", "test_error", "epochs", "error_type"]
"""The columns of a trial's row an adaptive search reads (orchestrator/adaptive.py)."""


@dataclass
class RunSummary:
    """What a finished (or interrupted) run did."""

    sweep: str
    run_id: str
    n_trials: int
    counts: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    status: str = "running"
    busy_s: float = 0.0
    """Worker-seconds spent training this attempt's packs (the sum of their wall times)."""
    slots: int = 1
    """Packs the executor runs at once."""
    already_complete: bool = False
    """A resume found every trial of the run stored: nothing ran."""

    @property
    def trials_per_s(self) -> float:
        return sum(self.counts.values()) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def idle_frac(self) -> float | None:
        """The fraction of the workers' time (``slots`` x ``wall_s``) not spent training a
        pack: waiting for the driver, for a round's last pack, or for Ray."""
        return max(0.0, 1.0 - self.busy_s / (self.slots * self.wall_s)) if self.wall_s > 0 else None


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx`` in UTC: sorts by start time, unique by its random tail."""
    return f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def run_sweep(
    spec: SweepSpec,
    store: ResultsStore,
    executor: Executor,
    *,
    run_id: str | None = None,
    resume: bool = False,
    console: Console | None = None,
    max_in_flight: int | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
) -> RunSummary:
    """Run every trial of ``spec`` on ``executor`` and stream the rows into ``store``.

    Args:
        spec: the validated sweep.
        store: where the rows and the run record go.
        executor: where the packs run.
        run_id: id of this run (default: a new one).
        resume: continue run ``run_id``: trials it already holds (by trial id) are skipped,
            and the attempt is appended to its record.
        console: where progress and the summary are shown (default: stderr): a live bar on
            a terminal, else a plain line every ``progress_interval_s`` seconds
            (:mod:`orchestrator.progress`).
        max_in_flight: packs submitted at once (default: the spec's, else 2 per worker).
        progress_interval_s: seconds between plain progress lines.

    Returns:
        The run's summary (``counts`` are this attempt's). A KeyboardInterrupt is re-raised
        after the rows already finished are flushed and the run is recorded as ``interrupted``.

    Raises:
        RunError: ``resume`` of a run that does not exist or was made from another spec, or
            a new run whose id exists.
        results.StoreError: the store cannot be written (checked before anything trains), or
            refused a write mid-run: the run is recorded ``failed`` and the rows the store
            refused are in the rescue file the message names.
        results.locks.RunLockedError: another driver is writing this run.
    """
    console = console or Console(stderr=True)
    run_id = run_id or new_run_id()
    store.check_writable(spec.name, run_id)  # before anything trains: a refused write would lose its work
    with RunLock(store, spec.name, run_id):
        record, done_ids = _open_run(spec, store, run_id, resume)
        return _run_locked(
            spec,
            store,
            executor,
            run_id,
            record,
            done_ids,
            console,
            max_in_flight,
            progress_interval_s,
        )


def resumable_record(spec: SweepSpec, store: ResultsStore, run_id: str) -> dict:
    """The record of run ``run_id``, checked to be a run of ``spec``.

    Raises:
        RunError: no such run of the spec's sweep, or it was made from another spec.
    """
    if not (store.run_dir("runs", spec.name, run_id) / "run.parquet").exists():
        raise RunError(f"cannot resume run {run_id}: sweep {spec.name} has no such run in the store at {store.root}")
    record = store.read_run(spec.name, run_id)
    if record["spec_hash"] != spec.spec_hash():
        raise RunError(
            f"cannot resume run {run_id} with this spec: its grid, seeds, fixed settings, analysis or search "
            f"differ from the run's (spec hash {spec.spec_hash()} vs {record['spec_hash']}); "
            "resume with the run's own spec: attnsweep resume RUN_ID"
        )
    return record


def _open_run(spec: SweepSpec, store: ResultsStore, run_id: str, resume: bool) -> tuple[dict, set[str]]:
    """The run record to continue (or a new one) and the trial ids the run already holds."""
    if not resume:
        if (store.run_dir("runs", spec.name, run_id) / "run.parquet").exists():
            raise RunError(
                f"run {run_id} of sweep {spec.name} exists; resume it (attnsweep resume {run_id}) or start a new run"
            )
        return _run_record(spec, run_id), set()
    record = resumable_record(spec, store, run_id)
    done_ids = store.run_trial_ids(spec.name, run_id)
    attempts = list(record.get("attempts") or [])
    for i, a in enumerate(attempts):
        if a["status"] == "running":  # we hold the lock: whoever ran it died without a word
            last = i == len(attempts) - 1
            attempts[i] = {
                **a,
                "status": "died",
                "n_run": len(done_ids) - (a["n_skipped"] or 0) if last else None,
            }
    record["attempts"] = attempts
    return record, done_ids


def _run_locked(
    spec,
    store,
    executor,
    run_id,
    record,
    done_ids,
    console,
    max_in_flight,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
) -> RunSummary:
    todo = None if spec.search.adaptive else spec.n_trials() - len(done_ids)
    summary = RunSummary(spec.name, run_id, todo or 0, slots=max(executor.slots(), 1))
    attempt = dict(
        attempt=len(record.get("attempts") or []) + 1,
        started_at=dt.datetime.now(dt.UTC),
        ended_at=None,
        status="running",
        host=host(),
        pid=os.getpid(),
        executor=executor.describe(),
        n_skipped=len(done_ids),
        n_run=0,
        wall_s=None,
    )
    record.update(
        status="running",
        ended_at=None,
        executor=executor.describe(),
        code_version=code_version(),
        attempts=[*(record.get("attempts") or []), attempt],
    )
    store.clean_temp_files()  # only files whose writer is provably gone: other runs may be writing theirs
    record.update(error=None, rescue_file=None)  # this attempt's, set at its end
    store.write_run(spec.name, run_id, record, run_schema(failure=True))
    writer = TrialWriter(store, spec.name, run_id, trial_schema(), spec.execution.flush_rows, spec.execution.flush_s)
    runner = PackRunner(
        spec,
        executor,
        writer,
        summary,
        done_ids,
        console,
        max_in_flight or spec.execution.max_in_flight or 2 * executor.slots(),
        progress_interval_s,
    )
    t0 = time.perf_counter()
    error: BaseException | None = None
    try:
        if spec.search.adaptive:
            from attnsweep.orchestrator.adaptive import run_adaptive

            run_adaptive(spec, store, run_id, runner)
        else:
            trials = ((tid, c) for c in smallest_first(spec) if (tid := trial_id(c)) not in done_ids)
            runner.run(trials, todo, spec_pack_sizer(spec, executor.slots()), f"{spec.name} {run_id}")
        summary.status = "finished"
    except KeyboardInterrupt:
        summary.status = "interrupted"
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        # The end is written whole: a SIGTERM or Ctrl-C here (the run's last moment) is acted on
        # once the record says how the run ended, not partway, which left it saying "running".
        with signals_held():
            _end_run(spec, store, run_id, record, attempt, summary, writer, error, t0, console)
    return summary


def _end_run(spec, store, run_id, record, attempt, summary, writer, error, t0, console) -> None:
    """A run's end: its last rows flushed, its record written with how it ended.

    Raises:
        StoreError: the store refused the last rows (they are in the rescue file it names), or
            the record of a run that had no other error could not be written.
    """
    refused = None
    try:
        writer.flush()
    except StoreError as exc:  # the last rows went to the rescue file the message names
        refused = exc
        summary.status = "failed"
    summary.wall_s = time.perf_counter() - t0
    if summary.status == "running" or writer.failed is not None:
        summary.status = "failed"
    attempt.update(
        status=summary.status,
        ended_at=dt.datetime.now(dt.UTC),
        wall_s=summary.wall_s,
        n_run=sum(summary.counts.values()),
    )
    _finish_record(record, summary, store, spec.name, run_id)
    if spec.search.adaptive and summary.status == "finished":  # the cap becomes what it ran
        record["n_trials"] = sum(record[k] for k in ("n_done", "n_failed", "n_diverged", "n_lost"))
    cause = writer.failed or refused or (error if summary.status == "failed" else None)
    record.update(
        error=_failure_text(cause) if cause is not None else None,
        rescue_file=str(writer.rescue_path) if writer.rescue_path is not None else None,
    )
    try:
        store.write_run(spec.name, run_id, record, run_schema(failure=True))
    except OSError as exc:  # the disk is still full: say what the record should have said
        note = _unrecorded(store, spec.name, run_id, record, exc)
        console.print(f"error: {note}", style="red", markup=False, highlight=False, soft_wrap=True)
        if refused is None and error is None and summary.status != "interrupted":
            raise StoreError(note) from exc
    if refused is not None:
        raise refused


@contextlib.contextmanager
def signals_held(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs, then act on them: each signal that came is
    raised again once the block ends (in any way), under the handlers in place when it began
    (a KeyboardInterrupt where those raise one; the process ends where a signal's handler is
    the default). For what must not be cut partway: a run's record written at its end, its
    workers stopped. Off the main thread, where no handler can be set, nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: came.append(signum)) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        for s in dict.fromkeys(came):
            signal.raise_signal(s)


def _failure_text(exc: BaseException) -> str:
    """Why a run failed, for its record: our errors' messages as they are, others with their type."""
    from attnsweep.orchestrator.errors import AttnsweepError

    if isinstance(exc, OSError):
        return f"{os_reason(exc)}: {exc.filename}" if exc.filename else os_reason(exc)
    text = str(exc).strip()
    return text if isinstance(exc, (StoreError, AttnsweepError)) and text else f"{type(exc).__name__}: {text}"


def _unrecorded(store: ResultsStore, sweep: str, run_id: str, record: dict, exc: OSError) -> str:
    """The message for a run record that could not be written: why, and what it should say."""
    path = store.run_dir("runs", sweep, run_id) / "run.parquet"
    counts = ", ".join(
        f"{k.removeprefix('n_')} {record.get(k) or 0}" for k in ("n_done", "n_failed", "n_diverged", "n_lost")
    )
    should = [f"status {record['status']}"]
    if record.get("error"):
        should.append(f"error: {record['error']}")
    if record.get("rescue_file"):
        should.append(f"rescue file: {record['rescue_file']}")
    should.append(f"trials stored: {counts}")
    return (
        f"the record of run {run_id} ({path}) could not be written: {os_reason(exc)}; it still says 'running' "
        f"(written at the start). It should say: {'; '.join(should)}"
    )


class PackRunner:
    """Runs packs of one run's trials on the executor, streaming their rows to the writer.

    A grid sweep is one stream of trials (:meth:`run`); an adaptive search
    (orchestrator/adaptive.py) is a set of flows, one per cell (:meth:`run_cells`). Both go
    through one submit loop (:meth:`_drive`). Trials whose id the run already holds are
    skipped, so a resumed run never repeats a finished trial.
    """

    def __init__(
        self,
        spec: SweepSpec,
        executor: Executor,
        writer: TrialWriter,
        summary: RunSummary,
        done_ids: set[str],
        console: Console,
        bound: int,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
    ):
        self.spec, self.executor, self.writer, self.summary = spec, executor, writer, summary
        self.done_ids, self.console, self.bound = done_ids, console, bound
        self.progress_interval_s = progress_interval_s
        self.rows_by_id: dict[str, dict] = {}
        """The run's rows by trial id, the columns an adaptive search decides on
        (:data:`RESULT_COLUMNS`); filled by :meth:`keep_rows` and as packs finish."""
        self._keep = False  # kept only for an adaptive search (keep_rows)

    def keep_rows(self, store: ResultsStore, sweep: str, run_id: str) -> None:
        """Keep the run's rows in :attr:`rows_by_id` from now on, starting with those it
        already holds (a resumed run)."""
        self._keep = True
        try:
            rows = store.scan_run_trials(sweep, run_id).select(RESULT_COLUMNS).collect()
        except StoreError:  # no rows yet: a new run
            return
        self.rows_by_id.update((r["trial_id"], r) for r in rows.iter_rows(named=True))

    def _record(self, rows: list[dict]) -> None:
        self.done_ids.update(r["trial_id"] for r in rows)
        if self._keep:
            self.rows_by_id.update((r["trial_id"], {k: r.get(k) for k in RESULT_COLUMNS}) for r in rows)
        self.summary.busy_s += sum(r.get("wall_s") or 0.0 for r in rows)

    def record_reused(self, rows: list[dict]) -> int:
        """Store rows whose results are another trial's (the budget check's trials that the
        doubled budget cannot change, orchestrator/adaptive.py), skipping trial ids the run
        already holds; returns how many were written. Flushed before it returns."""
        rows = [r for r in rows if r["trial_id"] not in self.done_ids]
        if rows:
            self.writer.append(rows)
            self._record(rows)
            self.summary.counts.update(r["status"] for r in rows)
        self.writer.flush()
        return len(rows)

    def run(self, trials: Iterator, total: int | None, sizer, label: str, extra: dict | None = None) -> None:
        """Run ``(trial_id, config)`` pairs with at most ``bound`` packs in flight;
        ``total``: the trials the progress counts to (None: unknown)."""
        packs = make_packs(trials, sizer, self.spec.experiment)
        with SweepProgress(self.console, total, label, self.progress_interval_s) as progress:
            self._drive(lambda: next(packs, None), lambda _tid: extra or {}, None, progress)

    def run_cells(self, flows: list, label: str) -> None:
        """Run independent flows of requests (an adaptive search's cells), keeping every
        worker busy while any flow has work.

        A flow is a generator that yields :class:`~attnsweep.orchestrator.adaptive.Request` objects; it is advanced as soon
        as every trial of its last request has a row (in :attr:`rows_by_id`), so a cell whose
        round finished starts its next round while other cells' packs still run. Packs are
        cut from the trials waiting across all flows when they are submitted, at most the
        spec's pack size and at most the waiting trials divided over the workers, so the
        last requests of a run are split across workers instead of training on one.
        """
        slots = max(self.executor.slots(), 1)
        ex = self.spec.execution
        sizer = pack_sizer(
            ex.pack_size, self.spec.experiment, ex.pack_memory_mb, group=group_of(self.spec), curves=ex.curves
        )
        queue: list[tuple[str, object]] = []  # trials waiting for a pack, in request order
        extra_of: dict[str, dict] = {}
        waiting: dict[int, set[str]] = {}  # flow -> its request's trials without a row yet
        owners: dict[str, set[int]] = {}  # trial id -> flows waiting on it
        pending = set()  # queued or in flight

        def advance(i: int) -> None:
            while True:
                try:
                    request = next(flows[i])
                except StopIteration:
                    return
                ids = list(dict.fromkeys((trial_id(c), c) for c in request.configs))
                left = {tid for tid, _ in ids if tid not in self.done_ids}
                for tid, config in ids:
                    if tid in left and tid not in pending:
                        queue.append((tid, config))
                        extra_of[tid] = request.extra
                        pending.add(tid)
                    if tid in left:
                        owners.setdefault(tid, set()).add(i)
                if left:
                    waiting[i] = left
                    return

        def next_pack() -> Pack | None:
            if not queue:  # every flow waits on packs in flight, or has ended
                return None
            first = queue[0][1]
            size = max(1, min(sizer(first), -(-len(queue) // slots)))
            key = first.shape_key()
            take = [j for j, (_, c) in enumerate(queue) if c.shape_key() == key][:size]
            chosen = [queue[j] for j in take]
            for j in reversed(take):
                del queue[j]
            return Pack(tuple(t for t, _ in chosen), tuple(c for _, c in chosen), self.spec.experiment)

        def settled(pack: Pack) -> None:
            ready = set()
            for tid in pack.ids:
                pending.discard(tid)
                for i in owners.pop(tid, ()):
                    waiting[i].discard(tid)
                    if not waiting[i]:
                        ready.add(i)
            for i in sorted(ready):
                del waiting[i]
                advance(i)

        with SweepProgress(self.console, None, label, self.progress_interval_s) as progress:
            for i in range(len(flows)):
                advance(i)
            cost = trial_cost(self.spec)  # the first requests' smallest cells first (orchestrator/trial_order.py)
            queue.sort(key=lambda item: cost(item[1]))
            self._drive(next_pack, lambda tid: extra_of.pop(tid, {}), settled, progress)

    def _drive(
        self,
        next_pack: Callable[[], Pack | None],
        extra_of: Callable[[str], dict],
        on_settled: Callable[[Pack], None] | None,
        progress: SweepProgress,
    ) -> None:
        """Submit packs until none is left and none is in flight, at most ``bound`` at once.

        ``next_pack()``: the next new pack, or None when there is none now (nothing is in
        flight at the end, so None then means done). The trials of a lost pack are retried
        first, one per pack, on a worker with nothing else queued. ``extra_of(trial_id)``:
        columns to add to a row; ``on_settled(pack)``: called once a pack's rows are
        written (not for a lost pack sent back to be retried)."""
        executor = self.executor
        retry: deque[Pack] = deque()  # singletons of a lost pack, run before new packs
        deaths: Counter = Counter()  # worker deaths per trial id, from lost packs
        in_flight: dict = {}
        while True:
            while len(in_flight) < self.bound:
                isolated = bool(retry)
                if isolated and not executor.can_isolate():
                    break  # wait for a worker to drain; new packs wait behind the retries
                pack = retry.popleft() if retry else next_pack()
                if pack is None:
                    break
                in_flight[executor.submit(pack, isolated=isolated)] = pack
            if not in_flight:
                break
            for handle, outcome in executor.wait(list(in_flight), timeout_s=0.5):
                pack = in_flight.pop(handle)
                rows = self._settle(pack, outcome, retry, deaths, progress, extra_of)
                if rows is not None and on_settled is not None:
                    on_settled(pack)
            self.writer.maybe_flush()

    def _settle(
        self, pack: Pack, outcome, retry: deque, deaths: Counter, progress: SweepProgress, extra_of
    ) -> list[dict] | None:
        """Write a finished pack's rows (``extra_of(trial_id)``: columns to add) and return
        them; a pack lost with more than one trial goes back on ``retry`` instead, one
        trial per pack (returns None)."""
        runs_per_pack = self.spec.execution.max_retries + 1
        if isinstance(outcome, BaseException) and is_lost(outcome) and len(pack) > 1:
            # Which trial killed its worker is unknown: run each alone, so only that one
            # ends lost and its pack-mates finish.
            deaths.update({tid: runs_per_pack for tid in pack.ids})
            retry.extend(Pack((tid,), (cfg,), pack.experiment) for tid, cfg in zip(pack.ids, pack.configs))
            return None
        rows = [{**r, **extra_of(r["trial_id"])} for r in _rows(pack, outcome, deaths, runs_per_pack)]
        self.writer.append(rows)
        self._record(rows)
        statuses = Counter(r["status"] for r in rows)
        self.summary.counts.update(statuses)
        progress.advance(len(rows), statuses)
        return rows


# Ray colours the text of a remote task's exception for terminals; a row's error is data.
_ANSI_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _rows(
    pack: Pack,
    outcome: list[dict] | BaseException,
    deaths: Counter | None = None,
    runs_per_pack: int = 1,
) -> list[dict]:
    """One row per trial of a finished pack: config, trial id, and results or the error.

    ``attempts`` counts the times a worker started the trial that are known: one per
    successful pack, ``runs_per_pack`` (1 + Ray's retries) per pack lost with it.
    """
    now = dt.datetime.now(dt.UTC)
    version = code_version()
    deaths = deaths or Counter()
    lost = isinstance(outcome, BaseException) and is_lost(outcome)
    if isinstance(outcome, BaseException):
        status = TrialStatus.LOST if lost else TrialStatus.FAILED
        message = _ANSI_CODE.sub("", str(outcome))[:4000]
        if lost:
            message = f"worker died on every attempt ({runs_per_pack} per pack): {message}"
        results = [
            dict(
                status=status.value,
                error_type=type(outcome).__name__,
                error=message,
                pack_size=len(pack),
            )
        ] * len(pack)
    else:
        results = outcome
    return [
        {
            "trial_id": tid,
            "experiment": pack.experiment,
            **cfg.model_dump(),
            **res,
            "code_version": version,
            "attempts": deaths[tid] + (runs_per_pack if lost else 1),
            "finished_at": now,
        }
        for tid, cfg, res in zip(pack.ids, pack.configs, results)
    ]


def _run_record(spec: SweepSpec, run_id: str) -> dict:
    return dict(
        status="running",
        started_at=dt.datetime.now(dt.UTC),
        ended_at=None,
        wall_s=None,
        n_trials=spec.n_trials(),
        n_done=0,
        n_failed=0,
        n_diverged=0,
        n_lost=0,
        spec_name=spec.name,
        spec_hash=spec.spec_hash(),
        spec_yaml=spec.source_yaml,
        executor=None,
        host=host(),
        code_version=code_version(),
        packages=package_versions(),
        experiment=spec.experiment,
        trial_fields=",".join(spec.family.config.model_fields),
        attempts=[],
    )


def _finish_record(record: dict, summary: RunSummary, store: ResultsStore, sweep: str, run_id: str) -> None:
    """The record's counts are the run's, over all its attempts, read back from the store:
    per status, and per cell (what a later read is checked against)."""
    from attnsweep.orchestrator.trials_table import cell_counts

    try:
        rows = store.scan_run_trials(sweep, run_id)
        counts = dict(rows.group_by("status").len().collect().iter_rows())
        record["cell_counts"] = cell_counts(rows, (record.get("trial_fields") or "").split(","))
    except (
        StoreError,
        OSError,
    ):  # OSError: a store that cannot be listed now (an object store out of reach)
        counts = {}
    started = record["started_at"]
    ended = dt.datetime.now(dt.UTC)
    record.update(
        status=summary.status,
        ended_at=ended,
        wall_s=sum(a["wall_s"] or 0.0 for a in record["attempts"])
        if record["attempts"]
        else (ended - started).total_seconds(),
        n_done=counts.get(TrialStatus.DONE.value, 0),
        n_failed=counts.get(TrialStatus.FAILED.value, 0),
        n_diverged=counts.get(TrialStatus.DIVERGED.value, 0),
        n_lost=counts.get(TrialStatus.LOST.value, 0),
    )
