"""Rerun one cell of a stored sparse-Boolean run as a grid, and check that it came back.

    python scripts/rerun_cell.py spec RUN_ID --store S --where T=64 --where norm_bound=1 > rerun.yaml
    attnsweep run rerun.yaml --store rerun-store --no-analyze
    python scripts/rerun_cell.py compare RUN_ID --store S RERUN_ID --rerun-store rerun-store

``spec`` writes a grid spec (YAML, on stdout) that trains the cell at every m the run tried
(search and budget check), with the run's seeds and settings: the same trial configs, so the
same trial ids. ``compare`` joins the two runs' rows on trial id and reports the rows whose
trained results (status, epochs, losses, accuracies, achieved norms, margins) differ by a single bit,
and the cell's m* both ways; exit 1 when anything differs, 2 when the request cannot be served
(no such store, run or cell). A sweep's name stands for its latest run, as in the CLI. A row is a function of its config,
seed, code version, device (on a GPU its model and software, as its ``device`` column says)
and thread count (docs/claims.md 4), so on the same code, device and thread count every row,
and m* with them, must come back exactly.

A published findings folder (``docs/findings``) is read as a store with ``--store
docs/findings``: its trials.parquet and runs.parquet are loaded first.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import polars as pl
import yaml

import attnsweep
from attnsweep.orchestrator.spec import parse_spec
from attnsweep.results import ResultsStore, StoreError
from attnsweep.stats.critical import format_m_star
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers.config import LATER_FIELDS

RESULTS = (
    "status",
    "epochs",
    "converged",
    "train_acc",
    "train_loss",
    "test_acc",
    "test_loss",
    "norm_qk",
    "norm_v",
    "norm_hidden",
    "norm_readout",
    "input_norm",
    "margin",
    "margin_normalised",
    "support",
    "redraws",
)
"""The columns a trial's training decides (not its timing, host or run)."""


class UsageError(Exception):
    """A request the script cannot serve: exit 2 with its message (1 means rows differ)."""


def _store(path: str, scratch: Path) -> ResultsStore:
    folder = Path(path)
    if (folder / "trials.parquet").is_file() and (folder / "runs.parquet").is_file():
        from attnsweep.presentation.published import load

        store = ResultsStore(scratch / folder.name)
        load(folder, store)
        return store
    if "://" not in path and not folder.is_dir():
        raise UsageError(f"{path}: no such store or published findings folder")
    return ResultsStore(path)


def _where(pairs: list[str], rows: pl.DataFrame) -> pl.DataFrame:
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not text or name not in rows.columns:
            raise UsageError(
                f"--where {pair}: give NAME=VALUE with a setting of the rows as NAME "
                f"(settings: {', '.join(f for f in BooleanTrialConfig.model_fields if f in rows.columns and f != 'fault')}; "
                "null for a setting that is not set)"
            )
        value = yaml.safe_load(text)
        column = pl.col(name).fill_null(LATER_FIELDS[name]) if name in LATER_FIELDS else pl.col(name)
        try:
            kept = rows.filter(column.is_null() if value is None else column == value)
        except (pl.exceptions.PolarsError, TypeError) as exc:
            raise UsageError(
                f"--where {pair}: {value!r} is not a value {name} can take ({exc.__class__.__name__})"
            ) from None
        if kept.is_empty():
            have = [str(v) for v in rows[name].unique().sort(nulls_last=True).to_list()]  # in value order
            raise UsageError(f"--where {pair}: no row left with {name} = {value!r} (values there: {', '.join(have)})")
        rows = kept
    return rows


def _cell_rows(store: ResultsStore, named: str, run_id: str, where: list[str]) -> tuple[pl.DataFrame, str, str]:
    """The rows of ``run_id`` (or a sweep's latest run) that pass ``where``; ``named`` is the
    store as the user gave it, for messages (a findings folder is read through a scratch store)."""
    try:
        run_id, _ = store.resolve_run(run_id)
        rows = store.scan_trials().filter(pl.col("run_id") == run_id).collect()
    except StoreError as exc:
        raise UsageError(f"{named}: {exc}") from exc
    if rows.is_empty():
        runs = sorted(set(store.scan_trials().select("run_id").collect()["run_id"].to_list()))
        raise UsageError(f"no run or sweep {run_id} in {named} (its runs: {', '.join(runs) or 'none'})")
    return _where(where, rows), rows["sweep"][0], run_id


