"""Errors raised by the results store and its queries."""


class StoreError(RuntimeError):
    """The store cannot do what was asked (missing data, bad name, unreadable file)."""


class QueryError(StoreError):
    """A query was refused or failed (not read-only, or not valid SQL for the tables)."""
