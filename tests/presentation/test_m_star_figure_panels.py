"""The findings' headline figure (presentation/m_star_figure.py): m* against T on log-log axes,
one panel per model class, two fitted curves per series at most, a compact legend, the title
inside the figure, and censored cells at their bound with an arrow towards m*. Built from a
hand-made m* table whose exact cells follow known laws, so every expected value is written
here, not computed by the code under test."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from attnsweep.presentation.m_star_figure import main_series_figure, plot_main_series  # noqa: E402

MLP = "mlp, no bound"
PROTOCOL = "transformer, no bound"
THEORY = "transformer, fixed positions, B=1, inputs of norm sqrt(d)"
NEAR = "transformer, fixed positions, B=1"


def _cell(model, positions, ln_affine, bound_b, T, m, bound="exact", ci=0.1):
    return dict(
        task="and",
        s=3,
        model=model,
        positions=positions,
        ln_affine=ln_affine,
        norm_bound=bound_b,
        T=T,
        m_star=float(m),
        ci_lo=float(m) * (1 - ci) if bound == "exact" else float(m),
        ci_hi=float(m) * (1 + ci) if bound == "exact" else math.inf,
        bound=bound,
    )


POWER = {T: 3.0 * T**0.6 for T in (4, 8, 16, 32, 64, 256)}
"""The theorem's-class series: exactly m* = 3 T^0.6 at its exact cells."""
LOG = {T: 5.0 + 20.0 * math.log(T) for T in (8, 32, 128, 512, 2048, 4096)}
"""The paper's-protocol series: exactly m* = 5 + 20 ln T."""


def _union() -> pl.DataFrame:
    rows = []
    # MLP: four exact cells (no law can be named from four), then beyond the grid at T = 256.
    for T in (8, 16, 32, 64):
        rows.append(_cell("mlp", None, None, None, T, 7.0 * T))
    rows.append(_cell("mlp", None, None, None, 256, 1024, "lower"))
    # The paper's protocol (positions and ln_affine missing read as learned and trained).
    for T, m in LOG.items():
        rows.append(_cell("transformer", None, None, None, T, m))
    rows.append(_cell("transformer", "learned", True, None, 8192, 150.0, "upper"))
    # The theorem's class: exact power law, a lower bound below the last exact value, an upper
    # bound, and a cell without a bound.
    for T, m in POWER.items():
        rows.append(_cell("transformer", "fixed", False, 1.0, T, m))
    rows.append(_cell("transformer", "fixed", False, 1.0, 1024, 40.0, "lower"))
    rows.append(_cell("transformer", "fixed", False, 1.0, 2048, 300.0, "upper"))
    rows.append(_cell("transformer", "fixed", False, 1.0, 4096, math.nan, "none"))
    # Near the theorem's class: fixed codes and a bound, but a trained LayerNorm gain.
    for T in (4, 16, 64):
        rows.append(_cell("transformer", "fixed", True, 1.0, T, 4.0 * T**0.5))
    return pl.DataFrame(rows, schema_overrides={"norm_bound": pl.Float64, "positions": pl.String})


REFERENCE = pl.DataFrame(
    dict(T=[100, 200, 400], critical_m=[50.0, 58.0, 80.0], err_lo=[45.0, 53, 74], err_hi=[55.0, 62, 84])
)


@pytest.fixture
def figure():
    made = []

    def make(**kw):
        fig = main_series_figure(_union(), REFERENCE, **kw)
        made.append(fig)
        return fig

    yield make
    for fig in made:
        plt.close(fig)


def _panels(fig) -> dict:
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes}


def _curves(ax, series: str) -> dict:
    return {
        line.get_gid().split(":")[0]: line
        for line in ax.get_lines()
        if (line.get_gid() or "").endswith(f"law: {series}")
    }


def _series_names(fig) -> set[str]:
    return {
        (artist.get_gid() or "").split(": ", 1)[1]
        for ax in fig.axes
        for artist in [*ax.get_lines(), *ax.collections, *ax.texts]
        if ": " in (artist.get_gid() or "")
    }


