"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .boolean import Analysis as Analysis
from .boolean import analyze_run as analyze_run
from .boolean import settings_of as settings_of
from .claims import judge as judge
from .completeness import incomplete_note as incomplete_note
from .replicate import Comparison as Comparison
from .replication import compare_runs as compare_runs
from .symmetry import SymmetryAnalysis as SymmetryAnalysis
from .symmetry import analyze_symmetry_run as analyze_symmetry_run
