"""Verdicts L1-L4 and R of the sparse-Boolean experiment (docs/claims.md section 1a).

The claim under test (Edelman, Goel, Kakade, Zhang, "Inductive Biases and Variable Creation
in Self-Attention Mechanisms", ICML 2022, arXiv 2110.10090, Theorem 4.2 and section 5): a
bounded-norm self-attention head learns an s-sparse Boolean function of T bits from a number
of samples that grows like log T, times factors that grow with the norm bound B and with s;
an MLP on the flattened bits needs samples that grow like T.

This module judges L2, L3, L4 and R and returns all five verdicts (:func:`verdicts`); L1 is
judged in stats/boolean_growth.py, the m* table is read by stats/boolean_cells.py, and the
verdict dict's sentences are put together in stats/boolean_wording.py.

Input: an m* table, one row per cell, as ``analysis.boolean.analyze_run(...).m_star``
returns it: cell columns (``task``, ``T``, ``s``, ``model``, ``norm_bound``, ...) and
``m_star``, ``bound`` ("exact", "lower", "upper", "none"), ``ci_lo``, ``ci_hi``, ``flags``,
``m_min``, ``m_max`` (stats/critical.py defines them; a table without ``bound`` has it
derived from ``censored``). Two optional columns:

* ``replicates`` (list of float): the cell's bootstrap m* (seeds resampled; +inf for a
  replicate beyond the grid), attached by :func:`stats.boolean_cells.with_replicates`.
  Every interval here is a percentile interval over the replicate index r: replicate r of a
  statistic is the statistic computed from replicate r of every cell it uses (each cell's
  bootstrap is independent of the others', so this bootstraps the statistic). Without
  replicates the intervals are NaN and the verdicts inconclusive.
* ``budget`` ("ok", "budget-limited", "not checked"): the check at twice the epochs.

The censoring rule (docs/claims.md 2) applied here: a growth-law fit uses exact m* only and
names the others with their bound; a rank (L2, L3) takes a lower bound as larger than every
value and an upper bound as its value; a ratio with a bound in it is itself a bound. A claim
whose statistic uses a budget-limited cell (``flags``: ``budget-limited`` or
``out-of-epochs``) is inconclusive and names it; non-monotone cells and cells with few seeds
are named in its ``flags``.

Each verdict is a :class:`stats.verdict_common.Verdict`, a typed dict with the same keys as those of
:func:`stats.symmetry.verdicts`:

* ``id`` (``L1`` ...), ``claim`` (its text), ``verdict`` (:data:`stats.verdict_common.VERDICTS`: ``supported``,
  ``not supported``, ``inconclusive`` when the data cannot decide, ``not tested`` when the
  runs hold no data for it);
* ``statistic``, ``interval``, ``why``: the same as sentences, for people;
* ``series``: one dict per judged series (``cells``: the settings that name it, e.g.
  ``{"s": 3, "norm_bound": None}``; ``verdict``, ``why``, ``numbers``), where ``numbers``
  holds the statistic as numbers: quantities as ``{"estimate", "ci_lo", "ci_hi",
  "bound"}``, counts and parameters as numbers;
* ``not_judged``: the settings of series named but not judged (side blocks with fewer
  than 3 values of T), ``flags``: ``{"flag", "cell"}`` per flagged cell the statistic saw.

L1's series ``numbers`` also say what the statistic says where the rule does not decide:
``direction`` ("faster than log", "log", "undecided"), ``log_deficit_aicc`` (the log law's AICc
behind the best rival: ``full``, ``least``, ``most`` over the fitting variants, ``variants``),
``span_short`` (fewer than ``stats.boolean_growth.MIN_DECADES``), ``law`` (named only when it wins every variant
of :func:`stats.fits.robust_law`; "undecided" or "too few cells" otherwise), ``robust`` (its
winners per variant) and, on the larger bound's series of two that differ only in B,
``across_bound`` (:func:`stats.boolean_growth.across_bound`). R's numbers add ``ratio_by_T`` and ``trend_slope``.

Every claim is judged three times, once per estimator of m* (stats/critical.py ``ESTIMATORS``:
the logistic crossing, the grid m*, m* interpolated on ln m), and
:func:`stats.boolean_wording.agreed` keeps a verdict, an L1 series' direction and its named law
only where all three agree: where they disagree the verdict is inconclusive and says what each
estimator gave (``estimators`` in the verdict and in each series' numbers). The statistic,
interval and numbers shown are the logistic estimator's.

Where a claim is judged on several series (e.g. transformer cells at two norm bounds for
L1), it is supported when every judged series supports it, not supported when any
contradicts it, and inconclusive otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata

from attnsweep.stats.boolean_cells import (
    ATTENTION,
    BASELINE,
    MIN_POINTS,
    R_RANGE,
    REFERENCE_CSV,
    attention_cells,
    cell_columns,
    cell_values,
    estimator_view,
    groups_by,
    normalized,
    one_init,
    read_reference,
    reference_cells,
    replicate_interval,
    t_series,
)
from attnsweep.stats.boolean_growth import l1_log_growth
from attnsweep.stats.boolean_wording import (
    agreed,
    combine_series,
    interval_end,
    left_out_cells,
    mlp_ratio_text,
    ratio_text,
    reference_why,
    show_m_star,
    verdict_dict,
)
from attnsweep.stats.critical import ESTIMATORS
from attnsweep.stats.verdict_common import (
    EFFECT_RATIO,
    EFFECT_SLOPE,
    INCONCLUSIVE,
    NOT_SUPPORTED,
    NOT_TESTED,
    SUPPORTED,
    Verdict,
    quantity,
    ratio_bound,
)

ARCH_FIELDS = ("model", "d", "layers", "heads", "mlp_width")
"""Settings of one architecture: cells that differ only in these are compared in L4."""
FAR_MORE = 2.0
""""Far more samples" (L4): the MLP's m* at least twice the transformer's."""
EQUIVALENCE = (0.8, 1.25)
"""Equivalence margin of R for the geometric-mean ratio ours/paper (docs/decisions.md, "Report")."""
READ_OFF = 1.5
"""Precision of our read-off of the paper's figure, in samples (its CSV's header)."""
PROTOCOL_FIELDS = (
    "d",
    "heads",
    "layers",
    "lr",
    "weight_decay",
    "max_epochs",
    "batch_size",
    "n_test",
    "norm_kind",
    "precision",
)
"""Settings of our protocol that R names beside its statistic."""


def verdicts(
    m_star: pl.DataFrame,
    cell: list[str] | None = None,
    reference: Path | str = REFERENCE_CSV,
    ci: float = 0.95,
) -> list[Verdict]:
    """L1, L2, L3, L4 and R, in that order.

    Args:
        m_star: the m* table (see the module docstring), one row per cell.
        cell: its cell columns (default: every column not in ``stats.boolean_cells.RESULT_COLUMNS``).
        reference: the paper's read-off for R (see :func:`stats.boolean_cells.read_reference`).
        ci: coverage of the intervals.
    """
    m_star = normalized(m_star)
    cell = cell or cell_columns(m_star)
    judged: dict[str, list[dict]] = {}
    for name in ESTIMATORS:
        view = estimator_view(m_star, name)
        # A restart run's learners are L1 series of their own (docs/claims.md, "Restarts"); the other
        # claims compare one trained head per training set, as every other run and the paper do.
        one = one_init(view)
        judged[name] = [
            l1_log_growth(view, cell, ci),
            l2_norm_bound(one, cell, ci),
            l3_sparsity(one, cell, ci),
            l4_mlp_baseline(one, cell, ci),
            r_reference(one, reference, cell, ci),
        ]
    return [agreed({name: judged[name][i] for name in ESTIMATORS}) for i in range(5)]


# --- L2, L3 --------------------------------------------------------------------------------

L2_CLAIM = "L2: m* grows with the norm bound B (unbounded = largest)"
L3_CLAIM = "L3: m* grows with the sparsity s"


def l2_norm_bound(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L2: the attention model's m* grows with the norm bound B (None, unbounded, ranks as the
    largest B). Statistic: :func:`_monotone_in` over cells that differ only in B, of which
    at least 2 are bounded. Source: docs/claims.md 1a (L2); Edelman et al. 2022, Theorem 4.2
    (the bound grows with the norms of W_Q W_K^T, W_V and the readout)."""
    m_star = normalized(m_star)
    return _monotone_in(m_star, "norm_bound", "L2", L2_CLAIM, cell or cell_columns(m_star), ci)


