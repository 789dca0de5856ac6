"""`Domain`: the base of every family's domain schema, and the checks every domain gets.

A domain is what a designer writes (an LLM, or a person): the entities, rules, failure modes and texts of one
world, as data. Its family's engine turns it into episodes. Field descriptions are written as instructions to
the designer (they are shown to it, with the JSON schema). Problems are reported with the field's path
(`domain.faults[2].evidence`), so a designer can repair exactly what is wrong.

Two levels of checks:

- the schema (pydantic): types, required fields, lengths, bounded sizes;
- `problems()`: what a schema cannot say, such as referential integrity, uniqueness, enough variety for seed
  variation and for every tier's mechanics, and degenerate text (placeholders, schema words echoed as
  content, the same sentence pasted everywhere). Families add their own with `family_problems()`.
"""

from __future__ import annotations

import functools
import re
import typing
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openadapt.errors import UsageError

# Words that mean the designer echoed the schema (or left a placeholder) instead of writing content.
PLACEHOLDER_WORDS = frozenset({
    "todo", "tbd", "lorem", "ipsum", "placeholder", "foo", "bar", "baz", "xxx", "example_name", "string",
    "entity_name", "name_here", "your_text", "sample_text", "insert", "here",
})
# An identifier the agent types into an action: the pattern of such fields (`Field(pattern=IDENT)`).
IDENT = r"^[a-z][a-z0-9_]*$"
_IDENT = re.compile(IDENT)
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER_PARTS = re.compile(r"(\{[A-Za-z_][A-Za-z0-9_]*\})")  # split: the text between, and each placeholder

REPEATED_TEXT = 3  # a prose text written this many times in one domain is a problem (`_text_problems`)


class Code(StrEnum):
    """What kind of thing is wrong: the stable name a designer acts on. The message is for people and models; no
    code reads it. The data a repair needs travels in the problem's typed fields (`value`, `minimum`, `choices`,
    `required`)."""

    SCHEMA = "schema"  # a type, bound or required field of the schema
    TOO_FEW = "too_few"  # a list shorter than the domain needs (minimum)
    VARIETY = "variety"  # the items together lack a kind the tiers need (not fixed by one item)
    DUPLICATE_NAME = "duplicate_name"  # an item's name is an earlier item's (value)
    REPEATED_LINE = "repeated_line"  # a line of a plain list is an earlier line (value)
    NAME_CLASH = "name_clash"  # a record's field holds a name another of its fields holds (value)
    UNKNOWN_REFERENCE = "unknown_reference"  # names something the domain does not define (value, choices)
    UNKNOWN_PLACEHOLDER = "unknown_placeholder"  # placeholders outside those allowed here (choices)
    MISSING_PLACEHOLDER = "missing_placeholder"  # a text lacks the placeholders it must hold (required)
    NOT_AN_IDENTIFIER = "not_an_identifier"  # a name the agent types is not a lowercase identifier (value)
    NUMBERED_COPY = "numbered_copy"  # a list's names are mostly one name numbered (value)
    REPEATED_TEXT = "repeated_text"  # one prose text written many times in the domain
    NOT_CONTENT = "not_content"  # schema words, debris, a slot, words about the agent, JSON or the package
    SCHEMA_ECHO = "schema_echo"  # repeats the schema's description of a field (value: its words)
    COPIED = "copied"  # copied whole from the worked example (value)
    EXAMPLE_PHRASE = "example_phrase"  # takes a run of words from the worked example (value)
    DESCRIBED = "described"  # the example the field's own description gives (value)
    DESCRIBED_PHRASE = "described_phrase"  # takes a phrase of the field's description (value)
    FEEDBACK_ECHO = "feedback_echo"  # repeats the designer's own feedback words
    UNWRITTEN = "unwritten"  # a piece the model did not write
    OTHER = "other"  # a family's own rule, fixed by rewriting what it names


# Problems that say a text or name came from an example, not from this world: the worked example (a designer then
# writes it again out of the example's sight), or the example a field's own description gives (no longer shown).
FROM_EXAMPLE = frozenset({Code.COPIED, Code.EXAMPLE_PHRASE})
FROM_DESCRIPTION = frozenset({Code.DESCRIBED, Code.DESCRIBED_PHRASE})
COPY_CODES = FROM_EXAMPLE | FROM_DESCRIPTION


