"""Action and observation of the workflow family; the action's names come from the domain."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openadapt.families.workflow.domain import WorkflowDomain
from openadapt.kit.models import AgentAction, AgentObservation, with_choices


class WorkflowAction(AgentAction):
    """One of the eight desk actions. Every field has a default: fill the ones the action needs."""

    action: str | None = Field(default=None, description="what to do")
    task_id: str | None = Field(default=None, description="the task acted on (all but replying and policy lookups)")
    member: str | None = Field(default=None, description="assigning, re-routing: the colleague who takes the task")
    message_id: str | None = Field(default=None, description="replying: the message answered")
    policy_id: str | None = Field(default=None, description="policy lookup: the policy to read")
    field: str | None = Field(default=None, description="closing, sign-off: the task's amount field, by the name "
                              "the task record shows now")
    value: float | None = Field(default=None, description="closing, sign-off: that field's value")
    reasoning: str = Field(default="", description="a sentence on what you observe and why this action")


class WorkflowObservation(AgentObservation):
    """The desk as the agent sees it now (hidden: the routes policy requires, which senders are phishing, the
    statuses and skills withheld on noisy tiers, what chaos will do next)."""

    scenario: str = Field(default="", description="the line of work this episode's queue belongs to")
    scope: str = Field(default="", description="the agent's authority scope (junior or senior role)")
    company_domain: str = Field(default="", description="the e-mail domain of everyone in the company")
    tasks: list[dict[str, Any]] = Field(default_factory=list, description="the queue: id, title, category, skill, "
                                        "requester, the amount field, status, owner, sla (steps left), blocker")
    inbox: list[dict[str, Any]] = Field(default_factory=list, description="messages: id, from, subject, task, "
                                        "replied")
    team: list[dict[str, Any]] = Field(default_factory=list, description="colleagues: name, skill, status")
    policies: list[str] = Field(default_factory=list, description="the desk's policies (details may need a lookup)")


def models(domain: WorkflowDomain) -> tuple[type[WorkflowAction], type[WorkflowObservation]]:
    action = with_choices(WorkflowAction, "WorkflowAction", {"action": list(domain.actions.model_dump().values())})
    return action, WorkflowObservation
