"""The symmetry claims across scale: S1-S4 per (d, n, k) group, S2's advantage and how it
changes with d, n and k, and the generic student's equivariance error E against m per group
(docs/claims.md 1b; Ma & Ying, arXiv 2210.06741).

A *group* is one (n, k, d): every cell of a symmetry run with those sizes (both teachers,
every student). S1-S4 are judged in each group exactly as :func:`stats.symmetry.verdicts`
judges a one-size run. The paper makes no claim about how the numbers below change with
size, so they are measurements with intervals, not verdicts:

* *advantage*: on the equivariant teacher, m* of a generic student (the transformer, and the
  transformer trained on rotated samples) divided by m* of the inner-product student in the
  same group. Its interval pairs the two cells' bootstrap replicates (stats/critical.py;
  a bracketed cell's widened as below); the cells are resampled independently (their seeds
  are separate draws).
* *advantage slope* along an axis a in (d, n, k): over the groups that differ only in a (a
  *line*), the OLS slope of ln(advantage) on ln(a), i.e. advantage ~ a^slope; its interval
  is the hull of the extremes the cells' published m* intervals allow and the percentile
  interval of the slope over the paired replicates (:func:`advantage_slopes`); over three or
  more values, the local slopes between neighbours, with intervals made the same way, check
  that one power law fits (intervals that do not overlap: it does not).
* *along d* (S3, S4): beside the rule's verdict across groups, the largest d up to which
  every group supports the claim, and what the groups above it are (:func:`by_d`).
* *E slope*: per group, the OLS slope of log10 E (the generic transformer's median float64
  O(d) error, on the equivariant teacher) on log10 m with a seed-bootstrap interval
  (:func:`stats.symmetry.log_slope`), and E's median at each m tried in every cell.

Censoring (docs/claims.md 2, stats/critical.py): the advantage of a generic m* over the
inner-product m* is a bound whenever either is (:func:`stats.verdict_common.ratio_bound`: a
generic m* beyond the grid or an inner-product m* that is an upper bound makes it a lower
bound, ``> x``; the other way round an upper bound), and a bound is left out of a slope
and named in ``left_out``. An inner-product m* at m = 1 is exact (the floor: no fewer
samples exist). A cell whose every bootstrap replicate repeats one value (every seed flips
between the same two m) has the grid bracket as its interval; for the advantage's and the
slope's intervals each such replicate is instead drawn log-uniformly inside the bracket, so
the slope's interval carries what the grid cannot resolve.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import polars as pl

from attnsweep.stats.critical import _cell_hash, format_m_star, percentile_interval
from attnsweep.stats.symmetry import CELL, GENERIC, INNER_PRODUCT, log_slope, verdicts, with_student
from attnsweep.stats.verdict_common import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    NOT_TESTED,
    SUPPORTED,
    Verdict,
    jsonable,
    ratio_bound,
)

GROUP = ["n", "k", "d"]
AXES = ("d", "n", "k")
BASELINE = INNER_PRODUCT
COMPARED = (GENERIC, f"{GENERIC} + rotations")
CLAIMS = ("S1", "S2", "S3", "S4")


def groups(trials: pl.DataFrame) -> list[tuple[int, int, int]]:
    """The (n, k, d) groups of a run's trials, sorted."""
    return [tuple(r) for r in trials.select(GROUP).unique().sort(["d", "n", "k"]).iter_rows()]


