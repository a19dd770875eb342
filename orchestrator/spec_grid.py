"""A spec's grid and trial settings: grid blocks expanded into axes (lists and ranges), each
value validated on its own, the seeds, and the checks of the trials they combine into
(cross-field rules, overlapping blocks, the trial limit)."""

from __future__ import annotations

import collections
import functools
import itertools
import json
import math
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec_problems import belongs_under, describe, did_you_mean
from attnsweep.workers import Experiment
from attnsweep.workers.config import StrictSettings, whole_float

MAX_GRID_BLOCKS = 1000
"""Grid blocks a spec may have (each is checked against every other for overlap)."""
MAX_AXIS_VALUES = 100_000
"""Axis values all grid blocks may list together (a range counts its ``num``), checked
before any is built or validated: each is validated on its own, so this bounds the time
and memory of a spec check whatever the trial count."""


class RangeAxis(StrictSettings):
    """A numeric axis given by its ends: ``num`` points from ``start`` to ``stop``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    start: float
    stop: float
    num: int = Field(ge=1, le=10_000)
    scale: Literal["log", "linear"] = "log"

    @model_validator(mode="after")
    def _upward(self) -> RangeAxis:
        if self.stop < self.start or (self.num > 1 and self.stop == self.start):
            raise ValueError(
                f"stop ({self.stop:g}) must be greater than start ({self.start:g}): a range runs "
                "upward from start to stop (list the values for any other order)"
            )
        return self


def grid_blocks(
    exp: Experiment,
    raw_grid: Any,
    fixed: dict,
    chosen: dict[str, str],
    problems: list[str],
    source: str,
    homes: Mapping[str, Collection[str]] | None = None,
) -> list[dict[str, list]]:
    """The ``grid`` section's blocks (one when it is a mapping), each validated; ``chosen``:
    settings an adaptive search picks itself (see :func:`_grid_block`); ``homes``: the fields
    of the other sections, named where one is given here (:func:`~orchestrator.spec_problems.belongs_under`).

    Raises:
        SpecError: more than :data:`MAX_GRID_BLOCKS` blocks, or more than
            :data:`MAX_AXIS_VALUES` axis values in all (both counted before any value is built).
    """
    if isinstance(raw_grid, list) and not raw_grid:
        problems.append("grid: an empty list of blocks; give at least one mapping")
    blocks = raw_grid if isinstance(raw_grid, list) else [raw_grid if raw_grid is not None else {}]
    if len(blocks) > MAX_GRID_BLOCKS:
        raise SpecError(
            [
                f"grid: {len(blocks)} blocks, more than the {MAX_GRID_BLOCKS} allowed; give one block per "
                "set of axes (a block's axes already combine every value)"
            ],
            source,
        )
    listed = sum(_axis_length(v) for block in blocks if isinstance(block, dict) for v in block.values())
    if listed > MAX_AXIS_VALUES:
        raise SpecError(
            [
                f"grid: its blocks list {listed:,} axis values in all (a range counts its num), more than the "
                f"{MAX_AXIS_VALUES:,} allowed: no sweep needs that many values of its settings"
            ],
            source,
        )
    return [
        _grid_block(
            exp,
            f"grid[{i}]" if isinstance(raw_grid, list) else "grid",
            block,
            fixed,
            problems,
            chosen,
            homes,
        )
        for i, block in enumerate(blocks)
    ]


def fixed_settings(
    exp: Experiment, fixed: dict, problems: list[str], homes: Mapping[str, Collection[str]] | None = None
) -> dict[str, Any]:
    """The ``fixed`` section without its unknown settings, each value validated on its own
    (``homes``: as :func:`grid_blocks` takes them)."""
    fixed = {k: v for k, v in fixed.items() if _known(exp, "fixed", k, problems, homes)}
    problems += _check_values(exp, "fixed", {k: [v] for k, v in fixed.items()})
    return fixed


def trial_problems(spec, max_trials: int | None) -> list[str]:
    """What is wrong with the trials of ``spec``, a valid :class:`~orchestrator.spec.SweepSpec`
    (that module imports this one): more than ``max_trials`` of them (counted, not listed);
    else combinations that break a cross-field rule, then blocks that share trials."""
    problems = []
    n = spec.n_trials()
    if max_trials is not None and n > max_trials:
        what = (
            f"the adaptive search may run up to {n} trials" if spec.search.adaptive else f"grid expands to {n} trials"
        )
        problems.append(f"{what}, more than the limit {max_trials}; raise --max-trials to confirm")
    else:
        problems += _check_combinations(spec)
        if not problems and len(spec.grids) > 1:
            problems += _overlaps(spec)
    return problems


def chosen_by_search(search, raw: Any) -> dict[str, str]:
    """Trial settings an adaptive search chooses itself, each with why it may not be given
    (from the raw section when it is invalid, so its problems are not repeated as 'm: required').
    ``search``: the section as :class:`~orchestrator.spec.SearchSettings`, None when invalid."""
    meant = (
        search.adaptive
        if search is not None
        else (isinstance(raw, dict) and (raw.get("mode") == "adaptive" or "m" in raw))
    )
    if not meant:
        return {}
    chosen = {"m": "the adaptive search chooses m (give its range as search.m: {min, max})"}
    if search is not None and search.tune is not None:
        chosen |= {
            k: f"search.tune tunes {k} per cell, against the spec's value in fixed (set its range in "
            f"search.tune.{k}, or null to fix it)"
            for k in search.tune.params()
        }
    return chosen


def seed_list(value: Any, problems: list[str]) -> list[int]:
    """The ``seeds`` setting as a list: a count ``n`` is seeds 0..n-1."""
    if isinstance(value, bool) or not isinstance(value, int | list):
        problems.append(f"seeds: must be a count (int >= 1) or a list of ints >= 0, got {value!r}")
        return []
    if isinstance(value, int):
        if not 1 <= value <= 1_000_000:
            problems.append(f"seeds: count must be between 1 and 1000000, got {value}")
            return []
        return list(range(value))
    if not value or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**62 for s in value):
        problems.append(f"seeds: list must hold ints in [0, 2^62), got {value!r}")
        return []
    if len(set(value)) != len(value):
        problems.append("seeds: list has duplicates")
    return list(value)


def _grid_block(
    exp: Experiment,
    where: str,
    block: Any,
    fixed: dict,
    problems: list[str],
    chosen: dict[str, str] | None = None,
    homes: Mapping[str, Collection[str]] | None = None,
) -> dict[str, list]:
    """One mapping of axes, validated; problems are prefixed with ``where``. ``chosen``:
    settings an adaptive search picks itself (not allowed as axes, not required); ``homes``:
    as :func:`grid_blocks` takes them."""
    chosen = chosen or {}
    if not isinstance(block, dict):
        problems.append(f"{where}: must be a mapping of trial settings to values, got {type(block).__name__}")
        return {}
    block = {str(k): v for k, v in block.items()}
    for key in sorted(chosen.keys() & block.keys()):
        problems.append(f"{where}.{key}: {chosen[key]}; remove it from the grid")
        del block[key]
    for key in sorted(set(block) & set(fixed)):
        problems.append(f"{key}: given in both {where} and fixed; put it in one")
    axes = {
        k: _axis(exp, f"{where}.{k}", k, v, problems)
        for k, v in block.items()
        if _known(exp, where, k, problems, homes)
    }
    for key, values in axes.items():
        if not values and isinstance(block[key], list):
            problems.append(f"{where}.{key}: needs at least one value")
    for field, info in exp.config.model_fields.items():
        if field != "seed" and info.is_required() and field not in axes and field not in fixed and field not in chosen:
            problems.append(f"{field}: required, in {where} or fixed")
    problems += _check_values(exp, where, axes)
    return axes


def _trial_fields(exp: Experiment, shown: bool = False) -> list[str]:
    """The settings a spec may give (``shown``: those listed to users; ``fault`` is for tests)."""
    return [f for f in exp.config.model_fields if f != "seed" and not (shown and f == "fault")]


def _known(
    exp: Experiment, section: str, key: str, problems: list[str], homes: Mapping[str, Collection[str]] | None
) -> bool:
    if key in _trial_fields(exp):
        return True
    where = f"{section}.{key}"
    home = belongs_under(key, section, homes or {})
    if home:
        problems.append(f"{where}: {home}")
        return False
    hint = " (use the top-level 'seeds')" if key == "seed" else did_you_mean(key, _trial_fields(exp, shown=True))
    problems.append(f"{where}: unknown {exp.name} trial setting{hint}; allowed: {_trial_fields(exp, shown=True)}")
    return False


def _axis(exp: Experiment, where: str, key: str, value: Any, problems: list[str]) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        try:
            r = RangeAxis(**value)
        except (ValidationError, TypeError) as exc:
            problems += (
                [
                    f"{where}: {p.removeprefix('spec: ')}" if p.startswith("spec: ") else f"{where}.{p}"
                    for p in describe(exc, RangeAxis)
                ]
                if isinstance(exc, ValidationError)
                else [f"{where}: {exc}"]
            )
            return []
        if r.scale == "log" and (r.start <= 0 or r.stop <= 0):
            problems.append(f"{where}: a log-scale range needs start > 0 and stop > 0")
            return []
        pts = np.geomspace(r.start, r.stop, r.num) if r.scale == "log" else np.linspace(r.start, r.stop, r.num)
        if exp.config.model_fields[key].annotation in (int, int | None):
            return list(dict.fromkeys(int(round(p)) for p in pts))
        return [float(p) for p in pts]
    return [value]


def _axis_length(value: Any) -> int:
    """How many values an axis as written lists, without building them: a list its length,
    a range its ``num`` (when it is a whole number; a bad one is refused later), else 1."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        num = value.get("num")
        return num if isinstance(num, int) and not isinstance(num, bool) and num > 0 else 1
    return 1


