"""Learners over restarts: one training set trained from R initialisations, read three or four ways.

The theorem of Edelman et al. (ICML 2022, Theorem 4.2) bounds the sample complexity of a
learner that minimises the training error over the bounded class; a trial trains one head by
AdamW from one initialisation. Restarts (the ``restart`` setting, workers/config.py) separate
the two: a training set (fixed by the seed) trained from R inits (restart 0..R-1). Over the
same rows, three or four learners (docs/claims.md, "Restarts"):

* ``one init``: restart 0 alone, the learner of every other series;
* ``any of R``: the training set counts as a success when some restart succeeds (an oracle
  that knows the test set: the most restarts can give);
* ``best of R by loss``: the restart with the lowest final training loss succeeds (ties go to
  the lowest restart, a diverged or lossless restart never wins over one with a finite loss).
  Where training stops at the first fit, every restart that fits is already an empirical-risk
  minimiser, and the loss picks among them by a number the theorem does not use;
* ``best of R by margin``: the restart with the largest normalised training margin
  (workers/margins.py) succeeds, among the restarts that fit their training set (train
  accuracy 1); a training set none of whose restarts fits is read at its restart of largest
  margin. This is the learner a margin bound speaks of (Edelman et al., section 4): of the
  minimisers of training error it picks the one the bound rates best. Only where the rows
  carry margins (rows trained before margins existed have none).

Each learner's rows are one row per (cell, m, seed), so m* and its interval come from
:func:`stats.critical.critical_sample_sizes` as for any cell. A group missing one of its
cell's R restarts (a trial lost) enters ``one init`` if it has restart 0, and neither of the
others: an any-of-3 is not an any-of-4.
"""

from __future__ import annotations

import polars as pl

LEARNER = "learner"
"""The column that names a learner; it replaces ``restart`` among a cell's columns, last."""
ONE_INIT = "one init"
BY_LOSS, BY_MARGIN = " by loss", " by margin"
"""The endings of the two best-of-R learners' names (``best of 4 by loss``)."""


def learners(rows: pl.DataFrame, cell: list[str], acc_threshold: float = 0.95) -> tuple[pl.DataFrame, list[str]]:
    """The rows of the three learners, where the rows hold restarts; else ``rows`` as given.

    Args:
        rows: trial rows with the ``cell`` columns, ``m``, ``seed``, ``status``, ``test_acc``
            and ``train_loss`` (and any others, carried along from the row each learner
            picks); ``search_phase`` where present keeps phases apart.
        cell: the columns of a cell; ``restart`` among them.
        acc_threshold: the test accuracy a trial must reach to succeed (as in stats/critical.py).

    Returns:
        ``(rows, cell)``: without restarts above 0, the input without ``restart``. Otherwise one row per
        learner, cell, m and seed, with a ``learner`` column (``one init``, ``any of R``,
        ``best of R by loss``, ``best of R by margin`` where the rows carry margins) in place of ``restart``, and the cell's columns without ``restart`` and
        with ``learner`` last.
    """
    if "restart" not in cell:
        return rows, cell
    if rows.is_empty() or not rows["restart"].max():  # no restarts: the cells every run had before them
        return rows.drop("restart"), [c for c in cell if c != "restart"]
    others = [c for c in cell if c != "restart"]
    group = [*others, "m", "seed", *(["search_phase"] if "search_phase" in rows.columns else [])]
    trained = pl.col("status").is_in(["done", "diverged"])
    success = (pl.col("status") == "done") & (pl.col("test_acc") >= acc_threshold).fill_null(False)
    loss = pl.when(trained & pl.col("train_loss").is_finite()).then(pl.col("train_loss")).otherwise(float("inf"))
    margins = "margin_normalised" in rows.columns and rows["margin_normalised"].is_not_null().any()
    margin = (
        pl.when(trained & pl.col("margin_normalised").is_finite())
        .then(pl.col("margin_normalised"))
        .otherwise(-float("inf"))
        .fill_null(-float("inf"))
        if margins
        else pl.lit(None, pl.Float64)
    )
    fits = (pl.col("status") == "done") & (pl.col("train_acc") >= 1.0).fill_null(False)
    ranked = rows.with_columns(
        _success=success,
        _loss=loss.fill_null(float("inf")),
        _margin=margin,
        _fits=fits,
        _restarts=pl.col("restart").n_unique().over(others, mapping_strategy="group_to_rows"),
        _here=pl.col("restart").n_unique().over(group),
    )
    complete = ranked.filter(pl.col("_here") == pl.col("_restarts"))
    label = pl.col("_restarts").cast(pl.String)
    one = ranked.filter(pl.col("restart") == 0).with_columns(pl.lit(ONE_INIT).alias(LEARNER))
    # The group's succeeding restart if any (the lowest), else its lowest restart.
    anyof = (
        complete.sort(
            [*group, "_success", "restart"],
            descending=[False] * len(group) + [True, False],
            nulls_last=True,
        )
        .group_by(group, maintain_order=True)
        .first()
        .with_columns((pl.lit("any of ") + label).alias(LEARNER))
    )
    best = (
        complete.sort([*group, "_loss", "restart"], nulls_last=True)
        .group_by(group, maintain_order=True)
        .first()
        .with_columns((pl.lit("best of ") + label + pl.lit(BY_LOSS)).alias(LEARNER))
    )
    parts = [one, anyof, best]
    if margins:  # the fitting restart of largest margin first, then the rest by margin
        parts.append(
            complete.sort(
                [*group, "_fits", "_margin", "restart"],
                descending=[False] * len(group) + [True, True, False],
                nulls_last=True,
            )
            .group_by(group, maintain_order=True)
            .first()
            .with_columns((pl.lit("best of ") + label + pl.lit(BY_MARGIN)).alias(LEARNER))
        )
    columns = [c for c in rows.columns if c != "restart"]
    out = pl.concat([part.select(*columns, LEARNER) for part in parts], how="vertical_relaxed")
    new_cell = [
        *others,
        LEARNER,
    ]  # last, as in analysis/boolean.py CELL_FIELDS: cell keys match across tables
    return out.select([*new_cell, *[c for c in columns if c not in new_cell]]), new_cell
