"""Judging runs: m* per cell, growth-law fits, verdicts, tuning choices, completeness checks
and the comparison of a replication with its baseline, read from the store.

Sits between ``stats`` (the statistics of rows) and ``presentation`` (what a person reads);
it reads a run's record and spec through ``orchestrator`` and never schedules anything. Names
load on first use (lazy_loader), as in every package here.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
