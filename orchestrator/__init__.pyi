"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .driver import RunSummary as RunSummary, new_run_id as new_run_id, run_sweep as run_sweep
from .errors import AttnsweepError as AttnsweepError, RunError as RunError, SpecError as SpecError
from .executors import Executor as Executor, LocalExecutor as LocalExecutor, RayExecutor as RayExecutor
from .packing import Pack as Pack, make_packs as make_packs
from .spec import SweepSpec as SweepSpec, load_spec as load_spec, parse_spec as parse_spec, trial_id as trial_id
