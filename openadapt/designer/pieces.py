"""The pieces a domain is written in: planning them from a family's schema, the JSON schema each is asked
for under (bounded, its key fixed, its references limited to keys that exist), the instruction that asks for
it, and assembling the answers into a draft domain."""

from __future__ import annotations

import copy
import json
import re
import typing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field, create_model

from openadapt.families.base import Family
from openadapt.families.domain import (
    FROM_EXAMPLE,
    LOG_LEVELS,
    REPEATED_TEXT,
    Code,
    Domain,
    DomainProblem,
    is_debris,
    is_prose,
    iter_texts,
    phrase_words,
    unglued,
    without_foreign_tail,
    without_tasked,
)
from openadapt.llm.chat import cut_text
from openadapt.llm.local.grammar import MAX_FREE_CHARS, bounded

EXAMPLE_ITEMS = 2  # items per list kept in the worked example shown to the model


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
    aside: bool = False  # holds lines of prose: written out of sight of the worked example (a small model copies them)
    part: str | None = None  # the record's list of lines it fills, where a record of lines is written list by list


def list_item_model(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation) or (None,)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item
    return None


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def field_guide(model_fields: dict[str, Any]) -> str:
    return "\n".join(f"- `{name}`: {f.description or ''}" for name, f in model_fields.items())


def plan_pieces(domain_cls: type[Domain], example: Domain, split_records: bool = False) -> list[Piece]:
    """The pieces of a domain, in order: the scalar fields together, then the keys of every keyed list (so any
    reference can be constrained to keys that exist, whatever the lists' order), then nested records and list
    items in schema order; with `split_records` (a small local model), a record of many lists of lines one list
    at a time (`_line_lists`)."""
    fields = domain_cls.model_fields
    header = {n: f for n, f in fields.items() if not is_model(f.annotation) and list_item_model(f.annotation) is None
              and typing.get_origin(f.annotation) is not list}
    pieces = [Piece("domain", create_model("DomainHeader", **{n: (f.annotation, f) for n, f in header.items()}),
                    guide=field_guide(header))]
    needed = needed_counts(example)
    counts = {name: max(needed.get(name, 0), _target_count(f, len(getattr(example, name))))
              for name, f in fields.items() if list_item_model(f.annotation) is not None}
    for name, key in domain_cls.KEYS.items():
        item = list_item_model(fields[name].annotation)
        pieces.append(Piece(f"domain.{name}.keys", _keys_model(name, item, key, counts[name]), name, keys=True))
    for name, f in fields.items():
        if name in header:
            continue
        item = list_item_model(f.annotation)
        if item is not None:
            aside = _has_prose_lines(item, getattr(example, name))
            for i in range(counts[name]):
                pieces.append(Piece(f"domain.{name}[{i}]", item, name, i, aside=aside,
                                    guide=field_guide(item.model_fields) if i == 0 or aside else ""))
        elif split_records and is_model(f.annotation) and (parts := _line_lists(f.annotation, getattr(example, name))):
            pieces += [Piece(f"domain.{name}.{part}", model, name, aside=True, part=part)
                       for part, model in parts.items()]
        elif is_model(f.annotation):  # a record of lines of prose (a counterpart's replies) is written aside too
            pieces.append(Piece(f"domain.{name}", f.annotation, name, guide=field_guide(f.annotation.model_fields),
                                aside=_has_prose_lines(f.annotation, [getattr(example, name)])))
        else:  # a list of plain values (lines of text): one piece holding the whole list
            lines = getattr(example, name)
            prose = sum(isinstance(v, str) and is_prose(v) for v in lines) * 2 >= len(lines) > 0
            model = _values_model(name, f, len(lines))
            if needed.get(name, 0) > _count_of(model):
                model = resized(model, needed[name])
            pieces.append(Piece(f"domain.{name}", model, name, aside=prose))
    return pieces


