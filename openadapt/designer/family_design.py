"""The family-domain designer: an LLM (the embedded local model by default, or any OpenAI-compatible endpoint)
chooses a family for the task and writes that family's `Domain` as data, piece by piece.

Small models do well on small, well-described pieces with a worked example, and badly on a whole domain at once
(docs/designer.md has the measurements). So:

1. **The task's mechanic** (one constrained request): the world, what the agent does, what success means.
2. **The family**: with the local model, the family name it is most likely to answer given a menu of every
   family's description, calibrated against a content-free task (never a keyword count); with an endpoint, one
   constrained choice among the families or `none`, with its reason. The choice, its scores and a reason are
   recorded in provenance.
3. **The domain, in pieces** (one growing conversation, so the model's KV cache is reused): the scalar fields
   first, then the keys of every keyed list (`Domain.KEYS`: the component names, the fault ids...), then each
   list one item at a time, each piece constrained by its own JSON schema, its key fixed and its references
   (`Domain.REFERENCES`) limited to keys that exist, with one of the family's example domains (another world) as
   the worked example.
4. **Checks and piece repair**: the family's schema and semantic checks, plus names or texts copied from the
   worked example, name the field paths that are wrong; exactly those pieces are asked for again, with the
   problems, before anything reaches the sandbox validator.

The same prompt, model, sampling settings and seed give the same package.
"""

from __future__ import annotations

import json
import re
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model

from openadapt.designer.base import Candidate, DesignerInfo
from openadapt.designer.chat import ChatBackend, Completion, ReplyError, Usage
from openadapt.envpkg.render import family_package
from openadapt.families import all_families
from openadapt.families.base import Family
from openadapt.families.domain import Domain, DomainError, DomainProblem, is_prose, iter_texts
from openadapt.families.yamlio import dump_domain

# The name of a top-level entity (domain.components[3].name, domain.faults[0].id): what a copied world shows.
ENTITY_NAME = re.compile(r"^domain\.\w+\[\d+\]\.(name|id)$")
MAX_REPAIR_ROUNDS = 2  # piece repairs before the package goes to the validator
EXAMPLE_ITEMS = 2  # items per list kept in the worked example shown to the model
MAX_LIST_ITEMS = 8  # items a piece's lists may have (see `bounded`)
MAX_FREE_CHARS = 300  # characters of a string the schema leaves unbounded
Progress = Callable[[str, int, str], None]

SYSTEM = ("You design training environments for AI agents. You write the data of one world: its entities, "
          "rules, failure modes and texts, specific to the task you are given, realistic and varied. You answer "
          "with one JSON object exactly as asked, nothing else.")


class TaskMechanic(BaseModel):
    world: str = Field(max_length=200, description="the world of the task, in a few words")
    agent_does: str = Field(max_length=300, description="what the agent does, step by step, in one sentence")
    succeeds_when: str = Field(max_length=300, description="what counts as success for the agent")


class FamilyPick(BaseModel):
    reason: str = Field(max_length=200, description="why this family models the task (or why none does)")
    family: str = Field(description="the family's name, or 'none'")


class FamilyChoice(BaseModel):
    family: str | None
    method: str  # how the choice was made (recorded in provenance)
    scores: dict[str, float] = Field(default_factory=dict)  # per family, by `method`
    reason: str = ""
    mechanic: TaskMechanic

    def note(self) -> dict[str, Any]:
        return {"family": self.family, "method": self.method, "reason": self.reason,
                "scores": {k: round(v, 3) for k, v in self.scores.items()}, "mechanic": self.mechanic.model_dump()}


@dataclass
class Piece:
    """One request's worth of the domain: a group of scalar fields, one nested record, or one list item."""

    path: str  # 'domain', 'domain.tools', 'domain.faults[2]', 'domain.faults.keys'
    model: type[BaseModel]
    field: str | None = None  # the domain field it fills (None: the header group)
    index: int | None = None  # the list index, for list items
    value: Any = None
    guide: str = ""  # field descriptions, shown the first time a kind of piece is asked for
    keys: bool = False  # the keys of a list (written before its items; not part of the domain itself)
    aside: bool = False  # lines of prose: written out of sight of the worked example (a small model copies its lines)


