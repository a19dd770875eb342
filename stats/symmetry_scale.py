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
  is the percentile interval of the slope over the paired replicates.
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
from attnsweep.stats.symmetry import CELL, log_slope, verdicts, with_student
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
BASELINE = "inner-product"
COMPARED = ("transformer", "transformer + rotations")
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
) -> pl.DataFrame:
    """S1-S4 in each (n, k, d) group.

    Args:
        trials: the run's trial rows (as :func:`stats.symmetry.verdicts` takes them).
        m_star: :func:`stats.symmetry.critical_sample_sizes` of those rows.
        symmetries: each teacher's symmetries, as :func:`stats.symmetry.verdicts` takes them.

    Returns:
        One row per (group, claim): ``n``, ``k``, ``d``, ``claim`` (S1..S4), ``verdict``,
        ``statistic``, ``interval``, ``why``, ``numbers`` (the verdict's numbers as JSON
        text); sorted by d, n, k and claim.
    """
    import json

    rows = []
    for n, k, d in groups(trials):
        sel = _in_group(n, k, d)
        for v in verdicts(trials.filter(sel), m_star.filter(sel), n_boot, ci, symmetries):
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
    import json

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
                "in its series",
                series=series,
                not_judged=[],
                flags=[],
            )
        )
    return out


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

    Returns:
        One row per (student, axis, line): ``student``, ``axis``, ``fixed`` (the other two
        sizes, e.g. ``n=6, k=4``), ``values`` (the axis values used), ``slope``, ``ci_lo``,
        ``ci_hi``, ``censored_share`` (fraction of replicates in which a used cell's m* was
        beyond the grid; their slope is +-inf and counts as such in the percentiles),
        ``left_out`` (the axis values whose advantage is a bound or none, not a number); lines with
        fewer than two usable values give a NaN slope and say so in ``left_out``;
        ``local_json`` (over 3+ values: each neighbouring pair's slope with its paired-bootstrap
        interval, ``from``, ``to``, ``slope``, ``ci_lo``, ``ci_hi``), ``lack_of_fit`` (two local
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
                    keys = [(r["n"], r["k"], r["d"], student) for r in used.iter_rows(named=True)]
                    if all(key in paired for key in keys):
                        reps = np.stack([paired[key] for key in keys], 1)  # (R, cells)
                        with np.errstate(divide="ignore", invalid="ignore"):
                            logs = np.log(reps)  # (R, cells); +inf where a cell's m* is beyond the grid
                            # +-inf by the sign of the censored cell's weight; NaN where two cancel.
                            s = (logs * w).sum(1)
                        row["ci_lo"], row["ci_hi"] = percentile_interval(s, ci)
                        row["censored_share"] = float(np.mean(~np.isfinite(logs).all(1)))
                        if used.height >= 3:
                            local = _local_slopes(used[axis].to_numpy().astype(float), y, logs, ci)
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


def _local_slopes(x: np.ndarray, y: np.ndarray, logs: np.ndarray, ci: float) -> list[dict]:
    """The slope between each two neighbouring values of a line, with its interval.

    Args:
        x: ``(n,)`` the axis values (ascending); y: ``(n,)`` ln advantage at them;
        logs: ``(R, n)`` ln advantage in the paired replicates.

    Returns:
        One dict per neighbouring pair: ``from``, ``to``, ``slope``, ``ci_lo``, ``ci_hi``.
    """
    out = []
    for i in range(len(x) - 1):
        dx = math.log(x[i + 1]) - math.log(x[i])
        with np.errstate(invalid="ignore"):
            reps = (logs[:, i + 1] - logs[:, i]) / dx
        lo, hi = percentile_interval(reps, ci)
        out.append(
            {
                "from": int(x[i]),
                "to": int(x[i + 1]),
                "slope": float((y[i + 1] - y[i]) / dx),
                "ci_lo": float(lo),
                "ci_hi": float(hi),
            }
        )
    return out


def _disagree(local: list[dict]) -> bool:
    """Lack of fit of one power law: two local slopes whose intervals do not overlap (each
    interval is one slope's; intervals that miss each other mean no single exponent lies in
    both, so a single slope would misstate the line)."""
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
        .filter(
            (pl.col("status") == "done") & (pl.col("student") == "transformer") & (pl.col("teacher") == "equivariant")
        )
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
