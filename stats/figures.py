"""Seaborn figures of the analysis, written as PNG files: the sparse-Boolean ones (m* against T,
success rates, the paper's read-off beside ours) and the helpers every figure uses
(stats/figures_symmetry.py draws the symmetry experiment's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import matplotlib
import matplotlib.colors
import matplotlib.figure
import matplotlib.lines
import matplotlib.patches
import matplotlib.ticker
import matplotlib.transforms

matplotlib.use("Agg")  # no display on workers or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from attnsweep.results.outputs import replacing  # noqa: E402
from attnsweep.stats.fits import MIN_LAW_POINTS, predict  # noqa: E402


def paper_points(
    ax, reference: pl.DataFrame, label: str, color: str, elinewidth: float, capsize: float, zorder: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The paper's read-off (``T``, ``critical_m``, ``err_lo``, ``err_hi``; Edelman et al. 2022,
    section 5) drawn on ``ax`` as grey squares with their error bars; returns ``(T, m, lo, hi)``
    ``(n,)`` float arrays."""
    T, m = reference["T"].to_numpy().astype(float), reference["critical_m"].to_numpy().astype(float)
    lo, hi = reference["err_lo"].to_numpy().astype(float), reference["err_hi"].to_numpy().astype(float)
    ax.errorbar(
        T,
        m,
        yerr=[np.maximum(m - lo, 0), np.maximum(hi - m, 0)],
        fmt="s",
        markersize=3,
        color=color,
        ecolor=color,
        elinewidth=elinewidth,
        capsize=capsize,
        zorder=zorder,
        label=label,
    )
    return T, m, lo, hi


