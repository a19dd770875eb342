"""Seaborn figures of the sparse-Boolean analysis, written as PNG files."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.colors
import matplotlib.patches
import matplotlib.ticker
import matplotlib.transforms

matplotlib.use("Agg")  # no display on workers or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from attnsweep.results.outputs import replacing  # noqa: E402
from attnsweep.stats.fits import predict  # noqa: E402


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
            markersize=3,
            color="0.3",
            ecolor="0.3",
            elinewidth=1,
            capsize=2,
            zorder=3,
            label="Edelman et al. 2022, transformer (read-off of their figure)",
        )
    if title:
        ax.set_title(title, fontsize=10)
    m_star = _with_bound(m_star)
    palette = dict(zip(m_star[hue].unique(maintain_order=True).to_list(), sns.color_palette()))
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
        for fit, style in zip(fits.get(str(value), pl.DataFrame()).iter_rows(named=True), ("-", "--", ":", "-.")):
            pred = predict(fit["model"], (fit["a"], fit["b"]), grid)
            ax.plot(
                grid,
                np.where(pred > 0, pred, np.nan),
                style,
                color=color,
                alpha=0.7,  # m* > 0 only
                label=f"  {value}: {fit['model']} fit (R²={fit['r2']:.2f}, ΔAIC={fit['delta_aic']:.1f})",
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
    for ax, value in zip(axes[0], values):
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
    if empty:  # below the panels; bbox_inches="tight" (_save) grows the image to hold it
        swatch = matplotlib.patches.Patch(facecolor="white", edgecolor="0.3", label=NO_TRAINED_TRIAL)
        fig.legend(
            handles=[swatch],
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            fontsize=8,
            frameon=False,
        )
    return _save(fig, path)


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
    return _save(grid.figure, path)


def plot_test_error(trials: pl.DataFrame, path: Path) -> Path:
    """Relative test error against m per student (log-log; mean and 95% CI over seeds).

    A run of one (d, n, k) size: one panel per teacher. A run over several sizes: one panel
    per (d, n, k) group, the teacher as the line style, so that a line never pools groups
    that tried different m (an adaptive search does). ``trials``: rows with ``teacher``,
    ``student``, ``m``, ``test_error`` (and ``d``, ``n``, ``k``).
    """
    sns.set_theme(style="whitegrid")
    sizes = [c for c in ("d", "n", "k") if c in trials.columns]
    several = bool(sizes) and trials.select(sizes).unique().height > 1
    data = trials.filter(pl.col("test_error") > 0)
    if several:
        data = data.sort(sizes).with_columns(
            group=pl.concat_str([pl.lit(f"{c}=") + pl.col(c).cast(pl.String) for c in sizes], separator=", ")
        )
        data = data.select("group", "teacher", "student", "m", "test_error").to_pandas()
        grid = sns.relplot(
            data=data,
            x="m",
            y="test_error",
            hue="student",
            style="teacher",
            col="group",
            col_wrap=3,
            kind="line",
            marker="o",
            errorbar=("ci", 95),
            seed=0,
            height=3.2,
            aspect=1.1,
            facet_kws=dict(sharex=False),
        )
        grid.set_titles("{col_name}")
    else:
        data = data.select("teacher", "student", "m", "test_error").to_pandas()
        grid = sns.relplot(
            data=data,
            x="m",
            y="test_error",
            hue="student",
            col="teacher",
            kind="line",
            marker="o",
            errorbar=("ci", 95),
            seed=0,
            height=3.8,
            aspect=1.1,
        )  # seed: the same figure each time
    grid.set(xscale="log", yscale="log", xlabel="training samples m", ylabel="relative test error")
    for ax in grid.axes.flat:  # label the sampled m, not every minor tick; labels at least 2.5x apart
        ticks = []
        for x in sorted({x for line in ax.get_lines() for x in line.get_xdata() if x > 0}):
            if not ticks or x >= 2.5 * ticks[-1]:
                ticks.append(x)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    if several:
        grid.figure.subplots_adjust(hspace=0.35)  # a panel's title clear of the axis label above it
    return _save(grid.figure, path)


# Students in the order the symmetry claims name them (stats/symmetry.py); others follow.
STUDENT_ORDER = (
    "inner-product",
    "transformer",
    "mlp",
    "transformer + rotations",
    "mlp + rotations",
    "transformer, no positions",
)
# Room above the largest box and below the smallest: this fraction of the (log) axis height,
# and at least half a decade; matplotlib's 5% margin left boxes near 1 against the top edge.
HEADROOM = 0.12


def plot_equivariance_errors(trials: pl.DataFrame, column: str, path: Path, label: str | None = None) -> Path:
    """Distribution of an equivariance error per student (log scale), one panel per teacher.

    Every student of ``trials`` has a slot in every panel; a slot with no box says why in
    it (:func:`_why_empty`): no finished trial of that student with that teacher (the sweep
    did not train it there, or none finished), the error not recorded, or an error of exactly
    0 (no point on a log axis). The y axis leaves room above the largest box and below the
    smallest (:data:`HEADROOM`), so boxes near an end are not squashed against it.

    Args:
        trials: the finished trials: rows with ``teacher``, ``student`` and ``column``.
    """
    sns.set_theme(style="whitegrid")
    seen = trials["student"].unique(maintain_order=True).to_list()
    order = [s for s in STUDENT_ORDER if s in seen] + [s for s in seen if s not in STUDENT_ORDER]
    teachers = trials["teacher"].unique(maintain_order=True).to_list()
    shown = trials.filter(pl.col(column) > 0).select("teacher", "student", column)
    values = shown[column].drop_nans().drop_nulls()
    if values.is_empty():  # no box anywhere (seaborn's boxplot fails on that): the slots and their notes
        grid = sns.FacetGrid(
            trials.select("teacher").to_pandas(),
            col="teacher",
            col_order=teachers,
            height=3.8,
            aspect=1.2,
        )
        grid.set(
            xticks=range(len(order)),
            xticklabels=order,
            xlim=(-0.5, len(order) - 0.5),
            xlabel="student",
        )
    else:
        grid = sns.catplot(
            data=shown.to_pandas(),
            x="student",
            y=column,
            col="teacher",
            kind="box",
            order=order,
            col_order=teachers,
            height=3.8,
            aspect=1.2,
        )
    grid.set(yscale="log", ylabel=label or column)
    if not values.is_empty():
        lo, hi = math.log10(values.min()), math.log10(values.max())
        pad = max(0.5, HEADROOM * (hi - lo) / (1 - 2 * HEADROOM))  # pad / (hi - lo + 2 pad) = HEADROOM
        grid.set(ylim=(10 ** (lo - pad), 10 ** (hi + pad)))
    for ax, teacher in zip(grid.axes.flat, teachers):
        at_slot = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
        for i, student in enumerate(order):
            why = _why_empty(
                trials.filter((pl.col("teacher") == teacher) & (pl.col("student") == student)),
                column,
            )
            if why:
                ax.text(
                    i,
                    0.5,
                    f"n/a:\n{why}",
                    transform=at_slot,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="0.3",
                    gid="n/a",
                    bbox=dict(facecolor="white", edgecolor="none", pad=1),
                )
    grid.set_xticklabels(rotation=30, ha="right")
    return _save(grid.figure, path)


def _why_empty(rows: pl.DataFrame, column: str) -> str | None:
    """Why a (teacher, student) slot of :func:`plot_equivariance_errors` has no box (None
    when it has one), in lines short enough for the slot's width."""
    if rows.is_empty():
        return "none run or\nfinished with\nthis teacher"
    values = rows[column].drop_nulls().drop_nans()
    if values.is_empty():
        return "error not\nrecorded"
    if (values <= 0).all():
        return "exactly 0 in\nevery trial:\nnot on a\nlog axis"
    return None


