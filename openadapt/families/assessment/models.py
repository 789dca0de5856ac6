"""Action and observation of the assessment family; the tools, sections, criteria and level range come from
the domain."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from openadapt.families.assessment.domain import AssessmentDomain
from openadapt.kit.models import AgentObservation, ToolAction, with_choices

MAX_QUOTES = 3  # evidence quotes per grade; more is evidence stuffing


class Grade(BaseModel):
    """One rubric row: the level, the quotes that decide it, and feedback to the author."""

    model_config = ConfigDict(extra="forbid")

    criterion: str | None = Field(default=None, description="the criterion graded")
    level: int | None = Field(default=None, ge=1, description="the level awarded (1 = lowest)")
    evidence: list[str] = Field(default_factory=list, max_length=8, description=(
        f"verbatim quotes (at least 20 characters each, at most {MAX_QUOTES}) of the passage that decides "
        "the level"))
    feedback: str = Field(default="", max_length=1500, description="feedback to the author: one or two sentences")


def _rows(value: Any) -> Any:
    """A grade that is not an object (a bare string, a number) becomes an empty grade, which the engine rejects
    with a clear error: a confused completion still builds an action (every action field must)."""
    if isinstance(value, list):
        return [item if isinstance(item, (dict, BaseModel)) else {} for item in value]
    return value


class AssessmentAction(ToolAction):
    """Read a section, request a missing one, consult the grading guide (each costs a step), or submit the
    grades (ends the episode)."""

    section: str | None = Field(default=None, description="the section to read or request")
    grades: list[Grade] = Field(default_factory=list, max_length=12, description=(
        "submit: one grade per rubric criterion"))


class AssessmentObservation(AgentObservation):
    """The grader's desk: the document's header and contents, what has been read, and the guide if consulted."""

    document: str = Field(default="", description="the document's title line")
    reference: str = Field(default="", description="the document's reference number in the grading queue")
    contents: list[str] = Field(default_factory=list, description="the document's sections: 'id: title'")
    criteria: list[str] = Field(default_factory=list, description="the rubric criteria to grade, by id")
    sections: dict[str, list[str]] = Field(default_factory=dict, description="the text of each section read so far")
    guide: list[str] = Field(default_factory=list, description="the grading guide's notes, once consulted")


def models(domain: AssessmentDomain) -> tuple[type[AssessmentAction], type[AssessmentObservation]]:
    criteria = [c.id for c in domain.criteria]
    grade = create_model(
        "Grade", __base__=Grade, __module__=Grade.__module__,
        criterion=(Literal[tuple(criteria)] | None, Field(default=None, description="the criterion graded")),  # type: ignore[valid-type]
        level=(int | None, Field(default=None, ge=1, le=len(domain.scale), description=(
            f"the level awarded: 1 ({domain.scale[0]}) to {len(domain.scale)} ({domain.scale[-1]})"))),
    )
    base = with_choices(AssessmentAction, "AssessmentAction", {
        "tool": list(domain.tools.model_dump().values()),
        "section": [s.id for s in domain.sections],
    })
    action = create_model(
        "AssessmentAction", __base__=base, __module__=AssessmentAction.__module__,
        grades=(Annotated[list[grade], BeforeValidator(_rows)], Field(  # type: ignore[valid-type]
            default_factory=list, max_length=12, description=AssessmentAction.model_fields["grades"].description)),
    )
    return action, AssessmentObservation
