"""Sweep specs, trial expansion, packing, execution on Ray, and the CLI.

The only package that ties a spec to workers and workers to the store.
"""

from orchestrator.driver import RunSummary, new_run_id, run_sweep
from orchestrator.errors import AttnsweepError, RunError, SpecError
from orchestrator.executors import Executor, LocalExecutor, RayExecutor
from orchestrator.packing import Pack, make_packs
from orchestrator.spec import SweepSpec, load_spec, parse_spec, trial_id

__all__ = [
    "AttnsweepError",
    "Executor",
    "LocalExecutor",
    "Pack",
    "RayExecutor",
    "RunError",
    "RunSummary",
    "SpecError",
    "SweepSpec",
    "load_spec",
    "make_packs",
    "new_run_id",
    "parse_spec",
    "run_sweep",
    "trial_id",
]
