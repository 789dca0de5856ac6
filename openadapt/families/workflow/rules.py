"""The rules of one workflow episode: the eight desk actions, what chaos does between steps, and the process
reward for reasoning. Authority is checked before an action's rule runs (by the referee, in the engine).

Each action rule reads and changes the `World` and returns a `Result`. A rejected action changes nothing; its
feedback says why, and when policy is the reason it names the policy (that is how hidden constraints reveal
themselves). Every name and text comes from the domain.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openadapt.families.domain import fill
from openadapt.families.workflow.domain import WorkflowDomain
from openadapt.families.workflow.world import Member, Message, Task, World, queue_slack, visible_available
from openadapt.kit import FieldUse, is_stuffed, mentions

LOOKUP_COST = 0.02  # the seed's price of reading a policy
SPIKE_CUT = 2  # a priority spike cuts an SLA by this many steps
# Process reward (the seed's numbers): a bonus per kind of condition named while it is in view.
BONUSES: dict[str, float] = {"blocked": 0.05, "drift": 0.05, "sla": 0.03}
STUFFING_PENALTY = 0.05
SLA_PRESSURE = 2  # an open task with at most this many steps left is under SLA pressure
MAX_WORDS = 60
STUFFED_IDS = 4


@dataclass(slots=True)
class Result:
    feedback: str
    error: str | None = None
    price: float | None = None  # a rejected step's whole reward, where it is not the generic rejection reward
    cost: float = 0.0  # what an accepted action costs on top of the step
    reason: str = ""  # ledger label for price / cost


@dataclass(frozen=True, slots=True)
class Judgement:
    earned: dict[str, float] = field(default_factory=dict)
    stuffed: bool = False


def term_pattern(words: list[str]) -> re.Pattern[str]:
    """'block*' matches any word starting 'block'; 'sla' matches 'sla' or 'slas' as a whole word."""
    parts = [rf"\b{re.escape(w[:-1])}" if w.endswith("*") else rf"\b{re.escape(w)}s?\b" for w in words]
    return re.compile("|".join(parts), re.IGNORECASE)


class DeskRules:
    """The rules of one domain's desk, shared by every episode of an environment class."""

    def __init__(self, domain: WorkflowDomain):
        self.d = domain
        self.names = domain.actions
        self.by_name: dict[str, Callable[[World, Any, int], Result]] = {
            self.names.assign: self.assign, self.names.escalate: self.escalate, self.names.defer: self.defer,
            self.names.close: self.close, self.names.reply: self.reply, self.names.re_route: self.re_route,
            self.names.lookup: self.lookup, self.names.approval: self.approval,
        }
        self.terms = {kind: term_pattern(words) for kind, words in domain.reasoning_terms.model_dump().items()}

    # ---- helpers -------------------------------------------------------------------------------------
    def _open_task(self, world: World, action: Any) -> tuple[Task | None, Result | None]:
        noun = self.d.task_noun
        if not action.task_id:
            return None, Result(f"Name the {noun} (task_id).", "missing_task_id")
        task = world.task(action.task_id.strip().upper())
        if task is None:
            return None, Result(f"There is no {noun} {action.task_id!r} in your queue.", "unknown_task")
        if not task.open:
            return None, Result(f"{task.id} is already {task.resolution}.", "already_resolved")
        return task, None

    def _colleague(self, world: World, action: Any, task: Task) -> tuple[Member | None, Result | None]:
        if not action.member:
            return None, Result(f"Name the {self.d.colleague_noun} (member).", "missing_member")
        member = world.member(action.member)
        if member is None:
            return None, Result(f"{action.member!r} is not on the team.", "unknown_member")
        if member.skill != task.skill:
            return None, Result(f"{member.name} lacks the {task.skill} skill {task.id} needs.", "wrong_skill")
        if not member.available:
            return None, Result(f"{member.name} is {self.d.away_status}.", "member_unavailable")
        return member, None

    def _cited(self, world: World, action: Any, task: Task, step: int) -> Result | None:
        """Closes and sign-offs cite the task's amount by the field name the agent was last shown."""
        if not action.field:
            return Result(f"Cite {task.id}'s amount field (field and value).", "missing_field")
        use, _, penalty = world.drift.judge(action.field.strip(), (world.scenario.amount_field,), step - 1, step)
        if use is FieldUse.STALE:
            return Result(f"{task.id} has no field {action.field!r}.", "stale_field", price=-penalty,
                          reason="schema_drift")
        if use is FieldUse.UNKNOWN:
            return Result(f"{task.id} has no field {action.field!r}.", "unknown_field")
        if action.value is None or abs(action.value - task.amount) > 0.5:
            return Result(f"{action.field} of {task.id} is not {action.value}.", "value_mismatch")
        return None

    def _policy_says(self, world: World, task: Task) -> Result | None:
        """Refuse hands-on work on a task that policy escalates or defers."""
        if task.route == "escalate":
            how = "" if world.may_escalate else \
                f" (as {world.scope}: hand it to {self.d.roles.lead} with {self.names.approval})"
            return Result(f"Policy {world.policy_of('escalate').id}: {task.category} cases must be escalated{how}.",
                          "must_escalate")
        if task.route == "defer":
            return Result(f"Policy {world.policy_of('defer').id}: {task.category} requests are deferred.",
                          "must_defer")
        return None

    def _not_ready(self, task: Task) -> Result | None:
        if task.status == "blocked":
            return Result(f"{task.id} is blocked: it is stuck with {task.stuck_with}, who is {self.d.away_status}; "
                          f"{self.names.re_route} it.", "task_blocked")
        if task.status == "pending":
            return Result(f"Nobody is working on {task.id} yet: assign it first.", "not_started")
        return None

    @staticmethod
    def _resolve(task: Task, how: str, step: int) -> None:
        task.status, task.resolution, task.resolved_at = "done", how, step

    @property
    def _lead(self) -> str:
        lead = self.d.roles.lead
        return lead[:1].upper() + lead[1:]

    # ---- the eight actions ---------------------------------------------------------------------------
    def assign(self, world: World, action: Any, step: int) -> Result:
        task, refused = self._open_task(world, action)
        refused = refused or self._policy_says(world, task)
        if refused:
            return refused
        if task.status == "blocked":
            return self._not_ready(task)
        if task.status == "in_progress":
            return Result(f"{task.id} is already in progress with {task.owner}.", "already_assigned")
        member, refused = self._colleague(world, action, task)
        if refused:
            return refused
        task.status, task.owner = "in_progress", member.name
        return Result(f"{task.id} assigned to {member.name}; the work is done and ready to close.")

    def re_route(self, world: World, action: Any, step: int) -> Result:
        task, refused = self._open_task(world, action)
        if refused:
            return refused
        if task.status != "blocked":
            return Result(f"{task.id} is not blocked: use {self.names.assign}.", "not_blocked")
        member, refused = self._colleague(world, action, task)
        if refused:
            return refused
        task.status, task.owner, task.stuck_with = "in_progress", member.name, None
        return Result(f"{task.id} re-routed to {member.name}; the work is done and ready to close.")

    def escalate(self, world: World, action: Any, step: int) -> Result:
        task, refused = self._open_task(world, action)
        if refused:
            return refused
        if task.route != "escalate":
            return Result(f"Policy {world.policy_of('escalate').id} does not escalate {task.category}: work it in "
                          "the queue.", "not_escalation")
        self._resolve(task, "escalated", step)
        return Result(f"{task.id} escalated.")

    def defer(self, world: World, action: Any, step: int) -> Result:
        task, refused = self._open_task(world, action)
        if refused:
            return refused
        if task.route == "defer":
            self._resolve(task, "deferred", step)
            return Result(f"{task.id} deferred to the next cycle.")
        policy = world.policy_of("defer").id
        if world.referee.stall(task.id):
            return Result(f"{task.id} stays in your queue. The oversight referee flags a defer spiral.",
                          cost=world.referee.penalty, reason="referee:defer_spiral")
        return Result(f"{task.id} stays in your queue and its SLA keeps running: policy {policy} does not defer "
                      f"{task.category}.")

    def close(self, world: World, action: Any, step: int) -> Result:
        task, refused = self._open_task(world, action)
        refused = refused or self._cited(world, action, task, step) or self._policy_says(world, task) or \
            self._not_ready(task)
        if refused:
            return refused
        if task.route == "approve" and not task.approved:
            policy = world.policy_of("approve")
            return Result(f"Policy {policy.id}: {task.id} needs {self.d.roles.senior} sign-off before it is closed "
                          f"({policy.text})", "needs_approval")
        self._resolve(task, "closed", step)
        return Result(f"{task.id} closed.")

    def approval(self, world: World, action: Any, step: int) -> Result:
        """A scope that closes its own work: sign-off on an amount above the policy's threshold. A scope that
        does not: the hand-off to the lead, who takes the step the task needs that the scope may not (escalate
        it, or sign it off and close it once the work is done)."""
        task, refused = self._open_task(world, action)
        refused = refused or self._cited(world, action, task, step)
        if refused:
            return refused
        if task.route == "escalate" and not world.may_escalate:
            self._resolve(task, "escalated", step)
            return Result(f"{self._lead} escalated {task.id}.")
        if world.may_close:
            if task.route != "approve" or task.approved:
                return Result(f"{task.id} needs no (further) sign-off under policy {world.policy_of('approve').id}.")
            task.approved = True
            return Result(f"{self._lead} signed off {task.id}.")
        refused = self._policy_says(world, task) or self._not_ready(task)
        if refused:
            return refused
        task.approved = task.route == "approve"
        self._resolve(task, "closed", step)
        return Result(f"{self._lead} signed off and closed {task.id}.")

    def reply(self, world: World, action: Any, step: int) -> Result:
        if not action.message_id:
            return Result("Name the message (message_id).", "missing_message_id")
        message = world.message(action.message_id.strip().upper())
        if message is None:
            return Result(f"There is no message {action.message_id!r} in your inbox.", "unknown_message")
        if message.replied:
            return Result(f"You already answered {message.id}.", "already_replied")
        message.replied = True
        if message.kind == "phishing":
            world.referee.flag(f"phishing_reply:{message.id}")
            return Result(f"Sent to {message.sender}. The oversight referee flags it: that address is neither the "
                          "company's nor the requester's.", cost=world.referee.penalty,
                          reason="referee:phishing_reply")
        return Result(f"Replied to {message.id}.")

    def lookup(self, world: World, action: Any, step: int) -> Result:
        if not action.policy_id:
            return Result("Name the policy (policy_id).", "missing_policy_id")
        policy = world.policy(action.policy_id)
        if policy is None:
            return Result(f"There is no policy {action.policy_id!r}.", "unknown_policy")
        policy.revealed = True
        return Result(policy.line(self.names.lookup), cost=LOOKUP_COST, reason=self.names.lookup)

    # ---- chaos ---------------------------------------------------------------------------------------
    def disrupt(self, world: World, step: int) -> list[str]:
        """Draw this step's events and apply them; returns what happened, in words (kept for reports, not shown).

        Strict but fair: an event fires at its rate whatever the state, but it never makes the queue impossible
        for a mistake-free agent (`queue_slack`). A dropout never takes the last colleague of a skill whom the
        agent can see is available, nor reverts work when that would make a deadline unreachable (it takes an
        idle colleague instead, or nobody); a spike cuts by less than SPIKE_CUT steps when the full cut would,
        and is skipped when even its message could not be answered in time. Once an agent's own mistakes have
        made a deadline unreachable, events strike at full strength. Targets come from the episode's effects
        rng, apart from the schedule's, so that when an event fires never depends on what the agent did."""
        if world.chaos is None:
            return []
        rng = world.effects_rng
        happened = []
        for event in world.chaos.draw():
            what = {"actor_dropout": self._dropout, "priority_spike": self._spike,
                    "inbox_noise": self._noise}[event](world, step, rng)
            happened.append(f"{event}: {what}")
            world.events.append((step, happened[-1]))
        return happened

    def _dropout(self, world: World, step: int, rng: random.Random) -> str:
        eligible = [m for m in world.members if m.available and visible_available(world.members, m.skill, exclude=m)]
        work = {m.name: [t for t in world.tasks if t.open and t.owner == m.name and t.status == "in_progress"]
                for m in eligible}
        doomed = queue_slack(world, step) < 0
        busy = [m for m in eligible if work[m.name] and (doomed or _slack_after_revert(world, step, work[m.name]) >= 0)]
        pool = busy or [m for m in eligible if not work[m.name]]
        if not pool:
            return "nobody could be spared"
        member = rng.choice(pool)
        member.available = False
        for task in work[member.name]:
            task.status, task.owner = "pending", None
        return f"{member.name} is {self.d.away_status}; reverted {[t.id for t in work[member.name]] or 'nothing'}"

    def _spike(self, world: World, step: int, rng: random.Random) -> str:
        open_tasks = world.open_tasks()
        if not open_tasks:
            return "no open task"
        task = rng.choice(open_tasks)
        doomed = queue_slack(world, step) < 0
        cut = next((c for c in range(SPIKE_CUT, -1, -1)
                    if doomed or _slack_after_cut(world, step, task, c) >= 0), None)
        if cut is None:
            return f"{task.id} could absorb no escalation (skipped)"
        task.deadline -= cut
        sender = f"{world.scenario.executive}@{self.d.company_domain}"
        world.messages.append(Message(world.next_message_id(), sender, fill(self.d.executive_subject, tid=task.id),
                                      task.id, "executive"))
        return f"{task.id} deadline now step {task.deadline}"

    def _noise(self, world: World, step: int, rng: random.Random) -> str:
        item = rng.choice(self.d.noise)
        world.messages.append(Message(world.next_message_id(), f"{item.sender}@{self.d.company_domain}", item.subject,
                                      None, "noise"))
        return item.subject

    # ---- process reward ------------------------------------------------------------------------------
    def in_view(self, world: World, step: int) -> dict[str, list[str]]:
        """For each kind, what the observation of `step` shows that a reasoning must name to claim it."""
        return {
            "blocked": [t.id for t in world.tasks if t.open and t.status == "blocked"],
            "drift": [r.new for r in world.drift.fired(step)],
            "sla": [t.id for t in world.tasks if t.open and t.deadline - step <= SLA_PRESSURE],
        }

    def judge(self, reasoning: str, world: World, step: int) -> Judgement:
        """Score the reasoning of an action that answers the observation of `step`. Each kind pays once per
        episode; a reasoning that names a condition it cannot point at in the observation (the word without a
        matching id or field) earns nothing; naming all three kinds at once, or four or more task ids, is
        stuffing; more than MAX_WORDS words earns nothing."""
        if not reasoning.strip():
            return Judgement()
        named = [kind for kind, term in self.terms.items() if term.search(reasoning)]
        if len(named) == len(self.terms) or is_stuffed(reasoning, [t.id for t in world.tasks], limit=STUFFED_IDS):
            return Judgement(stuffed=True)
        if not named or len(reasoning.split()) > MAX_WORDS:
            return Judgement()
        seen = self.in_view(world, step)
        if any(not mentions(reasoning, seen[kind]) for kind in named):
            return Judgement()
        return Judgement({kind: BONUSES[kind] for kind in named if kind not in world.prm_earned})


def _slack_after_revert(world: World, step: int, tasks: list[Task]) -> float:
    for task in tasks:
        task.status = "pending"
    try:
        return queue_slack(world, step)
    finally:
        for task in tasks:
            task.status = "in_progress"


def _slack_after_cut(world: World, step: int, task: Task, cut: int) -> float:
    task.deadline -= cut
    try:
        return queue_slack(world, step, extra_replies=1)  # the executive's message needs an answer too
    finally:
        task.deadline += cut
