"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .atomic_write import write_parquet_atomic as write_parquet_atomic
from .errors import QueryError as QueryError
from .errors import StoreError as StoreError
from .query import run_query as run_query
from .query import stream_query as stream_query
from .store import ResultsStore as ResultsStore
from .store import rows_to_table as rows_to_table
from .writer import TrialWriter as TrialWriter
