"""The contract every designer LLM backend meets: `ChatBackend.complete(messages, schema=, max_tokens=)` returns a
`Completion`, and `describe()` returns a `BackendInfo` for provenance.

Two backends implement it: the embedded local model (`openadapt.llm.local.LocalLLM`, llama.cpp in this
process) and any OpenAI-compatible endpoint (`openadapt.llm.endpoint.LLMClient`).

Contracts:
- `messages` are chat messages `{"role": "system"|"user"|"assistant", "content": str}`; the backend applies the
  model's own chat template.
- With `schema` (a JSON schema dict), the reply is constrained to JSON matching it where the backend can enforce
  that (llama.cpp: a grammar; endpoint: `response_format`). A schema the backend cannot enforce raises
  `SchemaError` before any tokens are generated; it never silently degrades to free text.
- A reply cut at the token limit comes back with `finish_reason == "length"` (`truncated` is True): constrained
  JSON is not forced to close, so a truncated constrained reply is usually invalid JSON. `parse_as` says so.
- `BackendInfo` never carries an API key.
"""

from __future__ import annotations

import json
import re
from typing import Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openadapt.errors import OpenAdaptError

T = TypeVar("T", bound=BaseModel)

Message = dict[str, str]


class LLMError(OpenAdaptError):
    """The backend refused or failed; the message says what to check."""

    exit_code = 4


class SchemaError(LLMError):
    """A JSON schema the backend cannot enforce (it would otherwise generate unconstrained text)."""


