"""The findings' m*-against-T figure: 3-way AND (s = 3), one series per model and setting that
spans T, with 95% intervals, the fitted growth laws of verdict L1 and the paper's read-off
(Edelman et al., ICML 2022, section 5)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from attnsweep.analysis.boolean import TUNED_RUN
from attnsweep.stats.boolean_growth import series_fit
from attnsweep.stats.figures import plot_m_star


def main_series(union: pl.DataFrame) -> pl.DataFrame:
    """The cells of the figure: 3-way AND, s = 3, in series of at least three values of T
    (each model's unbounded series, and each series of the theorem's class or another setting
    that spans T; side blocks at one or two T are left out), labelled in ``series``."""
    if union.is_empty() or not {"task", "s", "model", "T"} <= set(union.columns):
        return union.clear()
    cells = union.filter((pl.col("task") == "and") & (pl.col("s") == 3))
    if "learner" in cells.columns:  # restart runs have a section of their own (samples_or_optimisation.py)
        cells = cells.filter(pl.col("learner").is_null()).drop("learner")
    if "positions" in cells.columns:
        cells = cells.with_columns(pl.col("positions").fill_null("learned"))
    if "ln_affine" in cells.columns:
        cells = cells.with_columns(pl.col("ln_affine").fill_null(True))
    settings = [c for c in cells.columns if c in SERIES_SETTINGS and cells[c].n_unique() > 1]
    if TUNED_RUN in cells.columns:
        # A tuned run's lr is each cell's choice, not an axis (as in the verdicts): its series is
        # the run's tuning, which keeps it apart from an untuned one of the same settings.
        cells = cells.with_columns(pl.col(TUNED_RUN).fill_null(False))
        settings = [c for c in settings if c != "lr"] + [TUNED_RUN]
    # Named by the model class first (codes, bound, inputs); other settings only where needed to
    # tell two series apart.
    primary = [c for c in settings if c in ("positions", "norm_bound", "ln_affine")]
    if cells.select("model", *primary).n_unique() < cells.select("model", *settings).n_unique():
        primary = settings
    cells = cells.with_columns(series=pl.struct(["model", *primary]).map_elements(_series_name, return_dtype=pl.String))
    spans = cells.group_by("series").agg(pl.col("T").n_unique().alias("n_T"))
    keep = spans.filter(pl.col("n_T") >= 3)["series"]
    return cells.filter(pl.col("series").is_in(keep.implode())).sort("series", "T")


SERIES_SETTINGS = ("positions", "norm_bound", "ln_affine", "max_epochs", "lr", "d", "heads")
"""Settings that make a figure series of their own when they vary among the runs' cells."""


def _series_name(row: dict) -> str:
    parts = [str(row["model"])]
    if row.get("positions", "learned") != "learned":
        parts.append(f"{row['positions']} positions")
    if "norm_bound" in row:
        parts.append("no bound" if row["norm_bound"] is None else f"B={row['norm_bound']:g}")
    if row.get("ln_affine") is False:
        parts.append("inputs of norm sqrt(d)")
    if row.get(TUNED_RUN):
        parts.append("tuned")
    parts += [
        f"{k}={v}" for k, v in row.items() if k not in ("model", "positions", "norm_bound", "ln_affine", TUNED_RUN)
    ]
    return ", ".join(parts)


def plot_main_series(union: pl.DataFrame, reference: pl.DataFrame, path: Path, ci: float = 0.95) -> Path:
    """m* against T per series (:func:`main_series`) with the L1 fits and the paper's points:
    the figure of the README's findings."""
    cells = main_series(union)
    fits = {}
    for (series,), part in cells.group_by(["series"], maintain_order=True):
        _, fit = series_fit(part, ci)
        if fit is not None:
            fits[str(series)] = fit
    return plot_m_star(
        cells,
        fits,
        "series",
        path,
        reference=reference,
        title="3-way AND: critical sample size against context length (95% intervals)",
    )
