"""The findings' m*-against-T figure: 3-way AND (s = 3), one series per model and setting that
spans T, with 95% intervals, in one log-log panel per model class (MLP, the paper's protocol,
the theorem's class), with two of verdict L1's fitted laws per series (the log law and the law
named for the series) and the paper's read-off (Edelman et al., ICML 2022, section 5)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from attnsweep.analysis.boolean import TUNED_RUN
from attnsweep.presentation.series import series_kind
from attnsweep.results.outputs import replacing
from attnsweep.stats.boolean_cells import ATTENTION
from attnsweep.stats.boolean_growth import series_fit
from attnsweep.stats.figures import m_star_panels
from attnsweep.stats.fits import MODELS, robust_law
from attnsweep.workers.builtin_models import model_label


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


PANELS = ("MLP", "paper's protocol", "theorem's class")
"""The figure's panels, left to right: the MLP baseline; the transformer as the paper trained
it (learned position table, LayerNorm with trained gain); the transformer with untrained
position codes or bounded inputs, the theorem's class (or near it: see :func:`panel_of`)."""

NO_LAW = ("undecided", "too few cells")
"""Readings of :func:`stats.fits.robust_law` that name no law: no named-law curve is drawn."""


LABEL_WIDTH = 44
"""Characters of a legend label on one line; a longer one puts the law on a line of its own."""


def panel_of(part: pl.DataFrame) -> str:
    """The panel of one series' cells (as :func:`main_series` gives them): the MLP, the paper's
    protocol (learned positions and trained LayerNorm; a missing value reads as that, as
    ``stats.boolean_cells.reference_cells`` reads it), else the theorem's class: what
    ``presentation.series.series_kind`` calls the class, and the series near it (untrained
    codes without a bound, or a trained LayerNorm gain), which :func:`series_labels` marks."""
    model = str(part["model"][0])
    # The paper's panels are about the transformer and the MLP; any other model (a package's,
    # workers/boolean_models.py) is a panel of its own under its name.
    if model != ATTENTION:
        return model_label(model)
    if series_kind(part, {})["theory"]:
        return PANELS[2]
    learned = "positions" not in part.columns or bool((part["positions"].fill_null("learned") == "learned").all())
    trained = "ln_affine" not in part.columns or bool(part["ln_affine"].fill_null(True).all())
    return PANELS[1] if learned and trained else PANELS[2]


def series_labels(names: list[str]) -> tuple[dict[str, str], str]:
    """Legend texts of the series of one panel and the panel's note: the settings all of them
    share go in the note, each series keeps what tells it apart (a setting that a sibling has
    and it lacks is named by its opposite: untuned, learned positions, trained LayerNorm).
    A lone series keeps all its settings, and the note is empty."""
    parts = {name: [_pretty(p) for p in name.split(", ")[1:]] for name in names}
    if len(names) < 2:
        return {name: ", ".join(p) or name for name, p in parts.items()}, ""
    shared = [p for p in parts[names[0]] if all(p in q for q in parts.values())]
    out = {}
    for name, own in parts.items():
        rest = [p for p in own if p not in shared]
        if not rest:  # the plain one among variants: named by what the others add
            added = dict.fromkeys(p for q in parts.values() for p in q if p not in own)
            rest = [_OPPOSITE.get(p, "learned positions" if p.endswith(" positions") else f"not {p}") for p in added]
        out[name] = ", ".join(rest)
    return out, ", ".join(shared)


_OPPOSITE = {"tuned": "untuned", "inputs of norm sqrt(d)": "trained LayerNorm"}


def _pretty(part: str) -> str:
    if part.startswith("max_epochs="):
        return f"{part.split('=', 1)[1]} epochs"
    if part.startswith("B="):
        return f"B = {part[2:]}"
    return "no norm bound" if part == "no bound" else part


