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

This module holds the schema (the settings models and :class:`SweepSpec`), trial ids and
the two entry points, :func:`parse_spec` and :func:`load_spec`; reading the text is
:mod:`orchestrator.spec_loading`'s job, the grid's :mod:`orchestrator.spec_grid`'s.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec_claims import Claim, claim_problems, read_claims
from attnsweep.orchestrator.spec_grid import (
    chosen_by_search,
    fixed_settings,
    grid_blocks,
    seed_list,
    trial_problems,
)
from attnsweep.orchestrator.spec_loading import (
    TOP_KEYS,
    read_spec_file,
    read_spec_mapping,
    section,
    settings_sections,
    top_level_problems,
)
from attnsweep.orchestrator.spec_problems import TOP_LEVEL, TRIAL_SETTINGS, describe
from attnsweep.workers import EXPERIMENTS, Experiment
from attnsweep.workers.config import LATER_FIELDS, StrictSettings
from attnsweep.workers.memory import CURVE_MAX_BYTES, CURVE_MAX_POINTS, CURVE_POINT_BYTES
from attnsweep.workers.trial_config import TrialConfig

# Axes that vary fastest, so that consecutive trials share a pack (see packing.py).
INNER_AXES = ("restart", "norm_bound", "fault")


class CurveSettings(StrictSettings):
    """Which epochs of each trial's learning curve a run keeps (workers/curves.py)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    every: int = Field(1, ge=1, le=10_000_000, description="keep every every-th epoch, from epoch 0, and the last")
    max_points: int = Field(
        200,
        description=f"points per trial at most (2..{CURVE_MAX_POINTS:,}: a trial's curve holds {CURVE_POINT_BYTES:,} "
        f"bytes a point in its worker, {CURVE_MAX_BYTES // 2**20} MiB at most), the last included: every widens "
        "where max_epochs needs it",
    )

    @field_validator("max_points")
    @classmethod
    def _max_points(cls, value: int) -> int:
        # A byte ceiling, not a count: a worker holds every trial's points until its pack ends
        # (workers/memory.py's CURVE_POINT_BYTES, measured), and pack sizing counts them.
        if value < 2:
            raise ValueError(f"must be from 2 to {CURVE_MAX_POINTS:,}: a curve keeps its first and its last epoch")
        if value > CURVE_MAX_POINTS:
            raise ValueError(
                f"must be from 2 to {CURVE_MAX_POINTS:,}: a trial's curve holds up to {CURVE_POINT_BYTES:,} bytes "
                f"a point in its worker until its pack ends, {value * CURVE_POINT_BYTES / 2**20:,.1f} MiB at "
                f"{value:,} points, and the ceiling is {CURVE_MAX_BYTES // 2**20} MiB a trial"
            )
        return value


class ExecutionSettings(StrictSettings):
    """How a sweep's trials are grouped and run on Ray."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    pack_size: int | Literal["auto"] = Field(
        "auto",
        description="trials trained together in one call; auto: as many as fit pack_memory_mb (at most 256)",
    )
    pack_memory_mb: float = Field(
        1024.0,
        gt=0,
        le=16_777_216,
        description="training memory one pack may use (MiB), for pack_size auto",
    )
    device_group: int = Field(
        32,
        ge=1,
        le=4096,
        description="slots of each stacked group on a GPU, part of what a GPU row reproduces (its "
        "device_group column); a bigger pack trains group after group; on a CPU the lanes decide",
    )
    workers: Literal["actors", "tasks"] = Field(
        "actors",
        description="actors: long-lived workers that keep torch/CUDA warm; tasks: one Ray task per pack",
    )
    max_in_flight: int | None = Field(None, ge=1, le=100_000, description="packs submitted at once; None: 2 per worker")
    max_retries: int = Field(3, ge=0, le=100, description="Ray retries of a pack whose worker died")
    flush_rows: int = Field(5000, ge=1, le=10_000_000, description="rows per Parquet part file at most")
    flush_s: float = Field(10.0, gt=0, le=86_400, description="seconds between flushes of finished rows")
    # A recording choice, not a trial setting: it changes no trial's numbers, id or row, so it
    # lives here, outside the trial configs and the spec hash (docs/decisions.md).
    curves: CurveSettings | None = Field(
        None,
        description="per-epoch training loss and accuracy of each trial into the curves table; null: none",
    )

    @field_validator("pack_size", mode="before")
    @classmethod
    def _pack_size(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4096):
            return value
        raise ValueError("must be 'auto' or an integer from 1 to 4096")


