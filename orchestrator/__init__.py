"""Sweep specs, trial expansion, packing, execution on Ray, resume, Ray jobs and replication runs.

The only package that ties a spec to workers and workers to the store. Names load on first
use (lazy_loader, Scientific Python SPEC 1): the CLI's (:mod:`attnsweep.cli`) light commands (``--help``,
``validate``, ``query``, ``store check``, ``status``) never import torch or Ray.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
