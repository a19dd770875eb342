"""Sweep specs: YAML files that name the grid of trials, how to run them and how to analyse them.

A spec::

    name: quickstart            # letters, digits, '_', '.', '-'; starts with a letter
    description: free text
    seeds: 8                    # 8 means seeds 0..7; or an explicit list [0, 5, 9]
    grid:                       # trial settings that vary: each a list of values, or a
                                #   (a list of such mappings runs the union of their grids)
      T: [8, 16, 32]            #   range {start, stop, num, scale: log|linear}; integer
      m: {start: 8, stop: 512, num: 7, scale: log}   # fields are rounded, duplicates dropped
    fixed:                      # trial settings held constant
      task: and
      s: 3
    execution: {...}            # see ExecutionSettings (packing, workers, retries, flushes)
    resources: {...}            # see ResourceSettings (CPUs/GPUs per worker, workers)
    analysis: {...}             # see AnalysisSettings
    search: {...}               # see SearchSettings: grid (default), or an adaptive m* search

``experiment`` picks the trial family (default ``sparse_boolean``; also ``symmetry``); the
trial settings are the fields of its config (:data:`workers.EXPERIMENTS`) except ``seed``.
Every problem in a spec is collected and reported at once, each naming its field, the
bad value and what is allowed.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError, field_validator,
                      model_validator)

from attnsweep.orchestrator.errors import SpecError
from attnsweep.workers import EXPERIMENTS, Experiment
from attnsweep.workers.config import LATER_FIELDS, StrictSettings, whole_float
# Axes that vary fastest, so that consecutive trials share a pack (see packing.py).
INNER_AXES = ("restart", "norm_bound", "fault")
MAX_SPEC_BYTES = 1_000_000
MAX_GRID_BLOCKS = 1000
"""Grid blocks a spec may have (each is checked against every other for overlap)."""
MAX_AXIS_VALUES = 100_000
"""Axis values all grid blocks may list together (a range counts its ``num``), checked
before any is built or validated: each is validated on its own, so this bounds the time
and memory of a spec check whatever the trial count."""


class ExecutionSettings(StrictSettings):
    """How a sweep's trials are grouped and run on Ray."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    pack_size: int | Literal["auto"] = Field(
        "auto", description="trials trained together in one call; auto: as many as fit pack_memory_mb (at most 256)")
    pack_memory_mb: float = Field(
        1024.0, gt=0, le=16_777_216, description="training memory one pack may use (MiB), for pack_size auto")
    workers: Literal["actors", "tasks"] = Field(
        "actors", description="actors: long-lived workers that keep torch/CUDA warm; tasks: one Ray task per pack")
    max_in_flight: int | None = Field(None, ge=1, le=100_000, description="packs submitted at once; None: 2 per worker")
    max_retries: int = Field(3, ge=0, le=100, description="Ray retries of a pack whose worker died")
    flush_rows: int = Field(5000, ge=1, le=10_000_000, description="rows per Parquet part file at most")
    flush_s: float = Field(10.0, gt=0, le=86_400, description="seconds between flushes of finished rows")

    @field_validator("pack_size", mode="before")
    @classmethod
    def _pack_size(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4096):
            return value
        raise ValueError("must be 'auto' or an integer from 1 to 4096")


class ResourceSettings(StrictSettings):
    """What each worker (one pack at a time) asks Ray for."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    cpus_per_worker: float = Field(1.0, ge=0.1, le=1024, description="CPUs per worker (also its torch threads); at "
                                   "least 0.1: finer slices start more workers than any core can feed")
    gpus_per_worker: float = Field(0.0, ge=0, le=64, description="GPUs per worker; fractions share a GPU")
    num_workers: int | None = Field(
        None, ge=1, le=100_000, description="workers to start; None: as many as the cluster's resources hold now")

    @field_validator("gpus_per_worker")
    @classmethod
    def _whole_above_one(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError("must be a fraction below 1 (workers share a GPU) or a whole number of GPUs (Ray's rule)")
        return value


class AnalysisSettings(StrictSettings):
    """How m* is computed for this sweep (stats/critical.py has the definition)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    acc_threshold: float = Field(0.95, gt=0, le=1, description="test accuracy that counts as success (sparse_boolean)")
    target_error: float = Field(0.05, gt=0, le=100, description="relative test error that counts as success (symmetry)")
    success_frac: float = Field(0.5, gt=0, lt=1, description="success rate over seeds that defines m*")
    n_boot: int = Field(1000, ge=0, le=100_000, description="bootstrap replicates for intervals")
    ci: float = Field(0.95, gt=0, lt=1, description="coverage of the intervals")