def group_verdicts(
    trials: pl.DataFrame,
    m_star: pl.DataFrame,
    n_boot: int,
    ci: float,
    symmetries: Mapping[str, frozenset[str] | None] | None = None,
    budget_rows: pl.DataFrame | None = None,
    target_error: float = 0.05,
) -> pl.DataFrame:
    """S1-S4 in each (n, k, d) group.

    Args:
        trials: the run's trial rows (as :func:`stats.symmetry.verdicts` takes them).
        m_star: :func:`stats.symmetry.critical_sample_sizes` of those rows.
        symmetries, budget_rows, target_error: as :func:`stats.symmetry.verdicts` takes them
            (the budget check's rows of every group; each group reads its own).

    Returns:
        One row per (group, claim): ``n``, ``k``, ``d``, ``claim`` (S1..S4), ``verdict``,
        ``statistic``, ``interval``, ``why``, ``numbers`` (the verdict's numbers as JSON
        text), ``flags`` (the distinct flags of the cells it used, ``; ``-joined, "" when
        none); sorted by d, n, k and claim.
    """
    rows = []
    for n, k, d in groups(trials):
        sel = _in_group(n, k, d)
        budget = budget_rows.filter(sel) if budget_rows is not None and not budget_rows.is_empty() else None
        for v in verdicts(trials.filter(sel), m_star.filter(sel), n_boot, ci, symmetries, budget, target_error):
            numbers = v["series"][0]["numbers"] if v["series"] else {}
            rows.append(
                dict(
                    n=n,
                    k=k,
                    d=d,
                    claim=v["id"],
                    verdict=v["verdict"],
                    statistic=v["statistic"],
                    interval=v["interval"],
                    why=v["why"],
                    numbers=json.dumps(jsonable(numbers)),
                    flags="; ".join(dict.fromkeys(f["flag"] for f in v["flags"])),
                )
            )
    schema = dict(
        n=pl.Int64,
        k=pl.Int64,
        d=pl.Int64,
        claim=pl.String,
        verdict=pl.String,
        statistic=pl.String,
        interval=pl.String,
        why=pl.String,
        numbers=pl.String,
        flags=pl.String,
    )
    return pl.DataFrame(rows, schema=schema)


def overall_verdicts(table: pl.DataFrame, texts: dict[str, str]) -> list[Verdict]:
    """S1-S4 across all groups of :func:`group_verdicts`: supported when supported in every
    group, not supported when not supported in any, not tested when tested in none, else
    inconclusive (a claim about every size holds only where it holds at each size tried).

    Args:
        texts: each claim's full text by its short name (``S1`` -> ``S1: ...``).

    Returns:
        Verdict dicts of :mod:`stats.boolean_verdicts`; ``series`` holds one entry per group
        (``cells``: ``{"d", "n", "k"}``), with that group's verdict and numbers.
    """
    out = []
    for claim in CLAIMS:
        part = table.filter(pl.col("claim") == claim)
        counts = {
            v: part.filter(pl.col("verdict") == v).height for v in (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED)
        }
        total = part.height
        if total and counts[SUPPORTED] == total:
            verdict = SUPPORTED
        elif counts[NOT_SUPPORTED]:
            verdict = NOT_SUPPORTED
        elif counts[NOT_TESTED] == total:
            verdict = NOT_TESTED
        else:
            verdict = INCONCLUSIVE
        others = [
            f"{_group_name(r)}: {r['verdict']}"
            for r in part.filter(pl.col("verdict") != SUPPORTED).iter_rows(named=True)
        ]
        statistic = f"supported in {counts[SUPPORTED]} of {total} (d, n, k) groups" + (
            f" ({'; '.join(others)})" if others else ""
        )
        along = by_d(part, claim)
        if along is not None:
            statistic += f"; {along['text']}"
        series = [
            dict(
                cells=dict(d=r["d"], n=r["n"], k=r["k"]),
                verdict=r["verdict"],
                statistic=r["statistic"],
                interval=r["interval"],
                why=r["why"],
                numbers=json.loads(r["numbers"]),
            )
            for r in part.iter_rows(named=True)
        ]
        out.append(
            Verdict(
                id=claim,
                claim=f"{texts[claim]}, in every (d, n, k) group",
                statistic=statistic,
                interval="each group's interval in the per-group table",
                verdict=verdict,
                why="supported when every group supports it; not supported as soon as one group does not; "
                "otherwise inconclusive (not tested when no group tests it); each group's own why is "
                "in its series"
                + ("; beside the rule's verdict, the statistic says what the groups show along d" if along else ""),
                series=series,
                not_judged=[],
                flags=[],
            )
        )
    return out


BY_D = {
    "S3": "the generic transformer's O(d) equivariance error falls with m",
    "S4": "its permutation equivariance error falls with m",
}
"""The claims whose groups :func:`by_d` describes along d, with what a supported group shows
(S3 and S4: whether learning a symmetry from data gets harder as d grows is the question the
groups at larger d leave open)."""


