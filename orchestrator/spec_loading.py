"""Reading a spec: its file (a capped size of UTF-8), its YAML (1.2's scalars, no aliases, no
duplicate keys) and its top-level mapping, whose keys and sections are checked for shape
before any of them is validated against the schema (orchestrator/spec.py)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec_problems import belongs_under

MAX_SPEC_BYTES = 1_000_000
TOP_KEYS = {
    "claims",
    "name",
    "description",
    "experiment",
    "seeds",
    "grid",
    "fixed",
    "execution",
    "resources",
    "analysis",
    "search",
}
"""The top-level keys a spec may have."""


def read_yaml(text: str):
    """Spec YAML as :func:`~orchestrator.spec.parse_spec` reads it (YAML 1.2's scalars, no aliases, no duplicate
    keys), for code that reads one section of a stored spec.

    Raises:
        yaml.YAMLError: not such YAML.
    """
    return yaml.load(text, Loader=_NoAliasLoader)


def read_spec_file(path: Path) -> str:
    """The text of a spec file: a regular file of at most :data:`MAX_SPEC_BYTES` bytes of UTF-8.

    Raises:
        SpecError: the file is missing, unreadable, larger than that, or not UTF-8.
    """
    try:
        if path.exists() and not path.is_file():
            raise SpecError(["not a regular file"], str(path))
        with open(path, "rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise SpecError([f"file is larger than {MAX_SPEC_BYTES} bytes"], str(path))
        text = data.decode("utf-8")
    except OSError as exc:
        raise SpecError([f"cannot read the file: {exc.strerror or exc}"], str(path)) from exc
    except UnicodeDecodeError as exc:
        raise SpecError(["file is not UTF-8 text"], str(path)) from exc
    return text


def read_spec_mapping(text: str, source: str) -> dict:
    """The top-level mapping of spec text, read as :func:`read_yaml` reads it.

    Raises:
        SpecError: not such YAML, empty, not a mapping, or a mapping with none of a spec's
            top-level keys.
    """
    try:
        raw = read_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecError([f"not valid YAML: {_yaml_problem(exc)}"], source) from None
    except RecursionError:
        raise SpecError(["YAML is nested too deeply to be a spec"], source) from None
    if raw is None:
        raise SpecError([f"the spec is empty; it needs at least {sorted(['name', 'grid'])}"], source)
    if not isinstance(raw, dict):
        raise SpecError(
            [f"top level must be a mapping with keys {sorted(TOP_KEYS)}, got {type(raw).__name__}"],
            source,
        )
    if set(map(str, raw)) - TOP_KEYS and not set(map(str, raw)) & TOP_KEYS:
        # Not a spec at all (e.g. some other file given by mistake): say so without echoing its contents.
        raise SpecError(
            [f"not a sweep spec: none of its {len(raw)} top-level keys is a spec's; a spec has {sorted(TOP_KEYS)}"],
            source,
        )
    return raw


def top_level_problems(raw: dict, name_rule: str, homes: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """Unknown top-level keys (at most 5 shown, each shortened), missing required ones, and
    a ``name`` that does not match ``name_rule`` (the schema's pattern). An unknown key that
    is a field of a section (``homes``, as :func:`~orchestrator.spec_problems.belongs_under`
    takes them) is named with its section."""
    problems = []
    unknown = sorted(set(map(str, raw)) - TOP_KEYS)
    placed = {key: home for key in unknown if (home := belongs_under(key, "", homes or {}))}
    problems += [f"{key}: {home}" for key, home in placed.items()]
    unknown = [key for key in unknown if key not in placed]
    if unknown:
        shown = [_short(k) for k in unknown[:5]] + ([f"and {len(unknown) - 5} more"] if len(unknown) > 5 else [])
        problems.append(f"unknown top-level field(s) {', '.join(shown)}; allowed: {sorted(TOP_KEYS)}")
    for required in ("name", "grid"):
        if required not in raw:
            problems.append(f"{required}: required")
    if "name" in raw and not (isinstance(raw["name"], str) and re.fullmatch(name_rule, raw["name"])):
        problems.append(
            f"name: value {raw['name']!r}: must match {name_rule} (letters, digits, '_', '.', '-'; "
            "starts with a letter)"
        )
    return problems


def section(raw: dict, key: str, problems: list[str]) -> dict:
    """A section of trial settings (``fixed``) with string keys; ``{}`` when absent or not a mapping."""
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        problems.append(f"{key}: must be a mapping of trial settings, got {type(value).__name__}")
        return {}
    return {str(k): v for k, v in value.items()}


def settings_sections(raw: dict, problems: list[str]) -> dict[str, Any]:
    """The ``execution``, ``resources`` and ``analysis`` sections as given (``{}`` when absent),
    with the worker resources the first specs put under ``execution`` moved to ``resources``."""
    sections = {key: raw.get(key) or {} for key in ("execution", "resources", "analysis")}
    _move_resources(sections, problems)
    return sections


def _move_resources(sections: dict[str, Any], problems: list[str]) -> None:
    """Accept ``execution.cpus_per_worker``/``gpus_per_worker`` (where the first specs put
    them) as ``resources.*``; giving one in both places is an error."""
    execution, resources = sections["execution"], sections["resources"]
    if not isinstance(execution, dict) or not isinstance(resources, dict):
        return
    for key in ("cpus_per_worker", "gpus_per_worker"):
        if key in execution:
            if key in resources:
                problems.append(f"resources.{key}: also given as execution.{key}; keep the one in resources")
            resources = {**resources, key: execution[key]}
            execution = {k: v for k, v in execution.items() if k != key}
    sections["execution"], sections["resources"] = execution, resources


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong with the YAML and where (line, column), without the text of the line
    (PyYAML's message quotes it: the file may be one that is not a spec, and not ours to show)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return problem + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else "")


def _short(key: str, width: int = 40) -> str:
    """A key as a message shows it: quoted, escaped, at most ``width`` characters."""
    text = repr(key)
    return text if len(text) <= width else text[: width - 4] + "...'"


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors/aliases: refuses 'billion laughs' expansion bombs."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in specs", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen, dupes = set(), set()  # one pass: tens of thousands of keys stay linear
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                (dupes if key in seen else seen).add(key)
            except TypeError:  # a list or a mapping as a key: no spec has one
                raise yaml.constructor.ConstructorError(
                    None, None, "a key that is a list or a mapping", key_node.start_mark
                ) from None
        if dupes:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key(s) {sorted(map(str, dupes))}", node.start_mark
            )
        return super().construct_mapping(node, deep)


# Plain scalars as YAML 1.2's core schema reads them, not YAML 1.1's: no sexagesimal numbers
# (1:30 is not 90), no octal (010 is not 8), no yes/no/on/off booleans, no timestamps, and 1e-3
# is the float a user meant. What is no number, boolean or null stays a string, which a
# setting that wants a number refuses by name.
_SCALARS = {
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:timestamp",
}
_NoAliasLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _SCALARS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_NoAliasLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_NoAliasLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"), list("-+0123456789")
)
_NoAliasLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?[0-9][0-9_]*\.(?:[eE][-+]?[0-9]+)?
                  |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