class _Range(StrictSettings):
    """An interval ``min < max`` (subclasses give the fields their types and bounds)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        if self.max <= self.min:
            raise ValueError(f"max must be greater than min (got min={self.min!r}, max={self.max!r})")
        return self


class MRange(_Range):
    """The sample sizes an adaptive search may try: integers from ``min`` to ``max``."""

    min: int = Field(ge=1, le=100_000_000)
    max: int = Field(ge=2, le=100_000_000)


class LogRange(_Range):
    """A positive interval searched on a log scale."""

    min: float = Field(gt=0, le=10)
    max: float = Field(gt=0, le=10)


TUNABLE = ("lr", "weight_decay")
"""Training settings an adaptive search may tune per cell (both experiments have them)."""


class TuneSettings(StrictSettings):
    """Optuna TPE over the learning rate and weight decay of each cell, after its m* search
    with the spec's own settings (orchestrator/adaptive.py, phase 2).

    Each Optuna trial trains ``seeds`` seeds at the probe sample size ``m`` (default: the
    lower end of the bracket the search with the spec's settings ended on) and scores the parameters by their mean
    test score (sparse_boolean: test accuracy, a trial that diverged scoring 0.5; symmetry:
    -log10 relative test error). The best set is adopted, and the cell searched again with
    it, only when it beats the spec's settings on the same seeds in at least ``confidence``
    of seed-bootstrap resamples.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    n_trials: int = Field(8, ge=1, le=1000, description="Optuna trials (parameter sets) per cell")
    batch: int = Field(4, ge=1, le=1000, description="parameter sets asked at once and trained in parallel")
    seeds: int | None = Field(None, ge=1, le=1000,
                              description="seeds per parameter set, the first ones of the spec's seeds; None: 8, or all "
                                          "of them when there are fewer")
    m: int | None = Field(None, ge=1, le=100_000_000,
                          description="probe sample size; None: the bracket's lower end, the largest tried m below "
                                      "the first m where the spec's settings reach success_frac")
    confidence: float = Field(0.9, ge=0.5, le=1.0,
                              description="fraction of seed-bootstrap resamples in which the best set must beat the "
                                          "spec's settings to be adopted")
    lr: LogRange | None = Field(LogRange(min=1e-4, max=3e-2), description="learning-rate range; null: not tuned")
    weight_decay: LogRange | None = Field(LogRange(min=1e-6, max=1e-1),
                                          description="weight-decay range; null: not tuned")

    def params(self) -> dict[str, LogRange]:
        """The tuned settings and their ranges."""
        return {k: getattr(self, k) for k in TUNABLE if getattr(self, k) is not None}

    @model_validator(mode="after")
    def _something_to_tune(self) -> TuneSettings:
        if not self.params():
            raise ValueError(f"nothing to tune: {' and '.join(TUNABLE)} are both null; give a range or drop tune")
        return self


LATER_SEARCH_FIELDS: dict[str, Any] = {"smallest_first": False}
"""Search settings added after adaptive runs were first recorded, with the behaviour those
runs had: at that value a setting does not enter the spec hash, so resume and replicate still
recognise a recorded run's spec."""


class SearchSettings(StrictSettings):
    """How the sample sizes m of a sweep are chosen.

    ``grid`` (the default): m is an axis like any other. ``adaptive``: for each cell (every
    setting but m and the seed) m is chosen by bisection on log m of the success rate
    (orchestrator/adaptive.py) until the first m where the rate reaches
    ``analysis.success_frac`` is bracketed within ``rel_tol``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    mode: Literal["grid", "adaptive"] = Field("grid", description="grid, or adaptive m* search")
    m: MRange | None = Field(None, description="adaptive: the range of m to search")
    rel_tol: float = Field(0.1, gt=0, le=10, description="adaptive: stop when the bracket's hi/lo <= 1 + rel_tol")
    initial_points: int = Field(4, ge=2, le=100, description="adaptive: log-spaced m of the first round (ends included)")
    points_per_round: int = Field(1, ge=1, le=100, description="adaptive: m values per later round and cell")
    max_rounds: int = Field(20, ge=1, le=1000, description="adaptive: bisection rounds after the first at most")
    tune: TuneSettings | None = Field(None, description="adaptive: Optuna TPE over lr/weight_decay per cell")
    budget_check: StrictBool = Field(True, description="adaptive: search the largest T of each series again at 2x "
                                     "max_epochs; without T (symmetry), each cell's deciding m at 2x max_epochs")
    smallest_first: StrictBool = Field(False, description="adaptive: try m.min alone first; a cell that succeeds "
                                       "there is settled (m* <= m.min) without the other first points")

    @model_validator(mode="after")
    def _adaptive_needs_m(self) -> SearchSettings:
        if self.mode == "adaptive" and self.m is None:
            raise ValueError("mode adaptive needs the range of m to search: m: {min: ..., max: ...}")
        if self.mode == "grid" and (given := sorted(self.model_fields_set - {"mode"})):
            raise ValueError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to an adaptive "
                             "search: add mode: adaptive "
                             "(the default mode, grid, takes m from the grid)")
        if self.mode == "adaptive" and self.tune is not None and self.tune.m is not None \
                and not self.m.min <= self.tune.m <= self.m.max:
            raise ValueError(f"tune.m ({self.tune.m}) must lie in the searched range m: {self.m.min}..{self.m.max}")
        return self

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"


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
            raise ValueError(f"stop ({self.stop:g}) must be greater than start ({self.start:g}): a range runs "
                             "upward from start to stop (list the values for any other order)")
        return self


class SweepSpec(BaseModel):
    """A validated sweep spec. Build it with :func:`load_spec` or :func:`parse_spec`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
    description: str = ""
    experiment: str = "sparse_boolean"
    seeds: list[int]
    grids: list[dict[str, list[Any]]]
    fixed: dict[str, Any]
    execution: ExecutionSettings = ExecutionSettings()
    resources: ResourceSettings = ResourceSettings()
    analysis: AnalysisSettings = AnalysisSettings()
    search: SearchSettings = SearchSettings()
    source_yaml: str = ""

    @property
    def grid(self) -> dict[str, list[Any]]:
        """The axes of the first (usually only) grid block."""
        return self.grids[0]

    def axes(self, block: int = 0) -> dict[str, list[Any]]:
        """A grid block's axes in iteration order: outer axes, then INNER_AXES, then seed."""
        grid = self.grids[block]
        outer = [k for k in grid if k not in INNER_AXES]
        inner = [k for k in INNER_AXES if k in grid]
        return {**{k: grid[k] for k in outer + inner}, "seed": self.seeds}

    def n_trials(self) -> int:
        """Number of trials the grid blocks expand to; for an adaptive search, the most it
        can run (every cell searched for ``max_rounds`` rounds, tuning and budget checks
        included): the actual count is usually a fraction of it."""
        if not self.search.adaptive:
            return sum(math.prod(len(v) for v in self.axes(i).values()) for i in range(len(self.grids)))
        s = self.search
        per_cell = len(self.seeds) * (s.initial_points + s.max_rounds * s.points_per_round)
        tune = s.tune.n_trials * min(s.tune.seeds or 8, len(self.seeds)) + per_cell if s.tune else 0  # and the tuned search
        n_cells = self.n_cells()
        budget = 0
        if s.budget_check and ("T" in self.fixed or any("T" in g for g in self.grids)):
            # One budget check per series (a cell without T). Counted from the axes' lengths,
            # so no list of cells is built before --max-trials is checked; a series that two
            # blocks share is counted once only where the cells are few enough to list.
            series = sum(math.prod(len(v) for k, v in self.axes(i).items() if k not in ("seed", "m", "T"))
                         for i in range(len(self.grids)))
            if n_cells <= 100_000:
                series = len({json.dumps({k: v for k, v in c.items() if k != "T"}, sort_keys=True, default=str)
                              for c in self.cells()})
            budget = series * per_cell
        elif s.budget_check:  # no T: each cell's deciding m (at most two) at twice the epochs
            budget = n_cells * 2 * len(self.seeds)
        return n_cells * (per_cell + tune) + budget

    def n_cells(self) -> int:
        """Number of cells (every setting but m and the seed) of the grid blocks, from the
        axes' lengths (no cell is built)."""
        return sum(math.prod(len(v) for k, v in self.axes(i).items() if k not in ("seed", "m"))
                   for i in range(len(self.grids)))

    def cells(self) -> Iterator[dict[str, Any]]:
        """The settings of each cell (every trial setting but m and the seed), grid order:
        ``fixed`` merged with one combination of each grid block's axes."""
        for i in range(len(self.grids)):
            axes = {k: v for k, v in self.axes(i).items() if k not in ("seed", "m")}
            names = list(axes)
            for values in itertools.product(*axes.values()):
                yield {**self.fixed, **dict(zip(names, values))}

    @property
    def family(self) -> Experiment:
        """The experiment this sweep runs."""
        return EXPERIMENTS[self.experiment]

    def trials(self) -> Iterator[BaseModel]:
        """The trials, lazily, block by block, seeds varying fastest (see :meth:`axes`).

        Raises:
            ValueError: an adaptive search, whose trials are chosen as it runs.
        """
        if self.search.adaptive:
            raise ValueError("an adaptive search chooses its trials as it runs (orchestrator/adaptive.py)")
        for i in range(len(self.grids)):
            axes = self.axes(i)
            names = list(axes)
            for values in itertools.product(*axes.values()):
                yield self.family.config(**self.fixed, **dict(zip(names, values)))

    def resolved_settings(self, block: int = 0) -> list[tuple[str, Any, str, str]]:
        """Every trial setting of grid block ``block`` as a trial of it gets it:
        ``(name, value, source, meaning)``, in the trial config's field order.

        ``source`` says where the value came from: ``grid`` (the value is the axis' list),
        ``fixed``, ``seeds``, ``search`` (m chosen by the adaptive search, or a setting its
        Optuna tuning chooses) or ``default`` (the spec does not name it; the value is the
        trial config's default). ``meaning`` is the field's description.
        """
        grid = self.grids[block]
        tuned = set(self.search.tune.params()) if self.search.adaptive and self.search.tune else set()
        rows = []
        for name, field in self.family.config.model_fields.items():
            if name == "seed":
                value, source = self.seeds, "seeds"
            elif name in tuned:  # the m* search runs at the spec's value first, then Optuna tunes it per cell
                span = self.search.tune.params()[name]
                first = grid.get(name, self.fixed.get(name, field.default))
                value, source = f"{first}, then tuned by Optuna in {span.min:g}..{span.max:g}", "search"
            elif name in grid:
                value, source = grid[name], "grid"
            elif name in self.fixed:
                value, source = self.fixed[name], "fixed"
            elif name == "m" and self.search.adaptive:
                value, source = f"searched in {self.search.m.min}..{self.search.m.max}", "search"
            else:
                value, source = field.default, "default"
            rows.append((name, value, source, field.description or ""))
        return rows

    def spec_hash(self) -> str:
        """Hash of the canonical spec (grid, fixed, seeds, analysis): 16 hex digits."""
        canon = self.model_dump(exclude={"source_yaml", "description", "execution", "resources"})
        if not self.search.adaptive:
            canon.pop("search")  # the hash of a grid spec is what it was before searches existed
        for name, before in LATER_SEARCH_FIELDS.items():  # so that runs recorded before them keep their hash
            if canon.get("search", {}).get(name, before) == before:
                canon.get("search", {}).pop(name, None)
        return hashlib.sha256(json.dumps(canon, sort_keys=True, default=str).encode()).hexdigest()[:16]


def trial_id(config: BaseModel) -> str:
    """Deterministic id of a trial: 16 hex digits of the SHA-256 of its canonical config.

    The config includes the seed, so equal settings and seed give the same id in any
    sweep, run or process; any change of any setting changes it. A setting added later
    (:data:`workers.config.LATER_FIELDS`) enters only away from the value earlier trials had,
    so their ids stay what they were.
    """
    fields = config.model_dump(mode="json")
    for name, before in LATER_FIELDS.items():
        if fields.get(name, before) == before:
            fields.pop(name, None)
    canon = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def read_yaml(text: str):
    """Spec YAML as :func:`parse_spec` reads it (YAML 1.2's scalars, no aliases, no duplicate
    keys), for code that reads one section of a stored spec.

    Raises:
        yaml.YAMLError: not such YAML.
    """
    return yaml.load(text, Loader=_NoAliasLoader)


def load_spec(path: str | Path, max_trials: int | None = None) -> SweepSpec:
    """Read and validate a spec file.

    Raises:
        SpecError: the file is missing, unreadable, not YAML, or invalid; the message
            lists every problem with its field.
    """
    path = Path(path)
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
    return parse_spec(text, source=str(path), max_trials=max_trials)


def parse_spec(text: str, source: str = "spec", max_trials: int | None = None) -> SweepSpec:
    """Validate spec text (YAML).

    Args:
        text: the YAML.
        source: name used in error messages.
        max_trials: refuse grids larger than this (None: no limit).

    Raises:
        SpecError: every problem found, each naming its field.
    """
    try:
        raw = yaml.load(text, Loader=_NoAliasLoader)
    except yaml.YAMLError as exc:
        raise SpecError([f"not valid YAML: {_yaml_problem(exc)}"], source) from None
    except RecursionError:
        raise SpecError(["YAML is nested too deeply to be a spec"], source) from None
    if raw is None:
        raise SpecError([f"the spec is empty; it needs at least {sorted(['name', 'grid'])}"], source)
    if not isinstance(raw, dict):
        raise SpecError([f"top level must be a mapping with keys {sorted(_TOP_KEYS)}, got {type(raw).__name__}"], source)
    problems: list[str] = []
    unknown = sorted(set(map(str, raw)) - _TOP_KEYS)
    if unknown and not set(map(str, raw)) & _TOP_KEYS:
        # Not a spec at all (e.g. some other file given by mistake): say so without echoing its contents.
        raise SpecError([f"not a sweep spec: none of its {len(raw)} top-level keys is a spec's; a spec has "
                         f"{sorted(_TOP_KEYS)}"], source)
    if unknown:
        shown = [_short(k) for k in unknown[:5]] + ([f"and {len(unknown) - 5} more"] if len(unknown) > 5 else [])
        problems.append(f"unknown top-level field(s) {', '.join(shown)}; allowed: {sorted(_TOP_KEYS)}")
    for required in ("name", "grid"):
        if required not in raw:
            problems.append(f"{required}: required")
    name_rule = SweepSpec.model_fields["name"].metadata[0].pattern
    if "name" in raw and not (isinstance(raw["name"], str) and re.fullmatch(name_rule, raw["name"])):
        problems.append(f"name: value {raw['name']!r}: must match {name_rule} (letters, digits, '_', '.', '-'; "
                        "starts with a letter)")
    seeds = _seeds(raw.get("seeds", 1), problems)
    experiment = raw.get("experiment", "sparse_boolean")
    if not isinstance(experiment, str) or experiment not in EXPERIMENTS:
        raise SpecError([f"experiment: value {experiment!r}: must be one of {list(EXPERIMENTS)}"], source)
    exp = EXPERIMENTS[experiment]
    search = _search(raw.get("search"), problems)
    fixed = _section(raw, "fixed", problems)
    raw_grid = raw.get("grid")
    if isinstance(raw_grid, list) and not raw_grid:
        problems.append("grid: an empty list of blocks; give at least one mapping")
    blocks = raw_grid if isinstance(raw_grid, list) else [raw_grid if raw_grid is not None else {}]
    if len(blocks) > MAX_GRID_BLOCKS:
        raise SpecError([f"grid: {len(blocks)} blocks, more than the {MAX_GRID_BLOCKS} allowed; give one block per "
                         "set of axes (a block's axes already combine every value)"], source)
    listed = sum(_axis_length(v) for block in blocks if isinstance(block, dict) for v in block.values())
    if listed > MAX_AXIS_VALUES:
        raise SpecError([f"grid: its blocks list {listed:,} axis values in all (a range counts its num), more than the "
                         f"{MAX_AXIS_VALUES:,} allowed: no sweep needs that many values of its settings"], source)
    chosen = _chosen_by_search(search, raw.get("search"))
    grids = [_grid_block(exp, f"grid[{i}]" if isinstance(raw_grid, list) else "grid", block, fixed, problems, chosen)
             for i, block in enumerate(blocks)]
    for key in sorted(chosen.keys() & set(fixed) - set(TUNABLE)):  # a tuned setting's fixed value is the default it must beat
        problems.append(f"fixed.{key}: {chosen[key]}; remove it from fixed")
    fixed = {k: v for k, v in fixed.items() if _known(exp, f"fixed.{k}", k, problems)}
    problems += _check_values(exp, "fixed", {k: [v] for k, v in fixed.items()})
    sections = {key: raw.get(key) or {} for key in ("execution", "resources", "analysis")}
    _move_resources(sections, problems)
    for key, model in (("execution", ExecutionSettings), ("resources", ResourceSettings), ("analysis", AnalysisSettings)):
        section = sections[key]
        try:
            model.model_validate({str(k): v for k, v in section.items()} if isinstance(section, dict) else section)
        except ValidationError as exc:
            problems += [f"{key}.{p}" for p in _describe(exc, model)]
    if search is not None and search.tune is not None and isinstance(seeds, list) and seeds \
            and (search.tune.seeds or 0) > len(seeds):
        problems.append(f"search.tune.seeds: value {search.tune.seeds}: more than the spec's {len(seeds)} seeds "
                        f"(allowed: 1..{len(seeds)})")
    spec = None
    if not problems:
        try:
            spec = SweepSpec(
                name=raw["name"], description=raw.get("description") or "", experiment=experiment, seeds=seeds,
                grids=grids, fixed=fixed, execution=sections["execution"], resources=sections["resources"],
                analysis=sections["analysis"], search=search or SearchSettings(), source_yaml=text,
            )
        except ValidationError as exc:
            problems += _describe(exc)
    if spec is not None and not problems:
        n = spec.n_trials()
        if max_trials is not None and n > max_trials:
            what = f"the adaptive search may run up to {n} trials" if spec.search.adaptive else f"grid expands to {n} trials"
            problems.append(f"{what}, more than the limit {max_trials}; raise --max-trials to confirm")
        else:
            problems += _check_combinations(spec)
            if not problems and len(spec.grids) > 1:
                problems += _overlaps(spec)
    if problems:
        raise SpecError(problems, source)
    return spec


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


_TOP_KEYS = {"name", "description", "experiment", "seeds", "grid", "fixed", "execution", "resources", "analysis",
             "search"}


def _search(value: Any, problems: list[str]) -> SearchSettings | None:
    """The ``search`` section, validated (None when it is invalid: the problems say why)."""
    try:
        return SearchSettings.model_validate(value or {})
    except ValidationError as exc:
        problems += [f"search: {p.removeprefix('spec: ')}" if p.startswith("spec: ") else f"search.{p}"
                     for p in _describe(exc, SearchSettings)]
        return None


def _chosen_by_search(search: SearchSettings | None, raw: Any) -> dict[str, str]:
    """Trial settings an adaptive search chooses itself, each with why it may not be given
    (from the raw section when it is invalid, so its problems are not repeated as 'm: required')."""
    meant = search.adaptive if search is not None else (
        isinstance(raw, dict) and (raw.get("mode") == "adaptive" or "m" in raw))
    if not meant:
        return {}
    chosen = {"m": "the adaptive search chooses m (give its range as search.m: {min, max})"}
    if search is not None and search.tune is not None:
        chosen |= {k: f"search.tune tunes {k} per cell, against the spec's value in fixed (set its range in "
                      f"search.tune.{k}, or null to fix it)"
                   for k in search.tune.params()}
    return chosen


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
                raise yaml.constructor.ConstructorError(None, None, "a key that is a list or a mapping",
                                                        key_node.start_mark) from None
        if dupes:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key(s) {sorted(map(str, dupes))}",
                                                    node.start_mark)
        return super().construct_mapping(node, deep)