def needed_counts(example: Domain) -> dict[str, int]:
    """The fewest items each list needs to pass the family's own checks (its tiers draw from them), read off
    those checks on the worked example with the list cut to one item: the schema's minimum can fall short of it."""
    needed: dict[str, int] = {}
    for name in type(example).model_fields:
        value = getattr(example, name)
        if not isinstance(value, list) or len(value) < 2:
            continue
        try:
            found = example.model_copy(update={name: value[:1]}).family_problems()
        except Exception:  # a check that assumes what the cut broke: it tells nothing about this list's minimum
            continue
        for problem in found:
            if problem.path == f"domain.{name}" and problem.code == Code.TOO_FEW and problem.minimum:
                needed[name] = max(needed.get(name, 0), problem.minimum)
    return needed


def _count_of(model: type[BaseModel]) -> int:
    return next(m.min_length for m in model.model_fields["items"].metadata if getattr(m, "min_length", None))


SPLIT_RECORD_LISTS = 3  # a record of this many lists of prose lines or more is written one list at a time


def _line_lists(record: type[BaseModel], example: BaseModel) -> dict[str, type[BaseModel]]:
    """A record made only of lists of prose lines (a counterpart's replies), as one values piece per list, each
    asking for the fewest lines its field allows, each line at most a third longer than the example's longest:
    asked for whole, a small model spends minutes on it and drifts into notes about the JSON. Empty otherwise."""
    fields = record.model_fields
    if len(fields) < SPLIT_RECORD_LISTS or not all(
            typing.get_origin(f.annotation) is list and _is_str(next(iter(typing.get_args(f.annotation)), None))
            for f in fields.values()) or not _has_prose_lines(record, [example]):
        return {}
    parts = {}
    for name, info in fields.items():
        lines = getattr(example, name)
        low = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
        (line,) = typing.get_args(info.annotation)
        bound = next((m.max_length for m in _metadata(line) if getattr(m, "max_length", None)), MAX_FREE_CHARS)
        shortest = next((m.min_length for m in _metadata(line) if getattr(m, "min_length", None)), 5)
        cap = min(bound, max(100, len(max(lines, key=len, default="")) * 4 // 3))
        item = Annotated[str, Field(min_length=shortest, max_length=cap)]
        parts[name] = create_model(f"{name.title().replace('_', '')}List", items=(
            list[item], Field(min_length=low, max_length=low, description=info.description)))
    return parts


def _metadata(annotation: Any) -> list[Any]:
    """The constraints of an `Annotated[str, ...]` (a line's bounds), flattened."""
    found = []
    for m in typing.get_args(annotation)[1:]:
        found += list(getattr(m, "metadata", [])) or [m]
    return found


def _has_prose_lines(item: type[BaseModel], examples: list[BaseModel]) -> bool:
    """Whether the items of a list hold lines of prose (a fault's evidence log lines): such items are written
    aside, each with the field guide, since a small model copies the worked example's lines when it sees them."""
    for name, info in item.model_fields.items():
        if typing.get_origin(info.annotation) is list and _is_str(next(iter(typing.get_args(info.annotation)), None)):
            lines = [v for example in examples for v in getattr(example, name)]
            if lines and sum(is_prose(v) for v in lines) * 2 >= len(lines):
                return True
    return False


def _is_str(annotation: Any) -> bool:
    """`str`, or a bounded one (`Annotated[str, StringConstraints(...)]`: a negotiation's lines)."""
    return annotation is str or (typing.get_origin(annotation) is typing.Annotated
                                 and typing.get_args(annotation)[0] is str)


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


def resized(model: type[BaseModel], count: int) -> type[BaseModel]:
    """A `_values_model` asking for exactly `count` values."""
    info = model.model_fields["items"]
    return create_model(model.__name__, items=(info.annotation, Field(min_length=count, max_length=count,
                                                                      description=info.description)))


def _target_count(info: Any, example_count: int) -> int:
    """As few items as the schema allows (a small model writes each in seconds, not minutes), at least 3."""
    low = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
    high = next((m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), low + 4)
    return max(low, min(high, example_count, 3))


def trimmed_example(example: Domain) -> str:
    """The worked example, with each list cut to its first items (the model sees the shape, not a catalogue)."""
    data = example.model_dump(mode="json")
    for name, value in data.items():
        if isinstance(value, list) and len(value) > EXAMPLE_ITEMS:
            data[name] = value[:EXAMPLE_ITEMS]
    return json.dumps(data, ensure_ascii=False)


def max_tokens_for(piece: Piece, example: Domain) -> int:
    if piece.keys:
        return 40 + 16 * piece.model.model_fields["items"].metadata[0].min_length if piece.model.model_fields[
            "items"].metadata else 200
    if piece.field is None:
        sample = {n: getattr(example, n) for n in piece.model.model_fields}
    elif piece.index is not None:
        sample = getattr(example, piece.field)[0]
    elif piece.part is not None:
        sample = getattr(getattr(example, piece.field), piece.part)[:_count_of(piece.model)]
    else:
        sample = getattr(example, piece.field)
    text = json.dumps(sample if not isinstance(sample, BaseModel) else sample.model_dump(mode="json"),
                      default=lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else str(v))
    return min(1500, max(160, int(len(text) / 2.2) + 120))


# A description's quoted example names ("..., e.g. 'dr_okafor', 'crew_bravo'."), left out where the keys are
# asked for (the grammar holds their form): a small model would name every key after them.
_EXAMPLE_IDS = re.compile(r",?\s*\(?e\.g\.\s.*?(?=\.\s|\.$|$)")


def instruction_for(piece: Piece, pieces: list[Piece], family: Family,
                    problems: list[DomainProblem] | None = None) -> str:
    if problems:
        head = (f"Your `{piece.path}` has problems:\n" + "\n".join(f"- {p}" for p in problems) +
                f"\nWrite `{piece.path}` again as JSON, fixing every problem.")
    elif piece.field is None:
        head = "Write the domain's header fields as JSON, for THIS task's world (not the example's)."
    elif piece.keys:
        key = family.domain.KEYS[piece.field]
        item = list_item_model(family.domain.model_fields[piece.field].annotation)
        head = (f"First name the `{piece.field}` of this world: write the `{key}` of each of them as JSON "
                '{"items": [...]}, all different, each specific to the task\'s world. Each `' + key + "`: " +
                _EXAMPLE_IDS.sub("", item.model_fields[key].description or ""))
    elif piece.index is not None and (keys := _keys_of(pieces, piece.field)):
        head = f"Write `{piece.field}` item {piece.index + 1} of {len(keys)}, `{keys[piece.index]}`, as JSON."
    elif piece.index is not None:
        same = [p for p in pieces if p.field == piece.field]
        used = [_name_of(p.value) for p in same if p.value is not None]
        head = (f"Write `{piece.field}` item {piece.index + 1} of {len(same)} as JSON"
                + (f"; it must be DIFFERENT from those already written: {', '.join(u for u in used if u)}" if used
                   else "") + ".")
    elif piece.part is not None:
        head = f"Write `{piece.field}.{piece.part}` as JSON: {_count_of(piece.model)} line(s), each different."
    else:
        head = f"Write `{piece.field}` as JSON."
    # An item's answer or a record's written aside is in nobody's sight: recorded as its short fields, or aside.
    if problems and (piece.index is not None or piece.aside) and piece.value is not None and not any(
            p.code in FROM_EXAMPLE for p in problems):
        head += f"\nAs you wrote it: {piece.value.model_dump_json()}"
    description = piece_description(family.domain, piece, pieces)
    if any(p.code == Code.SCHEMA_ECHO and p.value and p.value in " ".join(phrase_words(description))
           for p in problems or ()):
        description = examples_only(description) or description  # its words came back as the content
    guide = f"\nFields:\n{piece.guide}" if piece.guide and (piece.aside or not problems) else ""
    return f"{head}\n{description or ''}{guide}{stated_rules(family.domain, piece)}".strip()


def examples_only(description: str) -> str:
    """A field description's quoted examples alone, as the form a text takes (empty where it quotes none): told it
    repeats the description's words and shown them again, a small model writes them back ("A staff member starts
    late, with {staff} ..." for "Why a staff member starts late, with {staff} and {time}, e.g. ...")."""
    start = description.find("e.g.")
    quoted = re.findall(r"(?<![A-Za-z])'(.+?)'(?![A-Za-z])", description[start:]) if start >= 0 else []
    return f"a text like {', '.join(repr(q) for q in quoted)}, in this world's own words" if quoted else ""


def stated_rules(domain_cls: type[Domain], piece: Piece) -> str:
    """The family's rules across fields (`Domain.RULES`) that read what this piece writes, stated before the model
    writes it: found only afterwards, each such rule costs a repair round of its own."""
    written = set(piece.model.model_fields) if piece.field is None else {piece.field}
    rules = domain_cls.rules_reading(written)
    return "".join(["\nRules it must meet with the rest of the domain:", *(f"\n- {r.says}" for r in rules)]) \
        if rules else ""


def piece_description(domain_cls: type[Domain], piece: Piece, pieces: list[Piece]) -> str:
    """What the piece is, as the schema describes it: its domain field's description, or for one list of a
    record written list by list, the record's (its placeholders) and then that list's."""
    if piece.field is None:
        return ""
    if piece.part is None:
        return named_description(domain_cls, piece.field, pieces)
    record = domain_cls.model_fields[piece.field].annotation
    return " ".join(" ".join(filter(None, [record.__doc__ and " ".join(record.__doc__.split()),
                                           record.model_fields[piece.part].description])).split())


def named_description(domain_cls: type[Domain], field_name: str, pieces: list[Piece]) -> str:
    """A top-level field's description, with the placeholders `Domain.NAMED_LINES` declares for the field spelled
    as names the draft has ('{component} ... {dependency}' -> 'api-1 ... api-2': the first placeholder the
    first key of its list, the next the next key), so that the model writes lines with real names and the
    domain's `tidy` puts the placeholders back. Unchanged where the keys are not written yet."""
    return spelled(domain_cls, field_name, pieces, domain_cls.model_fields[field_name].description or "")


def spelled(domain_cls: type[Domain], field_name: str, pieces: list[Piece], text: str) -> str:
    """`text` (a field's description, or one of its lines) with the field's `NAMED_LINES` placeholders spelled as
    the names `named_description` gives them: the lines a model is told to differ from read as it writes them."""
    named = domain_cls.NAMED_LINES.get(field_name, {})
    taken: dict[str, int] = {}
    names = {}
    for placeholder, source in named.items():
        keys = _keys_of(pieces, source.split(".")[0])
        i = taken.get(source, 0)
        if i >= len(keys):
            return text
        names[placeholder], taken[source] = keys[i], i + 1
    for placeholder, name in names.items():
        text = text.replace("{" + placeholder + "}", name)
    return text


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
    for path, count in domain_cls.REQUIRED_IN_FIRST.items():
        list_name, field_name = path.split(".")
        if list_name == piece.field and piece.index < count and field_name in props:
            props[field_name] = _written(props[field_name])
            schema["required"] = [*dict.fromkeys([*schema.get("required", []), field_name])]
    for ref_path, ref in domain_cls.REFERENCES.items():
        list_name, field_name = ref_path.split(".")
        if list_name != piece.field or field_name not in props:
            continue
        if ref.by_kind and len(props.get("kind", {}).get("enum") or []) > 1:
            split_by_kind(schema)  # the list drawn from depends on the kind the item is written with
        for kind, branch in kind_branches(schema) or [(None, schema)]:
            source = dict(ref.by_kind).get(kind, "") if ref.by_kind and kind is not None else ref.source
            values = _known(pieces, source) if source else []
            if ref.later_only and source.split(".")[0] == piece.field:
                values = keys[piece.index + 1:] if keys else []
            if not values and not ref.later_only and source:
                continue
            _limit(branch["properties"], field_name, values)
    return schema


def _limit(props: dict[str, Any], field_name: str, values: list[str]) -> None:
    """The reference field `field_name` of an object's properties limited to `values` (none: left empty)."""
    enum = {"type": "string", "enum": values} if values else None
    prop = props[field_name]
    if prop.get("type") == "object" and values:  # a map keyed by references: one entry for each key that exists
        entry = prop.get("additionalProperties") if isinstance(prop.get("additionalProperties"), dict) else {}
        props[field_name] = {"type": "object", "properties": {v: entry for v in values}, "required": values,
                             "additionalProperties": False}
    elif prop.get("type") == "array":
        props[field_name] = {**prop, "items": enum} if enum else {**prop, "maxItems": 0}
    elif enum:
        props[field_name] = enum


def split_by_kind(node: dict[str, Any]) -> dict[str, Any]:
    """An object schema with a `kind` enum made one alternative per kind (in place; its `$defs` stay on top), so
    that what depends on the kind (a text's placeholders, the list a reference draws from) can differ per
    alternative; once the grammar has written the kind, only its alternative goes on."""
    if kind_branches(node):
        return node
    kinds = node["properties"]["kind"]["enum"]
    branches = []
    for value in kinds:
        branch = copy.deepcopy({k: v for k, v in node.items() if k != "$defs"})
        branch["properties"]["kind"] = {**node["properties"]["kind"], "enum": [value]}
        branches.append(branch)
    kept = {"$defs": node["$defs"]} if "$defs" in node else {}
    node.clear()
    node.update({**kept, "anyOf": branches})
    return node


def kind_branches(node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, alternative) of a schema `split_by_kind` made; empty for any other schema."""
    found = []
    for branch in node.get("anyOf", []) if "properties" not in node else []:
        kinds = branch.get("properties", {}).get("kind", {}).get("enum") if isinstance(branch, dict) else None
        if not kinds or len(kinds) != 1:
            return []
        found.append((kinds[0], branch))
    return found


def _written(prop: dict[str, Any]) -> dict[str, Any]:
    """A field's schema without its empty answers: `X | None` as `X`, a list with at least one item."""
    prop = {k: v for k, v in prop.items() if k != "default"}
    options = [o for o in prop.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **options[0]}
    if prop.get("type") == "array":
        prop["minItems"] = max(1, prop.get("minItems", 0))
    return prop


def replace_value(data: Any, old: str, new: str) -> Any:
    """`data` (a piece's value, or plain data) with every string equal to `old` replaced by `new`: a value, or a
    key of a map field (a rename, never a substring edit)."""
    if isinstance(data, str):
        return new if data == old else data
    if isinstance(data, list):
        return [replace_value(v, old, new) for v in data]
    if isinstance(data, BaseModel):  # its fields by name (a field is never renamed), as a dict to validate
        return {k: replace_value(getattr(data, k), old, new) for k in type(data).model_fields}
    if isinstance(data, dict):  # a map (a persona's weights per issue id) renames its keys too
        return {(new if k == old else k): replace_value(v, old, new) for k, v in data.items()}
    return data


def _name_of(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        for key in ("name", "id", "title"):
            if isinstance(getattr(value, key, None), str):
                return getattr(value, key)
    return None


def _whole_at_the_cap(text: str) -> str:
    """A text the grammar stopped at MAX_FREE_CHARS mid-sentence (its schema allows more), cut back to its whole
    sentences (the parse cuts only a text past its schema's bound)."""
    if len(text) < MAX_FREE_CHARS - 2 or text.endswith((".", "!", "?")):
        return text
    return cut_text(text, len(text))


def cut_rambles(value: Any) -> Any:
    """The draft with every text that breaks into another script mid-sentence cut back to its last full
    sentence (`without_foreign_tail`), and every text that goes round in a loop cut before its first repeated
    clause (`without_loop`): both are a small model's ramble up to its length bound. The task's own phrase 'X is
    tasked with' is said as 'X's job is' (`without_tasked`), and a placeholder run into the word before it gets
    its space (`unglued`)."""
    if isinstance(value, str):
        return unglued(without_tasked(without_loop(without_foreign_tail(_whole_at_the_cap(value)))))
    if isinstance(value, dict):
        return {k: cut_rambles(v) for k, v in value.items()}
    if isinstance(value, list):
        return [cut_rambles(v) for v in value]
    return value


_CLAUSE_END = re.compile(r"[.;!?](?:\s+|$)")


def without_loop(text: str) -> str:
    """`text` cut before the first clause (between '.', ';', '!' or '?') of three words or more that it already
    said: a small model can go round the same clauses until the grammar's bound cuts it. Unchanged otherwise."""
    seen: set[str] = set()
    start, last = 0, None
    for end in [m.end() for m in _CLAUSE_END.finditer(text)] + [len(text)]:
        clause = " ".join(re.findall(r"[\w{}'%-]+", text[start:end].lower()))
        # a clause of a word or two loops when it comes right after itself or the end of the one before ('Y/N? Y/N?')
        short = 0 < len(clause.split()) <= 2 and last is not None and f" {last}".endswith(f" {clause}")
        if (len(clause.split()) >= 3 and clause in seen) or short:
            kept = text[:start].rstrip()
            return kept[:-1] + "." if kept.endswith((";", ",")) else kept
        seen.add(clause)
        start, last = end, clause
    return text


def drop_repeated_prose(value: Any) -> Any:
    """The draft without a sentence repeated inside one list (a small model's loop; the first stays), or repeated
    but for its log level, and without list items that are JSON debris ('INFO {component} ]', where the grammar
    held the model to more lines than it had): the list then comes up short and is completed line by line. Short
    strings (names, enum values) are left alone."""
    if isinstance(value, dict):
        return {k: drop_repeated_prose(v) for k, v in value.items()}
    if isinstance(value, list):
        seen: set[str] = set()
        kept = []
        for item in value:
            if isinstance(item, str) and is_debris(item):
                continue
            if isinstance(item, str) and is_prose(item):
                if unlevelled(item) in seen:
                    continue
                seen.add(unlevelled(item))
            kept.append(drop_repeated_prose(item))
        return kept
    return value


def unlevelled(line: str) -> str:
    """A log line without its level ('WARN {component} x' -> '{component} x'); any other text as it is: two lines
    that differ only in their level are one line (`drop_repeated_prose`, `repair.complete_list`)."""
    level, _, rest = line.partition(" ")
    return rest if rest and level.lower().rstrip(":") in LOG_LEVELS else line


def distinct_references(data: dict[str, Any], domain_cls: type[Domain]) -> dict[str, Any]:
    """The draft with a key repeated inside one list of references listed once: the grammar bounds such a list
    (at most 8) but cannot ask its values to differ, and a small model fills it with one key over and over."""
    data = dict(data)
    for path in domain_cls.REFERENCES:
        list_name, field_name = path.split(".")
        items = data.get(list_name)
        if not isinstance(items, list):
            continue
        data[list_name] = [{**item, field_name: list(dict.fromkeys(item[field_name]))}
                           if isinstance(item, dict) and isinstance(item.get(field_name), list)
                           and all(isinstance(v, str) for v in item[field_name]) else item for item in items]
    return data


def thin_repeats(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """The draft with a sentence written three times or more across its lists dropped from the lists that keep
    their minimum without it, the last ones first, until it is written fewer than three times (never a word
    added or changed): a small model reuses one sentence across lists, and a repair request per copy is too slow."""
    data = json.loads(json.dumps(data))  # a copy the caller's draft does not share
    lists: list[tuple[list, int]] = []
    _string_lists(data, model, lists)
    counts: dict[str, int] = {}
    for _, text in iter_texts(data):
        if is_prose(text):
            counts[text] = counts.get(text, 0) + 1
    for text, count in counts.items():
        for items, least in reversed(lists):
            while count >= REPEATED_TEXT and text in items and len(items) > least:
                del items[len(items) - 1 - items[::-1].index(text)]  # the last copy goes
                count -= 1
    return data


def _string_lists(data: Any, model: type[BaseModel], out: list[tuple[list, int]]) -> None:
    """Every list of texts in `data` (laid out as `model`), with its least number of items, in field order."""
    if not isinstance(data, dict):
        return
    for name, info in model.model_fields.items():
        value, annotation = data.get(name), info.annotation
        options = [a for a in (annotation, *typing.get_args(annotation)) if is_model(a)]  # `X | None` too
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is list and args and _is_str(args[0]) and isinstance(value, list):
            least = next((m.min_length for m in info.metadata if hasattr(m, "min_length")), 0) or 0
            out.append((value, least))
        elif typing.get_origin(annotation) is list and args and is_model(args[0]) and isinstance(value, list):
            for item in value:
                _string_lists(item, args[0], out)
        elif options and isinstance(value, dict):
            _string_lists(value, options[0], out)


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
        elif piece.part is not None:
            data.setdefault(piece.field, {})[piece.part] = value["items"]
        elif set(value) == {"items"} and not is_model(piece.model.model_fields.get("items", None)):
            data[piece.field] = value["items"]
        else:
            data[piece.field] = value
    return data


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
