"""Repairs of a pieces draft (`Draft`): the checks' problems fixed where they are, before the validator sees it.

One primitive does most of the work: **regenerate** the smallest node that owns a problem's path (a text, a
line, a record inside an item), asked for alone under that node's own schema (aside, out of the worked
example's sight, where it copied), told every problem at that node; a text is kept where it fixed one of them, a
record's rewrite is left for the next round to judge. A short name is asked for as three values at
once (a small model keeps writing the one it wrote; of three, one is likely another). Structural operations do
what no rewrite of one node can: **rename a key** everywhere it is used, **choose** among the values the domain
allows (a reference, a graph's link, a field's default), **complete a list** whose repeats were dropped, one new
line at a time, and **drop** what the domain can do without. Whatever none fixes, the designer rewrites as the
whole piece that owns it.

Each repair is a switch (`REPAIRS`, `designer.switches`): `benchmarks/designer_local.py --off NAME` and
`benchmarks/designer_ablation.py` turn one off at a time. No repair reads a problem's message: they act on its
code, path and data (`DomainProblem`)."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field, ValidationError, create_model

from openadapt.designer.copying import NAME_FIELDS, copied_from_example, is_copy, unquoted
from openadapt.designer.draft import Draft, Node
from openadapt.designer.pieces import (
    Piece,
    examples_only,
    field_guide,
    list_item_model,
    max_tokens_for,
    piece_description,
    replace_value,
    resized,
    spelled,
    unlevelled,
)
from openadapt.designer.placeholders import with_placeholders
from openadapt.families.domain import (
    FROM_DESCRIPTION,
    FROM_EXAMPLE,
    Code,
    DomainProblem,
    extends,
    is_debris,
    is_prose,
    key_base,
    numbered_copies,
)
from openadapt.llm.chat import ReplyError
from openadapt.llm.local.grammar import bounded

REPEAT_TEMPERATURE = 0.9  # a request after the model repeated itself: at 0.2 it repeats again
# A name that is not this node's own (copied, another's, words of the schema or of the feedback): chosen anew.
RENAMED_FOR = frozenset({Code.DUPLICATE_NAME, Code.REPEATED_LINE, Code.SCHEMA_ECHO, Code.FEEDBACK_ECHO,
                         Code.NAME_CLASH, Code.COPIED, Code.DESCRIBED, Code.EXAMPLE_PHRASE, Code.DESCRIBED_PHRASE})
_NAMES = set(NAME_FIELDS.split("|"))
# what a text's one problem is, said by its code: a copy without the words it copied (shown them, a small model
# writes them back)
REASONS = {Code.COPIED: "is copied from the worked example of another world",
           Code.EXAMPLE_PHRASE: "takes a phrase from the worked example of another world",
           Code.DESCRIBED: "is copied from the example its description gives",
           Code.DESCRIBED_PHRASE: "takes a phrase from the example its description gives",
           Code.REPEATED_TEXT: "repeats another item's"}
_EXAMPLE = re.compile(r"[,;]?\s*\(?e\.g\.\s*(?<![A-Za-z])'.*?'(?![A-Za-z])\)?")


@dataclass(frozen=True)
class Repair:
    name: str  # its switch
    does: str  # one line, for the ablation table
    fix: Callable[[Draft, DomainProblem, set[str]], bool]  # True when the problem is fixed (or taken care of)


# ---- the primitive --------------------------------------------------------------------------------------------
def regenerate(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """The node that owns the problem's path asked for again on its own; see the module docstring. Keys and
    references are not rewritten as text (renamed or chosen), and a text of a record of the domain copied from
    the worked example goes back with its whole record (one request for all its copies)."""
    node = draft.locate(problem.path)
    if node is None or _structural(draft, node):
        return False
    if node.is_text and _nested(node) and not (_short_name(node) and problem.code in RENAMED_FOR):
        node = node.parent  # a field of a record inside an item: its fields are checked together
    if node.is_text and node.piece.field is not None and node.piece.index is None and node.piece.part is None \
            and not _whole_list(draft, node.piece) and problem.code in FROM_EXAMPLE and not _short_name(node):
        return False
    if not (node.is_text or node.is_record) or (node.is_record and _below_item(node) == 0):
        return False  # a number, a list, an item or a record of the domain as a whole: its piece is rewritten
    if node.path in done:  # one request per node and round, with every problem it has
        return f"{node.path} failed" not in done
    done.add(node.path)
    before, wrong = node.piece.value, _problems_at(draft, node.path) or [problem]
    if node.is_record:
        kept = _regenerate_record(draft, node, wrong)
    else:
        kept = (_short_name(node) and any(p.code in RENAMED_FOR for p in wrong) and _three_values(draft, node, wrong)) \
            or _regenerate_text(draft, node, wrong)
    if kept:
        return True
    node.piece.value = before
    done.add(f"{node.path} failed")
    return problem.code == Code.REPEATED_LINE and _drop_repeat(draft, node)


def _regenerate_text(draft: Draft, node: Node, wrong: list[DomainProblem]) -> bool:
    label = node.path.removeprefix("domain.")
    if node.piece.index is not None:  # what tells an item's text from its siblings' is the item
        what = f"`{node.name}` of `{node.piece.path}`"
    else:
        what = f"`{label.rsplit('[', 1)[0] if node.line is not None else label}`"
    what = what if node.line is None else f"Line {node.line + 1} of {what}"
    copy = any(is_copy(p) for p in wrong)
    current, others = node.value, _alike(draft, node)
    # never shown what it took from an example: shown the copy, a small model writes it back
    was = "" if copy else f" It reads: {current!r}."
    base = node.path.rsplit("[", 1)[0]
    copied = {p.path for p in draft.check() if p.path.startswith(base + "[") and is_copy(p)} if node.line is not None \
        else set()
    shown = [v for i, v in enumerate(node.parent.value) if i != node.line and f"{base}[{i}]" not in copied] \
        if node.line is not None else [t for t in others if t != current]
    differ = f", different from every one of: {json.dumps(shown, ensure_ascii=False)}" if shown else ""
    whose = " for this world"
    if node.piece.index is not None:  # an item's text: with the item (as it stands, unless that shows a copy)
        item = json.dumps(node.piece.value.model_dump(mode="json"), ensure_ascii=False)
        whose = f" for this item ({_identity(node)})" if copy else f" for this item (as it stands: {item})"
    reason = REASONS.get(wrong[0].code) if len(wrong) == 1 else None
    told = reason or (f"has {'a problem' if len(wrong) == 1 else 'problems'}: "
                      f"{'; '.join(unquoted(p, False) for p in wrong)}")
    one = create_model("OneText", text=(str, node.info) if node.line is None and node.info.annotation is str
                       else (node.annotation, ...))
    schema = with_placeholders(bounded(one.model_json_schema()), draft.family, node.path, "text",
                               kind=_kind(node.parent))
    best, said = None, ""
    for tries in range(2):
        # An item's text that copied nothing is first asked for in the conversation (the worked example in
        # sight shows the form); a copy, a text of the header or a record, and every second ask, aside.
        in_sight = not tries and not copy and node.piece.index is not None
        world = "" if in_sight else draft.world_so_far(without=node.name if node.piece.field is None else None)
        ask = (f"{world}{said}{what} {told}.{was} Write it again{whose} as JSON "
               f"{{\"text\": ...}}{differ}. What it must be: {_guide(draft, node, wrong)}")
        try:
            text = (draft.session.ask(ask, one, max_tokens=160, schema=schema) if in_sight else
                    draft.session.ask_aside(ask, one, max_tokens=160, schema=schema, reseed=tries,
                                            temperature=REPEAT_TEMPERATURE if tries else None)).text.strip()
            if text == current or text in others:
                said = f"{text!r} is already there. "
                continue
            node.put(text)
        except (ReplyError, ValidationError):
            continue
        still = _problems_at(draft, node.path)
        if best is None or len(still) < len(best[1]):
            best = (node.piece.value, still)
        if not still:
            break
        said = (f"Still wrong: {'; '.join(unquoted(p, False) for p in still)}. " if copy else
                f"You wrote {text!r}; still wrong: {'; '.join(p.message for p in still)}. ")
    if best is None or not {(p.path, p.code) for p in wrong} - {(p.path, p.code) for p in best[1]}:
        return False  # none of its problems fixed
    node.piece.value = best[0]
    draft.say("rewrote", f"{node.path.removeprefix('domain.')}" + (f" ({len(best[1])} problem(s) left)"
                                                                   if best[1] else ""))
    return True


def _regenerate_record(draft: Draft, node: Node, wrong: list[DomainProblem]) -> bool:
    """A record inside an item (`faults[0].constraint`, one of `faults[2].metrics`): asked for alone with the item
    as it stands; once more hotter when the same problem comes back; a short field still wrong on its own is then
    chosen among three values."""
    model, at = node.annotation, node.path
    described = any(p.code in FROM_DESCRIPTION for p in wrong)
    guide = field_guide(model.model_fields)
    if described:  # the example it copied is not shown again
        guide = "\n".join(without_examples(line) for line in guide.splitlines())
    item = node.piece.value.model_dump(mode="json")
    # a record of a list (a fault's reading) is shown with its siblings; a record field with the item's rest
    rest = item if node.line is not None else {k: v for k, v in item.items() if k != node.name}
    ask = (f"`{at}` has problems:\n" + "\n".join(f"- {unquoted(p)}" for p in wrong[:6]) +
           f"\n`{node.piece.path}` as it stands: {json.dumps(rest, ensure_ascii=False)}\n"
           f"Write `{at}` again as JSON, fixing every problem.\nFields:\n{guide}")
    room = max(200, max_tokens_for(node.piece, draft.example) // (2 if node.line is None else 4))
    schema = with_placeholders(bounded(model.model_json_schema()), draft.family, at)
    try:
        copied = described or any(p.code in FROM_EXAMPLE for p in wrong)  # else in sight of the worked example
        value = (draft.session.ask_aside(f"{draft.world_so_far()}{ask}", model, max_tokens=room, schema=schema)
                 if copied else draft.session.ask(ask, model, max_tokens=room, schema=schema))
        node.put(value)
        still = _problems_at(draft, at)
        if still and set(still) & set(wrong):
            # the same mistake again: hotter, shown what it wrote unless a copy (shown one, it is written back)
            copy = described or any(p.code in FROM_EXAMPLE for p in still)
            wrote = "" if copy else f" as {value.model_dump_json()}"
            value = draft.session.ask_aside(
                f"{draft.world_so_far()}You wrote `{at}`{wrote}, and it still has problems:\n" +
                "\n".join(f"- {unquoted(p)}" for p in still[:6]) + f"\n{ask}", model, max_tokens=room,
                temperature=REPEAT_TEMPERATURE, schema=schema)
            node.put(value)
            still = _problems_at(draft, at)
            fields = {p.path.removeprefix(at + ".") for p in still}
            if len(fields) == 1 and (name := fields.pop()) in model.model_fields:
                field = draft.locate(f"{at}.{name}")
                if field is not None and _short(field):
                    _three_values(draft, field, still)
                still = _problems_at(draft, at)
    except (ReplyError, ValidationError):
        return False
    # kept even where a problem is left: the next round judges it, and its piece rewritten whole (the next
    # fallback) gives a small model every field of the item to get wrong again
    draft.say("rewrote", at.removeprefix("domain.") + (f" ({len(still)} problem(s) left)" if still else ""))
    return True


def _three_values(draft: Draft, node: Node, wrong: list[DomainProblem]) -> bool:
    """Three values for a short field at once, aside and hotter, each under the field's own bounds and pattern,
    new names before the old one with words added; the first that clears the problem is kept, and where the
    record's texts name the old value in brackets ('(restart)') they name the new one."""
    old, taken = node.value, [v for v in _alike(draft, node) if isinstance(v, str)]
    item_name = node.piece.index is not None and _below_item(node) == 1
    if item_name and any(other is not node.piece and other.value is not None
                         and json.dumps(old) in other.value.model_dump_json() for other in draft.pieces):
        return False  # named elsewhere: renamed here alone, a reference would dangle
    record = dict(node.parent.value) if node.parent is not None and node.parent.is_record else {}
    shown = {f: v for f, v in record.items() if f != node.name and isinstance(v, str | int | float)}
    three = create_model("ThreeValues", values=(list[typing.Annotated[str, *node.info.metadata]],
                                                Field(min_length=3, max_length=3)))
    try:
        values = draft.session.ask_aside(
            f"{draft.world_so_far()}`{node.path}` is wrong: {'; '.join(unquoted(p, False) for p in wrong[:3])}. "
            f"The record: {json.dumps(shown, ensure_ascii=False)}. Name three other values for its `{node.name}` as "
            f"JSON {{\"values\": [...]}}, each another than every one of {json.dumps([old, *taken])}. "
            f"`{node.name}`: {without_examples(node.info.description or '')}", three, max_tokens=120,
            schema=bounded(three.model_json_schema()), temperature=REPEAT_TEMPERATURE).values
    except (ReplyError, ValidationError):
        return False
    before, parent = node.piece.value, node.parent
    for new in sorted(dict.fromkeys(v.strip() for v in values), key=lambda v: extends(v, old)):
        if new == old or new in taken:
            continue
        try:
            if parent is not None and parent.is_record:
                parent.put({k: v.replace(f"({old})", f"({new})") if isinstance(v, str) else v
                            for k, v in {**record, node.name: new}.items()})
            else:
                node.put(new)
        except ValidationError:
            continue
        if not _problems_at(draft, node.path):
            draft.say("chose", f"{node.path.removeprefix('domain.')}: {old!r} -> {new!r}")
            return True
        node.piece.value = before
    node.piece.value = before
    return False


