"""Names and texts a draft took over from the worked example (another world) instead of writing its own."""

from __future__ import annotations

import enum
import functools
import re
import types
import typing
from typing import Any

from pydantic import BaseModel

from openadapt.designer.pieces import is_model
from openadapt.families.domain import (
    COPY_CODES,
    Code,
    Domain,
    DomainProblem,
    descriptions,
    iter_texts,
    key_base,
    key_words,
    phrases,
)

# The fields that name a top-level entity (domain.components[3].name, domain.faults[0].id, a report's
# domain.kpis[0].code and domain.metrics[1].field, a term's domain.issues[0].label): what a copied world shows.
NAME_FIELDS = "name|id|code|field|label"
ENTITY_NAME = re.compile(rf"^domain\.\w+\[\d+\]\.({NAME_FIELDS})$")


def copied_from_example(data: dict[str, Any], example: Domain, others: list[Domain] = (),
                        task: str = "") -> list[DomainProblem]:
    """Names and long texts taken over from the worked example (another world) instead of written for this one.
    What it shares with every other example of the family is the family's common vocabulary, not its world; what
    it shares with only some of them is the vocabulary of a kind of world (web services' `p99_latency_ms`)."""
    sets = [{v.lower() for _, v in iter_texts(o)} for o in others]
    common = set.intersection(*sets) if sets else set()
    common |= {t.lower() for t in _default_texts(type(example))}  # a schema default is nobody's world
    theirs_names = {v.lower() for path, v in iter_texts(example) if ENTITY_NAME.match(path)} - common
    # An unnumbered name is the example's numbered or in the plural too ('rate_hawk2', 'rate_hawks' are its
    # 'rate_hawk'); a numbered one ('converter-01') is matched whole ('converter_2' is anyone's).
    theirs_bases = {"_".join(key_words(v)) for v in theirs_names if key_base(v) == v.replace("-", "_")}
    described = descriptions(type(example))  # a text the schema itself gives as its example is the family's
    theirs_texts = {v for _, v in iter_texts(example) if _is_text(v) and v.lower() not in common
                    and v not in described}
    # Runs of words the example's texts hold and no other example nor the schema's descriptions do: a text that
    # takes one over is the example's sentence with a few words changed.
    runs = [set().union(*(_runs(v) for _, v in iter_texts(o))) for o in others]
    family_runs = (set.intersection(*runs) if runs else set()) | _runs(described)
    theirs_runs = set().union(*(_runs(v) for v in theirs_texts)) - family_runs
    # Shorter runs of the example's own words, numbers aside: its template with this world's names filled in,
    # which the phrase runs miss (too few long words).
    everyones = _everyones_words(type(example))
    shared = [set().union(*(_rare_runs(v, everyones) for _, v in iter_texts(o))) for o in others]
    family_templates = (set.intersection(*shared) if shared else set()) | _rare_runs(described, everyones)
    theirs_templates = set().union(*(_rare_runs(v, everyones) for _, v in iter_texts(example))) - family_templates
    # A name made only of the task's own words is this world's too, whoever else has it: the fidelity rubric's
    # own rule (docs/designer.md).
    task_words = set(_words(task))

    def tasks_own(value: str) -> bool:
        return bool(task_words) and set(_words(value.replace("_", " "))) <= task_words | _SHORT_WORDS

    # Identifiers and proper names anywhere else (a table's columns, an attribute's values, a subject's name). A
    # record of names any world may use (all defaults: a diagnosis's tools) is not judged.
    theirs_worldly = {v.lower() for _, v in iter_texts(example) if _worldly(v)} - common
    anyones = tuple(f"domain.{name}." for name, info in type(example).model_fields.items()
                    if is_model(info.annotation) and _all_defaults(info.annotation))
    # The example's things by name in any text ('linehaul rate' for its `linehaul_rate`), too short for a phrase
    # run. Names of two words or more, one of them the example's world's own (not everyone's, not the task's):
    # 'payment terms' or 'api gateway' are anyone's.
    entities = {tuple(_words(v.replace("_", " "))): v.replace("_", " ")
                for v in [*sorted(theirs_bases), *sorted(theirs_names)]}  # a name as the example spells it
    theirs_things = {e: shown for e, shown in entities.items() if len(e) >= 2 and any(
        w[0] != "{" and w not in _SHORT_WORDS and w not in everyones and w not in task_words for w in e)}
    problems = []
    chosen = closed_paths(data, type(example))
    for path, value in _iter_json_texts(data):
        if path in chosen:
            continue
        named = ENTITY_NAME.match(path) is not None
        theirs = value.lower() in theirs_names or "_".join(key_words(value)) in theirs_bases
        if named and theirs and not tasks_own(value):
            problems.append(DomainProblem(path=path, code=Code.COPIED, value=value, message=(
                f"{value!r} is copied from the worked example, which is another world: name this world's own")))
        elif (not named and _worldly(value) and value.lower() in theirs_worldly
              and not path.startswith(anyones) and not tasks_own(value)):
            problems.append(DomainProblem(path=path, code=Code.COPIED, value=value, message=(
                f"{value!r} is copied from the worked example, which is another world: write this world's own")))
        elif _is_text(value) and value in theirs_texts:
            problems.append(DomainProblem(path=path, code=Code.COPIED, value=value, message=(
                "this text is copied from the worked example: write one that belongs to this task's world")))
        elif (taken := ([r for r in phrases(value) if r in theirs_runs] if len(value) >= 40 else [])
              + [r for r in _rare_runs(value, everyones) if r in theirs_templates]):
            problems.append(_took(path, " ".join(taken[0])))
        elif _is_sentence(value) and (things := [t for t in theirs_things if _holds(_words(value), t)]):
            problems.append(_took(path, theirs_things[min(things)]))
        elif any(marker in value for marker in _FEEDBACK_MARKERS):
            problems.append(DomainProblem(path=path, code=Code.FEEDBACK_ECHO, message=(
                "this text repeats the designer's feedback instead of saying something of this world: write what the "
                "field asks for")))
    known = {v for domain in [example, *others] for _, v in iter_texts(domain)}
    return (problems + described_identifiers(data, type(example), known)
            + described_texts(data, type(example), task=task))


