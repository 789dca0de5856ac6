"""Reward components as OpenEnv (RFC 004) rubrics.

An environment declares its reward as named components, each with its own range; the total is their sum.
Each component is a child rubric, so `env.rubric.named_rubrics()` and the per-episode breakdown that goes
into the final observation's metadata come from one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from openenv.core.rubrics import Rubric

Scorer = Callable[[Any, Any], float]


class RewardComponent(Rubric):
    """One named term of the reward, clipped into its declared range."""

    def __init__(self, name: str, low: float, high: float, scorer: Scorer, description: str = ""):
        super().__init__()
        if not low <= high:
            raise ValueError(f"component {name!r}: low {low} > high {high}")
        self.name = name
        self.low = low
        self.high = high
        self.description = description
        self._scorer = scorer

    def forward(self, action: Any, observation: Any) -> float:
        value = float(self._scorer(action, observation))
        if math.isnan(value):
            raise ValueError(f"reward component {self.name!r} produced NaN")
        return min(self.high, max(self.low, value))


class RewardComponents(Rubric):
    """Sum of named components; `breakdown()` reports the last value of each."""

    def __init__(self, *components: RewardComponent):
        super().__init__()
        names = [c.name for c in components]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate reward component names: {names}")
        for component in components:
            setattr(self, component.name, component)
        self._components = components

    @property
    def components(self) -> tuple[RewardComponent, ...]:
        return self._components

    @property
    def range(self) -> tuple[float, float]:
        return (sum(c.low for c in self._components), sum(c.high for c in self._components))

    def forward(self, action: Any, observation: Any) -> float:
        return sum(component(action, observation) for component in self._components)

    def reset(self) -> None:
        for component in self._components:
            component.last_score = None

    def breakdown(self) -> dict[str, float]:
        return {c.name: round(c.last_score or 0.0, 6) for c in self._components}

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"name": c.name, "low": c.low, "high": c.high, "description": c.description}
            for c in self._components
        ]
