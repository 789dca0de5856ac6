import random
from typing import Literal

import pytest

from openadapt.kit import (
    AgentAction,
    AgentObservation,
    Outcome,
    RewardComponent,
    RewardComponents,
    ShapedEnvironment,
)
from openadapt.kit.section import PackageSection

SECTION = PackageSection.model_validate({
    "task": "test", "environment": "env:Env", "action": "env:Act", "observation": "env:Obs", "eci_tiers": [1],
    "step_budget": {1: 5}, "reward_range": [-1.0, 1.0], "solved_reward": 0.9, "invalid_action_reward": -0.1,
    "policies": {"oracle": "env:Oracle"},
    "text_protocol": {"system_template": "s.j2", "observation_template": "o.j2", "malformed_reward": -0.1},
})


class Act(AgentAction):
    kind: Literal["cost", "bonus", "priced", "plain_error", "end"] | None = None


class Obs(AgentObservation):
    pass


class Env(ShapedEnvironment[Act, Obs]):
    observation_type = Obs
    section = SECTION

    def build_rubric(self):
        return RewardComponents(RewardComponent("done", 0.0, 1.0, lambda a, o: 1.0))

    def generate(self, rng: random.Random, tier) -> None:
        pass

    def apply(self, action: Act) -> Outcome:
        if action.kind == "cost":
            self.shape(-0.3, "cost")
        elif action.kind == "bonus":
            self.shape(0.2, "bonus")
        elif action.kind == "priced":
            self.price_rejection(-0.5, "priced")
            return Outcome("no", error="refused")
        elif action.kind == "plain_error":
            return Outcome("no", error="refused")
        elif action.kind == "end":
            self.shape(0.5, "bonus")
            return Outcome("done", terminal=True, solved=True)
        return Outcome("ok")

    def observe(self):
        return {}


def test_shaping_is_paid_on_its_step():
    env = Env()
    env.reset(seed=1)
    assert env.step(Act(kind="cost")).reward == pytest.approx(-0.3)
    assert env.step(Act(kind="bonus")).reward == pytest.approx(0.2)
    assert env.step(Act()).reward == 0.0  # nothing carries over to the next step


def test_a_priced_rejection_costs_exactly_its_price():
    env = Env()
    env.reset(seed=1)
    assert env.step(Act(kind="plain_error")).reward == pytest.approx(-0.1)
    obs = env.step(Act(kind="priced"))
    assert obs.reward == pytest.approx(-0.5) and obs.error == "refused"


def test_terminal_step_is_clipped_and_reports_the_ledger():
    env = Env()
    env.reset(seed=1)
    env.step(Act(kind="cost"))
    env.step(Act(kind="priced"))
    final = env.step(Act(kind="end"))
    assert final.reward == 1.0  # 1.0 from the rubric + 0.5 shaping, clipped to the reward range
    assert final.metadata["step_shaping"] == {"bonus": 0.5, "cost": -0.3, "priced": -0.5}
    assert final.metadata["episode_return"] == pytest.approx(-0.3 - 0.5 + 1.0)


def test_reset_starts_a_clean_ledger():
    env = Env()
    env.reset(seed=1)
    env.step(Act(kind="cost"))
    env.reset(seed=2)
    assert env.shaping_ledger() == {}
    final = env.step(Act(kind="end"))
    assert final.metadata["step_shaping"] == {"bonus": 0.5}
