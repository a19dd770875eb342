"""What a person reads of a run: the analysis printed in a terminal, the HTML verdict
report and its templates, the published findings, the replication report and the query
output formats.

Imports the sweep machinery (:mod:`attnsweep.orchestrator`, for the analysis it shows) and
what is below it; the CLI and the Python API import this. Names load on first use (lazy_loader).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
