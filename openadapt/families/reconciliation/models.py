"""Action and observation of the reconciliation family; the action's choices come from the domain."""

from __future__ import annotations

from pydantic import Field

from openadapt.families.reconciliation.domain import ReconciliationDomain
from openadapt.kit.models import AgentObservation, ToolAction, with_choices


class ReconciliationAction(ToolAction):
    """List a source, open a record or read a party's terms (each costs a step); flag or withdraw a finding;
    or submit the findings (ends the episode)."""

    source: str | None = Field(default=None, description="list: the source whose records to list")
    record: str | None = Field(default=None, description="inspect, flag, withdraw: a record id shown in a listing")
    party: str | None = Field(default=None, description="terms: the party whose terms to read")
    discrepancy: str | None = Field(default=None, description="flag: the discrepancy type")
    resolution: str | None = Field(default=None, description="flag: how to resolve it")


class ReconciliationObservation(AgentObservation):
    """The working papers so far: everything the agent has been shown in this episode, and its findings."""

    briefing: str = Field(default="", description="the batch and period to reconcile")
    sources: list[str] = Field(default_factory=list, description=(
        "each source's control figures (record count, total) and whether it is listed"))
    records: list[str] = Field(default_factory=list, description="record lines of the listed sources")
    details: list[str] = Field(default_factory=list, description="opened records: every column and the memo")
    terms: list[str] = Field(default_factory=list, description="party terms read so far")
    findings: list[str] = Field(default_factory=list, description="the findings recorded so far")


def all_resolutions(domain: ReconciliationDomain) -> list[str]:
    return [r.id for r in domain.resolutions]


def models(domain: ReconciliationDomain) -> tuple[type[ReconciliationAction], type[ReconciliationObservation]]:
    action = with_choices(ReconciliationAction, "ReconciliationAction", {
        "tool": list(domain.tools.model_dump().values()),
        "source": [s.name for s in domain.sources],
        "party": [p.id for p in domain.parties],
        "discrepancy": [d.id for d in domain.discrepancies],
        "resolution": all_resolutions(domain),
    })
    return action, ReconciliationObservation
