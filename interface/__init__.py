"""attnsweep from Python (a notebook, a script): the code paths the CLI uses, as functions.

    import attnsweep

    store = attnsweep.open_store("results-store")
    store.trials(run="20261201-094653-8ad4a6")   # polars LazyFrame, one row per trial
    result = store.analyze("20261201-094653-8ad4a6")
    result.m_star, result.verdict_table()        # polars DataFrames
    result.m_star_of(model="transformer", T=1024, s=3, norm_bound=None)  # one cell: estimate, interval, bound, flags
    result.fits                                  # growth laws per series, keyed by its settings
    result.show()                                # the run's figures, inline

    summary = attnsweep.run("sweeps/quickstart.yaml", store="results-store")
    attnsweep.resume(summary.run_id, store="results-store")
    attnsweep.judge_runs([summary.run_id], store="results-store")  # verdicts as dicts; writes no file

Names load on first use (lazy_loader): ``import attnsweep`` imports neither torch nor Ray.
"""

from importlib.metadata import PackageNotFoundError as _NotInstalled
from importlib.metadata import version as _version

import lazy_loader as lazy

try:
    __version__: str = _version("attnsweep")
    """The installed distribution's version (pyproject.toml's ``version``)."""
except _NotInstalled:  # run from a checkout that was never installed
    __version__ = "0+unknown"

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
