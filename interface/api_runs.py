"""The runs of a store for the CLI's everyday commands: a sweep's name read as its latest run,
the runs listed with their counts, a run's m* table for scripts, the store compacted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnsweep.orchestrator.errors import AttnsweepError

if TYPE_CHECKING:
    import polars as pl

    from attnsweep.analysis.context import RunContext
    from attnsweep.results import ResultsStore


def resolve_run(results: ResultsStore, name: str | None, notify: Callable[[str], None] | None = None) -> str | None:
    """``name`` as a run id; a sweep's name means that sweep's latest run, which ``notify``
    is told. A name that is neither is returned as it is, for the caller's own message."""
    if name is None:
        return None
    run_id, n_runs = results.resolve_run(name)
    if n_runs and notify is not None:
        notify(
            f"{name} is a sweep: its latest run is {run_id}"
            + (f" (of {n_runs}; `attnsweep runs` lists them)" if n_runs > 1 else "")
        )
    return run_id


def existing_store(store: str) -> ResultsStore:
    """The ResultsStore at ``store``, refusing a local path that does not exist (rather
    than reading it as an empty store).

    Raises:
        AttnsweepError: ``store`` is a local path that does not exist.
    """
    from attnsweep.results import ResultsStore

    results = ResultsStore(store)  # a URI whose scheme cannot hold a store is refused here
    if results.local and not Path(results.root).exists():
        raise AttnsweepError(f"no store at {store}: that path does not exist (give --store DIR or set ATTNSWEEP_STORE)")
    return results


def check_paths(store: str, figures: Path | None) -> None:
    """Refuse store and figure paths that cannot work, before any trial runs.

    Raises:
        AttnsweepError: an empty store path, or either path is a file.
    """
    if not store.strip():
        raise AttnsweepError("--store: an empty path; give a directory (default results-store)")
    for label, path in (("--store", Path(store)), ("--figures", figures)):
        if path is not None and path.exists() and not path.is_dir():
            raise AttnsweepError(f"{label}: {path} exists and is not a directory")


def check_figure_folder(figures: Path | None, sweep: str, run_id: str) -> Path:
    """The folder ``analyze`` (and ``run``'s analysis) writes run ``run_id``'s figures into:
    ``figures``, or ``figures/SWEEP/RUN_ID`` under the current folder. Refused, as ``report``
    refuses a linked figures folder (results/outputs.py ``check_output_folder``), where that
    folder, or in the default one of ``figures``, ``figures/SWEEP``, ``figures/SWEEP/RUN_ID``,
    is a link (its figures would land wherever the link points).

    Raises:
        AttnsweepError: naming ``--figures``, the link and where it points.
    """
    from attnsweep.results.outputs import check_output_folder

    folders: list[Path | str]
    if figures is not None:
        root, folders = Path(figures).absolute().parent, [Path(figures)]
    else:
        base = Path("figures")
        root, folders = Path.cwd(), [base, base / sweep, base / sweep / run_id]
    try:
        check_output_folder(root, folders, "--figures")
    except ValueError as exc:
        raise AttnsweepError(str(exc)) from None
    return Path(folders[-1])


def trial_counts(results: ResultsStore, sweep: str, run_id: str) -> dict[str, int]:
    """Trials of a run by status, each trial once, as the store holds them (empty where it
    holds none)."""
    from attnsweep.results import StoreError

    try:
        held = results.scan_run_trials(sweep, run_id).group_by("status").len().collect()
    except StoreError:
        return {}
    return dict(zip(held["status"].to_list(), held["len"].to_list(), strict=True))


RUN_STATUSES = ("done", "failed", "diverged", "lost")
"""A trial's statuses, as :func:`list_runs` counts them."""


@dataclass(frozen=True)
class RunRow:
    """One run as ``attnsweep runs`` lists it.

    Attributes:
        running: not ended: ``counts`` are the rows it holds so far, not its record's.
        counts: trials per status of :data:`RUN_STATUSES`.
    """

    sweep: str
    run_id: str
    status: str | None
    running: bool
    n_trials: int | None
    counts: dict[str, int]
    started_at: Any
    ended_at: Any


def list_runs(store: str, sweep: str | None = None) -> list[RunRow] | None:
    """The runs in the store (of ``sweep``, if given) by sweep and start; None when the
    store holds no runs.

    Raises:
        AttnsweepError: no store at a local ``store``, or no sweep ``sweep`` in it.
        results.StoreError: a local folder that is not a store.
    """
    import polars as pl

    from attnsweep.results import StoreError
    from attnsweep.results.integrity import recognise

    results = existing_store(store)
    if results.local:
        recognise(results)  # a folder that is not a store (/etc, a home folder) is refused, not listed as empty
    try:
        records = results.scan_runs().collect()
    except StoreError:
        return None
    if sweep is not None:
        records = records.filter(pl.col("sweep") == sweep)
        if records.is_empty():
            raise AttnsweepError(f"no sweep {sweep!r} in the store at {store}")
    records = records.sort("sweep", "started_at")
    rows = []
    for r in records.iter_rows(named=True):
        counts = {s: r.get(f"n_{s}") for s in RUN_STATUSES}
        running = r.get("status") == "running" or any(v is None for v in counts.values())
        if running:  # not ended (its record's counts are those of its start): count the rows it holds so far
            try:
                held = results.scan_run_trials(r["sweep"], r["run_id"]).group_by("status").len().collect()
                counts = dict.fromkeys(RUN_STATUSES, 0) | dict(zip(held["status"], held["len"], strict=True))
            except StoreError:
                counts = dict.fromkeys(RUN_STATUSES, 0)
        rows.append(
            RunRow(
                r["sweep"],
                r["run_id"],
                r.get("status"),
                running,
                r.get("n_trials"),
                counts,
                r.get("started_at"),
                r.get("ended_at"),
            )
        )
    return rows


