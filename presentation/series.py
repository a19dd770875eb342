"""What an L1 series is (stats/boolean_growth.py fits m* over T per series): its cells among
the runs' cells, and its label read from them (position codes, norm bound, inputs, tuning,
epochs, a restart run's learner); shared by the findings page and its restart section."""

from __future__ import annotations

import polars as pl

from attnsweep.analysis.boolean import TUNED_RUN
from attnsweep.stats.boolean_cells import ATTENTION


def by_rows(series: list[dict]) -> list[tuple[dict, str]]:
    """The L1 series that hold distinct trial rows, each with its label's suffix: the learners
    of a restart run read one run's rows, which are described once ("all restarts")."""
    return [
        (s, ", all restarts" if s["cells"].get("learner") else "")
        for s in series
        if s["cells"].get("learner") in (None, "one init")
    ]


def rows_label(union: pl.DataFrame, s: dict, suffix: str) -> str:
    label = series_kind(union, s["cells"])["label"]
    return label.replace(", one init", suffix) if suffix else label


def l1_series(claims: list[dict]) -> tuple[dict | None, list[dict]]:
    """The L1 verdict among ``claims`` (None if absent) and its series that were fitted over T."""
    l1 = next((v for v in claims if v["claim"].startswith("L1")), None)
    return l1, [s for s in (l1 or {}).get("series", []) if s.get("numbers", {}).get("T")]


def series_cells(union: pl.DataFrame, key: dict) -> pl.DataFrame:
    """The transformer cells of one L1 series (``key``: the settings that name it)."""
    # L1 is the paper's claim about the attention model: its series are the transformer's cells.
    cells = union.filter(pl.col("model") == ATTENTION) if "model" in union.columns else union
    for name, value in key.items():
        if name in cells.columns:
            cells = cells.filter(pl.col(name).is_null() if value is None else pl.col(name) == value)
    return cells


def series_kind(union: pl.DataFrame, key: dict) -> dict:
    """What a series is: its position codes, norm bound and tuning, read from its cells."""
    cells = series_cells(union, key)

    def one(name: str, default=None):
        values = cells[name].unique().to_list() if name in cells.columns and not cells.is_empty() else []
        return values[0] if len(values) == 1 else (default if not values else "mixed")

    positions = one("positions", "learned") or "learned"
    bound = one("norm_bound")
    # A tuned run's cells are tuned series even where no cell adopted its tuning (the protocol ran).
    tuned = (
        bool(cells[TUNED_RUN].fill_null(False).all()) if TUNED_RUN in cells.columns and not cells.is_empty() else False
    ) or ("tuning" in cells.columns and bool(cells["tuning"].is_in(["not tuned"]).not_().any()))
    ln_affine = one("ln_affine", True)
    ln_affine = True if ln_affine is None else ln_affine
    # The theorem bounds the head's weights and its inputs' norm: untrained codes, a bound, and a
    # LayerNorm without trained gain before the head (docs/claims.md, section 1).
    theory = positions in ("fixed", "sinusoidal") and bound is not None and ln_affine is False
    label = f"{positions} positions, " + (
        "no norm bound"
        if bound is None
        else f"norm bound {bound:g}"
        if isinstance(bound, (int, float))
        else f"norm bound {bound}"
    )
    label += ", inputs of norm sqrt(d)" if ln_affine is False else ""
    label += ", tuned" if tuned else ", untuned"
    epochs = one("max_epochs")
    label += f", {epochs} epochs" if isinstance(epochs, int) else ""
    if key.get("learner"):  # a restart run's learner (stats/restarts.py)
        label += f", {key['learner']}"
    others = {
        k: v
        for k, v in key.items()
        if k not in ("positions", "norm_bound", "ln_affine", "max_epochs", TUNED_RUN, "learner")
    }
    if others:
        label += " (" + ", ".join(f"{k}={v}" for k, v in others.items()) + ")"
    return dict(label=label, theory=theory)