# Plain scalars as YAML 1.2's core schema reads them, not YAML 1.1's: no sexagesimal numbers
# (1:30 is not 90), no octal (010 is not 8), no yes/no/on/off booleans, no timestamps, and 1e-3
# is the float a user meant. What is no number, boolean or null stays a string, which a
# setting that wants a number refuses by name.
_SCALARS = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
            "tag:yaml.org,2002:timestamp"}
_NoAliasLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _SCALARS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_NoAliasLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                     list("tTfF"))
_NoAliasLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"),
                                     list("-+0123456789"))
_NoAliasLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?[0-9][0-9_]*\.(?:[eE][-+]?[0-9]+)?
                  |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def _grid_block(exp: Experiment, where: str, block: Any, fixed: dict, problems: list[str],
                chosen: dict[str, str] | None = None) -> dict[str, list]:
    """One mapping of axes, validated; problems are prefixed with ``where``. ``chosen``:
    settings an adaptive search picks itself (not allowed as axes, not required)."""
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
    axes = {k: _axis(exp, f"{where}.{k}", k, v, problems) for k, v in block.items() if _known(exp, f"{where}.{k}", k, problems)}
    for key, values in axes.items():
        if not values and isinstance(block[key], list):
            problems.append(f"{where}.{key}: needs at least one value")
    for field, info in exp.config.model_fields.items():
        if field != "seed" and info.is_required() and field not in axes and field not in fixed and field not in chosen:
            problems.append(f"{field}: required, in {where} or fixed")
    problems += _check_values(exp, where, axes)
    return axes


