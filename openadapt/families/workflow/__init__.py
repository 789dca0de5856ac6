"""The workflow family: work an enterprise desk's queue of tasks (cases, tickets, requests) with SLAs, an inbox and
a team, inside a junior or senior authority scope watched by an oversight referee, through silent schema drift
and chaos (sales and HR desks, IT service desks and ticket routing, refunds, supply chain, admissions desks)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.workflow.domain import WorkflowDomain
from openadapt.families.workflow.engine import DRIFT_STEP, REFEREE_PENALTY, WorkflowEnvironment
from openadapt.families.workflow.models import models
from openadapt.families.workflow.policies import QueueHeuristic, WorkflowOracle
from openadapt.families.workflow.rules import LOOKUP_COST
from openadapt.kit.eci import TIER_MEANINGS


def prompt_context(domain: WorkflowDomain) -> dict:
    names = domain.actions
    permissions = domain.permissions()
    return {
        "domain": domain,
        "names": names,
        "roles": domain.roles,
        "junior_actions": [a for a in names.model_dump().values() if a in permissions[domain.roles.junior]],
        "senior_only": [getattr(names, role) for role in domain.roles.senior_only],
        "junior_may_close": domain.junior_may("close"),
        "junior_may_escalate": domain.junior_may("escalate"),
        "scenarios": [s.name for s in domain.scenarios],
        "routing": {s.name: {k.name: list(k.categories) for k in s.skills} for s in domain.scenarios},
        "tiers": TIER_MEANINGS,
        "drift_step": DRIFT_STEP,
        "referee_penalty": REFEREE_PENALTY,
        "lookup_cost": LOOKUP_COST,
    }


FAMILY = register_family(Family(
    name="workflow",
    version=1,
    summary=("work a desk's queue of tasks with SLAs, an inbox and a team under junior/senior authority and an "
             "oversight referee, through schema drift and chaos"),
    fits=("operations desks that route and resolve a queue of cases: sales or HR desks, IT service desk ticket "
          "routing, customer refunds, supply-chain or admissions desks; work is assigned to the right skill, "
          "escalated, deferred or closed as policy says, with sign-off above a threshold, messages to answer and "
          "phishing to ignore. Not for finding a fault's root cause (diagnosis) or matching records (reconciliation)"),
    brief=("name the kinds of requests that reach this desk, the teams that handle them, their deadlines,"
           " and what needs a senior's sign-off"),
    domain=WorkflowDomain,
    environment=WorkflowEnvironment,
    models=models,
    oracle=WorkflowOracle,
    heuristic=QueueHeuristic,
    step_budget={1: 16, 2: 18, 3: 22, 4: 24, 5: 22},
    reward_range=(-1.0, 1.0),
    tier_changes={
        1: "3 tasks, every policy in view, no drift, no chaos",
        2: "+ the amount field renamed at step 3, chaos (dropout, priority spike, inbox noise), a third colleague "
           "per skill; 30% of task skills and colleague statuses withheld; truncated subjects",
        3: "+ a 4th task; urgent-looking noise and phishing from look-alike domains that names real tasks; one task "
           "blocked on an absent colleague",
        4: "+ policy details withheld until looked up (hidden constraints), one more escalated category",
        5: "+ a 5th task, two blocked tasks, more phishing and noise, 40% withheld fields, less SLA slack; budget 22",
    },
    prompt_context=prompt_context,
))