def plot_m_star(
    m_star: pl.DataFrame,
    fits: dict[str, pl.DataFrame],
    hue: str,
    path: Path,
    reference: pl.DataFrame | None = None,
    title: str | None = None,
) -> Path:
    """m* against T (log x axis) with bootstrap intervals and the fitted growth laws.

    Args:
        m_star: rows with ``T``, ``m_star``, ``ci_lo``, ``ci_hi``, ``bound`` (or
            ``censored``, ``m_min``, ``m_max``) and the ``hue`` column (stats/critical.py).
            A lower bound (beyond the grid) is a triangle up at the bound, an upper bound (at
            or below the grid, or budget-limited) a triangle down; no line or fit uses them.
        fits: per hue value, the table of :func:`stats.fits.compare_growth`.
        hue: column that tells series apart (e.g. ``"model"``).
        path: PNG to write.
        reference: optionally the paper's read-off (``T``, ``critical_m``, ``err_lo``,
            ``err_hi``; Edelman et al. 2022, section 5), drawn as grey squares; the m* axis
            is then logarithmic too. The legend sits beside the axes.
        title: optional axes title.
    """
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(11, 5) if reference is not None else (10, 4.5))
    if reference is not None and not reference.is_empty():
        paper_points(
            ax,
            reference,
            "Edelman et al. 2022, transformer (read-off of their figure)",
            color="0.3",
            elinewidth=1,
            capsize=2,
            zorder=3,
        )
    if title:
        ax.set_title(title, fontsize=10)
    m_star = _with_bound(m_star)
    # Not strict: the palette has more colours than there are hues.
    palette = dict(zip(m_star[hue].unique(maintain_order=True).to_list(), sns.color_palette(), strict=False))
    for value, color in palette.items():
        above = m_star.filter((pl.col(hue) == value) & (pl.col("bound") == "lower"))
        if not above.is_empty():  # m* above a bound (beyond the grid): a triangle up at the bound
            ax.scatter(
                above["T"],
                above["m_star"],
                marker="^",
                color=color,
                label=f"{value}: m* > bound (beyond the grid)",
            )
        below = m_star.filter((pl.col(hue) == value) & (pl.col("bound") == "upper"))
        if not below.is_empty():  # m* at or below a bound: a triangle down at the bound
            ax.scatter(
                below["T"],
                below["m_star"],
                marker="v",
                color=color,
                label=f"{value}: m* ≤ bound (smallest m tried, out of epochs, or budget-limited)",
            )
        part = m_star.filter(
            (pl.col(hue) == value) & pl.col("m_star").is_not_nan() & (pl.col("bound") == "exact")
        ).sort("T")
        if part.is_empty():
            continue
        T, y = part["T"].to_numpy(), part["m_star"].to_numpy()
        lo = np.minimum(part["ci_lo"].fill_nan(None).fill_null(np.nan).to_numpy(), y)
        hi = part["ci_hi"].fill_nan(None).fill_null(np.nan).to_numpy()
        hi = np.where(np.isfinite(hi), hi, y)
        ax.errorbar(
            T,
            y,
            yerr=[y - lo, np.maximum(hi - y, 0)],
            fmt="o",
            color=color,
            capsize=3,
            label=str(value),
        )
        grid = np.geomspace(T.min(), T.max(), 100)
        # Each law keeps its line style whatever its rank: no style marks a winner, and below
        # MIN_LAW_POINTS cells no AIC difference is shown, since no law is named there.
        ranked = len(T) >= MIN_LAW_POINTS
        for fit in fits.get(str(value), pl.DataFrame()).iter_rows(named=True):
            pred = predict(fit["model"], (fit["a"], fit["b"]), grid)
            rank = f", ΔAIC={fit['delta_aic']:.1f}" if ranked else ""
            ax.plot(
                grid,
                np.where(pred > 0, pred, np.nan),
                linestyle=LAW_STYLES.get(fit["model"], "-"),
                color=color,
                alpha=0.7,  # m* > 0 only
                label=f"  {value}: {fit['model']} fit (R²={fit['r2']:.2f}{rank})",
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length T")
    ax.set_ylabel("critical sample size m*")
    if reference is not None:  # the published figure: both models readable
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        points = [
            *m_star["m_star"].drop_nans().drop_nulls().to_list(),
            *reference["critical_m"].to_list(),
        ]
        if points:  # fits that fall towards 0 would stretch a log axis over empty decades
            ax.set_ylim(bottom=0.5 * min(points))
        ax.set_ylabel("critical sample size m* (log axis)")
    legend = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the points
    # A legend of many series outgrows the axes' height: the figure grows to hold it
    # (about 0.17 inches per entry at this font size), the axes keep their size.
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, max(height, 0.17 * len(legend.get_texts()) + 0.8))
    fig.tight_layout()
    with replacing(path) as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)
    return path


LAW_STYLES = {"log": "--", "power": ":", "linear": "-.", "polylog": (0, (5, 1, 1, 1, 1, 1))}
"""Line style of each growth law in :func:`plot_m_star` (the log law dashed, as in the findings' figure)."""

CURVE_STYLES: dict[str, tuple[Literal["-", "--"], str]] = {
    "named": ("-", "named law (robust by AICc)"),
    "log": ("--", "log law a + b ln T"),
}
"""Line style and legend text of the fitted curves of :func:`m_star_panels`, by role: the law
named for a series, and the log law a + b ln T (Edelman et al. 2022, Theorem 4.2)."""

BOUND_ARROW = 1.6
"""A censored m* is drawn at its bound with an arrow to the bound times (a lower bound) or over
(an upper bound) this factor: a fixed length on the log axis, pointing where m* lies."""

SERIES_MARKERS = ("o", "s", "D", "P", "X", "p", "h", "*")
"""Markers of the series of :func:`m_star_panels`, with a colour each (no triangles: a
triangle reads as a bound's direction)."""


