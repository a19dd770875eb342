"""The findings' margins section and headline sentence (presentation/margin_notes.py), on an m*
table whose right reading follows from its construction (tests/stats/test_margin_reading.py):
m* ~ sqrt(T) ln T with margins that do not move is "something else"."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from attnsweep.presentation.margin_notes import margin_headline, margin_lines
from attnsweep.stats.boolean_verdicts import verdicts


def _union(with_margins: bool = True) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for T in [2**k for k in range(2, 13)]:
        m = 3 * math.sqrt(T) * math.log(T)
        reps = m * np.exp(0.02 * rng.standard_normal(100))
        rows.append(
            dict(
                task="and",
                T=T,
                s=3,
                model="transformer",
                positions="fixed",
                ln_affine=False,
                norm_bound=1.0,
                stop="margin",
                m_star=m,
                m_star_grid=m,
                m_star_interp=m,
                ci_lo=float(reps.min()),
                ci_hi=float(reps.max()),
                bound="exact",
                flags="",
                n_seeds=8,
                m_min=2,
                m_max=10**6,
                n_trials=100,
                replicates=[float(r) for r in reps],
                margin_success=0.1 if with_margins else None,
                margin_failure=0.1 if with_margins else None,
            )
        )
    return pl.DataFrame(rows, schema_overrides={"replicates": pl.List(pl.Float64), "margin_success": pl.Float64})


def test_the_section_tables_each_cells_margins_and_says_which_reading_the_rows_support():
    union = _union()
    claims = [dict(v) for v in verdicts(union, ["T", "norm_bound", "stop", "positions", "ln_affine"])]
    text = "\n".join(margin_lines(claims, union))
    assert "### The bound's terms: margins" in text
    assert "| 4096 | " in text and "| 0.1000 | 0.1000 |" in text
    assert "with the bound's margin term taken out, m\\* still grows faster than log T" in text
    head = margin_headline(claims, union)
    assert head.startswith(
        "Margins, the bound's own term, at B = 1 (one head per training set, trained to a normalised"
    )
    assert "something other than" in head


def test_runs_without_margins_have_no_section_and_no_sentence():
    union = _union(with_margins=False)
    claims = [dict(v) for v in verdicts(union, ["T", "norm_bound", "stop", "positions", "ln_affine"])]
    assert margin_lines(claims, union) == [] and margin_headline(claims, union) == ""
