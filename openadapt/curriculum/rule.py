"""The escalation rule (docs/curriculum.md): a windowed solve rate per tier, escalation at the threshold (with
checks: a windowed rate at the floor calls for a greedy check on fresh validation seeds, which must reach the
threshold), replay of earlier tiers, and collapse detection after an escalation."""

from __future__ import annotations

import random
from collections import deque
from enum import StrEnum

from pydantic import BaseModel, Field, model_validator


class RuleConfig(BaseModel):
    threshold: float = Field(default=0.90, ge=0.0, le=1.0, description="escalate when the windowed rate is >= "
                             "this (0: a fixed schedule, one tier per min_episodes episodes)")
    window: int = Field(default=64, ge=1, description="most recent episodes of the tier that count")
    min_episodes: int = Field(default=64, ge=1, description="episodes at a tier before it may escalate")
    replay_share: float = Field(default=0.1, ge=0.0, lt=1.0, description="share of episodes on earlier tiers")
    collapse_drop: float = Field(default=0.3, gt=0.0, le=1.0,
                                 description="a tier whose rate falls this far below the threshold (with checks: "
                                 "their floor) has collapsed")
    collapse_min: int = Field(default=16, ge=1, description="replayed episodes needed to call a collapse")
    step_back: bool = Field(default=False, description="return to the collapsed tier instead of only reporting")
    max_tier: int = Field(default=5, ge=1, le=5)
    check_episodes: int = Field(default=0, ge=0, description="greedy episodes on fresh validation seeds that "
                                "must confirm a windowed pass before the tier escalates (0: the window decides)")
    check_floor: float | None = Field(default=None, ge=0.0, le=1.0, description="with checks, the windowed rate "
                                      "that calls for one (default: the threshold)")
    check_every: int = Field(default=50, ge=1, description="optimizer steps between two checks at one tier")
    check_floor_from: int = Field(default=1, ge=1, le=5, description="the first tier the floor applies to; below "
                                  "it a check confirms a windowed pass of the threshold. A tier escalated while "
                                  "its sampled policy is unsettled can be overwritten by the next tier's gradient; "
                                  "where more turns compound sampling errors (ECI 5), the sampled rate trails the "
                                  "greedy one (0.63-0.78 against 0.94-0.97, measured) and stays below the threshold")

    @model_validator(mode="after")
    def _window_covers_minimum(self) -> RuleConfig:
        if self.min_episodes > self.window:
            raise ValueError(f"min_episodes ({self.min_episodes}) cannot exceed window ({self.window}): the "
                             "windowed rate would never see that many episodes")
        return self

    @model_validator(mode="after")
    def _floor_needs_checks(self) -> RuleConfig:
        if self.check_floor is not None and not self.check_episodes:
            raise ValueError("check_floor is the windowed rate that calls for a check: set check_episodes too")
        if self.check_floor_from != 1 and self.check_floor is None:
            raise ValueError("check_floor_from is the first tier check_floor applies to: set check_floor too")
        return self

    def trigger(self, tier: int) -> float:
        """The windowed rate at which `tier` may be mastered: the threshold, or with checks their floor from
        `check_floor_from` on (the sampled policy the window measures may trail the greedy policy the check
        measures). A collapse of a replayed tier is a drop below its line."""
        if self.check_episodes and self.check_floor is not None and tier >= self.check_floor_from:
            return self.check_floor
        return self.threshold


class Decision(StrEnum):
    HOLD = "hold"
    ESCALATE = "escalate"
    MASTERED = "mastered"  # the top tier passed the threshold: the curriculum is done
    COLLAPSE = "collapse"  # an earlier tier, replayed, fell below the collapse line


class TierWindows:
    """Solved flags per tier, most recent `window` kept; serialisable for the run state."""

    def __init__(self, window: int, history: dict[int, list[bool]] | None = None):
        self.window = window
        self._tiers: dict[int, deque[bool]] = {}
        for tier, flags in (history or {}).items():
            self._tiers[int(tier)] = deque(flags, maxlen=window)

    def record(self, tier: int, solved: bool) -> None:
        self._tiers.setdefault(tier, deque(maxlen=self.window)).append(bool(solved))

    def restart(self, tier: int) -> None:
        """Forget a tier's window (on escalation the tier left behind is measured afresh by replay)."""
        self._tiers.pop(tier, None)

    def count(self, tier: int) -> int:
        return len(self._tiers.get(tier, ()))

    def rate(self, tier: int) -> float | None:
        flags = self._tiers.get(tier)
        return sum(flags) / len(flags) if flags else None

    def to_dict(self) -> dict[int, list[bool]]:
        return {tier: list(flags) for tier, flags in sorted(self._tiers.items())}


def decide(config: RuleConfig, windows: TierWindows, tier: int, escalated_from: int | None) -> Decision:
    """What the controller should do now, at `tier` (having arrived from `escalated_from`, if it escalated)."""
    if escalated_from is not None:
        earlier = windows.rate(escalated_from)
        if (earlier is not None and windows.count(escalated_from) >= config.collapse_min
                and earlier < config.trigger(escalated_from) - config.collapse_drop):
            return Decision.COLLAPSE
    if windows.count(tier) < config.min_episodes:
        return Decision.HOLD
    rate = windows.rate(tier)
    if rate is None or rate < config.trigger(tier):
        return Decision.HOLD
    return Decision.MASTERED if tier >= config.max_tier else Decision.ESCALATE


def episode_tier(config: RuleConfig, tier: int, rng: random.Random) -> int:
    """The tier of the next episode: the current one, or (with the replay share) a uniformly drawn earlier one."""
    if tier > 1 and rng.random() < config.replay_share:
        return rng.randint(1, tier - 1)
    return tier
