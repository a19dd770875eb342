"""Models, the pack training loop and the code that runs on Ray workers.

Imports ``tasks`` and knows nothing of sweep specs, the results store or scheduling;
Ray appears only in :mod:`workers.entry`. Names load on first use (lazy_loader): trial
configs, experiments and memory estimates need no torch; models and training do.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
