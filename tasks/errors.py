"""Errors raised by the data generators."""


class TaskError(ValueError):
    """A task was asked for with settings it cannot honour."""


class AmbiguousTrainingSetError(TaskError):
    """Every allowed draw of a training set was explained by more than one support."""


class AmbiguityCheckTooLargeError(TaskError):
    """The exact uniqueness check of a training set would take too long or too much memory."""
