"""How a pydantic validation error of a spec is told: one line per problem, naming the field,
the bad value and what is allowed (the allowed fields of a section, the range of a bound)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from pydantic import BaseModel, ValidationError


def describe(
    exc: ValidationError,
    model: type[BaseModel] | None = None,
    homes: Mapping[str, Collection[str]] | None = None,
    section: str = "",
) -> list[str]:
    """One line per problem of a pydantic error, naming the field; with ``model`` (the class
    that was validated), an unknown field lists the allowed ones and a bound gives the whole
    allowed range. With ``homes`` (:func:`belongs_under`) and ``section`` (where ``model``
    sits in the spec, e.g. ``execution``), an unknown field that is a field of another
    section says which one instead."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "spec"
        value = err.get("input")
        msg = err["msg"].removeprefix("Value error, ")
        msg = re.sub(
            r"Input should be a valid dictionary or instance of \w+",
            "must be a mapping of settings",
            msg,
        )
        if model is not None and err["type"] == "extra_forbidden":
            parent = _model_at(model, err["loc"][:-1])
            name = str(err["loc"][-1])
            here = ".".join([section, *map(str, err["loc"][:-1])]).strip(".")
            home = belongs_under(name, here, homes or {})
            if home:
                msg = home
            elif parent is not None:
                msg = f"unknown field{did_you_mean(str(err['loc'][-1]), parent.model_fields)}; allowed: {sorted(parent.model_fields)}"
        elif model is not None and err["type"] in (
            "greater_than",
            "greater_than_equal",
            "less_than",
            "less_than_equal",
        ):
            bounds = _bounds(model, err["loc"])
            if bounds:
                msg = f"{msg} (allowed: {bounds})"
        out.append(f"{loc}: value {value!r}: {msg}" if not isinstance(value, dict) else f"{loc}: {msg}")
    return out


def belongs_under(name: str, here: str, homes: Mapping[str, Collection[str]]) -> str:
    """``pack_size belongs under execution:, not under fixed:`` where ``name``, given under
    section ``here``, is a field of other sections; ``""`` where it is none's.

    Args:
        name: the key as given.
        here: the section it was given in (``fixed``, ``search.tune``; ``""``: the top level).
        homes: the fields of each section by its name (``TOP_LEVEL`` for the top level;
            ``TRIAL_SETTINGS`` for the trial settings, taken under ``fixed`` or ``grid``).
    """
    trial = here in ("fixed", "grid") or here.startswith("grid[")
    places = [
        where
        for where, names in homes.items()
        if name in names and where != here and not (trial and where == TRIAL_SETTINGS)
    ]
    if not places:
        return ""
    shown = [
        "at the top level"
        if where == TOP_LEVEL
        else "under fixed: or grid:"
        if where == TRIAL_SETTINGS
        else f"under {where}:"
        for where in places
    ]
    given = "grid" if here.startswith("grid[") else here
    return f"{name} belongs {', or '.join(shown)}, not " + (f"under {given}:" if given else "at the top level")


TOP_LEVEL = ""
"""The top level's name in :func:`belongs_under`'s ``homes``."""
TRIAL_SETTINGS = "fixed/grid"
"""The trial settings' name in :func:`belongs_under`'s ``homes``."""


def did_you_mean(name: str, known) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to a misspelled ``name``, or ``""``."""
    import difflib

    # A short name differs from its field by a larger share for one stray letter (TT for T: 0.67).
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6 if len(name) <= 4 else 0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The nested model class at ``loc`` (field names) under ``model``, if there is one."""
    import typing

    for part in loc:
        field = model.model_fields.get(str(part)) if isinstance(model, type) else None
        if field is None:
            return None
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _bounds(model: type[BaseModel], loc: tuple) -> str | None:
    """``lo..hi`` (with ``>``/``<`` for open ends) of the numeric field at ``loc``."""
    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(str(loc[-1])) if parent is not None else None
    if field is None:
        return None
    lo = hi = None
    for m in field.metadata:
        for name, side in (("ge", "lo"), ("gt", "lo_open"), ("le", "hi"), ("lt", "hi_open")):
            v = getattr(m, name, None)
            if v is not None:
                if side.startswith("lo"):
                    lo = f"{v:g}" if side == "lo" else f"> {v:g}"
                else:
                    hi = f"{v:g}" if side == "hi" else f"< {v:g}"
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None and not lo.startswith(">") and not hi.startswith("<"):
        return f"{lo}..{hi}"
    return ", ".join(x if x[0] in "<>" else (f">= {x}" if x is lo else f"<= {x}") for x in (lo, hi) if x is not None)
