"""The ``claims:`` section of a sweep spec: the researcher's own hypotheses over the sweep's own
axes, judged by ``analyze`` and ``report`` with the rules of the paper's claims
(stats/own_claims.py) and shown before them.

Three kinds (docs/spec.md, "claims")::

    claims:
      - {id: mine-1, kind: growth, axis: T, law: log}          # m* grows along T like a + b ln T
      - {id: mine-2, kind: fewer_samples, axis: model, less: transformer, more: mlp}
      - {id: mine-3, kind: trend, quantity: test_error, along: m, direction: falls}

A claim's axis must be an axis of the spec's grid; ``fewer_samples``' two values must be values
of it; a ``growth`` axis must be numeric (its values > 0: the laws take logarithms). ``growth``
and ``fewer_samples`` judge m*, which sparse-Boolean runs measure with the rules they are judged
by; a symmetry run takes ``trend`` claims.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, ValidationError

from attnsweep.orchestrator.spec_problems import describe
from attnsweep.workers.config import StrictSettings
from attnsweep.workers.experiments import EXPERIMENTS

LAWS = ("log", "polylog", "linear", "power")
"""The growth laws a ``growth`` claim names (stats/fits.py ``MODELS``: a + b ln T, a (ln T)^k,
a + b T, a T^c)."""
PAPER_IDS = ("L1", "L2", "L3", "L4", "R", "S1", "S2", "S3", "S4")
"""The paper's claims' ids, which a spec's claim may not take."""
M_STAR_KINDS = ("growth", "fewer_samples")
"""Kinds that judge m* (of a sparse-Boolean run)."""

_ID = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"


class _Claim(StrictSettings):
    _position: int | None = PrivateAttr(None)
    id: str = Field(pattern=_ID, description="the claim's name in the report (letters, digits, '_', '.', '-')")
    text: str = Field("", max_length=500, description="the hypothesis in words (default: made from the fields)")


class GrowthClaim(_Claim):
    """m* grows along ``axis`` like ``law``: judged as L1 (stats/own_claims.py ``growth``)."""

    kind: Literal["growth"]
    axis: str = Field(description="the grid axis m* grows along (numeric, e.g. T)")
    law: Literal["log", "polylog", "linear", "power"] = Field(description="the growth law m* follows")

    def words(self) -> str:
        law = {"log": "a + b ln x", "polylog": "a (ln x)^k", "linear": "a + b x", "power": "a x^c"}[self.law]
        return self.text or f"m* grows along {self.axis} like {law.replace('x', self.axis)} ({self.law})"


class FewerSamplesClaim(_Claim):
    """m* at ``axis`` = ``less`` lies below m* at ``axis`` = ``more`` in every cell that differs only
    there (stats/own_claims.py ``fewer_samples``)."""

    kind: Literal["fewer_samples"]
    axis: str = Field(description="the grid axis whose two values are compared (e.g. model)")
    less: str | int | float | bool | None = Field(description="the value that needs fewer samples")
    more: str | int | float | bool | None = Field(description="the value that needs more samples")

    def words(self) -> str:
        return self.text or f"{self.axis}={self.less} needs fewer samples than {self.axis}={self.more}"


class TrendClaim(_Claim):
    """``quantity`` falls (rises) as ``along`` grows (stats/own_claims.py ``trend``)."""

    kind: Literal["trend"]
    quantity: str = Field(description="a per-trial measurement (workers/experiments.py claim_quantities)")
    along: str = Field("m", description="the axis it moves along (default m)")
    direction: Literal["falls", "rises"] = Field(description="falls or rises")

    def words(self) -> str:
        return self.text or f"{self.quantity} {self.direction} as {self.along} grows"


Claim = Annotated[GrowthClaim | FewerSamplesClaim | TrendClaim, Field(discriminator="kind")]
KINDS = ("growth", "fewer_samples", "trend")