# Words of the problems the repairs send back, which no world's text holds: an answer that holds them wrote the
# feedback into the field.
_FEEDBACK_MARKERS = ("this field's description", "from the worked example", "in this world's own words",
                     "write this world's own")
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_PROPER = re.compile(r"^[A-Z][\w'.&-]*(?: (?:[A-Z][\w'.&-]*|and|of|de|la|du|on|upon))+$")


def _worldly(value: str) -> bool:
    """An identifier of two words or more ('stock_movements', 'cold_chain') or a proper name ('Venlo Cross-Dock'):
    what names a world's own things, unlike a single word ('posted', 'Warehouse') any world may use."""
    return bool(_SNAKE.match(value) or _PROPER.match(value))


def _took(path: str, phrase: str) -> DomainProblem:
    return DomainProblem(path=path, code=Code.EXAMPLE_PHRASE, value=phrase, message=(
        f"this text takes {phrase!r} from the worked example: write it in this task's world's own words"))


def is_copy(problem: DomainProblem) -> bool:
    """Whether a problem says its text was copied (from the worked example or from a field description's)."""
    return problem.code in COPY_CODES


def unquoted(problem: DomainProblem, with_path: bool = True) -> str:
    """A problem as a repair shows it to the model: a copy without the words it copied (shown them, a small model
    writes them back)."""
    message = problem.message
    if problem.code in COPY_CODES and problem.value is not None:
        shown = "a phrase" if problem.code in (Code.EXAMPLE_PHRASE, Code.DESCRIBED_PHRASE) else "this"
        message = message.replace(repr(problem.value), shown, 1)
    return f"{problem.path}: {message}" if with_path else message


# An apostrophe inside a word ('We don't really do discounts...') is not a closing quote: read as one, it hides
# the quoted example, and copies of it go unseen.
_QUOTED_TEXT = re.compile(r"(?<![A-Za-z])'((?:[^']|(?<=[A-Za-z])'(?=[a-z])){20,}?)'(?![A-Za-z])")


def _same(a: str, b: str) -> bool:
    return a.strip().rstrip(".").lower() == b.strip().rstrip(".").lower()


