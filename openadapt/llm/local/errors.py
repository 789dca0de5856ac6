"""The local backend's errors: each reaches the user as one line that names the command that fixes it."""

from __future__ import annotations

from openadapt.errors import OpenAdaptError, UsageError
from openadapt.llm.chat import LLMError


class ModelNotInstalledError(UsageError):
    """A catalogue model that is not in the cache (or a model file path that does not exist)."""


class ModelCorruptError(UsageError):
    """A model file whose size or sha256 is not the pinned one, or a file that is not GGUF."""


class PullError(OpenAdaptError):
    """Downloading or joining a model's parts failed (network, index, a part that is not what was pinned)."""


class LocalLLMError(LLMError):
    """llama.cpp is missing, could not load the model, or failed during a call."""


def fix_command(model_id: str) -> str:
    return f"openadapt models pull {model_id}"
