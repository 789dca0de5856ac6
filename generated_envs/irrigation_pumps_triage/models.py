"""Action and observation of the incident-triage environment."""

from typing import Literal

from pydantic import Field

from openadapt.kit import AgentAction, AgentObservation

try:
    from .server.catalogue import MITIGATIONS, ROOT_CAUSES
except ImportError:  # loaded as a top-level module by `uvicorn server.app:app`
    from server.catalogue import MITIGATIONS, ROOT_CAUSES

Tool = Literal["inspect_logs", "query_metrics", "check_dependencies", "read_runbook", "diagnose_incident"]
RootCause = Literal[ROOT_CAUSES]  # type: ignore[valid-type]
Mitigation = Literal[MITIGATIONS]  # type: ignore[valid-type]


class IrrigationPumpsTriageAction(AgentAction):
    """Investigate a service (costs a step) or submit the final diagnosis (ends the episode)."""

    tool: Tool | None = Field(default=None, description="what to do")
    service: str | None = Field(default=None, description="the service to investigate or diagnose")
    root_cause: RootCause | None = Field(default=None, description="diagnose_incident: the fault")
    mitigation: Mitigation | None = Field(default=None, description="diagnose_incident: the fix to apply")
    evidence: list[str] = Field(default_factory=list, description="diagnose_incident: observed lines that "
                                "support the diagnosis, quoted")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="diagnose_incident: P(correct)")
    reasoning: str = Field(default="", description="diagnose_incident: why, in a few sentences")


class IrrigationPumpsTriageObservation(AgentObservation):
    """The case file so far: everything the agent has been shown in this episode."""

    alert: str = Field(default="", description="the page that opened the incident")
    services: list[str] = Field(default_factory=list, description="services in the topology")
    logs: list[str] = Field(default_factory=list, description="log lines seen so far")
    metrics: list[str] = Field(default_factory=list, description="metric readings seen so far")
    dependencies: list[str] = Field(default_factory=list, description="dependency health reports seen so far")
    runbook: list[str] = Field(default_factory=list, description="runbook snippets and service notes")
