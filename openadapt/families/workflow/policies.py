"""Reference policies of the workflow family: the privileged oracle and a shallow queue-working heuristic (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from openadapt.families.domain import template_pattern
from openadapt.families.workflow.engine import NOT_SHOWN
from openadapt.families.workflow.world import Task, World, needed_lookups, steps_needed
from openadapt.kit import Policy


class WorkflowOracle(Policy):
    """Reads the hidden episode and plays what a careful agent would: on hidden-constraint tiers it first looks
    up the policies it needs, then works the queue earliest-deadline-first (finishing work in progress first
    when that endangers no deadline), answers legitimate messages whenever no deadline is at risk (and always
    before the queue's last step), never answers noise or phishing, and names what it observes when a process
    bonus is there to earn. It has no foresight of chaos: it re-plans every step."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env = self.env
        world: World = env.oracle_view()
        names = env.domain.actions
        make = env.action_type
        step = observation.metadata.get("step", 0)
        for policy in needed_lookups(world):
            return make(action=names.lookup, policy_id=policy.id,
                        reasoning=f"Reading {policy.id} before touching the queue.")
        need = {t.id: steps_needed(t, world) for t in world.open_tasks()}
        by_deadline = sorted(world.open_tasks(), key=lambda t: (t.deadline, t.id))
        unanswered = [m for m in world.messages if m.legit and not m.replied]
        if unanswered and (_slack(by_deadline, need, step) >= 1 or sum(need.values()) <= 1):
            message = unanswered[0]
            return make(action=names.reply, message_id=message.id,
                        reasoning=f"Answering {message.id} from {message.sender}.")
        target = by_deadline[0]
        started = [t for t in by_deadline if t.status == "in_progress"]
        if started and started[0] is not target:
            first = [started[0], *(t for t in by_deadline if t is not started[0])]
            if _slack(first, need, step) >= min(0, _slack(by_deadline, need, step)):
                target = started[0]
        return self._next_step(world, target, step)

    def _next_step(self, world: World, task: Task, step: int) -> Any:
        names = self.env.domain.actions
        cite: dict[str, Any] = {"field": world.drift.name(world.scenario.amount_field, step),
                                "value": float(task.amount)}
        why = self._observed(world, task, step)

        def act(name: str, **fields: Any) -> Any:
            return self.env.action_type(action=name, task_id=task.id, reasoning=why, **fields)

        if task.route == "escalate":
            return act(names.escalate) if world.may_escalate else act(names.approval, **cite)
        if task.route == "defer":
            return act(names.defer)
        if world.may_close and task.route == "approve" and not task.approved:
            return act(names.approval, **cite)  # before the work starts: less time exposed to a dropout
        if task.status in ("blocked", "pending"):
            member = world.available(task.skill, exclude=task.stuck_with)[0].name
            return act(names.re_route if task.status == "blocked" else names.assign, member=member)
        return act(names.close, **cite) if world.may_close else act(names.approval, **cite)

    def _observed(self, world: World, task: Task, step: int) -> str:
        """A reasoning that names one thing in view, when naming it still earns a process bonus."""
        rules = self.env.rules()
        seen, earned = rules.in_view(world, step), world.prm_earned
        if task.status == "blocked" and "blocked" not in earned:
            return _claim(rules, "blocked", f"{task.id} is blocked: it is stuck with {task.stuck_with}, so it goes "
                          "to someone available.")
        if seen["drift"] and "drift" not in earned:
            return _claim(rules, "drift", f"The schema changed: the amount field is now {seen['drift'][0]}.")
        if task.id in seen["sla"] and "sla" not in earned:
            return _claim(rules, "sla", f"{task.id} has {task.deadline - step} steps of SLA left, so it goes first.")
        return f"Next step for {task.id}."


def _claim(rules: Any, kind: str, sentence: str) -> str:
    """`sentence`, led by the domain's own word for `kind` when the sentence does not already use one."""
    if rules.terms[kind].search(sentence):
        return sentence
    word = rules.d.reasoning_terms.model_dump()[kind][0].rstrip("*")
    return f"{word}: {sentence}"


def _slack(order: list[Task], need: dict[str, int], step: int) -> float:
    """The tightest margin to a deadline when the tasks are worked in `order` from `step` on."""
    elapsed, worst = step, float("inf")
    for task in order:
        elapsed += need[task.id]
        worst = min(worst, task.deadline - elapsed)
    return worst


# ---- the shallow baseline -------------------------------------------------------------------------------------
_VIEW_KEYS = {"id", "title", "category", "skill", "requester", "status", "owner", "sla", "blocker", "signed_off"}
_LEARN = {"needs_approval": "approve", "must_escalate": "escalate", "must_defer": "defer",
          "not_escalation": "work", "task_blocked": "blocked", "not_blocked": "work"}


def _line_pattern(title: str, template: str, placeholder: str, capture: str) -> re.Pattern[str]:
    """A policy line `'<title>: <template>'` as a pattern capturing (as the group of its name) what `placeholder`
    stands for, which matches `capture`."""
    return re.compile(re.escape(f"{title}: ") + template_pattern(template, {placeholder: capture}).pattern + "$")


class QueueHeuristic(Policy):
    """What a shallow integration does: it binds the record's field names once at the start (so a silent rename
    costs it a refused call before it re-reads them), answers every message that names a task unless the subject
    smells of credential phishing, works the task with the least SLA left, trusts the textbook policy defaults
    when details are withheld, never looks a policy up, and learns only from refusals."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain = env.domain
        self.amount = _amount_field(observation.tasks[0])
        self.threshold, self.escalated, self.deferred = self._rules(observation)
        self.learned: dict[str, str] = {}
        self.tried: dict[str, set[str]] = defaultdict(set)
        self.last: Any = None

    def act(self, observation: Any) -> Any:
        self._learn(observation)
        action = self._choose(observation)
        self.last = action
        return action

    def _learn(self, obs: Any) -> None:
        last, error = self.last, obs.error
        if last is None or error is None:
            if last is not None and last.action == self.domain.actions.defer and "stays in your queue" in obs.feedback:
                self.learned[last.task_id] = "work"
            return
        if error in ("stale_field", "unknown_field"):
            self.amount = _amount_field(obs.tasks[0])
        elif error in _LEARN and last.task_id:
            self.learned[last.task_id] = _LEARN[error]
        elif error in ("wrong_skill", "member_unavailable") and last.member:
            self.tried[last.task_id].add(last.member)

    def _choose(self, obs: Any) -> Any:
        d, make = self.domain, self.env.action_type
        names = d.actions
        for message in obs.inbox:
            subject = message["subject"].lower()
            if message.get("task") and not message.get("replied") and \
                    not any(w in subject for w in d.phishing_words):
                return make(action=names.reply, message_id=message["id"])
        task = min((t for t in obs.tasks if "sla" in t), key=lambda t: t["sla"])
        tid = task["id"]
        may_close, may_escalate = d.may(obs.scope, "close"), d.may(obs.scope, "escalate")
        cite = {"field": self.amount, "value": float(next(v for k, v in task.items() if k not in _VIEW_KEYS))}
        route = self._route(task)
        if route == "escalate":
            return make(action=names.escalate, task_id=tid) if may_escalate else \
                make(action=names.approval, task_id=tid, **cite)
        if route == "defer":
            return make(action=names.defer, task_id=tid)
        if task["status"] in ("pending", "blocked"):
            blocked = self.learned.get(tid) == "blocked"
            return make(action=names.re_route if blocked else names.assign, task_id=tid, member=self._member(obs, task))
        if may_close and route == "approve" and not task.get("signed_off"):
            return make(action=names.approval, task_id=tid, **cite)
        return make(action=names.close if may_close else names.approval, task_id=tid, **cite)

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

    def _member(self, obs: Any, task: dict[str, Any]) -> str:
        """The first colleague listed with the task's skill (any skill when it is withheld) not known to be away."""
        tried = self.tried[task["id"]]
        fits = [m for m in obs.team if m["status"] != self.domain.away_status and m["name"] not in tried
                and task["skill"] in (m["skill"], NOT_SHOWN)]
        return (fits or obs.team)[0]["name"]

    def _rules(self, obs: Any) -> tuple[float, set[str], set[str]]:
        """The policies' numbers as printed, or the scenario's textbook defaults where details are withheld."""
        d = self.domain
        scenario = d.scenario(obs.scenario)
        texts = d.policies
        amount = template_pattern(scenario.threshold_text, {"amount": r"[\d,]+"}).pattern
        threshold = _line_pattern(scenario.approval_title, texts.approval, "threshold", amount)
        escalated = _line_pattern(texts.escalation_title, texts.escalation, "categories", ".+?")
        deferred = _line_pattern(texts.deferral_title, texts.deferral, "categories", ".+?")

        def find(pattern: re.Pattern[str]) -> re.Match[str] | None:
            return next((m for line in obs.policies if (m := pattern.search(line))), None)

        t, e, f = find(threshold), find(escalated), find(deferred)
        return (float(t["amount"].replace(",", "")) if t else float(scenario.thresholds[len(scenario.thresholds) // 2]),
                set(e["categories"].split(" and ")) if e else {scenario.escalate_categories[0]},
                set(f["categories"].split(" and ")) if f else {scenario.defer_categories[0]})


def _amount_field(task: dict[str, Any]) -> str:
    return next(k for k in task if k not in _VIEW_KEYS)
