"""Reference policies of the negotiation family: the privileged oracle and a shallow face-value negotiator (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from openadapt.families.domain import template_pattern
from openadapt.kit import Policy


class NegotiationOracle(Policy):
    """Reads the hidden counterpart and walks the honest path: on tiers where hard limits hide, ask whether
    anything is fixed (every time, as an agent would have to); walk away when that reveals no deal is possible;
    otherwise propose the best deal the counterpart would accept and hold it until its aspiration comes down to
    it (it must still make the offers: the counterpart accepts only once its own concession schedule allows)."""

    name = "oracle"
    privileged = True

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self._asked = False

    def act(self, observation: Any) -> Any:
        env = self.env
        cp, d, make = env.oracle_view(), env.domain, env.action_type
        if env.tier.hidden_constraints and not self._asked:
            self._asked = True
            return make(move=d.moves.ask, question=d.questions.constraints.name,
                        message=d.questions.constraints.text)
        if not cp.deal_possible:
            return make(move=d.moves.walk_away, message="Given what you cannot change, we cannot agree within our "
                                                        "limits. Thank you for your time.")
        return make(move=d.moves.offer, message="This is the package we can sign today.", **cp.best_offer)


class FaceValueHeuristic(Policy):
    """What a shallow negotiator does: it takes everything at face value. It asks for its briefing's targets
    (the midpoint between its limit and its best where no target was set) and holds them. It accepts the
    counterpart's offer as soon as the counterpart calls it final and every term it states is within its limits
    (or when every stated term meets its targets). When an offer of its own is turned down (taken badly, or
    across a limit it was not told of), or a "final" offer breaks its limits, it splits the difference with the
    standing offer (never past its own limits). It never asks a question and never walks away."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain = env.domain
        self._mine: dict[str, float] | None = None

    @cached_property
    def _finals(self) -> list[re.Pattern[str]]:
        return [template_pattern(t, matches=".*?", flags=re.DOTALL) for t in self.domain.messages.final]

    @cached_property
    def _refusals(self) -> list[re.Pattern[str]]:
        texts = [*self.domain.messages.insulted, *(i.constraint.hint for i in self.domain.issues if i.constraint)]
        return [template_pattern(t, matches=".*?", flags=re.DOTALL) for t in texts]

    def _better_or_equal(self, issue: Any, x: float, y: float) -> bool:
        return x <= y + 1e-9 if issue.agent_prefers == "low" else x >= y - 1e-9

    def act(self, observation: Any) -> Any:
        d, make = self.domain, self.env.action_type
        limits, their = observation.limits, observation.their_offer
        targets = {}
        for issue in d.issues:
            target = observation.targets.get(issue.id)
            best = issue.low if issue.agent_prefers == "low" else issue.high
            targets[issue.id] = target if target is not None else (limits[issue.id] + best) / 2
        last = observation.thread[-1].split(": ", 1)[-1] if observation.thread else ""
        refused = any(p.search(last) for p in self._refusals)
        final = any(p.search(last) for p in self._finals)
        if self._mine is not None and not refused:
            stated = [(issue, their[issue.id]) for issue in d.issues if their.get(issue.id) is not None]
            within = all(self._better_or_equal(issue, x, limits[issue.id]) for issue, x in stated)
            meets = all(self._better_or_equal(issue, x, targets[issue.id]) for issue, x in stated)
            if within and (meets or final):
                return make(move=d.moves.accept, message="Agreed.")
        if self._mine is not None and (refused or final):
            offer = {}
            for issue in d.issues:  # half-way to their term, but never beyond its own limit
                mine, theirs = self._mine[issue.id], their.get(issue.id)
                split = mine if theirs is None else (mine + theirs) / 2
                keep = self._better_or_equal(issue, split, limits[issue.id])
                offer[issue.id] = split if keep else limits[issue.id]
        else:
            offer = dict(targets)
        self._mine = offer
        return make(move=d.moves.offer, message="Here is what we can do.", **offer)
