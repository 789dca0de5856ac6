"""The negotiation family: reach a deal over several terms with a simulated counterpart whose priorities,
bottom line, concession style, patience and hard limits are hidden, over rounds of offers, counter-offers and
questions (buying from a supplier by email, a salary offer, a freight rate with a carrier, a lease, a licence)."""

import json

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.negotiation.domain import NegotiationDomain, issue_line
from openadapt.families.negotiation.engine import NegotiationEnvironment
from openadapt.families.negotiation.models import models
from openadapt.families.negotiation.policies import FaceValueHeuristic, NegotiationOracle


def prompt_context(domain: NegotiationDomain) -> dict:
    example = {"move": domain.moves.offer}
    for issue in domain.issues:
        middle = issue.low + round((issue.high - issue.low) / issue.step / 2) * issue.step
        example[issue.id] = round(middle, 6)
    example["message"] = "Thanks for the quote. Here is what would work for us."
    return {
        "domain": domain, "moves": domain.moves, "issue_ids": [i.id for i in domain.issues],
        "issue_lines": [issue_line(i) for i in domain.issues],
        "questions": [domain.questions.priorities, domain.questions.constraints, domain.questions.timeline],
        "example": json.dumps(example),
    }


FAMILY = register_family(Family(
    name="negotiation",
    version=1,
    summary="negotiate a deal over several terms with a counterpart whose priorities, bottom line and patience "
            "are hidden",
    fits=("bargaining over terms with another party by message: buying from a supplier (price, delivery, payment "
          "terms, warranty), a salary or job offer, a freight or carrier rate, a lease, a licence or a service "
          "contract. The agent trades terms the sides weigh differently, probes with questions, sees through "
          "bluffs and walks away when no deal fits its limits. Not for fixed-price ordering or for choosing "
          "among catalogued offers without a counterpart"),
    brief=("name the terms that get negotiated in this deal, what each side usually wants on each, and the"
           " concessions usually traded"),
    domain=NegotiationDomain,
    environment=NegotiationEnvironment,
    models=models,
    oracle=NegotiationOracle,
    heuristic=FaceValueHeuristic,
    step_budget={1: 10, 2: 10, 3: 10, 4: 10, 5: 6},
    tier_changes={
        1: "clean briefing (targets from sound market intelligence); the counterpart's tells are true and it "
           "calls an offer final only at its real floor",
        2: "+ targets blurred or missing; the counterpart's priorities stray further from its type; its "
           "counter-offers sometimes leave a term out (a left-out term stays at its list value) and its tells "
           "go missing or are cut short",
        3: "+ bluffed 'final' offers before its floor, anchoring claims, and (in 60% of episodes) a red-herring "
           "term it claims to care about but does not (held at its list value in its counters); it holds firm "
           "longer",
        4: "+ in 70% of episodes a hard limit on one term, told only when asked whether anything is fixed "
           "(offers across it get a hint and a counter within it; crossing it again costs patience); a quarter "
           "of those leave no deal within your limits, so walking away is right",
        5: "+ more bluffs and anchors, always a red herring, a hard limit in 90% of episodes (40% of them "
           "leave no deal), a tougher counterpart that walks one message after its floor, and a budget of 6",
    },
    prompt_context=prompt_context,
))
