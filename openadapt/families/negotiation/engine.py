"""The negotiation engine: a simulated counterpart with hidden priorities, a reservation, a concession style,
patience and (on harder tiers) a hard constraint, over several rounds of offers and counter-offers.

Utilities are additive over the issues. An issue's value `v` runs from the counterpart's best end (0) to the
agent's best end (1) of its range; the agent's utility is `sum(w_agent * v)`, the counterpart's
`sum(w_them * (1 - v))`. Each agent message is one round `t`. The counterpart's aspiration falls from 1 (its
opening: its list terms) to its reservation `r` at its floor round `T` along `r + (1 - r) * (1 - (t/T)^(1/e))`
(`e`: its concession style, tougher with the tier's depth). It accepts an offer worth at least its aspiration
to it; otherwise it counters, moving from its list terms toward the agent's offer until the counter is worth its
aspiration. An offer worth less than `r - insult_margin` to it insults it and costs patience; it walks away two
rounds after its floor round (one on the top tier), sooner for each insult.

The reward compares the deal with the best deal achievable given the hidden state: the agent's utility gain over
its walk-away limits, as a share of the largest gain any deal the counterpart would accept (within the agent's
limits and the counterpart's hidden constraint) offers. Nothing here knows what the issues are: the domain says.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.negotiation.domain import (
    Issue,
    NegotiationDomain,
    Persona,
    agent_value,
    decimals,
    issue_line,
)
from openadapt.kit import Outcome, TierProfile

CONCESSION_EXPONENT = {"boulware": 0.35, "linear": 1.0, "conceder": 2.5}
TOUGHNESS = 0.6  # each level of tier depth multiplies the concession exponent by this (holds firm longer)
GRACE_ROUNDS = 2  # the counterpart walks away this many rounds after reaching its floor (one less per depth past 1)
SOLVED_SHARE = 0.85  # a deal is solved when it captures at least this share of the achievable gain
CONSTRAINT_RATE = 0.7  # share of hidden-constraint-tier episodes with a hard limit (+0.2 per depth level past 1)
DECOY_PER_DISTRACTOR = 0.2  # chance of a red herring per distractor of the tier (3: 0.6, 5: always)
NO_DEAL_RATE = 0.25  # share of those in which the limit leaves no deal within the agent's limits
TARGET_SLACK = (0.02, 0.06)  # the briefing's targets sit this far (counterpart utility) beyond its reservation
SURPLUS_FLOOR = 0.08  # the reservation never leaves the counterpart less than this above the agent's limits
EPS = 1e-9
OMIT_RATE = 0.5  # share of the tier's drop rate at which a counter-offer leaves one term out
NO_DEAL_DEPTH = 0.15  # the no-deal share grows by this per depth level past 1
_SENTENCE = re.compile(r"(^|[.!?] )([a-z])")

# Reward weights (components below).
DEAL, CONDUCT, BREACH, CONDUCT_COST = 0.80, 0.20, -0.50, 0.05


@dataclass
class Counterpart:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    name: str
    persona: Persona
    weights: dict[str, float]  # the counterpart's, normalised
    reservation: float
    exponent: float
    floor_round: int  # T: the round at which its aspiration reaches its reservation
    constraint: tuple[str, float] | None  # (issue id, bound value): it cannot go beyond the bound for the agent
    deal_possible: bool
    decoy: str | None  # an issue it claims to care about but does not
    bluff_rounds: set[int]  # rounds before its floor in which it calls a counter final
    anchor_rounds: dict[int, tuple[str, float]]  # round -> (issue id, claimed value)
    omitted: dict[int, str]  # round -> the issue its message leaves out (noisy tiers)
    best_offer: dict[str, float]  # the best deal it would accept, on the grid (what the oracle proposes)
    best_gain: float  # the agent's utility gain over its limits of that deal (the reward's reference)
    reveal: str = ""  # what it says when asked about constraints (a secret until asked)


@dataclass
class Briefing:
    """The agent's side of one episode (shown to the agent)."""

    subject: str
    weights: dict[str, float]  # the agent's, normalised (the briefing shows them as percentages)
    percent: dict[str, int]
    limits: dict[str, float]
    targets: dict[str, float | None]
    floor_utility: float  # the agent's utility at its limits


