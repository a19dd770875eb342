"""The learning-curve figure of a run that kept curves (``execution.curves``; the ``curves``
table, results/curves_table.py): training accuracy (sparse Boolean) or relative training
error (symmetry) against the epoch, for a few cells, one line per trial coloured by m.

A run without curves has no such figure, and nothing here is read for it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.colors

matplotlib.use("Agg")  # no display on workers or CI
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from attnsweep.results.store import ResultsStore  # noqa: E402
from attnsweep.stats.figures import save_png  # noqa: E402

FIGURE = "learning_curves"
"""The figure's file stem (``learning_curves.png``), the key of its caption in the report."""
MAX_PANELS = 4
"""Cells drawn at most: evenly spread over the run's cells in their sorted order."""
MAX_M = 6
"""Values of m drawn per cell at most: evenly spread from the smallest to the largest."""
NOT_CELL = {"seed", "m", "restart", "fault", "trial_id"}
"""Settings that do not tell cells apart (the lines within a panel differ in them)."""


def plot_learning_curves(store: ResultsStore, sweep: str, run_id: str, fields: list[str], folder: Path) -> Path | None:
    """Draw ``folder/learning_curves.png`` from a run's curves, or return None (nothing
    drawn, nothing written) when it kept none.

    The panels are :data:`MAX_PANELS` cells and :data:`MAX_M` values of m spread over those
    with a point to draw (training accuracy, or where no trial read has one, relative
    training error), and only the points of the trials drawn and of one trial per cell and m
    that shows it has a point are read (lazily, :data:`READ_TRIALS` trials at a time), and a
    drawn curve is thinned to :data:`LINE_POINTS` points: memory follows the lines drawn, not
    the run's points.

    Args:
        store: the results store.
        sweep, run_id: the run.
        fields: its trial settings (the run record's ``trial_fields``); the ones that vary
            over its trials, but m and the seed, make its cells.
        folder: where the PNG goes (created).

    Returns:
        The PNG's path, or None.
    """
    points = store.scan_run_curves(sweep, run_id, once=False)  # copies of a point dropped once thinned
    if points is None:
        return None
    trials = store.scan_run_trials(sweep, run_id)
    names = [f for f in fields if f in trials.collect_schema() and f not in NOT_CELL]
    rows = trials.select("trial_id", "m", *names).collect()
    varying = [f for f in names if rows[f].cast(pl.String).n_unique() > 1]
    rows = rows.with_columns(
        cell=pl.concat_str([pl.lit(f"{f}=") + pl.col(f).cast(pl.String) for f in varying], separator=", ")
        if varying
        else pl.lit("all trials")
    )
    order = rows.select(*varying, "cell").unique().sort(varying, nulls_last=True) if varying else rows.select("cell")
    found = _Found(points, rows)
    y = found.shown(list(dict.fromkeys(order["cell"].to_list())))  # in the settings' order, not text's
    if y is None:
        return None
    cells = _spread(found.cells, MAX_PANELS)
    ms = _spread(found.ms, MAX_M)
    drawn = rows.filter(pl.col("cell").is_in(cells) & pl.col("m").is_in(ms)).select("trial_id", "m", "cell")
    # A line of a panel about 500 pixels wide shows no more than LINE_POINTS points: a trial's
    # curve is thinned to evenly spaced points, its first and last kept, before anything holds
    # it (a run may keep 52,428 points a trial). A trial's points lie together in one file, its
    # epochs ascending (the writer's order), so a point's place in its curve is its row less the
    # curve's first row: no window over every point.
    picked = (
        _of(points, drawn["trial_id"])
        .select("trial_id", "epoch", y)
        .filter(pl.col(y).is_not_null())
        .with_row_index("row")
    )
    curves = picked.group_by("trial_id").agg(first=pl.col("row").min(), n=pl.len()).collect(engine="streaming")
    i, n = pl.col("row") - pl.col("first"), pl.col("n")
    data = (
        picked.join(curves.lazy(), on="trial_id", how="left")
        .filter((i % ((n + LINE_POINTS - 1) // LINE_POINTS) == 0) | (i == n - 1))
        .select("trial_id", "epoch", y)
        .unique(subset=["trial_id", "epoch"], keep="last", maintain_order=True)
        .collect(engine="streaming")
        .join(drawn, on="trial_id", how="inner")
        .sort("cell", "m", "trial_id", "epoch")
    )
    sns.set_theme(style="whitegrid")
    grid = sns.relplot(
        data=data.to_pandas(),
        x="epoch",
        y=y,
        hue="m",
        units="trial_id",
        estimator=None,
        col="cell",
        col_order=cells,
        col_wrap=min(len(cells), 2),
        kind="line",
        palette="viridis",
        hue_norm=matplotlib.colors.LogNorm(),  # m spans decades
        linewidth=0.9,
        alpha=0.8,
        height=3.6,
        aspect=1.3,
        facet_kws={"sharex": False},
    )
    grid.set_titles("{col_name}")
    if y == "train_acc":
        grid.set(ylabel="training accuracy", ylim=(0.0, 1.02))
    else:
        grid.set(ylabel="relative training error", yscale="log")
    grid.set(xlabel="epoch (optimiser epochs done)")
    folder.mkdir(parents=True, exist_ok=True)
    path = save_png(grid.figure, folder / f"{FIGURE}.png")
    plt.close("all")
    return path


LINE_POINTS = 500
"""Points drawn of one trial's curve at most (evenly spaced epochs, the first and the last)."""


def _spread(values: list, most: int) -> list:
    """At most ``most`` of ``values``, evenly spread, first and last included."""
    if len(values) <= most:
        return values
    step = (len(values) - 1) / (most - 1)
    return [values[round(i * step)] for i in range(most)]


READ_TRIALS = 64
"""Trials whose points one read while picking the panels holds at most."""


def _of(points: pl.LazyFrame, ids: pl.Series) -> pl.LazyFrame:
    """The points of the trials ``ids``: the filter reaches the Parquet scan, so no other trial's
    points are decoded."""
    return points.filter(pl.col("trial_id").is_in(ids.implode()))


class _Found:
    """What the run's trials hold to draw, read trial by trial as the panels need it.

    A cell (a value of m) has something to draw when one of its trials kept a point of the
    figure's measure (``train_acc``, or ``train_error`` when no trial read kept an accuracy):
    :meth:`shown` finds one such trial per cell and per m, reading first one trial of each,
    then the next of those still without one, so a run whose trials all kept points is read
    once for one trial per cell and m.
    """

    def __init__(self, points: pl.LazyFrame, rows: pl.DataFrame):
        self.points, self.rows = points, rows
        self.kinds: dict[str, tuple[bool, bool]] = {}
        """Trial id -> (kept a ``train_acc`` point, kept a ``train_error`` point), of the trials read."""
        self.cells: list = []
        self.ms: list = []

    def _read(self, ids: list[str]) -> None:
        for start in range(0, len(ids), READ_TRIALS):
            part = pl.Series("trial_id", ids[start : start + READ_TRIALS], pl.String)
            kinds = (
                _of(self.points, part)
                .group_by("trial_id")
                .agg(pl.col("train_acc").is_not_null().any(), pl.col("train_error").is_not_null().any())
                .collect(engine="streaming")
            )
            self.kinds.update({tid: (False, False) for tid in part})
            self.kinds.update({tid: (acc, error) for tid, acc, error in kinds.iter_rows()})

    def shown(self, cells: list) -> str | None:
        """The measure drawn (``train_acc`` or ``train_error``), with :attr:`cells` (of
        ``cells``, in its order) and :attr:`ms` (ascending) those with something to draw; None
        when nothing has."""
        by_cell = self.rows.group_by("cell", maintain_order=True).agg("trial_id")
        by_m = self.rows.group_by("m", maintain_order=True).agg("trial_id")
        groups = {("cell", c): ids for c, ids in by_cell.iter_rows()} | {("m", m): ids for m, ids in by_m.iter_rows()}
        while True:
            accuracy = any(acc for acc, _ in self.kinds.values())
            has = {tid for tid, (acc, error) in self.kinds.items() if (acc if accuracy else error)}
            wanted = []
            for ids in groups.values():
                if not has.intersection(ids):
                    wanted += [tid for tid in ids if tid not in self.kinds][:1]
            if not wanted:
                break
            self._read(list(dict.fromkeys(wanted)))
        shown = {key for key, ids in groups.items() if has.intersection(ids)}
        self.cells = [c for c in cells if ("cell", c) in shown]
        self.ms = sorted(m for kind, m in shown if kind == "m")
        if not self.cells:
            return None
        return "train_acc" if accuracy else "train_error"
