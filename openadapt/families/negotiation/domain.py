"""The negotiation domain: the issues of one kind of deal, the agent's side of it, and the counterparts it meets.

Each episode seats the agent across from one counterpart (a persona drawn by the seed) over one deal. Every issue
(price, delivery time, payment terms, a salary's base, a freight rate...) has a range, a grid, and a direction
the agent prefers; the counterpart prefers the other direction. The agent's briefing gives its priorities
(weights), its walk-away limits and its targets. The counterpart's weights, its reservation utility, its
concession style, its patience and (on harder tiers) one hard constraint are hidden: the engine simulates it.
Everything the agent reads (names, units, phrases, replies, tells) comes from this file.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from openadapt.families.domain import (
    IDENT,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    Rule,
    duplicate_values,
    duplicates,
    too_few,
    unknown_ref,
)

# Action fields of the family's own; an issue id may not take one of these names (issues become action fields).
RESERVED_FIELDS = frozenset({"move", "question", "message", "metadata", "model_config", "model_fields",
                             "model_computed_fields", "schema", "json", "dict", "copy", "construct", "validate"})
MIN_GRID_POINTS = 20  # an issue needs at least this many grid steps between low and high (room to bargain)
MAX_GRID_POINTS = 5000
MIN_THEIR_SHARE = 0.3  # the least share of a term's range the agent's strictest limit leaves the counterpart
ZOPA_MARGIN = 0.10  # the counterpart's utility of the agent's strictest limits must exceed its reservation by this
Line = Annotated[str, StringConstraints(strip_whitespace=True, min_length=5, max_length=300)]  # one sentence or two
Key = Annotated[str, StringConstraints(min_length=2, max_length=30)]
# A deal, as the messages say it mid-sentence ('your enquiry about {subject}'): a noun phrase after a lower-case
# article. A small model restates the task there ('An AI agent is tasked with negotiating ...').
# The pattern bounds its own length (llama.cpp's grammars ignore maxLength beside a pattern) and keeps to one line.
# three words at least after the article: a small model writes 'a negotiation', 'a delivery term'
Subject = Annotated[str, StringConstraints(strip_whitespace=True, min_length=10, max_length=200,
                                           pattern=r"^(a|an|the) [^ \n]{1,40} [^ \n]{1,40} [^\n]{2,150}$")]
_ARTICLE = re.compile(r"^(A|An|The) ")
# The placeholders of each kind of counterpart message besides {counterpart} and {subject}: (extra, required).
MESSAGE_PLACEHOLDERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "opening": (("offer",), ("offer",)), "counter": (("offer",), ("offer",)), "final": (("offer",), ("offer",)),
    "accept": (("offer",), ("offer",)), "confirm": (("offer",), ()), "insulted": ((), ()), "walk_away": ((), ()),
    "anchors": (("issue", "value"), ("value",)), "priorities": (("top", "least"), ("top",)),
    "no_constraints": ((), ()), "timeline": (("rounds",), ("rounds",)),
}


class HiddenConstraint(DomainPart):
    reveal: str = Field(min_length=15, max_length=300, description=(
        "What the counterpart says, when asked whether anything is fixed on its side, about a hard limit it has on "
        "this issue; must contain {value} (the engine fills in the bound, with its unit phrase), e.g. 'Our line "
        "is fully booked until the end of the month: the fastest we can ship is {value}.' May use {counterpart}."))
    hint: str = Field(min_length=10, max_length=200, description=(
        "What the counterpart says when an offer breaks that limit, without giving the number away, e.g. "
        "'Delivery that fast is simply not something we can commit to.' May use {counterpart}."))


class Issue(DomainPart):
    FORMS = frozenset({"phrase"})  # 'delivery within {value} days' reads the same in any deal that has the term
    id: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Identifier of one term under negotiation; it becomes a field of the agent's offer, e.g. 'unit_price', "
        "'delivery_days', 'payment_days', 'base_salary'. Not one of: move, question, message, metadata."))
    label: str = Field(min_length=3, max_length=40, description=(
        "The term's name in the world's own words, lowercase, e.g. 'unit price', 'delivery time'."))
    phrase: str = Field(min_length=5, max_length=80, description=(
        "How a value of this term reads in a sentence; must contain {value}, e.g. 'a unit price of {value} EUR', "
        "'delivery within {value} days', 'payment {value} days net'."))
    low: float = Field(description="the lowest value an offer may name, e.g. 9.80 (on the grid of `step`)")
    high: float = Field(description="the highest value an offer may name, e.g. 15.60 (the counterpart's list "
                                    "terms sit at the end it prefers)")
    step: float = Field(gt=0, description=(
        "The grid of sensible values (offers are rounded to it), e.g. 0.05 for a price in EUR, 1 for days, 500 "
        "for a salary. Between low and high there must be at least 20 steps."))
    agent_prefers: Literal["low", "high"] = Field(description=(
        "Which end the agent's side wants ('low' for a price it pays, 'high' for payment days it gets). The "
        "counterpart always prefers the other end."))
    agent_weight: float = Field(gt=0, le=10, description=(
        "How much the agent's side cares about this term relative to the others (any positive scale; the "
        "briefing shows them as percentages, varied a little per episode), e.g. 5 for price, 2 for warranty."))
    limit: tuple[float, float] = Field(description=(
        "The range from which the agent's walk-away limit on this term is drawn per episode, e.g. [13.20, 14.00] "
        "for a price the buyer may pay at most. Strictly inside (low, high): the counterpart's list terms must "
        "lie beyond it."))
    priority_tells: list[Line] = Field(min_length=1, max_length=4, description=(
        "One to four things a counterpart says unprompted when this term matters most to it, without numbers, "
        "e.g. 'Margins on this part are razor thin for us.' On adversarial tiers a counterpart says them about "
        "a term it does not care about (a red herring). May use {counterpart}."))
    constraint: HiddenConstraint | None = Field(default=None, description=(
        "A hard limit the counterpart may have on this term (a booked production line, a salary band cap, a "
        "minimum rate): revealed only when the agent asks whether anything is fixed. Give at least two terms "
        "one. The engine draws the bound per episode."))


class Persona(DomainPart):
    # 'a sales manager judged on margin: concedes slowly ...' and 'We don't really do discounts on list prices.'
    # are kinds of counterpart any deal has, no world's own: a small model writes them as its personas, and they
    # must not count as copies of another world.
    FORMS = frozenset({"description", "style_tells"})

    id: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Identifier of one kind of counterpart, e.g. 'margin_guardian', 'volume_chaser'."))
    description: str = Field(min_length=10, max_length=200, description=(
        "Who this counterpart is and how it bargains (for the docs; never shown to the agent), e.g. 'a sales "
        "manager judged on margin: concedes slowly, cares about price above all'."))
    # bounded in the type, so that a reply's weight past 100 is set to 100 at parse (a small model writes 1e+15)
    weights: dict[Key, Annotated[float, Field(gt=0, le=100)]] = Field(min_length=2, max_length=8, description=(
        "How much this counterpart cares about each term: one positive number per issue id (any scale; varied "
        "per episode), e.g. {unit_price: 6, delivery_days: 1, payment_days: 3, warranty_months: 1}. Hidden."))
    reservation: tuple[float, float] = Field(description=(
        "Range of its reservation utility (0..1: the share of its best deal below which it will not go), drawn "
        "per episode, e.g. [0.35, 0.5]. Hidden. Low values leave the agent more room."))
    concession: Literal["boulware", "linear", "conceder"] = Field(description=(
        "Its concession style: 'boulware' holds firm until late, 'linear' concedes evenly, 'conceder' gives "
        "ground early."))
    patience: tuple[int, int] = Field(description=(
        "Range of how many of the agent's messages it takes before it reaches its real limit, e.g. [4, 7]; it "
        "walks away two messages later, sooner when insulted. Between 2 and 12."))
    insult_margin: float = Field(ge=0.1, le=0.4, description=(
        "How far (in utility, 0.1..0.4) below its reservation an offer may fall before it takes offence and "
        "loses patience, e.g. 0.15."))
    style_tells: list[Line] = Field(min_length=1, max_length=4, description=(
        "Things this counterpart lets slip about how it bargains, without numbers, e.g. 'We don't really do "
        "discounts on list prices.' May use {counterpart}."))


class Messages(DomainPart):
    """The counterpart's replies. Placeholders: {counterpart} (its name), {offer} (its terms as a list of the
    issues' phrases: 'a unit price of 12.40 EUR, delivery within 21 days and payment 60 days net'), {subject}
    (what is being negotiated), and the ones each field names."""

    # Each field's example is the family's general form of such a reply, in no world of its own: any counterpart
    # may say 'This is as far as I can go: {offer}.' (designer/copying.py does not count it as another world's).
    FORMS = frozenset({"opening", "counter", "final", "accept", "confirm", "insulted", "walk_away", "anchors",
                       "priorities", "no_constraints", "timeline"})

    opening: list[Line] = Field(min_length=2, max_length=6, description=(
        "Its first message, with its list terms; must contain {offer}; may use {subject}, e.g. 'Thank you for "
        "your enquiry about {subject}. We can offer {offer}.'"))
    counter: list[Line] = Field(min_length=2, max_length=8, description=(
        "A counter-offer; must contain {offer}, e.g. 'We cannot quite meet that. What we can do is {offer}.'"))
    final: list[Line] = Field(min_length=2, max_length=6, description=(
        "A counter-offer it calls its last; must contain {offer}, e.g. 'This is as far as I can go: {offer}.' "
        "On adversarial tiers it says these before it really is at its limit (a bluff)."))
    accept: list[Line] = Field(min_length=1, max_length=4, description=(
        "It accepts the agent's offer; must contain {offer}, e.g. 'Agreed: {offer}. I will send the order "
        "confirmation today.'"))
    confirm: list[Line] = Field(min_length=1, max_length=4, description=(
        "It confirms when the agent accepts its offer; may use {offer}, e.g. 'Great, then we have a deal.'"))
    insulted: list[Line] = Field(min_length=1, max_length=4, description=(
        "Its reply to an offer far below anything it could accept, e.g. 'With respect, that is nowhere near "
        "our costs.'"))
    walk_away: list[Line] = Field(min_length=1, max_length=4, description=(
        "It ends the negotiation (out of patience), e.g. 'I don't think we will get there this time.'"))
    anchors: list[Line] = Field(min_length=2, max_length=6, description=(
        "A claim meant to anchor the agent on one term, with {issue} (its label) and {value} (a figure that "
        "favours the counterpart, with its unit phrase), e.g. 'Other customers of ours accept {value} without "
        "discussion.' Used on adversarial tiers."))
    priorities: list[Line] = Field(min_length=1, max_length=4, description=(
        "Its honest answer when asked what matters most to it, with {top} and {least} (term labels), e.g. "
        "'Honestly, {top} is what keeps me up at night; {least} matters far less to us.'"))
    no_constraints: list[Line] = Field(min_length=1, max_length=4, description=(
        "Its answer when asked whether anything is fixed on its side and nothing is, e.g. 'Nothing is set in "
        "stone: it is a question of the overall package.'"))
    timeline: list[Line] = Field(min_length=1, max_length=4, description=(
        "Its answer when asked how much time it has; must contain {rounds} (messages left before it walks "
        "away), e.g. 'I need to close this within the next {rounds} emails.'"))


class MoveNames(DomainPart):
    """What the four moves are called in this world (each keeps its role in the mechanics)."""

    offer: str = Field(default="send_offer", pattern=IDENT, description="propose full terms (every issue)")
    ask: str = Field(default="ask_question", pattern=IDENT, description="ask the counterpart a question")
    accept: str = Field(default="accept_offer", pattern=IDENT, description="accept its standing offer")
    walk_away: str = Field(default="walk_away", pattern=IDENT, description="end without a deal")


class Question(DomainPart):
    name: str = Field(min_length=3, max_length=30, pattern=IDENT, description="identifier the agent types")
    text: str = Field(min_length=10, max_length=200, description="the question as the agent's message reads")


class Questions(DomainPart):
    """The three questions the agent may ask (each costs a turn)."""

    priorities: Question = Field(default=Question(name="priorities", text="What matters most to you in this deal?"),
                                 description="reveals the counterpart's most and least important terms")
    constraints: Question = Field(default=Question(
        name="constraints", text="Is anything fixed on your side that we should work around?"),
        description="reveals a hidden hard limit, if it has one")
    timeline: Question = Field(default=Question(name="timeline", text="How much time do we have to agree?"),
                               description="reveals how many messages remain before it walks away")


# A name no one has (a small model's 'John Doe (Supplier's Representative)').
_STAND_IN_NAME = re.compile(r"\b(?:John|Jane) Doe\b|\b(?:First|Last)name\b|\bName Surname\b", re.IGNORECASE)


def _counterpart_problems(name: str, path: str) -> list[DomainProblem]:
    """A counterpart is one person: a small model gives 'John Doe (Supplier's Representative), Jane Smith
    (Customer's Representative)' as one, the side the agent is on among them."""
    if name.count("(") > 1 or re.search(r"\),\s*\S", name):
        return [DomainProblem(path=path, message=f"{name!r} names more than one person: one counterpart per "
                              "line, a name and its organisation")]
    if said := _STAND_IN_NAME.search(name):
        return [DomainProblem(path=path, message=f"{said.group(0)!r} is a stand-in, not a name: give the name "
                              "a person of this world has")]
    return []


_CODE = re.compile(r"\w\[\d+\]|\s=\s|\b\w+: '")  # 'timeouts[0] = {rounds} emails.', "time: 10:00 AM, subject: '..."
_SENTENCE_END = (".", "!", "?", ")", "'", '"', "}")


def _whole_sentences(line: str) -> str:
    """A reply stopped at its bound mid-sentence, cut back to the whole sentences before: a small model, asked
    for the line again, stops it the same way ('... is the lack of transparency. We,'). Unchanged where it ends a
    sentence, or has no whole one."""
    if line.rstrip().endswith(_SENTENCE_END):
        return line
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", line)]
    return line[:ends[-1]] if ends else line


def _reply_problems(line: str, path: str) -> list[DomainProblem]:
    """A reply is what a person writes: whole sentences, not code or fields. A small model writes
    'timeouts[0] = {rounds} emails.' and replies stopped at their bound ('... the lack of transparency. We,')."""
    if said := _CODE.search(line):
        return [DomainProblem(path=path, message=f"this reply reads as code or fields ({said.group(0).strip()!r}),"
                              " not as a message a person writes: write it as one")]
    if not line.rstrip().endswith(_SENTENCE_END):
        return [DomainProblem(path=path, message=f"this reply stops mid-sentence ({line[-30:]!r}): write it as "
                              "whole sentences")]
    return []


class NegotiationDomain(Domain):
    KEYS = {"issues": "id", "personas": "id"}
    REFERENCES = {"personas.weights": Reference("issues.id")}  # a weight for every issue, keyed by its id
    REQUIRED_IN_FIRST = {"issues.constraint": 2}  # `family_problems`: two terms with a hidden constraint
    NO_DIGITS = frozenset({"issues[].constraint.hint"})  # the hint never gives the bound away
    RULES = (
        Rule("grid_steps", ("issues",),
             f"Each issue's range from low to high holds {MIN_GRID_POINTS} to {MAX_GRID_POINTS} steps of its `step`, "
             "so that there is room to bargain and every offer is a value an agent can type."),
        Rule("limit_inside_range", ("issues",),
             "Each issue's limit lies strictly inside (low, high): the counterpart's list terms sit at one end and "
             "the agent's best terms at the other, both beyond the agent's walk-away limit."),
        Rule("constrained_issues", ("issues",),
             "At least two issues have a `constraint`.",
             "ECI 4-5 hide a hard limit on a term the seed draws, and a single one would be a constant to memorise."),
        Rule("top_priorities", ("personas",),
             "With three or more personas, at least two weigh different issues highest, so that the counterpart's "
             "priorities vary with the seed and are worth asking about."),
        Rule("room_for_a_deal", ("issues", "personas"),
             f"Each persona's reservation high end stays at least {ZOPA_MARGIN} below its utility at the agent's "
             "strictest limits (the weighted share of each issue's range from that limit to the persona's preferred "
             "end), so that a deal exists."),
    )
    PLACEHOLDERS = (
        Placeholders("issues[].phrase", ("value",), ("value",), says="must contain {value} (where the figure goes)"),
        Placeholders("issues[].priority_tells[]", ("counterpart",)),
        Placeholders("issues[].constraint.reveal", ("value", "counterpart"), ("value",),
                     says="must contain {value} (the bound)"),
        Placeholders("issues[].constraint.hint", ("counterpart",)),
        Placeholders("personas[].style_tells[]", ("counterpart",)),
        *(Placeholders(f"messages.{name}[]", ("counterpart", "subject", *extra), required)
          for name, (extra, required) in MESSAGE_PLACEHOLDERS.items()),
    )
    agent_role: str = Field(min_length=3, max_length=100, description=(
        "Who the agent is, e.g. 'a buyer in the procurement team of Nordlicht Solar', 'a candidate for a senior "
        "data engineer role'."))
    counterpart_role: str = Field(min_length=3, max_length=100, description=(
        "Who sits across, with its article, e.g. 'the key-account manager at the supplier', 'the hiring "
        "manager'."))
    medium: str = Field(default="email", min_length=3, max_length=30, description=(
        "How the two sides talk, e.g. 'email', 'phone', 'the carrier's booking chat'."))
    counterparts: list[Line] = Field(min_length=2, max_length=12, description=(
        "Names of the people the agent may face, with their organisation, e.g. 'Jonas Weber (Hartmann "
        "Elektronik)'. At least two, so that the seed varies who writes."))
    subjects: list[Subject] = Field(min_length=2, max_length=12, description=(
        "What one episode negotiates, specific to this world: a noun phrase that starts with 'a', 'an' or 'the' "
        "and fits 'your enquiry about ...', e.g. 'an order of 5,000 DC-DC converter modules (part VX-240) for the "
        "Q3 inverter build'. At least two, so that the seed varies the deal."))
    issues: list[Issue] = Field(min_length=3, max_length=6, description=(
        "The terms under negotiation, three to six: the value of a negotiation is in trading terms the two sides "
        "weigh differently, and on adversarial tiers one term becomes a red herring, which must leave at least "
        "two real terms to trade."))
    personas: list[Persona] = Field(min_length=3, max_length=10, description=(
        "The kinds of counterpart, three or more, with different priorities (at least two different top terms) "
        "and styles: the seed draws one, so that the agent cannot learn one counterpart by heart."))
    messages: Messages
    moves: MoveNames = Field(default_factory=MoveNames)
    questions: Questions = Field(default_factory=Questions)

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict) -> dict:
        """An issue whose grid is too coarse for bargaining gets the coarsest round step (1, 2 or 5 times a power
        of ten) that puts at least 20 whole steps between its low and high, and a walk-away limit touching an
        end of its range is moved one step inside: a small model writes delivery days 1..10 in steps of 1 with
        the limit [5, 10]. The range and the limit's other end stay as written. A limit whose strict end leaves
        the counterpart less than `MIN_THEIR_SHARE` of the term is moved until it does.
        A persona's reservation range that leaves no room for a deal at the agent's strictest limits is moved down
        until it does, its width kept (never below 0.05): a small model cannot work utilities out, and asks 0.5
        where the agent's limits leave 0.34-0.40. Where three or more personas all weigh one term highest, the
        last one's two highest weights change places (a small model gives them all the worked example's
        weights): the check asks two different top priorities. A subject's capitalised first article is
        lower-cased (it is said mid-sentence). A reply that stops mid-sentence after a whole one keeps its whole
        sentences (`_whole_sentences`)."""
        data = dict(data)
        if isinstance(data.get("messages"), dict):
            data["messages"] = {k: [_whole_sentences(t) if isinstance(t, str) else t for t in v]
                                if isinstance(v, list) else v for k, v in data["messages"].items()}
        if isinstance(data.get("subjects"), list):  # a subject is said mid-sentence: 'An order' -> 'an order'
            data["subjects"] = [_ARTICLE.sub(lambda m: m.group(1).lower() + " ", s.strip()) if isinstance(s, str)
                                else s for s in data["subjects"]]
        if not isinstance(data.get("issues"), list):
            return data
        data["issues"] = [_tidy_issue(i) if isinstance(i, dict) else i for i in data["issues"]]
        if isinstance(data.get("personas"), list):
            # priorities first: a swap of weights changes the utility the reservation is fitted to
            data["personas"] = [_fit_reservation(p, data["issues"]) for p in _varied_priorities(data["personas"])]
        return data

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicates(self.issues, "id", "domain.issues")
        p += duplicates(self.issues, "label", "domain.issues")
        p += duplicates(self.personas, "id", "domain.personas")
        p += duplicate_values(self.counterparts, "domain.counterparts")
        p += duplicate_values(self.subjects, "domain.subjects")
        for i, name in enumerate(self.counterparts):
            p += _counterpart_problems(name, f"domain.counterparts[{i}]")
        ids = [i.id for i in self.issues]
        for i, issue in enumerate(self.issues):
            p += self._issue_problems(i, issue)
        for i, persona in enumerate(self.personas):
            p += self._persona_problems(i, persona, ids)
        constrained = [i for i in self.issues if i.constraint is not None]
        if len(constrained) < 2:
            p.append(self.rule("constrained_issues").broken(
                "domain.issues", f"constraints on {[i.id for i in constrained] or 'none'}"))
        tops = {max(ids, key=lambda k, w=persona.weights: w.get(k, 0.0)) for persona in self.personas}
        if len(self.personas) >= 3 and len(tops) < 2:
            p.append(self.rule("top_priorities").broken("domain.personas", f"every persona puts {tops.pop()!r} first"))
        p += self._message_problems()
        names = [("moves", k, v) for k, v in self.moves.model_dump().items()]
        names += [("questions", k, v["name"]) for k, v in self.questions.model_dump().items()]
        seen: dict[str, str] = {}
        for group, key, value in names:
            if value in seen:
                p.append(DomainProblem(path=f"domain.{group}.{key}" + (".name" if group == "questions" else ""),
                                       code=Code.DUPLICATE_NAME, value=value,
                                       message=f"{value!r} is already used by {seen[value]}: names must be unique"))
            seen[value] = f"domain.{group}.{key}"
        return p

    def _issue_problems(self, i: int, issue: Issue) -> list[DomainProblem]:
        at, p = f"domain.issues[{i}]", []
        if issue.id in RESERVED_FIELDS or issue.id.startswith("model_"):
            p.append(DomainProblem(path=f"{at}.id", message=f"{issue.id!r} is reserved for the offer's own fields; "
                                   "name the term (e.g. 'unit_price')"))
        if not issue.low < issue.high:
            return [*p, DomainProblem(path=f"{at}.high", message=f"high {issue.high:g} must exceed low {issue.low:g}")]
        points = (issue.high - issue.low) / issue.step
        if abs(points - round(points)) > 1e-6 * max(1.0, points):
            p.append(DomainProblem(path=f"{at}.step", message=(
                f"the range {issue.low:g}..{issue.high:g} is not a whole number of steps of {issue.step:g}")))
        if not MIN_GRID_POINTS - 1e-6 <= points <= MAX_GRID_POINTS + 1e-6:  # 0.8..1.0 in 0.01 is 19.999...
            p.append(self.rule("grid_steps").broken(
                f"{at}.step", f"{points:.0f} steps of {issue.step:g} in {issue.low:g}..{issue.high:g}"))
        lo, hi = issue.limit
        if lo > hi:
            p.append(DomainProblem(path=f"{at}.limit", message=f"[{lo:g}, {hi:g}] is not an increasing range"))
        elif not issue.low < lo or not hi < issue.high:
            p.append(self.rule("limit_inside_range").broken(
                f"{at}.limit", f"[{lo:g}, {hi:g}] in ({issue.low:g}, {issue.high:g})"))
        if issue.constraint is not None and any(ch.isdigit() for ch in issue.constraint.hint):
            p.append(DomainProblem(path=f"{at}.constraint.hint", message=(
                "must not contain a number: the hint says which term is blocked, never where the limit is "
                "(the agent learns the bound only by asking)")))
        return p

    def _persona_problems(self, i: int, persona: Persona, ids: list[str]) -> list[DomainProblem]:
        at, p = f"domain.personas[{i}]", []
        for k in persona.weights:
            p += unknown_ref(k, ids, f"{at}.weights.{k}", "issue")
        missing = [k for k in ids if k not in persona.weights]
        if missing:
            p.append(DomainProblem(path=f"{at}.weights", message=f"no weight for issue(s) {', '.join(missing)}: give "
                                   "every issue a positive weight"))
        for k, w in persona.weights.items():
            if not 0 < w <= 100:
                p.append(DomainProblem(path=f"{at}.weights.{k}", message=f"{w:g} must be positive (at most 100)"))
        lo, hi = persona.reservation
        if not 0.05 <= lo <= hi <= 0.85:
            p.append(DomainProblem(path=f"{at}.reservation", message=(
                f"[{lo:g}, {hi:g}] must be an increasing range inside [0.05, 0.85]")))
        plo, phi = persona.patience
        if not 2 <= plo <= phi <= 12:
            p.append(DomainProblem(path=f"{at}.patience", message=f"[{plo}, {phi}] must be an increasing range "
                                   "inside [2, 12]"))
        if not p and set(persona.weights) == set(ids):
            room = self.counterpart_utility_at_strictest_limits(persona) - hi
            if room < ZOPA_MARGIN:
                p.append(self.rule("room_for_a_deal").broken(
                    f"{at}.reservation", f"utility {room + hi:.2f} at the strictest limits, reservation up to {hi:g}"))
        return p

    def _message_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        for name in MESSAGE_PLACEHOLDERS:
            for j, line in enumerate(getattr(self.messages, name)):
                p += _reply_problems(line, f"domain.messages.{name}[{j}]")
        p += too_few(self.messages.final, 2, "domain.messages.final", "(ECI 3 bluffs 'final' offers: real and "
                     "bluffed ones must share their wording)")
        return p

    # ---- facts the engine and the checks use -------------------------------------------------------------
    def counterpart_utility_at_strictest_limits(self, persona: Persona) -> float:
        """The counterpart's utility of the agent's most demanding limits (its best deal the agent may take)."""
        total = sum(persona.weights.values())
        value = 0.0
        for issue in self.issues:
            strict = issue.limit[0] if issue.agent_prefers == "low" else issue.limit[1]
            value += persona.weights[issue.id] / total * (1.0 - agent_value(issue, strict))
        return value


def decimals(step: float) -> int:
    """How many decimals a value on a grid of `step` needs (0.05 -> 2, 0.5 -> 1, 1 or 500 -> 0)."""
    text = f"{step:.6f}".rstrip("0").rstrip(".")
    return len(text.split(".")[1]) if "." in text else 0


def issue_line(issue: Issue) -> str:
    """One line describing an issue to the agent: id, label, range, grid and the direction it wants."""
    d = decimals(issue.step)
    return (f"{issue.id}: {issue.label}, {issue.low:.{d}f} to {issue.high:.{d}f} in steps of {issue.step:.{d}f}; "
            f"you want it {issue.agent_prefers}")


def agent_value(issue: Issue, x: float) -> float:
    """Where `x` sits between the counterpart's best end (0) and the agent's best end (1) of the issue's range."""
    span = issue.high - issue.low
    return (issue.high - x) / span if issue.agent_prefers == "low" else (x - issue.low) / span


