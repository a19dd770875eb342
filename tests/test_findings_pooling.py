"""What a series pools and how long its successes trained, as the findings say it
(presentation/boolean_notes.py), on constructed tables whose answers follow from how they are built."""

import math

import numpy as np
import polars as pl

from attnsweep.presentation.boolean_notes import epoch_lines, pooling_lines
from attnsweep.stats.boolean_growth import l1_log_growth

TS = (8, 64, 512, 4096)


def _series():
    """One transformer series: T = 8, 64, 512 from run r1 (code aaa), T = 4096 from run r2
    (code bbb), which also ran T = 8 again (the same trial ids) with other outcomes.

    Each cell: 4 seeds at each of m = 10, 100; at m = 100 every seed succeeds after 2 sqrt(T)
    epochs, at m = 10 every seed fails, and at T = 4096 half of those ran out of epochs.
    r2's rows of T = 8: seeds 0 and 1 changed their accuracy, seed 0 across the 0.95 line.
    """
    rows, cells = [], []
    for T in TS:
        run, version = ("r2", "bbb") if T == 4096 else ("r1", "aaa")
        cells.append(
            dict(
                model="transformer",
                T=T,
                s=3,
                lr=0.003,
                run_id=run,
                settings="default",
                tuning="not tuned",
                m_star=30.0 * math.sqrt(T),
                bound="exact",
                ci_lo=29.0 * math.sqrt(T),
                ci_hi=31.0 * math.sqrt(T),
                flags="",
                m_star_grid=30.0 * math.sqrt(T),
            )
        )
        for m in (10, 100):
            for seed in range(4):
                win = m == 100
                rows.append(
                    dict(
                        trial_id=f"{T}-{m}-{seed}",
                        run_id=run,
                        code_version=version,
                        model="transformer",
                        T=T,
                        s=3,
                        lr=0.003,
                        m=m,
                        seed=seed,
                        search_phase="search",
                        status="done",
                        test_acc=0.99 if win else 0.5,
                        epochs=int(2 * math.sqrt(T)) if win else 500,
                        converged=win or not (T == 4096 and seed < 2),
                    )
                )
    again = [dict(r, run_id="r2", code_version="bbb") for r in rows if r["T"] == 8]
    again[4]["test_acc"] = 0.9  # m = 100, seed 0: 0.99 -> 0.9, flips
    again[5]["test_acc"] = 0.98  # m = 100, seed 1: 0.99 -> 0.98, stays a success
    union = pl.DataFrame(cells)
    return (
        union,
        pl.DataFrame(rows + again),
        [dict(run_id="r1", code_version="aaa"), dict(run_id="r2", code_version="bbb")],
    )


def test_a_series_mixing_code_versions_says_so_and_shows_the_changed_outcomes():
    union, rows, records = _series()
    claims = [l1_log_growth(union)]
    text = "\n".join(pooling_lines(claims, union, rows, records, 0.95))
    # The series' cells come from two runs and two code versions, each named with its T.
    assert "run r1 (code aaa): T = 8, 64, 512; run r2 (code bbb): T = 4096" in text
    assert "lr 0.003 in every cell; rows of the search phase in every cell" in text
    # r2 reran r1's 8 trials of T = 8: 2 changed accuracy, 1 changed outcome; split by the rule.
    assert "share 8 trained trial ids: 2 of them have a different test accuracy and 1 a different outcome" in text
    assert "these are split, never pooled" in text
    # The cell T = 8 holds r1's rows only (the rule: one run per cell), not r2's copies.
    from attnsweep.presentation.boolean_notes import series_sources

    src = {c["T"]: c for c in series_sources(union, {}, rows)}
    assert src[8]["rows"]["run_id"].unique().to_list() == ["r1"] and src[8]["rows"].height == 8
    assert src[4096]["rows"]["run_id"].unique().to_list() == ["r2"]


def test_epochs_against_T_are_shown_per_cell_with_their_growth():
    union, rows, _ = _series()
    text = "\n".join(epoch_lines([l1_log_growth(union)], union, rows, 0.95))
    # Successes took int(2 sqrt(T)) epochs: 5, 16, 45, 128; at T = 4096 2 of 8 trained trials ran out.
    assert "T = 8: 5 (5..5), 0% ran out" in text and "T = 4096: 128 (128..128), 25% ran out" in text
    slope = np.polyfit(np.log10(TS), np.log10([5, 16, 45, 128]), 1)[0]
    assert f"the median grows like T^{slope:.2f} (95% CI {slope:.2f} .. {slope:.2f}, 4 T)" in text
