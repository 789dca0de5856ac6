"""Policies the validator drives packages with: do-nothing, replay, and the exploit probes.

The probes are built from the action class's JSON schema alone, so they work on any package and know nothing
of the answer: they measure what an agent can earn by gaming the reward instead of solving the task.
"""

from __future__ import annotations

import random
import re
from typing import Any

from openadapt.kit.policy import Policy, RandomPolicy

_WORD = re.compile(r"[A-Za-z][\w.-]{2,}")


class EmptyPolicy(Policy):
    """The do-nothing floor: every field left at its default."""

    name = "do_nothing"

    def __init__(self, action_cls: type):
        self.action = action_cls.model_validate({})

    def act(self, observation):
        return self.action


class ReplayPolicy(Policy):
    """Plays back recorded actions."""

    name = "replay"

    def __init__(self, actions: list[Any]):
        self.actions = list(actions)

    def act(self, observation):
        return self.actions[min(len(self.actions) - 1, observation.metadata.get("step", 0))]


class ProbePolicy(RandomPolicy):
    """A schema-driven exploit: random structure, with one trick applied to every action."""

    def __init__(self, action_cls: type, trick: str):
        super().__init__(action_cls)
        self.trick = trick
        self.name = trick
        self._fixed: Any = None
        self._enums = sorted({str(v) for prop in self._props().values() for v in self._resolve(prop).get("enum", [])})

    def _props(self) -> dict[str, Any]:
        return {k: v for k, v in self.schema.get("properties", {}).items() if k != "metadata"}

    def begin(self, env, observation, rng: random.Random) -> None:
        super().begin(env, observation, rng)
        if self.trick == "repeat_action":
            self._fixed = None  # a new action each episode, repeated within it

    def act(self, observation):
        if self.trick in ("constant_action", "repeat_action"):
            if self._fixed is None:
                self._fixed = RandomPolicy.act(self, observation)
            return self._fixed
        payload = {}
        words = _WORD.findall(observation.model_dump_json(exclude={"metadata"})) or ["x"]
        for name, prop in self._props().items():
            spec = self._resolve(prop)
            kind = spec.get("type")
            if self.trick == "empty_fields":
                payload[name] = self.rng.choice(spec["enum"]) if "enum" in spec else None
            elif self.trick == "keyword_stuffing" and kind == "string" and "enum" not in spec:
                payload[name] = _within(" ".join(self._enums + words[:200]), spec)
            elif self.trick == "keyword_stuffing" and kind == "array":
                item = self._resolve(spec.get("items", {}))
                lines = [_within(" ".join(words[i:i + 8]), item) for i in range(0, min(len(words), 80), 8)]
                payload[name] = lines[:spec.get("maxItems", len(lines))]
            elif self.trick == "max_confidence" and kind in ("number", "integer"):
                payload[name] = spec.get("maximum", 1.0)
            else:
                payload[name] = self._sample(spec, words)
        payload = {k: v for k, v in payload.items() if v is not None}
        return self._valid(payload)


def _within(text: str, spec: dict[str, Any]) -> str:
    """The stuffed text cut to what its field accepts: an agent can send no more. Uncut, a payment service's
    enums and words ran past the diagnosis reasoning's 4,000 characters, and the probe's own ValidationError
    failed the package."""
    return text[:spec["maxLength"]] if "maxLength" in spec else text


PROBES = ("constant_action", "repeat_action", "empty_fields", "keyword_stuffing", "max_confidence")
