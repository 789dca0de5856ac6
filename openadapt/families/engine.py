"""What every family engine shares: `FamilyEnvironment` (the classes `Family.bind` sets, and a reward declared as
data and read off the episode's verdict), and facts of the domain computed once per bound class.

`Family.bind` turns an engine into one subclass per domain (`OpenAdaptEnvironment.bind`), so anything an engine
derives from `cls.domain` alone (lookup tables, a catalogue, compiled rules) belongs to that subclass: computed
on first use (`@per_domain`) and kept in the subclass's own `__dict__`, never inherited from the unbound engine
or shared with another domain's class.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from openadapt.families.domain import Domain
from openadapt.kit.environment import OpenAdaptEnvironment
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


RewardPart = tuple[str, float, float, str]  # (name, low, high, description) of one reward component


class FamilyEnvironment(OpenAdaptEnvironment):
    """The base of a family engine. `Family.bind` sets `domain` (the domain it runs) and `action_type` and
    `observation_type` (the model classes built for that domain).

    The reward is declared as data: each `REWARD` part is a component that reads the attribute of its own name
    off `verdict()`, the episode's scored outcome (by default `self._verdict`, which the engine sets when it
    generates and scores an episode; a family that scores lazily overrides `verdict()`)."""

    domain: ClassVar[Domain]
    action_type: ClassVar[type]
    observation_type: ClassVar[type]
    REWARD: ClassVar[tuple[RewardPart, ...]] = ()
    _verdict: Any = None

    def build_rubric(self) -> RewardComponents:
        return verdict_rubric(self.verdict, *self.REWARD)

    def verdict(self) -> Any:
        return self._verdict


def verdict_rubric(verdict: Callable[[], Any], *parts: RewardPart) -> RewardComponents:
    """The reward as components `(name, low, high, description)` that each read the attribute of its own name off
    `verdict()`, the episode's scored outcome (called when the rubric scores the final step)."""
    return RewardComponents(*(RewardComponent(name, low, high, _reads(verdict, name), description)
                              for name, low, high, description in parts))


def _reads(verdict: Callable[[], Any], name: str) -> Callable[[Any, Any], float]:
    return lambda action, outcome: getattr(verdict(), name)
