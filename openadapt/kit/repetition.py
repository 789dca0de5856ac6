"""Repeat-streak penalty: make an agent pay for sending the same action again and again.

Loops are the classic failure of tool-using agents: retrying a call that can never succeed, re-running the same
query, re-submitting the same value. A sensible retry is fine (a flaky network needs one or two), so the first
`free` identical actions in a row cost nothing; every further one costs `step` more than the last, up to `cap`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any


def action_key(action: Any) -> str:
    """Identity of an action for streak counting: its JSON without default-valued fields (so the empty action and
    an explicitly all-default one are the same action). Metadata is included: two identical malformed completions
    are the same action, two different ones are not."""
    return action.model_dump_json(exclude_defaults=True)


@dataclass(frozen=True, slots=True)
class RepeatRule:
    """How a streak of identical consecutive actions is priced."""

    free: int = 3  # identical actions in a row that cost nothing (a first try and two retries)
    step: float = 0.05  # penalty added for each identical action beyond `free`
    cap: float = 0.25  # the most one step can be penalised

    def __post_init__(self) -> None:
        if self.free < 1 or self.step < 0 or self.cap < 0:
            raise ValueError(f"invalid repeat rule {self}: free >= 1, step >= 0 and cap >= 0 are required")

    def penalty(self, streak: int) -> float:
        """The (non-positive) reward for the `streak`-th identical action in a row."""
        if streak <= self.free:
            return 0.0
        return -min(self.cap, self.step * (streak - self.free))


class RepeatStreak:
    """Counts identical consecutive actions within one episode; `observe` returns the step's penalty."""

    __slots__ = ("_last", "_streak", "rule")

    def __init__(self, rule: RepeatRule | None = None):
        self.rule = rule or RepeatRule()
        self._last: Hashable | None = None
        self._streak = 0

    @property
    def streak(self) -> int:
        """How many times in a row the last observed action has been taken."""
        return self._streak

    def observe(self, key: Hashable) -> float:
        """Record one action (by its key, e.g. `action_key(action)`) and return its penalty (<= 0)."""
        if self._streak and key == self._last:
            self._streak += 1
        else:
            self._last, self._streak = key, 1
        return self.rule.penalty(self._streak)

    def reset(self) -> None:
        self._last, self._streak = None, 0
