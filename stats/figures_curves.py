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

    Args:
        store: the results store.
        sweep, run_id: the run.
        fields: its trial settings (the run record's ``trial_fields``); the ones that vary
            over its trials, but m and the seed, make its cells.
        folder: where the PNG goes (created).

    Returns:
        The PNG's path, or None.
    """
    points = store.scan_run_curves(sweep, run_id)
    if points is None:
        return None
    trials = store.scan_run_trials(sweep, run_id)
    names = [f for f in fields if f in trials.collect_schema() and f not in NOT_CELL]
    rows = trials.select("trial_id", "m", *names).collect()
    varying = [f for f in names if rows[f].cast(pl.String).n_unique() > 1]
    data = points.collect().join(rows, on="trial_id", how="inner")
    if data.is_empty():
        return None
    accuracy = data["train_acc"].is_not_null().any()
    y = "train_acc" if accuracy else "train_error"
    data = data.filter(pl.col(y).is_not_null())
    if data.is_empty():
        return None
    data = data.with_columns(
        cell=pl.concat_str([pl.lit(f"{f}=") + pl.col(f).cast(pl.String) for f in varying], separator=", ")
        if varying
        else pl.lit("all trials")
    )
    order = data.select(*varying, "cell").unique().sort(varying, nulls_last=True) if varying else data.select("cell")
    cells = _spread(list(dict.fromkeys(order["cell"].to_list())), MAX_PANELS)  # in the settings' order, not text's
    ms = _spread(sorted(data["m"].unique().to_list()), MAX_M)
    data = data.filter(pl.col("cell").is_in(cells) & pl.col("m").is_in(ms)).sort("cell", "m", "trial_id", "epoch")
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
    if accuracy:
        grid.set(ylabel="training accuracy", ylim=(0.0, 1.02))
    else:
        grid.set(ylabel="relative training error", yscale="log")
    grid.set(xlabel="epoch (optimiser epochs done)")
    folder.mkdir(parents=True, exist_ok=True)
    path = save_png(grid.figure, folder / f"{FIGURE}.png")
    plt.close("all")
    return path


def _spread(values: list, most: int) -> list:
    """At most ``most`` of ``values``, evenly spread, first and last included."""
    if len(values) <= most:
        return values
    step = (len(values) - 1) / (most - 1)
    return [values[round(i * step)] for i in range(most)]