def m_star_panels(
    m_star: pl.DataFrame,
    panels: Sequence[str],
    curves: Mapping[str, Sequence[tuple[str, str, tuple[float, float]]]],
    labels: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
    reference: pl.DataFrame | None = None,
    reference_panel: str | None = None,
    title: str | None = None,
) -> matplotlib.figure.Figure:
    """m* against T on log-log axes, one panel per model class side by side (shared axes),
    each series in a colour and marker of its own, with its fitted curves and a compact legend.

    Exact cells are points with their interval (``ci_lo`` .. ``ci_hi``) as error bars; a lower
    bound (m* beyond it) is an open marker at the bound with an arrow up, an upper bound (m*
    at or below it) one with an arrow down (:data:`BOUND_ARROW`); a cell without a bound
    (``"none"``) is not drawn. Each panel's legend, below it, names its series (and the
    paper's points); one legend below the figure says what the line styles and arrows mean.
    The figure uses constrained layout, so its title and legends lie inside it.

    Args:
        m_star: rows with ``T``, ``m_star``, ``ci_lo``, ``ci_hi``, ``bound`` (or ``censored``,
            ``m_min``, ``m_max``), ``panel`` (one of ``panels``) and ``series``.
        panels: the panels' titles, left to right (a panel without rows is drawn empty).
        curves: per series, ``(role, model, params)`` of each curve to draw over the series'
            exact T (role: a key of :data:`CURVE_STYLES`; model and params as
            :func:`stats.fits.predict` takes them); only m* > 0 is drawn.
        labels: per series, its legend text (default: the series' name).
        notes: per panel, a line under its title (e.g. the settings its series share).
        reference: optionally the paper's read-off (``T``, ``critical_m``, ``err_lo``,
            ``err_hi``), grey squares in ``reference_panel``.
        title: the figure's title (``suptitle``).
    """
    sns.set_theme(style="whitegrid")
    labels, notes = labels or {}, notes or {}
    m_star = _with_bound(m_star) if not m_star.is_empty() else m_star
    panels = list(panels) or [""]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(1.0 + 4.0 * len(panels), 5.6),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    names = m_star["series"].unique(maintain_order=True).to_list() if not m_star.is_empty() else []
    colors = sns.color_palette(n_colors=max(len(names), 1))
    color_of = {name: colors[i % len(colors)] for i, name in enumerate(names)}
    ys: list[float] = []  # every value drawn, for the shared m* axis
    xs: list[float] = []
    for ax, panel in zip(axes[0], panels, strict=True):
        part = m_star.filter(pl.col("panel") == panel) if not m_star.is_empty() else m_star
        own = part["series"].unique(maintain_order=True).to_list() if not part.is_empty() else []
        for i, name in enumerate(own):  # a colour per series in the figure, a marker per series in its panel
            color, marker = color_of[name], SERIES_MARKERS[i % len(SERIES_MARKERS)]
            cells = part.filter(pl.col("series") == name).sort("T")
            xs += cells.filter(pl.col("bound") != "none")["T"].cast(pl.Float64).to_list()
            ys += _draw_exact(ax, cells, color, marker, labels.get(name, str(name)), str(name))
            ys += _draw_bounds(ax, cells, color, marker, str(name))
            exact = cells.filter((pl.col("bound") == "exact") & pl.col("m_star").is_finite())
            if exact.is_empty():
                continue
            T_exact = exact["T"].cast(pl.Float64).to_numpy()
            grid = np.geomspace(T_exact.min(), T_exact.max(), 100)
            for role, model, params in curves.get(name, ()):
                pred = predict(model, params, grid)
                (line,) = ax.plot(
                    grid, np.where(pred > 0, pred, np.nan), CURVE_STYLES[role][0], color=color, lw=1.4, alpha=0.85
                )
                line.set_gid(f"{role} law: {name}")
        if reference is not None and not reference.is_empty() and panel == reference_panel:
            T, m, lo, hi = paper_points(
                ax,
                reference,
                "Edelman et al. 2022 (read-off of their figure)",
                color="0.35",
                elinewidth=0.8,
                capsize=1.5,
                zorder=2,
            )
            xs += T.tolist()
            ys += [*m.tolist(), *lo.tolist(), *hi.tolist()]
        ax.set_title(panel + (f"\n{notes[panel]}" if notes.get(panel) else ""), fontsize=11)
        ax.set_xlabel("context length T")
        handles, texts = ax.get_legend_handles_labels()
        if handles:  # below the panel: the plot keeps its width
            ax.legend(handles, texts, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)
    first = axes[0][0]
    first.set_ylabel("critical sample size m*")
    first.set_xscale("log", base=2)
    first.set_yscale("log")
    first.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=4))
    first.xaxis.set_minor_locator(matplotlib.ticker.LogLocator(base=2))
    first.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    first.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    first.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ys = [y for y in ys if np.isfinite(y) and y > 0]
    if ys:  # fitted curves that run off towards 0 or far up do not stretch the axis
        first.set_ylim(min(ys) / 1.3, max(ys) * 1.3)
    if xs:
        first.set_xlim(min(xs) / 1.4, max(xs) * 1.4)
    fig.legend(
        handles=_key_handles(),
        loc="outside lower center",
        ncols=4,
        fontsize=8,
        frameon=False,
    )
    if title:
        fig.suptitle(title, fontsize=12)
    return fig


