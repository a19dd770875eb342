"""The errors the Python API raises, in one place (they live where they arise)."""

from attnsweep.orchestrator.errors import ArgumentError, AttnsweepError, RunError, SpecError
from attnsweep.results.errors import QueryError, StoreError

__all__ = ["ArgumentError", "AttnsweepError", "QueryError", "RunError", "SpecError", "StoreError"]
