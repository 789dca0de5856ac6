"""The exemplar's mechanics: a hidden number 0-99, higher/lower hints; harder tiers lose hints (ECI 2),
inject rumours (ECI 3), and hide a house rule that only `read_rules` reveals (ECI 4)."""

from __future__ import annotations

import random
from typing import Any

from openadapt.kit import OpenAdaptEnvironment, Outcome, RewardComponent, RewardComponents, TierProfile

from .models import CodeAction, CodeObservation


class CodeEnvironment(OpenAdaptEnvironment[CodeAction, CodeObservation]):
    observation_type = CodeObservation

    def build_rubric(self) -> RewardComponents:
        return RewardComponents(
            RewardComponent("found", 0.0, 0.8, lambda a, o: 0.8 * o.solved, "the number was found"),
            RewardComponent("speed", 0.0, 0.2, lambda a, o: 0.2 * o.solved * self._pace(), "steps left"),
        )

    def _pace(self) -> float:
        return max(0.0, 1.0 - (self._state.step_count - 1) / self._state.step_budget)

    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        self._parity = rng.choice(("even", "odd")) if tier.hidden_constraints else None
        target = rng.randint(0, 99)
        if self._parity and target % 2 != (self._parity == "odd"):
            target = (target + 1) % 100
        self._target, self._low, self._high = target, 0, 99
        self._hints: list[str] = []
        self._rules: list[str] = []
        rumours = [f"rumour: the number is {'above' if rng.random() < 0.5 else 'below'} {rng.randint(10, 90)}"
                   for _ in range(tier.distractors)]
        self._hints = self.perturb.inject(self._hints, rumours)

    def apply(self, action: CodeAction) -> Outcome:
        if action.tool == "read_rules":
            self._rules = [f"house rule: the code is {self._parity}"] if self._parity else ["no house rules"]
            return Outcome("Rules read.")
        if action.tool != "guess" or action.number is None:
            return Outcome("Use guess with a number, or read_rules.", error="bad_action")
        if self._parity and action.number % 2 != (self._parity == "odd"):
            return Outcome("That number breaks the house rule.", error="breaks_rule")
        if action.number == self._target:
            return Outcome(f"Correct: the code is {self._target}.", terminal=True, solved=True)
        higher = action.number < self._target
        if self.perturb.chance(self.tier.drop):  # a lost hint tells the agent nothing, range included
            self._hints.append(f"{action.number}: (hint lost)")
            return Outcome("No hint this time.")
        self._low, self._high = ((max(self._low, action.number + 1), self._high) if higher
                                 else (self._low, min(self._high, action.number - 1)))
        self._hints.append(f"{action.number}: {'higher' if higher else 'lower'}")
        return Outcome("Higher." if higher else "Lower.")

    def observe(self) -> dict[str, Any]:
        return {"low": self._low, "high": self._high, "hints": list(self._hints), "rules": list(self._rules)}

    def oracle_view(self) -> dict[str, Any]:
        return {"target": self._target, "parity": self._parity}

    def secret_values(self) -> list[str]:
        return [f"the code is {self._target}"]
