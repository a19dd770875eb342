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

    Raises:
        StoreError: a run the store does not hold.
        AttnsweepError: ``out_dir`` already holds an export or findings (nothing is written
            over them), or cannot be written.
    """
    runs = [(store.sweep_of(run_id), run_id) for run_id in dict.fromkeys(run_ids)]
    out_dir = Path(out_dir)
    taken = [name for name in (TRIALS, RUNS, SUMS, STUDIES) if (out_dir / name).exists()]
    if taken:
        raise AttnsweepError(f"--out: {out_dir} already holds {', '.join(taken)}; export into an empty or new folder")
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
    held = _held(folder, store)
    if held:
        raise AttnsweepError(
            f"the store at {store.root} already holds run(s) {', '.join(held)}: importing again would double "
            "their rows; resume them there, or import into another store"
        )
    ids = load(folder, store)
    for journals in sorted((folder / STUDIES).glob("sweep=*/run_id=*")):
        sweep, run_id = journals.parent.name.removeprefix("sweep="), journals.name.removeprefix("run_id=")
        if run_id in ids:
            shutil.copytree(journals, study_dir(store, sweep, run_id), dirs_exist_ok=True)
    return ids


def _held(folder: Path, store: ResultsStore) -> list[str]:
    """The runs of the export's runs.parquet that ``store`` already holds."""
    import pyarrow.parquet as pq

    path = folder / RUNS
    if not path.is_file():
        return []  # load() says what is missing
    try:
        listed = pq.read_table(path, columns=["run_id"])["run_id"].to_pylist()
    except Exception:  # noqa: BLE001 - a damaged file: load() names it
        return []
    held = []
    for run_id in listed:
        try:
            store.sweep_of(run_id)
        except StoreError:
            continue
        held.append(run_id)
    return held
