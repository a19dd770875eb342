"""The results store, its queries and the analysis of section 1 of docs/claims.md.

Knows rows and tables (polars, pyarrow), not models, specs or scheduling: it imports
nothing else of the project. Names load on first use (lazy_loader): reading the store
does not import scipy, which only the fits need.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "critical": ["critical_sample_sizes", "outcomes", "success_rates"],
    "errors": ["QueryError", "StoreError"],
    "fits": ["MODELS", "compare_growth", "fit_growth", "predict"],
    "query": ["run_query", "stream_query"],
    "store": ["ResultsStore", "rows_to_table", "write_parquet_atomic"],
    "writer": ["TrialWriter"],
})
