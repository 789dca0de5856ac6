"""Action and observation of the scheduling family; the action's choices come from the domain."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openadapt.families.scheduling.domain import SchedulingDomain
from openadapt.kit.models import AgentObservation, ToolAction, with_choices

MAX_TASK_IDS = 12  # task ids a day can use (requests, invalid requests, emergencies)


class SchedulingAction(ToolAction):
    """Inspect a record, book/move or unbook a task (each costs a step), or submit the plan (ends the episode)."""

    task: str | None = Field(default=None, description="the task to inspect, book, move or unbook")
    site: str | None = Field(default=None, description="book: the site; inspect: a site to read")
    staff: str | None = Field(default=None, description="book: the staff member; inspect: a staff member to read")
    start: str | None = Field(default=None, description="book: the start time, HH:MM on the day's grid")


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskView(_View):
    id: str = Field(description="task id, as typed in actions")
    client: str = Field(description="who it is for")
    kind: str = Field(description="task kind id")
    label: str = Field(description="task kind in words")
    needs: str = Field(description="capability a site must offer")
    skill: str = Field(description="skill the staff member must hold")
    duration: str = Field(description="duration as listed: confirmed, an estimate, or not confirmed")
    minutes: int | None = Field(default=None, description="listed duration in minutes (None when not confirmed)")
    confirmed: bool = Field(description="whether the duration is confirmed (bookings need a confirmed one)")
    priority: int = Field(description="1 (can wait) to 5 (urgent)")
    mandatory: bool = Field(description="must be on the plan")
    ready_from: str | None = Field(default=None, description="cannot start before this time")
    start_by: str | None = Field(default=None, description="must start by this time (hard)")
    prefers_staff: str | None = Field(default=None, description="soft wish: this staff member")
    prefers_before: str | None = Field(default=None, description="soft wish: start by this time")
    notes: list[str] = Field(default_factory=list, description="notes on the request")


class SiteView(_View):
    id: str
    label: str
    capabilities: list[str]
    status: str = Field(description="'open', or why it cannot be used")
    notes: list[str] = Field(default_factory=list, description="what inspecting it showed")


class StaffView(_View):
    id: str
    name: str
    skills: list[str]
    status: str = Field(description="'on duty', or why they cannot work")
    hours: str = Field(description="working hours as listed: confirmed, an estimate, or not confirmed")
    available_from: str | None = Field(default=None, description="listed start of their hours")
    available_until: str | None = Field(default=None, description="listed end of their hours")
    confirmed: bool = Field(description="whether the hours are confirmed (bookings need confirmed hours)")
    notes: list[str] = Field(default_factory=list, description="notes on their day")


class BookingView(_View):
    task: str
    site: str
    staff: str
    start: str
    end: str


class SchedulingObservation(AgentObservation):
    """The day's requests, resources and bulletin, the plan so far, and what inspections and rejections showed."""

    tasks: list[TaskView] = Field(default_factory=list, description="the day's requests")
    sites: list[SiteView] = Field(default_factory=list, description="sites listed for the day")
    staff: list[StaffView] = Field(default_factory=list, description="staff listed for the day")
    schedule: list[BookingView] = Field(default_factory=list, description="the plan so far")
    notices: list[str] = Field(default_factory=list, description="the day's bulletin")
    notes: list[str] = Field(default_factory=list, description="rules and facts learnt from responses")


def task_ids(domain: SchedulingDomain) -> list[str]:
    return [f"{domain.task_id_prefix}_{i}" for i in range(1, MAX_TASK_IDS + 1)]


def models(domain: SchedulingDomain) -> tuple[type[SchedulingAction], type[SchedulingObservation]]:
    action = with_choices(SchedulingAction, "SchedulingAction", {
        "tool": list(domain.tools.model_dump().values()),
        "task": task_ids(domain),
        "site": [s.id for s in domain.sites],
        "staff": [s.id for s in domain.staff],
        "start": domain.start_times(),
    })
    return action, SchedulingObservation