class ReplyError(LLMError):
    """A reply that does not parse or validate against the schema it was asked for."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens

    def since(self, earlier: Usage) -> Usage:
        """What was used after `earlier` (a copy of this running total taken then)."""
        return Usage(prompt_tokens=self.prompt_tokens - earlier.prompt_tokens,
                     completion_tokens=self.completion_tokens - earlier.completion_tokens,
                     total_tokens=self.total_tokens - earlier.total_tokens)


class Completion(BaseModel):
    """One chat completion and what it cost."""

    text: str
    finish_reason: str | None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0  # wall time of the call, retries included
    retries: list[str] = Field(default_factory=list)  # why each retry happened
    tokens_per_s: float | None = None  # completion tokens / s after the prompt (decode + sampling; endpoint: call)
    prompt_tokens_per_s: float | None = None  # prompt evaluation speed, where the backend measures it
    prompt_s: float | None = None  # seconds spent evaluating the prompt (local only)
    cached_prompt_tokens: int = 0  # prompt tokens reused from the previous call's KV cache (local only)
    restored_tokens: int = 0  # of those, how many came from a saved context loaded back (local only)
    constrained: bool = False  # the reply was generated under a JSON-schema constraint

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    def parse_as(self, model: type[T]) -> T:
        """The reply as an instance of `model`; a one-line `ReplyError` when it is cut off, not JSON or invalid."""
        if self.truncated:
            raise ReplyError(f"the reply was cut off at the token limit after {self.usage.completion_tokens} "
                             "tokens: raise max_tokens or ask for less")
        try:
            # strict=False: a raw tab or newline inside a string (some grammars let them through) is still text
            data = _clean(json.loads(self.text, strict=False))
        except json.JSONDecodeError as exc:
            raise ReplyError(f"the reply is not JSON ({exc.msg} at char {exc.pos})") from None
        try:
            try:
                return model.model_validate(data)
            except ValidationError as exc:
                clamped = _clamped(data, exc)
                if clamped is None:
                    raise
                return model.model_validate(clamped)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise ReplyError(f"the reply does not match {model.__name__}: {where}: {first['msg']}") from None


_BOUNDS = {"less_than_equal": "le", "greater_than_equal": "ge", "less_than": "lt", "greater_than": "gt"}


def _clamped(data: object, exc: ValidationError) -> object | None:
    """`data` with each number outside an inclusive bound of its field set to that bound and each text past its
    maximum length cut back to it, or None when any other error is left: one value out of bounds would otherwise
    lose the whole record (llama.cpp's grammars bound integers, not decimals). An exclusive bound moves a number
    one unit inside it (0.01 for a number written with decimals). A text's bound gives way where its pattern
    counts a placeholder as one character."""
    errors = exc.errors()
    if not all((e["type"] in _BOUNDS and isinstance(e.get("input"), int | float))
               or (e["type"] == "string_too_long" and isinstance(e.get("input"), str)) for e in errors):
        return None
    data = json.loads(json.dumps(data))  # a copy to edit
    for error in errors:
        *parents, last = error["loc"]
        holder = data
        for step in parents:
            holder = holder[step]
        if error["type"] == "string_too_long":
            holder[last] = cut_text(error["input"], error["ctx"]["max_length"])
        elif error["type"] in ("greater_than", "less_than"):  # an exclusive bound: one whole unit inside it
            bound, value = error["ctx"][_BOUNDS[error["type"]]], error["input"]
            step = 1 if float(value).is_integer() else 0.01
            holder[last] = bound + step if error["type"] == "greater_than" else bound - step
        else:
            holder[last] = error["ctx"][_BOUNDS[error["type"]]]
    return data


def cut_text(text: str, limit: int) -> str:
    """`text` within `limit` characters: its whole sentences that fit, else its whole words that fit (a
    placeholder is never cut in half)."""
    head = text[:limit]
    end = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    if text[limit:limit + 1] in (" ", "") and head.endswith((".", "!", "?")):
        return head
    if end >= limit // 3:
        return head[:end + 1]
    words = head[:head.rfind(" ")] if " " in head and text[limit:limit + 1] not in (" ", "") else head
    if words.count("{") > words.count("}"):
        words = words[:words.rfind("{")]
    if len(words) < len(text.rstrip(" .")):  # cut inside a sentence: end before its last clause, not inside it
        clauses = [m.start() for m in _CLAUSE.finditer(words) if m.start() >= limit // 2]
        words = words[:clauses[-1]] if clauses else words
        while (last := _TRAILING.search(words)) and last.start() >= limit // 2:  # '... the tank on'
            words = words[:last.start()]
    return words.rstrip(" ,;:-")


# Where a clause or a phrase starts: a text cut inside a sentence ends before the last of these, so that it ends
# on a whole phrase ('... responsible for the tanks'), not inside one ('... the tanks on a 20').
_CLAUSE = re.compile(r"[,;:(]| -| (?:on|at|in|into|for|of|with|without|from|to|and|or|but|by|near|under|over|"
                     r"above|below|behind|between|within|across|against|during|after|before|since|until|while|"
                     r"which|who|whose|that|when|where|because|if|than|so|as|via|a|an|the)(?= |$)")
_TRAILING = re.compile(f"(?:{_CLAUSE.pattern})$")


class Sampling(BaseModel):
    """Sampling settings, recorded in provenance so a run can be repeated."""

    model_config = ConfigDict(frozen=True)

    temperature: float = 0.2
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    max_tokens: int = 8192
    grammar_check_first: int | None = None  # local model: see LocalSettings.grammar_check_first


class BackendInfo(BaseModel):
    """What produced a reply, for provenance: enough to say which weights or endpoint, never a secret."""

    kind: Literal["local", "endpoint"]
    model: str  # GGUF general.name (local) or the endpoint's model id
    model_id: str | None = None  # the catalogue id of a local model, None for a user's own GGUF
    sha256: str | None = None  # of the local model file
    size_bytes: int | None = None
    base_url: str | None = None  # endpoints only
    threads: int | None = None
    n_ctx: int | None = None
    sampling: Sampling = Field(default_factory=Sampling)


@runtime_checkable
class ChatBackend(Protocol):
    """A chat model the designer can ask. Implementations: `LocalLLM`, `LLMClient`."""

    def complete(self, messages: list[Message], *, schema: dict | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, reseed: int = 0) -> Completion:
        """`temperature` overrides the backend's sampling temperature for this request; `reseed` is added to its
        seed (a request asked again with the same prompt and seed gets the same answer, however hot)."""

    def describe(self) -> BackendInfo: ...


def _clean(value):
    """Control characters inside strings (a raw newline in a one-line field) become single spaces."""
    if isinstance(value, str):
        return " ".join(value.split()) if any(c in value for c in "\n\r\t") else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value
