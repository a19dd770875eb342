"""What a verdict is, in both experiments (the sparse-Boolean claims L1-L4 and R, the
symmetry claims S1-S4): the four verdicts, the smallest effect that counts, a number as
verdicts.json carries it, the bound of a ratio of bounded values, and one verdict from several.
"""

from __future__ import annotations

import math

import numpy as np

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED = "supported", "not supported", "inconclusive", "not tested"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED)
"""The four verdicts: the data support the claim, contradict it, cannot decide it, or do not test it."""

EFFECT_SLOPE = 0.05
"""The smallest log-log slope that counts as "grows" or "falls" (docs/claims.md 2): a
factor 10^0.05 = 1.12 per tenfold change of the axis. A slope whose interval lies inside
(-0.05, 0.05) is flat: it barely moves."""
EFFECT_RATIO = 10 ** EFFECT_SLOPE
"""The smallest ratio of m* between the largest and the smallest value of a setting that
counts as "m* grows with it" (L2, L3): 12% more samples."""


def quantity(estimate: float, lo: float = math.nan, hi: float = math.nan, bound: str = "exact") -> dict:
    """A number as verdicts.json carries it: ``estimate`` (for a bound, the bound's value),
    ``ci_lo``, ``ci_hi`` and ``bound`` (``exact``; ``lower``: the true value is above
    ``estimate``; ``upper``: at or below it; ``none``: no number)."""
    return dict(estimate=_num(estimate), ci_lo=_num(lo), ci_hi=_num(hi), bound=bound)


def jsonable(value):
    """``value`` with every non-finite float as None and numpy scalars as Python numbers
    (JSON has no NaN or infinity; a quantity's ``bound`` says which side a missing end is)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def ratio_bound(top: str, bottom: str) -> str:
    """The bound of the ratio top / bottom of two values with bounds ``top`` and ``bottom``
    (:data:`stats.critical.BOUNDS`): exact when both are; a lower bound when the top is a
    lower bound or the bottom an upper bound (and neither the other way round); an upper
    bound the other way round; none when they pull both ways or either has no number."""
    if "none" in (top, bottom):
        return "none"
    up = top == "lower" or bottom == "upper"
    down = top == "upper" or bottom == "lower"
    return "none" if up and down else "lower" if up else "upper" if down else "exact"


def combined(verdicts: list[str]) -> str:
    """One verdict from several series': not supported when any is, supported when all are,
    else inconclusive."""
    return (NOT_SUPPORTED if NOT_SUPPORTED in verdicts
            else SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE)


def _num(value) -> float:
    return math.nan if value is None else float(value)


def split_flags(flags: str | None) -> list[str]:
    return [f for f in (flags or "").split("; ") if f]
