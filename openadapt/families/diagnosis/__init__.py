"""The diagnosis family: find the failing component of a system of dependent components, its fault and the
right fix, from alerts, logs, readings, dependency health and runbook notes (incident triage, equipment
faults, configuration debugging, CI failures, alert triage)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.diagnosis.domain import DiagnosisDomain
from openadapt.families.diagnosis.engine import DiagnosisEnvironment
from openadapt.families.diagnosis.models import models
from openadapt.families.diagnosis.policies import DiagnosisOracle, TelltaleHeuristic


def prompt_context(domain: DiagnosisDomain) -> dict:
    return {"domain": domain, "tools": domain.tools, "noun": domain.component_noun,
            "components": [c.name for c in domain.components]}


FAMILY = register_family(Family(
    name="diagnosis",
    version=1,
    summary="find which component of a system of dependent parts is failing, what fault it has and the fix",
    # 'degraded services', lest "find out why our payment service is degraded" go to negotiation (payment terms)
    fits=("incidents, outages and degraded services, equipment or machine faults, broken builds or pipelines, "
          "misconfigured deployments, security alerts to triage: anything where symptoms show up on components "
          "that depend on the faulty one and the agent investigates logs, readings and notes before naming cause "
          "and fix"),
    brief=("name the six most common root causes of trouble you find when you are called out, each with the"
           " first thing you check and what you see there"),
    domain=DiagnosisDomain,
    environment=DiagnosisEnvironment,
    models=models,
    oracle=DiagnosisOracle,
    heuristic=TelltaleHeuristic,
    step_budget={1: 10, 2: 10, 3: 10, 4: 10, 5: 5},
    tier_changes={
        1: "the alert fires on the faulty component; clean logs and readings",
        2: "+ readings and log lines blurred, cut short or missing; benign lines that share the faults' words",
        3: "+ the alert fires one hop downstream of the fault; resolved lines from other faults; extra runbook "
           "snippets",
        4: "+ a hidden constraint in the faulty component's notes changes the right fix in 60% of episodes",
        5: "+ up to two hops, more noise and distractors, and a budget of 5 steps",
    },
    prompt_context=prompt_context,
))