@dataclass
class Compaction:
    """What :func:`compact` did: runs compacted, their files before and after, their rows
    (unchanged), files deleted (``deleted_superseded``: files an earlier compaction had
    replaced and a crash left; ``deleted_temp``: temporary files of dead writers), and each
    run folder it skipped as ``(why, locked)``: ``locked`` when a driver is writing that run."""

    runs: int = 0
    files_before: int = 0
    files_after: int = 0
    rows: int = 0
    deleted_superseded: int = 0
    deleted_temp: int = 0
    curve_files_before: int = 0
    curve_files_after: int = 0
    deleted_uncommitted_curves: int = 0
    kept_uncommitted_curves: int = 0
    curve_points_dropped: int = 0
    quarantined_curves: int = 0
    skipped: list[tuple[str, bool]] = field(default_factory=list)


def compact(store: str, sweep: str | None = None, run_id: str | None = None) -> Compaction:
    """Merge each run's part files into one file without changing a row (``attnsweep store
    compact``); runs a driver is writing and folders no run writes are skipped.

    Raises:
        results.StoreError: no folder at ``store``, or a folder that is not a store.
        AttnsweepError: ``sweep`` or ``run_id`` given and no such trials.
    """
    from attnsweep.results import ResultsStore
    from attnsweep.results.integrity import compact_store, not_a_run_folder, recognise
    from attnsweep.results.locks import RunLock, RunLockedError
    from attnsweep.results.roots import listing

    results = ResultsStore(store)
    recognise(results)  # exit 2 for no folder, or a folder that is not a store
    total = Compaction()
    # A run's curves folder may outlive its trials (points written before a kill): both are listed.
    found = {
        f.relative_to(results.root / table): f
        for table in ("curves", "trials")
        for f in listing(results.root / table, "sweep=*/run_id=*")
    }
    folders = [
        f
        for _, f in sorted(found.items(), key=lambda kv: str(kv[0]))
        if (not sweep or f.parent.name == f"sweep={sweep}") and (not run_id or f.name == f"run_id={run_id}")
    ]
    if (sweep or run_id) and not folders:
        raise AttnsweepError(
            f"no trials of {'run ' + run_id if run_id else ''}{' of ' if sweep and run_id else ''}"
            f"{'sweep ' + sweep if sweep else ''} in the store at {store}"
        )
    for folder in folders:
        sw, r = folder.parent.name.removeprefix("sweep="), folder.name.removeprefix("run_id=")
        why = not_a_run_folder(folder)  # one odd folder must not stop the compaction of the others
        if why is not None:
            total.skipped.append(
                (
                    f"{folder.relative_to(results.root)}: {why}; left as it is (store check lists its files)",
                    False,
                )
            )
            continue
        try:
            with RunLock(results, sw, r):
                rep = compact_store(results, sw, r)
        except RunLockedError as exc:
            total.skipped.append((str(exc), True))
            continue
        for k in (
            "runs",
            "files_before",
            "files_after",
            "rows",
            "deleted_superseded",
            "deleted_temp",
            "curve_files_before",
            "curve_files_after",
            "deleted_uncommitted_curves",
            "kept_uncommitted_curves",
            "curve_points_dropped",
            "quarantined_curves",
        ):
            setattr(total, k, getattr(total, k) + getattr(rep, k))
    return total


def m_star_export(
    results: ResultsStore, sweep: str, run_id: str, figures: Path | None = None, context: RunContext | None = None
) -> pl.DataFrame:
    """The m* table of a run for scripts: a row per cell, the run id first, as
    :func:`analysis.exports.export_m_star` writes it: ``m_star`` only where it is a value
    (``bound`` exact), the bound's value in ``m_star_bound`` elsewhere, and without the
    bootstrap replicates of each m* (figures into ``figures``, if given). ``Store.analyze``'s
    ``m_star`` keeps the bound's value in ``m_star`` instead, beside ``bound``.

    Args:
        context: the run's record and settings, if already read (:class:`analysis.context.RunContext`).

    Raises:
        results.StoreError: no such run, or it has no trained trials.
        orchestrator.SpecError: the run's stored spec has invalid settings.
    """
    import polars as pl

    from attnsweep.analysis.context import RunContext
    from attnsweep.analysis.experiments import analysis_of
    from attnsweep.analysis.exports import export_m_star

    ctx = context or RunContext.load(results, sweep, run_id)
    kind = analysis_of(ctx.experiment)
    table = kind.m_star(kind.analyze(results, ctx, figures, False))
    table = export_m_star(table).with_columns(pl.lit(run_id).alias("run_id"))
    return table.select("run_id", pl.exclude("run_id"))
