"""The scheduling engine: book one day's tasks into sites, with staff, at start times, under hard constraints,
maximising an objective the engine knows the optimum of.

Each episode is one day drawn from the domain by the seed: which sites are open, who is on duty and when, which
tasks are requested (durations, priorities, soft wishes, perhaps an emergency), and one resource that cannot be
used. Every booking is checked against the true constraints (capability, skill, hours, arrival, latest start,
no overlap, turnaround, rules) and rejected with a reason code when it breaks one. The submitted plan is scored
against the optimum found by exact search (`solver.py`) on the same truth.

Tiers (from `TierProfile` knobs, never the tier number): `noise`/`drop` list some durations and hours as
estimates (booked as listed; the submitted plan is then checked against the truth, and a task that overruns
cancels what it runs into) or not at all (a booking needs them confirmed by an inspection); `distractors` add
requests that must not be booked (their notes say why) and resources that look available but are not (the
bulletin says why); `hidden_constraints` add `depth` rules the agent is not told, chosen so that they cut into
the optimum where possible, and revealed by a rejected booking (free the first time) or by inspecting what they
concern; `depth` above one adds a mid-plan disruption (an emergency to fit in, or a staff member dropping out).
Nothing here knows what the sites, staff or tasks are: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.scheduling import solver
from openadapt.families.scheduling.domain import HiddenRule, SchedulingDomain, Site, Staff, TaskType
from openadapt.families.scheduling.models import (
    MAX_TASK_IDS,
    BookingView,
    SiteView,
    StaffView,
    TaskView,
)
from openadapt.kit import Outcome, TierProfile
from openadapt.kit.step_shaping import ShapedEnvironment

# The objective, in points (the system prompt states it).
VALUE_PER_PRIORITY = 10  # a booked task earns 10 x its priority
PREFERENCE_BONUS = 4  # each soft wish met (preferred staff member; start by the preferred time)
OVERTIME_COST = 3  # per slot a task runs past the end of normal hours
EMERGENCY_PRIORITY = 5
SOLVED_GAP = 0.03  # solved within 3% of the optimum
OBJECTIVE_POWER = 4  # objective credit = (score / optimum) ** 4: a clearly worse plan earns clearly less

MIN_REQUESTS, MAX_REQUESTS = 3, 6
DUTY = (3, 4, 4, 5)  # staff on duty in a day
STEP_SLACK = 3  # steps the honest path leaves spare in the budget
DRAW_ATTEMPTS = 24
EMERGENCY_AT_START = 0.35
LATE_START, EARLY_FINISH = 0.15, 0.15
WISH_STAFF, WISH_EARLY = 0.3, 0.25
TARGET_TRIES = 2  # targets tried per rule when one makes the day unsolvable


@dataclass(frozen=True, slots=True)
class Booking:
    task: str
    site: str
    staff: str
    start: int
    end: int


@dataclass
class Job:
    id: str
    client: str
    kind: TaskType
    slots: int
    mandatory: bool
    priority: int
    release: int = 0
    start_by: int | None = None
    prefer_staff: str | None = None
    prefer_before: int | None = None
    notes: list[str] = field(default_factory=list)
    fake: bool = False  # a request that must not be booked (its note says why)
    emergency: bool = False
    shown: int | None = None  # slots as listed while unconfirmed (an estimate), None when not listed
    confirmed: bool = True

    @property
    def value(self) -> int:
        return VALUE_PER_PRIORITY * self.priority


@dataclass
class Person:
    spec: Staff
    start: int
    end: int
    usual: tuple[int, int]
    hours_note: str | None = None
    absent: str | None = None  # why they cannot work today
    on_duty: bool = True
    confirmed: bool = True
    estimate: bool = False  # listed hours are the usual ones, unconfirmed


@dataclass
class Room:
    spec: Site
    blocked: str | None = None  # why it cannot be used today


@dataclass
class Rule:
    spec: HiddenRule
    text: str
    site: str | None = None
    staff: str | None = None
    types: frozenset[str] = frozenset()
    until: int | None = None
    probe: Booking | None = None  # a booking the clean optimum makes that this rule rejects
    reveal_by: str = ""  # the id whose inspection shows the rule
    revealed: bool = False

    @property
    def shared(self) -> bool:
        return self.spec.kind == "shared_equipment"

    def forbids(self, kind: str, site: str, staff: str, end: int) -> bool:
        """Whether a booking breaks this rule on its own (shared equipment needs a second booking)."""
        k = self.spec.kind
        if k == "site_excludes_type":
            return site == self.site and kind in self.types
        if k == "staff_excludes_type":
            return staff == self.staff and kind in self.types
        if k == "site_ends_by":
            return site == self.site and end > self.until
        if k == "staff_ends_by":
            return staff == self.staff and end > self.until
        return False


@dataclass
class Disruption:
    kind: str  # "emergency" or "absence"
    text: str
    at_step: int
    job: Job | None = None
    staff: str | None = None
    fired: bool = False


@dataclass
class Day:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    jobs: dict[str, Job]
    rooms: dict[str, Room]
    people: dict[str, Person]
    open_sites: list[str]
    rules: list[Rule]
    disruption: Disruption | None
    optimum: list[Booking]  # an optimal plan of the day as it ends (after any disruption)
    best: int
    inspections: list[str]  # ids the honest path must inspect before booking
    min_steps: int
    notices: list[str]
    visible: list[str] = field(default_factory=list)  # listed task ids
    clean_best: int = 0  # the optimum before hidden rules and disruptions (what they cost)


@dataclass
class Rejection:
    code: str
    message: str
    rule: Rule | None = None


@dataclass
class Verdict:
    coverage: float = 0.0
    objective: float = 0.0
    efficiency: float = 0.0
    penalty: float = 0.0
    score: int = 0
    solved: bool = False


def _overlap(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 < b1 and b0 < a1


def duration_text(total: int) -> str:
    hours, mins = divmod(total, 60)
    if not hours:
        return f"{mins} min"
    return f"{hours}h{mins:02d}" if mins else f"{hours}h"


class SchedulingEnvironment(FamilyEnvironment, ShapedEnvironment):
    domain: ClassVar[SchedulingDomain]
    REWARD = (
        ("coverage", 0.0, 0.30, "tasks the plan keeps, less missing mandatory ones, over the optimum's count"),
        ("objective", 0.0, 0.50, "(plan score / optimum) ** 4"),
        ("efficiency", 0.0, 0.20, "submitted plan, steps beyond the shortest honest path (scaled by objective)"),
        ("penalty", -0.50, 0.0, "-0.25 per request booked that must not be"),
    )

    # ---- reward ---------------------------------------------------------------------------------------
    def verdict(self) -> Verdict:
        return self._judge()

    # ---- small facts ----------------------------------------------------------------------------------
    @property
    def _slot(self) -> int:
        return self.domain.clock.slot_minutes

    @property
    def _turn(self) -> int:
        return self.domain.turnaround_minutes // self._slot

    @per_domain
    def _clocks(cls) -> tuple[str, ...]:
        """The day's clock strings, slot by slot."""
        return tuple(cls.domain.clock_at(s) for s in range(cls.domain.day_slots + 1))

    def clock(self, slot: int) -> str:
        table = self._clocks()
        return table[slot] if 0 <= slot < len(table) else self.domain.clock_at(slot)

    def score_of(self, job: Job, staff: str, start: int, end: int) -> int:
        """What one booking earns (the objective is the sum over booked real tasks)."""
        score = job.value
        if job.prefer_staff is not None and staff == job.prefer_staff:
            score += PREFERENCE_BONUS
        if job.prefer_before is not None and start <= job.prefer_before:
            score += PREFERENCE_BONUS
        return score - OVERTIME_COST * max(0, end - self.domain.regular_slots)

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        for _ in range(DRAW_ATTEMPTS):
            day = self._draw(rng, tier)
            if day is not None:
                break
        else:  # pragma: no cover - a valid domain draws a day within a few attempts
            raise RuntimeError(f"could not draw a solvable day from this domain in {DRAW_ATTEMPTS} attempts (ECI "
                               f"{tier.eci}): make mandatory task kinds shorter or rarer, or add sites and staff")
        self._day = day
        self._bookings: dict[str, Booking] = {}
        self._notes: list[str] = []
        self._inspected: set[str] = set()
        self._submitted = False
        self._verdict = None
        self._broken: dict[str, str] = {}
        self._views: dict[str, list[Any]] | None = None  # listing views, rebuilt when a record changes

    def _draw(self, rng: random.Random, tier: TierProfile) -> Day | None:
        d = self.domain
        ids = [f"{d.task_id_prefix}_{i}" for i in range(1, MAX_TASK_IDS + 1)]
        rng.shuffle(ids)
        clients = rng.sample(d.clients, len(d.clients))
        draw = _Draw(ids, clients)

        open_sites = rng.sample(d.sites, min(rng.choice((2, 2, 3)), len(d.sites) - 1))
        duty = rng.sample(d.staff, min(rng.choice(DUTY), len(d.staff) - 2))
        caps = {c for s in open_sites for c in s.capabilities}
        skills = {k for s in duty for k in s.skills}
        eligible = [t for t in d.task_types if t.needs in caps and t.skill in skills]
        if len(eligible) < 2:
            return None
        people = {s.id: self._person(s, rng) for s in duty}
        rooms = {s.id: Room(s) for s in open_sites}

        jobs: list[Job] = []
        if rng.random() < EMERGENCY_AT_START:
            emergency = self._emergency(rng, eligible, draw)
            if emergency is not None:
                jobs.append(emergency)
        target = len(open_sites) * d.regular_slots * rng.uniform(0.85, 1.2)
        demand = sum(j.slots + self._turn for j in jobs)
        requests = 0
        while requests < MAX_REQUESTS and (requests < MIN_REQUESTS or demand < target):
            job = self._request(rng.choice(eligible), rng, draw, people)
            jobs.append(job)
            demand += job.slots + self._turn
            requests += 1

        # One resource (two on the most adversarial tiers) cannot be used today.
        unavailable = self._unavailable(rng, tier, open_sites, duty, rooms, people)

        clean = self._solve(jobs, people, rooms, [])
        if clean is None or not clean.feasible or clean.score <= 0:
            return None
        current = clean
        rules: list[Rule] = []
        if tier.hidden_constraints:
            rules, current = self._rules(rng, max(1, tier.depth), jobs, people, rooms, current)
            if len(rules) < max(1, tier.depth):
                return None

        disruption, final = None, current
        if tier.depth > 1:
            disruption, final = self._disruption(rng, eligible, draw, jobs, people, rooms, rules, current)
            if disruption is None:
                return None

        fakes = []
        if tier.distractors:
            reasons = rng.sample(d.invalid_requests, min((tier.distractors + 1) // 2, len(d.invalid_requests)))
            for reason in reasons:
                fake = self._request(rng.choice(eligible), rng, draw, people)  # listed like a real one of its kind
                fake.fake = True
                fake.notes[0] = fill(reason, client=fake.client)
                fakes.append(fake)

        listed = sorted([*jobs, *fakes], key=lambda j: int(j.id.rsplit("_", 1)[1]))
        self._uncertain(rng, tier, listed, people)

        notices = rng.sample(d.notices, min(len(d.notices), 1 + tier.distractors // 2)) + unavailable
        rng.shuffle(notices)
        all_jobs = {j.id: j for j in listed}
        if disruption is not None and disruption.job is not None:
            all_jobs[disruption.job.id] = disruption.job
        order = {spec.id: i for i, spec in enumerate([*d.sites, *d.staff])}  # listed in the domain's order
        rooms = dict(sorted(rooms.items(), key=lambda kv: order[kv[0]]))
        people = dict(sorted(people.items(), key=lambda kv: order[kv[0]]))
        day = Day(jobs=all_jobs, rooms=rooms, people=people, open_sites=[s.id for s in open_sites], rules=rules,
                  disruption=disruption, optimum=self._bookings_of(final), best=final.score, inspections=[],
                  min_steps=0, notices=notices, visible=[j.id for j in listed], clean_best=clean.score)
        if not self._plan_path(day, tier):
            return None
        return day

    def _person(self, spec: Staff, rng: random.Random) -> Person:
        d = self.domain
        usual = (d.slot_of(spec.available_from, 0), d.slot_of(spec.available_until, d.day_slots))
        start, end, note = usual[0], usual[1], None
        roll = rng.random()
        if roll < LATE_START:
            start = usual[0] + rng.randint(2, 4)
            note = fill(rng.choice(d.late_start), staff=spec.id, time=self.clock(start))
        elif roll < LATE_START + EARLY_FINISH:
            end = min(usual[1], d.regular_slots) - rng.randint(1, 3)
            note = fill(rng.choice(d.early_finish), staff=spec.id, time=self.clock(end))
        if end - start < 4:
            start, end, note = usual[0], usual[1], None
        return Person(spec, start, end, usual, hours_note=note)

    def _slots_of(self, kind: TaskType, rng: random.Random) -> int:
        return rng.randint(kind.min_minutes // self._slot, kind.max_minutes // self._slot)

    def _request(self, kind: TaskType, rng: random.Random, draw: _Draw, people: dict[str, Person]) -> Job:
        d = self.domain
        slots = self._slots_of(kind, rng)
        release = 0
        if kind.arrival:
            release = rng.randint(d.slot_of(kind.arrival[0], 0), d.slot_of(kind.arrival[1], 0))
        job = Job(id=draw.ids.pop(), client=draw.clients.pop(), kind=kind, slots=slots, mandatory=kind.mandatory,
                  priority=kind.priority, release=release)
        job.notes.append(fill(rng.choice(d.routine_notes), client=job.client))
        if rng.random() < WISH_STAFF:
            skilled = sorted(p for p, person in people.items() if kind.skill in person.spec.skills)
            if skilled:
                job.prefer_staff = rng.choice(skilled)
                job.notes.append(fill(rng.choice(d.prefers_staff), client=job.client, staff=job.prefer_staff))
        if rng.random() < WISH_EARLY:
            latest = d.regular_slots - slots
            if latest > release:
                job.prefer_before = min(latest, release + rng.randint(1, 5))
                job.notes.append(fill(rng.choice(d.prefers_before), client=job.client,
                                      time=self.clock(job.prefer_before)))
        return job

    def _emergency(self, rng: random.Random, eligible: list[TaskType], draw: _Draw) -> Job | None:
        d = self.domain
        kinds = {t.id: t for t in eligible}
        options = [e for e in d.emergencies if e.task_type in kinds]
        if not options:
            return None
        spec = rng.choice(options)
        kind = kinds[spec.task_type]
        slots = self._slots_of(kind, rng)
        start_by = min(spec.start_within_minutes // self._slot + rng.randint(0, 2), d.regular_slots - slots)
        job = Job(id=draw.ids.pop(), client=draw.clients.pop(), kind=kind, slots=slots, mandatory=True,
                  priority=EMERGENCY_PRIORITY, start_by=max(0, start_by), emergency=True)
        job.notes.append(fill(spec.text, client=job.client, time=self.clock(job.start_by)))
        return job

    def _unavailable(self, rng: random.Random, tier: TierProfile, open_sites: list[Site], duty: list[Staff],
                     rooms: dict[str, Room], people: dict[str, Person]) -> list[str]:
        """List resources that cannot be used: plainly marked on clean tiers, looking available on adversarial
        ones (only the bulletin says why). Returns the bulletin lines."""
        d = self.domain
        closed = [s for s in d.sites if s not in open_sites]
        off = [s for s in d.staff if s not in duty]
        site_texts = rng.sample(d.site_blocked, len(d.site_blocked))
        staff_texts = rng.sample(d.staff_absent, len(d.staff_absent))
        lines = []
        for _ in range(max(1, tier.distractors // 2)):
            pick_site = rng.random() < 0.5
            if (pick_site and closed) or not off:
                if not closed:
                    break
                spec = closed.pop(rng.randrange(len(closed)))
                text = fill(site_texts[len(lines) % len(site_texts)], site=spec.id)
                rooms[spec.id] = Room(spec, blocked=text)
            else:
                spec = off.pop(rng.randrange(len(off)))
                text = fill(staff_texts[len(lines) % len(staff_texts)], staff=spec.id)
                person = self._person(spec, rng)
                person.hours_note, person.start, person.end = None, *person.usual
                person.absent, person.on_duty = text, False
                people[spec.id] = person
            lines.append(text)
        return lines

    def _uncertain(self, rng: random.Random, tier: TierProfile, listed: list[Job],
                   people: dict[str, Person]) -> None:
        """Noisy and missing fields: some durations and hours are listed as estimates or not at all."""
        spread = tier.noise + tier.drop
        count = round(5 * spread)
        if count <= 0:
            return
        candidates: list[Job | Person] = [*listed, *people.values()]
        for item in rng.sample(candidates, min(count, len(candidates))):
            missing = self.perturb.chance(tier.drop / spread)
            item.confirmed = False
            if isinstance(item, Job):
                item.shown = None if missing else max(1, item.slots + rng.choice((-1, 0, 1)))
            else:
                item.estimate = not missing

    # ---- hidden rules and disruptions -----------------------------------------------------------------
    def _rules(self, rng: random.Random, count: int, jobs: list[Job], people: dict[str, Person],
               rooms: dict[str, Room], current: solver.Solution) -> tuple[list[Rule], solver.Solution]:
        """Rules that cut into the optimum, each with the booking that reveals it; rules that change nothing
        are kept as a fallback, used only when too few binding ones exist."""
        rules: list[Rule] = []
        spare: list[Rule] = []
        for spec in rng.sample(self.domain.hidden_rules, len(self.domain.hidden_rules)):
            if len(rules) >= count:
                break
            for _ in range(TARGET_TRIES):
                rule = self._target(spec, rng, self._bookings_of(current), jobs, rules)
                if rule is None:
                    break
                trial = self._solve(jobs, people, rooms, [*rules, rule], ceiling=current.score)
                if trial is None or not trial.feasible or trial.score <= 0:
                    continue  # another target of the same rule may leave the day solvable
                if trial.score < current.score:
                    rules.append(rule)
                    current = trial
                else:
                    spare.append(rule)
                break
        for rule in spare:
            if len(rules) >= count:
                break
            if not self._compatible(rule, rules, jobs):
                continue
            trial = self._solve(jobs, people, rooms, [*rules, rule], ceiling=current.score)
            if trial is not None and trial.feasible and trial.score > 0:
                rules.append(rule)
                current = trial
        return rules, current

    @staticmethod
    def _compatible(rule: Rule, rules: list[Rule], jobs: list[Job]) -> bool:
        """No rule rejects another's probe (each probe must reveal its own rule)."""
        kind = {j.id: j.kind.id for j in jobs}
        for a, b in ((rule, r) for r in rules):
            for x, y in ((a, b), (b, a)):
                if x.probe is not None and y.forbids(kind[x.probe.task], x.probe.site, x.probe.staff, x.probe.end):
                    return False
        return True

    def _target(self, spec: HiddenRule, rng: random.Random, plan: list[Booking], jobs: list[Job],
                rules: list[Rule]) -> Rule | None:
        d = self.domain
        by_id = {j.id: j for j in jobs}
        kinds = set(spec.task_types)
        labels = {t.id: t.label for t in d.task_types}

        def allowed(b: Booking, target: str) -> bool:
            kind_ok = not kinds or by_id[b.task].kind.id in kinds
            return kind_ok and (not spec.targets or target in spec.targets)

        if spec.kind == "shared_equipment":
            shared = [b for b in plan if by_id[b.task].kind.id in kinds]
            if not any(_overlap(a.start, a.end, b.start, b.end) for i, a in enumerate(shared) for b in shared[i + 1:]):
                return None  # the optimum never runs two of them at once: the rule would change nothing
            present = sorted({by_id[b.task].kind.id for b in shared})
            text = fill(spec.text, task_types=", ".join(labels[k] for k in sorted(kinds)))
            return Rule(spec, text, types=frozenset(kinds), reveal_by=rng.choice(sorted(
                b.task for b in shared if by_id[b.task].kind.id in present)))
        on_site = spec.kind.startswith("site")
        candidates = [b for b in plan if allowed(b, b.site if on_site else b.staff)]
        if spec.kind.endswith("ends_by"):
            candidates = [b for b in candidates if b.end - 1 >= 2]
        if not candidates:
            return None
        probe = rng.choice(candidates)
        where = probe.site if on_site else probe.staff
        job = by_id[probe.task]
        rule = Rule(spec, "", site=where if on_site else None, staff=None if on_site else where,
                    types=frozenset({job.kind.id}), probe=probe, reveal_by=where)
        values: dict[str, str] = {"site": probe.site, "staff": probe.staff, "task_type": job.kind.label}
        if spec.kind.endswith("ends_by"):
            rule.until = max(2, probe.end - rng.randint(1, max(1, min(3, probe.end - probe.start))))
            values["time"] = self.clock(rule.until)
        rule.text = fill(spec.text, **values)
        return rule if self._compatible(rule, rules, jobs) else None

    def _disruption(self, rng: random.Random, eligible: list[TaskType], draw: _Draw, jobs: list[Job],
                    people: dict[str, Person], rooms: dict[str, Room], rules: list[Rule],
                    current: solver.Solution) -> tuple[Disruption | None, solver.Solution]:
        d = self.domain
        kinds = ["emergency", "absence"]
        rng.shuffle(kinds)
        at_step = rng.randint(2, 3)
        probed = {r.probe.staff for r in rules if r.probe is not None}
        for kind in kinds:
            if kind == "emergency":
                job = self._emergency(rng, eligible, draw)
                if job is None:
                    continue
                final = self._solve([*jobs, job], people, rooms, rules)
                if final is not None and final.feasible and final.score > 0:
                    return Disruption(kind, job.notes[0], at_step, job=job), final
            else:
                used = sorted({b.staff for b in self._bookings_of(current)} - probed)
                if not used:
                    continue
                staff = rng.choice(used)
                others = {k: p for k, p in people.items() if k != staff}
                final = self._solve(jobs, others, rooms, rules, ceiling=current.score)
                if final is not None and final.feasible and final.score > 0:
                    text = fill(rng.choice(d.staff_absent), staff=staff)
                    return Disruption(kind, text, at_step, staff=staff), final
        return None, current

    def _plan_path(self, day: Day, tier: TierProfile) -> bool:
        """The shortest honest path (probes, inspections, bookings, submit), trimmed to fit the budget."""
        budget = self.section.step_budget[tier.eci]
        while True:
            probes = [r.probe for r in day.rules if r.probe is not None and r.spec.kind.endswith("ends_by")]
            needed = [t for t in dict.fromkeys(b.task for b in [*day.optimum, *probes]) if not day.jobs[t].confirmed]
            needed += [s for s in dict.fromkeys(b.staff for b in [*day.optimum, *probes])
                       if not day.people[s].confirmed]
            reveals = sum(1 for r in day.rules if r.probe is not None or r.reveal_by not in needed)
            steps = reveals + len(needed) + len(day.optimum) + 1
            if steps <= budget - STEP_SLACK or not needed:
                break
            item = needed[-1]  # too long a path for this tier's budget: list one fewer field as uncertain
            target = day.jobs.get(item) or day.people[item]
            target.confirmed = True
            if isinstance(target, Job):
                target.shown = None
            else:
                target.estimate = False
        if steps > budget - STEP_SLACK:
            return False
        day.inspections, day.min_steps = needed, steps
        if day.disruption is not None:
            late = 1 if day.disruption.job is not None else 0
            day.disruption.at_step = max(1, min(day.disruption.at_step, steps - 1 - late - 1))
        return True

    # ---- the exact optimum ----------------------------------------------------------------------------
    def _solve(self, jobs: list[Job], people: dict[str, Person], rooms: dict[str, Room],
               rules: list[Rule], ceiling: int | None = None) -> solver.Solution | None:
        """The optimum of a day; `ceiling`: the optimum of a less constrained version of it, if known."""
        d = self.domain
        sites = [s for s, room in rooms.items() if room.blocked is None]
        staff = [p for p, person in people.items() if person.absent is None]
        shared = [r for r in rules if r.shared]
        static = [r for r in rules if not r.shared]
        site_ix = {s: i for i, s in enumerate(sites)}
        staff_ix = {p: len(sites) + i for i, p in enumerate(staff)}
        base = len(sites) + len(staff)
        items = []
        for job in jobs:
            item = solver.Item(job.id, job.mandatory)
            equipment = tuple((base + i, 0, job.slots) for i, r in enumerate(shared) if job.kind.id in r.types)
            for site in sites:
                if job.kind.needs not in rooms[site].spec.capabilities:
                    continue
                for pid in staff:
                    person = people[pid]
                    if job.kind.skill not in person.spec.skills:
                        continue
                    mode = solver.Mode((site, pid), ((site_ix[site], 0, job.slots + self._turn),
                                                     (staff_ix[pid], 0, job.slots), *equipment))
                    latest = min(d.day_slots, person.end) - job.slots
                    if job.start_by is not None:
                        latest = min(latest, job.start_by)
                    for start in range(max(job.release, person.start), latest + 1):
                        end = start + job.slots
                        if not any(r.forbids(job.kind.id, site, pid, end) for r in static):
                            mode.scores[start] = (self.score_of(job, pid, start, end),
                                                  Booking(job.id, site, pid, start, end))
                    item.modes.append(mode)
            items.append(item)
        hours = {staff_ix[p]: solver.interval(0, people[p].start) | (~0 << people[p].end) for p in staff}
        return solver.solve(items, base + len(shared), pools=(tuple(range(len(sites))), tuple(staff_ix.values())),
                            blocked={r: bits & solver.interval(0, d.day_slots + self._turn + 1)
                                     for r, bits in hours.items()}, ceiling=ceiling)

    @staticmethod
    def _bookings_of(solution: solver.Solution) -> list[Booking]:
        return sorted((p.payload for p in solution.chosen.values()), key=lambda b: (b.start, b.site, b.task))

    # ---- the true constraints -------------------------------------------------------------------------
    def check(self, job: Job, site: str, staff: str, start: int) -> Rejection | None:
        """Why this booking cannot be made now (None when it can). It is judged on what the listing says: an
        estimated duration or estimated hours are taken at their word (the plan is checked against the truth
        when it is submitted); a duration or hours not listed at all must be confirmed first."""
        day, d = self._day, self.domain
        room, person = day.rooms[site], day.people[staff]
        if room.blocked is not None:
            return Rejection("site_unavailable", f"{site} cannot be used today: {room.blocked}")
        if person.absent is not None:
            return Rejection("staff_unavailable", f"{staff} cannot work today: {person.absent}")
        if job.kind.needs not in room.spec.capabilities:
            return Rejection("capability_mismatch", f"{job.id} ({job.kind.label}) needs a {d.site_noun} with "
                             f"{job.kind.needs}; {site} offers {', '.join(room.spec.capabilities)}.")
        if job.kind.skill not in person.spec.skills:
            return Rejection("skill_mismatch", f"{job.id} ({job.kind.label}) needs {job.kind.skill}; {staff} "
                             f"holds {', '.join(person.spec.skills)}.")
        for rule in day.rules:
            if rule.spec.kind.endswith("excludes_type") and rule.forbids(job.kind.id, site, staff, 0):
                return Rejection("rule_violation", f"Rejected: {rule.text}", rule)
        length = self.listed_slots(job)
        if length is None:
            return Rejection("duration_unconfirmed", f"{job.id} has no duration listed yet: "
                             f"{d.tools.inspect} it first.")
        window = self.listed_hours(person)
        if window is None:
            return Rejection("availability_unconfirmed", f"{staff}'s hours are not listed yet: "
                             f"{d.tools.inspect} them first.")
        others = {t: (b.site, b.staff, b.start, b.end) for t, b in self._bookings.items() if t != job.id}
        return self._conflict(job, site, staff, start, start + length, window, others)

    def listed_slots(self, job: Job) -> int | None:
        return job.slots if job.confirmed else job.shown

    def listed_hours(self, person: Person) -> tuple[int, int] | None:
        if person.confirmed:
            return person.start, person.end
        return person.usual if person.estimate else None

    def _conflict(self, job: Job, site: str, staff: str, start: int, end: int, window: tuple[int, int],
                  others: dict[str, tuple[str, str, int, int]]) -> Rejection | None:
        """The time constraints of one booking against the others (task -> site, staff, start, end)."""
        day, d = self._day, self.domain
        if end > d.day_slots:
            return Rejection("outside_hours", f"{job.id} would end at {self.clock(end)}, after the day ends at "
                             f"{d.clock.overtime_end}.")
        if start < job.release:
            return Rejection("before_ready", f"{job.id} is not ready before {self.clock(job.release)}.")
        if job.start_by is not None and start > job.start_by:
            return Rejection("too_late", f"{job.id} must start by {self.clock(job.start_by)}.")
        if start < window[0] or end > window[1]:
            return Rejection("outside_availability", f"{staff} works {self.clock(window[0])}-"
                             f"{self.clock(window[1])} today.")
        for rule in day.rules:
            if rule.spec.kind.endswith("ends_by") and rule.forbids(job.kind.id, site, staff, end):
                return Rejection("rule_violation", f"Rejected: {rule.text}", rule)
        for task, (o_site, o_staff, o_start, o_end) in others.items():
            if o_site == site and _overlap(start, end + self._turn, o_start, o_end + self._turn):
                code = "site_busy" if _overlap(start, end, o_start, o_end) else "turnaround_conflict"
                return Rejection(code, f"{site} holds {task} {self.clock(o_start)}-{self.clock(o_end)}; "
                                 f"{d.turnaround_label} takes {d.turnaround_minutes} min between tasks.")
            if o_staff == staff and _overlap(start, end, o_start, o_end):
                return Rejection("staff_busy", f"{staff} is booked for {task} {self.clock(o_start)}-"
                                 f"{self.clock(o_end)}.")
        for rule in day.rules:
            if not rule.shared or job.kind.id not in rule.types:
                continue
            for task, (_, _, o_start, o_end) in others.items():
                if day.jobs[task].kind.id in rule.types and _overlap(start, end, o_start, o_end):
                    return Rejection("rule_violation", f"Rejected: {rule.text} ({task} runs "
                                     f"{self.clock(o_start)}-{self.clock(o_end)}.)", rule)
        return None

    def broken(self) -> dict[str, str]:
        """Bookings the submitted plan cannot keep on the day, checked in order of start against the true
        durations and hours (a task that overruns into the next one cancels the next one): task -> why."""
        day = self._day
        kept: dict[str, tuple[str, str, int, int]] = {}
        broken: dict[str, str] = {}
        for b in sorted(self._bookings.values(), key=lambda b: (b.start, b.task)):
            job, person = day.jobs[b.task], day.people[b.staff]
            end = b.start + job.slots
            problem = self._conflict(job, b.site, b.staff, b.start, end, (person.start, person.end), kept)
            if problem is None and any(r.forbids(job.kind.id, b.site, b.staff, end) for r in day.rules):
                problem = Rejection("rule_violation", "breaks a rule")
            if problem is None:
                kept[b.task] = (b.site, b.staff, b.start, end)
            else:
                broken[b.task] = problem.message
        return broken

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        outcome = self._act(action)
        if not outcome.terminal:
            self._maybe_disrupt(outcome)
        return outcome

    def _act(self, action: Any) -> Outcome:
        tools = self.domain.tools
        if action.tool is None:
            names = ", ".join(tools.model_dump().values())
            return Outcome(f"Say which tool to use: one of {names}.", error="missing_tool")
        if action.tool == tools.submit:
            return self._submit()
        if action.tool == tools.inspect:
            outcome = self._inspect(action)
        elif action.tool == tools.assign:
            outcome = self._assign(action)
        else:
            outcome = self._unassign(action)
        return outcome

    def _visible_job(self, task: str | None) -> Job | Outcome:
        if task is None:
            return Outcome(f"Name the {self.domain.task_noun} (task).", error="missing_task")
        if task not in self._day.visible:
            return Outcome(f"There is no {self.domain.task_noun} {task} on the list.", error="unknown_task")
        return self._day.jobs[task]

    def _inspect(self, action: Any) -> Outcome:
        named = [(k, v) for k, v in (("task", action.task), ("site", action.site), ("staff", action.staff)) if v]
        if not named:
            return Outcome(f"{action.tool} needs one of task, site or staff.", error="missing_target")
        if len(named) > 1:
            return Outcome(f"{action.tool} reads one record at a time: give only one of task, site or staff.",
                           error="ambiguous_target")
        what, target = named[0]
        day = self._day
        if what == "task":
            job = self._visible_job(target)
            if isinstance(job, Outcome):
                return job
            lines = [f"{job.id}: {job.kind.label} for {job.client}, "
                     f"{duration_text(job.slots * self._slot)} (confirmed)."]
            booked = self._bookings.get(job.id)
            if booked is not None and booked.end - booked.start != job.slots:
                lines.append(f"It is booked for {duration_text((booked.end - booked.start) * self._slot)}: "
                             f"{self.domain.tools.assign} it again to fix the booking.")
            job.confirmed, job.shown = True, job.slots
            rules = [r for r in day.rules if r.shared and job.kind.id in r.types]
        elif what == "site":
            if target not in day.rooms:
                return Outcome(f"{target} is not on today's list of {self.domain.site_noun}s.", error="unknown_site")
            room = day.rooms[target]
            lines = [f"{target}: {room.spec.note}"] + ([room.blocked] if room.blocked else [])
            rules = [r for r in day.rules if r.site == target]
        else:
            if target not in day.people:
                return Outcome(f"{target} is not on today's list of staff.", error="unknown_staff")
            person = day.people[target]
            person.confirmed, person.estimate = True, False
            hours = f"{self.clock(person.start)}-{self.clock(person.end)}"
            lines = [f"{target}: {person.spec.note}", person.absent or f"Confirmed hours {hours}."]
            if person.hours_note and not person.absent:
                lines.append(person.hours_note)
            rules = [r for r in day.rules if r.staff == target]
        for rule in rules:
            lines.append(rule.text)
            self._reveal(rule)
        self._views = None
        if target in self._inspected:
            return Outcome(f"{action.tool} {target}: nothing new. " + " ".join(lines))
        self._inspected.add(target)
        return Outcome(f"{action.tool} {target}: " + " ".join(lines))

    def _reveal(self, rule: Rule) -> None:
        if not rule.revealed:
            rule.revealed = True
            self._notes.append(rule.text)
            self._views = None

    def _assign(self, action: Any) -> Outcome:
        job = self._visible_job(action.task)
        if isinstance(job, Outcome):
            return job
        for name in ("site", "staff", "start"):
            if getattr(action, name) is None:
                return Outcome(f"{action.tool} needs task, site, staff and start; {name} is missing.",
                               error=f"missing_{name}")
        day = self._day
        if action.site not in day.rooms:
            return Outcome(f"{action.site} is not on today's list of {self.domain.site_noun}s.", error="unknown_site")
        if action.staff not in day.people:
            return Outcome(f"{action.staff} is not on today's list of staff.", error="unknown_staff")
        start = self.domain.slots(action.start)
        current = self._bookings.get(job.id)
        if current is not None and (current.site, current.staff, current.start) == (action.site, action.staff,
                                                                                      start):
            return Outcome(f"{job.id} is already booked there.")
        rejection = self.check(job, action.site, action.staff, start)
        if rejection is not None:
            rule = rejection.rule
            if rule is not None and not rule.revealed:
                self._reveal(rule)
                self.price_rejection(0.0, "rule_discovered")  # a rule nobody told you about: learning it is free
            return Outcome(rejection.message, error=rejection.code)
        booking = Booking(job.id, action.site, action.staff, start, start + self.listed_slots(job))
        self._bookings[job.id] = booking
        moved = " (moved)" if current is not None else ""
        return Outcome(f"Booked {job.id} in {booking.site} with {booking.staff}, {self.clock(booking.start)}-"
                       f"{self.clock(booking.end)}{moved}.")

    def _unassign(self, action: Any) -> Outcome:
        job = self._visible_job(action.task)
        if isinstance(job, Outcome):
            return job
        if self._bookings.pop(job.id, None) is None:
            return Outcome(f"{job.id} is not booked.", error="not_booked")
        return Outcome(f"Unbooked {job.id}.")

    def _maybe_disrupt(self, outcome: Outcome) -> None:
        event = self._day.disruption
        if event is None or event.fired or self._state.step_count < event.at_step:
            return
        outcome.feedback += " " + self._fire(event)

    def _fire(self, event: Disruption) -> str:
        day = self._day
        event.fired = True
        self._views = None
        day.notices.append(event.text)
        if event.job is not None:
            day.visible.append(event.job.id)
            return f"NEW {self.domain.task_noun.upper()}: {event.job.id}: {event.text}"
        day.people[event.staff].absent = event.text
        dropped = sorted(t for t, b in self._bookings.items() if b.staff == event.staff)
        for task in dropped:
            del self._bookings[task]
        gone = f" Unbooked: {', '.join(dropped)}." if dropped else ""
        return f"CHANGE: {event.text}{gone}"

    def _submit(self) -> Outcome:
        event = self._day.disruption
        late = ""
        if event is not None and not event.fired:
            late = " Before the plan went out: " + self._fire(event)
        self._submitted = True
        verdict = self._judge()
        broken = "".join(f" On the day {task} cannot be kept: {why}" for task, why in sorted(self._broken.items()))
        return Outcome(f"Plan submitted: score {verdict.score} against the best possible {self._day.best}."
                       + (" Solved." if verdict.solved else " Not solved.") + broken + late,
                       terminal=True, solved=verdict.solved)

    def _judge(self) -> Verdict:
        if self._verdict is not None:
            return self._verdict
        day, v = self._day, Verdict()
        self._broken = self.broken()
        booked = {t: b for t, b in self._bookings.items() if not day.jobs[t].fake and t not in self._broken}
        fakes = sum(day.jobs[t].fake for t in self._bookings)
        v.score = sum(self.score_of(day.jobs[t], b.staff, b.start, b.start + day.jobs[t].slots)
                      for t, b in booked.items())
        missing = sum(1 for t in day.visible if day.jobs[t].mandatory and not day.jobs[t].fake and t not in booked)
        v.coverage = 0.30 * min(1.0, max(0, len(booked) - missing) / len(day.optimum))
        v.objective = 0.50 * min(1.0, max(0, v.score) / day.best) ** OBJECTIVE_POWER
        mandatory = missing == 0
        v.solved = (self._submitted and mandatory and not fakes and not self._broken
                    and v.score >= (1 - SOLVED_GAP) * day.best)
        if self._submitted:
            steps, budget = self._state.step_count, self._state.step_budget
            slack = budget - day.min_steps
            wasted = max(0, steps - day.min_steps)
            pace = 1.0 if wasted == 0 else (max(0.0, 1.0 - wasted / slack) if slack > 0 else 0.0)
            v.efficiency = 0.20 * pace * (v.objective / 0.50)
        v.penalty = -min(0.50, 0.25 * fakes)
        self._verdict = v
        return v

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        day = self._day
        if self._views is None:
            self._views = {
                "tasks": [self._task_view(day.jobs[t]) for t in day.visible],
                "sites": [self._site_view(room) for room in day.rooms.values()],
                "staff": [self._staff_view(person) for person in day.people.values()],
            }
        return {
            **{name: list(views) for name, views in self._views.items()},
            "schedule": [BookingView(task=b.task, site=b.site, staff=b.staff, start=self.clock(b.start),
                                     end=self.clock(b.end))
                         for b in sorted(self._bookings.values(), key=lambda b: (b.start, b.site, b.task))],
            "notices": list(day.notices),
            "notes": list(self._notes),
        }

    @property
    def _plain(self) -> bool:
        """Clean tiers mark unavailable resources in the listing; adversarial ones only in the bulletin."""
        return self.tier.distractors == 0

    def _task_view(self, job: Job) -> TaskView:
        if job.confirmed:
            shown, duration = job.slots, duration_text(job.slots * self._slot)
        elif job.shown is not None:
            shown = job.shown
            duration = f"about {duration_text(shown * self._slot)} (estimate: {self.domain.tools.inspect} to confirm)"
        else:
            shown, duration = None, f"not confirmed ({self.domain.tools.inspect} to confirm)"
        return TaskView(
            id=job.id, client=job.client, kind=job.kind.id, label=job.kind.label, needs=job.kind.needs,
            skill=job.kind.skill, duration=duration, minutes=None if shown is None else shown * self._slot,
            confirmed=job.confirmed, priority=job.priority, mandatory=job.mandatory,
            ready_from=self.clock(job.release) if job.release else None,
            start_by=None if job.start_by is None else self.clock(job.start_by),
            prefers_staff=job.prefer_staff,
            prefers_before=None if job.prefer_before is None else self.clock(job.prefer_before),
            notes=list(job.notes),
        )

    def _revealed_about(self, target: str) -> list[str]:
        return [r.text for r in self._day.rules if r.revealed and target in (r.site, r.staff)]

    def _site_view(self, room: Room) -> SiteView:
        status = f"closed: {room.blocked}" if room.blocked and self._plain else "open"
        notes = []
        if room.spec.id in self._inspected:
            notes = [room.spec.note, *([room.blocked] if room.blocked else [])]
        return SiteView(id=room.spec.id, label=room.spec.label, capabilities=list(room.spec.capabilities),
                        status=status, notes=notes + self._revealed_about(room.spec.id))

    def _staff_view(self, person: Person) -> StaffView:
        spec = person.spec
        shows_absence = person.absent is not None and (self._plain or person.on_duty)
        status = f"absent: {person.absent}" if shows_absence else "on duty"
        if person.confirmed:
            window = (person.start, person.end) if person.on_duty else person.usual
            hours, notes = f"{self.clock(window[0])}-{self.clock(window[1])}", [person.hours_note] \
                if person.hours_note else []
        elif person.estimate:
            window = person.usual
            hours = f"about {self.clock(window[0])}-{self.clock(window[1])} ({self.domain.tools.inspect} to confirm)"
            notes = []
        else:
            window, hours, notes = None, f"not confirmed ({self.domain.tools.inspect} to confirm)", []
        if spec.id in self._inspected:
            notes = [spec.note, *notes]
        return StaffView(id=spec.id, name=spec.name, skills=list(spec.skills), status=status, hours=hours,
                         available_from=None if window is None else self.clock(window[0]),
                         available_until=None if window is None else self.clock(window[1]),
                         confirmed=person.confirmed, notes=notes + self._revealed_about(spec.id))

    def oracle_view(self) -> Day:
        return self._day

    def booking(self, task: str) -> Booking | None:
        """The current booking of a task (for policies and tests)."""
        return self._bookings.get(task)

    def secret_values(self) -> list[str]:
        # Hidden rules and a disruption still to come: seen at reset, they give the day away.
        day = self._day
        secrets = [r.text for r in day.rules]
        if day.disruption is not None:
            secrets.append(day.disruption.text)
        return secrets


@dataclass
class _Draw:
    """The id and client pools one day draws from (each used once)."""

    ids: list[str]
    clients: list[str]