def _save(fig, path: Path) -> Path:
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
    return _save(fig, path)


def plot_advantage(advantage: pl.DataFrame, center: dict[str, int], path: Path) -> Path:
    """S2's advantage (m* of a generic student / m* of the inner-product student) against
    each size, one panel per axis d, n, k along the line through ``center`` (the other two
    sizes held there), log-log, one colour per generic student; a bar is the 95% interval,
    a triangle up a lower bound (e.g. the generic m* beyond the largest m tried), down an
    upper bound (e.g. a generic m* that ran out of epochs); no number, no mark.

    Args:
        advantage: :func:`stats.symmetry_scale.advantage`.
        center: the sizes the lines share (:func:`stats.symmetry_scale.center`).
    """
    sns.set_theme(style="whitegrid")

    def line_of(axis: str) -> pl.DataFrame:
        rest = [a for a in ("d", "n", "k") if a != axis and a in center]
        return advantage.filter(pl.all_horizontal([pl.col(a) == center[a] for a in rest])) if rest else advantage

    # A size the run did not vary gets no panel.
    axes_names = [a for a in ("d", "n", "k") if a in center and line_of(a)[a].n_unique() > 1] or ["d"]
    fig, axes = plt.subplots(1, len(axes_names), figsize=(4.2 * len(axes_names), 3.8), squeeze=False)
    students = advantage["student"].unique(maintain_order=True).to_list()
    palette = dict(zip(students, sns.color_palette()))
    for ax, axis in zip(axes[0], axes_names):
        rest = [a for a in ("d", "n", "k") if a != axis and a in center]
        line = line_of(axis)
        for i, student in enumerate(students):
            dodge = 1.04 ** (i - (len(students) - 1) / 2)  # side by side, not on top of each other
            part = line.filter(pl.col("student") == student).sort(axis)
            exact = part.filter(pl.col("bound") == "exact")
            if not exact.is_empty():
                y = exact["ratio"].to_numpy()
                err = [
                    np.maximum(y - exact["ci_lo"].to_numpy(), 0),
                    np.maximum(exact["ci_hi"].to_numpy() - y, 0),
                ]
                err = [np.where(np.isfinite(e), e, 0) for e in err]
                ax.errorbar(
                    exact[axis].to_numpy() * dodge,
                    y,
                    yerr=err,
                    fmt="o-",
                    color=palette[student],
                    capsize=3,
                    label=student,
                )
            for kind, marker, label in (
                ("lower", "^", "lower bound (advantage > value)"),
                ("upper", "v", "upper bound (advantage ≤ value)"),
            ):
                bounds = part.filter(pl.col("bound") == kind)
                if bounds.is_empty():
                    continue
                ax.scatter(
                    bounds[axis].to_numpy() * dodge,
                    bounds["ratio"],
                    marker=marker,
                    color=palette[student],
                    s=50,
                    label=f"{student}: {label}",
                )
                for xv, yv, text in zip(bounds[axis].to_numpy() * dodge, bounds["ratio"], bounds["text"]):
                    # A bound is a side, not a value: its number beside it, so that a weak one reads as weak.
                    ax.annotate(
                        text,
                        (xv, yv),
                        textcoords="offset points",
                        xytext=(5, 4 if kind == "lower" else -10),
                        fontsize=7,
                        color=palette[student],
                    )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=axis,
            title=", ".join(f"{a}={center[a]}" for a in rest),
        )
        ticks = sorted(line[axis].unique().to_list())
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0][0].set_ylabel("advantage: m* generic / m* inner-product")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]}
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=2,
        fontsize=8,
    )
    fig.suptitle("S2's advantage on the equivariant teacher against each size (95% intervals)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_error_against_m(medians: pl.DataFrame, center: dict[str, int], path: Path) -> Path:
    """E of the generic transformer (equivariant teacher; median over seeds, bars: the
    quartiles) against m, one line per d at the ``center``'s n and k, log-log.

    Args:
        medians: the second table of :func:`stats.symmetry_scale.error_against_m`.
    """
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    line = medians.filter((pl.col("n") == center.get("n")) & (pl.col("k") == center.get("k")) & (pl.col("E") > 0))
    ds = sorted(line["d"].unique().to_list())
    palette = dict(zip(ds, sns.color_palette("viridis", len(ds))))
    for d in ds:
        part = line.filter(pl.col("d") == d).sort("m")
        y = part["E"].to_numpy()
        err = [
            np.maximum(y - part["E_lo"].to_numpy(), 0),
            np.maximum(part["E_hi"].to_numpy() - y, 0),
        ]
        ax.errorbar(
            part["m"],
            y,
            yerr=err,
            fmt="o-",
            color=palette[d],
            capsize=2,
            markersize=4,
            label=f"d={d}",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training samples m",
        ylabel="O(d) equivariance error E (float64)",
        title=f"generic transformer, equivariant teacher (n={center.get('n')}, k={center.get('k')})",
    )
    ax.title.set_fontsize(10)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # 1, 10, 100, not 10^0
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=8)
    return _save(fig, path)
