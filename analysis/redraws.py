"""How often a cell's training sets near its m* were redrawn: at small T many training sets of
m samples do not determine the target (more than one set of s positions fits them), and the
task draws such a set again (tasks/boolean.py, ``max_redraws``), so those cells measure m* on
sets conditioned to be unambiguous (docs/method.md, "The data" and "Three estimators")."""

from __future__ import annotations

import polars as pl

TRAINED = ("done", "diverged")


def with_redrawn(table: pl.DataFrame, rows: pl.DataFrame, cell: list[str]) -> pl.DataFrame:
    """The m* table with ``redrawn``: per cell, the share (0..1, Float64) of its trained trials
    at the two m tried around its crossing (the largest m below ``m_star_grid`` and
    ``m_star_grid`` itself; the two largest m tried for a cell beyond the grid) whose training
    set was drawn more than once (``redraws`` > 0). Null where the rows have no ``redraws``
    column or the cell has no trained trial there.

    Args:
        table: one row per cell, with the ``cell`` columns and ``m_star_grid``.
        rows: the trial rows behind it (``cell`` columns, ``m``, ``status``, ``redraws``).
        cell: the columns that name a cell.
    """
    if table.is_empty() or "redraws" not in rows.columns or "m_star_grid" not in table.columns:
        return table.with_columns(redrawn=pl.lit(None, pl.Float64))
    trained = rows.filter(pl.col("status").is_in(TRAINED)).select(*cell, "m", "redraws")
    # The table's cell columns take the rows' types (a column all null in the table may be typed Null).
    cells = (
        table.select(*cell, "m_star_grid")
        .with_row_index("_cell")
        .with_columns(pl.col(c).cast(trained.schema[c]) for c in cell)
    )
    grid = pl.col("m_star_grid")
    near = (
        trained.select(*cell, "m")
        .unique()
        .join(cells, on=cell, how="inner", nulls_equal=True)
        .filter(grid.is_null() | grid.is_nan() | (pl.col("m") <= grid))
        .filter(pl.col("m").rank("ordinal", descending=True).over("_cell") <= 2)
        .select("_cell", *cell, "m")
    )
    share = (
        trained.join(near, on=[*cell, "m"], how="inner", nulls_equal=True)
        .group_by("_cell")
        .agg(redrawn=(pl.col("redraws").fill_null(0) > 0).mean())
    )
    return table.with_row_index("_cell").join(share, on="_cell", how="left", maintain_order="left").drop("_cell")