def _section(raw: dict, key: str, problems: list[str]) -> dict:
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        problems.append(f"{key}: must be a mapping of trial settings, got {type(value).__name__}")
        return {}
    return {str(k): v for k, v in value.items()}


def _trial_fields(exp: Experiment, shown: bool = False) -> list[str]:
    """The settings a spec may give (``shown``: those listed to users; ``fault`` is for tests)."""
    return [f for f in exp.config.model_fields if f != "seed" and not (shown and f == "fault")]


def _known(exp: Experiment, where: str, key: str, problems: list[str]) -> bool:
    if key in _trial_fields(exp):
        return True
    hint = " (use the top-level 'seeds')" if key == "seed" else ""
    problems.append(f"{where}: unknown {exp.name} trial setting{hint}; allowed: {_trial_fields(exp, shown=True)}")
    return False


def _seeds(value: Any, problems: list[str]) -> list[int]:
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


def _axis(exp: Experiment, where: str, key: str, value: Any, problems: list[str]) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        try:
            r = RangeAxis(**value)
        except (ValidationError, TypeError) as exc:
            problems += ([f"{where}: {p.removeprefix('spec: ')}" if p.startswith("spec: ") else f"{where}.{p}"
                          for p in _describe(exc, RangeAxis)] if isinstance(exc, ValidationError) else [f"{where}: {exc}"])
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
                coerced.append(_field_adapter(exp.config, key).validate_python(whole_float(annotation, value)))
            except ValidationError as exc:
                for err in exc.errors():
                    allowed = " (allowed: true or false)" if err["type"].startswith("bool") else ""
                    shown = "null" if value is None else repr(value)  # as the YAML spelled it
                    problems.append(f"{where}.{key}: value {shown}: {err['msg'].removeprefix('Value error, ')}{allowed}")
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


