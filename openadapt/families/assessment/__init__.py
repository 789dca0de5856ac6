"""The assessment family: grade a document against a rubric, one level per criterion with the passage that
decides it and feedback, scored against the planted truth (lab reports, essays, vendor security questionnaires,
loan or grant applications, code reviews against a checklist)."""

from openadapt.families import register_family
from openadapt.families.assessment.domain import AssessmentDomain
from openadapt.families.assessment.engine import AssessmentEnvironment
from openadapt.families.assessment.models import MAX_QUOTES, models
from openadapt.families.assessment.policies import AssessmentOracle, CueHeuristic
from openadapt.families.base import Family


def prompt_context(domain: AssessmentDomain) -> dict:
    return {"domain": domain, "tools": domain.tools, "noun": domain.document_noun, "author": domain.author_noun,
            "scale": domain.scale, "criteria": domain.criteria, "sections": [s.id for s in domain.sections],
            "max_quotes": MAX_QUOTES}


FAMILY = register_family(Family(
    name="assessment",
    version=1,
    summary="grade a document against a rubric, per criterion, with the quote that decides each grade and feedback",
    fits=("grading or reviewing a document against a rubric, policy or checklist: student lab reports and essays, "
          "vendor security or compliance questionnaires, loan or grant applications, audit evidence, code or "
          "design reviews; the truth is a level per criterion set by planted strengths and defects. Not for "
          "matching records from several sources (reconciliation) or for finding a failing component (diagnosis)"),
    brief=("name the criteria you grade this kind of work on, each with what strong work and weak work show"
           " for it"),
    domain=AssessmentDomain,
    environment=AssessmentEnvironment,
    models=models,
    oracle=AssessmentOracle,
    heuristic=CueHeuristic,
    step_budget={1: 14, 2: 14, 3: 14, 4: 14, 5: 9},
    tier_changes={
        1: "one planted feature per criterion sets its level; clean text",
        2: "+ OCR-garbled lines (30%); graded sections missing from the copy (30%, up to two): request the "
           "original, which may turn out never to have been submitted",
        3: "+ one lookalike (a passage with a defect's cue words that is acceptable) and two strengths that leave "
           "the level where it is",
        4: "+ one department rule in force, stated only in the grading guide; its trigger caps a criterion in 60% "
           "of episodes, another rule's trigger is a decoy in 50%",
        5: "+ more noise and missing sections (40%), two lookalikes and three strengths, and a budget of 9 steps",
    },
    prompt_context=prompt_context,
))
