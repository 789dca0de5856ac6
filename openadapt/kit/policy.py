"""Policies: anything that maps an observation to an action.

Packages ship an oracle (privileged: it reads `env.oracle_view()`) and optionally a heuristic (sees only
observations). The random policy is generic: it builds valid actions from the action class's JSON schema.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Any, ClassVar

from openenv.core.env_server.types import Action, Observation
from pydantic import ValidationError

_WORD = re.compile(r"[A-Za-z][\w.-]{2,}")


def policy_rng(seed: int) -> random.Random:
    """The policy's own randomness for an episode: a function of the episode seed, but never the same stream
    as the environment's `random.Random(seed)` (a policy drawing in step with the env would read its mind)."""
    return random.Random(f"policy:{seed}")


class Policy:
    """Base class. `begin` is called after every reset; `act` once per step."""

    name: ClassVar[str] = "policy"
    privileged: ClassVar[bool] = False

    def begin(self, env: Any, observation: Observation, rng: random.Random) -> None:
        self.env = env
        self.rng = rng

    def act(self, observation: Observation) -> Action:
        raise NotImplementedError


@lru_cache(maxsize=64)
def action_schema(action_cls: type[Action]) -> dict[str, Any]:
    """The action class's JSON schema (built once per class: pydantic's generator is slow)."""
    return action_cls.model_json_schema()


class RandomPolicy(Policy):
    """Random schema-valid actions; strings are words drawn from the current observation."""

    name = "random"

    def __init__(self, action_cls: type[Action]):
        self.action_cls = action_cls
        self.schema = action_schema(action_cls)

    def act(self, observation: Observation) -> Action:
        words = _WORD.findall(observation.model_dump_json(exclude={"metadata"})) or ["x"]
        payload = {}
        for name, prop in self.schema.get("properties", {}).items():
            if name == "metadata":
                continue
            payload[name] = self._sample(self._resolve(prop), words)
        return self._valid(payload)

    def _valid(self, payload: dict[str, Any]) -> Action:
        """The action, with any field the sample got wrong (a pattern, a nested bound) left at its default:
        every action field has one, so a random action is always an action."""
        for _ in range(len(payload) + 1):
            try:
                return self.action_cls.model_validate(payload)
            except ValidationError as exc:
                for field in {err["loc"][0] for err in exc.errors() if err["loc"]}:
                    payload.pop(field, None)
        return self.action_cls.model_validate({})

    def _resolve(self, prop: dict[str, Any]) -> dict[str, Any]:
        return resolve_schema(self.schema, prop)

    def _sample(self, prop: dict[str, Any], words: list[str]) -> Any:
        return sample_schema(self.schema, prop, self.rng, words)


# Deep enough for any action a family writes; a deeper (hostile) schema is cut off there, not followed.
MAX_SCHEMA_DEPTH = 4


def resolve_schema(schema: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    """A property's own schema: a `$ref` looked up in `schema`, an optional (`anyOf` with null) unwrapped."""
    if "$ref" in prop:
        return schema.get("$defs", {}).get(prop["$ref"].rsplit("/", 1)[-1], {})
    options = [p for p in prop.get("anyOf", []) if p.get("type") != "null"]
    return resolve_schema(schema, options[0]) if options else prop


def sample_schema(schema: dict[str, Any], prop: dict[str, Any], rng: random.Random, words: list[str],
                  depth: int = 0) -> Any:
    """A random value of `prop` (resolved): enum values uniformly, numbers uniformly in their bounds, lists of up
    to two items, strings drawn from `words`."""
    if prop.get("enum"):
        return rng.choice(prop["enum"])
    if "const" in prop:
        return prop["const"]
    kind = prop.get("type")
    if kind == "number":
        return rng.uniform(prop.get("minimum", 0.0), prop.get("maximum", 1.0))
    if kind == "integer":
        return rng.randint(int(prop.get("minimum", 0)), int(prop.get("maximum", 10)))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array" and depth < MAX_SCHEMA_DEPTH:
        item = resolve_schema(schema, prop.get("items", {"type": "string"}))
        return [sample_schema(schema, item, rng, words, depth + 1) for _ in range(rng.randint(0, 2))]
    if kind == "object" and "properties" in prop and depth < MAX_SCHEMA_DEPTH:
        return {key: sample_schema(schema, resolve_schema(schema, sub), rng, words, depth + 1)
                for key, sub in prop["properties"].items()}
    return rng.choice(words)