def _draw_exact(ax, cells: pl.DataFrame, color, marker: str, label: str, name: str) -> list[float]:
    """The exact cells of one series as points with their intervals, labelled for the legend
    (a series without an exact cell gets a legend entry all the same; the points' line has gid
    ``"cells: NAME"``); the values drawn."""
    part = cells.filter((pl.col("bound") == "exact") & pl.col("m_star").is_finite())
    if part.is_empty():
        ax.errorbar([], [], fmt=marker, color=color, markersize=5, label=label)
        return []
    y = part["m_star"].to_numpy().astype(float)
    lo = part["ci_lo"].cast(pl.Float64).fill_nan(None).fill_null(np.nan).to_numpy()
    hi = part["ci_hi"].cast(pl.Float64).fill_nan(None).fill_null(np.nan).to_numpy()
    lo = np.where(np.isfinite(lo) & (lo > 0), np.minimum(lo, y), y)
    hi = np.where(np.isfinite(hi), np.maximum(hi, y), y)
    drawn = ax.errorbar(
        part["T"].to_numpy().astype(float),
        y,
        yerr=[y - lo, hi - y],
        fmt=marker,
        color=color,
        markersize=5,
        elinewidth=1,
        capsize=2.5,
        zorder=3,
        label=label,
    )
    drawn.lines[0].set_gid(f"cells: {name}")
    return [*y.tolist(), *lo.tolist(), *hi.tolist()]


def _draw_bounds(ax, cells: pl.DataFrame, color, marker: str, name: str) -> list[float]:
    """The censored cells of one series: an open marker at the bound and an arrow towards m*
    (both with gid ``"lower bound: NAME"``, the arrow up, or ``"upper bound: NAME"``, the arrow
    down); the values drawn, arrow tips included."""
    drawn: list[float] = []
    for bound, factor in (("lower", BOUND_ARROW), ("upper", 1 / BOUND_ARROW)):
        part = cells.filter((pl.col("bound") == bound) & pl.col("m_star").is_finite())
        if part.is_empty():
            continue
        T, y = part["T"].to_numpy().astype(float), part["m_star"].to_numpy().astype(float)
        ax.scatter(T, y, marker=marker, s=30, facecolors="white", edgecolors=[color], linewidths=1.2, zorder=4).set_gid(
            f"{bound} bound: {name}"
        )
        for t, v in zip(T, y, strict=True):
            arrow = ax.annotate(
                "",
                xy=(t, v * factor),
                xytext=(t, v),
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2, shrinkA=4, shrinkB=0, mutation_scale=10),
                zorder=4,
            )
            arrow.set_gid(f"{bound} bound: {name}")
        drawn += [*y.tolist(), *(y * factor).tolist()]
    return drawn


