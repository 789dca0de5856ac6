"""The shared kit: everything an openadapt environment needs that is not domain logic.

Environments (family engines, custom mechanics) import only from here (plus OpenEnv and pydantic). Names are
exported lazily, so `from openadapt.kit.eci import Tier` does not pay OpenEnv's import (~6 s, gradio): only the
names that need OpenEnv load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ChaosEvent": "chaos", "ChaosSchedule": "chaos",
    "FieldRename": "drift", "FieldUse": "drift", "SchemaDrift": "drift",
    "DEFAULT_PROFILES": "eci", "TIER_MEANINGS": "eci", "TIERS": "eci", "Perturber": "eci", "Tier": "eci",
    "TierProfile": "eci",
    "OpenAdaptEnvironment": "environment", "Outcome": "environment",
    "MALFORMED_KEY": "models", "AgentAction": "models", "AgentObservation": "models", "EpisodeState": "models",
    "Policy": "policy", "RandomPolicy": "policy",
    "ProgressLedger": "progress",
    "ParsedCompletion": "protocol", "TextProtocol": "protocol",
    "OversightReferee": "referee",
    "RepeatRule": "repetition", "RepeatStreak": "repetition", "action_key": "repetition",
    "RewardComponent": "rewards", "RewardComponents": "rewards",
    "PackageSection": "section",
    "QueryRejected": "sqlsandbox", "QueryResult": "sqlsandbox", "ReadOnlySQL": "sqlsandbox",
    "ShapedEnvironment": "step_shaping",
    "grounded": "text", "is_stuffed": "text", "mentions": "text",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openadapt.kit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"openadapt.kit.{module}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from openadapt.kit.chaos import ChaosEvent, ChaosSchedule  # noqa: F401
    from openadapt.kit.drift import FieldRename, FieldUse, SchemaDrift  # noqa: F401
    from openadapt.kit.eci import DEFAULT_PROFILES, TIER_MEANINGS, TIERS, Perturber, Tier, TierProfile  # noqa: F401
    from openadapt.kit.environment import OpenAdaptEnvironment, Outcome  # noqa: F401
    from openadapt.kit.models import MALFORMED_KEY, AgentAction, AgentObservation, EpisodeState  # noqa: F401
    from openadapt.kit.policy import Policy, RandomPolicy  # noqa: F401
    from openadapt.kit.progress import ProgressLedger  # noqa: F401
    from openadapt.kit.protocol import ParsedCompletion, TextProtocol  # noqa: F401
    from openadapt.kit.referee import OversightReferee  # noqa: F401
    from openadapt.kit.repetition import RepeatRule, RepeatStreak, action_key  # noqa: F401
    from openadapt.kit.rewards import RewardComponent, RewardComponents  # noqa: F401
    from openadapt.kit.section import PackageSection  # noqa: F401
    from openadapt.kit.sqlsandbox import QueryRejected, QueryResult, ReadOnlySQL  # noqa: F401
    from openadapt.kit.step_shaping import ShapedEnvironment  # noqa: F401
    from openadapt.kit.text import grounded, is_stuffed, mentions  # noqa: F401
