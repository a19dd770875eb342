"""One schema for files written by different versions, and the files that cannot join it.

Files of a table may differ: a column added later (older files read it as null), an int
column that became a float, an all-null column typed ``null``, a narrower int or float, a
dictionary-encoded string. :func:`merge_type` says which of these two types read as one
(the wider), and :func:`unify` builds the table's schema from its files' schemas. A file
with a column whose type cannot join (a metric written as a string, a timestamp with
another unit) is left out and named, with the column and both types, so that one odd file
never hides the others. Which side is "odd" is decided by rows: the schemas are merged in
order of how many rows carry them, so the types most rows have win.

Every promotion accepted here is one polars' scan casts (:data:`POLARS_CASTS`) and
pyarrow's dataset scan casts, so what unifies also reads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

import pyarrow as pa
import pyarrow.types as pt


class PolarsCasts(TypedDict):
    """The ``polars.ScanCastOptions`` arguments this module sets, typed as polars takes them."""

    integer_cast: list[Literal["upcast", "allow-float", "forbid"]]
    float_cast: Literal["upcast", "downcast", "forbid"]
    categorical_to_string: Literal["allow", "forbid"]


POLARS_CASTS = PolarsCasts(integer_cast=["upcast", "allow-float"], float_cast="upcast", categorical_to_string="allow")
"""``polars.ScanCastOptions`` arguments for the promotions :func:`merge_type` accepts."""


@dataclass(frozen=True)
class Conflict:
    """A column whose type in one file cannot join the type the other files give it."""

    column: str
    here: pa.DataType
    elsewhere: pa.DataType

    def __str__(self) -> str:
        return f"its column {self.column} is {self.here}, but {self.elsewhere} in the store's other files"


def _plain(t: pa.DataType) -> pa.DataType:
    """The type a reader sees: dictionary-encoded as its values, every string as ``string``."""
    if pt.is_dictionary(t):
        t = t.value_type
    if pt.is_large_string(t) or pt.is_string_view(t):
        return pa.string()
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_list_view(t) or pt.is_large_list_view(t):
        return pa.list_(_plain(t.value_type))
    return t


def merge_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type that holds every value of both ``a`` and ``b`` without loss, or None.

    Equal types, ``null`` with anything, two ints (the wider; an unsigned one only into a
    wider signed one), an int and a float or two floats (``float64``), two strings, and lists
    of such. Anything else (string and double, bool and int, two timestamp units) is None.
    """
    a, b = _plain(a), _plain(b)
    if a.equals(b):
        return a
    if pt.is_null(a):
        return b
    if pt.is_null(b):
        return a
    if pt.is_integer(a) and pt.is_integer(b):
        if pt.is_signed_integer(a) == pt.is_signed_integer(b):
            return a if a.bit_width >= b.bit_width else b
        signed, unsigned = (a, b) if pt.is_signed_integer(a) else (b, a)
        return signed if signed.bit_width > unsigned.bit_width else None
    if (pt.is_integer(a) or pt.is_floating(a)) and (pt.is_integer(b) or pt.is_floating(b)):
        return pa.float64()
    if pt.is_list(a) and pt.is_list(b):
        inner = merge_type(a.value_type, b.value_type)
        return None if inner is None else pa.list_(inner)
    return None


def unify(
    schemas: Sequence[tuple[Hashable, pa.Schema, int]],
) -> tuple[pa.Schema, dict[Hashable, Conflict]]:
    """The schema of a table whose files have ``schemas``, and the files left out.

    Args:
        schemas: ``(key, schema, rows)`` per file (``key`` names it, e.g. its path).

    Returns:
        ``(schema, conflicts)``: the merged schema (columns in first-seen order, types
        promoted by :func:`merge_type`) and, for each file that could not join, the first
        column that did not. Files sharing a schema join or stay out together; the schemas
        carried by the most rows merge first.
    """
    groups: dict[pa.Schema, list] = {}
    plain_of: dict[pa.Schema, pa.Schema] = {}  # files mostly share a schema: each is made plain once
    for i, (key, schema, rows) in enumerate(schemas):
        if schema not in plain_of:
            plain_of[schema] = pa.schema([pa.field(f.name, _plain(f.type)) for f in schema])
        group = groups.setdefault(plain_of[schema], [0, i, []])
        group[0] += rows
        group[2].append(key)
    merged: dict[str, pa.DataType] = {}
    conflicts: dict[Hashable, Conflict] = {}
    for schema, (_, _, keys) in sorted(groups.items(), key=lambda g: (-g[1][0], g[1][1])):
        update, conflict = {}, None
        for f in schema:
            if f.name not in merged:
                update[f.name] = f.type
            elif (t := merge_type(merged[f.name], f.type)) is not None:
                update[f.name] = t
            else:
                conflict = Conflict(f.name, f.type, merged[f.name])
                break
        if conflict is not None:
            conflicts.update(dict.fromkeys(keys, conflict))
        else:
            merged.update(update)
    order: dict[str, int] = {}
    for _, schema, _ in schemas:
        for name in schema.names:
            order.setdefault(name, len(order))
    return pa.schema([(n, merged[n]) for n in sorted(merged, key=order.__getitem__)]), conflicts