class DomainProblem(BaseModel):
    """One thing wrong with a domain, at a field path a designer can find."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(description="e.g. 'domain.faults[2].evidence'")
    message: str
    code: Code = Code.OTHER
    value: str | None = None  # the offending name, line or copied words
    minimum: int | None = None  # TOO_FEW: the least the list may hold
    choices: tuple[str, ...] | None = None  # the names or placeholders allowed here, in full
    required: tuple[str, ...] = ()  # MISSING_PLACEHOLDER: the placeholder names the text lacks
    rule: str | None = None  # the `Rule` (by its code) this problem breaks

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Rule:
    """A rule a domain must meet across its fields, which no one field's schema can say: how much its lists must
    hold together, relations between its numbers, the variety its tiers draw on. Declared once, in a family's
    `Domain.RULES`: a designer states it in every request that writes a field it reads, before the model writes,
    and the check that finds it broken reports it by its code, in the same words."""

    code: str
    reads: tuple[str, ...]  # the domain's own fields it reads
    says: str  # one sentence a designer can act on
    # Why the mechanics need it (the tier that draws on it), for people and for a capable model's whole request;
    # kept out of a small model's piece requests and of the problem's message: there, a small model copies it
    # ('ECI 4' in a reply it writes).
    why: str = ""

    def broken(self, path: str, found: str, minimum: int | None = None) -> DomainProblem:
        """The problem when this rule does not hold; `found` says what the domain has instead. With `minimum`, the
        list at `path` is short of that many items (TOO_FEW: a designer can size or top up that list)."""
        return DomainProblem(path=path, code=Code.VARIETY if minimum is None else Code.TOO_FEW, minimum=minimum,
                             rule=self.code, message=f"{self.says} This domain: {found}.")


@dataclass(frozen=True)
class Placeholders:
    """The `{name}`s the texts at one path may hold (`allowed`) and must hold (`required`). Declared once, in a
    family's `Domain.PLACEHOLDERS`: the check reads it, and so does a designer's grammar, under which a small model
    can then neither write a placeholder the engine does not fill nor leave out one it needs.

    `at`: the path under the domain, `[]` for every item of a list ('faults[].evidence[]'). `kind`: only the texts
    of records of that kind (a scheduling rule's text names what its kind names). `says`: what a missing one is
    for, in the family's words. `names_from`: names from the domain's own data the texts may also hold, a path
    under the record that holds the text ('slots[].name', a question's own slots), or under the domain with a
    'domain.' prefix; a designer's grammar cannot know them before they are written and leaves such texts to the
    check."""

    at: str
    allowed: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    kind: str | None = None
    says: str | None = None
    names_from: str | None = None


def values_at(root: Any, at: str, path: str = "domain") -> Iterator[tuple[str, Any, Any]]:
    """(concrete path, value, the record holding it) for every value at template path `at` under `root` (a parsed
    domain or one of its records); a missing or null step yields nothing."""
    nodes = [(path, root, root)]
    for step in at.split("."):
        name, listed = step.removesuffix("[]"), step.endswith("[]")
        found = []
        for where, node, record in nodes:
            value = getattr(node, name, None) if isinstance(node, BaseModel) else None
            holder = node if isinstance(node, BaseModel) else record
            if value is None:
                continue
            if listed:
                found += [(f"{where}.{name}[{i}]", item, holder) for i, item in enumerate(value)]
            else:
                found.append((f"{where}.{name}", value, holder))
        nodes = found
    yield from nodes


class DomainError(UsageError):
    """A domain that does not validate; `problems` name the fields."""

    def __init__(self, problems: list[DomainProblem], source: str = "domain"):
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:6])
        more = f" (and {len(problems) - 6} more)" if len(problems) > 6 else ""
        super().__init__(f"{source} is not a valid domain: {shown}{more}")


def _not_content(path: str, message: str) -> DomainProblem:
    return DomainProblem(path=path, code=Code.NOT_CONTENT, message=message)


def field_path(loc: Iterable[Any], root: str = "domain") -> str:
    """pydantic's ('faults', 2, 'evidence') -> 'domain.faults[2].evidence'."""
    path = root
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def schema_problems(exc: ValidationError, root: str = "domain") -> list[DomainProblem]:
    problems = []
    for err in exc.errors():
        short = err["type"] == "too_short"
        problems.append(DomainProblem(path=field_path(err["loc"], root), message=err["msg"].removeprefix(
            "Value error, "), code=Code.TOO_FEW if short else Code.SCHEMA,
            minimum=(err.get("ctx") or {}).get("min_length") if short else None))
    return problems


def placeholders(text: str) -> set[str]:
    """The `{name}` placeholders in a domain text."""
    return set(_PLACEHOLDER.findall(text))


def fill(text: str, **values: Any) -> str:
    """Substitute `{name}` placeholders in a domain text. Unlike `str.format`, nothing but a plain name is
    understood (no attribute access, indexing or format specs): domain texts are data, never code."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


class DomainPart(BaseModel):
    """The base of every nested model of a domain schema (a component, a fault, a set of tool names): like
    `Domain` itself, it refuses unknown keys, is immutable once parsed and strips the whitespace around texts."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
    # Fields whose quoted example is the family's general form of such a text, in no world of its own (a diagnosis
    # constraint note): a text that takes its words is no copy of another world (designer/copying.py).
    FORMS: ClassVar[frozenset[str]] = frozenset()


def name_field(default: str, what: str, example: str) -> Any:
    """A field naming one of the agent's actions in this world (an identifier it types), with its default."""
    return Field(default=default, pattern=IDENT, max_length=30,
                 description=f"What {what} is called in this world, an identifier, e.g. '{example}'.")


@dataclass(frozen=True)
class Reference:
    """A field whose values must be values of another field: `source` is 'list.field' (every `field` of the
    items of `list`). `later_only`, within the same list, allows only items after this one (an ordered list then
    makes an acyclic graph). `min_chain`: the family needs a path of at least that many items through these
    references (A -> B -> C is 3), which a designer can build link by link. `by_kind`: where the item's `kind`
    decides which list the field draws from, (kind, source) pairs; a kind not listed takes no values (a scheduling
    rule's targets are sites for a site rule, staff for a staff rule, none for shared equipment)."""

    source: str
    later_only: bool = False
    min_chain: int = 0
    by_kind: tuple[tuple[str, str], ...] = ()


class Domain(DomainPart):
    """Fields every domain has; a family's schema subclasses this and adds its own.

    `KEYS` and `REFERENCES` tell a designer how the domain's parts refer to each other, so that it can write a
    list's keys first and constrain every reference to keys that exist: with constrained decoding, a dangling
    reference is then impossible rather than a likely mistake of a small model. The semantic checks
    (`family_problems`) stay the authority."""

    KEYS: ClassVar[dict[str, str]] = {}  # list field -> its items' key field, e.g. {"components": "name"}
    REFERENCES: ClassVar[dict[str, Reference]] = {}  # 'list.field' -> Reference('list.key')
    # Lists of lines whose placeholders stand for names of a keyed list: {'symptom_lines': {'component':
    # 'components', 'dependency': 'components'}}. A designer may ask for such lines with real names in the
    # placeholders' place (a small model fills '{dependency}' with a noun of its own, 'request to pump outlet
    # timed out', but writes 'pump-2' back where it was shown 'pump-2'); `tidy` puts the placeholders back.
    NAMED_LINES: ClassVar[dict[str, dict[str, str]]] = {}
    # Keyed lists whose items must be different things, so that at most half of the keys may be numbered copies
    # of one name: the parts of one system depending on each other ('pump-1' .. 'pump-6', all of kind pump, make
    # an irrigation system of six pumps needing each other, with no wells, filters or valves).
    VARIED_KEYS: ClassVar[frozenset[str]] = frozenset()
    # Optional parts that at least the first N items of a keyed list must write ('list.field' -> N), where a
    # check asks for N of them: a designer's schema for those items does not offer null or an empty list (a
    # small model writes `constraint: null` for every item, though the description asks for some).
    REQUIRED_IN_FIRST: ClassVar[dict[str, int]] = {}
    # Whether the embedded model writes every piece after the header aside, out of the worked example's sight
    # (docs/history/designer.md): on where that leaves fewer problems (in its sight, a model copies the example's
    # names, e.g. scheduling's docks); off where the pieces need the example's shape (aside, inventory items come
    # out 'inventory', 'item2', ...) or what was written before them in full (a question's SQL reads the tables'
    # columns).
    PIECES_ASIDE: ClassVar[bool] = False
    # Texts that must hold no figure ('list[].field' paths), which a designer's grammar then keeps out: checked
    # only afterwards, a small model writes figures into them ("... pay a fee of 200 EUR").
    NO_DIGITS: ClassVar[frozenset[str]] = frozenset()
    # The rules across fields its checks hold it to (`Rule`), stated to a designer before it writes.
    RULES: ClassVar[tuple[Rule, ...]] = ()
    # The placeholders each of its texts may and must hold (`Placeholders`), checked and held by the grammar.
    PLACEHOLDERS: ClassVar[tuple[Placeholders, ...]] = ()

    @classmethod
    def rules_reading(cls, fields: Iterable[str]) -> list[Rule]:
        """The declared rules that read any of `fields`, in declaration order."""
        wanted = set(fields)
        return [rule for rule in cls.RULES if wanted & set(rule.reads)]

    @classmethod
    def rule(cls, code: str) -> Rule:
        return next(rule for rule in cls.RULES if rule.code == code)

    title: str = Field(min_length=3, max_length=80, description=(
        "Short name of the world this domain models, in the task's own words (e.g. 'Cold-storage warehouse "
        "refrigeration', 'University course timetabling'). Never a generic word like 'system' or 'domain'."))
    summary: str = Field(min_length=30, max_length=700, description=(
        "Two or three sentences for the agent's briefing: the setting, the job the agent does there (named as "
        "the people of this world name it), and what it must achieve. Concrete and specific to this world."))

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A designer's draft (plain data), tidied where the fix follows mechanically from the draft itself:
        never new content, only what the draft already says put where the schema wants it (override)."""
        return data

    # ---- checks ------------------------------------------------------------------------------------------
    def problems(self) -> list[DomainProblem]:
        """Every semantic problem: the shared text checks, then the family's own."""
        return [*self._text_problems(), *self._numbered_copy_problems(), *self._placeholder_problems(),
                *self.family_problems()]

    def _placeholder_problems(self) -> Iterator[DomainProblem]:
        for rule in self.PLACEHOLDERS:
            for path, text, record in values_at(self, rule.at):
                if not isinstance(text, str) or (rule.kind is not None and getattr(record, "kind", None) != rule.kind):
                    continue
                names: tuple[str, ...] = ()
                if rule.names_from is not None:
                    root, at = (self, rule.names_from[7:]) if rule.names_from.startswith("domain.") else \
                        (record, rule.names_from)
                    names = tuple(str(name) for _, name, _ in values_at(root, at))
                yield from bad_placeholders(text, (*rule.allowed, *names), path, rule.required, rule.says)

    def _numbered_copy_problems(self) -> Iterator[DomainProblem]:
        for list_name in sorted(self.VARIED_KEYS):
            key = self.KEYS[list_name]
            names = [getattr(item, key) for item in getattr(self, list_name)]
            for i in numbered_copies(names):
                yield DomainProblem(path=f"domain.{list_name}[{i}].{key}", code=Code.NUMBERED_COPY, value=names[i],
                                    message=(
                    f"{names[i]!r}: more than half of the {list_name} are numbered copies of one name "
                    f"({key_base(names[i])!r}); name another part of this world, not a numbered copy"))

    def family_problems(self) -> list[DomainProblem]:
        """Referential integrity, uniqueness and variety for this family's mechanics (override)."""
        return []

    def _text_problems(self) -> Iterator[DomainProblem]:
        texts = list(iter_texts(self))
        for path, text in texts:
            words = re.findall(r"[a-z/]+", text.lower())
            if words and all(w in PLACEHOLDER_WORDS for w in words):
                yield _not_content(path, f"{text!r} is a placeholder or a schema word, not content "
                                   "of this world: write what this field means here")
            elif (foreign := foreign_script(text)) is not None:
                yield _not_content(path, f"this text breaks into another script "
                                   f"({text[foreign:][:12]!r}) in the middle of its sentence: write it in one "
                                   "language")
            elif is_debris(text):
                yield _not_content(path, f"{text!r} is JSON or markdown syntax, not words of this "
                                   "world: write what this field means here")
            elif slot := SLOT.search(text):
                yield _not_content(path, f"this text holds the slot {slot.group(0)!r}, a name left "
                                   "unfilled: write the value it stands for in this world")
            elif not path.endswith("role") and (meta := _META.search(text)):
                yield _not_content(path, f"this text speaks of the agent being trained "
                                   f"({meta.group(0)!r}), not of this world: write what this field is here")
            elif path == "domain.title" and (said := _PACKAGE_WORDS.search(text)):
                yield _not_content(path, f"this title names the package being built ({said.group(0)!r}),"
                                   " not the world it models: name the place or trade, in the task's own words")
            elif path.endswith("agent_role") and set(re.findall(r"[a-z]+", text.lower())) <= _AGENT_WORDS:
                yield _not_content(path, f"{text!r} names the agent being trained, not who it is in "
                                   "this world: write its job here, as the people of this world call it")
            elif path.endswith(".name") and _listed_fields(text):
                yield _not_content(path, f"{text[:60]!r} lists the record's fields, not its name: "
                                   "write what this world calls it")
            elif len(keys := _keys_written(text, _field_names(type(self)))) >= 2:
                yield _not_content(path, f"this text writes fields of the schema as data ({', '.join(keys)}): "
                                   "write only what this one field says in this world")
            elif is_prose(text) and (glued := _GLUED.search(text)):
                yield _not_content(path, f"this text glues a placeholder to the word before it "
                                   f"({glued.group(0)!r}): a space or the words it needs go between them")
            elif said := _MECHANICS.search(text):
                yield _not_content(path, f"this text speaks of the training environment "
                                   f"({said.group(0)!r}), not of this world: write what happens here")
            elif said := _FORMAT.search(text):
                yield _not_content(path, f"this text speaks of the JSON it is written in "
                                   f"({said.group(0)!r}), not of this world: write what this field is here")
        echoed = _described_phrases(type(self))
        for path, text in texts:
            if is_prose(text) and (said := next((r for r in phrases(text) if r in echoed), None)):
                yield DomainProblem(path=path, code=Code.SCHEMA_ECHO, value=" ".join(said),
                                    message=f"this text repeats the schema's description of a field "
                                    f"({' '.join(said)!r}) instead of saying what it is in this world: write this "
                                    "world's own")
        # Prose only: identifiers and names used as references repeat legitimately.
        # Every copy but the first is reported, so that one round of repairs rewrites them all.
        long_texts = Counter(text for _, text in texts if is_prose(text))
        seen: set[str] = set()
        for path, text in texts:
            if long_texts.get(text, 0) >= REPEATED_TEXT:
                if text in seen:
                    yield DomainProblem(path=path, code=Code.REPEATED_TEXT,
                                        message=f"the same text appears {long_texts[text]} times "
                                        f"({text[:60]!r}...): each item needs its own words")
                seen.add(text)


# A name in angle brackets ('<pod-name>', '< pod-name>') is a slot a template left to fill: this world's
# placeholders are in braces. The check finds one (`SLOT`); a grammar lets `<` open only a comparison ('< 200 ms',
# '<= 5%'): one optional space, then one of `COMPARED` (a character class's body).
COMPARED = "0-9="
SLOT = re.compile(r"<\s*[A-Za-z][\w .-]{0,30}>")
# The task restated where the world's content belongs: a small model writes subjects such as 'An AI agent is
# tasked with negotiating the price and delivery terms ...' (only a role field may speak of the agent).
_META = re.compile(r"\bAI (agent|assistant|model)s?\b|\b(an|the) AI\b|\bis tasked with\b", re.IGNORECASE)
# A role that is only the agent being trained ('an AI agent', as a small model writes it).
_AGENT_WORDS = frozenset({"a", "an", "the", "ai", "agent", "assistant", "model", "llm", "bot", "autonomous"})
# Notes about the reply's own format, written into the world's texts: a small model goes on in a counterpart's
# reply with '**Note:** {offer} is a placeholder for the actual offer ... The above JSON is a template'.
_FORMAT = re.compile(r"\*\*|\bplaceholders?\b|\b(?:the|this|above) JSON\b|\bJSON (?:is|above|template)\b",
                     re.IGNORECASE)
# The environment's own mechanics in a world's text: a constraint note reading "On harder tiers, the usual fix
# may not be effective" (the constraint field's description speaks of tiers).
_MECHANICS = re.compile(r"\b(?:harder|hard|easier|higher|lower) tiers?\b|\bECI ?\d\b|\b(?:this|each|every) episode\b",
                        re.IGNORECASE)
_AI_AGENT = re.compile(r"\b(?:an?|the) AI (?:agent|assistant|model)\b", re.IGNORECASE)
# A title naming the package rather than the world ('Negotiation Environment AI').
_PACKAGE_WORDS = re.compile(r"\b(?:environment|simulation|simulator)s?\b", re.IGNORECASE)
# A placeholder run into a word ('Please{offer}.', 'the line{value} rate'): a small model does so where its
# grammar lets the placeholder in anywhere. A code's own format ('RF{n}') is no prose, and not judged.
_GLUED = re.compile(r"[A-Za-z]+\{[a-z_]+\}")
_TASKED = re.compile(r"\b(?!(?:who|that|which)\b)(\w+) is (?:an AI )?tasked with\b", re.IGNORECASE)
_SYNTAX = set("[]{}(),:;`'\"")
LOG_LEVELS = frozenset({"error", "warn", "warning", "info", "debug", "notice"})  # a log line's first word


def unglued(text: str) -> str:
    """A prose text with a space put between a word and the placeholder run into it ('and{client}' -> 'and
    {client}'): a small model glues many, and asking for each again one by one runs out the time limit. The words
    a reader might want between them are the model's to add; glued, the text renders as one word."""
    return re.sub(r"([A-Za-z])(\{[a-z_]+\})", r"\1 \2", text) if is_prose(text) else text


def _listed_fields(text: str) -> bool:
    """Whether a name is its record's fields run together, two or more of them figures: a small model names an
    item 'Inventory, bags, bulk_racking, critical, 0.2, 0.01, 40.0, 1.5, 0.0125'."""
    parts = [p.strip() for p in text.split(",")]
    return len(parts) >= 4 and sum(bool(re.fullmatch(r"-?\d+(?:\.\d+)?", p)) for p in parts) >= 2


def without_tasked(text: str) -> str:
    """'The agent is tasked with negotiating ...' as 'The agent's job is negotiating ...', and 'an AI agent' as
    'the agent': a small model keeps writing its summary so, even when told that it speaks of the agent being
    trained ('... where an AI agent's job is negotiating ...')."""
    text = _AI_AGENT.sub(lambda m: "The agent" if m.group(0)[0].isupper() else "the agent", text)
    return _TASKED.sub(r"\1's job is", text)


def is_debris(text: str) -> bool:
    """Whether a text is the syntax a small model leaks out of its JSON ('INFO {component} ]} ``` ```',
    'INFO {component} ,  {'): a markdown fence, two or more words of brackets alone, or a stray bracket and
    nothing else besides its placeholders and a log level."""
    words = re.sub(r"\{[a-z_]+\}", " ", text).split()
    brackets = sum(all(c in _SYNTAX for c in w) and any(c in "[]{}`" for c in w) for w in words)
    wordy = [w for w in words if re.search(r"[A-Za-z0-9]", w) and w.lower().strip(":") not in LOG_LEVELS]
    return "```" in text or brackets >= 2 or (not wordy and any(c in "[]{}`" for w in words for c in w))


# Scripts a text in Latin letters should not break into: Cyrillic, Hebrew and Arabic, Thai, Hangul Jamo, CJK
# (radicals to unified ideographs, kana included), Hangul syllables, CJK compatibility ideographs, and the half-
# and full-width forms ('￥'). Latin letters of every kind, Greek (a unit's 'μ'), symbols, dashes and curly quotes
# are not among them. The local model's grammar excludes the same ranges (llm/local/scripts.py).
FOREIGN_SCRIPTS = ((0x0400, 0x052F), (0x0590, 0x06FF), (0x0E00, 0x0E7F), (0x1100, 0x11FF), (0x2E80, 0x9FFF),
                   (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF))
FOREIGN = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in FOREIGN_SCRIPTS) + "]")