def test_one_log_log_panel_per_class_left_to_right_sharing_m_star(figure):
    fig = figure(laws={PROTOCOL: "log", THEORY: "power", MLP: "undecided"})
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["MLP", "paper's protocol", "theorem's class"]
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    first, *others = fig.axes
    assert all(first.get_shared_y_axes().joined(first, ax) for ax in others)
    panels = _panels(fig)
    assert _series_names(fig) == {MLP, PROTOCOL, THEORY, NEAR}
    # Each series in its class's panel: the near series beside the theorem's class, marked so.
    where = {
        gid.split(": ", 1)[1]: title
        for title, ax in panels.items()
        for gid in (line.get_gid() or "" for line in ax.get_lines())
        if gid.startswith("cells: ")
    }
    assert where == {MLP: "MLP", PROTOCOL: "paper's protocol", THEORY: "theorem's class", NEAR: "theorem's class"}
    texts = [t.get_text() for t in panels["theorem's class"].get_legend().get_texts()]
    assert sum("near the class" in t for t in texts) == 1
    # The paper's read-off sits in the protocol panel only.
    grey = [
        c
        for title, ax in panels.items()
        for c in ax.containers
        if c.get_label().startswith("Edelman")
        for _ in [title]
        if title == "paper's protocol"
    ]
    assert len(grey) == 1 and grey[0].lines[0].get_xdata().tolist() == [100, 200, 400]
    for title in ("MLP", "theorem's class"):
        assert not any(c.get_label().startswith("Edelman") for c in panels[title].containers)


def test_at_most_the_log_law_and_the_named_law_per_series(figure):
    fig = figure(laws={PROTOCOL: "log", THEORY: "power", MLP: "undecided", NEAR: "polylog"})
    panels = _panels(fig)
    for title, ax in panels.items():
        lines = [line for line in ax.get_lines() if "law: " in (line.get_gid() or "")]
        for line in lines:
            assert line.get_gid().split(": ", 1)[0] in ("log law", "named law")
        names = {line.get_gid().split(": ", 1)[1] for line in lines}
        for name in names:
            assert len(_curves(ax, name)) <= 2, (title, name)
    theory = _curves(panels["theorem's class"], THEORY)
    assert set(theory) == {"log law", "named law"}
    x = theory["named law"].get_xdata()
    assert x.min() == pytest.approx(4) and x.max() == pytest.approx(256)  # over the exact cells only
    np.testing.assert_allclose(theory["named law"].get_ydata(), 3.0 * x**0.6, rtol=1e-4)
    assert theory["named law"].get_linestyle() != theory["log law"].get_linestyle()
    # The law named is the log law: one curve, a + b ln T, exactly the cells' law.
    protocol = _curves(panels["paper's protocol"], PROTOCOL)
    assert set(protocol) == {"log law"}
    xp = protocol["log law"].get_xdata()
    np.testing.assert_allclose(protocol["log law"].get_ydata(), 5.0 + 20.0 * np.log(xp), rtol=1e-6)
    # Undecided: the log law alone.
    assert set(_curves(panels["MLP"], MLP)) == {"log law"}


def test_without_laws_each_series_gets_its_own_robust_law(figure):
    panels = _panels(figure())
    # An exact power law over six T: the power law wins every fitting variant.
    theory = _curves(panels["theorem's class"], THEORY)
    x = theory["named law"].get_xdata()
    np.testing.assert_allclose(theory["named law"].get_ydata(), 3.0 * x**0.6, rtol=1e-4)
    # Four exact cells (MLP) and three (near): too few to name a law; the log law is drawn.
    assert set(_curves(panels["MLP"], MLP)) == {"log law"}
    assert set(_curves(panels["theorem's class"], NEAR)) == {"log law"}
    texts = [t.get_text() for ax in panels.values() for t in ax.get_legend().get_texts()]
    assert any("power law" in t for t in texts)
    assert sum("too few cells" in t for t in texts) == 2
    assert not any("AIC" in t for t in texts)  # no ΔAIC in the series' legend


