"""Action and observation of the exemplar: find a hidden code number from higher/lower hints."""

from typing import Literal

from pydantic import Field

from openadapt.kit import AgentAction, AgentObservation


class CodeAction(AgentAction):
    """Every field has a default: a malformed completion must still build an action."""

    tool: Literal["guess", "read_rules"] | None = Field(default=None, description="what to do")
    number: int | None = Field(default=None, ge=0, le=99, description="guess: the number to try")


class CodeObservation(AgentObservation):
    low: int = Field(default=0, description="smallest number the hints still allow")
    high: int = Field(default=99, description="largest number the hints still allow")
    hints: list[str] = Field(default_factory=list, description="hints so far (some may be rumours)")
    rules: list[str] = Field(default_factory=list, description="house rules, once read")