def _check_values(exp: Experiment, where: str, axes: dict[str, list]) -> list[str]:
    """Validate each value of each axis on its own, so that errors name the exact field
    and value."""
    problems = []
    for key, values in axes.items():
        annotation = exp.config.model_fields[key].annotation
        numeric = annotation in (int, float, int | None, float | None)
        coerced = []
        for value in values:
            if isinstance(value, bool) and annotation is not bool:
                problems.append(f"{where}.{key}: value {value!r}: a boolean is not allowed here")
                continue
            if isinstance(value, str) and numeric:
                problems.append(f"{where}.{key}: value {value!r}: a number is required, not a string")
                continue
            try:
                config: type[BaseModel] = exp.config  # a class is hashable: the adapters are cached per config
                coerced.append(_field_adapter(config, key).validate_python(whole_float(annotation, value)))
            except ValidationError as exc:
                for err in exc.errors():
                    allowed = " (allowed: true or false)" if err["type"].startswith("bool") else ""
                    shown = "null" if value is None else repr(value)  # as the YAML spelled it
                    problems.append(
                        f"{where}.{key}: value {shown}: {err['msg'].removeprefix('Value error, ')}{allowed}"
                    )
        counts = collections.Counter(coerced)  # axis values are scalars (hashable)
        repeated = sorted({repr(v) for v in coerced if counts[v] > 1})
        if repeated:
            problems.append(f"{where}.{key}: repeated value(s) {', '.join(repeated)}; each trial would run twice")
        values[:] = coerced if len(coerced) == len(values) else values
    return problems


