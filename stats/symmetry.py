"""Verdicts S1-S4 of the symmetry experiment (docs/claims.md 1b; Ma & Ying, arXiv 2210.06741).

Input: the trial rows of a symmetry run (columns ``teacher``, ``model``, ``equivariance``,
``n``, ``k``, ``d``, ``m``, ``seed``, ``status``, ``test_error``, ``train_error``,
``converged``, ``eq_error_median``, ``eq_error_max``, ``perm_error_median``). A *student* is
(model, equivariance): ``inner-product`` (equivariance ``orthogonal``),
``transformer``/``mlp`` (``none``), the same ``+ rotations`` (``augment``) and
``transformer, no positions`` (``permutation``).

* S1: the inner-product student is exactly O(d)-equivariant: the largest float64 error E
  over all its trials is below ``ROUNDOFF`` (1e-10), and the generic transformer's median E
  on the equivariant teacher at the smallest m is at least ``GAP`` (1e4) times larger
  (bootstrap CI over its trials).
* S2: on the equivariant teacher the inner-product student's m* (stats/critical.py, with
  success = relative test error <= target, and its bounds) lies below the generic
  transformer's and the MLP's: supported when its interval lies below each of theirs (a
  lower bound's interval starts at the bound) and the grid m* are ordered the same way; not
  supported when, for some student, it lies at or above; inconclusive when the intervals
  overlap or a number is missing. On the control teacher it must not win (no student's
  interval lies above its own): never reaching the target at any m tried is no win (a lower
  bound), and so is an m* the out-of-epochs rule leaves unknown where the student *cannot
  represent* the teacher (:func:`representation`): its median training error over seeds is
  at least ``NO_FIT_FACTOR`` times the target at every m tried, and more training does not
  bring it down: where the budget check ran (rows at twice the epochs), the median training
  error there is at least ``NO_PROGRESS`` of its value at the spec's epochs at every m both
  tried; where it did not, the training error does not fall as m grows (the seed-bootstrap
  interval of its log-log slope on m lies above -``EFFECT_SLOPE``). The verdict's why names
  the evidence used (docs/claims.md 1b and 2).
  A teacher a package adds (tasks/teachers.py) joins a side by its symmetries
  (:func:`s2_sides`): both, as ``equivariant``; permutations alone, as ``control``.
* S3: the generic transformer's E falls as m grows: the OLS slope of log10 E on log10 m,
  with a bootstrap CI over seeds, lies below -``EFFECT_SLOPE`` (E falls by at least a
  factor 1.12 per tenfold m; stats/verdict_common.py); not supported when the interval lies
  above it (flat or rising).
* S4: the same for the permutation error of the generic transformer with positions, on
  the equivariant teacher (which is permutation-equivariant).

Each verdict is a dict as :mod:`stats.boolean_verdicts` describes (``id``, ``claim``,
``verdict``, ``statistic``, ``interval``, ``why``, ``series`` with ``numbers``,
``not_judged``, ``flags``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from attnsweep.stats import critical
from attnsweep.stats.critical import format_m_star, resolve_bounds
from attnsweep.stats.verdict_common import (
    EFFECT_SLOPE,
    INCONCLUSIVE,
    NOT_SUPPORTED,
    NOT_TESTED,
    SUPPORTED,
    Flag,
    Quantity,
    Series,
    Verdict,
    number,
    quantity,
    split_flags,
    whole,
)

ROUNDOFF = 1e-10
GAP = 1e4
CELL = ["teacher", "student", "n", "k", "d"]
# The students S1-S4 compare (Ma & Ying, 2022): the student registry's built-in transformer and
# MLP (workers/builtin_students.py; tests/workers/test_student_registry.py holds them to agree),
# and the label of equivariance 'orthogonal', the inner-product student whatever the model.
GENERIC, GENERIC_MLP, INNER_PRODUCT = "transformer", "mlp", "inner-product"
NO_FIT_FACTOR = 2.0
"""S2's control half: a student *cannot represent* a teacher only if its median training error
over seeds is at least this multiple of the target at every m tried, the smallest included
(:func:`representation`). A trial succeeds at a test error at or below the target, and its test
error is no lower than its training error in expectation; a training error just above the
target is what a trial looks like that ran out of epochs shortly before fitting (docs/claims.md
2, ``out-of-epochs``), while at twice the target the typical seed misses its own training set
by the whole target again, at every training-set size, the smallest ones included, which a
student that can represent the teacher fits within the budget (the generic students of the
published runs fit m = 1 to 1e-7)."""
NO_PROGRESS = 0.9
"""The budget check's evidence for "cannot represent": at twice the epochs the median training
error at an m is at least this fraction of its value at the spec's epochs (it fell by less than
10%). Doubling the budget of a student that was still fitting lowers it by far more (the
published symmetry-d run: the generic transformer at d = 32, m = 512, 0.131 to 0.073 at 4000
epochs; the same with rotated samples, which does not fit at width 32, 0.2539 to 0.2538)."""
OUT_OF_EPOCHS = ("budget-limited", "out-of-epochs")  # the flags of a cell whose trials ran out of epochs


def pooled_settings(trials: pl.LazyFrame | pl.DataFrame, settings: list[str]) -> dict[str, list]:
    """The ``settings`` (trial config fields other than the :data:`CELL` axes, m and seed)
    that take more than one value among ``trials``: a symmetry cell is keyed by
    :data:`CELL` alone, so its m* and errors would pool those values.

    Args:
        trials: the rows m* is computed from (the budget check's doubled epochs excluded).

    Returns:
        Each such setting with its sorted distinct values; empty when none varies.
    """
    frame = trials.lazy()
    names = [c for c in settings if c in frame.collect_schema().names() and c not in CELL]
    if not names:
        return {}
    counts = frame.select(pl.col(c).n_unique() for c in names).collect().row(0, named=True)
    varying = [c for c in names if counts[c] > 1]
    if not varying:
        return {}
    values = frame.select(varying).unique().collect()
    return {
        c: sorted(values[c].unique().to_list(), key=lambda v: (v is None, str(v) if v is None else v)) for c in varying
    }


def with_student(trials: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Add the ``student`` label column."""
    eq, model = pl.col("equivariance"), pl.col("model")
    return trials.lazy().with_columns(
        student=pl.when(eq == "orthogonal")
        .then(pl.lit(INNER_PRODUCT))
        .when(eq == "permutation")
        .then(model + pl.lit(", no positions"))
        .when(eq == "augment")
        .then(model + pl.lit(" + rotations"))
        .otherwise(model)
    )


def critical_sample_sizes(trials: pl.DataFrame, target_error: float, n_boot: int, ci: float) -> pl.DataFrame:
    """m* of the symmetry experiment, the job :func:`stats.critical.critical_sample_sizes` does for
    the sparse-Boolean one: per (teacher, student, n, k, d) with success = relative test error <= target
    (stats/critical.py: its interval, bound and flags; a trial has fit its training set
    when its training error is at or below the target)."""
    return critical_sample_sizes_and_replicates(trials, target_error, n_boot, ci)[0]


def critical_sample_sizes_and_replicates(
    trials: pl.DataFrame, target_error: float, n_boot: int, ci: float
) -> tuple[pl.DataFrame, dict[tuple, np.ndarray]]:
    """:func:`critical_sample_sizes` and each cell's ``(n_boot,)`` bootstrap m* (+inf: beyond the
    grid), keyed by the tuple of its :data:`CELL` values (stats/critical.py)."""
    labelled = with_student(trials)
    fitted = (pl.col("train_error") <= target_error) if "train_error" in labelled.collect_schema().names() else None
    table, reps = critical.critical_sample_sizes(
        labelled,
        CELL,
        success=pl.col("test_error") <= target_error,
        fitted=fitted,
        n_boot=n_boot,
        ci=ci,
    )
    return table.sort(CELL), reps


def with_budget_check(
    m_star: pl.DataFrame,
    trials: pl.DataFrame,
    budget_rows: pl.DataFrame,
    target_error: float,
    success_frac: float,
) -> pl.DataFrame:
    """The m* table with ``budget``: ``"ok"`` when every m the budget check tried again at
    twice ``max_epochs`` (a cell's deciding m, orchestrator/adaptive.py) has the same outcome
    as with the spec's epochs (success rate over the seeds that trained at or above
    ``success_frac``, or below it), ``"budget-limited"`` when one changed (more training
    moves m*, so m* measured the budget), ``"not checked"`` for a cell the check did not
    reach; bounds and flags resolved again (stats/critical.py, ``resolve_bounds``).

    Args:
        m_star: :func:`critical_sample_sizes` of the search rows.
        trials, budget_rows: the search rows and the budget check's rows (``search_phase``
            ``budget``), with the columns of the module docstring.
    """

    def rates(rows: pl.DataFrame) -> pl.DataFrame:
        ok = (pl.col("status") == "done") & (pl.col("test_error") <= target_error)
        return (
            with_student(rows)
            .filter(pl.col("status").is_in(["done", "diverged"]))
            .group_by(*CELL, "m")
            .agg(rate=ok.mean())
            .collect()
        )

    if budget_rows.is_empty():
        return resolve_bounds(m_star.with_columns(budget=pl.lit("not checked")))
    pairs = rates(budget_rows).join(rates(trials), on=[*CELL, "m"], how="left", suffix="_1x")
    moved = (
        pairs.with_columns(
            changed=(pl.col("rate") >= success_frac) != (pl.col("rate_1x").fill_null(0.0) >= success_frac)
        )
        .group_by(CELL)
        .agg(pl.col("changed").any())
    )
    joined = m_star.drop("budget", strict=False).join(moved, on=CELL, how="left", nulls_equal=True)
    budget = (
        pl.when(pl.col("changed").is_null())
        .then(pl.lit("not checked"))
        .when(pl.col("changed"))
        .then(pl.lit("budget-limited"))
        .otherwise(pl.lit("ok"))
    )
    return resolve_bounds(joined.with_columns(budget=budget).drop("changed"))


def log_slope(
    df: pl.DataFrame, column: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """OLS slope of log10(column) on log10(m) with a bootstrap CI over seeds.

    Args:
        df: rows with ``m``, ``seed`` and ``column`` (> 0; other rows are dropped).

    Returns:
        ``(slope, lo, hi)``; NaNs when fewer than two distinct m remain.
    """
    df = df.filter(pl.col(column).is_not_null() & (pl.col(column) > 0))
    if df["m"].n_unique() < 2:
        return math.nan, math.nan, math.nan
    x, y = np.log10(df["m"].to_numpy().astype(float)), np.log10(df[column].to_numpy())
    seeds, inv = np.unique(df["seed"].to_numpy(), return_inverse=True)
    # Per-seed sufficient statistics, so a replicate's fit is a weighted sum of them.
    stats = np.stack([np.bincount(inv, w, len(seeds)) for w in (np.ones_like(x), x, y, x * x, x * y)], 1)

    def slope(s):  # s (..., 5) -> (...)
        n, sx, sy, sxx, sxy = np.moveaxis(s, -1, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (n * sxy - sx * sy) / (n * sxx - sx * sx)

    point = float(slope(stats.sum(0)))
    if n_boot <= 0:
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(r, minlength=len(seeds)) for r in rng.integers(0, len(seeds), (n_boot, len(seeds)))])
    reps = slope(counts @ stats)
    lo, hi = np.nanpercentile(reps, [50 * (1 - ci), 50 * (1 + ci)])
    return point, float(lo), float(hi)


def _median_ci(values: np.ndarray, n_boot: int, ci: float, seed: int = 0) -> tuple[float, float, float]:
    if len(values) == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    reps = np.median(values[rng.integers(0, len(values), (max(n_boot, 1), len(values)))], axis=1)
    lo, hi = np.percentile(reps, [50 * (1 - ci), 50 * (1 + ci)])
    return float(np.median(values)), float(lo), float(hi)


S2_SIDES = {"equivariant": True, "control": False}
"""The built-in teachers S2 reads: True where the inner-product student should win (the teacher
has both of its symmetries), False where it should not (the control: permutations alone)."""


def s2_sides(symmetries: Mapping[str, frozenset[str] | None] | None) -> dict[str, bool]:
    """Which teachers S2 reads, and on which side, from each teacher's symmetries (tasks/teachers.py
    ``Teacher.symmetries``; the caller reads them, this layer imports no task code): a teacher
    that is orthogonally and permutation equivariant, as the inner-product student is, sides with
    ``equivariant`` (the student should win); one that is permutation equivariant alone sides with
    ``control`` (it should not); any other (``positional``, unknown: None) is read by no claim.
    None: :data:`S2_SIDES`, the built-in teachers."""
    if symmetries is None:
        return dict(S2_SIDES)
    sides = dict(S2_SIDES)
    for teacher, sym in symmetries.items():
        if sym is not None and {"orthogonal", "permutation"} <= sym:
            sides[teacher] = True
        elif sym is not None and "permutation" in sym and "orthogonal" not in sym:
            sides[teacher] = False
    return sides


def verdicts(
    trials: pl.DataFrame,
    m_star: pl.DataFrame,
    n_boot: int = 1000,
    ci: float = 0.95,
    symmetries: Mapping[str, frozenset[str] | None] | None = None,
    budget_rows: pl.DataFrame | None = None,
    target_error: float = 0.05,
) -> list[Verdict]:
    """S1-S4 (module docstring), each a verdict dict of :mod:`stats.boolean_verdicts`.

    Args:
        symmetries: each teacher's symmetries, for S2's sides (:func:`s2_sides`); None: the
            built-in teachers only.
        budget_rows: the budget check's rows (``search_phase`` ``budget``, twice the epochs),
            the evidence :func:`representation` reads first; None or empty: none ran.
        target_error: the relative test error that counts as success (``analysis.target_error``),
            against which :func:`representation` reads the training error.
    """
    done = with_student(trials).filter(pl.col("status") == "done").collect()
    budget = done.clear()
    if budget_rows is not None and not budget_rows.is_empty():
        budget = with_student(budget_rows).filter(pl.col("status") == "done").collect()
    return [
        _s1(done, n_boot, ci),
        _s2(m_star, s2_sides(symmetries), done, budget, target_error, n_boot, ci),
        _s3(done, n_boot, ci, m_star),
        _s4(done, n_boot, ci, m_star),
    ]


def representation(
    rows: pl.DataFrame,
    budget_rows: pl.DataFrame,
    target_error: float,
    n_boot: int = 1000,
    ci: float = 0.95,
) -> dict:
    """Whether a cell's student *cannot represent* its teacher, as far as the cell's rows tell
    (S2's control half, docs/claims.md 1b; the rule of the module docstring): it does not fit
    its own training sets, and not for want of epochs.

    * Level: the median training error over seeds at each m tried (status ``done``) is at
      least ``NO_FIT_FACTOR`` x ``target_error`` at every m.
    * Not epochs, by the budget check where it ran (``budget_rows`` at an m the search tried
      too): at every such m the median training error at twice the epochs is at least
      ``NO_PROGRESS`` times the median at the spec's epochs; one that fell further is an
      epochs problem, whatever the level.
    * Not epochs, without a budget check: the training error does not fall as m grows: the
      seed-bootstrap interval of the OLS slope of log10 training error on log10 m
      (:func:`log_slope`) lies above -``EFFECT_SLOPE`` (docs/claims.md 2); one m tried gives
      no trend, so no evidence.

    Args:
        rows: the cell's search rows (its trials at the spec's epochs) with ``m``, ``seed``,
            ``status`` and ``train_error`` (relative, as ``test_error``).
        budget_rows: the cell's budget-check rows, the same columns (may be empty).

    Returns:
        ``cannot_represent`` (bool), ``evidence`` (``"budget check"``, ``"level and trend"``,
        or None where the rows do not show it), ``level`` (the threshold), ``train_error``
        (median per m, ``[{"m", "median"}]``), ``train_error_2x`` (the same at twice the
        epochs, at the m both tried), ``slope`` (the trend's :class:`Quantity`, where read) and
        ``text`` (what the rows show, a clause for the verdict's why).
    """
    level = NO_FIT_FACTOR * target_error
    medians, twice = _train_medians(rows), _train_medians(budget_rows)
    pairs = [(m, medians[m], twice[m]) for m in sorted(twice) if m in medians]
    out: dict = {"cannot_represent": False, "evidence": None, "level": level, "slope": None}
    out["train_error"] = [{"m": m, "median": v} for m, v in medians.items()]
    out["train_error_2x"] = [{"m": m, "median": t} for m, _, t in pairs]
    if not medians:
        return out | {"text": "no training errors recorded"}
    low = min(medians, key=medians.__getitem__)
    if medians[low] < level:
        fits = f"reaches {_g(medians[low])} at m = {low}, below {NO_FIT_FACTOR:g} x the target ({_g(level)})"
        return out | {"text": f"its median training error {fits}: it fits its training set there"}
    span = f"{_g(min(medians.values()))} to {_g(max(medians.values()))} at m = {', '.join(map(str, medians))}"
    lead = f"its median training error over seeds is {span}, at least {NO_FIT_FACTOR:g} x the target ({_g(level)})"
    lead += " at every m tried"
    if pairs:
        read = ", ".join(f"{_g(t)} against {_g(o)} at m = {m}" for m, o, t in pairs)
        if any(not t >= NO_PROGRESS * o for _, o, t in pairs):
            fell = f"but it falls with more epochs ({read} at twice the epochs): an epochs problem"
            return out | {"text": f"{lead}, {fell}, not one of representation"}
        stays = f"and at twice the epochs it stays ({read}: it fell by less than {1 - NO_PROGRESS:.0%})"
        return out | {
            "cannot_represent": True,
            "evidence": "budget check",
            "text": f"{lead}, {stays} [evidence: the budget check]",
        }
    b, lo, hi = log_slope(rows.filter(pl.col("status") == "done"), "train_error", n_boot, ci)
    if math.isnan(b):
        return out | {"text": f"{lead}, but one m tried gives no trend and no budget check ran to rule out epochs"}
    out["slope"] = quantity(b, lo, hi)
    trend = f"slope of log10 training error on log10 m {_f2(b)}, CI {_f2(lo)} .. {_f2(hi)}"
    if not lo > -EFFECT_SLOPE:
        return out | {"text": f"{lead}, but it may fall as m grows ({trend}, not above -{EFFECT_SLOPE:g})"}
    flat = f"and does not fall as m grows ({trend}, above -{EFFECT_SLOPE:g})"
    why = "[evidence: its level and trend across m; no budget check at twice the epochs ran, which would say more]"
    return out | {"cannot_represent": True, "evidence": "level and trend", "text": f"{lead}, {flat} {why}"}


def _train_medians(rows: pl.DataFrame) -> dict[int, float]:
    """The median training error over a cell's finished trials at each m, ``{m: median}``."""
    if rows.is_empty() or "train_error" not in rows.columns:
        return {}
    err = pl.col("train_error").cast(pl.Float64)
    per_m = (
        rows.filter((pl.col("status") == "done") & err.is_not_null() & err.is_not_nan())
        .group_by("m")
        .agg(median=err.median())
        .sort("m")
    )
    return {whole(m): number(v) for m, v in per_m.iter_rows()}


def _f2(x: float) -> str:
    """A slope to two decimals, never ``-0.00`` (a flat line's round-off)."""
    return f"{round(x, 2) + 0.0:.2f}"


def _g(x: float) -> str:
    """A training error as the why writes it: three significant digits."""
    return f"{x:.3g}"


def _verdict(
    cid: str,
    claim: str,
    statistic: str,
    interval: str,
    verdict: str,
    why: str,
    numbers: dict | None = None,
    flags: Sequence[Flag] = (),
) -> Verdict:
    series = (
        [
            Series(
                cells={},
                verdict=verdict,
                statistic=statistic,
                interval=interval,
                why=why,
                numbers=numbers or {},
            )
        ]
        if numbers is not None
        else []
    )
    return Verdict(
        id=cid,
        claim=claim,
        statistic=statistic,
        interval=interval,
        verdict=verdict,
        why=why,
        series=series,
        not_judged=[],
        flags=list(flags),
    )


S1_CLAIM = "S1: the inner-product student is exactly O(d)-equivariant; the generic one is not"
S2_CLAIM = "S2: the inner-product student needs fewer samples on the equivariant teacher, not on the control"
S3_CLAIM = "S3: the generic transformer's O(d) equivariance error falls as m grows"
S4_CLAIM = "S4: the generic transformer's permutation equivariance error falls as m grows"


def _s1(done: pl.DataFrame, n_boot: int, ci: float) -> Verdict:
    orth = done.filter(pl.col("student") == INNER_PRODUCT)["eq_error_max"].drop_nulls()
    generic = done.filter((pl.col("student") == GENERIC) & (pl.col("teacher") == "equivariant"))
    if orth.is_empty() or generic.is_empty():
        return _verdict(
            "S1",
            S1_CLAIM,
            "-",
            "-",
            NOT_TESTED,
            "needs inner-product trials and generic transformer trials on the equivariant teacher",
        )
    e_max = number(orth.max())
    small = generic.filter(pl.col("m") == generic["m"].min())["eq_error_median"].drop_nulls().to_numpy()
    med, lo, hi = _median_ci(small, n_boot, ci)
    ok = e_max < ROUNDOFF and lo >= GAP * max(e_max, 1e-300)
    m_small = whole(generic["m"].min())
    numbers = dict(
        max_e_inner_product=e_max,
        median_e_transformer=quantity(med, lo, hi),
        m=m_small,
        roundoff=ROUNDOFF,
        gap=GAP,
    )
    return _verdict(
        "S1",
        S1_CLAIM,
        f"max float64 E (inner-product, all trials) = {e_max:.2e}; median E (transformer, equivariant "
        f"teacher, m={m_small}) = {med:.2e}",
        f"transformer median E CI {lo:.2e} .. {hi:.2e}",
        SUPPORTED if ok else NOT_SUPPORTED,
        f"needs max E < {ROUNDOFF:g} and the generic median E at least {GAP:g} times larger",
        numbers,
    )


def _s2(
    m_star: pl.DataFrame,
    sides: dict[str, bool],
    done: pl.DataFrame,
    budget: pl.DataFrame,
    target_error: float,
    n_boot: int,
    ci: float,
) -> Verdict:
    parts, outcomes, missing, undecided, flags, compared = [], [], False, [], [], []
    unfit: dict[str, dict] = {}  # control teacher -> what representation() read of its inner-product cell
    for teacher, should_win in _s2_teachers(m_star, sides):
        t = m_star.filter(pl.col("teacher") == teacher)
        orth = t.filter(pl.col("student") == INNER_PRODUCT)
        others = t.filter(pl.col("student").is_in([GENERIC, GENERIC_MLP]))
        if orth.is_empty() or others.is_empty():
            missing = True
            continue
        o = orth.row(0, named=True)
        flags += _flags_of(o)
        o_text = _m(o)
        if not should_win and o["bound"] == "none":
            # Unknown by the out-of-epochs rule: does the student fit its training sets at all?
            unfit[teacher] = representation(_cell_rows(done, o), _cell_rows(budget, o), target_error, n_boot, ci)
            if unfit[teacher]["cannot_represent"]:
                o_text = f"never reaches the target at any m tried (up to {o['m_max']}; cannot represent this teacher)"
        for r in others.iter_rows(named=True):
            flags += _flags_of(r)
            parts.append(f"{teacher}: inner-product {o_text} vs {r['student']} {_m(r)}")
            order = _order(o, r)
            pair = {"teacher": teacher, "student": r["student"], "inner_product": _quantity(o)}
            compared.append(pair | {"other": _quantity(r), "order": order})
            if should_win:  # the inner-product student must lie below
                outcomes.append({"below": "ok", "above": "contradicts"}.get(order, "undecided"))
            else:  # the control: it must not win (lie at or above); never reaching the target at any m tried is no win
                never = o["bound"] == "lower" or unfit.get(teacher, {}).get("cannot_represent", False)
                order = "above" if order == "undecided" and never else order
                outcomes.append({"above": "ok", "below": "contradicts"}.get(order, "undecided"))
            if order == "undecided":
                undecided.append(f"{teacher}: {r['student']}")
    if missing and not parts:
        return _verdict(
            "S2",
            S2_CLAIM,
            "-",
            "-",
            NOT_TESTED,
            "needs inner-product, transformer and MLP trials on both teachers",
        )
    verdict = (
        NOT_SUPPORTED
        if "contradicts" in outcomes
        else INCONCLUSIVE
        if missing or "undecided" in outcomes
        else SUPPORTED
    )
    ran_out = {f"{f['cell']['teacher']}/{f['cell']['student']}" for f in flags if f["flag"] in OUT_OF_EPOCHS}
    limited = sorted(ran_out - {f"{t}/inner-product" for t, u in unfit.items() if u["cannot_represent"]})
    why = (
        "on the equivariant teacher the inner-product student's m* must lie below each generic student's, on "
        "the control at or above (its interval entirely below the other's, or at or above it; a bound's range "
        "reaches to its side; on the control, never reaching the target at any m tried is no win, also where "
        "its m* is unknown but it cannot represent the teacher)"
        + ("; a teacher is missing" if missing else "")
        + (f"; undecided (the two overlap, or one has no number): {', '.join(undecided)}" if undecided else "")
        + "".join(
            f"; {t}: the inner-product student never reaches the target and cannot represent this teacher, so it "
            f"does not win here (its out-of-epochs m* is no longer read as unknown): {u['text']}"
            if u["cannot_represent"]
            else f"; {t}: the inner-product student's m* is unknown (out of epochs), and the rows do not show that "
            f"it cannot represent this teacher: {u['text']}"
            for t, u in unfit.items()
        )
        + (
            f"; cells that ran out of epochs (their m* is a bound, or unknown where no m is decided): "
            f"{', '.join(limited)}"
            if limited
            else ""
        )
    )
    numbers: dict = dict(comparisons=compared)
    if unfit:  # what representation() read, per control teacher whose inner-product m* was unknown
        numbers["cannot_represent"] = [{"teacher": t, "student": INNER_PRODUCT} | u for t, u in unfit.items()]
    return _verdict(
        "S2",
        S2_CLAIM,
        "; ".join(parts),
        "m* with 95% CI per student",
        verdict,
        why,
        numbers,
        flags,
    )


def _cell_rows(rows: pl.DataFrame, cell: dict) -> pl.DataFrame:
    """The rows of ``rows`` (labelled with ``student``) that belong to the m* table's ``cell``."""
    keys = [c for c in CELL if c in rows.columns and c in cell]
    return rows if rows.is_empty() else rows.filter(pl.all_horizontal(pl.col(c) == cell[c] for c in keys))


def _s2_teachers(m_star: pl.DataFrame, sides: dict[str, bool]) -> list[tuple[str, bool]]:
    """The teachers S2 compares on, with their side: on each side the built-in teacher (its
    absence counts as missing unless another teacher of that side is present), then the other
    teachers of that side the cells hold, sorted."""
    present = set(m_star["teacher"].to_list()) if "teacher" in m_star.columns else set()
    out = []
    for built_in, side in S2_SIDES.items():
        others = sorted(t for t, s in sides.items() if s == side and t != built_in and t in present)
        out += [(t, side) for t in ([built_in] if built_in in present or not others else []) + others]
    return out


def _order(a: dict, b: dict) -> str:
    """Where cell a's m* lies against cell b's: ``below`` (a's interval entirely below b's,
    and the grid m* ordered too), ``above`` (a's interval at or above b's), or
    ``undecided``. An interval comes from :func:`_ends` (a bound's reaches to the bound; a
    lower bound excludes its value)."""
    a_lo, a_hi = _ends(a)
    b_lo, b_hi = _ends(b)
    grid = lambda r: math.inf if r["m_star_grid"] is None or math.isnan(r["m_star_grid"]) else r["m_star_grid"]  # noqa: E731
    # A lower bound is strict (m* > its value: at that m even an optimistic count stays below
    # one half), so a value at it already lies below the other m*.
    if (a_hi < b_lo or (b["bound"] == "lower" and a_hi <= b["m_star"])) and grid(a) < grid(b):
        return "below"
    if a_lo >= b_hi or (a["bound"] == "lower" and a["m_star"] >= b_hi):
        return "above"
    return "undecided"


def _ends(r: dict) -> tuple[float, float]:
    """The range a cell's m* may take: its interval, widened to its bound (a lower bound
    reaches to +inf, an upper bound down to 1, no number is anywhere)."""
    lo = r["ci_lo"] if r["ci_lo"] is not None and not math.isnan(r["ci_lo"]) else r["m_star"]
    hi = r["ci_hi"] if r["ci_hi"] is not None and not math.isnan(r["ci_hi"]) else r["m_star"]
    if r["bound"] == "lower":
        return min(lo, r["m_star"]), math.inf
    if r["bound"] == "upper":
        return 1.0, max(hi, r["m_star"])
    if r["bound"] == "none":
        return 1.0, math.inf
    return lo, hi


def _flags_of(r: dict) -> list[Flag]:
    cell = {c: r[c] for c in ("teacher", "student", "n", "k", "d") if c in r}
    return [Flag(flag=f, cell=cell) for f in split_flags(r.get("flags"))]


def _quantity(r: dict) -> Quantity:
    return quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"])


def _m(r: dict) -> str:
    if r["bound"] != "exact":
        return format_m_star(r["m_star"], r["bound"])
    return f"{r['m_star']:.0f} ({r['ci_lo']:.0f} .. {r['ci_hi']:.0f})"


def _slope_verdict(cid: str, claim: str, rows: pl.DataFrame, column: str, n_boot: int, ci: float) -> Verdict:
    if rows.is_empty():
        return _verdict(cid, claim, "-", "-", NOT_TESTED, "no trials of that student on the equivariant teacher")
    b, lo, hi = log_slope(rows, column, n_boot, ci)
    if math.isnan(b):
        return _verdict(cid, claim, "-", "-", NOT_TESTED, "needs two or more values of m")
    m_min, m_max = whole(rows["m"].min()), whole(rows["m"].max())
    numbers = dict(slope=quantity(b, lo, hi), effect=-EFFECT_SLOPE, m_min=m_min, m_max=m_max)
    statistic = f"slope of log10 {column} on log10 m = {b:.2f}"
    interval = f"CI {lo:.2f} .. {hi:.2f}"
    need = f"falls = the interval lies below -{EFFECT_SLOPE:g} (a factor {10**EFFECT_SLOPE:.2f} per tenfold m)"
    if hi < -EFFECT_SLOPE:
        return _verdict(cid, claim, statistic, interval, SUPPORTED, need, numbers)
    if lo > -EFFECT_SLOPE:
        what = "practically flat" if hi < EFFECT_SLOPE else "it does not fall"
        return _verdict(
            cid,
            claim,
            statistic,
            interval,
            NOT_SUPPORTED,
            f"{need}; the interval lies above it: {what} over m = {m_min}..{m_max}",
            numbers,
        )
    return _verdict(cid, claim, statistic, interval, INCONCLUSIVE, f"{need}; the interval includes it", numbers)


def _s3(done: pl.DataFrame, n_boot: int, ci: float, m_star: pl.DataFrame) -> Verdict:
    rows = done.filter((pl.col("student") == GENERIC) & (pl.col("teacher") == "equivariant"))
    return _budgeted(_slope_verdict("S3", S3_CLAIM, rows, "eq_error_median", n_boot, ci), m_star)


def _s4(done: pl.DataFrame, n_boot: int, ci: float, m_star: pl.DataFrame) -> Verdict:
    rows = done.filter((pl.col("student") == GENERIC) & (pl.col("teacher") == "equivariant"))
    return _budgeted(_slope_verdict("S4", S4_CLAIM, rows, "perm_error_median", n_boot, ci), m_star)


def _budgeted(verdict: Verdict, m_star: pl.DataFrame) -> Verdict:
    """A slope verdict (S3, S4) measured on generic-transformer trials that ran out of epochs
    before fitting their training sets (the cell's ``out-of-epochs`` or ``budget-limited``
    flag, or its ``out_of_epochs`` column where a budget check that kept m*'s outcome cleared
    the flag): E then measures the training budget as much as the samples, so a decided
    verdict becomes inconclusive and says so (docs/claims.md 2)."""
    cell = (
        m_star.filter((pl.col("student") == GENERIC) & (pl.col("teacher") == "equivariant"))
        if not m_star.is_empty() and "student" in m_star.columns
        else m_star.clear()
    )
    rows = list(cell.iter_rows(named=True))
    flags = [f for r in rows for f in _flags_of(r) if f["flag"] in ("out-of-epochs", "budget-limited")]
    # A budget check that kept m*'s outcome clears the cell's flag, but not what E measured: the
    # trials that decide m* still ran out of epochs before fitting their training sets.
    spent: list[dict[str, object]] = [
        {c: r[c] for c in ("teacher", "student", "n", "k", "d") if c in r} for r in rows if r.get("out_of_epochs")
    ]
    flags += [Flag(flag="out-of-epochs", cell=c) for c in spent if not any(g["cell"] == c for g in flags)]
    if not flags:
        return verdict
    verdict["flags"] = flags
    if verdict["verdict"] in (SUPPORTED, NOT_SUPPORTED):
        verdict["why"] += (
            "; but the generic transformer's trials ran out of epochs before fitting their training "
            f"sets (flag {flags[0]['flag']}; a budget check that kept m*'s outcome does not clear E): "
            "E measures the training budget as much as the samples, "
            f"so the verdict ({verdict['verdict']} as measured) is inconclusive"
        )
        verdict["verdict"] = INCONCLUSIVE
        if verdict["series"]:
            verdict["series"][0]["verdict"] = INCONCLUSIVE
            verdict["series"][0]["why"] = verdict["why"]
    return verdict