class ResourceSettings(StrictSettings):
    """What each worker (one pack at a time) asks Ray for."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    cpus_per_worker: float = Field(
        1.0,
        ge=0.1,
        le=1024,
        description="CPUs per worker (also its torch threads); at "
        "least 0.1: finer slices start more workers than any core can feed",
    )
    gpus_per_worker: float = Field(0.0, ge=0, le=64, description="GPUs per worker; fractions share a GPU")
    num_workers: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="workers to start; None: as many as the cluster's resources hold now",
    )

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
    success_frac: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="success rate (share of seeds that succeed) whose crossing is m*: a logistic fit of "
        "success against ln m, solved for it (docs/method.md)",
    )
    n_boot: int = Field(1000, ge=0, le=100_000, description="bootstrap replicates for intervals")
    ci: float = Field(0.95, gt=0, lt=1, description="coverage of the intervals")


class _Range(StrictSettings):
    """An interval ``min < max`` (subclasses give the fields their types and bounds)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    if TYPE_CHECKING:  # the subclasses' fields, for the check below (no field of this class at run time)
        min: float
        max: float

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
    seeds: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="seeds per parameter set, the first ones of the spec's seeds; None: 8, or all "
        "of them when there are fewer",
    )
    m: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="probe sample size; None: the bracket's lower end, the largest tried m below "
        "the first m where the spec's settings reach success_frac",
    )
    confidence: float = Field(
        0.9,
        ge=0.5,
        le=1.0,
        description="fraction of seed-bootstrap resamples in which the best set must beat the "
        "spec's settings to be adopted",
    )
    lr: LogRange | None = Field(LogRange(min=1e-4, max=3e-2), description="learning-rate range; null: not tuned")
    weight_decay: LogRange | None = Field(
        LogRange(min=1e-6, max=1e-1), description="weight-decay range; null: not tuned"
    )

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
    initial_points: int = Field(
        4, ge=2, le=100, description="adaptive: log-spaced m of the first round (ends included)"
    )
    points_per_round: int = Field(1, ge=1, le=100, description="adaptive: m values per later round and cell")
    max_rounds: int = Field(20, ge=1, le=1000, description="adaptive: bisection rounds after the first at most")
    tune: TuneSettings | None = Field(None, description="adaptive: Optuna TPE over lr/weight_decay per cell")
    budget_check: StrictBool = Field(
        True,
        description="adaptive: search the largest T of each series again at 2x "
        "max_epochs; without T (symmetry), each cell's deciding m at 2x max_epochs",
    )
    smallest_first: StrictBool = Field(
        False,
        description="adaptive: try m.min alone first; a cell that succeeds "
        "there is settled (m* <= m.min) without the other first points",
    )

    @model_validator(mode="after")
    def _adaptive_needs_m(self) -> SearchSettings:
        if self.mode == "adaptive" and self.m is None:
            raise ValueError("mode adaptive needs the range of m to search: m: {min: ..., max: ...}")
        if self.mode == "grid" and (given := sorted(self.model_fields_set - {"mode"})):
            raise ValueError(
                f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to an adaptive "
                "search: add mode: adaptive "
                "(the default mode, grid, takes m from the grid)"
            )
        if (
            self.mode == "adaptive"
            and self.tune is not None
            and self.tune.m is not None
            and self.m is not None
            and not self.m.min <= self.tune.m <= self.m.max
        ):
            raise ValueError(f"tune.m ({self.tune.m}) must lie in the searched range m: {self.m.min}..{self.m.max}")
        return self

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"


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
    claims: list[Claim] = []
    """The researcher's own hypotheses over the grid's axes (orchestrator/spec_claims.py)."""
    source_yaml: str = ""

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
        tune = (
            s.tune.n_trials * min(s.tune.seeds or 8, len(self.seeds)) + per_cell if s.tune else 0
        )  # and the tuned search
        n_cells = self.n_cells()
        budget = 0
        if s.budget_check and ("T" in self.fixed or any("T" in g for g in self.grids)):
            # One budget check per series (a cell without T). Counted from the axes' lengths,
            # so no list of cells is built before --max-trials is checked; a series that two
            # blocks share is counted once only where the cells are few enough to list.
            series = sum(
                math.prod(len(v) for k, v in self.axes(i).items() if k not in ("seed", "m", "T"))
                for i in range(len(self.grids))
            )
            if n_cells <= 100_000:
                series = len(
                    {
                        json.dumps({k: v for k, v in c.items() if k != "T"}, sort_keys=True, default=str)
                        for c in self.cells()
                    }
                )
            budget = series * per_cell
        elif s.budget_check:  # no T: each cell's deciding m (at most two) at twice the epochs
            budget = n_cells * 2 * len(self.seeds)
        return n_cells * (per_cell + tune) + budget

    def n_cells(self) -> int:
        """Number of cells (every setting but m and the seed) of the grid blocks, from the
        axes' lengths (no cell is built)."""
        return sum(
            math.prod(len(v) for k, v in self.axes(i).items() if k not in ("seed", "m")) for i in range(len(self.grids))
        )

    def cells(self) -> Iterator[dict[str, Any]]:
        """The settings of each cell (every trial setting but m and the seed), grid order:
        ``fixed`` merged with one combination of each grid block's axes."""
        for i in range(len(self.grids)):
            axes = {k: v for k, v in self.axes(i).items() if k not in ("seed", "m")}
            names = list(axes)
            for values in itertools.product(*axes.values()):
                yield {**self.fixed, **dict(zip(names, values, strict=True))}

    @property
    def family(self) -> Experiment:
        """The experiment this sweep runs."""
        return EXPERIMENTS[self.experiment]

    def trials(self) -> Iterator[TrialConfig]:
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
                yield self.family.config(**self.fixed, **dict(zip(names, values, strict=True)))

    def resolved_settings(self, block: int = 0) -> list[tuple[str, Any, str, str]]:
        """Every trial setting of grid block ``block`` as a trial of it gets it:
        ``(name, value, source, meaning)``, in the trial config's field order.

        ``source`` says where the value came from: ``grid`` (the value is the axis' list),
        ``fixed``, ``seeds``, ``search`` (m chosen by the adaptive search, or a setting its
        Optuna tuning chooses) or ``default`` (the spec does not name it; the value is the
        trial config's default). ``meaning`` is the field's description.
        """
        grid = self.grids[block]
        spans = self.search.tune.params() if self.search.adaptive and self.search.tune else {}
        tuned = set(spans)
        rows = []
        value: object
        for name, field in self.family.config.model_fields.items():
            if name == "seed":
                value, source = self.seeds, "seeds"
            elif name in tuned:  # the m* search runs at the spec's value first, then Optuna tunes it per cell
                span = spans[name]
                first = grid.get(name, self.fixed.get(name, field.default))
                value, source = (
                    f"{first}, then tuned by Optuna in {span.min:g}..{span.max:g}",
                    "search",
                )
            elif name in grid:
                value, source = grid[name], "grid"
            elif name in self.fixed:
                value, source = self.fixed[name], "fixed"
            elif name == "m" and self.search.adaptive and (m := self.search.m) is not None:
                value, source = f"searched in {m.min}..{m.max}", "search"
            else:
                value, source = field.default, "default"
            rows.append((name, value, source, field.description or ""))
        return rows

    def spec_hash(self) -> str:
        """Hash of the canonical spec (grid, fixed, seeds, analysis): 16 hex digits."""
        # Claims are read off the trials, not made by them: stating one does not make a new run.
        canon = self.model_dump(exclude={"source_yaml", "description", "execution", "resources", "claims"})
        if not self.search.adaptive:
            canon.pop("search")  # the hash of a grid spec is what it was before searches existed
        for (
            name,
            before,
        ) in LATER_SEARCH_FIELDS.items():  # so that runs recorded before them keep their hash
            if canon.get("search", {}).get(name, before) == before:
                canon.get("search", {}).pop(name, None)
        return hashlib.sha256(json.dumps(canon, sort_keys=True, default=str).encode()).hexdigest()[:16]


