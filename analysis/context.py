"""One run as the analysis reads it: its record and the settings of its stored spec, read and
parsed once (:class:`RunContext`), then handed to every function that judges the run.

A record without a spec, or a spec without an ``analysis`` (``search``) section, gets the
defaults (records older than those sections); a section that is present and invalid is a
:class:`~attnsweep.orchestrator.errors.SpecError` naming the run and the field, never a
silent fall back to the defaults, which would judge the run by settings it did not ask for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec import AnalysisSettings, SearchSettings
from attnsweep.orchestrator.spec_claims import read_claims
from attnsweep.orchestrator.spec_loading import read_yaml
from attnsweep.orchestrator.spec_problems import describe
from attnsweep.results import ResultsStore

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class RunContext:
    """A run's record and the parsed settings of its stored spec.

    Attributes:
        sweep, run_id: the run.
        record: its ``runs`` record (:meth:`results.store.ResultsStore.read_run`), one row as a dict.
        spec: its stored spec (``spec_yaml``) parsed; ``{}`` for a record without one.
        settings: the spec's ``analysis`` section (defaults where it has none).
        search: the spec's ``search`` section (a grid search where it has none).
    """

    sweep: str
    run_id: str
    record: dict[str, Any]
    spec: dict[str, Any]
    settings: AnalysisSettings
    search: SearchSettings

    @classmethod
    def load(cls, store: ResultsStore, sweep: str, run_id: str) -> RunContext:
        """Read the run's record once and parse its spec's settings.

        Raises:
            StoreError: no such run.
            SpecError: the stored spec, or its ``analysis`` or ``search`` section, cannot be
                parsed (the message names the run and the field).
        """
        return cls.of_record(sweep, run_id, store.read_run(sweep, run_id))

    @classmethod
    def of_record(cls, sweep: str, run_id: str, record: dict[str, Any]) -> RunContext:
        """The context of a record already read (e.g. from a published folder).

        Raises:
            SpecError: as :meth:`load`, or the record names no experiment attnsweep analyses.
        """
        from attnsweep.workers.experiments import EXPERIMENTS

        experiment = experiment_of(record)
        if experiment not in EXPERIMENTS:  # said here, once, for every reader of the run
            raise SpecError(
                [f"experiment: value {experiment!r}: not an experiment; allowed: {sorted(EXPERIMENTS)}"],
                f"the record of run {run_id}",
            )
        spec = _spec_of(run_id, sweep, record.get("spec_yaml"))
        return cls(
            sweep,
            run_id,
            record,
            spec,
            _section(AnalysisSettings, "analysis", spec, run_id, sweep),
            _section(SearchSettings, "search", spec, run_id, sweep),
        )

    @property
    def experiment(self) -> str:
        """The run's experiment (:func:`experiment_of` its record)."""
        return experiment_of(self.record)

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The spec's own claims (orchestrator/spec_claims.py), as dicts; [] without a section.

        Raises:
            SpecError: the section is invalid (naming the run and the claim's field).
        """
        problems: list[str]
        claims, problems = read_claims(self.spec.get("claims"))
        if problems:
            raise SpecError(problems, _source(self.run_id, self.sweep))
        return [c.model_dump() for c in claims]

    @property
    def tuned(self) -> set[str]:
        """Settings the run's adaptive search tuned per cell (empty for a grid sweep)."""
        tune = self.search.tune
        return set(tune.params()) if self.search.adaptive and tune is not None else set()


def _source(run_id: str, sweep: str) -> str:
    return f"the spec stored with run {run_id} of sweep {sweep}"


def _spec_of(run_id: str, sweep: str, text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        raw = read_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecError([f"spec_yaml: not YAML: {type(exc).__name__}"], _source(run_id, sweep)) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError([f"spec_yaml: a {type(raw).__name__}, not a mapping of sections"], _source(run_id, sweep))
    return raw


def _section(model: type[M], key: str, spec: dict[str, Any], run_id: str, sweep: str) -> M:
    given = spec.get(key)
    if not given:  # no section (an older record), or an empty one: the defaults
        return model()
    try:
        return model.model_validate({str(k): v for k, v in given.items()} if isinstance(given, dict) else given)
    except ValidationError as exc:
        problems = [
            f"{key}: {p.removeprefix('spec: ')}" if p.startswith("spec: ") else f"{key}.{p}"
            for p in describe(exc, model)
        ]
        raise SpecError(problems, _source(run_id, sweep)) from None


def experiment_of(record: dict) -> str:
    """The experiment of the run ``record`` describes: its ``experiment``, or ``sparse_boolean``
    for a record older than the field (the spec's default, orchestrator/spec.py)."""
    return record.get("experiment") or "sparse_boolean"