def _tidy_issue(issue: dict) -> dict:
    low, high, step, limit = (issue.get(k) for k in ("low", "high", "step", "limit"))
    if not all(isinstance(v, int | float) for v in (low, high, step)) or not low < high or step <= 0:
        return issue
    issue = dict(issue)
    if (high - low) / step < MIN_GRID_POINTS:
        for exponent in range(6, -5, -1):
            fine = next((m * 10.0 ** exponent for m in (5, 2, 1) if _whole((high - low) / (m * 10.0 ** exponent))
                         and (high - low) / (m * 10.0 ** exponent) >= MIN_GRID_POINTS - 1e-6), None)
            if fine is not None:
                issue["step"] = step = round(fine, 6)
                break
    if isinstance(limit, list | tuple) and len(limit) == 2 and all(isinstance(v, int | float) for v in limit):
        lo, hi = max(limit[0], low + step), min(limit[1], high - step)
        if lo > hi and limit[0] == limit[1] and low <= limit[0] <= high:  # one point at an end: [1, 1] in 0.8..1
            lo = hi = min(max(limit[0], low + step), high - step)
        if lo <= hi:
            issue["limit"] = [round(lo, 6), round(hi, 6)]
        issue["limit"] = _leaving_a_share(issue, low, high, step)
    return issue