@functools.cache
def _field_adapter(config: type[BaseModel], key: str) -> TypeAdapter:
    """Validates one field on its own (type and bounds, not the cross-field rules, which
    :func:`_check_combinations` applies to whole combinations)."""
    info = config.model_fields[key]
    return TypeAdapter(Annotated[info.annotation, info], config=ConfigDict(allow_inf_nan=False, strict=True))


def _overlaps(spec) -> list[str]:
    """Blocks of the grid that share trials, counted without listing any: a block is the
    product of one value set per setting (its axis, else ``fixed``, else the default), so two
    blocks share the product of their sets' intersections (times the seeds, which all
    blocks share; for an adaptive search, cells)."""
    fields = [
        f for f in spec.family.config.model_fields if f not in ("seed", "m") or (f == "m" and not spec.search.adaptive)
    ]
    defaults = {k: v.default for k, v in spec.family.config.model_fields.items()}

    def norm(v: Any) -> Any:
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else json.dumps(v, default=str)

    blocks = [
        {f: {norm(v) for v in grid[f]} if f in grid else {norm(spec.fixed.get(f, defaults.get(f)))} for f in fields}
        for grid in spec.grids
    ]
    per = 1 if spec.search.adaptive else len(spec.seeds)
    # The settings that tell blocks apart first: most pairs then stop at the first field.
    fields.sort(key=lambda f: -len({frozenset(b[f]) for b in blocks}))
    out = []
    for i, j in itertools.combinations(range(len(blocks)), 2):
        a, b = blocks[i], blocks[j]
        if any(a[f].isdisjoint(b[f]) for f in fields):
            continue
        shared = math.prod(len(a[f] & b[f]) for f in fields) * per
        if shared:
            what = "cells" if spec.search.adaptive else "trials"
            out.append(f"grid: the blocks overlap: blocks {i} and {j} share {shared} {what}")
    return out


def _check_combinations(spec) -> list[str]:
    """Cross-field rules (T > s, heads divide d, ...) over the distinct combinations of the
    experiment's ``cross_fields`` on the grid; other axes take their first value."""
    problems = []
    cross = spec.family.cross_fields
    seen = set()
    searched = {"m": spec.search.m.min} if spec.search.adaptive else {}
    for grid in spec.grids:
        names = [k for k in cross if k in grid]
        first = {k: v[0] for k, v in grid.items() if k not in cross}
        for values in itertools.product(*(grid[k] for k in names)):
            try:
                spec.family.config(
                    **{**spec.fixed, **first, **dict(zip(names, values, strict=True)), **searched, "seed": 0}
                )
            except ValidationError as exc:
                for err in exc.errors():
                    msg = err["msg"].removeprefix("Value error, ")
                    if msg not in seen:
                        seen.add(msg)
                        problems.append(f"{msg.split()[0]}: {msg}")  # messages start with the field
    return problems
