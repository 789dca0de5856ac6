"""The judge's own agents: random, do-nothing, replay and the exploit probes.

They are built from the action class's JSON schema alone and see only observations (as JSON), so they work on
any package and know nothing of the answer: they measure what an agent earns by gaming the reward instead of
solving the task. They run in the judge, never in the package's interpreter; an action they write goes to the
player as a payload, which the package's action class reads (a field it refuses is left at its default).
"""

from __future__ import annotations

from typing import Any

from openadapt.kit.policy import _WORD, policy_rng, resolve_schema, sample_schema


class JudgePolicy:
    """Base: `begin` after every reset, `act` once per step; an action is a payload (a dict)."""

    name = "policy"

    def begin(self, env: Any, observation: Any, seed: int) -> None:
        self.rng = policy_rng(seed)

    def act(self, observation: Any) -> dict[str, Any]:
        raise NotImplementedError


class SchemaPolicy(JudgePolicy):
    """Random schema-valid actions; strings are words drawn from the current observation."""

    name = "random"

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema

    def props(self) -> dict[str, Any]:
        return {k: v for k, v in self.schema.get("properties", {}).items() if k != "metadata"}

    def act(self, observation: Any) -> dict[str, Any]:
        words = _WORD.findall(observation.model_dump_json(exclude={"metadata"})) or ["x"]
        return {name: self.sample(self.resolve(prop), words) for name, prop in self.props().items()}

    def resolve(self, prop: dict[str, Any]) -> dict[str, Any]:
        return resolve_schema(self.schema, prop)

    def sample(self, prop: dict[str, Any], words: list[str]) -> Any:
        return sample_schema(self.schema, prop, self.rng, words)


class EmptyPolicy(JudgePolicy):
    """The do-nothing floor: every field left at its default."""

    name = "do_nothing"

    def act(self, observation: Any) -> dict[str, Any]:
        return {}


class ReplayPolicy(JudgePolicy):
    """Plays back recorded actions, one a step (the last repeated if the episode runs longer)."""

    name = "replay"

    def __init__(self, actions: list[dict[str, Any]]):
        self.actions = [dict(a) for a in actions] or [{}]

    def begin(self, env: Any, observation: Any, seed: int) -> None:
        super().begin(env, observation, seed)
        self.index = 0

    def act(self, observation: Any) -> dict[str, Any]:
        action = self.actions[min(self.index, len(self.actions) - 1)]
        self.index += 1
        return action


class ProbePolicy(SchemaPolicy):
    """A schema-driven exploit: random structure, with one trick applied to every action."""

    def __init__(self, schema: dict[str, Any], trick: str):
        super().__init__(schema)
        self.trick = self.name = trick
        self._fixed: dict[str, Any] | None = None
        self._enums = sorted({str(v) for prop in self.props().values() for v in self.resolve(prop).get("enum", [])})

    def begin(self, env: Any, observation: Any, seed: int) -> None:
        super().begin(env, observation, seed)
        if self.trick == "repeat_action":
            self._fixed = None  # a new action each episode, repeated within it

    def act(self, observation: Any) -> dict[str, Any]:
        if self.trick in ("constant_action", "repeat_action"):
            if self._fixed is None:
                self._fixed = SchemaPolicy.act(self, observation)
            return dict(self._fixed)
        if self.trick == "random":
            return SchemaPolicy.act(self, observation)
        payload = {}
        words = _WORD.findall(observation.model_dump_json(exclude={"metadata"})) or ["x"]
        for name, prop in self.props().items():
            spec = self.resolve(prop)
            kind = spec.get("type")
            if self.trick == "empty_fields":
                payload[name] = self.rng.choice(spec["enum"]) if spec.get("enum") else None
            elif self.trick == "keyword_stuffing" and kind == "string" and "enum" not in spec:
                payload[name] = _within(" ".join(self._enums + words[:200]), spec)
            elif self.trick == "keyword_stuffing" and kind == "array":
                item = self.resolve(spec.get("items", {}))
                lines = [_within(" ".join(words[i:i + 8]), item) for i in range(0, min(len(words), 80), 8)]
                payload[name] = lines[:spec.get("maxItems", len(lines))]
            elif self.trick == "max_confidence" and kind in ("number", "integer"):
                payload[name] = spec.get("maximum", 1.0)
            else:
                payload[name] = self.sample(spec, words)
        return {k: v for k, v in payload.items() if v is not None}


def _within(text: str, spec: dict[str, Any]) -> str:
    """The stuffed text cut to what its field accepts: an agent can send no more."""
    return text[:spec["maxLength"]] if "maxLength" in spec else text


PROBES = ("constant_action", "repeat_action", "empty_fields", "keyword_stuffing", "max_confidence", "random")
