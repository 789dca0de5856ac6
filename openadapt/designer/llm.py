"""The LLM backend: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp server, a
hosted router) through the `openai` client.

Configuration comes from flags or the environment: `OPENADAPT_BASE_URL` (or `OPENAI_BASE_URL`),
`OPENADAPT_MODEL`, `OPENADAPT_API_KEY` (or `OPENAI_API_KEY`). The key is held in memory only: it is never written
to provenance, logs, reports or the sandbox.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from openadapt.errors import OpenAdaptError, UsageError

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


class LLMError(OpenAdaptError):
    """The endpoint refused or failed; the message says what to check."""

    exit_code = 4


class LLMConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    api_key: str = Field(default="", repr=False, exclude=True)  # never serialised
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    temperature: float = 0.2
    max_tokens: int = 8192

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


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens


@dataclass
class Completion:
    text: str
    finish_reason: str | None
    usage: Usage
    duration_s: float
    retries: list[str] = field(default_factory=list)  # why each retry happened


class LLMClient:
    """Chat completions with timeouts and retries (exponential backoff on 429/5xx/connection errors)."""

    def __init__(self, config: LLMConfig):
        import openai

        self.config = config
        self._openai = openai
        # Retries are ours (so they are recorded); the client's own are off.
        self._client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key or "not-needed",
                                     timeout=config.timeout_s, max_retries=0)

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        started = time.monotonic()
        retries: list[str] = []
        for attempt in range(self.config.max_retries + 1):
            try:
                response = self._client.chat.completions.create(
                    model=self.config.model, messages=messages, temperature=self.config.temperature,
                    max_tokens=self.config.max_tokens)
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
                return Completion(
                    text=choice.message.content or "", finish_reason=choice.finish_reason,
                    usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                                total_tokens=getattr(usage, "total_tokens", 0) or 0),
                    duration_s=round(time.monotonic() - started, 3), retries=retries,
                )
            time.sleep(self.config.backoff_s * 2**attempt)
        raise AssertionError("unreachable")


def _short(exc: Exception) -> str:
    return str(getattr(exc, "message", exc))[:200]