def described_texts(data: Any, model: type[BaseModel], path: str = "domain", task: str = "") -> list[DomainProblem]:
    """Texts that are their own field's quoted example, or take one of its phrases over: the example shows the
    shape a text takes, in a world of the description's own, not this one."""
    problems: list[DomainProblem] = []
    if not isinstance(data, dict):
        return problems
    for name, info in model.model_fields.items():
        value, item = data.get(name), _list_item(info.annotation)
        if item is None and is_model(info.annotation):
            item = info.annotation
            value = [value]
            where = [f"{path}.{name}"]
        else:
            where = [f"{path}.{name}[{i}]" for i in range(len(value))] if isinstance(value, list) else []
        if item is not None and isinstance(value, list):
            for at, entry in zip(where, value, strict=False):
                problems += described_texts(entry, item, at, task)
            continue
        examples = _QUOTED_TEXT.findall(info.description or "")
        if not examples or name in getattr(model, "NAMED_LINES", {}) or name in getattr(model, "FORMS", ()):
            continue  # lines written with names in the placeholders' place, or a form: the family's, no world's
        texts = [(f"{path}.{name}", value)] if isinstance(value, str) else list(zip(where, value, strict=False)) \
            if isinstance(value, list) else []
        runs = set().union(*(_runs(e) for e in examples))
        # the task's own words are this world's, whatever a description's example says
        common = _everyones_words(model) | frozenset(_words(task))
        templates = set().union(*(_rare_runs(e, common) for e in examples))
        for at, text in texts:
            if not isinstance(text, str):
                continue
            if any(_same(text, e) for e in examples):
                problems.append(DomainProblem(path=at, code=Code.DESCRIBED, value=text, message=(
                    "this text is the example in this field's description, from another world: write this "
                    "world's own")))
            elif taken := ([r for r in phrases(text) if r in runs]
                           + [r for r in _rare_runs(text, common) if r in templates]):
                problems.append(DomainProblem(path=at, code=Code.DESCRIBED_PHRASE, value=" ".join(taken[0]), message=(
                    f"this text takes {' '.join(taken[0])!r} from the example in this field's description, "
                    "another world: write it in this world's own words")))
    return problems


# An identifier quoted as a field's example ('run_defrost_cycle', 'freezer-room-2'): joined words, a world's own.
_QUOTED_IDENTIFIER = re.compile(r"(?<![A-Za-z])'([a-z][a-z0-9]*(?:[_-][a-z0-9]+)+)'(?![A-Za-z])")


def described_identifiers(data: Any, model: type[BaseModel], known: set[str],
                          path: str = "domain") -> list[DomainProblem]:
    """The identifiers of the records in the draft's lists (an item's id, name, fix) that are the example its
    field's own description quotes, where no example domain of the family (`known`: their strings) uses it:
    such an example comes from a world of the description's own (a diagnosis fault's 'e.g. run_defrost_cycle'
    is a cold room's). One an example uses is a word of that kind of world ('unit_price' in a negotiation), judged
    as the example's. A record (the tool names) is not judged: its examples are names any world may use."""
    problems: list[DomainProblem] = []
    if not isinstance(data, dict):
        return problems
    # what an example text of the record's fields names in parentheses ('... (shift_to_standby).'): copied with it
    forms = getattr(model, "FORMS", ())
    named = {i for n, f in model.model_fields.items() if n not in forms
             for text in _QUOTED_TEXT.findall(f.description or "") for i in _NAMED_IDENTIFIER.findall(text)}
    for name, info in model.model_fields.items():
        value, item = data.get(name), _list_item(info.annotation)
        if item is not None and isinstance(value, list):
            for i, entry in enumerate(value):
                problems += described_identifiers(entry, item, known, f"{path}.{name}[{i}]")
        elif path != "domain" and is_model(info.annotation) and isinstance(value, dict):
            problems += described_identifiers(value, info.annotation, known, f"{path}.{name}")
        elif (path != "domain" and isinstance(value, str) and value not in known and not closed_set(info.annotation)
              and (value in _QUOTED_IDENTIFIER.findall(info.description or "") or value in named)):
            problems.append(DomainProblem(path=f"{path}.{name}", code=Code.DESCRIBED, value=value, message=(
                f"{value!r} is copied from the worked example in this field's description or its record's, which "
                "is another world: name this world's own")))
    return problems


_NAMED_IDENTIFIER = re.compile(r"\(([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\)")