@dataclass
class Verdict:
    deal: float = 0.0
    conduct: float = 0.0
    penalty: float = 0.0
    solved: bool = False
    share: float = 0.0


@dataclass
class Talk:
    """What the episode has said and done so far."""

    thread: list[str] = field(default_factory=list)
    standing: dict[str, float] = field(default_factory=dict)  # the counterpart's standing offer (full terms)
    stated: dict[str, float | None] = field(default_factory=dict)  # as its last message states it
    yours: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)  # question role -> the counterpart's answer
    revealed: bool = False
    insults: int = 0
    violations: int = 0
    walk_round: int = 0
    deal: dict[str, float] | None = None
    status: str = "open"


def _sentences(text: str) -> str:
    """Capitalise a sentence that starts with a filled-in phrase ('a unit price of ...' -> 'A unit price of')."""
    return _SENTENCE.sub(lambda m: m.group(1) + m.group(2).upper(), text)


class _Uniforms:
    """The tier mechanics' random numbers for one episode, always drawn in the same order and number (whatever
    the tier), so that each mechanic compares the same uniform with its tier's knob."""

    def __init__(self, rng: random.Random, issues: int, rounds: int):
        draw = rng.random
        self.decoy, self.decoy_pick = draw(), draw()
        self.constraint, self.no_deal, self.constraint_pick, self.bound = draw(), draw(), draw(), draw()
        rounds = range(rounds + 1)
        self.bluff = [draw() for _ in rounds]
        self.anchor, self.anchor_pick, self.anchor_value = ([draw() for _ in rounds] for _ in range(3))
        self.omit, self.omit_pick = [draw() for _ in rounds], [draw() for _ in rounds]
        self.target_noise, self.target_shift = [draw() for _ in range(issues)], [draw() for _ in range(issues)]
        self.target_missing, self.target_pick = draw(), draw()


