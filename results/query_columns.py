"""The columns of a query's result: unique names, and each column given as the output needs
(:data:`Convert`; HUGEINT as text, which Arrow cannot hold).
"""

from __future__ import annotations

from collections.abc import Callable

from attnsweep.results.errors import QueryError
from attnsweep.results.query_sandbox import one_line

Convert = Callable[[object, str], "str | None"]
"""``convert(duckdb_type, column)``: the SQL expression a result column of that DuckDB type
is given as (``column`` is its positional reference, e.g. ``#1``), or None to keep it."""


def hugeint_as_text(convert: Convert | None) -> Convert:
    """``convert`` with HUGEINT columns (alone, or in a list, array, struct or map) given as
    DuckDB's text of the value first. Arrow has no 128-bit integer: DuckDB exports a HUGEINT
    as a 38-digit decimal, which cannot hold its 39-digit values (-2^127 .. 2^127 - 1), so a
    Parquet file of one fails pyarrow's validation and DuckDB's own reading of it. DuckDB's
    ``sum`` of integers is a HUGEINT; ``CAST(... AS BIGINT)`` in the query keeps it a number."""
    import duckdb

    def wrapped(kind, column: str) -> str | None:
        text = _hugeint_to_varchar(kind)
        if text is None:
            return convert(kind, column) if convert is not None else None
        expr = f"CAST({column} AS {text})"
        outer = convert(duckdb.sqltype(text), f"({expr})") if convert is not None else None
        return outer or expr

    return wrapped


def _hugeint_to_varchar(kind) -> str | None:
    """``kind``'s DuckDB type with each HUGEINT in it made VARCHAR, or None when it holds none
    (a UNION is left whole: every format writes one as its text already)."""
    tid = kind.id
    if tid == "hugeint":
        return "VARCHAR"
    if tid in ("list", "array"):
        inner = _hugeint_to_varchar(kind.children[0][1])
        if inner is None:
            return None
        return f"{inner}[]" if tid == "list" else f"{inner}[{kind.children[1][1]}]"
    if tid == "struct":
        fields = [(name, child, _hugeint_to_varchar(child)) for name, child in kind.children]
        if all(text is None for *_, text in fields):
            return None
        return "STRUCT(" + ", ".join(f"{quote_identifier(n)} {text or child}" for n, child, text in fields) + ")"
    if tid == "map":
        (_, key), (_, value) = kind.children
        key_text, value_text = _hugeint_to_varchar(key), _hugeint_to_varchar(value)
        if key_text is None and value_text is None:
            return None
        return f"MAP({key_text or key}, {value_text or value})"
    return None


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (a ``"`` in it doubled)."""
    return '"' + name.replace('"', '""') + '"'


def projected(rel, convert: Convert | None):
    """``rel`` with unique column names (:func:`unique_names`) and each column given as
    ``convert`` says.

    Raises:
        QueryError: a column DuckDB cannot convert, naming it and its type.
    """
    names = unique_names(rel.columns)
    converted = [convert(kind, f"#{i}") if convert is not None else None for i, kind in enumerate(rel.types, start=1)]
    if names == rel.columns and not any(converted):
        return rel  # as it is: DuckDB's messages then point at the lines of the statement as written
    exprs = [
        f"{expr or f'#{i}'} AS {quote_identifier(name)}"
        for i, (name, expr) in enumerate(zip(names, converted, strict=True), start=1)
    ]
    try:
        return rel.project(", ".join(exprs))
    except Exception:  # noqa: BLE001 - find the column, then say it in one line
        import duckdb

        for name, expr, kind in zip(names, exprs, rel.types, strict=True):
            try:
                rel.project(expr)
            except duckdb.Error as exc:
                raise QueryError(f"column {name!r} of type {kind} cannot be written: {one_line(exc)}") from None
        raise


def unique_names(names: list[str]) -> list[str]:
    """Result column names made unique for the output formats (``SELECT 1 AS a, 2 AS a``
    gives ``a`` and ``a_2``)."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, i = name, 1
        while candidate in seen:
            i += 1
            candidate = f"{name}_{i}"
        seen.add(candidate)
        out.append(candidate)
    return out