def foreign_script(text: str) -> int | None:
    """Where a text in Latin letters breaks into another script (the Qwen models do, mid-sentence: 'the
    irrigation system will无法', 'fixed at ￥{counterpart}'), or None. A text written in one of those scripts is
    not flagged."""
    found = FOREIGN.search(text)
    return found.start() if found and len(re.findall(r"[A-Za-z]{3,}", text[:found.start()])) >= 3 else None


def without_foreign_tail(text: str) -> str:
    """A text that breaks into another script, cut back to its last full sentence before the break (unchanged
    where there is none)."""
    at = foreign_script(text)
    if at is None:
        return text
    ends = [m.end() for m in re.finditer(r"[.;!?](\s|$)", text[:at])]
    return text[:ends[-1]].rstrip() if ends else text


RUN = 6  # words in a row that make a phrase somebody's own (with content words, see `phrases`)


def phrase_words(text: str) -> list[str]:
    """A text's words as `phrases` reads them: lowercased, placeholders whole."""
    return re.findall(r"\{\w+\}|[\w'.%-]+", text.lower())


def phrases(text: str) -> list[tuple[str, ...]]:
    """The text's runs of RUN words that hold three words of five letters or more: a phrase with content, not
    a turn of phrase any world's texts share ('give the name and the count')."""
    words = phrase_words(text)
    runs = (tuple(words[i:i + RUN]) for i in range(len(words) - RUN + 1))
    return [r for r in runs if sum(len(w) >= 5 and w[0] != "{" for w in r) >= 3]


