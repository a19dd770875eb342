"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

__version__: str

from .api import resume as resume
from .api import run as run
from .api_reports import judge_runs as judge_runs
from .api_store import CriticalSampleSize as CriticalSampleSize
from .api_store import RunAnalysis as RunAnalysis
from .api_store import Store as Store
from .api_store import open_store as open_store
from .errors import ArgumentError as ArgumentError
from .errors import AttnsweepError as AttnsweepError
from .errors import QueryError as QueryError
from .errors import RunError as RunError
from .errors import SpecError as SpecError
from .errors import StoreError as StoreError
from .stats.verdict_common import Verdict as Verdict