class NegotiationEnvironment(FamilyEnvironment):
    domain: ClassVar[NegotiationDomain]
    REWARD = (
        ("deal", 0.0, DEAL, "0.80 x the share of the achievable gain over your limits that the deal captures "
         "(a justified walk-away when no deal is possible: 0.80)"),
        ("conduct", 0.0, CONDUCT, "0.20 for meeting the bar (a deal worth at least 85% of the achievable gain, "
         "or walking away when no deal is possible, once told why), less 0.05 per insulting offer and per offer "
         "across its hard limit after the first"),
        ("penalty", BREACH, 0.0, "-0.50 for a deal that breaks your limits"),
    )

    # ---- the domain, indexed once per class -----------------------------------------------------------
    @per_domain
    def _index(cls) -> dict[str, Any]:
        d = cls.domain
        return {
            "issues": {i.id: i for i in d.issues},
            "ids": tuple(i.id for i in d.issues),
            "grid": {i.id: i.step / (i.high - i.low) for i in d.issues},
            "decimals": {i.id: decimals(i.step) for i in d.issues},
            "questions": {q.name: role for role, q in ((r, getattr(d.questions, r)) for r in
                                                      ("priorities", "constraints", "timeline"))},
        }

    # ---- value helpers ----------------------------------------------------------------------------------
    def _v(self, issue_id: str, x: float) -> float:
        return agent_value(self._index()["issues"][issue_id], x)

    def _x(self, issue_id: str, v: float) -> float:
        """The value at agent-value `v`, on the issue's grid (nearest point)."""
        issue: Issue = self._index()["issues"][issue_id]
        span = issue.high - issue.low
        x = issue.high - v * span if issue.agent_prefers == "low" else issue.low + v * span
        return self._snap(issue_id, x)

    def _snap(self, issue_id: str, x: float) -> float:
        issue: Issue = self._index()["issues"][issue_id]
        k = round((x - issue.low) / issue.step)
        return round(min(issue.high, max(issue.low, issue.low + k * issue.step)), 9)

    def _v_toward_them(self, issue_id: str, v: float) -> float:
        """`v` rounded down to the grid (in the counterpart's favour)."""
        s = self._index()["grid"][issue_id]
        return max(0.0, min(1.0, int(v / s + EPS) * s))

    def _agent_utility(self, terms: dict[str, float]) -> float:
        return sum(w * self._v(i, terms[i]) for i, w in self._brief.weights.items())

    def _their_utility(self, terms: dict[str, float]) -> float:
        return sum(w * (1.0 - self._v(i, terms[i])) for i, w in self._cp.weights.items())

    def _aspiration(self, t: int) -> float:
        cp = self._cp
        progress = min(1.0, t / cp.floor_round)
        return cp.reservation + (1.0 - cp.reservation) * (1.0 - progress ** (1.0 / cp.exponent))

    def fmt(self, issue_id: str, x: float) -> str:
        return f"{x:.{self._index()['decimals'][issue_id]}f}"

    def phrase(self, issue_id: str, x: float) -> str:
        return fill(self._index()["issues"][issue_id].phrase, value=self.fmt(issue_id, x))

    def offer_text(self, terms: dict[str, float | None]) -> str:
        parts = [self.phrase(i, x) for i, x in terms.items() if x is not None]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        # Common random numbers across tiers: the negotiation itself comes from `base` and every tier mechanic
        # from a fixed set of uniforms in `mech`, compared with the tier's knobs. The same seed is the same
        # negotiation at every tier, and a higher tier's distractors, omissions and constraints contain the
        # lower tier's: tiers differ by their mechanics, not by the luck of the draw.
        base, mech, words = (random.Random(rng.getrandbits(64)) for _ in range(3))
        d, ix, p = self.domain, self._index(), self.perturb
        ids = ix["ids"]
        budget = self._state.step_budget
        persona = base.choice(d.personas)
        name, subject = base.choice(d.counterparts), base.choice(d.subjects)

        # The agent's side: priorities (whole percentages: exactly what the briefing shows) and limits.
        raw = {i.id: i.agent_weight * base.uniform(0.8, 1.25) for i in d.issues}
        percent = _percentages(raw)
        weights = {i: percent[i] / 100 for i in ids}
        limits = {i.id: self._snap(i.id, base.uniform(*i.limit)) for i in d.issues}
        lim_v = {i: self._v(i, limits[i]) for i in ids}

        # The counterpart: its priorities (straying further from its type on noisy tiers), a red herring,
        # its reservation, its floor round and its concession style (tougher with depth).
        spread = 0.15 + tier.noise
        theirs = {i: persona.weights[i] * math.exp(spread * base.uniform(-1.0, 1.0)) for i in ids}
        reservation_draw, floor_draw, slack = (base.uniform(*persona.reservation),
                                               base.randint(*persona.patience), base.uniform(*TARGET_SLACK))
        top = max(ids, key=lambda i: theirs[i])
        u = _Uniforms(mech, len(ids), max(self.section.step_budget.values()))
        decoy = None
        if tier.distractors and u.decoy < min(1.0, tier.distractors * DECOY_PER_DISTRACTOR):
            others = [i for i in ids if i != top]
            decoy = others[int(u.decoy_pick * len(others))]
            theirs[decoy] = 0.0
        total = sum(theirs.values())
        theirs = {i: w / total for i, w in theirs.items()}
        at_limits = sum(theirs[i] * (1 - lim_v[i]) for i in ids)
        reservation = max(0.02, min(reservation_draw, at_limits - SURPLUS_FLOOR))
        floor_round = min(max(2, floor_draw), budget - 1)
        exponent = CONCESSION_EXPONENT[persona.concession] * TOUGHNESS ** tier.depth
        grace = max(1, GRACE_ROUNDS - max(0, tier.depth - 1))

        # What is achievable without the hidden constraint (the agent's own analysis: its targets).
        open_box = {i: 1.0 for i in ids}
        free = _best_deal(weights, theirs, reservation, lim_v, open_box)
        room = sum(theirs[i] * (1 - free[i]) for i in ids)
        reach = room - (reservation - slack)
        lam = min(1.0, max(0.0, reach / room)) if room > EPS else 0.0
        target_v = {i: free[i] + lam * (1 - free[i]) for i in ids}

        # The hidden constraint (a hard limit on one issue) on hidden-constraint tiers.
        constraint, possible, reveal = None, True, ""
        rate = min(1.0, CONSTRAINT_RATE + 0.2 * max(0, tier.depth - 1))
        if tier.hidden_constraints and u.constraint < rate:
            constraint, possible = self._hard_limit(u, tier, free, lim_v)
            if constraint is not None:
                k, bound = constraint
                reveal = fill(ix["issues"][k].constraint.reveal, value=self.phrase(k, bound), counterpart=name)

        box = dict(open_box)
        if constraint is not None:
            box[constraint[0]] = self._v(*constraint)
        best_gain, best_offer = 0.0, {}
        if possible:
            best_v = self._on_grid(_best_deal(weights, theirs, reservation, lim_v, box), weights, theirs,
                                   reservation, box)
            best_gain = sum(weights[i] * (best_v[i] - lim_v[i]) for i in ids)
            best_offer = {i: self._x(i, best_v[i]) for i in ids}

        # Distractors (bluffed finals, anchoring claims) and omissions, for every round up front.
        bluffs = {t for t in range(1, floor_round) if u.bluff[t] < tier.distractors / 12}
        anchored = sorted(range(1, floor_round + 1), key=lambda t: u.anchor[t])[:tier.distractors // 2]
        anchor_rounds = {t: (ids[int(u.anchor_pick[t] * len(ids))], u.anchor_value[t]) for t in anchored}
        anchor_rounds = {t: (k, self._x(k, 0.6 * v * lim_v[k])) for t, (k, v) in anchor_rounds.items()}
        omitted = {t: ids[int(u.omit_pick[t] * len(ids))] for t in range(1, budget + 1)
                   if u.omit[t] < tier.drop * OMIT_RATE}

        targets: dict[str, float | None] = {}
        for n, i in enumerate(ids):
            v = target_v[i]
            if u.target_noise[n] < tier.noise:
                v = min(1.0, max(lim_v[i], v + 0.3 * (u.target_shift[n] - 0.5)))
            targets[i] = self._x(i, v)
        if u.target_missing < tier.drop:
            targets[ids[int(u.target_pick * len(ids))]] = None

        self._cp = Counterpart(
            name=name, persona=persona, weights=theirs, reservation=reservation, exponent=exponent,
            floor_round=floor_round, constraint=constraint, deal_possible=possible, decoy=decoy,
            bluff_rounds=bluffs, anchor_rounds=anchor_rounds, omitted=omitted, best_offer=best_offer,
            best_gain=best_gain, reveal=reveal,
        )
        floor_utility = sum(weights[i] * lim_v[i] for i in ids)
        self._brief = Briefing(subject=subject, weights=weights, percent=percent, limits=limits, targets=targets,
                               floor_utility=floor_utility)
        opening = {i: self._x(i, 0.0) for i in ids}
        self._opening = opening
        self._talk = Talk(standing=dict(opening), stated=dict(opening), walk_round=floor_round + grace)
        self._verdict = Verdict()

        # The opening message: list terms, and what it lets slip (withheld or cut short on noisy tiers).
        lines = [fill(words.choice(d.messages.opening), counterpart=name, subject=subject,
                      offer=self.offer_text(opening))]
        tell = fill(words.choice(ix["issues"][decoy or top].priority_tells), counterpart=name)
        style = fill(words.choice(persona.style_tells), counterpart=name)
        claim = (lambda line: line == tell) if decoy is not None else (lambda line: False)  # a red herring is said
        extras = [line if claim(line) else p.truncate(line) for line in p.withhold([tell, style], protect=claim)]
        self._talk.thread.append(self._says(" ".join([*lines, *extras])))
        self._rng = words  # the counterpart's wording from here on

    def _hard_limit(self, u: _Uniforms, tier: TierProfile, free: dict[str, float],
                    lim_v: dict[str, float]) -> tuple[tuple[str, float] | None, bool]:
        """A hard limit on one issue that the counterpart cannot cross for the agent: between the agent's limit
        and what it could otherwise have had (a deal is still possible, the targets cross it), or, in a share of
        episodes growing with depth, short of the agent's limit (no deal is possible)."""
        d, grid = self.domain, self._index()["grid"]
        capable = [i.id for i in d.issues if i.constraint is not None]
        if u.no_deal < NO_DEAL_RATE + NO_DEAL_DEPTH * max(0, tier.depth - 1):
            k = capable[int(u.constraint_pick * len(capable))]
            steps = max(1, min(round(lim_v[k] / grid[k]), round(0.25 / grid[k])))
            bound_v = max(0.0, lim_v[k] - (1 + int(u.bound * steps)) * grid[k])
            return (k, self._x(k, bound_v)), False
        cut = [i for i in capable if free[i] - lim_v[i] >= 2 * grid[i] - EPS]
        if not cut:  # nothing to cut: this episode keeps no hard limit
            return None, True
        k = cut[int(u.constraint_pick * len(cut))]
        steps = round((free[k] - lim_v[k]) / grid[k])
        bound_v = lim_v[k] + (1 + int(u.bound * max(1, steps - 1))) * grid[k]
        return (k, self._x(k, min(bound_v, free[k] - grid[k]))), True

    def _on_grid(self, v: dict[str, float], mine: dict[str, float], theirs: dict[str, float], reservation: float,
                 box: dict[str, float]) -> dict[str, float]:
        """The continuous best deal on the issues' grids: rounded toward the counterpart (so it stays acceptable;
        limits and bounds are grid points, so they hold), then topped up one grid step at a time, best gain per
        unit of the counterpart's loss first, while the counterpart still values it at its reservation."""
        grid = self._index()["grid"]
        v = {i: self._v_toward_them(i, x + EPS) for i, x in v.items()}
        order = sorted(v, key=lambda i: -(mine[i] / max(theirs[i], EPS)))
        spare = sum(theirs[i] * (1 - v[i]) for i in v) - reservation
        moved = True
        while moved:
            moved = False
            for i in order:
                up = min(box[i], v[i] + grid[i])
                cost = theirs[i] * (up - v[i])
                if up > v[i] + EPS and cost <= spare + EPS:
                    v[i], spare, moved = up, spare - cost, True
                    break
        return v

    def _says(self, text: str) -> str:
        return f"{self._cp.name}: {_sentences(text)}"

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        moves, talk = self.domain.moves, self._talk
        if action.move is None:
            names = ", ".join(moves.model_dump().values())
            return Outcome(f"Say which move to make: one of {names}.", error="missing_move")
        t = self._state.step_count
        if action.move == moves.offer:
            ids = self._index()["ids"]
            missing = [i for i in ids if getattr(action, i, None) is None]
            if missing:
                return Outcome(f"An offer names every term; missing: {', '.join(missing)}.", error="incomplete_offer")
            terms = {i: self._snap(i, float(getattr(action, i))) for i in ids}
            outcome = self._offer(terms, action.message, t)
        elif action.move == moves.ask:
            if action.question is None:
                names = ", ".join(q["name"] for q in self.domain.questions.model_dump().values())
                return Outcome(f"{moves.ask} needs a question: one of {names}.", error="missing_question")
            outcome = self._ask(action.question, t)
        elif action.move == moves.accept:
            deal = {i: (x if x is not None else self._opening[i]) for i, x in talk.stated.items()}
            talk.deal, talk.status = deal, "agreed"
            talk.thread.append(f"you: {action.message or 'We accept your offer.'} [accepted: {self.offer_text(deal)}]")
            talk.thread.append(self._says(fill(self._rng.choice(self.domain.messages.confirm),
                                               offer=self.offer_text(deal), counterpart=self._cp.name,
                                               subject=self._brief.subject)))
            outcome = Outcome(f"You accepted: {self.offer_text(deal)}.", terminal=True)
        else:  # walk away
            talk.status = "you walked away"
            talk.thread.append(f"you: {action.message or 'We will not be able to agree this time.'} [walked away]")
            outcome = Outcome("You walked away without a deal.", terminal=True)
        if not outcome.terminal and t >= talk.walk_round:
            talk.status = "they walked away"
            talk.thread.append(self._says(self._line("walk_away")))
            outcome = Outcome(outcome.feedback + f" {self._cp.name} walked away.", terminal=True)
        self._score()
        outcome.solved = self._verdict.solved
        return outcome

    def _line(self, kind: str, **values: Any) -> str:
        return fill(self._rng.choice(getattr(self.domain.messages, kind)), counterpart=self._cp.name,
                    subject=self._brief.subject, **values)

    def _offer(self, terms: dict[str, float], message: str, t: int) -> Outcome:
        cp, talk = self._cp, self._talk
        talk.yours = dict(terms)
        talk.thread.append(f"you: {message or 'Here is our proposal.'} [offer: {self.offer_text(terms)}]")
        value = self._their_utility(terms)
        hint = ""
        if cp.constraint is not None and self._breaks_constraint(terms):
            # It says why it cannot, without the number, and counters within its hard limit.
            talk.violations += 1
            if talk.violations > 1:
                talk.walk_round -= 1
            hint = fill(self._index()["issues"][cp.constraint[0]].constraint.hint, counterpart=cp.name) + " "
        elif value < cp.reservation - cp.persona.insult_margin:
            talk.insults += 1
            talk.walk_round -= 1
            talk.thread.append(self._says(self._line("insulted")))
            return Outcome("They took the offer badly and did not counter.")
        elif value >= self._aspiration(t) - EPS:
            talk.deal, talk.status = dict(terms), "agreed"
            talk.thread.append(self._says(self._line("accept", offer=self.offer_text(terms))))
            return Outcome(f"They accepted your offer: {self.offer_text(terms)}.", terminal=True)
        counter = self._counter(terms, self._aspiration(t))
        stated: dict[str, float | None] = dict(counter)  # (crossing its hard limit, the counter stays within it)
        if t in cp.omitted:
            stated[cp.omitted[t]] = None
        talk.standing, talk.stated = counter, stated
        kind = "final" if t >= cp.floor_round or t in cp.bluff_rounds else "counter"
        text = hint + self._line(kind, offer=self.offer_text(stated))
        if t in cp.anchor_rounds:
            k, claim = cp.anchor_rounds[t]
            text += " " + self._line("anchors", issue=self._index()["issues"][k].label, value=self.phrase(k, claim))
        talk.thread.append(self._says(text))
        return Outcome("They turned it down and countered." if hint else "They countered.")

    def _breaks_constraint(self, terms: dict[str, float]) -> bool:
        k, bound = self._cp.constraint
        return self._v(k, terms[k]) > self._v(k, bound) + EPS

    def _counter(self, toward: dict[str, float], aspiration: float) -> dict[str, float]:
        """From its list terms toward the agent's offer, as far as its aspiration allows; it holds a red herring
        at its list value and never crosses its hard limit. Rounded on the grid in its own favour."""
        cp, ids = self._cp, self._index()["ids"]
        target = {i: self._v(i, toward[i]) for i in ids}
        cap = {i: 1.0 for i in ids}
        if cp.constraint is not None:
            cap[cp.constraint[0]] = self._v(*cp.constraint)

        def shape(lam: float) -> dict[str, float]:
            return {i: 0.0 if i == cp.decoy else min(cap[i], lam * target[i]) for i in ids}

        def worth(vs: dict[str, float]) -> float:
            return sum(cp.weights[i] * (1.0 - vs[i]) for i in ids)

        low, high = 0.0, 1.0
        if worth(shape(1.0)) < aspiration:
            for _ in range(40):
                mid = (low + high) / 2
                low, high = (mid, high) if worth(shape(mid)) >= aspiration else (low, mid)
        else:
            low = 1.0
        return {i: self._x(i, self._v_toward_them(i, v)) for i, v in shape(low).items()}

    def _ask(self, name: str, t: int) -> Outcome:
        cp, talk, d = self._cp, self._talk, self.domain
        role = self._index()["questions"][name]
        talk.thread.append(f"you: {getattr(d.questions, role).text}")
        if role in talk.answers:  # asked again: the same answer, and a turn gone
            talk.thread.append(talk.answers[role])
            return Outcome("You already asked that; the answer is the same.")
        if role == "priorities":
            ranked = sorted(cp.weights, key=lambda i: -cp.weights[i])
            labels = self._index()["issues"]
            text = self._line("priorities", top=labels[ranked[0]].label, least=labels[ranked[-1]].label)
        elif role == "constraints":
            talk.revealed = True
            text = cp.reveal if cp.constraint is not None else self._line("no_constraints")
        else:
            text = self._line("timeline", rounds=max(0, talk.walk_round - t))
        talk.answers[role] = self._says(text)
        talk.thread.append(talk.answers[role])
        return Outcome("They answered.")

    def _score(self) -> None:
        cp, talk, brief = self._cp, self._talk, self._brief
        verdict = Verdict()
        conduct = max(0.0, CONDUCT - CONDUCT_COST * (talk.insults + max(0, talk.violations - 1)))
        if talk.deal is not None:
            within = all(self._v(i, talk.deal[i]) >= self._v(i, brief.limits[i]) - EPS for i in talk.deal)
            if not within:
                verdict.penalty = BREACH
            elif cp.best_gain > EPS:
                gain = self._agent_utility(talk.deal) - brief.floor_utility
                verdict.share = min(1.0, max(0.0, gain / cp.best_gain))
                verdict.deal = DEAL * verdict.share
                verdict.solved = verdict.share >= SOLVED_SHARE - EPS
                verdict.conduct = conduct if verdict.solved else 0.0
        elif talk.status == "you walked away" and not cp.deal_possible and talk.revealed:
            verdict.share, verdict.deal, verdict.conduct, verdict.solved = 1.0, DEAL, conduct, True
        self._verdict = verdict

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        return {
            "briefing": self._briefing_lines(),
            "issues": self._issue_lines(),
            "priorities": dict(self._brief.percent),
            "limits": dict(self._brief.limits),
            "targets": dict(self._brief.targets),
            "thread": list(self._talk.thread),
            "their_offer": dict(self._talk.stated),
            "your_offer": dict(self._talk.yours),
            "status": self._talk.status,
        }

    def _briefing_lines(self) -> list[str]:
        d, b, ix = self.domain, self._brief, self._index()
        lines = [f"You are {d.agent_role}, negotiating {b.subject} with {self._cp.name}, {d.counterpart_role}, by "
                 f"{d.medium}.", "Your side's priorities: " + ", ".join(
                     f"{ix['issues'][i].label} {pct}%" for i, pct in b.percent.items()) + "."]
        for i in ix["ids"]:
            issue = ix["issues"][i]
            bound = "at most" if issue.agent_prefers == "low" else "at least"
            target = b.targets[i]
            aim = f"your target is {self.phrase(i, target)}" if target is not None else "no target was set"
            limit = b.limits[i]
            lines.append(f"{issue.label}: your limit is {self.phrase(i, limit)} ({bound} {self.fmt(i, limit)}); {aim}.")
        return lines

    def _issue_lines(self) -> list[str]:
        return [issue_line(issue) for issue in self.domain.issues]

    def oracle_view(self) -> Counterpart:
        return self._cp

    def secret_values(self) -> list[str]:
        # The bound of a hidden constraint, in the words only the constraints question brings out.
        return [self._cp.reveal] if self._cp.constraint is not None else []


def _percentages(raw: dict[str, float]) -> dict[str, int]:
    """Whole percentages summing to 100 (largest remainder), each at least 1."""
    total = sum(raw.values())
    exact = {k: 100 * v / total for k, v in raw.items()}
    out = {k: max(1, int(v)) for k, v in exact.items()}
    order = sorted(raw, key=lambda k: -(exact[k] - int(exact[k])))
    i = 0
    while sum(out.values()) < 100:
        out[order[i % len(order)]] += 1
        i += 1
    while sum(out.values()) > 100:
        k = max(out, key=lambda key: out[key])
        out[k] -= 1
    return out


def _best_deal(mine: dict[str, float], theirs: dict[str, float], reservation: float, low: dict[str, float],
               high: dict[str, float]) -> dict[str, float]:
    """The agent's best deal (in agent-value terms) that the counterpart values at its reservation or more, within
    `low <= v <= high`: a fractional knapsack that moves issues toward the agent in order of how much the agent
    gains per unit the counterpart loses."""
    v = {i: min(low[i], high[i]) for i in mine}
    budget = sum(theirs[i] * (1 - v[i]) for i in mine) - reservation
    for i in sorted(mine, key=lambda k: -(mine[k] / max(theirs[k], EPS))):
        room = high[i] - v[i]
        if room <= 0 or budget <= 0:
            continue
        cost = theirs[i] * room
        if cost <= budget:
            v[i], budget = high[i], budget - cost
        else:
            v[i], budget = v[i] + budget / theirs[i], 0.0
    return v
