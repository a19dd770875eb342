"""The analysis of section 1 of docs/claims.md over the store's rows: m* and its interval,
growth-law fits, the verdicts (L1-L4, R; S1-S4), norm use, and the figures.

Works on polars tables; imports only :mod:`attnsweep.results` (how a file is written
beside its name, for the figures). Names load on first use (lazy_loader): the store's
readers never import scipy, which only the fits need.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