def read_claims(value: Any) -> tuple[list[GrowthClaim | FewerSamplesClaim | TrendClaim], list[str]]:
    """The ``claims`` section (a list of mappings; absent or null: none) validated by shape:
    ``(claims, problems)``: the claims that are valid, and one problem per fault, each naming
    ``claims[i].field``, the value and what is allowed. A valid claim's ``position`` is its
    index in the section (for :func:`claim_problems`' messages)."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [f"claims: must be a list of claims (each with id and kind: one of {list(KINDS)})"]
    models: dict[str, type[GrowthClaim | FewerSamplesClaim | TrendClaim]] = {
        "growth": GrowthClaim,
        "fewer_samples": FewerSamplesClaim,
        "trend": TrendClaim,
    }
    claims, problems = [], []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            problems.append(f"claims[{i}]: must be a mapping with id and kind (one of {list(KINDS)})")
            continue
        cid = item.get("id")
        named = f" ({cid})" if isinstance(cid, str) and re.fullmatch(_ID, cid) else ""  # as claim_problems names it
        model = models.get(item.get("kind"))  # type: ignore[arg-type]
        if model is None:
            problems.append(f"claims[{i}]{named}.kind: value {item.get('kind')!r}: must be one of {list(KINDS)}")
            continue
        try:
            claim = model.model_validate({str(k): v for k, v in item.items()})
            claim._position = i
            claims.append(claim)
        except ValidationError as exc:
            problems += [f"claims[{i}]{named}.{p}" for p in describe(exc, model)]
    return claims, problems


def claim_problems(
    claims: list[GrowthClaim | FewerSamplesClaim | TrendClaim],
    grids: list[dict[str, list[Any]]],
    experiment: str,
) -> list[str]:
    """What the claims ask of the grid that it does not have: an axis that is not one of its
    axes, a value not on the axis, a growth axis that is not numeric and positive, an unknown
    quantity, a repeated id or one of the paper's. Each problem names the claim's id."""
    axes: dict[str, list[Any]] = {}
    for block in grids:
        for name, values in block.items():
            axes.setdefault(name, [])
            axes[name] += [v for v in values if v not in axes[name]]
    allowed = sorted(a for a in axes if a not in ("m", "seed"))
    kind = EXPERIMENTS.get(experiment)  # None: an unknown experiment, said by the spec's own check
    problems, seen = [], set()
    for i, c in enumerate(claims):
        where = f"claims[{i if c._position is None else c._position}] ({c.id})"
        if c.id in PAPER_IDS:
            problems.append(f"{where}.id: {c.id!r} is a claim of the paper; give your own name")
        if c.id in seen:
            problems.append(f"{where}.id: {c.id!r} is used twice; each claim needs its own")
        seen.add(c.id)
        if isinstance(c, (GrowthClaim, FewerSamplesClaim)):
            if kind is not None and not kind.m_star_claims:
                judged = [name for name, e in EXPERIMENTS.items() if e.m_star_claims]
                problems.append(
                    f"{where}.kind: {c.kind} judges m*, which claims judge on {' and '.join(judged)} runs; a "
                    f"{experiment} run takes trend claims"
                )
                continue
            if c.axis in ("m", "seed") and c.axis in axes:  # on the grid, but m* is read over them
                problems.append(
                    f"{where}.axis: value {c.axis!r}: m* is measured over m and the seeds, so a {c.kind} claim "
                    f"compares it along another axis; allowed: {allowed}"
                )
            elif c.axis not in axes or c.axis in ("m", "seed"):
                problems.append(f"{where}.axis: value {c.axis!r}: not an axis of the grid; allowed: {allowed}")
                continue
            values = axes[c.axis]
            if isinstance(c, GrowthClaim):
                numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)
                if not numeric:
                    problems.append(f"{where}.axis: {c.axis!r} has values {values}: a growth law needs numbers above 0")
            else:
                for side in ("less", "more"):
                    v = getattr(c, side)
                    if v not in values:
                        problems.append(f"{where}.{side}: value {v!r}: not a value of {c.axis}; allowed: {values}")
                if c.less == c.more:
                    problems.append(f"{where}.more: value {c.more!r}: the same as less; compare two values")
        else:
            quantities = (
                kind.claim_quantities
                if kind is not None
                else tuple(sorted({q for e in EXPERIMENTS.values() for q in e.claim_quantities}))
            )
            if c.quantity not in quantities:
                problems.append(f"{where}.quantity: value {c.quantity!r}: allowed: {list(quantities)}")
            along = sorted({*allowed, "m"})
            if c.along != "m" and c.along not in allowed:
                problems.append(f"{where}.along: value {c.along!r}: not an axis of the grid; allowed: {along}")
            elif c.along != "m" and not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in axes[c.along]
            ):
                problems.append(f"{where}.along: {c.along!r} has values {axes[c.along]}: a trend needs numbers above 0")
    return problems