def _drop_repeat(draft: Draft, node: Node) -> bool:
    """A line of a list written whole that repeats another and came back as a line already there each time it
    was asked for alone is dropped, and the list completed if it is then too short."""
    if node.line is None or node.steps[:1] != ("items",) or len(node.steps) != 2:
        return False
    before, lines = node.piece.value, [v for i, v in enumerate(node.parent.value) if i != node.line]
    node.piece.value = node.piece.model.model_construct(items=lines)  # held short until completed below
    short = next((p for p in draft.check() if p.path == f"domain.{node.piece.field}" and p.code == Code.TOO_FEW),
                 None)
    if short is not None and not complete_list(draft, short, set()):
        node.piece.value = before
        return False
    try:
        node.piece.value = node.piece.model.model_validate(node.piece.value.model_dump())
    except ValidationError:
        node.piece.value = before
        return False
    draft.say("dropped", f"{node.path.removeprefix('domain.')} (a repeat)")
    return True


# ---- structural operations ----------------------------------------------------------------------------------
def rename_key(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """A key (a component's name, a fault's id) with a problem: a new one asked for, then put in place everywhere
    the old one is used (the item and every reference); a key several items share, for this item alone."""
    node = draft.locate(problem.path)
    if node is None or node.piece.index is None or node.steps != (draft.domain.KEYS.get(node.piece.field),):
        return False
    list_name, index = node.piece.field, node.piece.index
    keys_piece = draft.keys_piece(list_name)
    if keys_piece is None or index >= len(keys_piece.value.items):
        return False
    keys = list(keys_piece.value.items)
    old = keys[index]
    if problem.value is not None and key_base(problem.value) != key_base(old):
        return True  # renamed since the check (a key with two problems): the next check sees it anew
    single = create_model("NewKey", name=(keys_piece.model.model_fields["items"].annotation.__args__[0], ...))
    shared = keys.count(old) > 1
    copy = shared or problem.code in (Code.NUMBERED_COPY, Code.COPIED, Code.DESCRIBED)
    said = ""
    for tries in range(2):  # once more, hotter and reseeded, when the answer is taken or the old one numbered
        ask = (f"{said}The name {old!r} of `{list_name}` item {index + 1} is wrong: {problem.message}. Write a new "
               f"one as JSON {{\"name\": ...}}, different from: {', '.join(keys)}.")
        try:
            new = (draft.session.ask(ask, single, max_tokens=60) if not tries else draft.session.ask_aside(
                f"{draft.world_so_far()}{ask}", single, max_tokens=60, temperature=REPEAT_TEMPERATURE,
                reseed=tries)).name
        except (ReplyError, ValidationError):
            return False
        # the old name numbered is refused twice; with words added once, then kept (the check passes it)
        numbered = extends(new, old) if not tries else key_base(new) == key_base(old)
        why = ("is taken" if new.lower() in {k.lower() for k in keys} else
               "is the old name numbered or with words added" if copy and numbered else
               "is a name of the worked example's world" if _example_name(draft, list_name, new) else None)
        if why is None:
            break
        said = f"{new!r} {why}. "
    else:
        return False
    keys_piece.value = keys_piece.model(items=[new if (i == index if shared else k == old) else k
                                               for i, k in enumerate(keys)])
    for piece in [node.piece] if shared else draft.pieces:
        if piece.value is not None and not piece.keys:
            try:
                piece.value = type(piece.value).model_validate(replace_value(piece.value, old, new))
            except ValidationError:  # the new name breaks this piece's own bounds: it is written again
                piece.value = None
    draft.say("renamed", f"{list_name} {old!r} -> {new!r}")
    return True


def _example_name(draft: Draft, list_name: str, name: str) -> bool:
    """Whether `name`, as a key of `list_name`, is one the copy check finds the worked example's: renamed to another
    of its names (a discrepancy 'deposit_in_transit' to 'outstanding_cheque'), the copy is still there."""
    probe = {list_name: [{draft.domain.KEYS[list_name]: name}]}
    return any(p.code == Code.COPIED for p in copied_from_example(probe, draft.example, draft.others, draft.task))


def schema_default(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """A name repeated within a record (five tool names all 'submit_diagnosis') takes its field's default where
    the schema has one the record does not use: no request. The first of the repeats keeps the name, unless every
    field had it."""
    node = draft.locate(problem.path)
    if problem.code != Code.NAME_CLASH or node is None or node.steps != (node.name,) or node.piece.field is None:
        return False
    data, fields = node.piece.value.model_dump(), node.piece.model.model_fields
    repeated = data[node.name]
    if problem.value is not None and problem.value != repeated:
        return True  # renamed since the check, with an earlier field's repeat
    holders = [f for f, v in data.items() if v == repeated]
    for f in holders if len(holders) == len(data) else holders[1:]:
        default = fields[f].get_default()
        if isinstance(default, str) and default not in data.values():
            data[f] = default
    if data[node.name] == repeated:
        return False
    try:
        node.piece.value = node.piece.model.model_validate(data)
    except ValidationError:
        return False
    draft.say("renamed", f"{node.path.removeprefix('domain.')} -> {data[node.name]}")
    return True


def choose_defined(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """A reference to something the domain does not define (`items[1].location`, `suppliers[2].offers[0].item`),
    or a list of them, chosen again among those defined, the grammar holding it to them."""
    node = draft.locate(problem.path)
    if problem.code != Code.UNKNOWN_REFERENCE or not problem.choices or node is None:
        return False
    many = node.line is not None and all(isinstance(v, str) for v in node.parent.value)
    node = node.parent if many else node
    if not (many or node.is_text) or node.parent is None or not node.parent.is_record:
        return False
    if node.path in done:
        return True
    done.add(node.path)
    choices = known = list(problem.choices)
    holder = node.parent.value
    if not many and node.parent.line is not None:  # not what its siblings name (a supplier offers an item once)
        taken = {r.get(node.name) for r in node.parent.parent.value if r is not holder and isinstance(r, dict)}
        choices = [c for c in choices if c not in taken] or choices
    if many:  # not what the record's other lists of names hold (a scenario escalates or defers a category)
        used = {v for f, other in holder.items() if f != node.name and isinstance(other, list) for v in other
                if isinstance(v, str)}
        choices = [c for c in choices if c not in used] or choices
        least = next((m.min_length for m in node.info.metadata if getattr(m, "min_length", None) is not None), 1)
        most = min(len(choices), max(least, len(node.value)), next(
            (m.max_length for m in node.info.metadata if getattr(m, "max_length", None) is not None), len(choices)))
        if least > most:
            return False
        answer = {"type": "array", "items": {"type": "string", "enum": choices}, "minItems": least, "maxItems": most}
        unknown = [v for v in node.value if v not in known]
        ask = (f"`{node.path}` names values that are not defined: {json.dumps(unknown)}. Choose its `{node.name}` "
               f"again among the defined ones, {json.dumps(choices)}, as JSON "
               f"{{\"items\": [...]}}. `{node.name}`: {node.info.description or ''}")
        room, model = 20 + 12 * most, create_model("Chosen", items=(list[str], ...))
    else:
        answer = {"type": "string", "enum": choices}
        ask = (f"`{node.path}` is {node.value!r}, which this world does not define. Choose the one it means among "
               f"{json.dumps(choices)}, as JSON {{\"items\": ...}}.")
        room, model = 40, create_model("Chosen", items=(str, ...))
    schema = {"type": "object", "title": "Chosen", "required": ["items"], "properties": {"items": answer}}
    before = node.piece.value
    try:
        chosen = draft.session.ask_aside(f"{draft.world_so_far()}In `{node.path}` ({_identity(node)}): {ask}", model,
                                         max_tokens=room, schema=schema).items
        node.put(list(dict.fromkeys(chosen)) if many else chosen)
    except (ReplyError, ValidationError):
        node.piece.value = before
        return False
    if any(p.path.startswith(node.path) and p.code == Code.UNKNOWN_REFERENCE for p in draft.check()):
        node.piece.value = before
        return False
    draft.say("chose", f"{node.path.removeprefix('domain.')}: {node.value}")
    return True


def drop_surplus(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """Dropped where its list keeps what its schema needs, with no request: a line that repeats another line of its
    list (the other stays: nothing is lost); a record of an item's list wrong as a whole (a reading whose healthy
    and faulty values are equal: asked for again, it comes back the same); a line of an item's list still copying
    an example after two rounds."""
    node = draft.locate(problem.path)
    if node is None or node.line is None or node.parent is None or node.parent.info is None:
        return False
    repeat = problem.code == Code.REPEATED_LINE and node.is_text
    in_item = node.piece.index is not None and len(node.steps) == 2
    copy = node.is_text and is_copy(problem) and draft.rounds_seen.get(str(problem), 0) >= 2
    if not (repeat or (in_item and (node.is_record or copy))):
        return False
    if problem not in draft.check():
        return False  # a line dropped before it moved this one
    needed = next((m.min_length for m in node.parent.info.metadata if getattr(m, "min_length", None) is not None), 0)
    if len(node.parent.value) <= needed:
        return False
    try:
        node.parent.put(node.siblings())
    except ValidationError:
        return False
    draft.say("dropped", f"{problem.path.removeprefix('domain.')} ({problem.message})")
    return True


def complete_list(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """A list of lines left too short (a small model writes one line several times and the repeats are dropped)
    completed one new line at a time, each different from those it has; after a repeat, hotter and reseeded.
    Asked for the whole list again, a small model sends the same repeats back."""
    node = draft.locate(problem.path)
    wanted = problem.minimum if problem.code == Code.TOO_FEW else None
    if node is None or not wanted or not isinstance(node.value, list) or not all(isinstance(i, str)
                                                                                 for i in node.value):
        return False
    piece, whole = node.piece, node.steps == ("items",)
    nested = piece.index is not None
    # distinct as the draft has them, tidied: two lines that tidy to one, or differ only in their level, count once
    data, where = draft.data(), (piece.field, piece.index, node.name) if nested else \
        (piece.field, None, None) if whole and piece.part is None else None
    lines, forms = [], set()
    for line in node.value:
        if not is_debris(line) and (form := unlevelled(_tidied(draft, data, where, line))) not in forms:
            lines.append(line)
            forms.add(form)
    if whole:  # as many as the piece asks for (more than the domain's minimum, maybe), if they come
        need = max(wanted, piece.model.model_json_schema()["properties"]["items"].get("minItems", 0))
        guide, others, whose = piece_description(draft.domain, piece, draft.pieces), [], \
            f"the domain's `{piece.path.removeprefix('domain.')}`"
    else:  # told apart from every item's lines
        need, guide = wanted, node.info.description or ""
        others = [line for p in draft.items(piece.field) if p is not piece and p.value is not None
                  for line in getattr(p.value, node.name, [])] if nested else []
        whose = f"`{node.name}` of `{piece.path}`" + (f" ({_identity(node)})" if nested else "")
    one = create_model("OneLine", line=(typing.get_args(node.info.annotation)[0], ...))
    schema = with_placeholders(bounded(one.model_json_schema()), draft.family, f"{problem.path}[0]", "line")
    kind = "line" if any(is_prose(line) for line in node.value) else "name"  # asked for a line, a name's list is named
    world = "" if whole else draft.world_so_far()

    def ask(said: str, hot: bool, lines: list[str]) -> str:
        shown = [spelled(draft.domain, piece.field, draft.pieces, line) for line in lines] + others
        return (f"{world}{said}Write one more {kind} for {whose} ({without_examples(guide) if hot else guide}) as "
                f"JSON {{\"line\": ...}}, in this task's world and different from every one of: {json.dumps(shown)}")

    def fresh(line: str, lines: list[str]) -> str | None:
        form = unlevelled(_tidied(draft, data, where, line))
        if is_debris(line):
            return "is not a line of this world"
        if not line or form in forms or line in others:
            return "is already there"
        forms.add(form)
        return None

    lines = _more(draft, lines, need, ask, one, schema, fresh, hot_from_start=False)
    if len(lines) < wanted:
        draft.say("completing", f"{problem.path}: {len(lines)} distinct lines, not the {wanted} it needs")
        return False
    try:
        if whole:  # asked for `need`; it now holds as many as it has (the domain judges them)
            piece.model = resized(piece.model, len(lines))
            piece.value = piece.model(items=lines)
        else:
            node.put(lines)
    except ValidationError as exc:
        draft.say("completing", f"{problem.path}: unusable lines ({str(exc)[:80]})")
        return False
    draft.say("completing", f"{problem.path.removeprefix('domain.')}: {len(lines)} lines")
    return True


def distinct_keys(draft: Draft, piece: Piece) -> bool:
    """A list of keys with repeats, or mostly numbered copies of one name where the domain wants varied keys
    ('unit-1' .. 'unit-6'), keeps its distinct keys and is completed one new key at a time, none a numbered copy
    of a repeated one: asked for the whole list again, a small model sends the repeats back, asked to rename one,
    it numbers it."""
    keys = list(piece.value.items)
    copies = set(numbered_copies(keys)) if piece.field in draft.domain.VARIED_KEYS else set()
    kept: list[str] = []
    for i, key in enumerate(keys):
        if i not in copies and key.lower() not in {k.lower() for k in kept}:
            kept.append(key)
    bases = {key_base(k) for k in keys if [x.lower() for x in keys].count(k.lower()) > 1} | \
        {key_base(keys[i]) for i in copies}
    one = create_model("OneKey", name=(piece.model.model_fields["items"].annotation.__args__[0], ...))
    key_name = draft.domain.KEYS[piece.field]
    guide = list_item_model(draft.domain.model_fields[piece.field].annotation).model_fields[key_name].description

    def ask(said: str, hot: bool, kept: list[str]) -> str:
        return (f"{draft.world_so_far()}{said}Name one more of the `{piece.field}` of this world: its `{key_name}` as "
                f"JSON {{\"name\": ...}}, another one than every one of {json.dumps(kept)}, not a numbered copy of "
                f"one. Each `{key_name}`: {guide or ''}")

    def fresh(new: str, kept: list[str]) -> str | None:
        return ("is taken" if new.lower() in {k.lower() for k in kept} or key_base(new) in bases else
                "is a name of the worked example's world" if _example_name(draft, piece.field, new) else None)

    kept = _more(draft, kept, len(keys), ask, one, None, fresh, hot_from_start=True)
    if len(kept) < len(keys):
        return False
    piece.value = piece.model(items=kept)
    draft.say("named", f"{piece.path}: {', '.join(kept)}")
    return True


def _more(draft: Draft, have: list[str], need: int, ask: Callable[[str, bool, list[str]], str], one: typing.Any,
          schema: dict | None, fresh: Callable[[str, list[str]], str | None], hot_from_start: bool) -> list[str]:
    """`have` completed towards `need`, one request per new value, each aside with another seed (with the same
    words and seed even a hot request sends the same answer); after a repeat, hotter and told what it repeated."""
    have, said, hot = list(have), "", hot_from_start
    for tries in range(2 * need):
        if len(have) >= need:
            break
        try:
            reply = draft.session.ask_aside(ask(said, hot, have), one, max_tokens=120,
                                            temperature=REPEAT_TEMPERATURE if hot else None, reseed=tries,
                                            schema=schema)
        except (ReplyError, ValidationError) as exc:
            draft.say("completing", f"unusable reply ({str(exc)[:80]})")
            break
        value = str(next(iter(reply.model_dump().values()))).strip()
        why = fresh(value, have)
        if why is None:
            have.append(value)
            said = ""
        else:
            said, hot = f"{value!r} {why}. ", True
    return have


def deepen(draft: Draft, problem: DomainProblem, done: set[str]) -> bool:
    """A graph too shallow for its family (no chain of three) deepened one link at a time: the item at the end of a
    longest chain is asked which later item it needs, among names that keep the graph acyclic. The model chooses
    the link; rewriting the items gives the same shallow graph back."""
    list_name = problem.path.removeprefix("domain.")
    domain = draft.domain
    found = next((key.split(".")[1] for key, ref in domain.REFERENCES.items() if key.split(".")[0] == list_name
                  and ref.later_only and ref.min_chain and ref.source.split(".")[0] == list_name), None)
    items = draft.items(list_name)
    if found is None or not items or any(p.value is None for p in items):
        return False
    wanted, key = domain.REFERENCES[f"{list_name}.{found}"].min_chain, domain.KEYS[list_name]
    names = [getattr(p.value, key) for p in items]
    for links in range(wanted):
        needs = {n: list(getattr(p.value, found)) for n, p in zip(names, items, strict=True)}
        ends = chain_ends(names, needs)
        if max(ends.values()) >= wanted:
            return links > 0  # deep enough from the start: the problem is another one
        open_ends = [n for n in sorted(names, key=lambda n: (-ends[n], names.index(n)))
                     if any(c not in needs[n] for c in names[names.index(n) + 1:])]
        if not open_ends:
            return False
        end = open_ends[0]
        piece = items[names.index(end)]
        options = [c for c in names[names.index(end) + 1:] if c not in needs[end]]
        above = next((a for a in names if end in needs[a]), None)
        context = f"`{above}` needs `{end}` in order to work. " if above else ""
        try:
            link = draft.session.ask(
                f"In this world, {context}Which one of these does `{end}` ({_identity(Node.at(piece.path, piece, ()))})"
                f" itself need in order to work: {', '.join(options)}? Answer as JSON {{\"needs\": ...}}.",
                create_model("Need", needs=(typing.Literal[tuple(options)], ...)), max_tokens=40).needs
            piece.value = piece.model.model_validate({**piece.value.model_dump(), found: [*needs[end], link]})
        except (ReplyError, ValidationError):
            return False
        draft.say("linked", f"{end} needs {link}")
    needs = {n: list(getattr(p.value, found)) for n, p in zip(names, items, strict=True)}
    return max(chain_ends(names, needs).values()) >= wanted


def chain_ends(names: list[str], needs: dict[str, list[str]]) -> dict[str, int]:
    """For each item of an ordered list whose references point only later, the length of the longest chain of
    references that ends at it (an item nothing refers to: 1)."""
    length: dict[str, int] = {}
    for name in names:
        length[name] = 1 + max((length[a] for a in names[:names.index(name)] if name in needs.get(a, [])),
                               default=0)
    return length


def drop_hopeless(draft: Draft, problems: list[DomainProblem]) -> bool:
    """An item of a keyed list still with two or more problems after a round of repairs is dropped where the list
    keeps more items than its schema needs, the draft has fewer problems without it and nothing else names its
    key: its repairs have failed once, and the domain does not need it. One a round and list."""
    dropped = False
    for name in draft.domain.KEYS:
        items = draft.items(name)
        if any(p.value is None for p in items):
            continue  # the draft's indices are not the plan's while an item is unwritten
        wrong = {p.path: sum(x.path == p.path or x.path.startswith((p.path + ".", p.path + "["))
                             for x in problems) for p in items}
        for path, count in wrong.items():
            draft.item_tries[path] = draft.item_tries.get(path, 0) + 1 if count else 0
        info = draft.domain.model_fields[name]
        needed = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
        hopeless = [p for p in items if wrong[p.path] >= 2 and draft.item_tries[p.path] >= 2]
        for piece in hopeless[:1]:
            if len(items) <= needed or _named_elsewhere(draft, piece) or not _fewer_without(draft, piece, problems):
                continue
            draft.item_tries.pop(piece.path, None)
            for old, new in _remove_item(draft, piece).items():
                draft.item_tries[new] = draft.item_tries.pop(old, 0)
            draft.say("dropped", f"{piece.path.removeprefix('domain.')} ({wrong[piece.path]} problems left after its "
                      "repairs; the list keeps enough without it)")
            dropped = True
    return dropped


def _fewer_without(draft: Draft, piece: Piece, problems: list[DomainProblem]) -> bool:
    """Whether the draft without the item has fewer problems, none of them the list now too short (where the
    domain's own checks need as many items as there are, a new item would cost more than the repairs saved)."""
    pieces = draft.pieces
    draft.pieces = [p for p in pieces if p is not piece]
    try:
        without = draft.check()
        short = any(p.path == f"domain.{piece.field}" and p.code == Code.TOO_FEW for p in without)
        return not short and len(without) < len(problems)
    finally:
        draft.pieces = pieces


def _named_elsewhere(draft: Draft, piece: Piece) -> bool:
    quoted = json.dumps(getattr(piece.value, draft.domain.KEYS[piece.field], None))
    return any(other is not piece and not other.keys and other.value is not None
               and quoted in json.dumps(other.value.model_dump(mode="json")) for other in draft.pieces)


def _remove_item(draft: Draft, piece: Piece) -> dict[str, str]:
    """The item out of the plan, its key out of the keys, the items after it one index down (their turns in the
    conversation follow their new paths); their paths, old to new."""
    keys_piece = draft.keys_piece(piece.field)
    if keys_piece is not None:
        kept = [k for i, k in enumerate(keys_piece.value.items) if i != piece.index]
        keys_piece.model = resized(keys_piece.model, len(kept))
        keys_piece.value = keys_piece.model(items=kept)
    draft.pieces.remove(piece)
    moved: dict[str, str] = {}
    for other in draft.items(piece.field):
        if other.index > piece.index:
            old, other.index = other.path, other.index - 1
            other.path = f"domain.{other.field}[{other.index}]"
            moved[old] = other.path
    draft.session.turns = [(moved.get(key, key), ask, answer) for key, ask, answer in draft.session.turns
                           if key != piece.path]
    draft.session.order = [p.path for p in draft.pieces]
    return moved


# ---- the registry ---------------------------------------------------------------------------------------------
REPAIRS: tuple[Repair, ...] = (
    Repair("rename_key", "a key with a problem renamed everywhere it is used", rename_key),
    Repair("schema_default", "a name repeated within a record takes its field's default", schema_default),
    Repair("choose_defined", "a reference to nothing defined chosen among the defined", choose_defined),
    Repair("drop_surplus", "a repeated line, or a wrong record of an item's list, dropped where its list keeps "
           "what it needs", drop_surplus),
    Repair("complete_list", "a list of lines left short completed one new line at a time", complete_list),
    Repair("regenerate", "the smallest node that owns a problem asked for again alone", regenerate),
    Repair("deepen", "a graph too shallow deepened one link at a time, the model choosing", deepen),
)
# applied outside the per-problem order: before a round (drop_hopeless), as keys are written (distinct_keys)
ROUND_REPAIRS = {
    "drop_hopeless": "an item with problems left after its repairs dropped where the list can do without it",
    "distinct_keys": "a list of keys with repeats or numbered copies completed one new key at a time",
}


def fix(draft: Draft, problem: DomainProblem, done: set[str], off: frozenset[str] = frozenset()) -> bool:
    """Whether one of the repairs (those not switched `off`, in `REPAIRS`' order) fixed the problem."""
    return any(repair.fix(draft, problem, done) for repair in REPAIRS if repair.name not in off)


# ---- what the repairs share ---------------------------------------------------------------------------------------
def without_examples(description: str) -> str:
    """A field description without its quoted examples ("..., e.g. 'ERROR api-1 timed out'."): after a copy, the
    example is not shown again."""
    return _EXAMPLE.sub("", description).strip()


def _problems_at(draft: Draft, path: str) -> list[DomainProblem]:
    return [p for p in draft.check() if p.path == path or p.path.startswith((path + ".", path + "["))]


def _structural(draft: Draft, node: Node) -> bool:
    """A key, or a reference (or one of a list of them): renamed or chosen, never rewritten as text."""
    field = node.piece.field
    below = node.steps[-_below_item(node):] if _below_item(node) else ()
    if node.piece.keys:
        return True
    if node.piece.part is not None or not below or not isinstance(below[0], str):
        return False
    return (draft.domain.KEYS.get(field) == below[0] and len(below) == 1) or \
        f"{field}.{below[0]}" in draft.domain.REFERENCES


def _whole_list(draft: Draft, piece: Piece) -> bool:
    return piece.field is not None and typing.get_origin(draft.domain.model_fields[piece.field].annotation) is list


def _below_item(node: Node) -> int:
    """How many steps the node is below its item (or its record of the domain): an item of a list written whole is
    `items[i]` of its piece."""
    return len(node.steps) - (2 if node.steps[:1] == ("items",) and node.piece.part is None else 0)


def _nested(node: Node) -> bool:
    """A field of a record inside an item (`faults[0].constraint.fix`, `faults[2].metrics[1].healthy`)."""
    parent = node.parent
    return parent is not None and parent.is_record and node.line is None and _below_item(parent) > 0


def _short(node: Node) -> bool:
    return node.info is not None and node.line is None and (
        any(getattr(m, "pattern", None) for m in node.info.metadata)
        or any(getattr(m, "max_length", 999) <= 60 for m in node.info.metadata))


def _short_name(node: Node) -> bool:
    """A name, not prose: a name field (`name`, `id`...) or an identifier (a field with a pattern)."""
    return node.is_text and _short(node) and (node.name in _NAMES
                                              or any(getattr(m, "pattern", None) for m in node.info.metadata))


def _alike(draft: Draft, node: Node) -> list[str]:
    """The values its siblings give the same field: the other items' (a note's), the other records' of its list."""
    if node.line is not None:
        return [v for v in node.siblings() if isinstance(v, str)]
    parent = node.parent
    if parent is not None and parent.line is not None and parent.parent is not None:  # a record of a list
        return [r.get(node.name) for i, r in enumerate(parent.parent.value) if i != parent.line
                and isinstance(r, dict) and isinstance(r.get(node.name), str)]
    if node.piece.index is not None and len(node.steps) == 1:  # a field of an item
        return [getattr(p.value, node.name) for p in draft.items(node.piece.field) if p is not node.piece
                and p.value is not None and isinstance(getattr(p.value, node.name, None), str)]
    return []


def _identity(node: Node) -> str:
    """What tells an item from its siblings: its short fields (its key, its fix, its kind), as JSON, without the
    one being rewritten (shown what it copied, a small model writes it back)."""
    data = node.piece.value.model_dump(mode="json")
    if node.steps[:1] == ("items",) and len(node.steps) > 1:
        data = data["items"][node.steps[1]]
    short = {k: v for k, v in data.items() if isinstance(v, str | int | float) and len(str(v)) < 40
             and not (len(node.steps) == 1 and k == node.name)}
    return json.dumps(short, ensure_ascii=False)


def _guide(draft: Draft, node: Node, wrong: list[DomainProblem]) -> str:
    if node.steps == ("items", node.line) and node.piece.field is not None:  # a line of a list written whole
        guide = piece_description(draft.domain, node.piece, draft.pieces)
    else:
        guide = node.info.description or "" if node.info is not None else ""
    if any(p.code in FROM_DESCRIPTION for p in wrong):
        return without_examples(guide)
    # told it repeats the description's words and shown them again as what it must be, a small model writes them
    # back ("A staff member starts late, with {staff} ..." for "Why a staff member starts late, with ..."): the
    # description's example alone shows the form
    return (examples_only(guide) or guide) if any(p.code == Code.SCHEMA_ECHO for p in wrong) else guide



def _kind(node: Node | None) -> str | None:
    """The `kind` of the record a text belongs to, where its placeholders depend on it."""
    while node is not None and not node.is_record:
        node = node.parent
    kind = node.value.get("kind") if node is not None else None
    return kind if isinstance(kind, str) else None


def _tidied(draft: Draft, data: dict, where: tuple | None, line: str) -> str:
    """One line as the domain's tidy leaves it in the draft ('api-1 ... api-2' -> '{component} ... {dependency}'):
    of a top-level list, or of list `attr` of item `index`; no family tidies a record's lines."""
    if where is None:
        return line
    field_name, index, attr = where
    if index is None:
        tidied = draft.domain.tidy({**data, field_name: [line]}).get(field_name)
    else:
        items = list(data.get(field_name) or [])
        if index >= len(items) or not isinstance(items[index], dict):
            return line
        items[index] = {**items[index], attr: [line]}
        tidied = draft.domain.tidy({**data, field_name: items})[field_name][index].get(attr)
    return tidied[0] if isinstance(tidied, list) and len(tidied) == 1 and isinstance(tidied[0], str) else line