@dataclass
class Session:
    """The conversation of one design: a fixed prefix, then the (instruction, answer) turns in the order they
    were asked. It only ever grows, so every request reuses the model's KV cache for all that came before and
    pays only for its own instruction; a rewritten piece is a new turn (the latest answer of a piece is the one
    that counts). When the conversation nears the context window it is compacted to the latest answer of each
    piece, in plan order (one re-evaluation, then growth again)."""

    backend: ChatBackend
    prefix: list[dict[str, str]]
    usage: Usage = field(default_factory=Usage)
    completions: list[dict[str, Any]] = field(default_factory=list)
    turns: list[tuple[str | None, str, str]] = field(default_factory=list)  # (piece path, instruction, answer)
    order: list[str] = field(default_factory=list)  # the pieces' paths in plan order
    budget_chars: int = 0  # compact beyond this many characters (0: from the backend's context window)

    @property
    def messages(self) -> list[dict[str, str]]:
        out = list(self.prefix)
        for _, ask, answer in self.turns:
            out += [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]
        return out

    def ask(self, instruction: str, model: type[BaseModel], max_tokens: int, key: str | None = None,
            schema: dict[str, Any] | None = None) -> BaseModel:
        """One constrained request; with `key`, the answer is kept as that piece's latest turn."""
        self._compact_if_needed(len(instruction) + max_tokens * 4)
        messages = [*self.messages, {"role": "user", "content": instruction}]
        schema = schema or _schema(model)
        completion = self.backend.complete(messages, schema=schema, max_tokens=max_tokens)
        self._record(completion)
        try:
            value = completion.parse_as(model)
        except ReplyError:
            if not completion.truncated:
                raise
            # The constrained answer ran out of room: ask once more with twice the room.
            completion = self.backend.complete(messages, schema=schema, max_tokens=max_tokens * 2)
            self._record(completion)
            value = completion.parse_as(model)
        if key is not None:
            self.turns.append((key, instruction, completion.text.strip()))
        return value

    def ask_aside(self, instruction: str, model: type[BaseModel], max_tokens: int, key: str | None = None,
                  schema: dict[str, Any] | None = None) -> BaseModel:
        """One constrained request outside the conversation: the system prompt and the task (the first part of
        the opening message, before the worked example), then the instruction. For a small model that keeps
        copying what the conversation already holds, a short fresh context breaks the loop. With `key`, the
        answer joins the conversation as that piece's latest turn (later pieces see it)."""
        task = self.prefix[1]["content"].split("\n\nYou will write")[0] if len(self.prefix) > 1 else ""
        messages = [self.prefix[0], {"role": "user", "content": f"{task}\n\n{instruction}"}]
        completion = self.backend.complete(messages, schema=schema or _schema(model), max_tokens=max_tokens)
        self._record(completion)
        value = completion.parse_as(model)
        if key is not None:
            self.turns.append((key, instruction, completion.text.strip()))
        return value

    def forget(self) -> None:
        """Drop every piece's turns (a whole new design starts from the prefix)."""
        self.turns.clear()

    def _compact_if_needed(self, extra_chars: int) -> None:
        budget = self.budget_chars or int(0.8 * 3.0 * (self.backend.describe().n_ctx or 8192))
        size = sum(len(m["content"]) for m in self.messages) + extra_chars
        if size <= budget:
            return
        latest: dict[str, tuple[str | None, str, str]] = {}
        for turn in self.turns:
            if turn[0] is not None:
                latest[turn[0]] = turn
        rank = {path: i for i, path in enumerate(self.order)}
        self.turns = sorted(latest.values(), key=lambda t: rank.get(t[0], len(rank)))

    def _record(self, completion: Completion) -> None:
        self.usage.add(completion.usage)
        self.completions.append({"tokens": completion.usage.completion_tokens, "s": round(completion.duration_s, 2),
                                 "tokens_per_s": completion.tokens_per_s, "finish": completion.finish_reason})


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


# ---- 1-2: the mechanic and the family ---------------------------------------------------------------------------
NULL_TASK = "(no task given)"  # the content-free input of contextual calibration
_NULL_SCORES: dict[tuple[int, tuple[str, ...]], dict[str, float]] = {}


def family_menu(families: list[Family], with_none: bool = False) -> str:
    lines = [f"- {f.name}: {f.summary}. Fits: {f.fits}" for f in families]
    if with_none:
        lines.append("- none: no family above models the task")
    return ("You design training environments for AI agents. Each environment uses one mechanics family:\n" +
            "\n".join(lines) + "\nAnswer with one family name only.")


def _pick_messages(menu: str, task: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": menu},
            {"role": "user", "content": f"The task:\n> {task}\n\nWhich one family models this task faithfully?"}]


def choose_family(backend: ChatBackend, task: str, families: list[Family]) -> tuple[FamilyChoice, Session]:
    """The family for a task, and the session that described its mechanic.

    With a backend that exposes next-token log-probabilities (the local model), the family is the name the
    model is most likely to answer, calibrated against a content-free task (contextual calibration: a small
    model's prior for some names would otherwise win whatever the task). Measured on the designer's 14-prompt
    set with the 1.5B model: 13 of 14 right (uncalibrated 12; per-family 0-10 scores 5). Otherwise (an endpoint),
    one constrained choice among the families or 'none', with its reason."""
    names = [f.name for f in families]
    scores: dict[str, float] = {}
    reason = ""
    if hasattr(backend, "option_logprobs"):
        menu = family_menu(families)
        raw = backend.option_logprobs(_pick_messages(menu, task), names)
        key = (id(backend), tuple(names))
        if key not in _NULL_SCORES:
            _NULL_SCORES[key] = backend.option_logprobs(_pick_messages(menu, NULL_TASK), names)
        scores = {n: raw[n] - _NULL_SCORES[key][n] for n in names}
        chosen, method = max(scores, key=scores.get), "calibrated next-token log-probability of the family name"
    else:
        menu = family_menu(families, with_none=True)
        enum = create_model("FamilyPick", __base__=FamilyPick,
                            family=(typing.Literal[tuple(names + ["none"])], Field(description="the family")))
        pick = Session(backend, [{"role": "system", "content": menu}]).ask(
            f"The task:\n> {task}\n\nWhich one family models this task faithfully? Answer as JSON with `reason` "
            "(one sentence) then `family` (a name above, or none).", enum, max_tokens=160)
        chosen, method = (None if pick.family == "none" else pick.family), "constrained choice with a reason"
        scores, reason = {n: float(n == pick.family) for n in names}, pick.reason
    session = Session(backend, [{"role": "system", "content": SYSTEM}], order=["mechanic"])
    mechanic = session.ask(
        f"The task:\n> {task}\n\nDescribe the core of this task as JSON: `world` (the setting in a few words), "
        "`agent_does` (what the agent does, in one sentence), `succeeds_when` (what counts as success).",
        TaskMechanic, max_tokens=220, key="mechanic")
    if chosen is not None and not reason:
        family = next(f for f in families if f.name == chosen)
        reason = session.ask(f"In one sentence: why does the `{chosen}` family ({family.summary}) model this task?",
                             _Reason, max_tokens=80).reason
    return FamilyChoice(family=chosen, method=method, scores=scores, reason=reason, mechanic=mechanic), session