def closed_set(annotation: Any) -> bool:
    """Whether a field's values come from a fixed set (a Literal or an Enum, or a list of them): a column's role, a
    unit, a rule's kind. Such a value is chosen, not written, so it is nobody's world and never a copy: flagged, a
    role every other column already held could only come back as a duplicate."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        return True
    if origin is typing.Annotated:
        return closed_set(args[0])
    if origin in (list, typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return bool(kinds) and all(closed_set(a) for a in kinds)
    return False


def closed_paths(data: Any, model: type[BaseModel], path: str = "domain") -> set[str]:
    """The paths of a draft's values that a closed set holds (`closed_set`), lists' items included."""
    found: set[str] = set()
    if not isinstance(data, dict):
        return found
    for name, info in model.model_fields.items():
        value, at = data.get(name), f"{path}.{name}"
        if closed_set(info.annotation):
            found |= {at} | ({f"{at}[{i}]" for i in range(len(value))} if isinstance(value, list) else set())
        elif (item := _list_item(info.annotation)) is not None and isinstance(value, list):
            for i, entry in enumerate(value):
                found |= closed_paths(entry, item, f"{at}[{i}]")
        elif is_model(info.annotation):
            found |= closed_paths(value, info.annotation, at)
    return found


def _list_item(annotation: Any) -> type[BaseModel] | None:
    args = typing.get_args(annotation)
    return args[0] if typing.get_origin(annotation) is list and args and is_model(args[0]) else None


def _is_text(value: str) -> bool:
    """Long enough to be somebody's sentence rather than a word any world uses ('the platform on-call engineer'
    is; 'endpoints ready' is not)."""
    return len(value) >= 20 and len(value.split()) >= 3


def _is_sentence(value: str) -> bool:
    """Words with spaces between them (a phrase, a label, a sentence), not an identifier."""
    return " " in value.strip()


def _holds(words: list[str], run: tuple[str, ...]) -> bool:
    n = len(run)
    return any(tuple(words[i:i + n]) == run for i in range(len(words) - n + 1))


def _runs(text: str) -> set[tuple[str, ...]]:
    return set(phrases(text))


_SHORT_WORDS = frozenset({"the", "a", "an", "of", "to", "in", "on", "at", "by", "for", "and", "or", "with",
                          "from", "via", "its", "it", "is", "are", "was", "be", "as", "this", "that", "per",
                          "into", "not", "no"})


def _words(text: str) -> list[str]:
    """A text's words for template matching: lower case, every number '#', a plural's s dropped."""
    words = (re.sub(r"\d+(?:\.\d+)?", "#", w).strip(".") for w in re.findall(r"\{\w+\}|[\w'.%-]+", text.lower()))
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words if w]


@functools.cache
def _family_words() -> dict[str, frozenset[str]]:
    """Every word of every family's example domains, with the families whose examples use it."""
    from openadapt.families import all_families  # the registry loads every family: only when first asked

    found: dict[str, set[str]] = {}
    for family in all_families():
        for name in family.examples():
            for _, text in iter_texts(family.load_example(name)):
                for word in _words(text):
                    found.setdefault(word, set()).add(family.name)
    return {w: frozenset(f) for w, f in found.items()}


@functools.cache
def _everyones_words(domain: type[Domain]) -> frozenset[str]:
    """The words the examples of two or more other families use: everyone's ('team', 'average', 'deal'), not a
    world's own ('replica', 'hpa'; and any word no example uses, such as the draft's)."""
    from openadapt.families import all_families

    family = next((f.name for f in all_families() if f.domain is domain), None)
    return frozenset(w for w, used in _family_words().items() if len(used - {family}) >= 2)


def _rare_runs(text: str, everyones: frozenset[str]) -> set[tuple[str, ...]]:
    """Runs of 4 words of which two are a world's own words (not short words, placeholders, numbers or words
    everyone's examples use), and runs of 7 likewise: the example's clause with its own words further apart than
    any 4 words in a row."""
    words = _words(text)

    def own(w: str) -> bool:
        return w[0] != "{" and w not in _SHORT_WORDS and w not in everyones and re.search("[a-z]{3}", w) is not None

    mine = [own(w) for w in words]
    return {tuple(words[i:i + n]) for n in (4, 7) for i in range(len(words) - n + 1) if sum(mine[i:i + n]) >= 2}


def _default_texts(model: type[BaseModel], seen: set | None = None) -> set[str]:
    """The string defaults anywhere in a schema (they belong to the schema, not to an example's world)."""
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    out: set[str] = set()
    for f in model.model_fields.values():
        if isinstance(f.default, str):
            out.add(f.default)
        for inner in [f.annotation, *typing.get_args(f.annotation)]:
            if is_model(inner):
                out |= _default_texts(inner, seen)
                if _all_defaults(inner):
                    out |= {v for v in inner().model_dump().values() if isinstance(v, str)}
    return out


def _all_defaults(model: type[BaseModel]) -> bool:
    return all(not f.is_required() for f in model.model_fields.values())


def _iter_json_texts(value: Any, path: str = "domain"):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _iter_json_texts(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _iter_json_texts(item, f"{path}[{i}]")
