"""Overrides of a spec from the command line: ``--set grid.T=[16,64,256] --set seeds=8``.

Each override is a dotted path into the spec's YAML and a value read as the spec file's own
YAML is read (:func:`~orchestrator.spec_loading.read_yaml`: YAML 1.2's scalars, no aliases,
at most :data:`~orchestrator.spec_loading.MAX_SPEC_BYTES` bytes). The values are put into the
file's mapping, which is written out again as YAML (:func:`resolve`) and validated as a whole,
as a file is: the resolved text is what a run records (``spec_yaml``, ``spec_hash``) and what
a submitted job runs, so that resume, report and replicate see the spec that ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import yaml

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec_loading import (
    MAX_SPEC_BYTES,
    TOP_KEYS,
    _NoAliasLoader,
    _yaml_problem,
    read_yaml,
)
from attnsweep.orchestrator.spec_problems import belongs_under, did_you_mean

MAX_OVERRIDES = 1000
"""``--set`` options one command may give."""
MAX_DEPTH = 8
"""Parts of an override's path at most (``search.tune.lr.min`` has four)."""
_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}|[0-9]{1,6}")


def parse_overrides(texts: Sequence[str], source: str) -> list[tuple[str, Any]]:
    """Each ``PATH=VALUE`` of ``texts`` as ``(PATH, value)``, the value read as spec YAML.

    Args:
        texts: the ``--set`` options as given.
        source: the spec file, named in the error.

    Raises:
        SpecError: more than :data:`MAX_OVERRIDES` of them; one without ``=``, with a path
            that is not dotted names (or list indices), a value larger than
            :data:`MAX_SPEC_BYTES` bytes, or a value that is not such YAML; each problem
            names its ``--set``.
    """
    if len(texts) > MAX_OVERRIDES:
        raise SpecError([f"--set: {len(texts)} overrides, more than the {MAX_OVERRIDES} allowed"], source)
    problems, parsed = [], []
    for text in texts:
        path, sep, value = text.partition("=")
        path = path.strip()
        shown = json.dumps(path[:60])
        if not sep or not path:
            problems.append(f"--set {shown}: give PATH=VALUE, e.g. --set grid.T=[16,64,256] or --set seeds=8")
            continue
        parts = path.split(".")
        if len(parts) > MAX_DEPTH or not all(_PART.fullmatch(p) for p in parts) or parts[0].isdigit():
            problems.append(
                f"--set {shown}: the path must be names joined by dots, e.g. grid.T or execution.pack_size "
                f"(a list's item by its index: grid.0.T), at most {MAX_DEPTH} of them"
            )
            continue
        if len(value.encode("utf-8", "surrogateescape")) > MAX_SPEC_BYTES:
            problems.append(f"--set {path}: the value is larger than {MAX_SPEC_BYTES} bytes, the most a spec may hold")
            continue
        try:
            parsed.append((path, read_yaml(value)))
        except yaml.YAMLError as exc:
            problems.append(f"--set {path}: the value is not valid YAML: {_yaml_problem(exc)}")
        except RecursionError:
            problems.append(f"--set {path}: the value's YAML is nested too deeply to be a spec's")
    if problems:
        raise SpecError(problems, source)
    return parsed