def by_d(part: pl.DataFrame, claim: str) -> dict | None:
    """What the groups of one claim show along d, beside the rule's verdict across groups:
    the largest d up to which every group supports it, and what the groups above it are.

    Args:
        part: the claim's rows of :func:`group_verdicts` (``d``, ``n``, ``k``, ``verdict``,
            ``flags``; a ``run`` column, where present, counts groups of several runs apart).
        claim: ``S3`` or ``S4`` (:data:`BY_D`); any other gives None.

    Returns:
        None where the claim is not one of :data:`BY_D`, every group supports it (the verdict
        says so), no group is tested, or the groups at the smallest d do not all support it;
        else ``d_max`` (every group with d <= d_max supports it), ``groups`` (how many such
        groups), ``total`` (groups tested), ``above`` (the other tested groups: ``d``, ``n``,
        ``k``, ``verdict``, ``out_of_epochs``), ``text``, e.g. "the generic transformer's
        O(d) equivariance error falls with m (supported) in every group with d ≤ 16 (7 of 9
        groups); above it: inconclusive at d = 32, 64 (...)", and ``short``, the same for the
        README's bottom line, e.g. "it falls in every group with d ≤ 16, 7 of 9 groups;
        inconclusive at d = 32, 64, where the trials ran out of epochs".
    """
    if claim not in BY_D or part.is_empty():
        return None
    tested = part.filter(pl.col("verdict") != NOT_TESTED)
    if tested.is_empty() or (tested["verdict"] == SUPPORTED).all():
        return None
    ds = sorted(tested["d"].unique().to_list())
    d_max = None
    for d in ds:
        if not (tested.filter(pl.col("d") == d)["verdict"] == SUPPORTED).all():
            break
        d_max = d
    if d_max is None:
        return None
    below = tested.filter(pl.col("d") <= d_max)
    rest = tested.filter(pl.col("d") > d_max).sort("d", "n", "k")
    runs = tested["run"].n_unique() if "run" in tested.columns else 1
    above = [
        dict(
            d=r["d"],
            n=r["n"],
            k=r["k"],
            verdict=r["verdict"],
            out_of_epochs=any(f in (r.get("flags") or "") for f in ("out-of-epochs", "budget-limited")),
        )
        for r in rest.iter_rows(named=True)
    ]
    clauses, shorts = [], []
    for verdict in (NOT_SUPPORTED, INCONCLUSIVE, SUPPORTED):
        these = [a for a in above if a["verdict"] == verdict]
        if not these:
            continue
        at = ", ".join(str(d) for d in dict.fromkeys(a["d"] for a in these))
        reason = (
            " (the generic transformer's trials there ran out of epochs before fitting their training sets, so "
            "its error measures the training budget as much as the samples)"
            if verdict == INCONCLUSIVE and all(a["out_of_epochs"] for a in these)
            else ""
        )
        clauses.append(f"{verdict} at d = {at}{reason}")
        shorts.append(f"{verdict} at d = {at}" + (", where the trials ran out of epochs" if reason else ""))
    of_runs = f" over {runs} runs" if runs > 1 else ""
    count = f"{below.height} of {tested.height} groups{of_runs}"
    text = f"{BY_D[claim]} (supported) in every group with d ≤ {d_max} ({count})" + (
        f"; above it: {'; '.join(clauses)}" if clauses else ""
    )
    short = f"it falls in every group with d ≤ {d_max}, {count}" + (f"; {', '.join(shorts)}" if shorts else "")
    return dict(d_max=d_max, groups=below.height, total=tested.height, above=above, text=text, short=short)


