"""Action and observation of the enterprise-workflow environment."""

from typing import Any, Literal

from pydantic import Field

from openadapt.kit import AgentAction, AgentObservation

ActionName = Literal["assign_task", "escalate", "defer", "close_task", "reply_message", "re_route", "lookup_policy",
                     "request_approval"]


class HospitalAdmissionsWorkflowAction(AgentAction):
    """One of the eight desk actions. Every field has a default: fill the ones the action needs."""

    action: ActionName | None = Field(default=None, description="what to do")
    task_id: str | None = Field(default=None, description="the task acted on (all but reply_message, lookup_policy)")
    member: str | None = Field(default=None, description="assign_task, re_route: the colleague who takes the task")
    message_id: str | None = Field(default=None, description="reply_message: the message answered")
    policy_id: str | None = Field(default=None, description="lookup_policy: the policy to read")
    field: str | None = Field(default=None, description="close_task, request_approval: the task's amount field, "
                              "by the name the task record shows now")
    value: float | None = Field(default=None, description="close_task, request_approval: that field's value")
    reasoning: str = Field(default="", description="a sentence on what you observe and why this action")


class HospitalAdmissionsWorkflowObservation(AgentObservation):
    """The desk as the agent sees it now (hidden: the routes policy requires, which senders are phishing, the
    statuses and skills withheld on noisy tiers, what chaos will do next)."""

    scenario: str = Field(default="", description="sales_pipeline, hr_escalation, it_incident, customer_refund or "
                          "supply_chain")
    scope: str = Field(default="", description="the agent's authority: L1 (may not escalate or close) or L2")
    company_domain: str = Field(default="", description="the e-mail domain of everyone in the company")
    tasks: list[dict[str, Any]] = Field(default_factory=list, description="the queue: id, title, category, skill, "
                                        "requester, the amount field, status, owner, sla (steps left), blocker")
    inbox: list[dict[str, Any]] = Field(default_factory=list, description="messages: id, from, subject, task, "
                                        "replied")
    team: list[dict[str, Any]] = Field(default_factory=list, description="colleagues: name, skill, status")
    policies: list[str] = Field(default_factory=list, description="the desk's policies (details may need "
                                "lookup_policy)")
