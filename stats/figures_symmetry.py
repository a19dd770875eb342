"""Seaborn figures of the symmetry experiment (Ma & Ying, arXiv 2210.06741), written as PNG
files: test error and equivariance errors against m per student, S2's advantage across scale,
and the generic student's error against m."""

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

from attnsweep.stats.figures import save_png  # noqa: E402
from attnsweep.stats.symmetry import GENERIC, GENERIC_MLP, INNER_PRODUCT  # noqa: E402


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
    return save_png(grid.figure, path)


# Students in the order the symmetry claims name them (stats/symmetry.py); others follow.
STUDENT_ORDER = (
    INNER_PRODUCT,
    GENERIC,
    GENERIC_MLP,
    f"{GENERIC} + rotations",
    f"{GENERIC_MLP} + rotations",
    f"{GENERIC}, no positions",
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
    for ax, teacher in zip(grid.axes.flat, teachers, strict=True):
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
    return save_png(grid.figure, path)


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
    # Not strict: the palette has more colours than there are students.
    palette = dict(zip(students, sns.color_palette(), strict=False))
    for ax, axis in zip(axes[0], axes_names, strict=True):
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
                for xv, yv, text in zip(bounds[axis].to_numpy() * dodge, bounds["ratio"], bounds["text"], strict=True):
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
    return save_png(fig, path)


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
    palette = dict(zip(ds, sns.color_palette("viridis", len(ds)), strict=True))
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
    return save_png(fig, path)