class _Reason(BaseModel):
    reason: str = Field(max_length=200)


# ---- 3: the pieces ------------------------------------------------------------------------------------------------
def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation) or (None,)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _guide(model_fields: dict[str, Any]) -> str:
    return "\n".join(f"- `{name}`: {f.description or ''}" for name, f in model_fields.items())


def plan_pieces(domain_cls: type[Domain], example: Domain) -> list[Piece]:
    """The pieces of a domain, in order: the scalar fields together, then the keys of every keyed list (so any
    reference can be constrained to keys that exist, whatever the lists' order), then nested records and list
    items in schema order."""
    fields = domain_cls.model_fields
    header = {n: f for n, f in fields.items() if not _is_model(f.annotation) and _list_item_model(f.annotation) is None
              and typing.get_origin(f.annotation) is not list}
    pieces = [Piece("domain", create_model("DomainHeader", **{n: (f.annotation, f) for n, f in header.items()}),
                    guide=_guide(header))]
    counts = {name: _target_count(f, len(getattr(example, name))) for name, f in fields.items()
              if _list_item_model(f.annotation) is not None}
    for name, key in domain_cls.KEYS.items():
        item = _list_item_model(fields[name].annotation)
        pieces.append(Piece(f"domain.{name}.keys", _keys_model(name, item, key, counts[name]), name, keys=True))
    for name, f in fields.items():
        if name in header:
            continue
        item = _list_item_model(f.annotation)
        if item is not None:
            for i in range(counts[name]):
                pieces.append(Piece(f"domain.{name}[{i}]", item, name, i, guide=_guide(item.model_fields)
                                    if i == 0 else ""))
        elif _is_model(f.annotation):
            pieces.append(Piece(f"domain.{name}", f.annotation, name, guide=_guide(f.annotation.model_fields)))
        else:  # a list of plain values (lines of text): one piece holding the whole list
            lines = getattr(example, name)
            prose = sum(isinstance(v, str) and is_prose(v) for v in lines) * 2 >= len(lines) > 0
            pieces.append(Piece(f"domain.{name}", _values_model(name, f, len(lines)), name, aside=prose))
    return pieces


def _keys_model(name: str, item: type[BaseModel], key: str, count: int) -> type[BaseModel]:
    """{"items": [exactly `count` keys]} with the key field's own constraints on each."""
    info = item.model_fields[key]
    constraints = {k: getattr(m, k) for m in info.metadata for k in ("pattern", "min_length", "max_length")
                   if getattr(m, k, None) is not None}
    key_type = Annotated[str, Field(**constraints)]
    return create_model(f"{name.title().replace('_', '')}Keys", items=(
        list[key_type], Field(min_length=count, max_length=count, description=f"the {key} of each of the {count} "
                              f"{name}, all different: {info.description or ''}")))


def _values_model(name: str, info: Any, example_count: int) -> type[BaseModel]:
    """{"items": [...]}: exactly as many values as the schema needs, each bounded (an unbounded constrained list
    is where a small model rambles until the token limit)."""
    args = typing.get_args(info.annotation)
    item = args[0] if args else str
    if item is str:
        item = Annotated[str, Field(min_length=3, max_length=200)]
    low = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
    high = next((m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), low + 4)
    count = max(low, min(high, example_count, low + 1))
    return create_model(f"{name.title().replace('_', '')}List", items=(
        list[item], Field(min_length=count, max_length=count, description=info.description)))


def _resized(model: type[BaseModel], count: int) -> type[BaseModel]:
    """A `_values_model` asking for exactly `count` values."""
    info = model.model_fields["items"]
    return create_model(model.__name__, items=(info.annotation, Field(min_length=count, max_length=count,
                                                                      description=info.description)))


def _target_count(info: Any, example_count: int) -> int:
    """As few items as the schema allows (a small model writes each in seconds, not minutes), at least 3."""
    low = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
    high = next((m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), low + 4)
    return max(low, min(high, example_count, 3))


def _trimmed_example(example: Domain) -> str:
    """The worked example, with each list cut to its first items (the model sees the shape, not a catalogue)."""
    data = example.model_dump(mode="json")
    for name, value in data.items():
        if isinstance(value, list) and len(value) > EXAMPLE_ITEMS:
            data[name] = value[:EXAMPLE_ITEMS]
    return json.dumps(data, ensure_ascii=False)