def descriptions(model: type[BaseModel], seen: set | None = None) -> str:
    """Every field description anywhere in a schema, joined."""
    seen = seen if seen is not None else set()
    if model in seen:
        return ""
    seen.add(model)
    parts = []
    for f in model.model_fields.values():
        parts.append(f.description or "")
        parts += [descriptions(inner, seen) for inner in [f.annotation, *typing.get_args(f.annotation)]
                  if isinstance(inner, type) and issubclass(inner, BaseModel)]
    return "\n".join(parts)


@functools.cache
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """Every field name anywhere in a schema."""
    names, todo, seen = set(), [model], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name, f in current.model_fields.items():
            names.add(name)
            todo += [inner for inner in [f.annotation, *typing.get_args(f.annotation)]
                     if isinstance(inner, type) and issubclass(inner, BaseModel)]
    return frozenset(names)


_KEY = re.compile(r"\b([a-z][a-z_]*)['\"]?\s*:")  # a key written as data ('telltales': [...], runbook: ...)


def _keys_written(text: str, fields: frozenset[str]) -> list[str]:
    """The schema's field names a text writes as keys, a record run into one string (a small model's evidence
    line "telltales':['worn out', ...],metrics:['suction pressure'],runbook:[...]")."""
    return sorted({m.group(1) for m in _KEY.finditer(text)} & fields)


