"""Moving runs to another machine: ``attnsweep store export`` writes a run's trial rows, its
record and its adaptive search's Optuna journals into a folder that a git commit can carry, and
``attnsweep store import`` writes them into another store, from which ``attnsweep resume``
continues the run with only the trials that folder does not hold (docs/store.md, "Moving a run
to another machine").

The folder is the one ``report --publish`` writes for its rows (trials.parquet, runs.parquet,
SHA256SUMS; presentation/publish.py), plus ``studies/`` with the journals, and it is read back
with the same checks (presentation/published.py ``load``). Per-epoch curves are not carried.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from attnsweep.orchestrator.adaptive import study_dir
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.folder import RUNS, SUMS, TRIALS
from attnsweep.presentation.publish import write_rows, write_runs, write_sums
from attnsweep.presentation.published import load
from attnsweep.results import ResultsStore, StoreError

STUDIES = "studies"
"""The folder of an export that holds the runs' Optuna journals, one folder per run as in a store."""


def export_runs(store: ResultsStore, run_ids: Sequence[str], out_dir: Path) -> list[tuple[str, str]]:
    """Write runs into ``out_dir``: ``trials.parquet`` (every row the store holds for them, as
    of now: a run still going or killed exports what it flushed), ``runs.parquet`` (their
    records), ``SHA256SUMS`` and ``studies/sweep=S/run_id=R/`` (the Optuna journals of an
    adaptive search that tuned, where the store has them).

    Returns:
        ``(sweep, run_id)`` per run, in the order given.

    A folder that holds an earlier export of exactly these runs (and no findings) is written
    again: the next part of a long sweep exports over the last one.

    Raises:
        StoreError: a run the store does not hold.
        AttnsweepError: ``out_dir`` is a file, holds an export of other runs or findings
            (nothing is written over them), or cannot be written.
    """
    runs = [(store.sweep_of(run_id), run_id) for run_id in dict.fromkeys(run_ids)]
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise AttnsweepError(f"--out: {out_dir} is a file, not a folder; give a new or empty folder")
    taken = [name for name in (TRIALS, RUNS, SUMS, STUDIES) if (out_dir / name).exists()]
    if taken and _exported_runs(out_dir) != {r for _, r in runs}:
        raise AttnsweepError(
            f"--out: {out_dir} already holds {', '.join(taken)} of other runs or of findings; export into an "
            "empty or new folder (a folder that holds an earlier export of the same runs is written again)"
        )
    # A later export of the same runs replaces the earlier one: it holds every row that one held.
    shutil.rmtree(out_dir / STUDIES, ignore_errors=True)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_rows(store, runs, out_dir / TRIALS)
        write_runs(store, runs, out_dir / RUNS)
        write_sums(out_dir)
        for sweep, run_id in runs:
            journals = study_dir(store, sweep, run_id)
            if journals.is_dir():
                shutil.copytree(journals, out_dir / STUDIES / f"sweep={sweep}" / f"run_id={run_id}")
    except OSError as exc:
        raise AttnsweepError(f"--out: cannot write the export to {out_dir}: {exc.strerror or exc}") from None
    return runs


def import_runs(folder: Path, store: ResultsStore) -> list[str]:
    """Write the runs of an export (or of a published findings folder) into ``store``, with
    their Optuna journals; then ``attnsweep resume RUN_ID`` continues each where it stopped.

    Returns:
        The run ids, in the folder's order.

    Raises:
        AttnsweepError: the folder is not a whole, undamaged export (presentation/published.py
            ``load``), or ``store`` already holds one of its runs (importing it again would
            double its rows: resume it there instead).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AttnsweepError(f"store import: no folder {folder} (give the folder `store export --out` wrote)")
    root = Path(str(store.root))
    if store.local and root.exists() and not root.is_dir():
        raise AttnsweepError(f"--store: {root} is a file, not a store folder")
    listed = _listed(folder)
    held = [run_id for sweep, run_id in listed if _in_store(store, sweep, run_id)]
    if held:
        raise AttnsweepError(
            f"the store at {store.root} already holds run(s) {', '.join(held)} (a record or trial rows): "
            "importing again would double their rows; resume them there, or import into another store"
        )
    try:
        ids = load(folder, store)
    except AttnsweepError as exc:
        _undo(store, listed)
        raise AttnsweepError(str(exc).replace("--from: ", "store import: ", 1)) from None
    except BaseException:
        # Ctrl-C or a write that failed half-way: none of these runs was in the store before,
        # so removing what this import wrote leaves the store as it was, and a retry is safe.
        _undo(store, listed)
        raise
    for journals in sorted((folder / STUDIES).glob("sweep=*/run_id=*")):
        sweep, run_id = journals.parent.name.removeprefix("sweep="), journals.name.removeprefix("run_id=")
        if run_id in ids:
            shutil.copytree(journals, study_dir(store, sweep, run_id), dirs_exist_ok=True)
    return ids


def _listed(folder: Path) -> list[tuple[str, str]]:
    """``(sweep, run_id)`` of each run an export's runs.parquet lists ([] where it has none or
    cannot be read: ``load`` then says why)."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(folder / RUNS, columns=["sweep", "run_id"])
    except Exception:  # noqa: BLE001 - a missing or damaged file: load() names it
        return []
    return list(zip(table["sweep"].to_pylist(), table["run_id"].to_pylist(), strict=True))


def _exported_runs(folder: Path) -> set[str] | None:
    """The runs of an earlier export in ``folder``; None where the folder holds findings (a
    report's files) or no readable export."""
    if any((folder / name).exists() for name in ("findings.md", "report.html", "verdicts.json")):
        return None
    listed = _listed(folder)
    return {run_id for _, run_id in listed} if listed else None


def _in_store(store: ResultsStore, sweep: str, run_id: str) -> bool:
    """Whether ``store`` holds a record or any trial rows of the run."""
    try:
        store.sweep_of(run_id)
        return True
    except StoreError:
        pass
    try:
        return store.run_dir("trials", sweep, run_id).exists()
    except (StoreError, ValueError):
        return False


def _undo(store: ResultsStore, runs: list[tuple[str, str]]) -> None:
    """Remove what an import wrote of ``runs`` (none of which the store held before it)."""
    if not store.local:
        return
    for sweep, run_id in runs:
        for table in ("trials", "runs"):
            try:
                shutil.rmtree(store.run_dir(table, sweep, run_id), ignore_errors=True)
            except (StoreError, ValueError):
                continue


def lock_held(store: ResultsStore, sweep: str, run_id: str) -> bool:
    """Whether a driver on this machine holds the run's lock now (it is still being written)."""
    from attnsweep.results.locks import RunLock

    return bool(RunLock(store, sweep, run_id).held())
