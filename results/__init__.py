"""The results store, its queries and the analysis of section 1 of docs/claims.md.

Knows rows and tables (polars, pyarrow), not models, specs or scheduling: it imports
nothing else of the project.
"""

from results.critical import critical_sample_sizes, outcomes, success_rates
from results.errors import QueryError, StoreError
from results.fits import MODELS, compare_growth, fit_growth, predict
from results.query import run_query, stream_query
from results.store import ResultsStore, rows_to_table, write_parquet_atomic
from results.writer import TrialWriter

__all__ = [
    "MODELS",
    "QueryError",
    "ResultsStore",
    "StoreError",
    "TrialWriter",
    "compare_growth",
    "critical_sample_sizes",
    "fit_growth",
    "outcomes",
    "predict",
    "rows_to_table",
    "run_query",
    "stream_query",
    "success_rates",
    "write_parquet_atomic",
]
