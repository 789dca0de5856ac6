"""A wall-clock limit on one design: no model request starts after it (`generate --time-limit`).

What was written by then is kept: a draft that parses still goes to the validator (its checks are bounded on
their own), and one that does not is kept with the failed run, as any unusable attempt is.
"""

from __future__ import annotations

import time

from openadapt.llm.chat import ReplyError

clock = time.monotonic  # module-level, so a test can run the limit on a clock of its own


class OutOfTime(ReplyError):
    """A request that would start after the design's time limit."""


class Deadline:
    def __init__(self, seconds: float | None = None):
        self.seconds = seconds
        self._at = None if seconds is None else clock() + seconds

    @property
    def passed(self) -> bool:
        return self._at is not None and clock() >= self._at

    def check(self) -> None:
        """OutOfTime when the limit has passed (called before each model request)."""
        if self.passed:
            raise OutOfTime(f"{self} was reached")

    def __str__(self) -> str:
        if self.seconds is None:
            return "no time limit"
        minutes = self.seconds / 60
        return f"the time limit ({minutes:g} min)" if minutes >= 1 else f"the time limit ({self.seconds:g} s)"


NO_DEADLINE = Deadline()