def test_legend_is_compact_and_the_title_and_legends_lie_inside_the_figure(figure):
    fig = figure(laws={})
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (key,) = fig.legends
    key_texts = [t.get_text() for t in key.get_texts()]
    assert any("log law" in t for t in key_texts) and any("named law" in t for t in key_texts)
    panels = _panels(fig)
    for title, ax in panels.items():
        entries = ax.get_legend().get_texts()
        assert len(entries) + len(key_texts) <= 10, title
    # One entry per series, and the paper's points, in the protocol panel.
    assert len(panels["MLP"].get_legend().get_texts()) == 1
    assert len(panels["paper's protocol"].get_legend().get_texts()) == 2
    assert len(panels["theorem's class"].get_legend().get_texts()) == 2
    width, height = fig.bbox.width, fig.bbox.height
    title = fig.get_suptitle()
    assert title.startswith("3-way AND") and "95% intervals" in title
    for artist in (fig._suptitle, key, *(ax.get_legend() for ax in fig.axes), *(ax.title for ax in fig.axes)):
        box = artist.get_window_extent(renderer)
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, artist
    # The legends do not take the plot's width: each panel's axes are wider than its legend.
    for ax in fig.axes:
        assert ax.get_window_extent(renderer).width > ax.get_legend().get_window_extent(renderer).width


def _arrows(ax, gid: str) -> list[Annotation]:
    return [t for t in ax.texts if isinstance(t, Annotation) and t.get_gid() == gid]


def test_censored_cells_sit_at_their_bound_with_an_arrow_towards_m_star(figure):
    panels = _panels(figure(laws={}))
    theory, mlp, protocol = panels["theorem's class"], panels["MLP"], panels["paper's protocol"]
    # A lower bound: at the bound, arrow up. T = 1024, > 40 (below the exact value at T = 256).
    for ax, name, T, value in ((theory, THEORY, 1024, 40.0), (mlp, MLP, 256, 1024.0)):
        (arrow,) = _arrows(ax, f"lower bound: {name}")
        assert arrow.xyann == pytest.approx((T, value))
        assert arrow.xy[0] == pytest.approx(T) and arrow.xy[1] > value
        (marker,) = [c for c in ax.collections if c.get_gid() == f"lower bound: {name}"]
        assert marker.get_offsets().tolist() == [[T, value]]
    # An upper bound: at the bound, arrow down.
    for ax, name, T, value in ((theory, THEORY, 2048, 300.0), (protocol, PROTOCOL, 8192, 150.0)):
        (arrow,) = _arrows(ax, f"upper bound: {name}")
        assert arrow.xyann == pytest.approx((T, value))
        assert arrow.xy[0] == pytest.approx(T) and arrow.xy[1] < value
    # "none" is not drawn; the exact cells are points with their intervals as error bars.
    drawn_T = [
        *(x for line in theory.get_lines() if THEORY in (line.get_gid() or "") for x in line.get_xdata()),
        *(xy[0] for c in theory.collections if THEORY in (c.get_gid() or "") for xy in c.get_offsets()),
        *(t.xyann[0] for t in theory.texts if isinstance(t, Annotation)),
    ]
    assert drawn_T and not any(x == pytest.approx(4096) for x in drawn_T)
    (points,) = [line for line in theory.get_lines() if line.get_gid() == f"cells: {THEORY}"]
    assert points.get_xdata().tolist() == sorted(POWER)
    assert points.get_ydata().tolist() == pytest.approx([POWER[T] for T in sorted(POWER)])
    (container,) = [c for c in theory.containers if points in c.lines]
    segments = container.lines[2][0].get_segments()
    ends = [y for seg in segments for y in (seg[0][1], seg[1][1])]
    assert ends == pytest.approx([y for T in sorted(POWER) for y in (0.9 * POWER[T], 1.1 * POWER[T])])
    # The m* axis shows every bound and arrow tip.
    low, high = theory.get_ylim()
    assert low < 0.9 * POWER[4] and high > 1024.0


def test_the_written_png_is_the_same_file_twice(tmp_path):
    union = _union()
    a = plot_main_series(union, REFERENCE, tmp_path / "a.png", laws={THEORY: "power"})
    b = plot_main_series(union, REFERENCE, tmp_path / "b.png", laws={THEORY: "power"})
    assert a == tmp_path / "a.png" and a.read_bytes() == b.read_bytes()
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_table_without_series_still_draws_the_papers_points():
    fig = main_series_figure(pl.DataFrame(), REFERENCE)
    try:
        assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["paper's protocol"]
        assert fig.axes[0].get_xscale() == "log"
    finally:
        plt.close(fig)