def _max_tokens(piece: Piece, example: Domain) -> int:
    if piece.keys:
        return 40 + 16 * piece.model.model_fields["items"].metadata[0].min_length if piece.model.model_fields[
            "items"].metadata else 200
    if piece.field is None:
        sample = {n: getattr(example, n) for n in piece.model.model_fields}
    elif piece.index is not None:
        sample = getattr(example, piece.field)[0]
    else:
        sample = getattr(example, piece.field)
    text = json.dumps(sample if not isinstance(sample, BaseModel) else sample.model_dump(mode="json"),
                      default=lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else str(v))
    return min(1500, max(160, int(len(text) / 2.2) + 120))


def _instruction(piece: Piece, pieces: list[Piece], family: Family, problems: list[str] | None = None) -> str:
    if problems:
        head = (f"Your `{piece.path}` has problems:\n" + "\n".join(f"- {p}" for p in problems) +
                f"\nWrite `{piece.path}` again as JSON, fixing every problem.")
    elif piece.field is None:
        head = "Write the domain's header fields as JSON, for THIS task's world (not the example's)."
    elif piece.keys:
        key = family.domain.KEYS[piece.field]
        item = _list_item_model(family.domain.model_fields[piece.field].annotation)
        head = (f"First name the `{piece.field}` of this world: write the `{key}` of each of them as JSON "
                '{"items": [...]}, all different, each specific to the task\'s world. Each `' + key + "`: " +
                (item.model_fields[key].description or ""))
    elif piece.index is not None and (keys := _keys_of(pieces, piece.field)):
        head = f"Write `{piece.field}` item {piece.index + 1} of {len(keys)}, `{keys[piece.index]}`, as JSON."
    elif piece.index is not None:
        same = [p for p in pieces if p.field == piece.field]
        used = [_name_of(p.value) for p in same if p.value is not None]
        head = (f"Write `{piece.field}` item {piece.index + 1} of {len(same)} as JSON"
                + (f"; it must be DIFFERENT from those already written: {', '.join(u for u in used if u)}" if used
                   else "") + ".")
    else:
        head = f"Write `{piece.field}` as JSON."
    description = family.domain.model_fields[piece.field].description if piece.field else ""
    guide = f"\nFields:\n{piece.guide}" if piece.guide and not problems else ""
    return f"{head}\n{description or ''}{guide}".strip()


def _keys_of(pieces: list[Piece], field_name: str | None) -> list[str]:
    keys = next((p for p in pieces if p.keys and p.field == field_name), None)
    return list(keys.value.items) if keys is not None and keys.value is not None else []


def _known(pieces: list[Piece], source: str) -> list[str]:
    """The values of `list.field` known so far: the list's keys, or the field of the items written."""
    list_name, field_name = source.split(".")
    values = [getattr(p.value, field_name) for p in pieces
              if p.field == list_name and p.index is not None and p.value is not None]
    if not values:
        keys = _keys_of(pieces, list_name)
        return keys if keys else []
    return list(dict.fromkeys(v for v in values if isinstance(v, str)))


def bounded(schema: Any) -> Any:
    """`schema` with every list capped at MAX_LIST_ITEMS (or its minimum, if more) and every free string at
    MAX_FREE_CHARS: a grammar lets a small model go on to the schema's own bound (60 choices of a column), and it
    does, until the token limit cuts the reply. The caps only narrow what the domain allows."""
    if isinstance(schema, list):
        return [bounded(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v) for k, v in schema.items()}
    if out.get("type") == "array":
        out["maxItems"] = min(out.get("maxItems", MAX_LIST_ITEMS), max(out.get("minItems", 0), MAX_LIST_ITEMS))
    if out.get("type") == "string" and "enum" not in out:
        out["maxLength"] = min(out.get("maxLength", MAX_FREE_CHARS), max(out.get("minLength", 0), MAX_FREE_CHARS))
    return out


def constrained_schema(piece: Piece, pieces: list[Piece], domain_cls: type[Domain]) -> dict[str, Any]:
    """The piece's JSON schema, bounded, with its key fixed and its references limited to values that exist."""
    schema = bounded(piece.model.model_json_schema())
    props = schema.get("properties", {})
    if piece.index is None or piece.keys:
        return schema
    keys = _keys_of(pieces, piece.field)
    key = domain_cls.KEYS.get(piece.field)
    if key and keys and key in props:
        props[key] = {"type": "string", "enum": [keys[piece.index]]}
    for ref_path, ref in domain_cls.REFERENCES.items():
        list_name, field_name = ref_path.split(".")
        if list_name != piece.field or field_name not in props:
            continue
        values = _known(pieces, ref.source)
        if ref.later_only and ref.source.split(".")[0] == piece.field:
            values = keys[piece.index + 1:] if keys else []
        if not values and not ref.later_only:
            continue
        enum = {"type": "string", "enum": values} if values else None
        prop = props[field_name]
        if prop.get("type") == "array":
            props[field_name] = {**prop, "items": enum} if enum else {**prop, "maxItems": 0}
        elif enum:
            props[field_name] = enum
    return schema


def _replace_value(data: Any, old: str, new: str) -> Any:
    """`data` with every string equal to `old` replaced by `new` (a rename, never a substring edit)."""
    if isinstance(data, str):
        return new if data == old else data
    if isinstance(data, list):
        return [_replace_value(v, old, new) for v in data]
    if isinstance(data, dict):
        return {k: _replace_value(v, old, new) for k, v in data.items()}
    return data