@functools.cache
def _described_phrases(model: type[BaseModel]) -> frozenset[tuple[str, ...]]:
    """The phrases of a schema's own words, its quoted examples left out: a text that holds one tells the agent
    what the field is for ('a hidden operational fact that makes the usual fix wrong for this episode', a small
    model's runbook note) instead of what it says in this world. The quoted examples are the shape
    a text may take; the copying checks judge those."""
    own = re.sub(r"(?<![A-Za-z])'.*?'(?![A-Za-z])|\".*?\"", " ", descriptions(model), flags=re.DOTALL)
    return frozenset(phrases(own))


def is_prose(text: str) -> bool:
    """A sentence, not a name or an enum value: only prose is expected to differ from item to item."""
    return len(text) >= 25 and " " in text


def iter_texts(value: Any, path: str = "domain") -> Iterator[tuple[str, str]]:
    """Every string in a domain, with its field path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from iter_texts(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from iter_texts(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_texts(item, f"{path}.{key}")


def key_base(key: str) -> str:
    """A key without a trailing number: 'pump_fails_2' and 'pump-fails' are 'pump_fails'."""
    return re.sub(r"[-_. ]?\d+$", "", key.lower()).replace("-", "_")


def key_words(key: str) -> list[str]:
    """A key's words without its number and without a plural's s: 'inbound_receipts_2' is ['inbound', 'receipt']."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in re.split(r"[-_. ]+", key_base(key)) if w]


