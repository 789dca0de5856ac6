"""The shared kit: everything an openadapt environment needs that is not domain logic.

Generated and seed environments import only from here (plus OpenEnv and pydantic).
"""

from openadapt.kit.chaos import ChaosEvent, ChaosSchedule
from openadapt.kit.drift import FieldRename, FieldUse, SchemaDrift
from openadapt.kit.eci import DEFAULT_PROFILES, TIER_MEANINGS, Perturber, TierProfile
from openadapt.kit.environment import OpenAdaptEnvironment, Outcome
from openadapt.kit.models import MALFORMED_KEY, AgentAction, AgentObservation, EpisodeState
from openadapt.kit.policy import Policy, RandomPolicy
from openadapt.kit.progress import ProgressLedger
from openadapt.kit.protocol import ParsedCompletion, TextProtocol
from openadapt.kit.referee import OversightReferee
from openadapt.kit.repetition import RepeatRule, RepeatStreak, action_key
from openadapt.kit.rewards import RewardComponent, RewardComponents
from openadapt.kit.sqlsandbox import QueryRejected, QueryResult, ReadOnlySQL
from openadapt.kit.step_shaping import ShapedEnvironment
from openadapt.kit.text import grounded, is_stuffed, mentions

__all__ = [
    "DEFAULT_PROFILES",
    "MALFORMED_KEY",
    "TIER_MEANINGS",
    "AgentAction",
    "AgentObservation",
    "ChaosEvent",
    "ChaosSchedule",
    "EpisodeState",
    "FieldRename",
    "FieldUse",
    "OpenAdaptEnvironment",
    "Outcome",
    "OversightReferee",
    "ParsedCompletion",
    "Perturber",
    "Policy",
    "ProgressLedger",
    "QueryRejected",
    "QueryResult",
    "RandomPolicy",
    "ReadOnlySQL",
    "RepeatRule",
    "RepeatStreak",
    "RewardComponent",
    "RewardComponents",
    "SchemaDrift",
    "ShapedEnvironment",
    "TextProtocol",
    "TierProfile",
    "action_key",
    "grounded",
    "is_stuffed",
    "mentions",
]
