"""The states of a trial. Stored as their string values in the ``status`` column."""

from __future__ import annotations

import enum


# Not StrEnum (UP042): str() of a member would become its value, not TrialStatus.DONE, a change
# of behaviour for any caller formatting one; the stored value is .value either way.
class TrialStatus(str, enum.Enum):  # noqa: UP042
    """Where a trial stands.

    ``pending`` and ``running`` exist only in the driver; the store holds finished
    states: ``done`` (trained and scored), ``failed`` (an exception in the trial, e.g.
    no unambiguous training set; ``error`` says why), ``diverged`` (loss became NaN/inf;
    ``diverged_epoch`` says when) and ``lost`` (its worker died more often than Ray's
    ``max_retries`` allows).
    """

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    DIVERGED = "diverged"
    LOST = "lost"

    def is_finished(self) -> bool:
        """Whether the state is final."""
        return self not in (TrialStatus.PENDING, TrialStatus.RUNNING)