def trial_id(config: TrialConfig) -> str:
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


def load_spec(path: str | Path, max_trials: int | None = None, overrides: Sequence[str] = ()) -> SweepSpec:
    """Read and validate a spec file, with ``overrides`` (``PATH=VALUE`` texts, the CLI's
    ``--set``; orchestrator/spec_overrides.py) put into it first. The spec's ``source_yaml``
    is then the resolved spec (the file's values with the overrides'), which a run records.

    Raises:
        SpecError: the file is missing, unreadable, not YAML, or invalid, or an override is
            malformed or sets a value that is; the message lists every problem with its
            field (an override's as ``--set FIELD``).
    """
    from attnsweep.orchestrator.spec_overrides import name_overrides, parse_overrides, resolve

    path = Path(path)
    text, source = read_spec_file(path), str(path)
    if not overrides:
        return parse_spec(text, source=source, max_trials=max_trials)
    pairs = parse_overrides(overrides, source)
    raw = read_spec_mapping(text, source)
    experiment = dict(pairs).get("experiment", raw.get("experiment", "sparse_boolean"))
    exp = EXPERIMENTS.get(experiment) if isinstance(experiment, str) else None
    resolved = resolve(raw, pairs, source, section_fields(exp))
    try:
        return parse_spec(resolved, source=source, max_trials=max_trials)
    except SpecError as exc:
        raise SpecError(name_overrides(exc.problems, [p for p, _ in pairs]), source) from None