def extends(name: str, old: str) -> bool:
    """Whether `name` is `old` numbered, in the plural, or with words added around it ('weekly_inventory_flow',
    'inventory_flows' and 'inventory_flow_2' are 'inventory_flow'): asked to rename a name copied from the
    example ('inventory_flow'), a small model extends it ('weekly_inventory_flow') or makes it plural
    ('inbound_receipt' -> 'inbound_receipts')."""
    words, have = key_words(old), key_words(name)
    return bool(words) and any(have[i:i + len(words)] == words for i in range(len(have) - len(words) + 1))


def numbered_copies(names: list[str]) -> list[int]:
    """The indices of the names beyond the first half of a list that share one base (`key_base`) with more than
    half of it: ['pump-1' .. 'pump-6'] -> [3, 4, 5]; names that differ, or a few numbered ones, give []."""
    bases = [key_base(n) for n in names]
    common = Counter(bases).most_common(1)
    if not common or common[0][1] * 2 <= len(names):
        return []
    copies = [i for i, b in enumerate(bases) if b == common[0][0]]
    return copies[len(names) // 2:]


# ---- helpers for family_problems() ---------------------------------------------------------------------------
def duplicates(items: Iterable[Any], key: str, path: str) -> list[DomainProblem]:
    """Items of a list whose `key` repeats an earlier item's."""
    seen: dict[str, int] = {}
    problems = []
    for i, item in enumerate(items):
        value = getattr(item, key)
        folded = value.lower() if isinstance(value, str) else value
        if folded in seen:
            problems.append(DomainProblem(path=f"{path}[{i}].{key}", code=Code.DUPLICATE_NAME, value=str(value),
                                          message=f"{value!r} is already used by "
                                          f"{path}[{seen[folded]}]: names must be unique"))
        else:
            seen[folded] = i
    return problems


def _defined(known: set[str]) -> str:
    return ", ".join(sorted(known)[:12]) or "none"


def unknown_refs(values: Iterable[str], known: Iterable[str], path: str, what: str) -> list[DomainProblem]:
    """References (by name) to things the domain does not define."""
    known = set(known)
    return [DomainProblem(path=f"{path}[{i}]" if not path.endswith("]") else path, code=Code.UNKNOWN_REFERENCE,
                          value=value, choices=tuple(sorted(known)),
                          message=f"{value!r} is not a defined {what} (defined: {_defined(known)})")
            for i, value in enumerate(values) if value not in known]


def unknown_ref(value: str, known: Iterable[str], path: str, what: str) -> list[DomainProblem]:
    """One reference (a single field, not a list) to something the domain does not define."""
    known = set(known)
    if value in known:
        return []
    return [DomainProblem(path=path, code=Code.UNKNOWN_REFERENCE, value=value, choices=tuple(sorted(known)),
                          message=f"{value!r} is not a defined {what} (defined: {_defined(known)})")]


def duplicate_values(values: Iterable[str], path: str) -> list[DomainProblem]:
    """Repeats in a plain list of strings (case-insensitive), each reported at its own index."""
    seen: dict[str, int] = {}
    problems = []
    for i, value in enumerate(values):
        folded = value.lower()
        if folded in seen:
            problems.append(DomainProblem(path=f"{path}[{i}]", code=Code.REPEATED_LINE, value=value,
                                          message=f"{value!r} repeats {path}[{seen[folded]}]"))
        else:
            seen[folded] = i
    return problems


def names_differ(names: list[str] | dict[str, str], path: str, what: str) -> list[DomainProblem]:
    """A set of names (e.g. what the actions are called) in which each must differ from the others. Given a
    record's names by field, each repeat is reported at its own field (`domain.tools.notes`), so that it can be
    renamed alone: reported for the whole record (tool names all `submit_diagnosis`), it is written again
    whole and comes back the same."""
    values = list(names.values()) if isinstance(names, dict) else names
    if len(set(values)) == len(values):
        return []
    if not isinstance(names, dict):
        return [DomainProblem(path=path, code=Code.NAME_CLASH, message=f"{what} must differ: {names}")]
    first: dict[str, str] = {}
    problems = []
    for field, name in names.items():
        if name in first:
            problems.append(DomainProblem(path=f"{path}.{field}", code=Code.NAME_CLASH, value=name, message=(
                f"{name!r} is already the name of `{first[name]}`: {what} must differ ({', '.join(names.values())})")))
        else:
            first[name] = field
    return problems


def dependency_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """The first cycle of a graph of names (node -> the nodes it depends on), as the path that closes it
    (['a', 'b', 'a']), or None when it has none. Edges to nodes outside the graph are ignored."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in graph.get(node, []):
            if state.get(dep) == 1:
                return [*trail, node, dep]
            if dep in graph and state.get(dep) is None and (cycle := visit(dep, [*trail, node])):
                return cycle
        state[node] = 2
        return None

    for name in graph:
        if state.get(name) is None and (cycle := visit(name, [])):
            return cycle
    return None


def template_pattern(template: str, capture: Iterable[str] | Mapping[str, str] = (), matches: str = r"\S+",
                     flags: int = 0) -> re.Pattern[str]:
    """A domain text with `{placeholders}` as a regex matching the lines `fill()` makes of it. Every placeholder
    matches the pattern `matches` (one word by default); the names in `capture` (or a mapping of names to their
    own patterns) become groups named after them, a repeat of one a back-reference to its first value."""
    groups = capture if isinstance(capture, Mapping) else dict.fromkeys(capture, matches)
    seen: set[str] = set()
    body = ""
    for part in _PLACEHOLDER_PARTS.split(template):
        name = part[1:-1] if _PLACEHOLDER.fullmatch(part) else None
        if name is None:
            body += re.escape(part)
        elif name not in groups:
            body += matches
        elif name in seen:
            body += f"(?P={name})"
        else:
            body += f"(?P<{name}>{groups[name]})"
            seen.add(name)
    return re.compile(body, flags)


def too_few(items: list[Any], minimum: int, path: str, why: str) -> list[DomainProblem]:
    if len(items) >= minimum:
        return []
    return [DomainProblem(path=path, code=Code.TOO_FEW, minimum=minimum,
                          message=f"has {len(items)} item(s); at least {minimum} are needed {why}")]


def bad_placeholders(text: str, allowed: Iterable[str], path: str, required: Iterable[str] = (),
                     says: str | None = None) -> list[DomainProblem]:
    """Placeholders of a domain text outside `allowed`, and (one problem) those of `required` it lacks (`says`:
    what they are for, in the family's words)."""
    problems = []
    unknown = placeholders(text) - set(allowed)
    if unknown:
        shown = ", ".join("{" + u + "}" for u in sorted(unknown))
        allowed_here = ", ".join("{" + a + "}" for a in sorted(allowed)) or "none"
        problems.append(DomainProblem(path=path, code=Code.UNKNOWN_PLACEHOLDER, choices=tuple(sorted(allowed)),
                                      message=f"unknown placeholder(s) {shown}; allowed here: {allowed_here}"))
    missing = [name for name in required if "{" + name + "}" not in text]
    if missing:
        shown = ", ".join("{" + m + "}" for m in missing)
        problems.append(missing_placeholders(path, missing, says or f"must contain {shown}"))
    return problems


def missing_placeholders(path: str, names: Iterable[str], message: str) -> DomainProblem:
    """A text that lacks placeholders it must hold (`names`, without braces), in the family's own words."""
    return DomainProblem(path=path, code=Code.MISSING_PLACEHOLDER, required=tuple(names), message=message)


def identifier_problems(values: Iterable[str], path: str, field: str | None = None) -> list[DomainProblem]:
    """Names the agent types into actions must be lowercase identifiers (letters, digits, underscores)."""
    suffix = f".{field}" if field else ""
    return [DomainProblem(path=f"{path}[{i}]{suffix}", code=Code.NOT_AN_IDENTIFIER, value=value,
                          message=f"{value!r} must be a lowercase identifier like "
                          "'frosted_evaporator' (letters, digits, underscores)")
            for i, value in enumerate(values) if not _IDENT.match(value)]
