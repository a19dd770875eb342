"""The errors a user of attnsweep can meet, rooted in :class:`AttnsweepError`.

The lower layers keep their own error bases (``tasks.TaskError``,
``results.StoreError``) because they import nothing of the orchestrator; the CLI treats
those as user errors too (exit code 2).
"""


class AttnsweepError(Exception):
    """Root of attnsweep's own errors."""


class ArgumentError(AttnsweepError, TypeError):
    """A Python API function was given an argument of the wrong type or out of its range
    (also a TypeError, so code that catches that keeps working)."""


SHOWN_PROBLEMS = 50
"""Problems a spec error lists at most (the rest are counted)."""
SHOWN_VALUES = 3
"""Values a message names when many values of one field break one rule (the rest are counted)."""


class SpecError(AttnsweepError, ValueError):
    """A sweep spec is invalid. The message names each bad field and what is allowed; many
    values of one field that break the same rule (a long range) make one line, not one each.

    Attributes:
        problems: every problem, one line each (uncollapsed).
    """

    def __init__(self, problems: list[str], source: str = "spec"):
        self.problems = problems
        shown = collapse(problems)
        if len(shown) > SHOWN_PROBLEMS:
            shown = [
                *shown[:SHOWN_PROBLEMS],
                f"... and {len(shown) - SHOWN_PROBLEMS} more (fix these first)",
            ]
        lines = "\n".join(f"  - {p}" for p in shown)
        super().__init__(f"{source} is invalid ({len(problems)} problem(s)):\n{lines}")


def collapse(problems: list[str]) -> list[str]:
    """``problems`` with each group of lines ``FIELD: value V: RULE`` that share FIELD and
    RULE made one line naming how many values, the first few and the last."""
    groups: dict[tuple[str, str], list[str]] = {}
    order: list[tuple[str, str] | str] = []
    for p in problems:
        field, sep, rest = p.partition(": value ")
        value, sep2, rule = rest.partition(": ")
        if not (sep and sep2):
            order.append(p)
            continue
        key = (field, rule)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(value)
    out = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        (field, rule), values = item, groups[item]
        if len(values) <= SHOWN_VALUES + 1:
            out += [f"{field}: value {v}: {rule}" for v in values]
        else:
            out.append(f"{field}: {len(values)} values: {rule} ({', '.join(values[:SHOWN_VALUES])}, ..., {values[-1]})")
    return out


class RunError(AttnsweepError):
    """A run could not start or finish (e.g. Ray could not be reached)."""


class RayDiedError(RunError):
    """The embedded local Ray died under a run: the run's finished trials are saved, and
    the run can be resumed (the CLI names the command)."""
