"""Sweep specs, trial expansion, packing, execution on Ray, and the analysis of a run.

The only package that ties a spec to workers and workers to the store. Names load on first
use (lazy_loader, Scientific Python SPEC 1): the CLI's (:mod:`attnsweep.cli`) light commands (``--help``,
``validate``, ``query``, ``store check``, ``status``) never import torch or Ray.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "driver": ["RunSummary", "new_run_id", "run_sweep"],
    "errors": ["AttnsweepError", "RunError", "SpecError"],
    "executors": ["Executor", "LocalExecutor", "RayExecutor"],
    "packing": ["Pack", "make_packs"],
    "spec": ["SweepSpec", "load_spec", "parse_spec", "trial_id"],
})
