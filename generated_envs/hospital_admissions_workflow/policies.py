"""Reference policies: the privileged oracle and a shallow queue-working heuristic (the baseline to beat)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from openadapt.kit import Policy

try:
    from .models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation
    from .server.process_reward import in_view
    from .server.scenarios import BY_NAME, PHISHING_WORDS
    from .server.world import Task, World, needed_lookups, steps_needed
except ImportError:
    from models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation
    from server.process_reward import in_view
    from server.scenarios import BY_NAME, PHISHING_WORDS
    from server.world import Task, World, needed_lookups, steps_needed


class WorkflowOracle(Policy):
    """Reads the hidden episode and plays what a careful agent would: on hidden-constraint tiers it first looks
    up the policies it needs, then works the queue earliest-deadline-first (finishing work in progress first
    when that endangers no deadline), answers legitimate messages whenever no deadline is at risk (and always
    before the queue's last step), never answers noise or phishing, and names what it observes when a process
    bonus is there to earn. It has no foresight of chaos: it re-plans every step."""

    name = "oracle"
    privileged = True

    def act(self, observation: HospitalAdmissionsWorkflowObservation) -> HospitalAdmissionsWorkflowAction:
        world: World = self.env.oracle_view()
        step = observation.metadata.get("step", 0)
        for policy in needed_lookups(world):
            return HospitalAdmissionsWorkflowAction(action="lookup_policy", policy_id=policy.id,
                                  reasoning=f"Reading {policy.id} before touching the queue.")
        need = {t.id: steps_needed(t, world.scope) for t in world.open_tasks()}
        by_deadline = sorted(world.open_tasks(), key=lambda t: (t.deadline, t.id))
        unanswered = [m for m in world.messages if m.legit and not m.replied]
        if unanswered and (_slack(by_deadline, need, step) >= 1 or sum(need.values()) <= 1):
            message = unanswered[0]
            return HospitalAdmissionsWorkflowAction(action="reply_message", message_id=message.id,
                                  reasoning=f"Answering {message.id} from {message.sender}.")
        target = by_deadline[0]
        started = [t for t in by_deadline if t.status == "in_progress"]
        if started and started[0] is not target:
            first = [started[0], *(t for t in by_deadline if t is not started[0])]
            if _slack(first, need, step) >= min(0, _slack(by_deadline, need, step)):
                target = started[0]
        return _next_step(world, target, step)


def _slack(order: list[Task], need: dict[str, int], step: int) -> float:
    """The tightest margin to a deadline when the tasks are worked in `order` from `step` on."""
    elapsed, worst = step, float("inf")
    for task in order:
        elapsed += need[task.id]
        worst = min(worst, task.deadline - elapsed)
    return worst


def _next_step(world: World, task: Task, step: int) -> HospitalAdmissionsWorkflowAction:
    cite: dict[str, Any] = {"field": world.drift.name(world.scenario.amount, step), "value": float(task.amount)}
    why = _observed(world, task, step)
    act = lambda name, **kw: HospitalAdmissionsWorkflowAction(action=name, task_id=task.id, reasoning=why, **kw)  # noqa: E731
    if task.route == "escalate":
        return act("escalate") if world.scope == "L2" else act("request_approval", **cite)
    if task.route == "defer":
        return act("defer")
    if world.scope == "L2" and task.route == "approve" and not task.approved:
        return act("request_approval", **cite)  # before the work starts: less time exposed to a dropout
    if task.status in ("blocked", "pending"):
        member = world.available(task.skill, exclude=task.stuck_with)[0].name
        return act("re_route" if task.status == "blocked" else "assign_task", member=member)
    return act("close_task", **cite) if world.scope == "L2" else act("request_approval", **cite)


def _observed(world: World, task: Task, step: int) -> str:
    """A reasoning that names one thing in view, when naming it still earns a process bonus."""
    seen, earned = in_view(world, step), world.prm_earned
    if task.status == "blocked" and "blocked" not in earned:
        return f"{task.id} is blocked: it is stuck with {task.stuck_with}, so it goes to someone available."
    if seen["drift"] and "drift" not in earned:
        return f"The schema changed: the amount field is now {seen['drift'][0]}."
    if task.id in seen["sla"] and "sla" not in earned:
        return f"{task.id} has {task.deadline - step} steps of SLA left, so it goes first."
    return f"Next step for {task.id}."


# ---- the shallow baseline -------------------------------------------------------------------------------------
_VIEW_KEYS = {"id", "title", "category", "skill", "requester", "status", "owner", "sla", "blocker", "signed_off"}
_THRESHOLD = re.compile(r"above \$?([\d,]+)")
_ESCALATED = re.compile(r"Escalations: (.+?) cases must be escalated")
_DEFERRED = re.compile(r"Deferrals: (.+?) requests are deferred")
_LEARN = {"needs_approval": "approve", "must_escalate": "escalate", "must_defer": "defer",
          "not_escalation": "work", "task_blocked": "blocked", "not_blocked": "work"}


class QueueHeuristic(Policy):
    """What a shallow integration does: it binds the record's field names once at the start (so a silent rename
    costs it a refused call before it re-reads them), answers every message that names a task unless the subject
    smells of credential phishing, works the task with the least SLA left, trusts the textbook policy defaults
    when details are withheld, never looks a policy up, and learns only from refusals."""

    name = "heuristic"

    def begin(self, env: Any, observation: HospitalAdmissionsWorkflowObservation, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.amount = _amount_field(observation.tasks[0])
        self.threshold, self.escalated, self.deferred = _rules(observation)
        self.learned: dict[str, str] = {}
        self.tried: dict[str, set[str]] = defaultdict(set)
        self.last: HospitalAdmissionsWorkflowAction | None = None

    def act(self, observation: HospitalAdmissionsWorkflowObservation) -> HospitalAdmissionsWorkflowAction:
        self._learn(observation)
        action = self._choose(observation)
        self.last = action
        return action

    def _learn(self, obs: HospitalAdmissionsWorkflowObservation) -> None:
        last, error = self.last, obs.error
        if last is None or error is None:
            if last is not None and last.action == "defer" and "stays in your queue" in obs.feedback:
                self.learned[last.task_id] = "work"
            return
        if error in ("stale_field", "unknown_field"):
            self.amount = _amount_field(obs.tasks[0])
        elif error in _LEARN and last.task_id:
            self.learned[last.task_id] = _LEARN[error]
        elif error in ("wrong_skill", "member_unavailable") and last.member:
            self.tried[last.task_id].add(last.member)

    def _choose(self, obs: HospitalAdmissionsWorkflowObservation) -> HospitalAdmissionsWorkflowAction:
        for message in obs.inbox:
            subject = message["subject"].lower()
            if message.get("task") and not message.get("replied") and not any(w in subject for w in PHISHING_WORDS):
                return HospitalAdmissionsWorkflowAction(action="reply_message", message_id=message["id"])
        task = min((t for t in obs.tasks if "sla" in t), key=lambda t: t["sla"])
        tid, l2 = task["id"], obs.scope == "L2"
        cite = {"field": self.amount, "value": float(next(v for k, v in task.items() if k not in _VIEW_KEYS))}
        route = self._route(task)
        if route == "escalate":
            return HospitalAdmissionsWorkflowAction(action="escalate" if l2 else "request_approval", task_id=tid,
                                  **({} if l2 else cite))
        if route == "defer":
            return HospitalAdmissionsWorkflowAction(action="defer", task_id=tid)
        if task["status"] in ("pending", "blocked"):
            blocked = self.learned.get(tid) == "blocked"
            member = self._member(obs, task)
            return HospitalAdmissionsWorkflowAction(action="re_route" if blocked else "assign_task", task_id=tid, member=member)
        if l2 and route == "approve" and not task.get("signed_off"):
            return HospitalAdmissionsWorkflowAction(action="request_approval", task_id=tid, **cite)
        return HospitalAdmissionsWorkflowAction(action="close_task" if l2 else "request_approval", task_id=tid, **cite)

    def _route(self, task: dict[str, Any]) -> str:
        learned = self.learned.get(task["id"])
        if learned in ("approve", "escalate", "defer"):
            return learned
        if learned not in ("work", "blocked"):
            if task["category"] in self.escalated:
                return "escalate"
            if task["category"] in self.deferred:
                return "defer"
        amount = next(v for k, v in task.items() if k not in _VIEW_KEYS)
        return "approve" if amount > self.threshold else "close"

    def _member(self, obs: HospitalAdmissionsWorkflowObservation, task: dict[str, Any]) -> str:
        """The first colleague listed with the task's skill (any skill when it is withheld) not known to be away."""
        tried = self.tried[task["id"]]
        fits = [m for m in obs.team if m["status"] != "out of office" and m["name"] not in tried
                and task["skill"] in (m["skill"], "n/a")]
        return (fits or obs.team)[0]["name"]


def _amount_field(task: dict[str, Any]) -> str:
    return next(k for k in task if k not in _VIEW_KEYS)


def _rules(obs: HospitalAdmissionsWorkflowObservation) -> tuple[float, set[str], set[str]]:
    """The policies' numbers as printed, or the scenario's textbook defaults where details are withheld."""
    scenario = BY_NAME[obs.scenario]
    def find(pattern: re.Pattern[str]) -> re.Match[str] | None:
        return next((m for line in obs.policies if (m := pattern.search(line))), None)

    threshold, escalated, deferred = find(_THRESHOLD), find(_ESCALATED), find(_DEFERRED)
    return (float(threshold.group(1).replace(",", "")) if threshold else float(scenario.thresholds[1]),
            set(escalated.group(1).split(" and ")) if escalated else {scenario.escalate_pool[0]},
            set(deferred.group(1).split(" and ")) if deferred else {scenario.defer_pool[0]})
