"""Reference policies of the scheduling family: the privileged oracle and a shallow greedy heuristic (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

from typing import Any

from openadapt.kit import Policy

UNCONFIRMED = {"duration_unconfirmed": "task", "availability_unconfirmed": "staff"}
MAX_TRIES = 3  # the heuristic gives a task up after this many rejected bookings


class SchedulingOracle(Policy):
    """Knows the day's optimum (computed by the engine's exact search) and walks the shortest honest path:
    try the booking of the clean plan that each hidden rule forbids (its rejection reveals the rule; an
    equipment rule is read off a task instead), confirm every estimate its plan relies on, book the optimum
    (an emergency once it has been announced), submit."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env = self.env
        day, tools, make = env.oracle_view(), env.domain.tools, env.action_type
        for rule in day.rules:
            if not rule.revealed and rule.probe is not None:
                b = rule.probe
                return make(tool=tools.assign, task=b.task, site=b.site, staff=b.staff, start=env.clock(b.start))
        for item in day.inspections:
            if not self._confirmed(day, item):
                return self._inspect(item)
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
    """What a shallow scheduler does: take the listing at face value (estimates as true, a missing duration as
    the kind's typical one, every resource marked open or on duty as usable, every request as wanted), book
    mandatory tasks first and then by priority, each at the earliest slot that fits what it has booked
    (preferred staff member first), confirm a record only when a booking is refused for want of it, retry
    other slots after a rejection, and submit when nothing more fits. It never reads notes or the bulletin."""

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
            fit = self._first_fit(task, observation, booked)
            if fit is None:
                self.failures[task.id] = MAX_TRIES
                continue
            self.last = fit
            return make(tool=d.tools.assign, task=fit[0], site=fit[1], staff=fit[2], start=d.clock_at(fit[3]))
        return make(tool=d.tools.submit)

    def _first_fit(self, task: Any, obs: Any, booked: dict[str, Any]) -> tuple[str, str, str, int] | None:
        d = self.domain
        slot = d.clock.slot_minutes
        turn = d.turnaround_minutes // slot
        length = -(-(task.minutes or self.typical[task.kind]) // slot)
        sites = [s.id for s in obs.sites if s.status == "open" and task.needs in s.capabilities]
        staff = [p for p in obs.staff if p.status == "on duty" and task.skill in p.skills]
        staff.sort(key=lambda p: p.id != task.prefers_staff)
        busy = [(b.site, b.staff, d.slots(b.start), d.slots(b.end)) for t, b in booked.items() if t != task.id]
        first = d.slots(task.ready_from) if task.ready_from else 0
        for start in range(first, d.day_slots - length + 1):
            if task.start_by and start > d.slots(task.start_by):
                break
            end = start + length
            for person in staff:
                lo = d.slots(person.available_from) if person.available_from else 0
                hi = d.slots(person.available_until) if person.available_until else d.day_slots
                if start < lo or end > hi or any(p == person.id and start < e and s < end for _, p, s, e in busy):
                    continue
                for site in sites:
                    if any(x == site and start < e + turn and s < end + turn for x, _, s, e in busy):
                        continue
                    if (task.id, site, person.id, start) not in self.tried:
                        return task.id, site, person.id, start
        return None
