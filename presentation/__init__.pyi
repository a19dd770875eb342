"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .published import load as load
from .readme_sections import check_readme as check_readme
from .replication import write_report as write_report
from .report import build_report as build_report
from .report import summary as summary
from .terminal import print_analysis as print_analysis
from .terminal import print_scale as print_scale
from .terminal import print_symmetry as print_symmetry
