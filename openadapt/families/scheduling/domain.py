"""The scheduling domain: resources (sites with capabilities, staff with skills and hours), the kinds of task to
place on one day's plan, and the texts an agent meets (preferences, invalid requests, absences, hidden rules).

Each episode is one day: the engine draws which sites are open, who is on duty (and when), which tasks are
requested (durations, priorities, preferences, an emergency), and what goes wrong. The agent books each task
into a site, with a staff member, at a start time; bookings are checked against the true constraints, and the
submitted plan is scored against the optimum the engine computes by exact search.

Everything here is data a designer writes; the mechanics (constraint kinds, the objective, the tiers) are the
engine's. A task needs exactly one site (with the capability its kind requires) and one staff member (with the
skill it requires) for its whole duration.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from openadapt.families.domain import (
    IDENT,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    Rule,
    duplicate_values,
    duplicates,
    names_differ,
    too_few,
    unknown_refs,
)

CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
MAX_SLOTS = 40  # slots in one day (regular + overtime): keeps the exact search small
MAX_OPEN_SITES = 3
MIN_SITES = MAX_OPEN_SITES + 1
MIN_STAFF = 6
MIN_CLIENTS = 14
MIN_OPTIONAL = 3  # optional kinds, so that a full day forces a choice of what to defer
RULE_KINDS = ("site_excludes_type", "staff_excludes_type", "site_ends_by", "staff_ends_by", "shared_equipment")
# Placeholders each hidden-rule kind must (first) and may (second) use.
# The placeholders a hidden rule's text holds, by its kind: (allowed, required).
RULE_PLACEHOLDERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "site_excludes_type": (("site", "task_type"), ("site", "task_type")),
    "staff_excludes_type": (("staff", "task_type"), ("staff", "task_type")),
    "site_ends_by": (("site", "time"), ("site", "time")),
    "staff_ends_by": (("staff", "time"), ("staff", "time")),
    "shared_equipment": (("task_types",), ()),
}
# The lines of each plain list of texts: (allowed, required), every allowed one required.
LINE_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "late_start": ("staff", "time"), "early_finish": ("staff", "time"), "prefers_staff": ("client", "staff"),
    "prefers_before": ("client", "time"), "routine_notes": ("client",), "invalid_requests": ("client",),
    "site_blocked": ("site",), "staff_absent": ("staff",), "notices": (),
}


def minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


class Vocab(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier the agent will see, lowercase with underscores, e.g. 'laminar_flow' (a capability of a site) "
        "or 'orthopaedics' (a skill of a staff member)."))
    label: str = Field(min_length=3, max_length=100, description=(
        "What it means in this world, in a few words, e.g. 'ultra-clean laminar-flow air for joint "
        "replacements', 'refrigerated door seal', 'ADR hazardous-goods certificate'."))


class Site(DomainPart):
    id: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Identifier of one site a task is placed in (a room, a dock door, a ward, a court), e.g. 'or_3', "
        "'door_4'. The agent types it."))
    label: str = Field(min_length=3, max_length=80, description=(
        "Its everyday name with a distinguishing detail, e.g. 'Theatre 3, orthopaedic wing'."))
    capabilities: list[str] = Field(min_length=1, max_length=6, description=(
        "Ids from `capabilities` that this site offers, e.g. ['general', 'laminar_flow']. A task can only be "
        "placed in a site that offers the capability its kind needs."))
    note: str = Field(min_length=5, max_length=200, description=(
        "A routine fact an inspector reads about the site (location, equipment, habits), never a rule that "
        "forbids anything, e.g. 'next to recovery; the only theatre with a ceiling-mounted microscope'."))


class Staff(DomainPart):
    id: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Identifier of one staff member or crew, e.g. 'dr_okafor', 'crew_bravo'. The agent types it."))
    name: str = Field(min_length=3, max_length=80, description=(
        "Full name and role, e.g. 'Dr Chidi Okafor, consultant general surgeon', 'Bravo crew (2 reach-truck "
        "drivers)'."))
    skills: list[str] = Field(min_length=1, max_length=6, description=(
        "Ids from `skills` this person holds, e.g. ['general_surgery', 'urology']."))
    available_from: str | None = Field(default=None, pattern=CLOCK, description=(
        "Usual start of their working day 'HH:MM' (empty: the day's start). The engine may make a given day "
        "start later or end earlier, with one of the `late_start`/`early_finish` texts."))
    available_until: str | None = Field(default=None, pattern=CLOCK, description=(
        "Usual end of their working day 'HH:MM' (empty: the end of the overtime window)."))
    note: str = Field(min_length=5, max_length=200, description=(
        "A routine fact about them an inspector reads, e.g. 'prefers to start lists with the shortest case'. "
        "Never a rule that forbids anything."))


class TaskType(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier of a kind of task, e.g. 'total_hip_replacement', 'chilled_produce'."))
    label: str = Field(min_length=3, max_length=80, description="Its name in words, e.g. 'total hip replacement'.")
    needs: str = Field(min_length=2, max_length=40, description=(
        "The capability id (from `capabilities`) a site must offer to host it, e.g. 'laminar_flow'."))
    skill: str = Field(min_length=2, max_length=40, description=(
        "The skill id (from `skills`) the staff member doing it must hold, e.g. 'orthopaedics'."))
    min_minutes: int = Field(ge=5, le=720, description=(
        "Shortest realistic duration in minutes, a multiple of `clock.slot_minutes`, e.g. 120."))
    max_minutes: int = Field(ge=5, le=720, description=(
        "Longest realistic duration in minutes (each task of this kind gets a duration in between), e.g. 180."))
    priority: int = Field(ge=1, le=5, description=(
        "How much booking it matters, 1 (can wait for another day) to 5 (urgent). Use several levels."))
    mandatory: bool = Field(default=False, description=(
        "True when every task of this kind must be on the day's plan (e.g. cancer surgery at its target date); "
        "false when it may be deferred if the day is full. Keep most kinds optional."))
    arrival: list[Annotated[str, Field(pattern=CLOCK)]] = Field(default_factory=list, max_length=2, description=(
        "Either empty (ready from the day's start) or ['HH:MM', 'HH:MM']: the window in which each such task "
        "becomes ready (a truck's arrival); it cannot start before that, e.g. ['06:30', '09:00']."))


class HiddenRule(DomainPart):
    kind: Literal["site_excludes_type", "staff_excludes_type", "site_ends_by", "staff_ends_by",
                  "shared_equipment"] = Field(description=(
                      "What the rule forbids: 'site_excludes_type' (a site cannot host a kind of task: broken "
                      "equipment), 'staff_excludes_type' (a staff member may not do a kind of task: a lapsed "
                      "certificate), 'site_ends_by' / 'staff_ends_by' (everything there / with them must end "
                      "by a time), 'shared_equipment' (tasks of the listed kinds share one scarce item and "
                      "cannot overlap anywhere). The engine picks the site, staff member, kind or time each "
                      "episode, so that the rule matters."))
    text: str = Field(min_length=20, max_length=300, description=(
        "The note or rejection message that reveals it, naming what it forbids. Placeholders by kind: "
        "site_excludes_type {site} and {task_type}; staff_excludes_type {staff} and {task_type}; site_ends_by "
        "{site} and {time}; staff_ends_by {staff} and {time}; shared_equipment may use {task_types}. E.g. "
        "'The laminar-flow canopy in {site} failed its particle count overnight: no {task_type} there today.'"))
    task_types: list[str] = Field(default_factory=list, max_length=10, description=(
        "Task kind ids the rule may name (empty: any kind); for shared_equipment, the kinds that share the item "
        "(at least one), e.g. ['total_hip_replacement', 'total_knee_replacement']."))
    targets: list[str] = Field(default_factory=list, max_length=10, description=(
        "Site ids (site_* kinds) or staff ids (staff_* kinds) the rule may name; empty: any that fits."))


class Emergency(DomainPart):
    task_type: str = Field(min_length=2, max_length=40, description=(
        "The task kind id of the emergency, e.g. 'appendicectomy'. It is mandatory whatever the kind says."))
    text: str = Field(min_length=20, max_length=300, description=(
        "How it is announced, with {client} (who it is for) and {time} (the latest start), e.g. '{client} was "
        "admitted overnight with acute appendicitis and must be in theatre by {time}.'"))
    start_within_minutes: int = Field(ge=0, le=720, description=(
        "Latest start, in minutes after the day's start (the engine may add a little), e.g. 180."))


class Clock(DomainPart):
    day_start: str = Field(pattern=CLOCK, description="When the day's plan starts, 'HH:MM', e.g. '07:30'.")
    regular_end: str = Field(pattern=CLOCK, description=(
        "End of normal hours, 'HH:MM', e.g. '16:30'. Work past it is overtime and costs points."))
    overtime_end: str = Field(pattern=CLOCK, description=(
        "Hard end of the day, 'HH:MM', at or after regular_end, e.g. '17:30'. Nothing may run past it."))
    slot_minutes: int = Field(ge=5, le=120, description=(
        "The booking grid in minutes (starts and durations are multiples of it), e.g. 30. Keep the whole day "
        "within 40 slots."))


class ToolNames(DomainPart):
    """What the four actions are called in this world (each keeps its role in the mechanics)."""

    inspect: str = Field(default="inspect", pattern=IDENT, description=(
        "reads the full record of one task, site or staff member (confirms estimates; notes and rules)"))
    assign: str = Field(default="book", pattern=IDENT, description=(
        "books (or moves) a task into a site, with a staff member, at a start time"))
    unassign: str = Field(default="unbook", pattern=IDENT, description="removes a task's booking")
    submit: str = Field(default="submit_plan", pattern=IDENT, description="hands in the plan (ends the episode)")


_Texts = dict(min_length=1, max_length=8)


class SchedulingDomain(Domain):
    KEYS = {"capabilities": "id", "skills": "id", "sites": "id", "staff": "id", "task_types": "id"}
    PIECES_ASIDE = True  # beside the example, a small model copies its docks (Domain.PIECES_ASIDE)
    RULES = (
        Rule("rule_kinds", ("hidden_rules",),
             "The hidden rules are of at least two kinds.", "The hardest tier draws two at once."),
        Rule("priority_levels", ("task_types",),
             "The kinds of task have at least two priority levels, so that choosing what to defer matters."),
        Rule("two_per_day", ("task_types", "clock"),
             "Every kind of task's max_minutes is at most half of normal hours (day_start to regular_end), so that "
             "one site can hold two of them in a day."),
    )
    REFERENCES = {"sites.capabilities": Reference("capabilities.id"), "staff.skills": Reference("skills.id"),
                  "task_types.needs": Reference("capabilities.id"), "task_types.skill": Reference("skills.id"),
                  "emergencies.task_type": Reference("task_types.id"),
                  "hidden_rules.task_types": Reference("task_types.id"),
                  "hidden_rules.targets": Reference("sites.id", by_kind=(
                      ("site_excludes_type", "sites.id"), ("site_ends_by", "sites.id"),
                      ("staff_excludes_type", "staff.id"), ("staff_ends_by", "staff.id")))}
    PLACEHOLDERS = (
        Placeholders("sites[].note"), Placeholders("staff[].note"),
        Placeholders("emergencies[].text", ("client", "time"), ("client", "time")),
        *(Placeholders("hidden_rules[].text", allowed, required, kind=kind,
                       says=f"a {kind} rule must name " + " and ".join("{" + n + "}" for n in required))
          for kind, (allowed, required) in RULE_PLACEHOLDERS.items()),
        *(Placeholders(f"{field}[]", names, names) for field, names in LINE_PLACEHOLDERS.items()),
    )
    agent_role: str = Field(min_length=3, max_length=80, description=(
        "Who the agent is, e.g. 'the theatre scheduling coordinator', 'the dock scheduler on the night shift'."))
    plan_noun: str = Field(min_length=3, max_length=80, description=(
        "What the day's plan is called, e.g. 'tomorrow's elective operating list', 'the inbound dock schedule'."))
    site_noun: str = Field(min_length=3, max_length=30, description="One site, singular: 'operating room'.")
    staff_noun: str = Field(min_length=3, max_length=30, description="One staff member, singular: 'surgeon'.")
    task_noun: str = Field(min_length=3, max_length=30, description="One task, singular: 'case', 'delivery'.")
    client_noun: str = Field(min_length=3, max_length=30, description=(
        "Who a task is for, singular: 'patient', 'carrier'."))
    task_id_prefix: str = Field(min_length=2, max_length=12, pattern=IDENT, description=(
        "Prefix of the ids the engine gives each day's tasks ('case' -> case_1, case_2, ...)."))
    clock: Clock
    turnaround_minutes: int = Field(ge=0, le=240, description=(
        "Minutes a site needs between two tasks (cleaning, changeover), a multiple of slot_minutes; 0 if none."))
    turnaround_label: str = Field(min_length=3, max_length=80, description=(
        "What that gap is called, e.g. 'turnover cleaning and set-up', 'door changeover'."))
    capabilities: list[Vocab] = Field(min_length=1, max_length=12, description=(
        "What sites can offer (equipment, certification, fittings). Each is needed by some task kind."))
    skills: list[Vocab] = Field(min_length=1, max_length=12, description=(
        "What staff can hold (specialty, licence). Each needed skill must be held by at least two staff."))
    sites: list[Site] = Field(min_length=1, max_length=12, description=(
        "Every site the plan may use; a day opens two or three of them. At least four, with overlapping "
        "capabilities so that most task kinds fit in two or more sites."))
    staff: list[Staff] = Field(min_length=1, max_length=16, description=(
        "Every staff member who might work that day; the engine puts three to five on duty. At least six."))
    task_types: list[TaskType] = Field(min_length=1, max_length=16, description=(
        "The kinds of task requested, with realistic durations and priorities (at least two priority levels)."))
    clients: list[str] = Field(min_length=1, max_length=40, description=(
        "Names of the people or firms tasks are for, all different, e.g. 'Mrs Adaeze Nwosu (67)', 'FreshWay "
        "Foods'. At least fourteen (a day needs up to eleven different ones)."))
    emergencies: list[Emergency] = Field(min_length=1, max_length=8, description=(
        "Urgent tasks that arrive and must be fitted in (one may open the day, one may arrive mid-plan)."))
    hidden_rules: list[HiddenRule] = Field(min_length=1, max_length=12, description=(
        "Constraints the agent is not told up front on the hardest tiers: it finds them when a booking is "
        "rejected or when it inspects the site, staff member or task concerned. At least three, of two kinds."))
    late_start: list[str] = Field(**_Texts, description=(
        "Why a staff member starts late, with {staff} and {time}, e.g. '{staff} runs the outpatient clinic "
        "until {time}.'"))
    early_finish: list[str] = Field(**_Texts, description=(
        "Why a staff member leaves early, with {staff} and {time}, e.g. '{staff} leaves at {time} for the "
        "regional audit meeting.'"))
    prefers_staff: list[str] = Field(**_Texts, description=(
        "A soft wish for a given staff member, with {client} and {staff}, e.g. '{client} was consented by "
        "{staff} in clinic and asked that {staff} operate.'"))
    prefers_before: list[str] = Field(**_Texts, description=(
        "A soft wish to start early, with {client} and {time}, e.g. '{client} is diabetic and fasting: start "
        "by {time} if possible.'"))
    routine_notes: list[str] = Field(min_length=1, max_length=12, description=(
        "Harmless notes on real requests, with {client}, e.g. '{client}: latex allergy, latex-free tray "
        "needed.' At least four: every real task carries one, so a note alone never marks a bad request."))
    invalid_requests: list[str] = Field(min_length=1, max_length=10, description=(
        "Why a request on the list must NOT be booked today, with {client}, written like a routine note, e.g. "
        "'{client}: consent form unsigned and pre-op assessment outstanding, not fit to list.' At least three."))
    site_blocked: list[str] = Field(min_length=1, max_length=6, description=(
        "Why a site is unavailable all day, with {site}, e.g. '{site} is closed for the ventilation service.'"))
    staff_absent: list[str] = Field(min_length=1, max_length=6, description=(
        "Why a staff member is absent, with {staff}, e.g. '{staff} called in sick at 06:10.' Also used when "
        "someone drops out mid-plan."))
    notices: list[str] = Field(min_length=1, max_length=10, description=(
        "Harmless bulletin items of the day that forbid nothing, e.g. 'Recovery has eight staffed beds "
        "tomorrow.' At least three."))
    tools: ToolNames = Field(default_factory=ToolNames)

    # ---- facts the engine uses -----------------------------------------------------------------------------
    def slots(self, clock_text: str) -> int:
        """Slots from the day's start to `clock_text` (rounded down)."""
        return (minutes(clock_text) - minutes(self.clock.day_start)) // self.clock.slot_minutes

    def clock_at(self, slot: int) -> str:
        total = minutes(self.clock.day_start) + slot * self.clock.slot_minutes
        return f"{total // 60:02d}:{total % 60:02d}"

    @property
    def regular_slots(self) -> int:
        return self.slots(self.clock.regular_end)

    @property
    def day_slots(self) -> int:
        return self.slots(self.clock.overtime_end)

    def start_times(self) -> list[str]:
        return [self.clock_at(s) for s in range(self.day_slots)]

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict) -> dict:
        """Where fewer than three kinds of task are optional, the last mandatory kinds become optional until three
        are (or all but the first, in a shorter list): the schema asks most kinds to be optional, but a small
        model marks them all mandatory, and then no day forces a choice of what to defer. Which kinds
        stay mandatory is the draft's: its first ones.

        A kind's durations are rounded up to the clock's grid (a draft may write 15-30 minutes on a 30-minute
        grid), and an arrival window that closes before the day starts is dropped: the task is ready when the day
        begins, which is what a window of 00:00-00:30 says, in a form the schedule can hold. A client named again
        is listed once (a small model repeats one: 'Baltic Haulage')."""
        if isinstance(data.get("clients"), list):
            clients = data["clients"]
            data = {**data, "clients": [c for i, c in enumerate(clients) if c not in clients[:i]]}
        kinds = data.get("task_types")
        if not isinstance(kinds, list) or not all(isinstance(k, dict) for k in kinds):
            return data
        clock = data.get("clock") if isinstance(data.get("clock"), dict) else {}
        slot, day_start = clock.get("slot_minutes"), _minutes(clock.get("day_start"))
        kinds = [_on_the_grid(dict(k), slot, day_start) for k in kinds]
        optional = sum(k.get("mandatory") is not True for k in kinds)
        for kind in reversed(kinds[1:]):
            if optional >= MIN_OPTIONAL:
                break
            if kind.get("mandatory") is True:
                kind["mandatory"], optional = False, optional + 1
        return {**data, "task_types": kinds}

    # ---- semantic checks -----------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += self._clock_problems()
        if p:
            return p  # every other check reads the clock
        caps = [c.id for c in self.capabilities]
        skills = [s.id for s in self.skills]
        types = [t.id for t in self.task_types]
        p += duplicates(self.capabilities, "id", "domain.capabilities")
        p += duplicates(self.skills, "id", "domain.skills")
        p += duplicates(self.sites, "id", "domain.sites")
        p += duplicates(self.staff, "id", "domain.staff")
        p += duplicates(self.task_types, "id", "domain.task_types")
        p += duplicate_values(self.clients, "domain.clients")
        p += self._id_clashes()
        for i, site in enumerate(self.sites):
            p += unknown_refs(site.capabilities, caps, f"domain.sites[{i}].capabilities", "capability")
        for i, person in enumerate(self.staff):
            at = f"domain.staff[{i}]"
            p += unknown_refs(person.skills, skills, f"{at}.skills", "skill")
            start = self.slot_of(person.available_from, 0)
            end = self.slot_of(person.available_until, self.day_slots)
            if start is None or end is None or not 0 <= start < end <= self.day_slots:
                p.append(DomainProblem(path=f"{at}.available_from", message=(
                    "available_from/available_until must be on the slot grid, inside the day and in order")))
            elif end - start < 4:
                p.append(DomainProblem(path=f"{at}.available_until", message="leaves fewer than four slots of work"))
        p += self._task_type_problems(caps, skills)
        p += self._emergency_problems(types)
        p += self._rule_problems(types)
        p += self._text_field_problems()
        p += self._variety_problems()
        p += names_differ(self.tools.model_dump(), "domain.tools", "tool names")
        return p

    def slot_of(self, clock_text: str | None, default: int) -> int | None:
        """The slot a clock time falls on (None when it is off the grid or before the day)."""
        if clock_text is None:
            return default
        offset = minutes(clock_text) - minutes(self.clock.day_start)
        if offset < 0 or offset % self.clock.slot_minutes:
            return None
        return offset // self.clock.slot_minutes

    def _clock_problems(self) -> list[DomainProblem]:
        c, p = self.clock, []
        start, regular, end = minutes(c.day_start), minutes(c.regular_end), minutes(c.overtime_end)
        if not start < regular <= end:
            return [DomainProblem(path="domain.clock", message=(
                "need day_start < regular_end <= overtime_end on the same day (no shift across midnight)"))]
        for name, value in (("regular_end", regular), ("overtime_end", end)):
            if (value - start) % c.slot_minutes:
                p.append(DomainProblem(path=f"domain.clock.{name}", message=(
                    f"must fall on the {c.slot_minutes}-minute grid that starts at {c.day_start}")))
        if (end - start) // c.slot_minutes > MAX_SLOTS:
            p.append(DomainProblem(path="domain.clock.slot_minutes", message=(
                f"the day has {(end - start) // c.slot_minutes} slots; at most {MAX_SLOTS} (use longer slots)")))
        if (regular - start) // c.slot_minutes < 8:
            p.append(DomainProblem(path="domain.clock.regular_end", message=(
                "normal hours must hold at least eight slots (room for several tasks per site)")))
        if self.turnaround_minutes % c.slot_minutes:
            p.append(DomainProblem(path="domain.turnaround_minutes",
                                   message=f"must be a multiple of clock.slot_minutes ({c.slot_minutes})"))
        return p

    def _id_clashes(self) -> list[DomainProblem]:
        """Sites, staff and the engine's task ids share one namespace (the agent inspects any of them)."""
        out = []
        site_ids = {s.id: i for i, s in enumerate(self.sites)}
        task_id = re.compile(rf"^{re.escape(self.task_id_prefix)}_[0-9]+$")
        for i, person in enumerate(self.staff):
            if person.id in site_ids:
                out.append(DomainProblem(path=f"domain.staff[{i}].id", message=(
                    f"{person.id!r} is also domain.sites[{site_ids[person.id]}].id: sites and staff need "
                    "different ids")))
        for field, items in (("sites", self.sites), ("staff", self.staff)):
            for i, item in enumerate(items):
                if task_id.match(item.id):
                    out.append(DomainProblem(path=f"domain.{field}[{i}].id", message=(
                        f"{item.id!r} looks like a task id ({self.task_id_prefix}_N): choose another")))
        return out

    def _task_type_problems(self, caps: list[str], skills: list[str]) -> list[DomainProblem]:
        p, slot = [], self.clock.slot_minutes
        for i, kind in enumerate(self.task_types):
            at = f"domain.task_types[{i}]"
            if kind.needs not in caps:
                p += unknown_refs([kind.needs], caps, f"{at}.needs", "capability")
            elif not any(kind.needs in s.capabilities for s in self.sites):
                p.append(DomainProblem(path=f"{at}.needs", message=f"no site offers {kind.needs!r}"))
            if kind.skill not in skills:
                p += unknown_refs([kind.skill], skills, f"{at}.skill", "skill")
            elif sum(kind.skill in s.skills for s in self.staff) < 2:
                p.append(DomainProblem(path=f"{at}.skill", message=(
                    f"fewer than two staff hold {kind.skill!r}: an absence would make this kind impossible")))
            for name in ("min_minutes", "max_minutes"):
                if getattr(kind, name) % slot:
                    p.append(DomainProblem(path=f"{at}.{name}", message=f"must be a multiple of {slot} minutes"))
            if kind.min_minutes > kind.max_minutes:
                p.append(DomainProblem(path=f"{at}.max_minutes", message="must be at least min_minutes"))
            if kind.max_minutes > self.regular_slots * slot // 2:
                p.append(self.rule("two_per_day").broken(f"{at}.max_minutes", (
                    f"{kind.max_minutes} minutes against {self.regular_slots * slot} of normal hours")))
            if kind.arrival:
                window = [self.slot_of(t, 0) for t in kind.arrival]
                if len(kind.arrival) != 2 or None in window or window[0] > window[1] or \
                        window[1] + kind.min_minutes // slot > self.regular_slots:
                    p.append(DomainProblem(path=f"{at}.arrival", message=(
                        "must be two grid times in order, early enough to finish within normal hours")))
        return p

    def _emergency_problems(self, types: list[str]) -> list[DomainProblem]:
        p = []
        for i, emergency in enumerate(self.emergencies):
            at = f"domain.emergencies[{i}]"
            p += unknown_refs([emergency.task_type], types, f"{at}.task_type", "task kind")
            if emergency.start_within_minutes >= self.regular_slots * self.clock.slot_minutes:
                p.append(DomainProblem(path=f"{at}.start_within_minutes", message="must fall within normal hours"))
        return p

    def _rule_problems(self, types: list[str]) -> list[DomainProblem]:
        p = []
        site_ids, staff_ids = [s.id for s in self.sites], [s.id for s in self.staff]
        for i, rule in enumerate(self.hidden_rules):
            at = f"domain.hidden_rules[{i}]"
            p += unknown_refs(rule.task_types, types, f"{at}.task_types", "task kind")
            if rule.kind == "shared_equipment" and not rule.task_types:
                p.append(DomainProblem(path=f"{at}.task_types", message=(
                    "a shared_equipment rule must list the task kinds that share the item")))
            if rule.targets:
                if rule.kind == "shared_equipment":
                    p.append(DomainProblem(path=f"{at}.targets", message="shared_equipment names no site or staff"))
                else:
                    known = site_ids if rule.kind.startswith("site") else staff_ids
                    p += unknown_refs(rule.targets, known, f"{at}.targets",
                                      "site" if rule.kind.startswith("site") else "staff member")
        kinds = {r.kind for r in self.hidden_rules}
        if len(kinds) < 2:
            p.append(self.rule("rule_kinds").broken("domain.hidden_rules", f"only {sorted(kinds)}"))
        p += duplicate_values([r.text for r in self.hidden_rules], "domain.hidden_rules.text")
        return p

    def _text_field_problems(self) -> list[DomainProblem]:
        return [p for field in LINE_PLACEHOLDERS for p in duplicate_values(getattr(self, field), f"domain.{field}")]

    def _variety_problems(self) -> list[DomainProblem]:
        """Minimum sizes, each for a mechanic that needs it (schema bounds only cap sizes)."""
        p = []
        p += too_few(self.sites, MIN_SITES, "domain.sites", f"sites: a day opens up to {MAX_OPEN_SITES}, and ECI 3-5 "
                     "list one more that looks open but is blocked")
        p += too_few(self.staff, MIN_STAFF, "domain.staff", "staff: up to five are on duty, one may be absent "
                     "from the start, and ECI 3-5 list one who looks available but is not")
        p += too_few(self.task_types, 4, "domain.task_types", "task kinds, so that seeds vary the day's list")
        p += too_few(self.clients, MIN_CLIENTS, "domain.clients", "distinct names: a day needs up to eleven (six "
                     "requests, three invalid ones at ECI 5, two emergencies)")
        p += too_few(self.emergencies, 2, "domain.emergencies", "emergencies: one may open the day and another "
                     "arrive mid-plan at ECI 5")
        p += too_few(self.hidden_rules, 3, "domain.hidden_rules", "hidden rules: ECI 4 draws one and ECI 5 two, "
                     "and seeds must vary which")
        p += too_few(self.invalid_requests, 3, "domain.invalid_requests", "reasons: ECI 5 lists three invalid "
                     "requests, each with its own")
        p += too_few(self.routine_notes, 4, "domain.routine_notes", "notes: real requests carry them too, so a "
                     "note alone never marks an invalid request")
        p += too_few(self.site_blocked, 2, "domain.site_blocked", "reasons a site is unavailable")
        p += too_few(self.staff_absent, 2, "domain.staff_absent", "reasons a staff member is absent (one at the "
                     "start, one mid-plan)")
        p += too_few(self.notices, 3, "domain.notices", "harmless notices, mixed with the real ones at ECI 3-5")
        p += too_few(self.capabilities, 2, "domain.capabilities", "capabilities, so that sites differ")
        p += too_few(self.skills, 2, "domain.skills", "skills, so that staff differ")
        priorities = {t.priority for t in self.task_types}
        if len(priorities) < 2:
            p.append(self.rule("priority_levels").broken("domain.task_types", f"every kind at {sorted(priorities)}"))
        optional = [t for t in self.task_types if not t.mandatory]
        p += too_few(optional, MIN_OPTIONAL, "domain.task_types", "optional kinds (mandatory: false), so that a "
                     "full day forces a choice of what to defer")
        hostable = [t for t in self.task_types if sum(t.needs in s.capabilities for s in self.sites) >= 2]
        p += too_few(hostable, 2, "domain.task_types", "kinds whose capability is offered by two or more sites, "
                     "so that a blocked site or an equipment rule leaves an alternative")
        p += too_few(list(dict.fromkeys(e.task_type for e in self.emergencies)), 1, "domain.emergencies",
                     "task kinds for emergencies")
        return p


def _minutes(clock: Any) -> int | None:
    """`minutes` of a draft's value, None where it is no clock time."""
    return minutes(clock) if isinstance(clock, str) and re.fullmatch(CLOCK, clock) else None


def _on_the_grid(kind: dict, slot: Any, day_start: int | None) -> dict:
    """A task kind's durations rounded up to the grid, and its arrival window dropped where it closes before the
    day starts (see `SchedulingDomain.tidy`)."""
    if isinstance(slot, int) and slot > 0:
        for name in ("min_minutes", "max_minutes"):
            value = kind.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0 and value % slot:
                kind[name] = -(-value // slot) * slot
    arrival = kind.get("arrival")
    if day_start is not None and isinstance(arrival, list) and len(arrival) == 2:
        closes = _minutes(arrival[1])
        if closes is not None and closes < day_start:
            kind["arrival"] = []
    return kind
