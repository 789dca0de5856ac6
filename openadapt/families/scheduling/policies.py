"""Reference policies of the scheduling family: the privileged oracle and a shallow greedy heuristic (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

from typing import Any

from openadapt.families.scheduling.engine import OVERTIME_COST, PREFERENCE_BONUS
from openadapt.kit import Policy

UNCONFIRMED = {"duration_unconfirmed": "task", "availability_unconfirmed": "staff"}
MAX_TRIES = 3  # the heuristic gives a task up after this many rejected bookings


class SchedulingOracle(Policy):
    """Knows the day's optimum (computed by the engine's exact search) and walks the shortest honest path:
    confirm every estimate its bookings rely on, try the booking of the clean plan that each hidden rule
    forbids (its rejection reveals the rule; an equipment rule is read off a task instead), book the optimum
    (an emergency once it has been announced), submit."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env = self.env
        day, tools, make = env.oracle_view(), env.domain.tools, env.action_type
        for item in day.inspections:
            if not self._confirmed(day, item):
                return self._inspect(item)
        for rule in day.rules:
            if not rule.revealed and rule.probe is not None:
                b = rule.probe
                return make(tool=tools.assign, task=b.task, site=b.site, staff=b.staff, start=env.clock(b.start))
        for rule in day.rules:
            if not rule.revealed:
                return self._inspect(rule.reveal_by)
        for b in day.optimum:
            if b.task in day.visible and env.booking(b.task) != b:
                return make(tool=tools.assign, task=b.task, site=b.site, staff=b.staff, start=env.clock(b.start))
        return make(tool=tools.submit)

    @staticmethod
    def _confirmed(day: Any, item: str) -> bool:
        return (day.jobs[item] if item in day.jobs else day.people[item]).confirmed

    def _inspect(self, item: str) -> Any:
        env = self.env
        field = "task" if item in env.oracle_view().jobs else "site" if item in env.oracle_view().rooms else "staff"
        return env.action_type(tool=env.domain.tools.inspect, **{field: item})


class GreedyHeuristic(Policy):
    """What a shallow scheduler does: take the listing at face value (an estimate as the duration, usual hours
    as the hours, every resource marked open or on duty as usable, every request as wanted), book mandatory
    tasks first and then by priority, each at the slot that earns it the most points as the prompt states them
    (wishes met, no overtime; earliest on a tie), confirm a record only when a booking is refused for want of
    it, try other slots after a rejection, and submit when nothing more fits. It never reads notes or the
    bulletin, and never revisits a booking."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain = env.domain
        self.tried: set[tuple[str, str, str, int]] = set()
        self.failures: dict[str, int] = {}
        self.last: tuple[str, str, str, int] | None = None
        self.typical = {t.id: (t.min_minutes + t.max_minutes) // 2 for t in env.domain.task_types}

    def act(self, observation: Any) -> Any:
        d, make = self.domain, self.env.action_type
        last, self.last = self.last, None
        if last is not None and observation.error in UNCONFIRMED:
            field = UNCONFIRMED[observation.error]
            return make(tool=d.tools.inspect, **{field: last[0] if field == "task" else last[2]})
        if last is not None and observation.error:
            self.tried.add(last)
            self.failures[last[0]] = self.failures.get(last[0], 0) + 1
        booked = {b.task: b for b in observation.schedule}
        todo = sorted((t for t in observation.tasks if t.id not in booked and
                       self.failures.get(t.id, 0) < MAX_TRIES), key=lambda t: (not t.mandatory, -t.priority, t.id))
        for task in todo:
            fit = self._best_fit(task, observation, booked)
            if fit is None:
                self.failures[task.id] = MAX_TRIES
                continue
            self.last = fit
            return make(tool=d.tools.assign, task=fit[0], site=fit[1], staff=fit[2], start=d.clock_at(fit[3]))
        return make(tool=d.tools.submit)

    def _best_fit(self, task: Any, obs: Any, booked: dict[str, Any]) -> tuple[str, str, str, int] | None:
        d = self.domain
        slot = d.clock.slot_minutes
        turn = d.turnaround_minutes // slot
        length = -(-(task.minutes or self.typical[task.kind]) // slot)
        sites = [s.id for s in obs.sites if s.status == "open" and task.needs in s.capabilities]
        staff = [p for p in obs.staff if p.status == "on duty" and task.skill in p.skills]
        busy = [(b.site, b.staff, d.slots(b.start), d.slots(b.end)) for t, b in booked.items() if t != task.id]
        first = d.slots(task.ready_from) if task.ready_from else 0
        wish = d.slots(task.prefers_before) if task.prefers_before else None
        best, best_key = None, None
        for start in range(first, d.day_slots - length + 1):
            if task.start_by and start > d.slots(task.start_by):
                break
            end = start + length
            for person in staff:
                lo = d.slots(person.available_from) if person.available_from else 0
                hi = d.slots(person.available_until) if person.available_until else d.day_slots
                if start < lo or end > hi or any(p == person.id and start < e and s < end for _, p, s, e in busy):
                    continue
                points = (PREFERENCE_BONUS * (person.id == task.prefers_staff)
                          + PREFERENCE_BONUS * (wish is not None and start <= wish)
                          - OVERTIME_COST * max(0, end - d.regular_slots))
                for site in sites:
                    if any(x == site and start < e + turn and s < end + turn for x, _, s, e in busy):
                        continue
                    key = (-points, start)
                    if (task.id, site, person.id, start) not in self.tried and (best_key is None or key < best_key):
                        best, best_key = (task.id, site, person.id, start), key
        return best
