"""The shared kit: everything an openadapt environment needs that is not domain logic.

Generated and seed environments import only from here (plus OpenEnv and pydantic).
"""

from openadapt.kit.eci import DEFAULT_PROFILES, TIER_MEANINGS, Perturber, TierProfile
from openadapt.kit.environment import OpenAdaptEnvironment, Outcome
from openadapt.kit.models import MALFORMED_KEY, AgentAction, AgentObservation, EpisodeState
from openadapt.kit.policy import Policy, RandomPolicy
from openadapt.kit.protocol import ParsedCompletion, TextProtocol
from openadapt.kit.rewards import RewardComponent, RewardComponents
from openadapt.kit.text import grounded, is_stuffed, mentions

__all__ = [
    "DEFAULT_PROFILES",
    "MALFORMED_KEY",
    "TIER_MEANINGS",
    "AgentAction",
    "AgentObservation",
    "EpisodeState",
    "OpenAdaptEnvironment",
    "Outcome",
    "ParsedCompletion",
    "Perturber",
    "Policy",
    "RandomPolicy",
    "RewardComponent",
    "RewardComponents",
    "TextProtocol",
    "TierProfile",
    "grounded",
    "is_stuffed",
    "mentions",
]
