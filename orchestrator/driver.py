"""Running a sweep: expand, pack, submit with bounded work in flight, stream rows to the store.

The driver holds at most ``max_in_flight`` packs and one write buffer: never a list of
all trials or all results, so its memory does not grow with the sweep.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from rich.console import Console

from orchestrator.executors import Executor, is_lost
from orchestrator.packing import Pack, make_packs, pack_sizer
from orchestrator.progress import SweepProgress
from orchestrator.provenance import code_version, host, package_versions
from orchestrator.rows import run_schema, trial_schema
from orchestrator.spec import SweepSpec, trial_id
from results import ResultsStore, TrialWriter
from workers import TrialStatus


@dataclass
class RunSummary:
    """What a finished (or interrupted) run did."""

    sweep: str
    run_id: str
    n_trials: int
    counts: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    status: str = "running"

    @property
    def trials_per_s(self) -> float:
        return sum(self.counts.values()) / self.wall_s if self.wall_s > 0 else 0.0


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx`` in UTC: sorts by start time, unique by its random tail."""
    return f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def run_sweep(
    spec: SweepSpec,
    store: ResultsStore,
    executor: Executor,
    *,
    run_id: str | None = None,
    console: Console | None = None,
    max_in_flight: int | None = None,
) -> RunSummary:
    """Run every trial of ``spec`` on ``executor`` and stream the rows into ``store``.

    Args:
        spec: the validated sweep.
        store: where the rows and the run record go.
        executor: where the packs run.
        run_id: id of this run (default: a new one).
        console: where progress and the summary are shown (default: stderr).
        max_in_flight: packs submitted at once (default: the spec's, else 2 per slot).

    Returns:
        The run's summary. A KeyboardInterrupt is re-raised after the rows already
        finished are flushed and the run is recorded as ``interrupted``.
    """
    console = console or Console(stderr=True)
    run_id = run_id or new_run_id()
    n = spec.n_trials()
    summary = RunSummary(spec.name, run_id, n)
    bound = max_in_flight or spec.execution.max_in_flight or 2 * executor.slots()
    started = dt.datetime.now(dt.UTC)
    record = _run_record(spec, run_id, started, executor)
    store.clean_temp_files()
    store.write_run(spec.name, run_id, record, run_schema())
    writer = TrialWriter(store, spec.name, run_id, trial_schema(), spec.execution.flush_rows, spec.execution.flush_s)
    packs = _packs(spec, executor.slots())
    in_flight: dict = {}
    t0 = time.perf_counter()
    try:
        with SweepProgress(console, n, f"{spec.name} {run_id}") as progress:
            exhausted = False
            while True:
                while not exhausted and len(in_flight) < bound:
                    pack = next(packs, None)
                    if pack is None:
                        exhausted = True
                        break
                    in_flight[executor.submit(pack)] = pack
                if not in_flight:
                    break
                for handle, outcome in executor.wait(list(in_flight), timeout_s=0.5):
                    rows = _rows(in_flight.pop(handle), outcome)
                    writer.append(rows)
                    statuses = Counter(r["status"] for r in rows)
                    summary.counts.update(statuses)
                    progress.advance(len(rows), statuses)
                writer.maybe_flush()
        summary.status = "finished"
    except KeyboardInterrupt:
        summary.status = "interrupted"
        raise
    finally:
        writer.flush()
        summary.wall_s = time.perf_counter() - t0
        if summary.status == "running":
            summary.status = "failed"
        _finish_record(record, summary)
        store.write_run(spec.name, run_id, record, run_schema())
    return summary


def _packs(spec: SweepSpec, workers: int) -> Iterator[Pack]:
    return make_packs(((trial_id(c), c) for c in spec.trials()), spec_pack_sizer(spec, workers), spec.experiment)


def spec_pack_sizer(spec: SweepSpec, workers: int | None = None):
    """The pack-size rule of a spec on ``workers`` workers (see :func:`orchestrator.packing.pack_sizer`)."""
    share = -(-spec.n_trials() // workers) if workers else None
    return pack_sizer(spec.execution.pack_size, spec.experiment, spec.execution.pack_memory_mb, share)


def _rows(pack: Pack, outcome: list[dict] | BaseException) -> list[dict]:
    """One row per trial of a finished pack: config, trial id, and results or the error."""
    now = dt.datetime.now(dt.UTC)
    version = code_version()
    if isinstance(outcome, BaseException):
        status = TrialStatus.LOST if is_lost(outcome) else TrialStatus.FAILED
        results = [dict(status=status.value, error_type=type(outcome).__name__, error=str(outcome)[:4000])] * len(pack)
    else:
        results = outcome
    return [
        {"trial_id": tid, "experiment": pack.experiment, **cfg.model_dump(), **res, "code_version": version,
         "finished_at": now}
        for tid, cfg, res in zip(pack.ids, pack.configs, results)
    ]


def _run_record(spec: SweepSpec, run_id: str, started: dt.datetime, executor: Executor) -> dict:
    return dict(
        status="running", started_at=started, ended_at=None, wall_s=None,
        n_trials=spec.n_trials(), n_done=0, n_failed=0, n_diverged=0, n_lost=0,
        spec_name=spec.name, spec_hash=spec.spec_hash(), spec_yaml=spec.source_yaml,
        executor=executor.describe(), host=host(), code_version=code_version(),
        packages=package_versions(), experiment=spec.experiment,
        trial_fields=",".join(spec.family.config.model_fields),
    )


def _finish_record(record: dict, summary: RunSummary) -> None:
    record.update(
        status=summary.status, ended_at=dt.datetime.now(dt.UTC), wall_s=summary.wall_s,
        n_done=summary.counts[TrialStatus.DONE.value], n_failed=summary.counts[TrialStatus.FAILED.value],
        n_diverged=summary.counts[TrialStatus.DIVERGED.value], n_lost=summary.counts[TrialStatus.LOST.value],
    )
