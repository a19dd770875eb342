"""The learning-curve figure (stats/figures_curves.py) draws exactly the points of the trials it
picks: the cells and values of m are picked among the trials that kept a point, and each line is
one trial's kept points, read from a real store written as the driver writes it."""

from __future__ import annotations

import pytest
from boolean_rows import boolean_row
from curve_runs import with_curve, write_run

from attnsweep.results import ResultsStore
from attnsweep.stats import figures_curves

TS = [8, 12, 16, 20, 24, 28]
MS = [4, 8, 16, 32, 64, 128, 256, 512]


def _acc(T: int, m: int, seed: int, epoch: int) -> float | None:
    if (T, m, seed) == (16, 8, 1):
        return None  # a trial whose every point was not finite: it kept none worth drawing
    if (T, m, seed, epoch) == (24, 32, 0, 2):
        return None  # one point not finite inside a drawn curve
    return round(min(1.0, 0.5 + epoch * m / (T * 100) + seed / 1000), 6)


@pytest.fixture()
def store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path / "store")
    rows = []
    for T in TS:
        for m in MS:
            for seed in range(2):
                row = boolean_row(T, m, seed, m >= 4 * T)
                if T == 12 or m == 4:  # no curve: a cell and a value of m without points
                    rows.append(row)
                    continue
                epochs = list(range(0, 3 + seed + m % 5))
                rows.append(with_curve(row, epochs, [_acc(T, m, seed, e) for e in epochs]))
    write_run(store, "sw", "r1", rows, flush_rows=17)  # several part files, trials split across them
    return store


def test_the_figure_draws_the_kept_points_of_the_spread_cells_and_m(store, tmp_path, monkeypatch):
    drawn: list[tuple] = []
    save = figures_curves.save_png

    def record(figure, path):  # what the PNG shows: each line's panel and points (not the legend's empty ones)
        drawn.extend(
            (ax.get_title(), tuple(line.get_xdata().tolist()), tuple(line.get_ydata().tolist()))
            for ax in figure.axes
            for line in ax.get_lines()
            if len(line.get_xdata())
        )
        return save(figure, path)

    monkeypatch.setattr(figures_curves, "save_png", record)
    fields = list(store.read_run("sw", "r1")["trial_fields"].split(","))
    path = figures_curves.plot_learning_curves(store, "sw", "r1", fields, tmp_path / "fig")
    assert path == tmp_path / "fig" / "learning_curves.png" and path.stat().st_size > 0
    # Cells with points: T = 8, 16, 20, 24, 28 (12 kept none); four spread: first, round(4/3),
    # round(8/3), last. m with points: 8 .. 512 (4 kept none); six spread: indices 0, 1, 2, 4, 5, 6.
    expected = []
    for T in (8, 16, 24, 28):
        for m in (8, 16, 32, 128, 256, 512):
            for seed in range(2):
                points = [(e, _acc(T, m, seed, e)) for e in range(0, 3 + seed + m % 5)]
                points = [(e, a) for e, a in points if a is not None]
                if points:
                    expected.append((f"T={T}", tuple(e for e, _ in points), tuple(a for _, a in points)))
    assert sorted(drawn) == sorted(expected)


def test_a_run_without_curves_draws_nothing(tmp_path):
    store = ResultsStore(tmp_path / "store")
    write_run(store, "sw", "r1", [boolean_row(8, m, 0, True) for m in MS])
    fields = list(store.read_run("sw", "r1")["trial_fields"].split(","))
    assert figures_curves.plot_learning_curves(store, "sw", "r1", fields, tmp_path / "fig") is None
    assert not (tmp_path / "fig").exists()


def test_a_long_curve_is_drawn_thinned_to_evenly_spaced_epochs_first_and_last_kept(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path / "store")
    n = 2 * figures_curves.LINE_POINTS + 7  # 1007 points: every third epoch is kept (ceil(1007 / 500) = 3)
    epochs = list(range(n))
    rows = [with_curve(boolean_row(8, m, 0, True), epochs, [e / n for e in epochs]) for m in (8, 16)]
    write_run(store, "sw", "r1", rows)
    drawn: list[tuple] = []
    save = figures_curves.save_png

    def record(figure, path):
        drawn.extend(
            tuple(line.get_xdata().tolist()) for ax in figure.axes for line in ax.get_lines() if len(line.get_xdata())
        )
        return save(figure, path)

    monkeypatch.setattr(figures_curves, "save_png", record)
    fields = list(store.read_run("sw", "r1")["trial_fields"].split(","))
    figures_curves.plot_learning_curves(store, "sw", "r1", fields, tmp_path / "fig")
    want = tuple([*range(0, n, 3), *([n - 1] if (n - 1) % 3 else [])])
    assert len(drawn) == 2 and all(line == want for line in drawn)
    assert len(want) <= figures_curves.LINE_POINTS + 1