def _leaving_a_share(issue: dict, low: float, high: float, step: float) -> list:
    """The limit range with its strict end moved to leave the counterpart at least `MIN_THEIR_SHARE` of the term
    (on the grid, the other end moved with it where needed): a small model draws a limit such as [1, 99] in
    0..100, which at the agent's strictest limits leaves every persona too little utility for any reservation.
    The examples' limits leave 0.39-0.67."""
    lo, hi = issue.get("limit", (None, None)) if len(issue.get("limit") or ()) == 2 else (None, None)
    if not isinstance(lo, int | float) or not isinstance(hi, int | float) or lo > hi:
        return issue.get("limit")
    share = MIN_THEIR_SHARE * (high - low)
    if issue.get("agent_prefers") == "low" and lo < low + share:
        lo = math.ceil((low + share - low) / step - 1e-9) * step + low
        hi = max(hi, lo)
    elif issue.get("agent_prefers") == "high" and hi > high - share:
        hi = math.floor((high - share - low) / step + 1e-9) * step + low
        lo = min(lo, hi)
    else:
        return issue["limit"]
    return [round(lo, 6), round(hi, 6)]


def _fit_reservation(persona: object, issues: list) -> object:
    """The persona with its reservation range below the utility the agent's strictest limits leave it, by the
    margin the check asks for; as it was where anything it depends on is not yet well-formed."""
    if not isinstance(persona, dict):
        return persona
    try:
        weights, (lo, hi) = persona["weights"], persona["reservation"]
        total = sum(weights[i["id"]] for i in issues)
        if set(weights) != {i["id"] for i in issues} or total <= 0 or not 0 <= lo <= hi:
            return persona
        utility = 0.0
        for i in issues:  # what `counterpart_utility_at_strictest_limits` computes, on the draft's numbers
            low, high, (least, most) = float(i["low"]), float(i["high"]), i["limit"]
            theirs = (least - low) if i["agent_prefers"] == "low" else (high - most)
            utility += weights[i["id"]] / total * theirs / (high - low)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return persona
    top = math.floor((utility - ZOPA_MARGIN) * 100 - 1) / 100  # a hundredth clear of the margin
    if utility - hi >= ZOPA_MARGIN or top < 0.05:
        return persona
    return {**persona, "reservation": [max(0.05, round(top - (hi - lo), 2)), top]}


def _varied_priorities(personas: list) -> list:
    """The personas, the two highest weights of the last one whose top two differ swapped where all of them (three
    or more) put one term first (where the last weighs every term alike, the one before it is swapped);
    as written where anything is not yet well-formed."""
    weights = [p.get("weights") if isinstance(p, dict) else None for p in personas]
    if len(personas) < 3 or not all(isinstance(w, dict) and len(w) >= 2 and all(
            isinstance(v, int | float) for v in w.values()) for w in weights):
        return personas
    if len({max(w, key=w.get) for w in weights}) > 1:
        return personas
    for i in reversed(range(len(personas))):
        first, second = sorted(weights[i], key=weights[i].get, reverse=True)[:2]
        if weights[i][first] != weights[i][second]:
            swapped = {**weights[i], first: weights[i][second], second: weights[i][first]}
            return [*personas[:i], {**personas[i], "weights": swapped}, *personas[i + 1:]]
    return personas


def _whole(x: float) -> bool:
    return abs(x - round(x)) <= 1e-6 * max(1.0, x)
