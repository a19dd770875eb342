"""Seeded, deterministic data generators: sparse Boolean functions and seq2seq teachers.

This package imports nothing else of the project: only torch and numpy. Names load on
first use (lazy_loader), so :class:`TaskError` is there without torch.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
