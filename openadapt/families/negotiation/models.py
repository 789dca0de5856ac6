"""Action and observation of the negotiation family. The offer's terms are one field per issue of the domain
(bounded by the issue's range), and the move and question names come from the domain."""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model

from openadapt.families.negotiation.domain import NegotiationDomain
from openadapt.kit.models import AgentAction, AgentObservation, with_choices


class NegotiationAction(AgentAction):
    """One message to the counterpart: an offer (every term), a question, accepting its offer, or walking away."""

    move: str | None = Field(default=None, description="what to do")
    question: str | None = Field(default=None, description="ask: which question")
    message: str = Field(default="", max_length=4000, description="the text of your message (shown in the thread)")


class NegotiationObservation(AgentObservation):
    """The negotiation so far: the agent's briefing, the terms, and the thread of messages."""

    briefing: list[str] = Field(default_factory=list, description="your side's brief: priorities, limits, targets")
    issues: list[str] = Field(default_factory=list, description="the terms under negotiation: ranges, grid, units")
    priorities: dict[str, int] = Field(default_factory=dict, description="your side's weight of each term, percent")
    limits: dict[str, float] = Field(default_factory=dict, description="your walk-away limit on each term")
    targets: dict[str, float | None] = Field(default_factory=dict, description="your target on each term (null: "
                                             "none was set)")
    thread: list[str] = Field(default_factory=list, description="every message so far, oldest first")
    their_offer: dict[str, float | None] = Field(default_factory=dict, description=(
        "the counterpart's standing offer as its last message states it; null: not restated (its opening "
        "terms apply)"))
    your_offer: dict[str, float] = Field(default_factory=dict, description="your last offer")
    status: str = Field(default="open", description="open, agreed, you walked away, they walked away")


def models(domain: NegotiationDomain) -> tuple[type[NegotiationAction], type[NegotiationObservation]]:
    terms: dict[str, Any] = {
        issue.id: (float | None, Field(default=None, ge=issue.low, le=issue.high, description=(
            f"offer: {issue.label} ({issue.phrase.replace('{value}', 'X')}), {issue.low:g}..{issue.high:g} in steps "
            f"of {issue.step:g}")))
        for issue in domain.issues
    }
    with_terms = create_model("NegotiationAction", __base__=NegotiationAction, __module__=NegotiationAction.__module__,
                              **terms)
    action = with_choices(with_terms, "NegotiationAction", {
        "move": list(domain.moves.model_dump().values()),
        "question": [q["name"] for q in domain.questions.model_dump().values()],
    })
    return action, NegotiationObservation
