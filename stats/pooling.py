"""What a series pools: trial ids that two code versions both ran, and whether their rows agree.

A trial id is a hash of a trial's settings and seed (orchestrator/spec.py), so two runs made
by different code versions can hold rows for the same trial. Identical settings should give
identical rows on CPU; where they do not, pooling the two runs' rows into one cell would mix
two measurements of one trial. The rule the report follows (docs/decisions.md, "Pooling
across code versions"): a cell's m* comes from one run's rows (never two versions of a trial
id); a series may join cells of several runs, and says so; trial ids held by two code
versions are counted here, with how many changed their test accuracy and how many changed
their outcome (success at the threshold), and shown beside the series.
"""

from __future__ import annotations

import polars as pl


def shared_trials(rows: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Trial ids trained by more than one code version, compared pairwise.

    Args:
        rows: trial rows (columns ``trial_id``, ``code_version``, ``run_id``, ``status``,
            ``test_acc``); only trained rows (status ``done``) are compared.
        threshold: the test accuracy that counts as a success.

    Returns:
        One row per pair of (run, code version): ``run_a``, ``version_a``, ``run_b``,
        ``version_b`` (a before b by run id), ``shared`` (trial ids both trained),
        ``changed`` (of them, a different test accuracy), ``flipped`` (a different outcome:
        at or above ``threshold`` in one, below in the other). Empty when no trial id is
        shared across versions.
    """
    schema = dict(
        run_a=pl.String,
        version_a=pl.String,
        run_b=pl.String,
        version_b=pl.String,
        shared=pl.Int64,
        changed=pl.Int64,
        flipped=pl.Int64,
    )
    done = (
        rows.filter(pl.col("status") == "done")
        .select("trial_id", "run_id", "code_version", "test_acc")
        .unique(subset=["trial_id", "run_id"], keep="first")
    )
    if done.is_empty():
        return pl.DataFrame(schema=schema)
    pairs = done.join(done, on="trial_id", suffix="_b").filter(
        (pl.col("run_id") < pl.col("run_id_b")) & (pl.col("code_version") != pl.col("code_version_b"))
    )
    if pairs.is_empty():
        return pl.DataFrame(schema=schema)
    win_a, win_b = pl.col("test_acc") >= threshold, pl.col("test_acc_b") >= threshold
    return (
        pairs.group_by("run_id", "code_version", "run_id_b", "code_version_b")
        .agg(
            shared=pl.len().cast(pl.Int64),
            changed=(pl.col("test_acc") != pl.col("test_acc_b")).sum().cast(pl.Int64),
            flipped=(win_a != win_b).sum().cast(pl.Int64),
        )
        .rename(
            dict(
                run_id="run_a",
                code_version="version_a",
                run_id_b="run_b",
                code_version_b="version_b",
            )
        )
        .sort("run_a", "run_b")
        .select(list(schema))
    )