def advantage(m_star: pl.DataFrame, replicates: dict[tuple, np.ndarray], ci: float, seed: int = 0) -> pl.DataFrame:
    """S2's advantage per group and generic student, on the equivariant teacher.

    Args:
        m_star: :func:`stats.symmetry.critical_sample_sizes` (its bracketed intervals).
        replicates: the ``(n_boot,)`` bootstrap m* of each cell (+inf: beyond the grid),
            keyed by its :data:`stats.symmetry.CELL` values, as critical_sample_sizes returns them.

    Returns:
        One row per (group, student in :data:`COMPARED`): ``n``, ``k``, ``d``, ``student``,
        ``m_star`` (the student's), ``m_star_baseline`` (each a bound's value where it is one,
        as ``m_star_bound`` and ``baseline_bound`` say, with their intervals ``m_star_lo``,
        ``m_star_hi``, ``baseline_lo``, ``baseline_hi``), ``m_star_text`` and
        ``baseline_text`` (as tables write them, e.g. ``> 256``, ``≤ 1``), ``ratio`` (NaN where there is none),
        ``bound`` (``exact``; ``lower`` or ``upper``: the ratio is at least or at most ``ratio``;
        ``none``: no number),
        ``ci_lo``, ``ci_hi`` (percentile interval of the paired replicates' ratio; NaN when
        there are no replicates), ``text`` (e.g. ``38.2 (29.1 .. 51.0)`` or ``> 256``),
        ``baseline_floor`` (the inner-product m* is the floor 1) and ``baseline_m_max`` (the
        largest m its search tried).
    """
    return _advantage(m_star, replicates, ci, seed)[0]


def _advantage(
    m_star: pl.DataFrame, replicates: dict[tuple, np.ndarray], ci: float, seed: int
) -> tuple[pl.DataFrame, dict[tuple, np.ndarray]]:
    """:func:`advantage` and the ``(R,)`` paired replicates of each of its rows' ratio, keyed
    by ``(n, k, d, student)``."""
    eq = m_star.filter(pl.col("teacher") == "equivariant")
    rows, reps = [], {}
    for n, k, d in [tuple(r) for r in eq.select(GROUP).unique().sort(["d", "n", "k"]).iter_rows()]:
        sel = eq.filter(_in_group(n, k, d))
        base = sel.filter(pl.col("student") == BASELINE)
        if base.is_empty():
            continue
        b = base.row(0, named=True)
        for student in COMPARED:
            other = sel.filter(pl.col("student") == student)
            if other.is_empty():
                continue
            o = other.row(0, named=True)
            ratio, bound = _ratio(o, b)
            lo = hi = math.nan
            r = _paired(o, b, replicates, seed)
            if r is not None:
                reps[(n, k, d, student)] = r
                if bound != "none":
                    lo, hi = percentile_interval(r, ci)
                    # Never narrower than the two m* intervals allow: the ratio of their ends
                    # (with an inner-product m* of exactly 1, the advantage's interval is then
                    # at least the generic m*'s own).
                    with np.errstate(divide="ignore", invalid="ignore"):
                        lo = min(lo, o["ci_lo"] / b["ci_hi"]) if o["ci_lo"] == o["ci_lo"] else lo
                        hi = max(hi, o["ci_hi"] / b["ci_lo"]) if o["ci_hi"] == o["ci_hi"] else hi
            rows.append(
                dict(
                    n=n,
                    k=k,
                    d=d,
                    student=student,
                    m_star=_finite(o),
                    m_star_baseline=_finite(b),
                    m_star_bound=o["bound"],
                    baseline_bound=b["bound"],
                    m_star_lo=o["ci_lo"],
                    m_star_hi=o["ci_hi"],
                    baseline_lo=b["ci_lo"],
                    baseline_hi=b["ci_hi"],
                    m_star_text=_m_text(o),
                    baseline_text=_m_text(b),
                    ratio=ratio,
                    bound=bound,
                    ci_lo=lo,
                    ci_hi=hi,
                    text=_ratio_text(ratio, bound, lo, hi),
                    baseline_floor=_at_floor(b),
                    baseline_m_max=b.get("m_max"),
                )
            )
    schema = dict(
        n=pl.Int64,
        k=pl.Int64,
        d=pl.Int64,
        student=pl.String,
        m_star=pl.Float64,
        m_star_baseline=pl.Float64,
        m_star_bound=pl.String,
        baseline_bound=pl.String,
        m_star_lo=pl.Float64,
        m_star_hi=pl.Float64,
        baseline_lo=pl.Float64,
        baseline_hi=pl.Float64,
        m_star_text=pl.String,
        baseline_text=pl.String,
        ratio=pl.Float64,
        bound=pl.String,
        ci_lo=pl.Float64,
        ci_hi=pl.Float64,
        text=pl.String,
        baseline_floor=pl.Boolean,
        baseline_m_max=pl.Int64,
    )
    return pl.DataFrame(rows, schema=schema), reps


