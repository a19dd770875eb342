"""Bounds on the JSON and YAML a store's records hold, checked before anything parses them.

A run record (``runs/sweep=S/run_id=R/run.parquet``) carries text that readers parse:
``spec_yaml`` (the spec the run ran, YAML), ``cell_counts`` and ``packages`` (JSON), and
``trial_fields`` (comma-separated names). A record is a file anyone with the store can
write, so that text is held to a size in bytes (:data:`RECORD_TEXT_BYTES`) and a nesting
depth (:data:`MAX_DEPTH`) before a parser sees it: without them, 200,000 nested brackets in
``cell_counts`` ended a command in a RecursionError traceback, and a 50 MB ``spec_yaml``
took 99 s to parse. Each refusal names the file and the field (:class:`~results.errors.StoreError`,
exit 2 at the command line).

The caps are far above anything a run writes. Measured on the repository's stores
(docs/findings, 14 runs) and specs (sweeps/, 29 files): the largest ``spec_yaml`` is 3,008
bytes (sweeps/paper.yaml), ``cell_counts`` 14,650 bytes, ``packages`` 181 bytes and
``trial_fields`` 204 bytes; the deepest nesting is 3 levels in ``cell_counts`` (an object of
lists of lists) and 4 in a spec (``grid: {m: {start: ...}}`` inside a list of grid blocks).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from attnsweep.results.errors import StoreError

MAX_DEPTH = 32
"""The deepest nesting of lists and mappings (JSON arrays and objects, YAML sequences and
mappings) a record's text may have: a run writes at most 4."""

MAX_SPEC_YAML_BYTES = 1_000_000
"""The most ``spec_yaml`` may hold: the size a spec file may have
(``orchestrator.spec_loading.MAX_SPEC_BYTES``), and a run stores its spec file's text."""

RECORD_TEXT_BYTES = {
    "spec_yaml": MAX_SPEC_YAML_BYTES,
    "cell_counts": 16 * 2**20,  # about 250,000 cells at the 60 bytes a cell takes
    "packages": 2**20,
    "trial_fields": 2**16,
}
"""The most each text field of a run record may hold, in UTF-8 bytes."""

JSON_FIELDS = ("cell_counts", "packages")
"""A run record's fields that hold JSON."""

YAML_FIELDS = ("spec_yaml",)
"""A run record's fields that hold YAML."""


def json_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """The deepest nesting of arrays and objects in the JSON ``text``, counted without parsing
    it: strings taken out, then the brackets left counted in order (a parser reads as deep as
    this, or fails earlier). An unterminated string runs to the end of the text, as a parser
    reads it, so its brackets do not count. Linear in the text's length: a string is matched
    once and never retried from a later quote (a string that fails to close used to be rescanned
    from each of its quotes: quadratic, 20 s for 80 KB). ``limit`` is not used by the count
    (kept for :func:`yaml_depth`'s shape)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(1 if ch in "[{" else -1 for ch in brackets), default=0)


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def yaml_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """The deepest nesting of sequences and mappings in the YAML ``text``, counted from the
    parser's events (PyYAML's parser keeps its own stack: no recursion, whatever the depth);
    the count stops at ``limit + 1``.

    Raises:
        yaml.YAMLError: the text is not YAML.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = deepest = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return deepest


def check_text(value: Any, field: str, where: str, max_bytes: int, kind: str | None = None) -> None:
    """Refuse the text ``value`` of ``field`` (read from ``where``: a file, a record) beyond
    ``max_bytes`` UTF-8 bytes or, for ``kind`` ``"json"`` or ``"yaml"``, nested deeper than
    :data:`MAX_DEPTH`; None and non-text values pass (their readers check their types).

    Raises:
        StoreError: naming ``where``, ``field`` and the bound.
    """
    if not isinstance(value, str):
        return
    if len(value) > max_bytes or len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise StoreError(
            f"{where}: {field} holds {len(value.encode('utf-8', 'surrogatepass')):,} bytes, more than the "
            f"{max_bytes:,} it may (a run writes far less): the record is not one a run wrote; nothing was read from it"
        )
    if kind is None:
        return
    try:
        depth = json_depth(value) if kind == "json" else yaml_depth(value)
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError (yaml is imported only for YAML)
        problem = " ".join(str(getattr(exc, "problem", None) or type(exc).__name__).split())
        if "nesting depth" not in problem:  # libyaml stops at 1,000 levels itself
            raise StoreError(f"{where}: {field} is not YAML ({problem}); nothing was read from it") from None
        depth = MAX_DEPTH + 1
    if depth > MAX_DEPTH:
        raise StoreError(
            f"{where}: {field} is {kind.upper()} nested more than {MAX_DEPTH} levels deep (a run writes at most "
            "4): the record is not one a run wrote; nothing was read from it"
        )


def check_record(record: dict[str, Any], where: str) -> None:
    """Hold a run record's text fields to :data:`RECORD_TEXT_BYTES` and its JSON and YAML to
    :data:`MAX_DEPTH`, before anything parses them.

    Raises:
        StoreError: a field beyond its bound, naming ``where`` (the record's file) and the field.
    """
    for field, max_bytes in RECORD_TEXT_BYTES.items():
        kind = "json" if field in JSON_FIELDS else "yaml" if field in YAML_FIELDS else None
        check_text(record.get(field), field, where, max_bytes, kind)


def load_json(text: str, field: str, where: str, max_bytes: int) -> Any:
    """``json.loads(text)`` once :func:`check_text` has held it to ``max_bytes`` and
    :data:`MAX_DEPTH`.

    Raises:
        StoreError: beyond a bound, or not JSON; naming ``where`` and ``field``.
    """
    check_text(text, field, where, max_bytes, "json")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreError(f"{where}: {field} is not JSON ({exc.msg}, character {exc.pos})") from None
