"""Chaos: independent, seeded, per-step random events (a team member drops out, a deadline moves, noise arrives).

Each event fires on a step with its own probability, independently of the others. Every `draw()` consumes the
same amount of randomness whatever fires, so an episode's event sequence depends only on its seed and on how
many steps were drawn, never on what the agent did. Give the schedule its own RNG derived from the episode's
(`random.Random(rng.getrandbits(64))`) so that chaos draws do not shift the episode's other draws.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChaosEvent:
    """A named event that fires on each step with `probability`."""

    name: str
    probability: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"chaos event {self.name!r}: probability {self.probability} is outside [0, 1]")


class ChaosSchedule:
    """Draws which events fire on each step and counts them (for rate checks and episode reports)."""

    __slots__ = ("counts", "events", "rng", "steps")

    def __init__(self, events: Sequence[ChaosEvent], rng: random.Random):
        names = [e.name for e in events]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate chaos event names: {names}")
        self.events = tuple(events)
        self.rng = rng
        self.steps = 0
        self.counts: dict[str, int] = dict.fromkeys(names, 0)

    def draw(self) -> list[str]:
        """The names of the events that fire on this step, in declaration order."""
        self.steps += 1
        fired = []
        for event in self.events:
            if self.rng.random() < event.probability:  # always drawn: the stream never depends on outcomes
                fired.append(event.name)
                self.counts[event.name] += 1
        return fired

    def rates(self) -> dict[str, float]:
        """Observed firing rate of each event over the steps drawn so far."""
        return {name: (count / self.steps if self.steps else 0.0) for name, count in self.counts.items()}