def _name_of(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        for key in ("name", "id", "title"):
            if isinstance(getattr(value, key, None), str):
                return getattr(value, key)
    return None


def drop_repeated_prose(value: Any) -> Any:
    """The draft without a sentence repeated inside one list (a small model's loop: the same log line written
    three times as a fault's evidence); the first stays. Short strings (names, enum values) are left alone."""
    if isinstance(value, dict):
        return {k: drop_repeated_prose(v) for k, v in value.items()}
    if isinstance(value, list):
        seen: set[str] = set()
        kept = []
        for item in value:
            if isinstance(item, str) and is_prose(item):
                if item in seen:
                    continue
                seen.add(item)
            kept.append(drop_repeated_prose(item))
        return kept
    return value


def assemble(pieces: list[Piece]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for piece in pieces:
        if piece.value is None or piece.keys:
            continue
        value = piece.value.model_dump(mode="json")
        if piece.field is None:
            data.update(value)
        elif piece.index is not None:
            data.setdefault(piece.field, []).append(value)
        elif set(value) == {"items"} and not _is_model(piece.model.model_fields.get("items", None)):
            data[piece.field] = value["items"]
        else:
            data[piece.field] = value
    return data


# ---- 4: checks ----------------------------------------------------------------------------------------------------
def copied_from_example(data: dict[str, Any], example: Domain, others: list[Domain] = ()) -> list[DomainProblem]:
    """Names and long texts taken over from the worked example (another world) instead of written for this one.
    What the family's other examples share with it is the family's common vocabulary, not the example's world."""
    common = set.intersection(*({v.lower() for _, v in iter_texts(o)} for o in others)) if others else set()
    common |= {t.lower() for t in _default_texts(type(example))}  # a schema default is nobody's world
    theirs_names = {v.lower() for path, v in iter_texts(example) if ENTITY_NAME.match(path)} - common
    described = _descriptions(type(example))  # a text the schema itself gives as its example is the family's
    theirs_texts = {v for _, v in iter_texts(example) if len(v) >= 40 and v.lower() not in common
                    and v not in described}
    problems = []
    for path, value in _iter_json_texts(data):
        if ENTITY_NAME.match(path) and value.lower() in theirs_names:
            problems.append(DomainProblem(path=path, message=f"{value!r} is copied from the worked example, which is "
                                          "another world: name this world's own"))
        elif len(value) >= 40 and value in theirs_texts:
            problems.append(DomainProblem(path=path, message="this text is copied from the worked example: write "
                                          "one that belongs to this task's world"))
    return problems


def _descriptions(model: type[BaseModel], seen: set | None = None) -> str:
    """Every field description anywhere in a schema, joined (the examples they quote belong to the family)."""
    seen = seen if seen is not None else set()
    if model in seen:
        return ""
    seen.add(model)
    parts = []
    for f in model.model_fields.values():
        parts.append(f.description or "")
        parts += [_descriptions(inner, seen) for inner in [f.annotation, *typing.get_args(f.annotation)]
                  if _is_model(inner)]
    return "\n".join(parts)


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
            if _is_model(inner):
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


def owner(problem_path: str, pieces: list[Piece]) -> list[Piece]:
    """The pieces to rewrite for a problem at `problem_path` (the most specific owner; a whole list for a
    problem about the list)."""
    exact = [p for p in pieces if problem_path == p.path or problem_path.startswith(p.path + ".")
             or problem_path.startswith(p.path + "[")]
    items = [p for p in exact if p.index is not None]
    if items:
        return items[:1]
    specific = [p for p in exact if p.field is not None]
    if specific:
        return specific[:1]
    field_name = problem_path.removeprefix("domain.").split(".")[0].split("[")[0]
    listed = [p for p in pieces if p.field == field_name]
    if listed:
        return listed if len(listed) <= 3 else listed[-2:]
    return [p for p in pieces if p.field is None]


# ---- the designer -------------------------------------------------------------------------------------------------
class FamilyDomainDesigner:
    """A `Designer` writing a family domain; see the module docstring."""

    @property
    def deterministic(self) -> bool:
        """Once no family fitted, asking again gives the same answer: the loop stops."""
        return self.choice is not None and self.choice.family is None

    @property
    def no_family(self) -> bool:
        return self.deterministic

    def __init__(self, backend: ChatBackend, name: str, task: str, *, families: list[Family] | None = None,
                 progress: Progress | None = None, kind: str = "local"):
        self.backend = backend
        self.name = name
        self.task = task
        self.families = families or all_families()
        self.progress = progress or (lambda phase, attempt, detail: None)
        self.choice: FamilyChoice | None = None
        self._pieces: list[Piece] = []
        self._session: Session | None = None
        self._family: Family | None = None
        self._example: Domain | None = None
        self._others: list[Domain] = []
        self._attempt = 1  # the package attempt the pieces are written for (progress lines name it)
        self._usage_mark = Usage()  # the session's total when the current attempt began
        info = backend.describe()
        self.info = DesignerInfo(backend=kind, model=info.model, base_url=info.base_url,
                                 model_sha256=info.sha256, settings={**info.sampling.model_dump(),
                                                                     "threads": info.threads, "n_ctx": info.n_ctx})

    # -- Designer protocol --
    def design(self) -> Candidate:
        started = time.monotonic()
        self.progress("choosing a family", 1, f"{len(self.families)} families")
        choice, session = choose_family(self.backend, self.task, self.families)
        self.choice = choice
        notes = {"choice": choice.note()}
        if choice.family is None:
            return Candidate(problems=[f"no family fits the task ({choice.reason})"], usage=session.usage,
                             notes=notes)
        self._family = next(f for f in self.families if f.name == choice.family)
        self.info = self.info.model_copy(update={"family": self._family.ref})
        self._example = self._pick_example(self._family)
        self._others = [self._family.load_example(n) for n in self._family.examples()
                        if self._family.load_example(n) != self._example]
        self._session = self._domain_session(choice)
        self._usage_mark = Usage()
        self._pieces = plan_pieces(self._family.domain, self._example)
        self._start_pieces()
        for piece in self._pieces:
            self._write(piece)
        return self._candidate(notes, started)

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        if self._family is None:  # no family fitted: asking again would give the same answer
            return previous
        started = time.monotonic()
        self._attempt = attempt
        if previous.problems and not previous.files and "continued" not in previous.notes:
            # The draft never parsed: more rounds on its bad pieces first (a full rewrite costs every piece again).
            return self._candidate({"choice": self.choice.note() if self.choice else None, "continued": attempt},
                                   started)
        note = ("An earlier version of this domain failed the environment validator:\n" + feedback[:1500] +
                "\nWrite the domain again, so that these checks pass.")
        self._session.prefix = [*self._session.prefix[:3], {"role": "user", "content": note},
                                {"role": "assistant", "content": "{\"ok\": true}"}]
        self._session.forget()
        for piece in self._pieces:
            piece.value = None
        for piece in self._pieces:
            self._write(piece)
        return self._candidate({"choice": self.choice.note() if self.choice else None, "redesign": attempt}, started)

    # -- internals --
    def _pick_example(self, family: Family) -> Domain:
        """The worked example: the family's example whose words overlap the task least (so it is visibly another
        world and cannot be copied as the answer)."""
        task_words = set(re.findall(r"[a-z]{4,}", self.task.lower()))
        examples = family.examples()
        scored = sorted(examples, key=lambda n: (len(task_words & set(
            re.findall(r"[a-z]{4,}", (examples[n]).read_text(encoding="utf-8").lower()))), n))
        return family.load_example(scored[0])

    def _domain_session(self, choice: FamilyChoice) -> Session:
        family, example = self._family, self._example
        context = (f"The task:\n> {self.task}\n\nIts world: {choice.mechanic.world}. The agent "
                   f"{choice.mechanic.agent_does} It succeeds when {choice.mechanic.succeeds_when}\n\n"
                   f"You will write the domain of a `{family.name}` environment ({family.summary}) for this task, "
                   "one piece at a time. Every name and text must belong to the task's world. Here is a worked "
                   f"example of a domain of the same family for ANOTHER world (never copy its names or texts):\n"
                   f"{_trimmed_example(example)}")
        return Session(self.backend, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": context},
                                      {"role": "assistant", "content": "{\"ready\": true}"}], usage=Usage())

    def _start_pieces(self) -> None:
        self._session.order = [p.path for p in self._pieces]

    def _write(self, piece: Piece, problems: list[str] | None = None) -> None:
        instruction = _instruction(piece, self._pieces, self._family, problems)
        started = time.monotonic()
        try:
            schema = constrained_schema(piece, self._pieces, self._family.domain)
            if piece.aside:  # the worked example's lines are not in sight, so they are not copied
                piece.value = self._session.ask_aside(f"{self._world_so_far()}{instruction}", piece.model,
                                                      _max_tokens(piece, self._example), key=piece.path,
                                                      schema=schema)
            else:
                piece.value = self._session.ask(instruction, piece.model, _max_tokens(piece, self._example),
                                                key=piece.path, schema=schema)
            if piece.keys and problems is None:
                repeated = [k for i, k in enumerate(piece.value.items) if k.lower() in
                            [x.lower() for x in piece.value.items[:i]]]
                if repeated:
                    self._write(piece, problems=[f"{', '.join(repeated)} repeated: every one must differ"])
        except (ReplyError, ValidationError) as exc:
            piece.value = None
            self.progress("writing", self._attempt, f"{piece.path}: unusable reply ({str(exc)[:80]})")
            return
        last = self._session.completions[-1]
        speed = f", {last['tokens_per_s']:.0f} tok/s" if last.get("tokens_per_s") else ""
        self.progress("writing", self._attempt, f"{piece.path} ({time.monotonic() - started:.1f} s{speed})")

    def _world_so_far(self) -> str:
        """The domain's header fields as written (who the agent is, what the system and its parts are called):
        what a piece written outside the conversation needs to know of this world."""
        header = next((p for p in self._pieces if p.field is None and p.value is not None), None)
        return f"This world's domain so far: {header.value.model_dump_json()}\n\n" if header else ""

    def _rename_if_key(self, problem: DomainProblem) -> bool:
        """A problem with an item's key (copied, a schema word...) is fixed by renaming that one key: a new name
        is asked for, then put in place everywhere the old one was used (the item and every reference)."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)$", problem.path)
        if not match or self._family.domain.KEYS.get(match.group(1)) != match.group(3):
            return False
        list_name, index = match.group(1), int(match.group(2))
        keys_piece = next((p for p in self._pieces if p.keys and p.field == list_name), None)
        if keys_piece is None or keys_piece.value is None:
            return False
        old = keys_piece.value.items[index]
        single = create_model("NewKey", name=(keys_piece.model.model_fields["items"].annotation.__args__[0], ...))
        taken = ", ".join(keys_piece.value.items)
        try:
            new = self._session.ask(f"The name {old!r} of `{list_name}` item {index + 1} is wrong: {problem.message}."
                                    f" Write a new one as JSON {{\"name\": ...}}, different from: {taken}.",
                                    single, max_tokens=60).name
        except (ReplyError, ValidationError):
            return False
        if new.lower() in {k.lower() for k in keys_piece.value.items}:
            return False
        keys_piece.value = keys_piece.model(items=[new if k == old else k for k in keys_piece.value.items])
        for piece in self._pieces:
            if piece.value is not None and not piece.keys:
                renamed = _replace_value(piece.value.model_dump(), old, new)
                try:
                    piece.value = type(piece.value).model_validate(renamed)
                except ValidationError:  # the new name breaks this piece's own bounds: it is written again
                    piece.value = None
        self.progress("renamed", self._attempt, f"{list_name} {old!r} -> {new!r}")
        return True

    def _top_up(self, problem: DomainProblem) -> bool:
        """A list of lines left too short (a small model writes one line several times; repeats are dropped) is
        completed one new line at a time, each different from those it has: asking for the whole list again
        gets the same repeats back."""
        wanted = re.search(r"at least (\d+) items", problem.message)
        piece = next((p for p in self._pieces if p.path == problem.path and p.index is None and not p.keys), None)
        items = getattr(piece.value, "items", None) if piece is not None and wanted else None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            return False
        lines = list(dict.fromkeys(items))
        # as many as the piece asks for (it may ask for more than the domain's minimum), if they come
        need = max(int(wanted.group(1)), piece.model.model_json_schema()["properties"]["items"].get("minItems", 0))
        enough = int(wanted.group(1))
        guide = self._family.domain.model_fields[piece.field].description or ""
        one = create_model("OneLine", line=(str, ...))
        repeated = ""
        for _ in range(2 * need):
            if len(lines) >= need:
                break
            try:
                line = self._session.ask_aside(
                    f"{repeated}Write one more line for the domain's `{piece.field}` ({guide}) as JSON "
                    f"{{\"line\": ...}}, in this task's world and different from every one of: {json.dumps(lines)}",
                    one, max_tokens=120).line.strip()
            except (ReplyError, ValidationError) as exc:
                self.progress("completing", self._attempt, f"{piece.path}: unusable reply ({str(exc)[:80]})")
                return False
            if line and line not in lines:
                lines.append(line)
                repeated = ""
            else:  # said again, the same words would come back: the next request differs
                repeated = f"{line!r} is already there. "
        if len(lines) < enough:
            self.progress("completing", self._attempt, f"{piece.path}: {len(lines)} distinct lines, not the "
                          f"{enough} it needs")
            return False
        # The piece asked the model for `need`; it now holds as many as it has (the domain's bounds judge them).
        piece.model = _resized(piece.model, len(lines))
        piece.value = piece.model(items=lines)
        self.progress("completing", self._attempt, f"{piece.path}: {len(lines)} lines")
        return True

    def _reword(self, problem: DomainProblem) -> bool:
        """A text an item repeats from its siblings (a small model copies the note or the log line it wrote
        before, and copies it again when the whole item is asked for) is asked for on its own, different from
        all the others: a field (`faults[1].runbook`) or one line of a list (`faults[1].evidence[0]`)."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)(?:\[(\d+)\])?$", problem.path)
        if not match or "the same text appears" not in problem.message:
            return False
        piece = next((p for p in self._pieces if p.field == match.group(1) and p.index == int(match.group(2))), None)
        name, line = match.group(3), None if match.group(4) is None else int(match.group(4))
        current = getattr(piece.value, name, None) if piece is not None and piece.value is not None else None
        if line is not None:
            current = current[line] if isinstance(current, list) and line < len(current) else None
        if not isinstance(current, str):
            return False
        siblings = []
        for p in self._pieces:
            if p.field == piece.field and p.index is not None and p.value is not None:
                value = getattr(p.value, name)
                siblings += value if isinstance(value, list) else [value]
        one = create_model("OneText", text=(str, ...))
        what = f"`{name}`" if line is None else f"line {line + 1} of `{name}`"
        try:
            text = self._session.ask(f"{what[0].upper()}{what[1:]} of `{piece.path}` repeats another item's. Write a "
                                     f"new one as JSON {{\"text\": ...}}, in its own words, different from every "
                                     f"one of: {json.dumps(list(dict.fromkeys(siblings)))}. What it must be: "
                                     f"{piece.model.model_fields[name].description or ''}", one,
                                     max_tokens=160).text.strip()
            if text in siblings:  # a copy again: the item is rewritten whole instead
                return False
            data = piece.value.model_dump()
            if line is None:
                data[name] = text
            else:
                data[name] = [text if i == line else v for i, v in enumerate(data[name])]
            piece.value = piece.model.model_validate(data)
        except (ReplyError, ValidationError):
            return False
        self.progress("reworded", self._attempt, problem.path.removeprefix("domain."))
        return True

    def _rewrite_part(self, problem: DomainProblem, done: set[str]) -> bool:
        """A problem inside a record nested in a list item (`faults[0].constraint.fix`) is fixed by asking for
        that record alone, with the problems and the item as it stands: rewriting the whole item costs every
        field again, and a small model repeats the mistake there (a constraint whose fix is the usual fix)."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)\.", problem.path)
        piece = next((p for p in self._pieces if match and p.field == match.group(1)
                      and p.index == int(match.group(2)) and p.value is not None), None)
        name = match.group(3) if match else ""
        info = piece.model.model_fields.get(name) if piece is not None else None
        if info is None or not _is_model(info.annotation):
            return False
        part = info.annotation
        at = f"{piece.path}.{name}"
        if at in done:  # one request per record and round, with all of its problems
            return True
        done.add(at)
        problems = [str(p) for p in self._check() if p.path.startswith(at + ".") or p.path == at]
        rest = {k: v for k, v in piece.value.model_dump(mode="json").items() if k != name}
        try:
            value = self._session.ask(
                f"`{at}` has problems:\n" + "\n".join(f"- {p}" for p in problems[:6]) +
                f"\nThe rest of `{piece.path}` as it stands: {json.dumps(rest, ensure_ascii=False)}\n"
                f"Write `{at}` again as JSON, fixing every problem.\nFields:\n{_guide(part.model_fields)}",
                part, max_tokens=max(200, _max_tokens(piece, self._example) // 2))
            piece.value = piece.model.model_validate({**piece.value.model_dump(), name: value.model_dump()})
        except (ReplyError, ValidationError):
            return False
        self.progress("rewrote", self._attempt, at.removeprefix("domain."))
        return True

    def _attempt_usage(self) -> Usage:
        used = self._session.usage.since(self._usage_mark)
        self._usage_mark = self._session.usage.model_copy()
        return used

    def _draft(self) -> dict[str, Any]:
        return self._family.domain.tidy(drop_repeated_prose(assemble(self._pieces)))

    def _check(self) -> list[DomainProblem]:
        data = self._draft()
        missing = [DomainProblem(path=p.path, message="no usable answer was written") for p in self._pieces
                   if p.value is None]
        try:
            self._family.parse_domain(data)
            problems = []
        except DomainError as exc:
            problems = exc.problems
        return missing + problems + copied_from_example(data, self._example, self._others)

    def _candidate(self, notes: dict[str, Any], started: float) -> Candidate:
        """The attempt's candidate after piece repairs; its usage is this attempt's own (the session's is the
        running total of the whole design)."""
        problems = self._check()
        rounds = 0
        while problems and rounds < MAX_REPAIR_ROUNDS:
            rounds += 1
            by_piece: dict[str, tuple[Piece, list[str]]] = {}
            parts: set[str] = set()
            for problem in problems:
                if (self._rename_if_key(problem) or self._top_up(problem) or self._reword(problem)
                        or self._rewrite_part(problem, parts)):
                    continue
                for piece in owner(problem.path, self._pieces):
                    by_piece.setdefault(piece.path, (piece, []))[1].append(str(problem))
            if by_piece:
                first = next(iter(by_piece.values()))[1][0]
                self.progress("repairing pieces", self._attempt,
                              f"round {rounds}: {len(by_piece)} piece(s), e.g. {first[:140]}")
            for piece, messages in by_piece.values():
                self._write(piece, problems=messages[:6])
            problems = self._check()
        notes = {**notes, "piece_repair_rounds": rounds, "requests": len(self._session.completions),
                 "completions": self._session.completions[-60:], "design_s": round(time.monotonic() - started, 1)}
        if problems:
            draft = yaml.safe_dump(self._draft(), sort_keys=False, allow_unicode=True, width=120)
            why = "".join(f"# - {' '.join(str(p).split())}\n" for p in problems[:12])
            return Candidate(problems=[str(p) for p in problems[:12]], usage=self._attempt_usage(), notes=notes,
                             draft=f"# The domain as drafted; it did not parse:\n{why}{draft}")
        domain = self._family.parse_domain(self._draft())
        section = self._family.section(task=self.task)
        header = (f"Domain of {self.name} (family {self._family.ref}), designed by {self.info.model} for the task:\n"
                  f"{self.task}")
        readme = design_readme(self.name, self.task, self._family, domain, self.info)
        files = family_package(self.name, section, dump_domain(domain, header=header), readme,
                               tags=("openadapt", "generated"))
        return Candidate(files=files, usage=self._attempt_usage(), notes=notes)


def design_readme(name: str, task: str, family: Family, domain: Domain, info: DesignerInfo) -> str:
    tiers = "\n".join(f"| {t} | {family.tier_changes.get(t, '')} | {family.step_budget[t]} |"
                      for t in sorted(family.step_budget))
    return (f"# {name}\n\n**Task:** {task}\n\n{domain.summary}\n\nA `{family.ref}` environment ({family.summary}): "
            f"its content is `domain.yaml`, written by {info.model} ({info.backend}); the mechanics are openadapt's "
            f"`{family.name}` engine.\n\n| ECI | what the tier changes | step budget |\n|---|---|---|\n{tiers}\n")


__all__ = ["FamilyDomainDesigner", "choose_family", "plan_pieces"]
