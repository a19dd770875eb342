"""What a verdict is, in both experiments (the sparse-Boolean claims L1-L4 and R, the
symmetry claims S1-S4): the four verdicts, the smallest effect that counts, a number as
verdicts.json carries it, the bound of a ratio of bounded values, and one verdict from several.
"""

from __future__ import annotations

import math
from typing import NotRequired, SupportsFloat, SupportsInt, TypedDict

import numpy as np

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED = (
    "supported",
    "not supported",
    "inconclusive",
    "not tested",
)
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED)
"""The four verdicts: the data support the claim, contradict it, cannot decide it, or do not test it."""


class Quantity(TypedDict):
    """A number as verdicts.json carries it (:func:`quantity`): ``estimate`` (for a bound, the
    bound's value; None where there is no number), ``ci_lo`` and ``ci_hi`` (its interval, None
    where open) and ``bound`` (``exact``, ``lower``, ``upper`` or ``none``)."""

    estimate: float | None
    ci_lo: float | None
    ci_hi: float | None
    bound: str


class Flag(TypedDict):
    """A flagged cell a statistic used: ``flag`` (e.g. ``budget-limited``, ``non-monotone``)
    and ``cell`` (the settings that name the cell)."""

    flag: str
    cell: dict[str, object]


class Series(TypedDict, total=False):
    """One judged series of a verdict: ``cells`` (the settings that name it, e.g.
    ``{"s": 3, "norm_bound": None}``), its own ``verdict``, ``statistic``, ``interval`` and
    ``why``, and ``numbers`` (the statistic as numbers: :class:`Quantity` values, counts and
    parameters; per claim in stats/boolean_verdicts.py and stats/symmetry.py)."""

    cells: dict[str, object]
    verdict: str
    statistic: str
    interval: str
    why: str
    numbers: dict[str, object]
    flags: list[Flag]


class Verdict(TypedDict):
    """One claim's verdict, in both experiments, as the report, verdicts.json, the API
    (``judge_runs``) and the terminal read it: ``id`` (``L1`` ... ``S4``), ``claim`` (its
    text), ``verdict`` (one of :data:`VERDICTS`), ``statistic``, ``interval`` and ``why`` (the
    same as sentences, for people), ``series`` (one per judged series), ``not_judged`` (the
    settings of series named but not judged) and ``flags`` (every flagged cell it used)."""

    id: str
    claim: str
    statistic: str
    interval: str
    verdict: str
    why: str
    series: list[Series]
    not_judged: list[dict[str, object]]
    flags: list[Flag]
    estimators: NotRequired[dict[str, str]]
    origin: NotRequired[str]
    """``spec`` for a claim of the run's spec (stats/own_claims.py); absent for the paper's."""


EFFECT_SLOPE = 0.05
"""The smallest log-log slope that counts as "grows" or "falls" (docs/claims.md 2): a
factor 10^0.05 = 1.12 per tenfold change of the axis. A slope whose interval lies inside
(-0.05, 0.05) is flat: it barely moves."""
EFFECT_RATIO = 10**EFFECT_SLOPE
"""The smallest ratio of m* between the largest and the smallest value of a setting that
counts as "m* grows with it" (L2, L3): 12% more samples."""


def quantity(estimate: float, lo: float = math.nan, hi: float = math.nan, bound: str = "exact") -> Quantity:
    """A number as verdicts.json carries it: ``estimate`` (for a bound, the bound's value),
    ``ci_lo``, ``ci_hi`` and ``bound`` (``exact``; ``lower``: the true value is above
    ``estimate``; ``upper``: at or below it; ``none``: no number)."""
    return Quantity(estimate=_num(estimate), ci_lo=_num(lo), ci_hi=_num(hi), bound=bound)


def number(value: object) -> float:
    """A numeric polars scalar (``Series.min()``, ``max()``, ``item()``, a row's value) as a
    float: polars types these as any Python literal; anything without ``__float__`` (None from an
    empty column among them) is the TypeError ``float()`` would raise."""
    if isinstance(value, SupportsFloat):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def whole(value: object) -> int:
    """:func:`number` for a whole number: ``int(value)``, or the TypeError ``int()`` would raise."""
    if isinstance(value, SupportsInt):
        return int(value)
    raise TypeError(f"not a number: {value!r}")


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
    return (
        NOT_SUPPORTED
        if NOT_SUPPORTED in verdicts
        else SUPPORTED
        if all(v == SUPPORTED for v in verdicts)
        else INCONCLUSIVE
    )


def _num(value) -> float:
    return math.nan if value is None else float(value)


def split_flags(flags: str | None) -> list[str]:
    return [f for f in (flags or "").split("; ") if f]
