"""What the trainer learns about a package without importing untrusted code: its action schema, and the
prompts a schema-driven random agent meets (for the tiny tokenizer's vocabulary)."""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel

from openadapt.envpkg.loader import PackageRef, load
from openadapt.envpkg.textenv import TextEnv
from openadapt.kit.policy import _WORD, RandomPolicy
from openadapt.kit.protocol import json_objects
from openadapt.training.errors import TrainingError  # noqa: F401 - where the training modules import it from
from openadapt.training.slots import SLOT


class SchemaRandomActions(RandomPolicy):
    """openadapt.kit's RandomPolicy driven by the action's JSON schema alone, so it also serves sandboxed packages
    whose action class is never imported here. It knows nothing about the answer: enum values uniformly, numbers
    uniformly in their bounds, strings are words of the current observation. Given the rendered prompt (a str)
    instead of the observation's fields, strings are words of what the agent is actually shown."""

    name = "random"

    def __init__(self, schema: dict[str, Any], rng: random.Random, omit_defaulted: float = 0.0):
        self.schema = schema
        self.rng = rng
        self.omit_defaulted = omit_defaulted  # chance to leave out a field whose default is a value (not null)

    def payload(self, observation: dict[str, Any] | str) -> dict[str, Any]:
        text = observation if isinstance(observation, str) else json.dumps(observation)
        # a value slot (`training.slots`) is one of the words shown, whole
        found = [*_WORD.findall(SLOT.sub(" ", text)), *SLOT.findall(text)] or ["x"]
        payload = {}
        for name, prop in self.schema.get("properties", {}).items():
            if name == "metadata":
                continue
            # optional with a value default (a default_factory leaves no "default" in the schema); fields that
            # default to null are the action's slots and are always filled
            defaulted = name not in self.schema.get("required", []) and prop.get("default", []) is not None
            if defaulted and self.rng.random() < self.omit_defaulted:
                continue  # e.g. an empty evidence list or reasoning text: the action is valid without it
            payload[name] = _rounded(self._sample(self._resolve(prop), found))
        return payload

    def completion(self, observation: dict[str, Any] | str) -> str:
        return action_text(self.payload(observation))


def written_form(completion: str) -> str:
    """An action as the solver learns to write it: compact JSON with characters as themselves (`Südpark`, which
    the model can copy from its observation, not `S\\u00fcdpark`). Text that is not JSON is left as it is."""
    try:
        return action_text(json.loads(completion))
    except ValueError:
        return completion


def action_text(value: Any) -> str:
    """`value` as the solver writes an action: compact JSON, characters as themselves."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _rounded(value: Any) -> Any:
    # One decimal keeps a random action short (the tiny tokenizer spells a number digit by digit).
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def schema_from_prompt(system_prompt: str) -> dict[str, Any] | None:
    """The action schema as the system prompt shows it (the manifest's system template receives it)."""
    return next((value for value in json_objects(system_prompt) if isinstance(value.get("properties"), dict)),
                None)


def action_schema(ref: PackageRef, system_prompt: str) -> dict[str, Any]:
    """Trusted seeds: from the action class. Untrusted packages: from the system prompt (never imported)."""
    if ref.trusted:
        return load(ref).action_cls.model_json_schema()
    schema = schema_from_prompt(system_prompt)
    if schema is None:
        raise TrainingError(f"{ref.label}: its system prompt does not show the action's JSON schema, which the "
                            "format warm-up and the tiny tokenizer need (render `action_schema` in system.j2)")
    return schema


class EnvSample(BaseModel):
    """Prompts and observations met by random play: the raw material of the tiny vocabulary."""

    system_prompt: str
    schema_dict: dict[str, Any]
    prompts: list[str]
    completions: list[str]


def sample_env(env: TextEnv, schema: dict[str, Any], tiers: list[int], seeds: range,
               steps: int = 3) -> EnvSample:
    """Play `steps` random actions per seed and tier, recording every prompt and every random completion."""
    prompts, completions = [], []
    for seed in seeds:
        agent = SchemaRandomActions(schema, random.Random(f"vocab:{seed}"))
        for eci in tiers:
            step = env.reset(seed=seed, eci=eci)
            prompts.append(step.prompt)
            for _ in range(steps):
                if step.done:
                    break
                completion = agent.completion(step.prompt)
                completions.append(completion)
                step = env.step(completion)
                prompts.append(step.prompt)
    return EnvSample(system_prompt=env.system_prompt(), schema_dict=schema, prompts=prompts, completions=completions)