def _key_handles() -> list:
    """What the line styles and open markers with arrows mean: the figure's shared legend."""
    grey = "0.3"
    lines = [
        matplotlib.lines.Line2D([], [], linestyle=style, color=grey, label=text)
        for style, text in CURVE_STYLES.values()
    ]
    up = matplotlib.lines.Line2D(
        [],
        [],
        linestyle="none",
        marker=r"$\uparrow$",
        markersize=10,
        color=grey,
        label="m* above this value (lower bound)",
    )
    down = matplotlib.lines.Line2D(
        [],
        [],
        linestyle="none",
        marker=r"$\downarrow$",
        markersize=10,
        color=grey,
        label="m* at or below this value (upper bound)",
    )
    return [*lines, up, down]


NO_TRAINED_TRIAL = (
    "white: no trained trial at this (T, m): every trial there failed before training\n"
    "(e.g. no unambiguous training set of m samples exists for this T), or none was run"
)


def plot_success_grid(rates: pl.DataFrame, facet: str, path: Path) -> Path:
    """Heatmaps of the success rate over the (T, m) grid, one panel per ``facet`` value.

    A (T, m) without a row in ``rates`` is drawn white, and a legend below the panels says
    what white means (:data:`NO_TRAINED_TRIAL`): ``rates`` counts trained trials only (done
    or diverged; stats/critical.py), so such a cell had only failed trials, or none.

    Args:
        rates: rows with ``T``, ``m``, ``rate`` and the ``facet`` column.
    """
    sns.set_theme(style="white")
    values = rates[facet].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(values), figsize=(5 * len(values), 4), squeeze=False)
    empty = False
    for ax, value in zip(axes[0], values, strict=True):
        part = rates.filter(pl.col(facet) == value).group_by("T", "m").agg(pl.col("rate").mean())
        pivot = part.sort("m").pivot(on="T", index="m", values="rate", sort_columns=True).sort("m", descending=True)
        cols = sorted((c for c in pivot.columns if c != "m"), key=int)
        grid = pivot.select(cols).to_numpy().astype(float)  # (m, T); NaN: no trained trial
        empty |= bool(np.isnan(grid).any())
        sns.heatmap(
            grid,
            ax=ax,
            vmin=0,
            vmax=1,
            cmap="viridis",
            xticklabels=cols,
            yticklabels=pivot["m"].to_list(),
            cbar_kws={"label": "success rate"},
        )
        ax.set_xlabel("T")
        ax.set_ylabel("m")
        ax.set_title(str(value))
    fig.tight_layout()
    if empty:  # below the panels; bbox_inches="tight" (save_png) grows the image to hold it
        swatch = matplotlib.patches.Patch(facecolor="white", edgecolor="0.3", label=NO_TRAINED_TRIAL)
        fig.legend(
            handles=[swatch],
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            fontsize=8,
            frameon=False,
        )
    return save_png(fig, path)


def plot_success_curves(rates: pl.DataFrame, facet: str, path: Path, success_frac: float = 0.5) -> Path:
    """Success rate against m (log axis), one line per T, one panel per ``facet`` value, with
    the rate that defines m* as a dashed line: the view of an adaptive search, whose m values
    differ from cell to cell and would leave a (T, m) heatmap mostly empty.

    Args:
        rates: rows with ``T``, ``m``, ``rate`` and the ``facet`` column.
    """
    sns.set_theme(style="whitegrid")
    data = rates.group_by(facet, "T", "m").agg(pl.col("rate").mean()).sort(facet, "T", "m").to_pandas()
    grid = sns.relplot(
        data=data,
        x="m",
        y="rate",
        hue="T",
        col=facet,
        kind="line",
        marker="o",
        palette="viridis",
        hue_norm=matplotlib.colors.LogNorm(),
        height=3.8,
        aspect=1.2,
        facet_kws={"sharex": False},
    )
    grid.set(
        xscale="log",
        xlabel="training samples m (tried by the search)",
        ylabel="success rate over seeds",
    )
    for ax in grid.axes.flat:
        ax.axhline(success_frac, color="grey", linestyle="--", linewidth=1)
    return save_png(grid.figure, path)


