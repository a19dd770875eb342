"""Epochs against T (stats/epochs.py) on constructed rows."""

import math

import numpy as np
import polars as pl
import pytest

from attnsweep.stats.epochs import epoch_growth, epochs_by_cell


def test_a_cells_epochs_are_its_successes_and_its_ran_out_share_every_trained_trial():
    rows = pl.DataFrame(
        dict(
            status=["done"] * 6 + ["failed"],
            test_acc=[0.99, 0.99, 0.99, 0.5, 0.5, 0.5, None],
            epochs=[10, 20, 30, 500, 500, 40, None],
            converged=[True, True, True, False, False, True, None],
        )
    )
    got = epochs_by_cell(rows, 0.95)
    assert got["n_success"] == 3 and got["epochs_median"] == 20 and (got["epochs_q1"], got["epochs_q3"]) == (15, 25)
    assert got["ran_out"] == pytest.approx(2 / 6) and got["n_trained"] == 6


def test_epoch_growth_recovers_a_built_power_of_T():
    # Each cell's successes took 3 T^0.6 epochs times 0.9, 1, 1.1: the median is 3 T^0.6.
    Ts = np.array([4, 16, 64, 256, 1024], float)
    eps = [3 * t**0.6 * np.array([0.9, 1.0, 1.1]) for t in Ts]
    g = epoch_growth(Ts, eps)
    assert g["slope"] == pytest.approx(0.6, abs=1e-9) and g["ci_lo"] <= 0.6 <= g["ci_hi"]
    assert g["n_points"] == 5
    # Fewer than 3 cells with a success: no slope.
    assert math.isnan(epoch_growth(Ts[:2], eps[:2])["slope"])