def _at_floor(b: dict) -> bool:
    """Whether the inner-product m* is the floor m = 1: it succeeded at the smallest m there is,
    so the advantage's denominator is that floor, not a measured need above it."""
    return b["bound"] == "exact" and b["m_star"] is not None and float(b["m_star"]) <= 1.0 and b.get("m_min") == 1


def advantage_slopes(
    m_star: pl.DataFrame, replicates: dict[tuple, np.ndarray], ci: float, seed: int = 0
) -> pl.DataFrame:
    """How S2's advantage changes along each axis: advantage ~ axis^slope along each line.

    The slope is the OLS slope of ln advantage on ln axis, ``w . y`` with weights ``w`` that sum
    to 0. Its interval is the hull of two (docs/claims.md 1b, 2):

    * the cells' own: each advantage may lie anywhere its two cells' published m* intervals
      allow (``ci_lo``/``ci_hi`` of stats/critical.py, the hull of bootstrap, grid bracket and
      profile likelihood), from (generic lo / baseline hi) to (generic hi / baseline lo); the
      slope's extremes take each end where its weight pushes the slope down, or up: lo =
      sum over w_i > 0 of w_i ln adv_lo_i plus over w_i < 0 of w_i ln adv_hi_i, and hi the other
      way round. Between two values this is (ln adv_lo_2 - ln adv_hi_1) / (ln a_2 - ln a_1) ..
      (ln adv_hi_2 - ln adv_lo_1) / (ln a_2 - ln a_1);
    * the paired bootstrap's: the percentile interval of the slope over the cells' replicates.

    The seed bootstrap alone covers a cell's m* in 58-90% of simulated cells at 4-8 seeds
    (docs/claims.md 2, "bootstrap alone"), so it alone would make slopes look better separated
    than the published m* intervals allow.

    Returns:
        One row per (student, axis, line): ``student``, ``axis``, ``fixed`` (the other two
        sizes, e.g. ``n=6, k=4``), ``values`` (the axis values used), ``slope``, ``ci_lo``,
        ``ci_hi`` (the hull above), ``censored_share`` (fraction of replicates in which a used cell's m* was
        beyond the grid; their slope is +-inf and counts as such in the percentiles),
        ``left_out`` (the axis values whose advantage is a bound or none, not a number); lines with
        fewer than two usable values give a NaN slope and say so in ``left_out``;
        ``local_json`` (over 3+ values: each neighbouring pair's slope with its interval, the
        hull above: ``from``, ``to``, ``slope``, ``ci_lo``, ``ci_hi``, and its two parts
        ``cells_lo``, ``cells_hi``, ``bootstrap_lo``, ``bootstrap_hi``), ``lack_of_fit`` (two local
        intervals do not overlap: one power law misstates the line, so the local slopes are
        the statistic) and ``floor`` (every denominator of the line is the floor m* = 1).
    """
    adv, paired = _advantage(m_star, replicates, ci, seed)
    rows = []
    for student in COMPARED:
        part = adv.filter(pl.col("student") == student)
        for axis in AXES:
            rest = [a for a in AXES if a != axis]
            for key, line in part.group_by(rest, maintain_order=True):
                if line[axis].n_unique() < 2:
                    continue
                line = line.sort(axis)
                used = line.filter(pl.col("bound") == "exact")
                left = line.filter(pl.col("bound") != "exact")
                fixed = ", ".join(f"{a}={v}" for a, v in zip(rest, key, strict=True))
                left_out = [_left_out(r, axis, used) for r in left.iter_rows(named=True)]
                row = dict(
                    student=student,
                    axis=axis,
                    fixed=fixed,
                    values=", ".join(str(v) for v in used[axis]),
                    slope=math.nan,
                    ci_lo=math.nan,
                    ci_hi=math.nan,
                    censored_share=math.nan,
                    left_out="; ".join(x["text"] for x in left_out),
                    left_out_json=json.dumps(left_out),
                    local_json="[]",
                    lack_of_fit=False,
                    floor=bool(used.height) and bool((used["baseline_floor"]).all()),
                )
                if used.height >= 2:
                    x = np.log(used[axis].to_numpy().astype(float))
                    w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)  # slope = w . y
                    y = np.log(used["ratio"].to_numpy())
                    row["slope"] = float(w @ y)
                    ends = _advantage_ends(used)  # (2, cells): ln of each advantage's lowest and highest
                    interval = _extremes(w, ends)
                    keys = [(r["n"], r["k"], r["d"], student) for r in used.iter_rows(named=True)]
                    logs = None
                    if all(key in paired for key in keys):
                        reps = np.stack([paired[key] for key in keys], 1)  # (R, cells)
                        with np.errstate(divide="ignore", invalid="ignore"):
                            logs = np.log(reps)  # (R, cells); +inf where a cell's m* is beyond the grid
                            # +-inf by the sign of the censored cell's weight; NaN where two cancel.
                            s = (logs * w).sum(1)
                        interval = _hull(interval, percentile_interval(s, ci))
                        row["censored_share"] = float(np.mean(~np.isfinite(logs).all(1)))
                    row["ci_lo"], row["ci_hi"] = interval
                    if used.height >= 3:
                        local = _local_slopes(used[axis].to_numpy().astype(float), y, logs, ci, ends)
                        row["local_json"] = json.dumps(local)
                        row["lack_of_fit"] = _disagree(local)
                elif not row["left_out"]:
                    row["left_out"] = "fewer than two values"
                rows.append(row)
    schema = dict(
        student=pl.String,
        axis=pl.String,
        fixed=pl.String,
        values=pl.String,
        slope=pl.Float64,
        ci_lo=pl.Float64,
        ci_hi=pl.Float64,
        censored_share=pl.Float64,
        left_out=pl.String,
        left_out_json=pl.String,
        local_json=pl.String,
        lack_of_fit=pl.Boolean,
        floor=pl.Boolean,
    )
    return pl.DataFrame(rows, schema=schema)


