"""The errors a user of attnsweep can meet, rooted in :class:`AttnsweepError`.

The lower layers keep their own error bases (``tasks.TaskError``,
``results.StoreError``) because they import nothing of the orchestrator; the CLI treats
those as user errors too (exit code 2).
"""


class AttnsweepError(Exception):
    """Root of attnsweep's own errors."""


class SpecError(AttnsweepError, ValueError):
    """A sweep spec is invalid. The message names each bad field and what is allowed."""

    def __init__(self, problems: list[str], source: str = "spec"):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source} is invalid ({len(problems)} problem(s)):\n{lines}")


class RunError(AttnsweepError):
    """A run could not start or finish (e.g. Ray could not be reached)."""
