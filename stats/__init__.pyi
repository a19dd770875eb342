"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .critical import critical_sample_sizes as critical_sample_sizes
from .critical import format_m_star as format_m_star
from .critical import outcomes as outcomes
from .critical import success_rates as success_rates
from .fits import MODELS as MODELS
from .fits import compare_growth as compare_growth
from .fits import fit_growth as fit_growth
from .fits import predict as predict
