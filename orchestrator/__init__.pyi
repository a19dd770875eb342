"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .driver import RunSummary as RunSummary
from .driver import new_run_id as new_run_id
from .driver import run_sweep as run_sweep
from .errors import AttnsweepError as AttnsweepError
from .errors import RunError as RunError
from .errors import SpecError as SpecError
from .executors import Executor as Executor
from .executors import LocalExecutor as LocalExecutor
from .executors import RayExecutor as RayExecutor
from .packing import Pack as Pack
from .packing import make_packs as make_packs
from .spec import SweepSpec as SweepSpec
from .spec import load_spec as load_spec
from .spec import parse_spec as parse_spec
from .spec import trial_id as trial_id
