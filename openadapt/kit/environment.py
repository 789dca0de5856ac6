"""`OpenAdaptEnvironment`: the OpenEnv `Environment` every openadapt package subclasses.

The base class owns everything that is not domain logic: per-episode tier selection (`reset(seed, eci)`),
seeding, the step budget, malformed and invalid actions, stepping after the end, the reward rubric, and the
metadata contract. A subclass writes four hooks:

- `build_rubric()`: the reward components (`RewardComponents`).
- `generate(rng, tier)`: build a new episode from the seeded rng and the tier's profile.
- `apply(action)`: carry out one valid action and say what happened (`Outcome`).
- `observe()`: the domain fields of the observation the agent sees now.

and `oracle_view()` to hand privileged state to its oracle (never served over the wire). Optional:
`secret_values()` (checked by the validator for leakage), `prompt_context()` (static facts for the prompt
templates) and `http_routes()` (extra HTTP routes, e.g. a file download).

The package facts (tiers, step budgets, rewards) come from the package's manifest section, which the loader
binds to the class (`bind(section)` returns a subclass); the kit never reads files.
"""

from __future__ import annotations

import math
import random
import secrets
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from openenv.core.env_server.interfaces import Environment

from openadapt.kit.eci import DEFAULT_PROFILES, Perturber, TierProfile
from openadapt.kit.models import MALFORMED_KEY, AgentAction, AgentObservation, EpisodeState
from openadapt.kit.rewards import RewardComponents
from openadapt.kit.section import PackageSection

ActT = TypeVar("ActT", bound=AgentAction)
ObsT = TypeVar("ObsT", bound=AgentObservation)


@dataclass(slots=True)
class Outcome:
    """What one action did. `error` is a machine-readable code for a rejected action."""

    feedback: str
    error: str | None = None
    terminal: bool = False
    solved: bool = False


class OpenAdaptEnvironment(Environment[ActT, ObsT, EpisodeState], Generic[ActT, ObsT]):
    """Base class; see the module docstring for the hooks a domain implements."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    observation_type: ClassVar[type[AgentObservation]]
    tier_profiles: ClassVar[dict[int, TierProfile]] = DEFAULT_PROFILES
    solve_rate_window: ClassVar[int] = 50
    section: ClassVar[PackageSection | None] = None

    def __init__(self) -> None:
        if self.section is None:
            raise TypeError(f"{type(self).__name__} has no package section: load it through "
                            "openadapt.envpkg.loader (which binds the manifest), or call bind(section) first")
        super().__init__(rubric=self.build_rubric())
        self._solved_history: deque[bool] = deque(maxlen=self.solve_rate_window)
        self._state = EpisodeState(episode_id=None, step_count=0)
        self._final: ObsT | None = None
        self.tier: TierProfile = self.tier_profiles[self.section.eci_tiers[0]]
        self.perturb = Perturber(random.Random(0), self.tier)

    # ---- domain hooks -------------------------------------------------------------------------------
    def build_rubric(self) -> RewardComponents:
        raise NotImplementedError

    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        raise NotImplementedError

    def apply(self, action: ActT) -> Outcome:
        raise NotImplementedError

    def observe(self) -> dict[str, Any]:
        raise NotImplementedError

    def oracle_view(self) -> Any:
        """Privileged episode state for the package's oracle. Never exposed through the server."""
        raise NotImplementedError

    def secret_values(self) -> list[str]:
        """Strings that give the current episode's answer away: the validator checks that none appears in the
        first observation or in the served state (the agent must earn them by acting)."""
        return []

    @classmethod
    def http_routes(cls) -> Any:
        """Optional FastAPI `APIRouter` with extra routes served beside OpenEnv's (e.g. a file download)."""
        return None

    # ---- package facts ------------------------------------------------------------------------------
    @classmethod
    def bind(cls, section: PackageSection, **attributes: Any) -> type[OpenAdaptEnvironment]:
        """A subclass of this environment bound to one package's manifest section (and, for a family engine,
        its domain and model classes): what OpenEnv's server builds sessions from. Each call returns a fresh
        subclass; the class itself is never mutated."""
        namespace = {"section": section, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     **attributes}
        return type(cls.__name__, (cls,), namespace)

    @classmethod
    def prompt_context(cls) -> dict[str, Any]:
        """Static facts the system prompt template may use (vocabularies, tool lists)."""
        return {}

    # ---- OpenEnv contract ---------------------------------------------------------------------------
    @property
    def state(self) -> EpisodeState:
        return self._state

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, eci: int = 1, **kwargs: Any
    ) -> ObsT:
        # Validate every argument before touching the running episode.
        if isinstance(eci, bool) or eci not in self.section.eci_tiers:
            raise ValueError(
                f"eci={eci!r} is not a supported tier; this environment supports {self.section.eci_tiers}"
            )
        if seed is None:
            seed = secrets.randbelow(2**31)
        elif isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed={seed!r} must be an integer")
        rng = random.Random(seed)
        self.tier = self.tier_profiles[eci]
        self.perturb = Perturber(rng, self.tier)
        self._state = EpisodeState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            eci=eci,
            seed=seed,
            step_budget=self.section.step_budget[eci],
        )
        self._final = None
        self._reset_rubric()
        self.generate(rng, self.tier)
        return self._observation(Outcome(feedback="New episode."), reward=0.0)

    def step(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        if self._state.episode_id is None:
            raise RuntimeError("step() called before reset(): start an episode first")
        if self._final is not None:
            return self._final.model_copy(
                update={"reward": 0.0, "error": "episode_over", "feedback": "The episode is over; call reset()."}
            )
        self._state.step_count += 1
        malformed = action.metadata.get(MALFORMED_KEY) if action.metadata else None
        if malformed:
            outcome = Outcome(feedback=f"Your reply could not be parsed as an action: {malformed}",
                              error="malformed_completion")
            reward = self.section.malformed_reward
        else:
            outcome = self.apply(action)
            reward = self.section.invalid_action_reward if outcome.error else 0.0
        termination = "agent"
        if not outcome.terminal and self._state.step_count >= self._state.step_budget:
            outcome.terminal = True
            termination = "budget_exhausted"
            outcome.feedback += " The step budget is spent; the episode ends unsolved."
        if outcome.terminal:
            reward += self._apply_rubric(action, outcome)
        return self._observation(outcome, reward, termination)

    # ---- internals ----------------------------------------------------------------------------------
    def _observation(self, outcome: Outcome, reward: float, termination: str = "agent") -> ObsT:
        low, high = self.section.reward_range
        reward = min(high, max(low, reward))
        if not math.isfinite(reward):
            raise ValueError(f"non-finite reward {reward}")
        state = self._state
        state.episode_return += reward
        metadata: dict[str, Any] = {
            "eci": state.eci,
            "seed": state.seed,
            "step": state.step_count,
            "steps_remaining": state.step_budget - state.step_count,
        }
        if outcome.terminal:
            state.done = True
            self._solved_history.append(outcome.solved)
            metadata.update(
                solved=outcome.solved,
                solve_rate_signal=round(sum(self._solved_history) / len(self._solved_history), 6),
                solve_rate_window=len(self._solved_history),
                reward_components=self.rubric.breakdown(),
                episode_return=round(state.episode_return, 6),
                termination=termination,
            )
        obs = self.observation_type(
            **self.observe(),
            feedback=outcome.feedback,
            error=outcome.error,
            eci=state.eci,
            steps_remaining=state.step_budget - state.step_count,
            done=outcome.terminal,
            reward=round(reward, 6),
            metadata=metadata,
        )
        if outcome.terminal:
            self._final = obs
        return obs
