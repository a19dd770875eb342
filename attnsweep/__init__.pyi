"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

__version__: str

from .api import resume as resume, run as run
from .api_reports import judge_runs as judge_runs
from .api_store import CriticalSampleSize as CriticalSampleSize, RunAnalysis as RunAnalysis, Store as Store, open_store as open_store
from .errors import ArgumentError as ArgumentError, AttnsweepError as AttnsweepError, QueryError as QueryError, RunError as RunError, SpecError as SpecError, StoreError as StoreError
from .stats.verdict_common import Verdict as Verdict
