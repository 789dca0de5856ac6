"""What every family engine shares: facts of its domain computed once per bound class, and a reward rubric read
off the episode's verdict.

`Family.bind` turns an engine into one subclass per domain (`OpenAdaptEnvironment.bind`), so anything an engine
derives from `cls.domain` alone (lookup tables, a catalogue, compiled rules) belongs to that subclass: computed
on first use and kept in the subclass's own `__dict__`, never inherited from the unbound engine or shared with
another domain's class.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from openadapt.kit.rewards import RewardComponent, RewardComponents

T = TypeVar("T")


def per_domain(build: Callable[[Any], T]) -> Any:
    """Decorate `def facts(cls) -> T` in an engine: `cls.facts()` (or `self.facts()`) builds the value once per
    bound class and returns the same object after."""
    key = f"_per_domain_{build.__name__}"

    @functools.wraps(build)
    def get(cls: type) -> T:
        if key not in cls.__dict__:
            setattr(cls, key, build(cls))
        return cls.__dict__[key]

    return classmethod(get)


def verdict_rubric(verdict: Callable[[], Any], *parts: tuple[str, float, float, str]) -> RewardComponents:
    """The reward as components `(name, low, high, description)` that each read the attribute of its own name off
    `verdict()`, the episode's scored outcome (called when the rubric scores the final step)."""
    return RewardComponents(*(RewardComponent(name, low, high, _reads(verdict, name), description)
                              for name, low, high, description in parts))


def _reads(verdict: Callable[[], Any], name: str) -> Callable[[Any, Any], float]:
    return lambda action, outcome: getattr(verdict(), name)
