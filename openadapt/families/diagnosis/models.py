"""Action and observation of the diagnosis family; the action's choices come from the domain."""

from __future__ import annotations

from pydantic import Field

from openadapt.families.diagnosis.domain import DiagnosisDomain
from openadapt.kit.models import AgentObservation, ToolAction, with_choices


class DiagnosisAction(ToolAction):
    """Investigate a component (costs a step) or submit the final diagnosis (ends the episode)."""

    component: str | None = Field(default=None, description="the component to investigate or diagnose")
    fault: str | None = Field(default=None, description="diagnosis: the fault")
    fix: str | None = Field(default=None, description="diagnosis: the fix to apply")
    evidence: list[str] = Field(default_factory=list, max_length=20,
                                description="diagnosis: observed lines that support it, quoted")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="diagnosis: P(correct)")
    reasoning: str = Field(default="", max_length=4000, description="diagnosis: why, in a few sentences")


class DiagnosisObservation(AgentObservation):
    """The case file so far: everything the agent has been shown in this episode."""

    alert: str = Field(default="", description="the page that opened the episode")
    components: list[str] = Field(default_factory=list, description="the components of the system")
    logs: list[str] = Field(default_factory=list, description="log lines seen so far")
    metrics: list[str] = Field(default_factory=list, description="readings seen so far")
    dependencies: list[str] = Field(default_factory=list, description="dependency health reports seen so far")
    notes: list[str] = Field(default_factory=list, description="runbook snippets and component notes")


def all_fixes(domain: DiagnosisDomain) -> list[str]:
    return sorted({f.fix for f in domain.faults} | {f.constraint.fix for f in domain.faults})


def models(domain: DiagnosisDomain) -> tuple[type[DiagnosisAction], type[DiagnosisObservation]]:
    action = with_choices(DiagnosisAction, "DiagnosisAction", {
        "tool": list(domain.tools.model_dump().values()),
        "fault": [f.id for f in domain.faults],
        "fix": all_fixes(domain),
    })
    return action, DiagnosisObservation