def parse_spec(text: str, source: str = "spec", max_trials: int | None = None) -> SweepSpec:
    """Validate spec text (YAML): read it, check its top-level keys and sections, build the
    grid blocks, validate the whole spec, then check the trials it combines into.

    Args:
        text: the YAML.
        source: name used in error messages.
        max_trials: refuse grids larger than this (None: no limit).

    Raises:
        SpecError: every problem found, each naming its field.
    """
    raw = read_spec_mapping(text, source)
    experiment = raw.get("experiment", "sparse_boolean")
    known = isinstance(experiment, str) and experiment in EXPERIMENTS
    homes = section_fields(EXPERIMENTS[experiment] if known else None)
    problems = top_level_problems(raw, SweepSpec.model_fields["name"].metadata[0].pattern, homes)
    seeds = seed_list(raw.get("seeds", 1), problems)
    if not known:
        raise SpecError([f"experiment: value {experiment!r}: must be one of {list(EXPERIMENTS)}"], source)
    exp = EXPERIMENTS[experiment]
    search = _search(raw.get("search"), problems, homes)
    fixed = section(raw, "fixed", problems)
    chosen = chosen_by_search(search, raw.get("search"))
    grids = grid_blocks(exp, raw.get("grid"), fixed, chosen, problems, source, homes)
    for key in sorted(
        chosen.keys() & set(fixed) - set(TUNABLE)
    ):  # a tuned setting's fixed value is the default it must beat
        problems.append(f"fixed.{key}: {chosen[key]}; remove it from fixed")
    fixed = fixed_settings(exp, fixed, problems, homes)
    sections = _settings(raw, search, seeds, problems, homes)
    grid_valid = not problems  # a claim's axes are checked against a grid that is valid
    claims, claim_errors = read_claims(raw.get("claims"))
    problems += claim_errors
    if grid_valid:
        problems += claim_problems(claims, grids, experiment)
    spec = None
    if not problems:
        try:
            spec = SweepSpec(
                name=raw["name"],
                description=raw.get("description") or "",
                experiment=experiment,
                seeds=seeds,
                grids=grids,
                fixed=fixed,
                execution=sections["execution"],
                resources=sections["resources"],
                analysis=sections["analysis"],
                search=search or SearchSettings(),
                claims=claims,
                source_yaml=text,
            )
        except ValidationError as exc:
            problems += describe(exc)
    if spec is not None and not problems:
        problems += trial_problems(spec, max_trials)
    if problems or spec is None:
        raise SpecError(problems, source)
    return spec


def section_fields(exp: Experiment | None) -> dict[str, frozenset[str]]:
    """The fields of each section of a spec by the section's name, for the message that names
    the section a misplaced setting belongs under (:func:`~orchestrator.spec_problems.belongs_under`);
    ``exp``'s trial settings as ``fixed/grid`` (none where the experiment is unknown)."""
    trial = (
        frozenset(f for f in exp.config.model_fields if f not in ("seed", "fault")) if exp is not None else frozenset()
    )
    return {
        TOP_LEVEL: frozenset(TOP_KEYS),
        TRIAL_SETTINGS: trial,
        "execution": frozenset(ExecutionSettings.model_fields),
        "execution.curves": frozenset(CurveSettings.model_fields),
        "resources": frozenset(ResourceSettings.model_fields),
        "analysis": frozenset(AnalysisSettings.model_fields),
        "search": frozenset(SearchSettings.model_fields),
        "search.tune": frozenset(TuneSettings.model_fields),
    }


def _settings(
    raw: dict,
    search: SearchSettings | None,
    seeds: list[int],
    problems: list[str],
    homes: dict[str, frozenset[str]] | None = None,
) -> dict[str, Any]:
    """The ``execution``, ``resources`` and ``analysis`` sections, each checked against its
    model (the raw sections are returned: :class:`SweepSpec` validates them again), and the
    tuning's seeds against the spec's."""
    sections = settings_sections(raw, problems)
    for key, model in (
        ("execution", ExecutionSettings),
        ("resources", ResourceSettings),
        ("analysis", AnalysisSettings),
    ):
        given = sections[key]
        try:
            model.model_validate({str(k): v for k, v in given.items()} if isinstance(given, dict) else given)
        except ValidationError as exc:
            problems += [f"{key}.{p}" for p in describe(exc, model, homes, key)]
    if (
        search is not None
        and search.tune is not None
        and isinstance(seeds, list)
        and seeds
        and (search.tune.seeds or 0) > len(seeds)
    ):
        problems.append(
            f"search.tune.seeds: value {search.tune.seeds}: more than the spec's {len(seeds)} seeds "
            f"(allowed: 1..{len(seeds)})"
        )
    return sections


def _search(value: Any, problems: list[str], homes: dict[str, frozenset[str]] | None = None) -> SearchSettings | None:
    """The ``search`` section, validated (None when it is invalid: the problems say why)."""
    try:
        return SearchSettings.model_validate(value or {})
    except ValidationError as exc:
        problems += [
            f"search: {p.removeprefix('spec: ')}" if p.startswith("spec: ") else f"search.{p}"
            for p in describe(exc, SearchSettings, homes, "search")
        ]
        return None
