"""The text protocol: how an observation becomes a prompt and a completion becomes an action.

Both directions are declared in the package manifest (`openadapt.text_protocol`): the prompts are jinja2
templates shipped in the package, rendered by jinja2's immutable sandbox (a template reaches no Python
internals and calls no method that changes data: wherever it is rendered, it can show the observation and
nothing else); a completion must carry one JSON object that validates as the action class (prose and code
fences around it are tolerated). A completion that does not parse becomes a *malformed action*
(`MALFORMED_KEY` in its metadata) that the environment answers with the declared malformed reward.

The system template receives the action's JSON schema as the agent should read it (`prompt_schema`): the fields
it may set first, without the protocol's own `metadata` field (which `parse` drops) and without pydantic's
generated titles. pydantic's raw schema opens with `"additionalProperties": false, "description": ...`, then
the `metadata` field's sub-schema: a small instruct model told to reply with one object that matches it copies
or fills in that object (`{"additionalProperties": false, "description": ..., "properties": {...`), a reply
that never validates (Qwen2.5-Coder-0.5B did so on every seed, greedy, transformers and llama.cpp alike).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from openenv.core.env_server.types import Action, Observation
from pydantic import ValidationError

from openadapt.kit.models import MALFORMED_KEY


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    action: Action
    error: str | None  # None when the completion parsed; otherwise why it did not

    @property
    def ok(self) -> bool:
        return self.error is None


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object embedded in `text`, in order (prose and fences around them are skipped)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            yield value
        start = text.find("{", start + 1)


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # name -> sub-schema
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")  # lists of sub-schemas
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")  # one sub-schema


def _untitled(node: Any) -> Any:
    """A JSON schema without its `title` annotations (property names called "title" and data such as
    defaults, enums and examples are left alone)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _untitled(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_untitled(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = _untitled(value)
        else:
            out[key] = value
    return out


def prompt_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The action's JSON schema as the system prompt shows it (module docstring): `properties` first, the
    protocol's `metadata` field left out, no titles. Still a JSON schema with `properties` (what
    `openadapt.training.envinfo.schema_from_prompt` reads back for a package it never imports)."""
    schema = _untitled(schema)
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    out: dict[str, Any] = {"properties": properties}
    for key, value in schema.items():
        if key == "properties":
            continue
        if key == "required" and isinstance(value, list):
            value = [name for name in value if name != "metadata"]
            if not value:
                continue
        out[key] = value
    return out


def _first_json_object(text: str) -> Any:
    """The first decodable JSON object in `text` (raises ValueError when there is none)."""
    for value in json_objects(text):
        return value
    raise ValueError("no JSON object found in the reply")


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "action"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


class TextProtocol:
    """Renders prompts from a package's templates and parses completions into its action class."""

    def __init__(self, package_root: Path, system_template: str, observation_template: str,
                 action_cls: type[Action], context: dict[str, Any] | None = None):
        self.action_cls = action_cls
        loader = jinja2.FileSystemLoader(str(package_root))
        # Templates come from packages (untrusted): the sandboxed environment refuses attribute access to
        # internals (__class__, __globals__, ...) and mutating methods, so rendering one runs no code of its own.
        self._jinja = ImmutableSandboxedEnvironment(
            loader=loader, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
            keep_trailing_newline=False, autoescape=False,
        )
        self._system = self._jinja.get_template(system_template)
        self._observation = self._jinja.get_template(observation_template)
        self._context = dict(context or {})
        self._schema = action_cls.model_json_schema()

    def system_prompt(self) -> str:
        shown = json.dumps(prompt_schema(self._schema), indent=None)
        return self._system.render(action_schema=shown, **self._context).strip()

    def render(self, observation: Observation) -> str:
        """The user-turn prompt for one observation."""
        return self._observation.render(obs=observation, **self._context).strip()

    def parse(self, completion: str) -> ParsedCompletion:
        """Parse a completion; never raises. A failure yields the malformed action and its reason."""
        try:
            payload = _first_json_object(completion)
        except ValueError as exc:
            return self.malformed(str(exc))
        payload.pop("metadata", None)  # the agent may not set protocol metadata
        try:
            return ParsedCompletion(self.action_cls.model_validate(payload), None)
        except ValidationError as exc:
            return self.malformed(f"the JSON object is not a valid action ({_describe(exc)})")

    def malformed(self, reason: str) -> ParsedCompletion:
        action = self.action_cls.model_validate({"metadata": {MALFORMED_KEY: reason}})
        return ParsedCompletion(action, reason)

    @staticmethod
    def format_action(action: Action) -> str:
        """The canonical completion for an action (what a perfect agent would write)."""
        return json.dumps(action.model_dump(exclude={"metadata"}, exclude_defaults=True), sort_keys=True)
