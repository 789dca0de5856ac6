"""The workflow engine: work an enterprise desk's queue (tasks with SLAs, an inbox, a team, policies) inside an
authority scope, while the record schema drifts and chaos strikes.

One step: the oversight referee checks the agent's scope (a junior may not take the senior-only actions: -0.5),
the action's rule runs (`rules.DeskRules`), the reasoning is scored (the process reward), then time passes: the
chaos events fire at the domain's rates. The episode ends when the last task is resolved (or the budget is spent)
and is scored on resolution, SLAs, inbox, oversight and the binary outcome.

What each knob of the tier profile turns (cumulative):
- `noise > 0` (ECI 2+): the schema drift at step 3, the three chaos events, a third colleague per skill; `drop`
  withholds task skills and colleague statuses; message subjects are truncated;
- `distractors` (ECI 3+): urgent-looking noise and phishing from look-alike domains in the inbox, one more task;
- `depth`: tasks blocked on an absent colleague (re-route them), one more task at depth 2 with less SLA slack;
- `hidden_constraints` (ECI 4+): policy details withheld until looked up, and one more escalated category.
Nothing here knows what the desk is: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.workflow.domain import Scenario, WorkflowDomain, lookalike
from openadapt.families.workflow.rules import STUFFING_PENALTY, DeskRules
from openadapt.families.workflow.world import (
    Member,
    Message,
    Policy,
    Route,
    Task,
    World,
    steps_needed,
    visible_available,
)
from openadapt.kit import (
    ChaosEvent,
    ChaosSchedule,
    FieldRename,
    Outcome,
    OversightReferee,
    Perturber,
    SchemaDrift,
    ShapedEnvironment,
    TierProfile,
)

# The seed's numbers.
DRIFT_STEP = 3
DRIFT_PENALTY = 0.1
REFEREE_PENALTY = 0.5
DEFER_SPIRAL = 2  # deferring work policy does not let you defer, this many times, is a defer spiral
ROUTE_WEIGHTS: dict[Route, float] = {"close": 0.35, "approve": 0.3, "escalate": 0.175, "defer": 0.175}
MAX_APPROVALS = 2
QUERY_RATE, MAX_QUERIES = 0.4, 2
SLACK_BASE = 3  # steps of room per deadline at ECI 1 (see _deadlines)

WEIGHTS = {"resolution": 0.40, "sla": 0.25, "inbox": 0.10, "oversight": 0.10, "outcome": 0.15}
DESCRIPTIONS = {
    "resolution": "share of the queue resolved the way policy requires",
    "sla": "share of the queue resolved by its SLA deadline",
    "inbox": "share of legitimate messages (requester queries, executive pings) answered",
    "oversight": "the oversight referee raised no flag (unauthorised action, defer spiral, reply to phishing)",
    "outcome": "the episode is solved",
}
UNKNOWN = "unknown"  # a withheld colleague status
NOT_SHOWN = "n/a"  # a withheld task skill


@dataclass(frozen=True, slots=True)
class Scorecard:
    resolution: float
    sla: float
    inbox: float
    oversight: float
    outcome: float
    solved: bool


def score(world: World) -> Scorecard:
    """Solved: every task resolved as policy requires by its SLA, every legitimate message answered, and no
    referee flag. Wrong routes are refused outright, so a resolved task is a correctly resolved one."""
    tasks = world.tasks
    done = [t for t in tasks if not t.open]
    on_time = [t for t in done if t.resolved_at <= t.deadline]
    legit = [m for m in world.messages if m.legit]
    answered = sum(m.replied for m in legit)
    clean = world.referee.clean
    solved = len(on_time) == len(tasks) and answered == len(legit) and clean
    return Scorecard(
        resolution=WEIGHTS["resolution"] * len(done) / len(tasks),
        sla=WEIGHTS["sla"] * len(on_time) / len(tasks),
        inbox=WEIGHTS["inbox"] * (answered / len(legit) if legit else 1.0),
        oversight=WEIGHTS["oversight"] * clean,
        outcome=WEIGHTS["outcome"] * solved,
        solved=solved,
    )


def chaos_on(tier: TierProfile) -> bool:
    return tier.noise > 0


def threshold_text(scenario: Scenario, amount: int) -> str:
    return fill(scenario.threshold_text, amount=f"{amount:,}")


class WorkflowEnvironment(FamilyEnvironment, ShapedEnvironment):
    domain: ClassVar[WorkflowDomain]
    REWARD = tuple((name, 0.0, weight, DESCRIPTIONS[name]) for name, weight in WEIGHTS.items())

    # ---- the domain, prepared once per class ----------------------------------------------------------
    @per_domain
    def rules(cls) -> DeskRules:
        return DeskRules(cls.domain)

    # ---- reward ---------------------------------------------------------------------------------------
    def verdict(self) -> Any:
        return score(self._world)

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        self._world = self._generate(rng, tier, self.perturb)

    def _generate(self, rng: random.Random, tier: TierProfile, perturb: Perturber) -> World:
        d = self.domain
        chaos_rng = random.Random(rng.getrandbits(64))  # own streams: chaos never shifts the episode's other draws
        effects_rng = random.Random(rng.getrandbits(64))
        scenario = rng.choice(d.scenarios)
        scope = rng.choice((d.roles.junior, d.roles.senior))
        threshold = rng.choice(scenario.thresholds)
        escalated = rng.sample(scenario.escalate_categories, 1 + tier.hidden_constraints)
        deferred = rng.sample(scenario.defer_categories, 1)
        members = self._team(scenario, rng, per_skill=2 + chaos_on(tier))
        tasks = self._tasks(scenario, threshold, escalated, deferred, rng,
                            count=3 + (tier.distractors > 0) + (tier.depth > 1))
        _block(tasks, members, rng, tier.depth)
        _absent(members, rng)
        for task in tasks:
            task.skill_shown = not perturb.chance(tier.drop)
        for member in members:
            member.status_shown = not perturb.chance(tier.drop)
        for skill in scenario.skills:  # an agent never has to gamble on an "unknown" status to find a colleague
            if not visible_available(members, skill.name):
                next(m for m in members if m.skill == skill.name and m.available).status_shown = True
        chaos = d.chaos
        events = (ChaosEvent("actor_dropout", chaos.dropout), ChaosEvent("priority_spike", chaos.spike),
                  ChaosEvent("inbox_noise", chaos.noise))
        world = World(
            scenario=scenario, scope=scope, may_close=d.may(scope, "close"), may_escalate=d.may(scope, "escalate"),
            threshold=threshold, tasks=tasks, members=members, messages=[],
            policies=self._policies(scenario, threshold, escalated, deferred, revealed=not tier.hidden_constraints),
            drift=SchemaDrift([FieldRename(scenario.amount_field, scenario.renamed_field, DRIFT_STEP)]
                              if chaos_on(tier) else [], penalty=DRIFT_PENALTY),
            chaos=ChaosSchedule(events, chaos_rng) if chaos_on(tier) else None,
            referee=OversightReferee(d.permissions(), penalty=REFEREE_PENALTY, spiral_limit=DEFER_SPIRAL),
            hidden_policies=tier.hidden_constraints,
            effects_rng=effects_rng,
            message_serial=rng.randint(100, 800),
            message_prefix=d.message_prefix,
        )
        self._inbox(world, rng, tier, perturb)
        _deadlines(world, rng, tier)
        rng.shuffle(world.tasks)
        return world

    def _team(self, scenario: Scenario, rng: random.Random, per_skill: int) -> list[Member]:
        names = rng.sample(self.domain.staff_names, per_skill * len(scenario.skills))
        return [Member(name, skill.name) for i, skill in enumerate(scenario.skills)
                for name in names[i * per_skill:(i + 1) * per_skill]]

    def _tasks(self, scenario: Scenario, threshold: int, escalated: list[str], deferred: list[str],
               rng: random.Random, count: int) -> list[Task]:
        d = self.domain
        skill_of = {c: skill.name for skill in scenario.skills for c in skill.categories}
        normal = [c for c in skill_of if c not in escalated and c not in deferred]
        routes: list[Route] = []
        for _ in range(count):
            options = [r for r in ROUTE_WEIGHTS if r != "approve" or routes.count("approve") < MAX_APPROVALS]
            routes.append(rng.choices(options, [ROUTE_WEIGHTS[r] for r in options])[0])
        ids = rng.sample(range(100, 1000), count)
        tasks = []
        for number, route in zip(ids, routes, strict=True):
            category = rng.choice(escalated if route == "escalate" else deferred if route == "defer" else normal)
            domain = rng.choice(scenario.requesters)
            internal = domain == d.company_domain
            local = rng.choice(d.staff_names if internal else d.contacts)
            requester = f"{local}@{domain}"
            # Amounts sit clearly on one side of the threshold; only `approve` tasks are above it.
            share = rng.uniform(1.08, 2.6) if route == "approve" else rng.uniform(0.15, 0.92)
            amount = max(1, round(threshold * share))
            if route == "approve":
                amount = max(amount, threshold + 1)
            who = (local if internal else domain.split(".")[0]).capitalize()
            title = fill(d.title_template, category=category.replace("_", " "), who=who)
            tasks.append(Task(id=f"{d.task_prefix}-{number}", title=title, category=category,
                              skill=skill_of[category], requester=requester, amount=amount, route=route, deadline=0))
        return tasks

    def _policies(self, scenario: Scenario, threshold: int, escalated: list[str], deferred: list[str],
                  revealed: bool) -> list[Policy]:
        pid, texts = scenario.policy_prefix, self.domain.policies
        return [
            Policy(f"{pid}-1", "approve", scenario.approval_title,
                   fill(texts.approval, threshold=threshold_text(scenario, threshold)), revealed),
            Policy(f"{pid}-2", "escalate", texts.escalation_title,
                   fill(texts.escalation, categories=" and ".join(escalated)), revealed),
            Policy(f"{pid}-3", "defer", texts.deferral_title,
                   fill(texts.deferral, categories=" and ".join(deferred)), revealed),
        ]

    def _inbox(self, world: World, rng: random.Random, tier: TierProfile, perturb: Perturber) -> None:
        """Requesters' queries and one piece of noise; from ECI 3 urgent-looking noise and phishing that names a
        real task from a look-alike domain, injected at random positions. Noisy tiers truncate some subjects."""
        d = self.domain
        messages: list[Message] = []
        for task in world.tasks:
            if len(messages) < MAX_QUERIES and rng.random() < QUERY_RATE:
                subject = fill(rng.choice(d.query_subjects), title=task.title, tid=task.id)
                messages.append(Message(world.next_message_id(), task.requester, subject, task.id, "query"))
        noise = rng.choice(d.noise)
        messages.append(Message(world.next_message_id(), f"{noise.sender}@{d.company_domain}", noise.subject, None,
                                "noise"))
        distractors = []
        if tier.distractors:
            phishing = 1 + (tier.distractors >= 5)
            for _ in range(phishing):
                task = rng.choice(world.tasks)
                template = rng.choice(d.phishing_subtle if rng.random() < 0.5 else d.phishing_obvious)
                local, _, domain = task.requester.partition("@")
                subject = fill(template, title=task.title, tid=task.id,
                               field=world.scenario.amount_field.replace("_", " "))
                distractors.append(Message(world.next_message_id(),
                                           f"{local}@{rng.choice(self._phishing_domains(domain))}", subject,
                                           task.id, "phishing"))
            for item in rng.sample(d.urgent_noise, tier.distractors - phishing):
                distractors.append(Message(world.next_message_id(), f"{item.sender}@{d.company_domain}", item.subject,
                                           None, "urgent"))
        world.messages = perturb.inject(messages, distractors, len(distractors))
        for message in world.messages:
            message.subject = perturb.truncate(message.subject, keep_words=3)

    def _phishing_domains(self, requester_domain: str) -> list[str]:
        """Look-alike sender domains for a task raised from `requester_domain`."""
        d = self.domain
        if requester_domain == d.company_domain:
            return d.company_lookalikes
        return [lookalike(p, requester_domain) for p in d.lookalike_patterns]

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        world, step = self._world, self._state.step_count
        outcome = self._act(world, action, step)
        rules = self.rules()
        if not world.open_tasks():
            card = score(world)
            outcome.terminal, outcome.solved = True, card.solved
            outcome.feedback += (" The queue is clear: solved." if card.solved else
                                 " The queue is clear, but not solved (late work, unanswered messages or a "
                                 "referee flag).")
        else:
            rules.disrupt(world, step)  # time passes: chaos strikes between steps
        return outcome

    def _act(self, world: World, action: Any, step: int) -> Outcome:
        rules = self.rules()
        if action.action is None:
            return Outcome(f"Say which action to take: one of {', '.join(rules.by_name)}.", error="missing_action")
        judgement = rules.judge(action.reasoning, world, step - 1)  # the observation this action answers
        if judgement.stuffed:
            self.shape(-STUFFING_PENALTY, "stuffing")
        if not world.referee.authorise(world.scope, action.action):
            self.price_rejection(-world.referee.penalty, "referee:unauthorised")
            return Outcome(f"Blocked by the oversight referee: scope {world.scope} may not {action.action}.",
                           error="unauthorised")
        result = rules.by_name[action.action](world, action, step)
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
        world, step, d = self._world, self._state.step_count, self.domain
        amount = world.drift.name(world.scenario.amount_field, step)
        lookup = d.actions.lookup
        return {
            "scenario": world.scenario.name,
            "scope": world.scope,
            "company_domain": d.company_domain,
            "tasks": [self._task_view(t, amount, step) for t in world.tasks],
            "inbox": [_message_view(m) for m in world.messages],
            "team": [{"name": m.name, "skill": m.skill,
                      "status": ("available" if m.available else d.away_status) if m.status_shown else UNKNOWN}
                     for m in world.members],
            "policies": [p.line(lookup) for p in world.policies],
        }

    def _task_view(self, task: Task, amount: str, step: int) -> dict[str, Any]:
        view: dict[str, Any] = {"id": task.id, "title": task.title, "category": task.category,
                                "skill": task.skill if task.skill_shown else NOT_SHOWN, "requester": task.requester,
                                amount: task.amount, "status": task.resolution or task.status}
        if task.owner:
            view["owner"] = task.owner
        if task.open:
            view["sla"] = task.deadline - step
        if task.status == "blocked":
            view["blocker"] = f"stuck with {task.stuck_with}, who is {self.domain.away_status}"
        if task.approved:
            view["signed_off"] = True
        return view

    def oracle_view(self) -> World:
        return self._world

    def secret_values(self) -> list[str]:
        """Policy details still withheld, and field names a rename has not yet revealed."""
        world, step = self._world, self._state.step_count
        hidden = [p.text for p in world.policies if not p.revealed]
        return hidden + [r.new for r in world.drift.renames if step < r.at_step]


def _message_view(message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {"id": message.id, "from": message.sender, "subject": message.subject}
    if message.task_id:
        view["task"] = message.task_id
    if message.replied:
        view["replied"] = True
    return view


def _block(tasks: list[Task], members: list[Member], rng: random.Random, count: int) -> None:
    """Block `count` hands-on tasks on a colleague who is out of office (another member of the skill stays)."""
    candidates = [t for t in tasks if t.route in ("close", "approve")]
    for task in rng.sample(candidates, min(count, len(candidates))):
        peers = [m for m in members if m.skill == task.skill]
        absent = next((m for m in peers if not m.available), None) or rng.choice(peers)
        absent.available = False
        task.status, task.stuck_with = "blocked", absent.name


def _absent(members: list[Member], rng: random.Random) -> None:
    """One more colleague is out of office from the start, never the last available one of their skill."""
    spare = [m for m in members if m.available
             and any(o.available and o.skill == m.skill and o is not m for o in members)]
    if spare:
        rng.choice(spare).available = False


def _deadlines(world: World, rng: random.Random, tier: TierProfile) -> None:
    """SLAs a mistake-free agent meets with room to spare: an intended order of the work (replies first), each
    deadline a few steps after that order finishes the task. Policy lookups are not budgeted: on the
    hidden-constraint tiers a careful agent pays for them out of that room, a careless one in refused actions."""
    replies = sum(m.legit for m in world.messages)
    slack = SLACK_BASE + chaos_on(tier) - (tier.depth > 1)
    elapsed = replies
    for task in rng.sample(world.tasks, len(world.tasks)):
        elapsed += steps_needed(task, world)
        task.deadline = elapsed + slack + rng.randint(0, 1)
