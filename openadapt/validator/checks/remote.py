"""The package as the judge sees it: environments, observations and the package's own policies behind the
player's requests. Nothing here runs package code; every value is the JSON the player sent back."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openadapt.validator.checks.base import Context


class Obs:
    """One observation: the JSON the package's observation class produced, read like the observation."""

    __slots__ = ("data", "type", "type_ok")

    def __init__(self, data: dict[str, Any], type_name: str = "", type_ok: bool = True):
        self.data, self.type, self.type_ok = data, type_name, type_ok

    @property
    def done(self) -> bool:
        return self.data.get("done") is True

    @property
    def reward(self) -> float | None:
        value = self.data.get("reward")
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def metadata(self) -> dict[str, Any]:
        value = self.data.get("metadata")
        return value if isinstance(value, dict) else {}

    @property
    def feedback(self) -> str:
        return str(self.data.get("feedback") or "")

    @property
    def error(self) -> str:
        return str(self.data.get("error") or "")

    def model_dump(self, mode: str = "json", exclude: set[str] | None = None) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if not exclude or k not in exclude}

    def model_dump_json(self, exclude: set[str] | None = None) -> str:
        return json.dumps(self.model_dump(exclude=exclude), sort_keys=True, default=str)


def reward_of(obs: Obs) -> float:
    """The step's reward as a number (NaN when the package gave none: every check that averages fails on it)."""
    value = obs.data.get("reward")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


class InvalidAction(Exception):
    """The package's action class refused a payload: `fields` are the ones at fault."""

    def __init__(self, fields: list[str], error: str):
        super().__init__(error)
        self.fields = fields


class RemoteEnv:
    """An environment instance inside the player."""

    def __init__(self, ctx: Context, handle: int, rubric: list):
        self.ctx, self.handle, self.rubric = ctx, handle, rubric

    def reset(self, *, seed: int, eci: int, episode_id: str | None = None) -> Obs:
        reply = self.ctx.call("reset", label="reset()", bucket=self.ctx.reset_seconds, env=self.handle, seed=seed,
                              eci=eci, episode_id=episode_id)
        return self.ctx.observation(reply, f"ECI {eci}: reset()")

    def step(self, action: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        """The observation after `action`, and the action as the package's class read it."""
        reply = self.ctx.call("step", label="step()", bucket=self.ctx.step_seconds, env=self.handle, action=action)
        if "invalid" in reply:
            raise InvalidAction(list(reply["invalid"]), str(reply.get("error", "")))
        return self.ctx.observation(reply, "step()"), reply.get("action") or {}

    @property
    def state(self) -> dict[str, Any]:
        return self.ctx.call("state", label="reading state", bucket=self.ctx.step_seconds, env=self.handle)

    def secret_values(self) -> list[str]:
        return list(self.ctx.call("secrets", label="secret_values()", bucket=self.ctx.step_seconds,
                                  env=self.handle)["secrets"])


class RemotePolicy:
    """The package's oracle or heuristic, acting inside the player on the environment's latest observation."""

    def __init__(self, ctx: Context, name: str):
        self.ctx, self.name, self.handle = ctx, name, None

    def begin(self, env: RemoteEnv, observation: Obs, seed: int) -> None:
        self.handle = self.ctx.call("begin", label=f"the {self.name}'s begin()", bucket=self.ctx.policy_seconds,
                                    policy=self.name, env=env.handle, seed=seed)["policy"]

    def act(self, observation: Obs) -> dict[str, Any]:
        return self.ctx.call("act", label=f"the {self.name}'s act()", bucket=self.ctx.policy_seconds,
                             policy=self.handle)["action"]
