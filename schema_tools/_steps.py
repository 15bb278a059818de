"""The step budget of one validation: every schema evaluation and regex match spends from it.

`validate` sets a `StepBudget` for the duration of one call (a context variable, so concurrent
validations on threads or tasks each have their own); the validator's hooks `spend` from it, and the
first spend past the limit raises `OverBudget`, which `validate` turns into a refusal. Outside a
validation (`check_schema`, a form helper) nothing is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["OverBudget", "StepBudget", "metered", "spend"]


class OverBudget(Exception):
    """A validation spent more steps than its budget; caught by `validate`, never seen by its callers."""


class StepBudget:
    """At most `limit` steps; `used` counts them (it may pass `limit` by the one spend that overflows)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, steps: int) -> None:
        """Count `steps`; raise `OverBudget` once more than `limit` are spent."""
        self.used += steps
        if self.used > self.limit:
            raise OverBudget(f"more than {self.limit} steps")


_CURRENT: ContextVar[StepBudget | None] = ContextVar("schema_tools_steps", default=None)


def spend(steps: int = 1) -> None:
    """Count `steps` against the current validation's budget, if a validation is running."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.spend(steps)


@contextmanager
def metered(budget: StepBudget) -> Iterator[StepBudget]:
    """Make `budget` the one `spend` counts against while the block runs."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)