def _local_slopes(
    x: np.ndarray, y: np.ndarray, logs: np.ndarray | None, ci: float, ends: np.ndarray | None = None
) -> list[dict]:
    """The slope between each two neighbouring values of a line, with its interval: the hull
    of the extremes the two advantages' intervals allow and the paired bootstrap's percentile
    interval (:func:`advantage_slopes`).

    Args:
        x: ``(n,)`` the axis values (ascending); y: ``(n,)`` ln advantage at them;
        logs: ``(R, n)`` ln advantage in the paired replicates (None: no replicates);
        ends: ``(2, n)`` ln of each advantage's lowest and highest value its cells' m*
            intervals allow (:func:`_advantage_ends`; None: not known).

    Returns:
        One dict per neighbouring pair: ``from``, ``to``, ``slope``, ``ci_lo``, ``ci_hi`` (the
        hull), ``cells_lo``, ``cells_hi`` (from the cells' intervals; NaN where unknown) and
        ``bootstrap_lo``, ``bootstrap_hi`` (the replicates'; NaN without them).
    """
    out = []
    for i in range(len(x) - 1):
        dx = math.log(x[i + 1]) - math.log(x[i])
        cells = (math.nan, math.nan)
        if ends is not None:
            cells = _extremes(np.array([-1.0 / dx, 1.0 / dx]), ends[:, i : i + 2])
        boot = (math.nan, math.nan)
        if logs is not None:
            with np.errstate(invalid="ignore"):
                boot = percentile_interval((logs[:, i + 1] - logs[:, i]) / dx, ci)
        lo, hi = _hull(cells, boot)
        out.append(
            {
                "from": int(x[i]),
                "to": int(x[i + 1]),
                "slope": float((y[i + 1] - y[i]) / dx),
                "ci_lo": float(lo),
                "ci_hi": float(hi),
                "cells_lo": float(cells[0]),
                "cells_hi": float(cells[1]),
                "bootstrap_lo": float(boot[0]),
                "bootstrap_hi": float(boot[1]),
            }
        )
    return out


