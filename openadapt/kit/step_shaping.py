"""Per-step reward shaping: costs and bonuses paid on the step they are earned, not only at the end.

`OpenAdaptEnvironment` pays 0 for a valid step, `invalid_action_reward` for a rejected one and the rubric on the
terminal step. `ShapedEnvironment` adds what `apply` asks for on the current step: `shape(delta, reason)` for a
cost (negative) or a bonus (positive), and `price_rejection(total, reason)` to make a rejected step cost exactly
`total` in all (instead of the generic `invalid_action_reward`). The sum still goes through the base class's
clipping into `reward_range`. The episode's shaping, summed by reason (a priced rejection with its whole price),
goes into the final observation's metadata as `step_shaping`.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from openadapt.kit.environment import OpenAdaptEnvironment, Outcome
from openadapt.kit.models import AgentAction, AgentObservation

ActT = TypeVar("ActT", bound=AgentAction)
ObsT = TypeVar("ObsT", bound=AgentObservation)


class ShapedEnvironment(OpenAdaptEnvironment[ActT, ObsT], Generic[ActT, ObsT]):
    """An `OpenAdaptEnvironment` whose `apply` may shape the reward of the step it is handling."""

    def __init__(self) -> None:
        self._pending_shaping = 0.0
        self._shaping_ledger: dict[str, float] = {}
        super().__init__()

    def shape(self, delta: float, reason: str) -> None:
        """Add `delta` to this step's reward."""
        self._pending_shaping += delta
        self._book(reason, delta)

    def price_rejection(self, total: float, reason: str) -> None:
        """Make this rejected step's reward `total` in all; call it for an `Outcome` that carries an error. The
        ledger books the whole price under `reason` (what the reason cost), not just the difference."""
        self._pending_shaping += total - self.section.invalid_action_reward
        self._book(reason, total)

    def _book(self, reason: str, amount: float) -> None:
        self._shaping_ledger[reason] = self._shaping_ledger.get(reason, 0.0) + amount

    def _observation(self, outcome: Outcome, reward: float, termination: str = "agent") -> ObsT:
        if self._state.step_count == 0:  # a fresh episode (reset): nothing carries over
            self._pending_shaping = 0.0
            self._shaping_ledger = {}
        delta, self._pending_shaping = self._pending_shaping, 0.0
        obs = super()._observation(outcome, reward + delta, termination)
        if outcome.terminal:
            obs.metadata["step_shaping"] = {k: round(v, 6) for k, v in sorted(self._shaping_ledger.items())}
        return obs

    def shaping_ledger(self) -> dict[str, Any]:
        """This episode's shaping so far, summed by reason."""
        return dict(self._shaping_ledger)
