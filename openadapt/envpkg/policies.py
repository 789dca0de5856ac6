"""The names `--policy` takes: the reference policies every package ships, or a trained run (`model:RUN_DIR`).

Cheap to import (no OpenEnv), so a bad name is refused before any environment loads.
"""

from __future__ import annotations

from openadapt.errors import UsageError

POLICIES = ("oracle", "heuristic", "random")
MODEL_PREFIX = "model:"


def unknown_policy(name: str) -> UsageError:
    return UsageError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}, or model:RUN_DIR")


def check_policy_name(name: str) -> str:
    """`name` when it names a reference policy or `model:RUN_DIR`; UsageError otherwise."""
    if name in POLICIES:
        return name
    if name.startswith(MODEL_PREFIX):
        if not name[len(MODEL_PREFIX):].strip():
            raise UsageError("model: needs the run directory: --policy model:RUN_DIR")
        return name
    raise unknown_policy(name)