def _advantage_ends(used: pl.DataFrame) -> np.ndarray:
    """``(2, cells)``: ln of the lowest and the highest advantage each row of :func:`advantage`
    may have given its two cells' m* intervals: ln(generic lo / baseline hi) and ln(generic hi
    / baseline lo) (NaN where an interval is unknown, +inf where the generic's is open)."""
    o_lo, o_hi = used["m_star_lo"].to_numpy(), used["m_star_hi"].to_numpy()
    b_lo, b_hi = used["baseline_lo"].to_numpy(), used["baseline_hi"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.stack([o_lo / b_hi, o_hi / b_lo]).astype(float))


def _extremes(w: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
    """The least and the largest ``w . y`` over every y between ``ends[0]`` and ``ends[1]``:
    each y_i at the end its weight makes smallest, then largest; a weight of (numerically) zero
    leaves its value out. NaN where an end it needs is unknown."""
    w = np.where(np.abs(w) <= 1e-12 * np.abs(w).max(), 0.0, w)
    lo_end = np.where(w > 0, ends[0], ends[1])
    hi_end = np.where(w > 0, ends[1], ends[0])
    used = w != 0
    with np.errstate(invalid="ignore"):
        lo = float(np.sum(w[used] * lo_end[used]))
        hi = float(np.sum(w[used] * hi_end[used]))
    return lo, hi


def _hull(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """The smallest interval holding both ``a`` and ``b``; one with a NaN end counts as absent."""
    parts = [p for p in (a, b) if not (math.isnan(p[0]) or math.isnan(p[1]))]
    if not parts:
        return math.nan, math.nan
    return min(p[0] for p in parts), max(p[1] for p in parts)


def _disagree(local: list[dict]) -> bool:
    """Lack of fit of one power law: two local slopes whose intervals (the hull of the cells'
    extremes and the bootstrap's, :func:`_local_slopes`) do not overlap: no single exponent lies
    in both, so a single slope would misstate the line. Intervals that overlap keep one slope."""
    for i, a in enumerate(local):
        for b in local[i + 1 :]:
            if a["ci_hi"] < b["ci_lo"] or b["ci_hi"] < a["ci_lo"]:
                return True
    return False


def _left_out(r: dict, axis: str, used: pl.DataFrame) -> dict:
    """A group left out of a slope (its advantage a bound, or no number), with the slope its
    bound implies from the nearest group whose advantage is a number: a lower bound beyond it
    (or an upper bound before it) bounds the local slope from below, and the other way round
    from above."""
    out = dict(
        value=r[axis],
        bound=r["bound"],
        advantage=None if math.isnan(r["ratio"]) else r["ratio"],
        slope_bound=None,
        slope_from=None,
        text=f"{axis}={r[axis]}: {r['text']}",
    )
    if r["bound"] in ("lower", "upper") and not used.is_empty():
        near = used.with_columns(dist=(pl.col(axis).cast(pl.Float64).log() - math.log(r[axis])).abs()).sort("dist")
        ref = near.row(0, named=True)
        with np.errstate(divide="ignore"):
            slope = math.log(r["ratio"] / ref["ratio"]) / math.log(r[axis] / ref[axis])
        above = (r["bound"] == "lower") == (r[axis] > ref[axis])  # which side the slope is bounded on
        out.update(slope_bound="lower" if above else "upper", slope_from=ref[axis], slope=slope)
        out["text"] += f" (a slope {'of at least' if above else 'of at most'} {slope:.2f} from {axis}={ref[axis]})"
    return out


def error_against_m(trials: pl.DataFrame, n_boot: int, ci: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """E of the generic transformer on the equivariant teacher against m, per group.

    Returns:
        ``(slopes, medians)``: ``slopes`` one row per group: ``n``, ``k``, ``d``, ``slope``
        (of log10 E on log10 m), ``ci_lo``, ``ci_hi``, ``m_min``, ``m_max``; ``medians`` one
        row per (group, m): ``n``, ``k``, ``d``, ``m``, ``trials``, ``E`` (median over seeds of
        each trial's median float64 error), ``E_lo``, ``E_hi`` (the quartiles).
    """
    rows = (
        with_student(trials)
        .filter((pl.col("status") == "done") & (pl.col("student") == GENERIC) & (pl.col("teacher") == "equivariant"))
        .collect()
    )
    out = []
    for n, k, d in groups(rows) if not rows.is_empty() else []:
        part = rows.filter(_in_group(n, k, d))
        b, lo, hi = log_slope(part, "eq_error_median", n_boot, ci)
        out.append(
            dict(
                n=n,
                k=k,
                d=d,
                slope=b,
                ci_lo=lo,
                ci_hi=hi,
                m_min=int(part["m"].min()),
                m_max=int(part["m"].max()),
            )
        )
    slopes = pl.DataFrame(
        out,
        schema=dict(
            n=pl.Int64,
            k=pl.Int64,
            d=pl.Int64,
            slope=pl.Float64,
            ci_lo=pl.Float64,
            ci_hi=pl.Float64,
            m_min=pl.Int64,
            m_max=pl.Int64,
        ),
    )
    e = pl.col("eq_error_median")
    medians = (
        rows.group_by(*GROUP, "m")
        .agg(
            trials=pl.len(),
            E=e.median(),
            E_lo=e.quantile(0.25, "linear"),
            E_hi=e.quantile(0.75, "linear"),
        )
        .sort("d", "n", "k", "m")
    )
    return slopes, medians


def center(trials: pl.DataFrame) -> dict[str, int]:
    """The sizes the blocks share: per axis, the value in the most groups (the smallest on
    a tie); for a one-axis-at-a-time design, the point the lines cross."""
    g = pl.DataFrame(groups(trials), schema=GROUP, orient="row")
    return {a: int(g.group_by(a).len().sort(["len", a], descending=[True, False])[a][0]) for a in AXES}


def _ratio(o: dict, b: dict) -> tuple[float, str]:
    """The advantage of cell ``o`` over baseline ``b`` (their m* values, each a bound's value
    where it is one) and its bound (:func:`stats.verdict_common.ratio_bound`)."""
    bound = ratio_bound(o["bound"], b["bound"])
    if bound == "none":
        return math.nan, "none"
    return o["m_star"] / b["m_star"], bound


def _ratio_text(ratio: float, bound: str, lo: float, hi: float) -> str:
    if bound == "none":
        return "no number"
    if bound == "lower":
        return f"> {ratio:.3g}"
    if bound == "upper":
        return f"≤ {ratio:.3g}"
    interval = "" if math.isnan(lo) else f" ({lo:.3g} .. {'inf' if math.isinf(hi) else f'{hi:.3g}'})"
    return f"{ratio:.3g}{interval}"


def _m_text(r: dict) -> str:
    return format_m_star(r["m_star"], r["bound"])


def _finite(r: dict) -> float:
    return math.nan if r["m_star"] is None else float(r["m_star"])


def _replicates(r: dict, replicates: dict[tuple, np.ndarray]) -> np.ndarray | None:
    return replicates.get(tuple(r[c] for c in CELL))


def _paired(o: dict, b: dict, replicates: dict, seed: int) -> np.ndarray | None:
    """``(R,)`` replicates of cell o's m* over baseline b's, each cell's widened by :func:`_widen`."""
    ro, rb = _replicates(o, replicates), _replicates(b, replicates)
    if ro is None or rb is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        return _widen(o, ro, seed) / _widen(b, rb, seed)


def _widen(cell: dict, reps: np.ndarray, seed: int) -> np.ndarray:
    """A bracketed cell's replicates redrawn log-uniformly in its bracket; others as they are."""
    finite = reps[np.isfinite(reps)]
    if (
        cell["bound"] != "exact"
        or finite.size != reps.size
        or np.ptp(reps) > 1e-9 * abs(reps[0])
        or not cell["ci_hi"] > cell["ci_lo"]
    ):
        return reps
    rng = np.random.default_rng([seed, _cell_hash(tuple(cell[c] for c in CELL))])
    return np.exp(rng.uniform(math.log(cell["ci_lo"]), math.log(cell["ci_hi"]), reps.size))


def _in_group(n: int, k: int, d: int) -> pl.Expr:
    return (pl.col("n") == n) & (pl.col("k") == k) & (pl.col("d") == d)


def _group_name(r: dict) -> str:
    return f"d={r['d']}, n={r['n']}, k={r['k']}"
