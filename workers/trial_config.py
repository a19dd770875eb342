"""What every trial config is, whatever its experiment: the type the orchestrator and the
workers pass trials around as.

The experiments' configs (workers/config.py: ``BooleanTrialConfig``, ``SymmetryTrialConfig``)
are pydantic models that satisfy this protocol by their fields; no class derives from it, so an
experiment's config needs nothing of attnsweep's but these fields.
"""

from __future__ import annotations

from typing import Any, Protocol


class TrialConfig(Protocol):
    """One trial's settings: a training-set size, a seed and a step budget, plus whatever the
    experiment adds; dumped to a dict for its row and its id (orchestrator/spec.py ``trial_id``)."""

    @property
    def m(self) -> int:
        """Training-set size (samples)."""
        ...

    @property
    def seed(self) -> int:
        """Seeds the trial's data and initialisation."""
        ...

    @property
    def max_epochs(self) -> int:
        """Epochs (full-batch steps) before the trial gives up."""
        ...

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """Every setting by name (pydantic's ``model_dump``)."""
        ...
