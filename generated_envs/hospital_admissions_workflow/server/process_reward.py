"""Process reward: a small bonus for reasoning that names what the agent is looking at (the seed's numbers).

- a blocked task in view: +0.05 for naming it as blocked ("block" and its id);
- the schema has drifted: +0.05 for saying so ("schema" and the new field name);
- SLA pressure (an open task with at most 2 steps left): +0.03 for naming it ("SLA" and its id).

Guards against keyword stuffing: each kind pays once per episode; a reasoning that names a condition it cannot
point at in the observation (the word without a matching id or field) earns nothing that step; naming all three
kinds at once, or listing four or more task ids, is stuffing and costs `STUFFING_PENALTY`; a reasoning longer
than `MAX_WORDS` earns nothing. Bonuses are paid only for actions the environment accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openadapt.kit import is_stuffed, mentions

try:
    from .world import World
except ImportError:  # standalone `uvicorn server.app:app`
    from server.world import World

BONUSES: dict[str, float] = {"blocked": 0.05, "drift": 0.05, "sla": 0.03}
STUFFING_PENALTY = 0.05
SLA_PRESSURE = 2
MAX_WORDS = 60
STUFFED_IDS = 4
_TERMS: dict[str, re.Pattern[str]] = {
    "blocked": re.compile(r"\bblock", re.IGNORECASE),
    "drift": re.compile(r"\bschema", re.IGNORECASE),
    "sla": re.compile(r"\bslas?\b", re.IGNORECASE),
}


@dataclass(frozen=True, slots=True)
class Judgement:
    earned: dict[str, float] = field(default_factory=dict)
    stuffed: bool = False


def in_view(world: World, step: int) -> dict[str, list[str]]:
    """For each kind, what the observation of `step` shows that a reasoning must name to claim it."""
    return {
        "blocked": [t.id for t in world.tasks if t.open and t.status == "blocked"],
        "drift": [r.new for r in world.drift.fired(step)],
        "sla": [t.id for t in world.tasks if t.open and t.deadline - step <= SLA_PRESSURE],
    }


def judge(reasoning: str, world: World, step: int) -> Judgement:
    """Score the reasoning of an action that answers the observation of `step`."""
    if not reasoning.strip():
        return Judgement()
    named = [kind for kind, term in _TERMS.items() if term.search(reasoning)]
    if len(named) == len(_TERMS) or is_stuffed(reasoning, [t.id for t in world.tasks], limit=STUFFED_IDS):
        return Judgement(stuffed=True)
    if not named or len(reasoning.split()) > MAX_WORDS:
        return Judgement()
    seen = in_view(world, step)
    if any(not mentions(reasoning, seen[kind]) for kind in named):
        return Judgement()
    return Judgement({kind: BONUSES[kind] for kind in named if kind not in world.prm_earned})