def resolve(
    raw: dict,
    overrides: Sequence[tuple[str, Any]],
    source: str,
    homes: Mapping[str, Collection[str]],
) -> str:
    """The spec text of ``raw`` (a spec file's mapping) with ``overrides`` applied in order, as
    YAML that reads back to the same values; a comment at its top names the file and the paths
    set. ``raw`` is left as it was.

    Args:
        raw: the file's top-level mapping.
        overrides: ``(PATH, value)`` pairs from :func:`parse_overrides`; a later one wins.
        source: the spec file, named in the comment and the error.
        homes: the fields of each section (:func:`~orchestrator.spec.section_fields`), to name
            the section of a top-level path that is not a spec's.

    Raises:
        SpecError: a path whose first part is no top-level field (its section named, or
            the closest field), that runs through a value that is not a mapping or a list, or
            indexes past a list's end; or the resolved spec larger than :data:`MAX_SPEC_BYTES`.
    """
    problems = []
    resolved: Any = raw
    for path, value in overrides:
        parts = path.split(".")
        if parts[0] not in TOP_KEYS:
            home = belongs_under(parts[0], "", homes)
            problems.append(
                f"--set {path}: {home}"
                if home
                else f"--set {path}: unknown top-level field{did_you_mean(parts[0], TOP_KEYS)}; "
                f"allowed: {sorted(TOP_KEYS)}"
            )
            continue
        try:
            resolved = _put(resolved, parts, value, [])
        except ValueError as exc:
            problems.append(f"--set {path}: {exc}")
    if problems:
        raise SpecError(problems, source)
    paths = ", ".join(dict.fromkeys(path for path, _ in overrides))
    text = f"# {json.dumps(source)} with --set {paths}\n" + yaml.dump(
        resolved, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )
    if len(text.encode("utf-8", "surrogateescape")) > MAX_SPEC_BYTES:
        raise SpecError(
            [f"--set: the spec with its overrides is larger than {MAX_SPEC_BYTES} bytes, the most a spec may hold"],
            source,
        )
    return text


def _put(node: Any, parts: list[str], value: Any, above: list[str]) -> Any:
    """A copy of ``node`` with ``value`` at ``parts`` under it (mappings made where the path
    runs through nothing); only the mappings and lists on the path are copied.

    Raises:
        ValueError: the path runs through a scalar, names a key of a list, or an index past
            its end (the message names the part of the path that does not fit).
    """
    key, rest = parts[0], parts[1:]
    here = ".".join(above) or "the spec"
    if isinstance(node, list):
        if not key.isdigit() or int(key) >= len(node):
            raise ValueError(
                f"{here} is a list of {len(node)}; give an item's index 0..{len(node) - 1} (e.g. {here}.0"
                + (f".{key}" if not key.isdigit() else "")
                + ")"
            )
        copy: Any = list(node)
        index: Any = int(key)
    elif node is None or isinstance(node, dict):
        if key.isdigit():
            raise ValueError(f"{here} is not a list: {key} is no index into it")
        copy = dict(node or {})
        index = key
    else:
        raise ValueError(
            f"{here} is {json.dumps(node, default=str)[:40]}, not a section with fields; set it whole: --set {here}=..."
        )
    if rest:
        value = _put(copy[index] if isinstance(copy, list) else copy.get(index), rest, value, [*above, key])
    copy[index] = value
    return copy


class _Dumper(yaml.SafeDumper):
    """Safe YAML that reads back as written under the spec's loader and YAML 1.1's: a string
    either would read as a number, a boolean or null is quoted; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.yaml_implicit_resolvers = {
    first: [
        *yaml.SafeDumper.yaml_implicit_resolvers.get(first, []),
        *_NoAliasLoader.yaml_implicit_resolvers.get(first, []),
    ]
    for first in {*yaml.SafeDumper.yaml_implicit_resolvers, *_NoAliasLoader.yaml_implicit_resolvers}
}


def name_overrides(problems: list[str], paths: Collection[str]) -> list[str]:
    """``problems`` of a resolved spec with those of a field an override set (at or below its
    path) told as ``--set FIELD: ...``, and those of a field above one ending ``(after --set PATH)``."""
    out = []
    grid = [p for p in paths if p == "grid" or p.startswith("grid.")]
    for problem in problems:
        # a claim's problem names it by index and id: claims[1] (mine-2).axis
        field = re.sub(r"\[(\d+)\]", r".\1", re.sub(r" \([^)]*\)", "", problem.split(":", 1)[0]))
        if any(field == p or field.startswith(p + ".") for p in paths):
            out.append(f"--set {problem}")
            continue
        below = [p for p in paths if p.startswith(field + ".")]
        if not below and field.startswith("claims") and grid:  # the claims name the grid's axes and values
            out.append(
                f"{problem} (after --set {', --set '.join(grid)}: the spec's claims name the grid's axes and "
                "values; give --set claims=[...] too)"
            )
            continue
        out.append(problem + (f" (after --set {', --set '.join(below)})" if below else ""))
    return out
