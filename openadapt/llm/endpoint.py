"""The endpoint backend: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp server, a
hosted router) through the `openai` client. It meets `openadapt.llm.chat.ChatBackend`.

Configuration comes from flags or the environment: `OPENADAPT_BASE_URL` (or `OPENAI_BASE_URL`),
`OPENADAPT_MODEL`, `OPENADAPT_API_KEY` (or `OPENAI_API_KEY`). The key is held in memory only: it is never written
to provenance, logs, reports or the sandbox (`LLMConfig` excludes it from serialisation and `describe()` omits it).

Schema-constrained replies: `complete(..., schema=S)` sends OpenAI's structured-output form
`{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}` by default; `schema_format="json_object"`
sends `{"type": "json_object", "schema": S}` instead, the form llama.cpp's server (llama-cpp-python) accepts.
"""

from __future__ import annotations

import os
import re
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openadapt.errors import UsageError
from openadapt.llm.chat import BackendInfo, Completion, LLMError, Message, Sampling, Usage

__all__ = ["Completion", "LLMClient", "LLMConfig", "LLMError", "Usage"]

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 30.0  # exponential backoff, capped: many retries (a slow stand-in endpoint) wait minutes, not hours


class LLMConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    api_key: str = Field(default="", repr=False, exclude=True)  # never serialised
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    temperature: float = 0.2
    top_p: float | None = None  # sent only when set
    seed: int | None = None  # sent only when set (endpoints that honour it repeat a reply)
    max_tokens: int = 8192  # the default per call; `complete(max_tokens=)` overrides it
    schema_format: Literal["json_schema", "json_object"] = "json_schema"
    schema_strict: bool = True  # OpenAI's strict mode needs every property required, additionalProperties false

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 **overrides) -> LLMConfig | None:
        """The configured endpoint, or None when none is configured (the offline designer's cue)."""
        base_url = base_url or os.environ.get("OPENADAPT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENADAPT_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
        if not base_url and not key:
            return None
        model = model or os.environ.get("OPENADAPT_MODEL")
        if not model:
            raise UsageError("an LLM endpoint is configured but no model: pass --model or set OPENADAPT_MODEL")
        return cls(base_url=base_url or "https://api.openai.com/v1", model=model, api_key=key, **overrides)


class LLMClient:
    """Chat completions with timeouts and retries (exponential backoff on 429/5xx/connection errors)."""

    def __init__(self, config: LLMConfig):
        import openai

        self.config = config
        self._openai = openai
        # Retries are ours (so they are recorded); the client's own are off.
        self._client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key or "not-needed",
                                     timeout=config.timeout_s, max_retries=0)

    def describe(self) -> BackendInfo:
        c = self.config
        return BackendInfo(kind="endpoint", model=c.model, base_url=c.base_url,
                           sampling=Sampling(temperature=c.temperature, top_p=c.top_p, seed=c.seed,
                                             max_tokens=c.max_tokens))

    def complete(self, messages: list[Message], *, schema: dict | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, reseed: int = 0) -> Completion:
        started = time.monotonic()
        retries: list[str] = []
        extra: dict = {}
        if self.config.top_p is not None:
            extra["top_p"] = self.config.top_p
        if self.config.seed is not None:
            extra["seed"] = self.config.seed + reseed
        if schema is not None:
            extra["response_format"] = self._response_format(schema)
        for attempt in range(self.config.max_retries + 1):
            try:
                response = self._client.chat.completions.create(
                    model=self.config.model, messages=messages,
                    temperature=self.config.temperature if temperature is None else temperature,
                    max_tokens=max_tokens or self.config.max_tokens, **extra)
            except self._openai.APIStatusError as exc:
                status = exc.status_code
                if status == 401:
                    raise LLMError(f"the endpoint refused the API key (401) at {self.config.base_url}: check "
                                   "OPENADAPT_API_KEY") from None
                if status == 404:
                    raise LLMError(f"the endpoint does not know model {self.config.model!r} (404) at "
                                   f"{self.config.base_url}") from None
                if status not in RETRYABLE_STATUS or attempt == self.config.max_retries:
                    raise LLMError(f"the endpoint answered HTTP {status}: {_short(exc)}") from None
                retries.append(f"HTTP {status}")
            except (self._openai.APIConnectionError, self._openai.APITimeoutError) as exc:
                if attempt == self.config.max_retries:
                    raise LLMError(f"the endpoint {self.config.base_url} did not answer after "
                                   f"{attempt + 1} tries ({type(exc).__name__})") from None
                retries.append(type(exc).__name__)
            else:
                choice = response.choices[0]
                usage = response.usage
                duration = time.monotonic() - started
                completion_tokens = getattr(usage, "completion_tokens", 0) or 0
                return Completion(
                    text=choice.message.content or "", finish_reason=choice.finish_reason,
                    usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                                completion_tokens=completion_tokens,
                                total_tokens=getattr(usage, "total_tokens", 0) or 0),
                    duration_s=round(duration, 3), retries=retries, constrained=schema is not None,
                    # Network and queueing included: an endpoint does not report its generation time.
                    tokens_per_s=round(completion_tokens / duration, 2) if duration > 0 and completion_tokens else None,
                )
            time.sleep(min(MAX_BACKOFF_S, self.config.backoff_s * 2**attempt))
        raise AssertionError("unreachable")

    def _response_format(self, schema: dict) -> dict:
        if self.config.schema_format == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": _schema_name(schema), "schema": schema,
                                                       "strict": self.config.schema_strict}}


def _schema_name(schema: dict) -> str:
    """OpenAI wants a name of [a-zA-Z0-9_-]{1,64}: the schema's title when it has one."""
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", str(schema.get("title") or "reply")).strip("_")
    return (name or "reply")[:64]


def _short(exc: Exception) -> str:
    return str(getattr(exc, "message", exc))[:200]
