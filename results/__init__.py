"""The results store: Parquet files of trials and runs, their checks, the streaming writer
and read-only SQL over them.

Knows rows and tables (polars, pyarrow), not models, specs, scheduling or statistics: it
imports nothing else of the project (the statistics of the rows are :mod:`attnsweep.stats`).
Names load on first use (lazy_loader).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
