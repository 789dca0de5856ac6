"""Which episodes training plays: seeds (always below the held-out range), tiers (a `TierPlan`), and what the
curriculum hears about each finished episode (`EpisodeOutcome`)."""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from openadapt.envpkg.evaluation import EVAL_SEED_START


def training_seed(run_seed: int, index: int) -> int:
    """The environment seed of training episode group `index` of a run seeded `run_seed`: a deterministic draw
    from [0, EVAL_SEED_START), so training never meets a held-out seed and a resumed run replays nothing."""
    return random.Random(f"openadapt-train:{run_seed}:{index}").randrange(EVAL_SEED_START)


def tier_rng(run_seed: int, index: int) -> random.Random:
    """The RNG handed to `TierPlan.next_tier` for episode group `index` (deterministic, resume-safe)."""
    return random.Random(f"openadapt-tier:{run_seed}:{index}")


@runtime_checkable
class TierPlan(Protocol):
    """Chooses the ECI tier of each training episode group.

    `next_tier(rng)` is called once per episode group (one prompt of GRPO: all `num_generations` completions
    of the group play the same seed at the same tier), in order, from the main process, just before the group
    is rolled out. `rng` is a fresh `random.Random` derived from the run seed and the group index, so a plan
    that draws only from it is reproducible across resumes; a plan may also keep its own state (a curriculum
    updates its tier from `on_episode` and callbacks). The returned tier must be one the current package
    supports, or training stops with a TrainingError. A plan may also have a `turn_tier` attribute: the tier
    whose `max_turns` every episode gets when that is higher than the episode's own (a curriculum's current
    tier, so that replays of earlier tiers get its turns)."""

    def next_tier(self, rng: random.Random) -> int: ...


class FixedTierPlan:
    """The default plan: a tier drawn uniformly from `tiers` (one tier: always that tier)."""

    def __init__(self, tiers: list[int]):
        if not tiers:
            raise ValueError("FixedTierPlan needs at least one tier")
        self.tiers = list(tiers)

    def next_tier(self, rng: random.Random) -> int:
        return self.tiers[0] if len(self.tiers) == 1 else rng.choice(self.tiers)


class EpisodeOutcome(BaseModel):
    """One finished training episode (one completion of a GRPO group), as `on_episode` receives it.

    `global_step` is the optimizer step this episode trains: 1-based, equal to `trainer.state.global_step` in
    the `on_step_end` callback of that step. `episode_return` is the sum of the episode's per-step rewards and
    `final_reward` the last step's reward; `solved`, `components` (the terminal reward by component) and
    `solve_rate_signal` come from the environment's final metadata. An episode cut short by the run's
    `max_turns` before the environment ended it counts as not solved, with empty components."""

    global_step: int
    group: int = Field(description="index of the episode group in the run (seed and tier are drawn from it)")
    package: str
    seed: int
    eci: int
    solved: bool
    episode_return: float
    final_reward: float
    components: dict[str, float] = Field(default_factory=dict)
    solve_rate_signal: float | None = None
    turns: int
    finished: bool = Field(description="the environment ended the episode (False: cut by max_turns)")
    explored: bool = Field(default=False, description="its first turn opened with an exploration draw "
                           "(`explore`): the policy did not choose that opening")