def main_series_figure(
    union: pl.DataFrame,
    reference: pl.DataFrame,
    ci: float = 0.95,
    laws: Mapping[str, str] | None = None,
) -> Figure:
    """m* against T per series (:func:`main_series`), one panel per model class
    (:data:`PANELS`, :func:`panel_of`), with two fitted curves per series (the log law a + b ln T
    and the law named for it, where one is) and the paper's points in the paper's-protocol
    panel. The fits are L1's (``stats.boolean_growth.series_fit``: exact cells only).

    Args:
        union: the report's m* table of the sparse-Boolean runs.
        reference: the paper's read-off (``T``, ``critical_m``, ``err_lo``, ``err_hi``).
        ci: the intervals' coverage (the title says it).
        laws: per series (the ``series`` names of :func:`main_series`), the law named for it:
            a model of ``stats.fits.MODELS``, or ``"undecided"`` / ``"too few cells"`` for none
            (a series missing from it has none). None: each series' own
            ``stats.fits.robust_law`` over its exact cells.
    """
    cells = main_series(union)
    curves: dict[str, list[tuple[str, str, tuple[float, float]]]] = {}
    named: dict[str, str] = {}
    panel: dict[str, str] = {}
    if "series" not in cells.columns:  # no 3-way AND cells at all
        cells = cells.with_columns(series=pl.lit(None, pl.String))
    for (series,), part in cells.group_by(["series"], maintain_order=True):
        name = str(series)
        panel[name] = panel_of(part)
        used, fit = series_fit(part, ci)
        if laws is None:
            T, m = used["T"].to_numpy().astype(float), used["m_star"].to_numpy().astype(float)
            named[name] = str(robust_law(T, m)["law"]) if used.height else NO_LAW[1]
        else:
            named[name] = laws.get(name, NO_LAW[0])
        if fit is None:
            continue
        rows = {r["model"]: (float(r["a"]), float(r["b"])) for r in fit.iter_rows(named=True)}
        curves[name] = [("log", "log", rows["log"])]
        if named[name] in rows and named[name] != "log":
            curves[name].append(("named", named[name], rows[named[name]]))
    drawn = [p for p in PANELS if p in panel.values() or (p == PANELS[1] and not reference.is_empty())]
    drawn += list(dict.fromkeys(p for p in panel.values() if p not in PANELS))
    labels, notes = {}, {}
    for p in drawn:
        own, notes[p] = series_labels([n for n in panel if panel[n] == p])
        for name, text in own.items():
            near = p == PANELS[2] and not series_kind(cells.filter(pl.col("series") == name), {})["theory"]
            law = _law_label(named[name])
            text += " (near the class)" if near else ""
            # A long label takes two lines, so a legend stays narrower than its panel.
            labels[name] = f"{text}{'; ' if len(text) + len(law) < LABEL_WIDTH else chr(10)}{law}"
    return m_star_panels(
        cells.with_columns(panel=pl.col("series").replace_strict(panel, return_dtype=pl.String))
        if not cells.is_empty()
        else cells.with_columns(panel=pl.lit(None, pl.String)),
        drawn,
        curves,
        labels=labels,
        notes=notes,
        reference=reference,
        reference_panel=PANELS[1],
        title=f"3-way AND: critical sample size m* against context length T ({ci:.0%} intervals)",
    )


def _law_label(law: str) -> str:
    """A series' law as its legend says it: ``power law``, ``no law named (too few cells)``,
    ``no law named`` (the best law changes with the variant or the estimator), or the phrase
    given (e.g. ``faster than log, no law named``)."""
    if law in MODELS:
        return f"{law} law"
    if law == NO_LAW[1]:
        return f"no law named ({law})"
    return "no law named" if law == NO_LAW[0] else law


def laws_of(union: pl.DataFrame, claims: list[dict]) -> dict[str, str]:
    """The law each figure series (:func:`main_series`) is drawn with: the one its L1 series
    names under every estimator of m* (``numbers["law"]``, stats/boolean_wording.py
    ``agreed``), keyed by the figure's series name; a series L1 did not judge (the MLP's) is
    absent, so it is drawn with the log law alone."""
    l1 = next((v for v in claims if v.get("id") == "L1"), None)
    judged = [s for s in (l1 or {}).get("series", []) if not s["cells"].get("learner")]
    filled = {"positions": "learned", "ln_affine": True, TUNED_RUN: False}
    out: dict[str, str] = {}
    cells = main_series(union)
    if "series" not in cells.columns:
        return out
    # L1's judged series are the transformer's (the paper's claim about it).
    for (name,), part in cells.filter(pl.col("model") == ATTENTION).group_by(["series"], maintain_order=True):
        for s in judged:
            key = {c: filled.get(c) if v is None and c in filled else v for c, v in s["cells"].items()}
            if all(
                part[c].is_null().all() if v is None else bool((part[c] == v).all())
                for c, v in key.items()
                if c in part.columns
            ):
                law, direction = str(s["numbers"].get("law", NO_LAW[0])), s["numbers"].get("direction")
                # Where no law is named, the legend still says the direction all three estimators agree on.
                out[str(name)] = (
                    f"{direction}, no law named"
                    if law not in MODELS and direction in ("faster than log", "log")
                    else law
                )
                break
    return out


def plot_main_series(
    union: pl.DataFrame,
    reference: pl.DataFrame,
    path: Path,
    ci: float = 0.95,
    laws: Mapping[str, str] | None = None,
) -> Path:
    """The figure of the README's findings (:func:`main_series_figure`), written as a PNG."""
    fig = main_series_figure(union, reference, ci, laws)
    with replacing(Path(path)) as temp:  # a link at the figure's name is replaced, not written through
        fig.savefig(temp, dpi=120)
    plt.close(fig)
    return Path(path)
