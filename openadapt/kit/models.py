"""Typed contracts every openadapt environment shares, on top of OpenEnv's Action/Observation/State."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from openadapt.kit.eci import Tier

# Key in `Action.metadata` that marks a completion the text protocol could not parse. The environment answers
# such an action with the declared malformed reward, so a bad completion costs a step instead of crashing.
MALFORMED_KEY = "openadapt_malformed"


class AgentAction(Action):
    """Base for openadapt actions. Every field of a subclass must have a default, so that a malformed
    completion can still be sent as an action (`{"metadata": {MALFORMED_KEY: reason}}`)."""


class ToolAction(AgentAction):
    """An action that starts by naming its tool: the family's `models(domain)` narrows `tool` to the tool names
    of the domain (`with_choices`); the subclass adds the arguments the tools take."""

    tool: str | None = Field(default=None, description="what to do")


class AgentObservation(Observation):
    """Fields every openadapt observation carries, beside the domain's own."""

    feedback: str = Field(default="", description="what the last action did, in words")
    error: str | None = Field(default=None, description="machine-readable code when the last action was rejected")
    eci: Tier = Field(default=1, description="Environment Complexity Index of this episode")
    steps_remaining: int = Field(default=0, ge=0, description="steps left in the episode's budget")


class EpisodeState(State):
    """Agent-visible episode state (served at /state): never holds the hidden answer."""

    eci: Tier = 1
    seed: int | None = None
    step_budget: int = 0
    done: bool = False
    episode_return: float = 0.0


def with_choices(base: type[AgentAction], name: str, choices: dict[str, list[str]],
                 descriptions: dict[str, str] | None = None) -> type[AgentAction]:
    """A subclass of `base` whose string fields in `choices` accept only the listed values (a JSON-schema enum an
    agent and a constrained decoder can see). Each stays optional (default None), as every action field must."""
    from typing import Literal

    from pydantic import create_model

    descriptions = descriptions or {}
    fields: dict[str, Any] = {}
    for field, values in choices.items():
        inherited = base.model_fields[field]
        kind = Literal[tuple(dict.fromkeys(values))]  # type: ignore[valid-type]
        fields[field] = (kind | None, Field(default=None, description=descriptions.get(field, inherited.description)))
    return create_model(name, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **fields)