def l3_sparsity(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L3: the attention model's m* grows with the sparsity s. Statistic:
    :func:`_monotone_in` over cells that differ only in s. Source: docs/claims.md 1a (L3);
    Edelman et al. 2022, Theorem 4.2 (the bound grows with s)."""
    m_star = normalized(m_star)
    return _monotone_in(m_star, "s", "L3", L3_CLAIM, cell or cell_columns(m_star), ci)


def _monotone_in(m_star: pl.DataFrame, x: str, cid: str, claim: str, cell: list[str], ci: float) -> dict:
    """Whether the transformer's m* grows with setting ``x``.

    Statistics, over the groups of cells that differ only in ``x``: the mean of Spearman's
    rank correlation between ``x`` and the cells' values (ties share their average rank; a
    lower bound, beyond the grid, ranks last), and the geometric mean over groups of the
    ratio of m* at the group's largest ``x`` to m* at its smallest (the effect size), each
    with a bootstrap interval. Supported when rho's interval lies above 0 and the ratio's
    above :data:`EFFECT_RATIO`; not supported when rho's lies at or below 0 or the ratio's
    below :data:`EFFECT_RATIO`. Groups whose cells are all bounds on the same side carry no
    order and are left out, as are groups with a bound whose order against another cell it
    does not settle (:func:`_ordered`: a bound is never ranked as a value); a cell with no
    number (bound ``none``) is left out of its group.
    """
    att = attention_cells(m_star)
    if x not in att.columns or att.is_empty():
        return verdict_dict(cid, claim, NOT_TESTED, f"no transformer cells with a {x} column")
    kept, keys, dropped, unordered = [], [], 0, 0
    for key, part in groups_by(att, [c for c in cell if c != x]):
        part = part.filter(pl.col("bound") != "none")
        levels = part[x].drop_nulls().n_unique()
        if levels < 2:
            continue
        if part["bound"].n_unique() == 1 and part["bound"][0] != "exact":
            dropped += 1
            continue
        if not _ordered(part):
            unordered += 1
            continue
        kept.append(part)
        keys.append(key)
    what = "bounded values of B" if x == "norm_bound" else f"values of {x}"
    left_out = f"; {dropped} group(s) with bounds only (no order) left out" if dropped else ""
    left_out += (
        f"; {unordered} group(s) with a bound whose order against the other cells is not known (a bound is "
        "not a value) left out"
        if unordered
        else ""
    )
    if not kept:
        why = f"needs transformer cells that differ only in {x}, at >= 2 {what}"
        return verdict_dict(cid, claim, INCONCLUSIVE if dropped or unordered else NOT_TESTED, why + left_out)
    rhos, reps, ratios, ratio_reps = [], [], [], []
    for part in kept:
        xs = part[x].cast(pl.Float64).fill_null(math.inf).to_numpy()
        point, r = cell_values(part)
        rhos.append(float(_spearman(xs, point)))
        reps.append(None if r is None else _spearman(xs, r))
        hi_i, lo_i = int(np.argmax(xs)), int(np.argmin(xs))
        ends = part["m_star"].cast(pl.Float64).to_numpy()  # a bound's own value: the ratio is then a bound
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(float(ends[hi_i] / ends[lo_i]))
            ratio_reps.append(None if r is None else r[:, hi_i] / r[:, lo_i])
    rho = float(np.mean(rhos))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.exp(np.mean(np.log(ratios))))
    if any(r is None for r in reps):
        lo = hi = rlo = rhi = math.nan
    else:
        R = min(len(r) for r in reps)
        lo, hi = replicate_interval(np.mean([r[:R] for r in reps], axis=0), ci)
        with np.errstate(divide="ignore", invalid="ignore"):
            rlo, rhi = replicate_interval(np.exp(np.mean(np.log([r[:R] for r in ratio_reps]), axis=0)), ci)
    ratio_bound_ = _ratios_bound([p.sort(x, nulls_last=True) for p in kept])
    statistic = (
        f"mean Spearman rho of m* with {x} = {rho:.2f} over {len(kept)} group(s) of cells; m* at the "
        f"largest / smallest {x} = {ratio_text(ratio, ratio_bound_)}"
    )
    interval = f"rho CI {lo:.2f} .. {hi:.2f}; ratio CI {interval_end(rlo)} .. {interval_end(rhi)}"
    why = f"groups: cells that differ only in {x} (>= 2 {what})" + left_out
    groups = [
        dict(
            cells=key,
            rho=r_g,
            ratio=quantity(q_g, bound=_ratios_bound([p.sort(x, nulls_last=True)])),
            m_star=[
                dict({x: v}, m_star=quantity(m, lo_, hi_, b))
                for v, m, lo_, hi_, b in p.sort(x, nulls_last=True)
                .select(x, "m_star", "ci_lo", "ci_hi", "bound")
                .iter_rows()
            ],
        )
        for key, p, r_g, q_g in zip(keys, kept, rhos, ratios, strict=True)
    ]
    numbers = dict(
        rho=quantity(rho, lo, hi),
        ratio=quantity(ratio, rlo, rhi, ratio_bound_),
        n_groups=len(kept),
        groups=groups,
    )
    if math.isnan(lo):
        verdict, why = INCONCLUSIVE, why + "; no bootstrap replicates"
    elif hi <= 0 or rhi < EFFECT_RATIO:
        verdict = NOT_SUPPORTED
        why += (
            "; rho's interval is at or below 0"
            if hi <= 0
            else f"; the ratio's interval lies below {EFFECT_RATIO:.2f} (grows by less than the required effect)"
        )
    elif lo > 0 and rlo >= EFFECT_RATIO:
        verdict = SUPPORTED
        why += f"; rho's interval above 0 and the ratio's above {EFFECT_RATIO:.2f}"
    else:
        verdict = INCONCLUSIVE
        why += "; rho's interval includes 0" if lo <= 0 else f"; the ratio's interval includes {EFFECT_RATIO:.2f}"
    used = pl.concat(kept, how="diagonal_relaxed")
    series = [
        dict(
            cells={},
            verdict=verdict,
            statistic=statistic,
            interval=interval,
            why=why,
            numbers=numbers,
        )
    ]
    return verdict_dict(cid, claim, verdict, why, statistic, interval, series=series, used=used)


def _ordered(part: pl.DataFrame) -> bool:
    """Whether every pair of a group's cells has a known order: two values always; a bound
    against a value or another bound only where the bound settles it (``≤ u`` below ``v`` when
    u < v, ``> l`` above ``v`` when l >= v, ``≤ u`` below ``> l`` when u <= l). Two lower bounds
    at the same value (both beyond the same grid) tie, as the ranks treat them."""
    cells = list(zip(part["bound"].to_list(), part["m_star"].cast(pl.Float64).to_list(), strict=True))
    for i, (b1, v1) in enumerate(cells):
        for b2, v2 in cells[i + 1 :]:
            if b1 == b2 == "exact" or (b1 == b2 == "lower" and v1 == v2):
                continue
            (bl, vl), (bh, vh) = sorted([(b1, v1), (b2, v2)], key=lambda c: ("upper", "exact", "lower").index(c[0]))
            # bl is the pair's lower-reading end (upper bound or value), bh the higher one.
            if bl == "upper" and bh == "upper" or bl == "lower":
                return False
            if not (vl < vh if bl == "upper" and bh == "exact" else vl <= vh):
                return False
    return True


def _ratios_bound(parts: list[pl.DataFrame]) -> str:
    """The bound of a mean of end-to-end ratios (each group's largest over smallest value)."""
    kinds = {ratio_bound(p["bound"][-1], p["bound"][0]) for p in parts} - {"exact"}
    return "exact" if not kinds else kinds.pop() if len(kinds) == 1 else "none"


# --- L4 -----------------------------------------------------------------------------------

L4_CLAIM = "L4: the MLP needs far more samples than the transformer, and more so as T grows"


def l4_mlp_baseline(m_star: pl.DataFrame, cell: list[str] | None = None, ci: float = 0.95) -> dict:
    """L4: the MLP needs far more samples than the transformer as T grows.

    Statistic (per series of paired cells: a transformer and an MLP cell equal in every
    setting but the architecture's, ``ARCH_FIELDS``): the ratio MLP m* / transformer m* at
    the largest T where both have one (an MLP beyond the grid makes it a lower bound), with
    its bootstrap interval; and the log-log slope of the ratio on T over the T where both m*
    are values. Supported when the ratio's interval lies above :data:`FAR_MORE` ("far more")
    and the slope's above :data:`EFFECT_SLOPE` (>= ``MIN_POINTS`` T); not supported when the
    ratio's lies at or below 1 or the slope's below :data:`EFFECT_SLOPE`. Source: docs/claims.md 1a (L4); Edelman et al. 2022, section 5 (MLP
    baseline, sample complexity growing like T).
    """
    m_star = normalized(m_star)
    cell = cell or cell_columns(m_star)
    if "model" not in m_star.columns:
        return verdict_dict("L4", L4_CLAIM, NOT_TESTED, "the m* table has no model column")
    on = [c for c in cell if c not in ARCH_FIELDS]
    tr, mlp = (m_star.filter(pl.col("model") == v) for v in (ATTENTION, BASELINE))
    pairs = tr.join(mlp, on=on, how="inner", suffix="_mlp", nulls_equal=True)
    if pairs.is_empty():
        return verdict_dict(
            "L4",
            L4_CLAIM,
            NOT_TESTED,
            "no T with both a transformer and an MLP cell of equal settings",
        )
    arch = [c for c in ARCH_FIELDS if c in cell and c != "model"]
    by = [c for c in on if c != "T"] + arch + [f"{c}_mlp" for c in arch]
    judged = [(key, *_l4_series(part.sort("T"), ci)) for key, part in groups_by(pairs, by)]
    return combine_series("L4", L4_CLAIM, judged, [])


def _l4_series(pairs: pl.DataFrame, ci: float) -> tuple:
    tr, tr_reps = cell_values(pairs)
    mlp, mlp_reps = cell_values(pairs, "_mlp")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = mlp / tr  # (n,); NaN where both are beyond the grid
        reps = None if tr_reps is None or mlp_reps is None else mlp_reps / tr_reps  # (R, n)
    keep = ~np.isnan(ratio)
    T = pairs["T"].to_numpy()[keep]
    used = pairs.filter(pl.Series(keep))
    if not keep.any():
        return INCONCLUSIVE, "-", "-", "both models are beyond the grid at every T", used, {}
    ratio, reps = ratio[keep], None if reps is None else reps[:, keep]
    last = used.row(-1, named=True)
    bound = ratio_bound(last["bound_mlp"], last["bound"])
    value = last["m_star_mlp"] / last["m_star"] if bound != "none" else math.nan
    shown = mlp_ratio_text(last, value, bound)
    lo, hi = replicate_interval(None if reps is None else reps[:, -1], ci)
    if bound == "lower" and math.isinf(lo):
        # The MLP's m* is beyond the grid in every replicate: the ratio is above (its bound) /
        # (the transformer's m*), and the smallest that can be within the transformer's
        # interval is the bound over the interval's upper end, not over its estimate.
        top = last["ci_hi"]
        lo = last["m_star_mlp"] / top if top is not None and math.isfinite(top) and top > 0 else value
    statistic = f"MLP m* / transformer m* at T={T[-1]}: {shown}"
    interval = f"ratio CI {interval_end(lo)} .. {interval_end(hi)}"
    exact = (used["bound"] == "exact").to_numpy() & (used["bound_mlp"] == "exact").to_numpy()
    numbers = dict(
        T=[int(t) for t in T],
        ratio=quantity(value, lo, hi, bound),
        transformer=[quantity(r["m_star"], r["ci_lo"], r["ci_hi"], r["bound"]) for r in used.iter_rows(named=True)],
        mlp=[
            quantity(r["m_star_mlp"], r["ci_lo_mlp"], r["ci_hi_mlp"], r["bound_mlp"])
            for r in used.iter_rows(named=True)
        ],
    )
    if math.isnan(lo):
        return INCONCLUSIVE, statistic, interval, "no bootstrap replicates", used, numbers
    far, not_more = lo > FAR_MORE, hi <= 1
    grows = not_grows = False
    # "More so as T grows": the log-log slope of the ratio on T over the T where both m* are
    # values (a bound is not ranked against values), at least EFFECT_SLOPE.
    Te = T[exact].astype(float)
    trend = f"the ratio is a value at {len(Te)} T; a trend needs {MIN_POINTS}"
    if len(Te) >= MIN_POINTS:
        x = np.log10(Te)
        w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
        slope = float(w @ np.log10(ratio[exact]))
        with np.errstate(divide="ignore", invalid="ignore"):
            rep_slopes = np.log10(reps[:, exact]) @ w
        slo, shi = replicate_interval(rep_slopes[np.isfinite(rep_slopes)], ci)
        statistic += (
            f"; log-log slope of the ratio on T = {slope:.2f} over T {int(Te[0])}..{int(Te[-1])} (where both "
            "m* are values)"
        )
        interval += f"; slope CI {slo:.2f} .. {shi:.2f}"
        numbers["slope"] = quantity(slope, slo, shi)
        numbers["slope_T"] = [int(t) for t in Te]
        grows, not_grows = slo > EFFECT_SLOPE, shi < EFFECT_SLOPE
        trend = (
            f"the ratio's slope on T is above {EFFECT_SLOPE:g} (it grows with T)"
            if grows
            else f"the ratio's slope on T is below {EFFECT_SLOPE:g} (it does not grow with T)"
            if not_grows
            else f"the ratio's slope interval includes {EFFECT_SLOPE:g}"
        )
    if not_more or not_grows:
        return (
            NOT_SUPPORTED,
            statistic,
            interval,
            "the ratio's interval is at or below 1" if not_more else trend,
            used,
            numbers,
        )
    if far and grows:
        return (
            SUPPORTED,
            statistic,
            interval,
            f"ratio's interval above {FAR_MORE:g} (far more); {trend}",
            used,
            numbers,
        )
    why = (
        f"ratio's interval above {FAR_MORE:g}; "
        if far
        else f'the ratio\'s interval reaches below {FAR_MORE:g} ("far more" needs at least {FAR_MORE:g}x); '
    ) + trend
    return INCONCLUSIVE, statistic, interval, why, used, numbers


# --- R ------------------------------------------------------------------------------------

R_CLAIM = (
    f"R: our m* equals the paper's within the equivalence margin {EQUIVALENCE[0]:g} .. {EQUIVALENCE[1]:g} "
    f"(ratio ours/paper) for T = {R_RANGE[0]}..{R_RANGE[1]} (transformer, 3-way AND)"
)


def r_reference(
    m_star: pl.DataFrame,
    reference: Path | str = REFERENCE_CSV,
    cell: list[str] | None = None,
    ci: float = 0.95,
    margin: tuple[float, float] = EQUIVALENCE,
) -> dict:
    """R: our m* at T in ``R_RANGE`` (transformer, 3-way AND) against the paper's read-off.

    Statistic: the geometric-mean ratio ours / paper over our T in the range with an exact
    m*, exp(mean ln(m*(T) / m_paper(T))), with m_paper linearly interpolated in T between
    the read-off points (Edelman et al. 2022, section 5, figure "Transformer, 3-way AND";
    our read-off in ``stats/data``), and its bootstrap interval (the read-off is taken as
    fixed). An equivalence test (Schuirmann's two one-sided tests, as an interval inside the
    margin): supported when the interval lies inside ``margin``, not supported when it lies
    wholly outside, inconclusive otherwise. The verdict says which way ours differs, the
    margin, and the settings of our protocol it rests on (the paper's own width, optimiser,
    epochs and success rule are not part of our read-off). As for L1, a series with fewer
    than ``MIN_POINTS`` values of T in the range beside others (a side block over B or s) is
    named, not judged. Source: docs/claims.md 1a (R).

    Raises:
        OSError, ValueError: the reference cannot be read (see :func:`stats.boolean_cells.read_reference`).
    """
    m_star = one_init(normalized(m_star))
    ref = read_reference(reference)
    ours = reference_cells(m_star)
    if ours.is_empty():
        have = sorted(set(attention_cells(m_star)["T"].to_list())) if "T" in m_star.columns else []
        return verdict_dict(
            "R",
            R_CLAIM,
            NOT_TESTED,
            f"no transformer 3-way AND cell with T in "
            f"{R_RANGE[0]}..{R_RANGE[1]} (transformer T here: {have or 'none'})",
        )
    cell = cell or cell_columns(m_star)
    series, side = t_series(groups_by(ours, [c for c in cell if c != "T"]))
    if not series:
        return verdict_dict(
            "R",
            R_CLAIM,
            NOT_TESTED,
            f"no series has {MIN_POINTS} or more values of T in {R_RANGE[0]}..{R_RANGE[1]}",
            not_judged=side,
        )
    judged = [(key, *_r_series(part, ref, ci, margin)) for key, part in series]
    return combine_series("R", R_CLAIM, judged, side)


def _r_series(ours: pl.DataFrame, ref: pl.DataFrame, ci: float, margin: tuple[float, float]) -> tuple:
    protocol = {c: ours[c][0] for c in PROTOCOL_FIELDS if c in ours.columns and ours[c].n_unique() == 1}
    if "n_seeds" in ours.columns:
        protocol["seeds"] = int(ours["n_seeds"].max())
    left = left_out_cells(ours)
    exact = ours.filter(pl.col("bound") == "exact")
    T = exact["T"].to_numpy().astype(float)
    paper = np.interp(T, ref["T"].to_numpy().astype(float), ref["critical_m"].to_numpy())  # (n,)
    point, reps = cell_values(exact)
    left_text = (
        "; left out (a bound, not a value): " + ", ".join(f"T={x['T']}: {x['text']}" for x in left) if left else ""
    )
    if exact.is_empty():
        return (
            INCONCLUSIVE,
            "-",
            "-",
            "no cell in the range has an exact m*" + left_text,
            ours,
            dict(left_out=left, protocol=protocol),
        )
    ref_T = ref["T"].to_numpy().astype(float)
    lo_p = np.interp(T, ref_T, ref["err_lo"].to_numpy()) - READ_OFF
    hi_p = np.interp(T, ref_T, ref["err_hi"].to_numpy()) + READ_OFF
    read = np.isin(T, ref_T)  # read off at this T; elsewhere interpolated between read-off points
    grid = exact["m_star_grid"].to_numpy().astype(float)
    with np.errstate(divide="ignore"):
        gm = float(np.exp(np.mean(np.log(point / paper))))
        gm_grid = float(np.exp(np.mean(np.log(grid / paper))))
        ratio_reps = None
        if reps is not None:
            # Each replicate draws the paper's values too, uniformly within their plotted error bars
            # widened by the read-off's precision: the paper's uncertainty enters the interval.
            rng = np.random.default_rng(0)
            paper_reps = rng.uniform(lo_p, hi_p, size=reps.shape)
            ratio_reps = np.exp(np.mean(np.log(reps / paper_reps), axis=1))
        lo, hi = replicate_interval(ratio_reps, ci)
        # The trend beside the level: the log-log slope of the ratio on T (ratio ~ T^slope), with
        # the same replicates' interval; a ratio that drifts with T is not one protocol's offset.
        per_T = point / paper  # (n,)
        slope = slo = shi = math.nan
        if len(T) >= MIN_POINTS:
            x = np.log(T)
            w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
            slope = float(w @ np.log(per_T))
            if reps is not None:
                rep_slopes = np.log(reps / paper_reps) @ w
                slo, shi = replicate_interval(rep_slopes[np.isfinite(rep_slopes)], ci)
    papers = ", ".join(f"{p:.0f}" if r else f"{p:.0f}*" for p, r in zip(paper, read, strict=True))
    statistic = (
        f"geometric-mean ratio ours/paper = {gm:.2f} over T = {', '.join(f'{t:g}' for t in T)} "
        f"(ours {', '.join(show_m_star(r) for r in exact.iter_rows(named=True))}; paper {papers}"
        + ("; *: interpolated between read-off points" if not read.all() else "")
        + f"); on the grid m*: {gm_grid:.2f}; the ratio against T: "
        + ", ".join(f"{r:.2f}" for r in per_T)
        + (f"; its trend ratio ~ T^{slope:.2f}" if not math.isnan(slope) else "")
    )
    interval = f"CI {lo:.3f} .. {hi:.3f} (the paper's error bars included); margin {margin[0]:g} .. {margin[1]:g}"
    if not math.isnan(slope):
        interval += f"; trend slope CI {slo:.2f} .. {shi:.2f}"
    numbers = dict(
        ratio=quantity(gm, lo, hi),
        ratio_grid=gm_grid,
        margin=list(margin),
        T=[int(t) for t in T],
        ours=[float(p) for p in point],
        ours_grid=[float(g) for g in grid],
        paper=[float(p) for p in paper],
        paper_read_off=[bool(r) for r in read],
        left_out=left,
        protocol=protocol,
        ratio_by_T=[float(r) for r in per_T],
        trend_slope=quantity(slope, slo, shi),
    )
    if math.isnan(lo):
        return (
            INCONCLUSIVE,
            statistic,
            interval,
            "no bootstrap replicates" + left_text,
            exact,
            numbers,
        )
    why = reference_why(lo, hi, margin, protocol, left_text, T, per_T, slope, slo, shi)
    grid_inside = margin[0] <= gm_grid <= margin[1]
    if margin[0] <= lo and hi <= margin[1]:
        room = min(lo - margin[0], margin[1] - hi)
        if room < 0.02:
            why += f"; a narrow call: the interval is inside the margin by {room:.3f}"
        if not grid_inside:
            return (
                INCONCLUSIVE,
                statistic,
                interval,
                (
                    "inside the margin on the fitted m*, but the grid m* give "
                    f"{gm_grid:.2f}, outside it: the m* estimator decides: " + why
                ),
                exact,
                numbers,
            )
        return SUPPORTED, statistic, interval, "inside the margin: " + why, exact, numbers
    if hi < margin[0] or lo > margin[1]:
        return NOT_SUPPORTED, statistic, interval, "outside the margin: " + why, exact, numbers
    return (
        INCONCLUSIVE,
        statistic,
        interval,
        "the interval overlaps the margin's edge: " + why,
        exact,
        numbers,
    )


def _spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` ``(n,)`` with each row of ``y`` ``(..., n)``: the Pearson
    correlation of average ranks (Spearman 1904), 0 where either ranking is constant."""
    rx = rankdata(x) - (len(x) + 1) / 2
    ry = rankdata(y, axis=-1) - (y.shape[-1] + 1) / 2
    num, den = (ry * rx).sum(-1), np.sqrt((rx**2).sum() * (ry**2).sum(-1))
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
