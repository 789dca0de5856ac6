"""Enterprise workflow: work a queue of tasks with SLAs, an inbox, a team and policies, inside an authority scope,
while the schema drifts and chaos strikes.

One step: the oversight referee checks the agent's scope (L1 may not escalate or close: -0.5), the action's rule
runs (server/actions.py), the reasoning is scored (server/process_reward.py), then time passes: the chaos events
fire at the seed's rates (server/disruptions.py). The episode ends when the last task is resolved (or the budget
is spent) and is scored by server/scoring.py.
"""

from __future__ import annotations

import random
from typing import Any

from openadapt.kit import (
    TIER_MEANINGS,
    Outcome,
    RewardComponent,
    RewardComponents,
    ShapedEnvironment,
    TierProfile,
)

try:
    from ..models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation
    from .actions import RULES
    from .disruptions import disrupt
    from .generator import CHAOS_EVENTS, DRIFT_STEP, generate_world
    from .process_reward import STUFFING_PENALTY, judge
    from .scenarios import COMPANY_DOMAIN, SCENARIO_NAMES, SCENARIOS
    from .scoring import DESCRIPTIONS, WEIGHTS, Scorecard, score
    from .world import ACTIONS, PERMISSIONS, Message, Task, World
except ImportError:  # standalone `uvicorn server.app:app`
    from models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation
    from server.actions import RULES
    from server.disruptions import disrupt
    from server.generator import CHAOS_EVENTS, DRIFT_STEP, generate_world
    from server.process_reward import STUFFING_PENALTY, judge
    from server.scenarios import COMPANY_DOMAIN, SCENARIO_NAMES, SCENARIOS
    from server.scoring import DESCRIPTIONS, WEIGHTS, Scorecard, score
    from server.world import ACTIONS, PERMISSIONS, Message, Task, World


class HospitalAdmissionsWorkflowEnvironment(ShapedEnvironment[HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation]):
    observation_type = HospitalAdmissionsWorkflowObservation

    # ---- reward ---------------------------------------------------------------------------------------
    def build_rubric(self) -> RewardComponents:
        def part(name: str):
            return lambda action, outcome: getattr(self._scorecard(), name)

        return RewardComponents(*(RewardComponent(name, 0.0, weight, part(name), DESCRIPTIONS[name])
                                  for name, weight in WEIGHTS.items()))

    def _scorecard(self) -> Scorecard:
        return score(self._world)

    # ---- episode --------------------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        self._world = generate_world(rng, tier, self.perturb)

    def apply(self, action: HospitalAdmissionsWorkflowAction) -> Outcome:
        world, step = self._world, self._state.step_count
        outcome = self._act(world, action, step)
        if not world.open_tasks():
            card = score(world)
            outcome.terminal, outcome.solved = True, card.solved
            outcome.feedback += (" The queue is clear: solved." if card.solved else
                                 " The queue is clear, but not solved (late work, unanswered messages or a "
                                 "referee flag).")
        else:
            disrupt(world, step)  # time passes: chaos strikes between steps
        return outcome

    def _act(self, world: World, action: HospitalAdmissionsWorkflowAction, step: int) -> Outcome:
        if action.action is None:
            return Outcome(f"Say which action to take: one of {', '.join(ACTIONS)}.", error="missing_action")
        judgement = judge(action.reasoning, world, step - 1)  # the observation this action answers
        if judgement.stuffed:
            self.shape(-STUFFING_PENALTY, "stuffing")
        if not world.referee.authorise(world.scope, action.action):
            self.price_rejection(-world.referee.penalty, "referee:unauthorised")
            return Outcome(f"Blocked by the oversight referee: scope {world.scope} may not {action.action}.",
                           error="unauthorised")
        result = RULES[action.action](world, action, step)
        if result.price is not None:
            self.price_rejection(result.price, result.reason)
        if result.cost:
            self.shape(-result.cost, result.reason)
        if result.error is None:
            for kind, bonus in judgement.earned.items():
                self.shape(bonus, f"process:{kind}")
                world.prm_earned.add(kind)
        return Outcome(result.feedback, error=result.error)

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        world, step = self._world, self._state.step_count
        amount = world.drift.name(world.scenario.amount, step)
        return {
            "scenario": world.scenario.name,
            "scope": world.scope,
            "company_domain": COMPANY_DOMAIN,
            "tasks": [_task_view(t, amount, step) for t in world.tasks],
            "inbox": [_message_view(m) for m in world.messages],
            "team": [{"name": m.name, "skill": m.skill,
                      "status": ("available" if m.available else "out of office") if m.status_shown else "unknown"}
                     for m in world.members],
            "policies": [p.line() for p in world.policies],
        }

    def oracle_view(self) -> World:
        return self._world

    def secret_values(self) -> list[str]:
        """Policy details still withheld, and field names a rename has not yet revealed."""
        world, step = self._world, self._state.step_count
        hidden = [p.text for p in world.policies if not p.revealed]
        return hidden + [r.new for r in world.drift.renames if step < r.at_step]

    @classmethod
    def prompt_context(cls) -> dict[str, Any]:
        return {
            "actions": ACTIONS,
            "l1_actions": [a for a in ACTIONS if a in PERMISSIONS["L1"]],
            "scenarios": SCENARIO_NAMES,
            "routing": {s.name: {skill: [c for c, k in s.categories.items() if k == skill] for skill in s.skills}
                        for s in SCENARIOS},
            "company_domain": COMPANY_DOMAIN,
            "tiers": TIER_MEANINGS,
            "chaos": {e.name: e.probability for e in CHAOS_EVENTS},
            "drift_step": DRIFT_STEP,
        }


def _task_view(task: Task, amount: str, step: int) -> dict[str, Any]:
    view: dict[str, Any] = {"id": task.id, "title": task.title, "category": task.category,
                            "skill": task.skill if task.skill_shown else "n/a", "requester": task.requester,
                            amount: task.amount, "status": task.resolution or task.status}
    if task.owner:
        view["owner"] = task.owner
    if task.open:
        view["sla"] = task.deadline - step
    if task.status == "blocked":
        view["blocker"] = f"stuck with {task.stuck_with}, who is out of office"
    if task.approved:
        view["signed_off"] = True
    return view


def _message_view(message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {"id": message.id, "from": message.sender, "subject": message.subject}
    if message.task_id:
        view["task"] = message.task_id
    if message.replied:
        view["replied"] = True
    return view