def save_png(fig, path: Path) -> Path:
    """Write a seaborn grid's figure; ``bbox_inches="tight"`` keeps its outside legend."""
    with replacing(path) as temp:  # a link at a figure's name is replaced, not written through
        fig.savefig(temp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _with_bound(m_star: pl.DataFrame) -> pl.DataFrame:
    """``m_star`` with ``bound`` (stats/critical.py), derived from ``censored`` where a
    table made without it lacks it (a bound's value then in ``m_star``)."""
    if "bound" in m_star.columns or m_star.is_empty():
        return m_star
    from attnsweep.stats.boolean_cells import normalized

    return normalized(m_star)


def plot_reference(ours: pl.DataFrame, reference: pl.DataFrame, path: Path) -> Path:
    """Our m* against T beside the paper's read-off (Edelman et al., ICML 2022, section 5,
    figure "Transformer, 3-way AND"), both with their intervals, on linear axes as in the paper.

    Args:
        ours: our cells of that setting (``stats.boolean_cells.reference_cells``): rows with
            ``T``, ``m_star``, ``ci_lo``, ``ci_hi``, ``bound`` (or ``censored``) and
            optionally ``series`` (one colour each); may be empty. Bounds are triangles.
        reference: the read-off (``stats.boolean_cells.read_reference``): ``T``,
            ``critical_m``, ``err_lo``, ``err_hi``.
        path: PNG to write.
    """
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    T, m = reference["T"].to_numpy(), reference["critical_m"].to_numpy()
    err = [
        np.maximum(m - reference["err_lo"].to_numpy(), 0),
        np.maximum(reference["err_hi"].to_numpy() - m, 0),
    ]
    ax.errorbar(
        T,
        m,
        yerr=err,
        fmt="s",
        color="0.35",
        capsize=3,
        label="Edelman et al. 2022 (read-off of their figure)",
    )
    if "series" not in ours.columns and not ours.is_empty():
        ours = ours.with_columns(series=pl.lit("ours"))
    ours = _with_bound(ours)
    palette = sns.color_palette()
    groups = [] if ours.is_empty() else ours.sort("T").group_by(["series"], maintain_order=True)
    for i, ((label,), part) in enumerate(groups):
        color = palette[i % len(palette)]
        above = part.filter(pl.col("bound") == "lower")
        if not above.is_empty():  # beyond the grid: a triangle up at the bound
            ax.scatter(
                above["T"],
                above["m_star"],
                marker="^",
                color=color,
                label=f"ours [{label}]: m* > bound",
            )
        below = part.filter(pl.col("bound") == "upper")
        if not below.is_empty():
            ax.scatter(
                below["T"],
                below["m_star"],
                marker="v",
                color=color,
                label=f"ours [{label}]: m* ≤ bound",
            )
        part = part.filter(pl.col("m_star").is_not_nan() & (pl.col("bound") == "exact"))
        if part.is_empty():
            continue
        y = part["m_star"].to_numpy()
        lo = np.minimum(part["ci_lo"].fill_null(np.nan).to_numpy(), y)
        hi = part["ci_hi"].fill_null(np.nan).to_numpy()
        hi = np.where(np.isfinite(hi), hi, y)
        ax.errorbar(
            part["T"].to_numpy(),
            y,
            yerr=[y - lo, np.maximum(hi - y, 0)],
            fmt="o",
            color=color,
            capsize=3,
            label="ours" if label == "ours" else f"ours [{label}]",
        )
    if ours.is_empty():
        ax.text(
            0.5,
            0.92,
            "no cell of ours in this range",
            transform=ax.transAxes,
            ha="center",
            color="0.3",
        )
    ax.set_xlabel("context length T")
    ax.set_ylabel("critical sample size m*")
    ax.set_title("Transformer, 3-way AND: ours against the paper (95% intervals)", fontsize=10)
    ax.legend(fontsize=7)
    return save_png(fig, path)