def spec(args, scratch: Path) -> None:
    store = _store(args.store, scratch)
    rows, sweep, run_id = _cell_rows(store, args.store, args.run_id, args.where)
    record = store.read_run(sweep, run_id)
    base = parse_spec(record["spec_yaml"])
    # A restart run's cell holds every restart of its training sets (stats/restarts.py reads them
    # together), so its restarts are rerun as an axis beside m.
    fields = [f for f in BooleanTrialConfig.model_fields if f not in ("m", "seed", "restart") and f in rows.columns]
    main = rows.filter(pl.col("search_phase").fill_null("") != "budget")  # grid runs have no phase
    cells = main.select(fields).unique()
    if cells.height != 1:
        raise UsageError(
            f"the --where filters leave {cells.height} cells of run {run_id}: name one "
            f"(settings that differ: {', '.join(f for f in fields if main[f].n_unique() > 1)})"
        )
    # Rows stored before a setting existed hold null for it: the value those trials had.
    cell = {k: LATER_FIELDS[k] if v is None and k in LATER_FIELDS else v for k, v in cells.row(0, named=True).items()}
    out = dict(
        name=f"{sweep}-rerun",
        description=f"cell {' '.join(args.where)} of run {run_id}, every m the run tried, its seeds",
        seeds=sorted(main["seed"].unique().to_list()),
        grid=dict(m=sorted(main["m"].unique().to_list()), **_restarts(main)),
        fixed={k: v for k, v in cell.items() if v is not None},
        execution=dict(pack_size=4),
        analysis=base.analysis.model_dump(),
    )
    yaml.safe_dump(out, sys.stdout, sort_keys=False, default_flow_style=None, width=100)


def _restarts(rows: pl.DataFrame) -> dict:
    """``{"restart": [...]}`` when the cell's rows hold restarts other than 0, else ``{}`` (a
    run made before the setting, or with one init, reruns as it was)."""
    if "restart" not in rows.columns:
        return {}
    values = sorted(rows["restart"].fill_null(LATER_FIELDS["restart"]).unique().to_list())
    return {"restart": values} if values != [LATER_FIELDS["restart"]] else {}


def compare(args, scratch: Path) -> int:
    a_store, b_store = _store(args.store, scratch), _store(args.rerun_store, scratch)
    b, _, rerun_id = _cell_rows(b_store, args.rerun_store, args.rerun_id, [])
    a, _, run_id = _cell_rows(a_store, args.store, args.run_id, [])
    a = a.filter(pl.col("trial_id").is_in(b["trial_id"].implode()))
    if a.is_empty():
        raise UsageError(
            f"run {run_id} holds none of the {b.height} trials of run {rerun_id}: the rerun is of "
            "another run (or other settings)"
        )
    cols = [c for c in RESULTS if c in a.columns and c in b.columns]
    joined = a.select("trial_id", *cols).join(b.select("trial_id", *cols), on="trial_id", suffix="_rerun")
    missing = b.height - joined.height
    differ = joined.filter(pl.any_horizontal([pl.col(c).ne_missing(pl.col(f"{c}_rerun")) for c in cols]))
    print(
        f"{joined.height} rows of run {rerun_id} found in run {run_id} by trial id "
        f"({missing} not found); {differ.height} differ in any of {', '.join(cols)}"
    )
    for row in differ.head(10).iter_rows(named=True):
        print(
            "  "
            + ", ".join(f"{c}: {row[c]} -> {row[f'{c}_rerun']}" for c in cols if row[c] != row[f"{c}_rerun"])
            + f" (trial {row['trial_id']})"
        )
    m_a = attnsweep.open_store(a_store.root).analyze(run_id).m_star
    m_b = attnsweep.open_store(b_store.root).analyze(rerun_id).m_star
    keys = [
        c
        for c in [
            *BooleanTrialConfig.model_fields,
            "learner",
        ]  # learner: a restart run's (stats/restarts.py)
        if c in m_b.columns and c in m_a.columns and c not in ("m", "seed")
    ]
    # A setting that is null in every cell of one table is typed Null there: type it as the other has it.
    for c in keys:
        if m_a.schema[c] != m_b.schema[c]:
            typed = m_b.schema[c] if m_a.schema[c] == pl.Null else m_a.schema[c]
            m_a, m_b = (
                m_a.with_columns(pl.col(c).cast(typed)),
                m_b.with_columns(pl.col(c).cast(typed)),
            )
    pair = m_b.select(*keys, "m_star", "bound").join(
        m_a.select(*keys, "m_star", "bound"), on=keys, suffix="_published", nulls_equal=True
    )
    shown = [c for c in keys if m_b[c].n_unique() > 1 or c in ("T", "model", "norm_bound", "positions", "learner")]
    for row in pair.iter_rows(named=True):
        print(
            ", ".join(f"{c}={row[c]}" for c in shown) + f": m* {format_m_star(row['m_star'], row['bound'])} "
            f"(the run's {format_m_star(row['m_star_published'], row['bound_published'])})"
        )
    same_m = all(
        (x is None and y is None or x is not None and y is not None and math.isclose(x, y, rel_tol=1e-12)) and s == t
        for x, y, s, t in pair.select("m_star", "m_star_published", "bound", "bound_published").iter_rows()
    )
    print("m* " + ("the same" if same_m and pair.height else "DIFFERS"))
    return 0 if differ.is_empty() and missing == 0 and same_m and pair.height else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("spec", help="write the grid spec of one cell")
    p.add_argument("run_id")
    p.add_argument("--store", required=True)
    p.add_argument("--where", action="append", default=[], metavar="NAME=VALUE")
    p = sub.add_parser("compare", help="compare a rerun's rows with the run's")
    p.add_argument("run_id")
    p.add_argument("--store", required=True)
    p.add_argument("rerun_id")
    p.add_argument("--rerun-store", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="attnsweep-rerun-") as scratch:
        try:
            if args.command == "spec":
                spec(args, Path(scratch))
                return 0
            return compare(args, Path(scratch))
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