def _overlaps(spec: SweepSpec) -> list[str]:
    """Blocks of the grid that share trials, counted without listing any: a block is the
    product of one value set per setting (its axis, else ``fixed``, else the default), so two
    blocks share the product of their sets' intersections (times the seeds, which all
    blocks share; for an adaptive search, cells)."""
    fields = [f for f in spec.family.config.model_fields if f not in ("seed", "m") or (f == "m" and not spec.search.adaptive)]
    defaults = {k: v.default for k, v in spec.family.config.model_fields.items()}

    def norm(v: Any) -> Any:
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else json.dumps(v, default=str)

    blocks = [{f: {norm(v) for v in grid[f]} if f in grid else {norm(spec.fixed.get(f, defaults.get(f)))}
               for f in fields} for grid in spec.grids]
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


def _check_combinations(spec: SweepSpec) -> list[str]:
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
                spec.family.config(**{**spec.fixed, **first, **dict(zip(names, values)), **searched, "seed": 0})
            except ValidationError as exc:
                for err in exc.errors():
                    msg = err["msg"].removeprefix("Value error, ")
                    if msg not in seen:
                        seen.add(msg)
                        problems.append(f"{msg.split()[0]}: {msg}")  # messages start with the field
    return problems


def _describe(exc: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem of a pydantic error, naming the field; with ``model`` (the class
    that was validated), an unknown field lists the allowed ones and a bound gives the whole
    allowed range."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "spec"
        value = err.get("input")
        msg = err["msg"].removeprefix("Value error, ")
        msg = re.sub(r"Input should be a valid dictionary or instance of \w+", "must be a mapping of settings", msg)
        if model is not None and err["type"] == "extra_forbidden":
            parent = _model_at(model, err["loc"][:-1])
            if parent is not None:
                msg = f"unknown field; allowed: {sorted(parent.model_fields)}"
        elif model is not None and err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            bounds = _bounds(model, err["loc"])
            if bounds:
                msg = f"{msg} (allowed: {bounds})"
        out.append(f"{loc}: value {value!r}: {msg}" if not isinstance(value, dict) else f"{loc}: {msg}")
    return out


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
