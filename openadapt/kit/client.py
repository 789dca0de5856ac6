"""A typed OpenEnv `EnvClient` for any openadapt package: subclasses only name their two model classes."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from openadapt.kit.models import AgentAction, AgentObservation, EpisodeState

ActT = TypeVar("ActT", bound=AgentAction)
ObsT = TypeVar("ObsT", bound=AgentObservation)


class OpenAdaptClient(EnvClient[ActT, ObsT, EpisodeState], Generic[ActT, ObsT]):
    """WebSocket client; `reset(seed=..., eci=k)` picks the tier per episode on the same connection."""

    action_type: ClassVar[type[AgentAction]]
    observation_type: ClassVar[type[AgentObservation]]

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        fields = dict(payload.get("observation", {}))
        fields["reward"] = payload.get("reward")
        fields["done"] = payload.get("done", False)
        fields["metadata"] = payload.get("metadata") or fields.get("metadata") or {}
        observation = self.observation_type.model_validate(fields)
        return StepResult(observation=observation, reward=observation.reward, done=observation.done,
                          metadata=observation.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState.model_validate(payload)
