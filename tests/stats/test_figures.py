"""What the figures say beyond their data: the success grid's legend for cells without a
trained trial, and the equivariance plot's headroom and its notes on empty student slots.
Each figure is kept open after it is written (``plt.close`` held back) and its artists read."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest

from attnsweep.stats import figures, figures_symmetry, success_rates


@pytest.fixture
def drawn(monkeypatch):
    """A function giving the figures drawn since the test began, oldest first, still open:
    ``plt.close`` is held back until the test ends."""
    close, before = plt.close, set(plt.get_fignums())
    monkeypatch.setattr(plt, "close", lambda fig=None: None)

    def figures_drawn():
        return [plt.figure(n) for n in sorted(set(plt.get_fignums()) - before)]

    yield figures_drawn
    for fig in figures_drawn():
        close(fig)


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for legend in fig.legends:
        out += [t.get_text() for t in legend.get_texts()]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts]
    return out


def _boolean_trials(failed_at: tuple[int, int] | None) -> pl.DataFrame:
    """T in (8, 64), m in (8, 32), 2 seeds, all done; at ``failed_at`` = (T, m) every trial
    failed before training, as an ambiguous training set makes it."""
    rows = []
    for T in (8, 64):
        for m in (8, 32):
            for seed in range(2):
                failed = (T, m) == failed_at
                rows.append(
                    dict(
                        model="transformer",
                        T=T,
                        m=m,
                        seed=seed,
                        status="failed" if failed else "done",
                        test_acc=None if failed else float(m == 32),
                    )
                )
    return pl.DataFrame(rows, schema_overrides={"test_acc": pl.Float64})


def test_a_grid_with_failed_cells_says_what_white_means(drawn, tmp_path):
    rates = success_rates(_boolean_trials(failed_at=(64, 8)), ["model", "T"]).with_columns(series=pl.col("model"))
    assert rates.filter((pl.col("T") == 64) & (pl.col("m") == 8)).is_empty()  # no row: drawn white
    figures.plot_success_grid(rates, "series", tmp_path / "grid.png")
    (fig,) = drawn()
    (legend,) = fig.legends
    (text,) = [t.get_text() for t in legend.get_texts()]
    assert text.startswith("white: no trained trial at this (T, m)")
    assert "failed before training" in text and "none was run" in text
    (swatch,) = legend.legend_handles
    assert swatch.get_facecolor()[:3] == (1.0, 1.0, 1.0)
    # The legend lies below the panels, not over a cell.
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)


def test_a_full_grid_has_no_white_legend(drawn, tmp_path):
    rates = success_rates(_boolean_trials(failed_at=None), ["model", "T"]).with_columns(series=pl.col("model"))
    figures.plot_success_grid(rates, "series", tmp_path / "grid.png")
    (fig,) = drawn()
    assert fig.legends == [] and not any("white" in t for t in _texts(fig))


def _symmetry_trials() -> pl.DataFrame:
    """Finished trials, 3 seeds: on the equivariant teacher the inner-product student (E about
    1e-16), the transformer (E up to 1.2, near the top) and the no-positions transformer
    (permutation error exactly 0); on the control teacher only the first two, so the
    no-positions slot there has no trial. The transformer's permutation error is not recorded
    on the control teacher."""
    rows = []
    for teacher in ("equivariant", "control"):
        for seed in range(3):
            rows.append(dict(teacher=teacher, student="inner-product", eq=1e-16 * (1 + seed), perm=2e-16))
            rows.append(
                dict(
                    teacher=teacher,
                    student="transformer",
                    eq=(0.8, 1.0, 1.2)[seed],
                    perm=0.1 if teacher == "equivariant" else None,
                )
            )
            if teacher == "equivariant":
                rows.append(dict(teacher=teacher, student="transformer, no positions", eq=0.9, perm=0.0))
    return pl.DataFrame(rows, schema_overrides={"perm": pl.Float64})


def _notes(fig) -> dict[tuple[str, str], str]:
    """The n/a note of each (teacher, student) slot, keyed by panel title and tick label."""
    notes = {}
    for ax in fig.axes:
        teacher = ax.get_title().removeprefix("teacher = ")
        ticks = {round(x): t.get_text() for x, t in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)}
        for t in ax.texts:
            if t.get_gid() == "n/a":
                notes[(teacher, ticks[round(t.get_position()[0])])] = t.get_text()
    return notes


@pytest.mark.slow
def test_equivariance_boxes_near_the_top_have_room_above(drawn, tmp_path):
    figures_symmetry.plot_equivariance_errors(_symmetry_trials(), "eq", tmp_path / "eq.png")
    (fig,) = drawn()
    fig.canvas.draw()
    for ax in fig.axes:
        bottom, top = (math.log10(y) for y in ax.get_ylim())
        height = top - bottom
        # Largest E is 1.2, smallest 1e-16: a tenth of the axis height or more past each
        # (matplotlib's own margin is 5%), and every box, whisker and flier inside.
        lines = [line.get_ydata() for line in ax.get_lines() if len(line.get_ydata())]
        highest = max(float(np.nanmax(y)) for y in lines)
        lowest = min(float(np.nanmin(y)) for y in lines)
        assert (highest, lowest) == (pytest.approx(1.2), pytest.approx(1e-16))
        assert (top - math.log10(highest)) / height >= 0.1
        assert (math.log10(lowest) - bottom) / height >= 0.1


@pytest.mark.slow
def test_empty_student_slots_say_why(drawn, tmp_path):
    trials = _symmetry_trials()
    figures_symmetry.plot_equivariance_errors(trials, "eq", tmp_path / "eq.png")
    figures_symmetry.plot_equivariance_errors(trials, "perm", tmp_path / "perm.png")
    eq, perm = (_notes(fig) for fig in drawn())
    none_there = "n/a:\nnone run or\nfinished with\nthis teacher"
    zero = "n/a:\nexactly 0 in\nevery trial:\nnot on a\nlog axis"
    assert eq == {("control", "transformer, no positions"): none_there}
    assert perm == {
        ("control", "transformer, no positions"): none_there,
        ("control", "transformer"): "n/a:\nerror not\nrecorded",
        ("equivariant", "transformer, no positions"): zero,
    }
    # Every student keeps its slot in both panels, in the order the claims name them.
    for fig in drawn():
        for ax in fig.axes:
            assert [t.get_text() for t in ax.get_xticklabels()] == [
                "inner-product",
                "transformer",
                "transformer, no positions",
            ]


def test_a_column_with_no_box_anywhere_still_draws_its_slots(drawn, tmp_path):
    # Permutation error exactly 0 in every trial (or not recorded): no box to draw at all.
    trials = _symmetry_trials().with_columns(perm=pl.when(pl.col("student") == "transformer").then(None).otherwise(0.0))
    path = figures_symmetry.plot_equivariance_errors(trials, "perm", tmp_path / "perm.png")
    assert path.stat().st_size > 0
    (fig,) = drawn()
    notes = _notes(fig)
    zero, unrecorded = (
        "n/a:\nexactly 0 in\nevery trial:\nnot on a\nlog axis",
        "n/a:\nerror not\nrecorded",
    )
    assert notes == {
        ("equivariant", "inner-product"): zero,
        ("equivariant", "transformer"): unrecorded,
        ("equivariant", "transformer, no positions"): zero,
        ("control", "inner-product"): zero,
        ("control", "transformer"): unrecorded,
        ("control", "transformer, no positions"): "n/a:\nnone run or\nfinished with\nthis teacher",
    }


def test_m_star_at_or_below_the_grid_is_a_down_triangle_at_the_smallest_m(drawn, tmp_path):
    nan = float("nan")
    table = pl.DataFrame(
        dict(
            T=[8, 16, 32, 64],
            m_star=[8.0, 20.0, 40.0, nan],
            ci_lo=[8.0, 15.0, 30.0, nan],
            ci_hi=[8.0, 25.0, 50.0, nan],
            censored=["below", "", "", "above"],
            m_min=[8] * 4,
            m_max=[128] * 4,
            model=["transformer"] * 4,
        )
    )
    figures.plot_m_star(table, {}, "model", tmp_path / "m.png")
    (ax,) = drawn()[-1].axes
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [
        "transformer: m* > bound (beyond the grid)",
        "transformer: m* ≤ bound (smallest m tried, out of epochs, or budget-limited)",
        "transformer",
    ]
    below = next(c for c in ax.collections if c.get_label().startswith("transformer: m* ≤"))
    assert below.get_offsets().tolist() == [[8.0, 8.0]]  # at T = 8, m = the smallest m tried
    points = next(c for c in ax.containers if c.get_label() == "transformer").lines[0]
    assert points.get_xdata().tolist() == [
        16,
        32,
    ]  # the censored cells are not drawn as measured points
