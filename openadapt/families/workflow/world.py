"""The state of one workflow episode: the queue, the team, the inbox and the policies, with the fields the agent
never sees (a task's required route, which messages are phishing, withheld statuses and skills).

Time is the episode's step count: a task's SLA is an absolute deadline step, shown as steps remaining. The names
(scenario, categories, roles, actions) are the domain's; this module only knows the roles things play.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from openadapt.families.workflow.domain import Scenario
from openadapt.kit import ChaosSchedule, OversightReferee, SchemaDrift

Route = Literal["close", "approve", "escalate", "defer"]  # what policy requires for a task (hidden)
MessageKind = Literal["query", "executive", "noise", "urgent", "phishing"]


@dataclass(slots=True)
class Task:
    id: str
    title: str
    category: str
    skill: str
    requester: str
    amount: int
    route: Route  # hidden
    deadline: int  # hidden as such: shown as `sla`, steps remaining
    skill_shown: bool = True
    status: Literal["pending", "in_progress", "blocked", "done"] = "pending"
    owner: str | None = None
    stuck_with: str | None = None  # the absent member a blocked task waits on
    approved: bool = False
    resolution: Literal["closed", "escalated", "deferred"] | None = None
    resolved_at: int | None = None

    @property
    def open(self) -> bool:
        return self.resolved_at is None


@dataclass(slots=True)
class Member:
    name: str
    skill: str
    available: bool = True
    status_shown: bool = True  # withheld at the noisy tiers


@dataclass(slots=True)
class Message:
    id: str
    sender: str
    subject: str
    task_id: str | None
    kind: MessageKind  # hidden
    replied: bool = False

    @property
    def legit(self) -> bool:
        """Needs an answer: a requester's query or an executive's ping (never noise, never phishing)."""
        return self.kind in ("query", "executive")


@dataclass(slots=True)
class Policy:
    id: str
    kind: Literal["approve", "escalate", "defer"]
    title: str
    text: str
    revealed: bool  # details in view (always below the hidden-constraint tiers; after a lookup above)

    def line(self, lookup: str) -> str:
        return f"{self.id} {self.title}: {self.text}" if self.revealed else \
            f"{self.id} {self.title}: details withheld ({lookup})"


@dataclass
class World:
    scenario: Scenario
    scope: str
    may_close: bool  # the scope may close work itself (else it hands it to the lead)
    may_escalate: bool  # the scope may escalate itself (else it hands it to the lead)
    threshold: int
    tasks: list[Task]
    members: list[Member]
    messages: list[Message]
    policies: list[Policy]
    drift: SchemaDrift
    chaos: ChaosSchedule | None
    referee: OversightReferee
    hidden_policies: bool
    effects_rng: random.Random | None = None  # what chaos effects pick their targets with (see rules.disrupt)
    message_serial: int = 0
    message_prefix: str = "M"
    events: list[tuple[int, str]] = field(default_factory=list)  # (step, what chaos did): for reports and tests
    prm_earned: set[str] = field(default_factory=set)  # process-reward kinds already paid this episode

    def task(self, task_id: str | None) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def member(self, name: str | None) -> Member | None:
        key = (name or "").strip().lower()
        return next((m for m in self.members if m.name == key), None)

    def message(self, message_id: str | None) -> Message | None:
        return next((m for m in self.messages if m.id == message_id), None)

    def policy(self, policy_id: str | None) -> Policy | None:
        key = (policy_id or "").strip().upper()
        return next((p for p in self.policies if p.id == key), None)

    def policy_of(self, kind: str) -> Policy:
        return next(p for p in self.policies if p.kind == kind)

    def open_tasks(self) -> list[Task]:
        return [t for t in self.tasks if t.open]

    def available(self, skill: str, exclude: str | None = None) -> list[Member]:
        """Available colleagues with `skill`, those the agent can see are available first."""
        found = [m for m in self.members if m.available and m.skill == skill and m.name != exclude]
        return sorted(found, key=lambda m: not m.status_shown)

    def next_message_id(self) -> str:
        self.message_serial += 1
        return f"{self.message_prefix}-{self.message_serial}"


def visible_available(members: list[Member], skill: str, exclude: Member | None = None) -> list[Member]:
    """Colleagues with `skill` whom the agent can see are available."""
    return [m for m in members if m.skill == skill and m.available and m.status_shown and m is not exclude]


def steps_needed(task: Task, world: World) -> int:
    """Steps an agent that makes no mistake still needs to resolve `task`."""
    if not task.open:
        return 0
    if task.route in ("escalate", "defer"):
        return 1  # escalate (or hand it to the lead with the approval action); defer
    start = 0 if task.status == "in_progress" else 1  # assign, or re-route a blocked task
    sign_off = 1 if world.may_close and task.route == "approve" and not task.approved else 0
    return start + sign_off + 1  # close (or the hand-off: the lead signs off and closes)


def needed_lookups(world: World) -> list[Policy]:
    """The policies a careful agent must still read on a hidden-constraint tier. The sign-off threshold matters
    only to an agent that closes work itself (one that hands every finished task to the lead does not need it)."""
    if not world.hidden_policies:
        return []
    return [p for p in world.policies if not p.revealed and (p.kind != "approve" or world.may_close)]


def queue_slack(world: World, step: int, extra_replies: int = 0) -> float:
    """The margin to the tightest deadline for a mistake-free agent acting from the observation of `step`:
    the policies it still needs read and the legitimate messages answered first, then the open tasks earliest
    deadline first. Negative: some task will be late whatever the agent does from here."""
    pending = len(needed_lookups(world)) + sum(m.legit and not m.replied for m in world.messages)
    elapsed = step + extra_replies + pending
    worst = float("inf")
    for task in sorted(world.open_tasks(), key=lambda t: (t.deadline, t.id)):
        elapsed += steps_needed(task, world)
        worst = min(worst, task.deadline - elapsed)
    return worst
