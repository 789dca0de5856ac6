"""Records nested in an item: a record's name asked for alone, a wrong record (`faults[0].constraint`) asked
for alone, and a short field that stays wrong chosen among three."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable

from pydantic import BaseModel, Field, ValidationError, create_model

from openadapt.designer.copying import NAME_FIELDS, is_copy, unquoted
from openadapt.designer.pieces import bounded, field_guide, is_model, list_item_model, max_tokens_for
from openadapt.designer.placeholders import with_placeholders
from openadapt.designer.repairs.common import REPEAT_TEMPERATURE, RepairBase, identity, without_examples
from openadapt.families.domain import FROM_DESCRIPTION, FROM_EXAMPLE, Code, DomainProblem, extends
from openadapt.llm.chat import ReplyError

# A name that is not this item's own (another item's, another line's, words of the schema or of the feedback): a
# new one is chosen for it.
RENAMED_FOR = frozenset({Code.DUPLICATE_NAME, Code.REPEATED_LINE, Code.SCHEMA_ECHO, Code.FEEDBACK_ECHO})

class RecordRepairs(RepairBase):
    def _rename_nested(self, problem: DomainProblem) -> bool:
        """The name of a record in an item's list (`faults[0].metrics[1].name`) that repeats another's or copies
        the worked example is asked for alone, aside, under the name field's own pattern, different from its
        siblings' names: a small model rewriting the whole item repeats the name again."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)\[(\d+)\]\.(name|id)$", problem.path)
        if not match or not (problem.code == Code.DUPLICATE_NAME or problem.code in FROM_EXAMPLE):
            return False
        piece = next((p for p in self._pieces if p.field == match.group(1) and p.index == int(match.group(2))
                      and p.value is not None), None)
        records = getattr(piece.value, match.group(3), None) if piece is not None else None
        k, key = int(match.group(4)), match.group(5)
        if not isinstance(records, list) or k >= len(records) or not hasattr(records[k], key):
            return False
        record = records[k]
        others = [getattr(r, key) for i, r in enumerate(records) if i != k]
        one = create_model("OneName", name=(str, type(record).model_fields[key]))
        said = ""
        try:
            for tries in range(2):  # once more, hotter and with another seed, if it names one that is taken
                new = self._session.ask_aside(
                    f"{self._world_so_far()}{said}In `{piece.path}` ({identity(piece)}), the `{match.group(3)}` "
                    f"entry {record.model_dump_json()} needs another `{key}`: {problem.message}. Write one as JSON "
                    f"{{\"{key}\": ...}}: another {match.group(3).rstrip('s')} than every one of "
                    f"{json.dumps([*others, getattr(record, key)])}.", one, max_tokens=60, reseed=tries,
                    schema=bounded(one.model_json_schema()),
                    temperature=REPEAT_TEMPERATURE if tries else None).name.strip()
                if new not in others and new != getattr(record, key):
                    break
                said = f"{new!r} is taken. "
            else:
                return False
            data = piece.value.model_dump()
            data[match.group(3)][k][key] = new
            piece.value = piece.model.model_validate(data)
        except (ReplyError, ValidationError):
            return False
        self.progress("renamed", self._attempt, f"{problem.path.removeprefix('domain.')} -> {new}")
        return True

    def _choose_defined(self, problem: DomainProblem, done: set[str]) -> bool:
        """A reference inside an item to something the domain does not define (`items[1].location`,
        `suppliers[2].offers[0].item`), or a list of them (`scenarios[0].escalate_categories`), is chosen again
        among those defined, the grammar holding it to them: rewriting the whole item leaves a small model's
        made-up references as they were, or makes more."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)(?:\[(\d+)\])?(?:\.(\w+))?$", problem.path)
        if not match or problem.code != Code.UNKNOWN_REFERENCE or not problem.choices:
            return False
        i = int(match.group(2))
        piece, whole = self._holder_of(match.group(1), i)
        if piece is None:
            return False
        name, k, sub = match.group(3), match.group(4), match.group(5)
        data = piece.value.model_dump()
        item = data["items"][i] if whole and i < len(data["items"]) else None if whole else data
        if not isinstance(item, dict):
            return False
        holder, key = item, name  # where the wrong value sits: item[name], item[name][k][sub]
        if sub is not None:
            records = item.get(name)
            if k is None or not isinstance(records, list) or int(k) >= len(records) or not isinstance(records[int(k)],
                                                                                                        dict):
                return False
            holder, key = records[int(k)], sub
        value = holder.get(key)
        many = isinstance(value, list)
        if not (isinstance(value, str) or (many and sub is None and k is not None
                                           and all(isinstance(v, str) for v in value))):
            return False
        at = f"domain.{match.group(1)}[{i}].{name}" if many else problem.path
        if at in done:  # one request per reference (per list of them) and round
            return True
        done.add(at)
        choices = known = list(problem.choices)
        if sub is not None:  # not what its siblings name (a supplier offers an item once)
            taken = {r.get(sub) for j, r in enumerate(records) if j != int(k) and isinstance(r, dict)}
            choices = [c for c in choices if c not in taken] or choices
        if many:  # not what the item's other lists of such names hold (a scenario escalates or defers a category)
            used = {v for f, other in holder.items() if f != key and isinstance(other, list) for v in other
                    if isinstance(v, str)}
            choices = [c for c in choices if c not in used] or choices
            owner_model = list_item_model(piece.model.model_fields["items"].annotation) if whole else piece.model
            info = owner_model.model_fields[name]
            least = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
            # as many as it named (asked for up to the schema's most, a small model lists the first that many)
            most = min(len(choices), max(least, len(value)), next(
                (m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), len(choices)))
            if least > most:
                return False
            wrong = [v for v in value if v not in known]
            answer = {"type": "array", "items": {"type": "string", "enum": choices}, "minItems": least,
                      "maxItems": most}
            ask = (f"`{at}` names values that are not defined: {json.dumps(wrong)}. Choose its `{name}` "
                   f"again among the defined ones, {json.dumps(choices)}, as JSON {{\"items\": [...]}}. `{name}`: "
                   f"{info.description or ''}")
            room, model = 20 + 12 * most, create_model("Chosen", items=(list[str], ...))
        else:
            answer = {"type": "string", "enum": choices}
            ask = (f"`{problem.path}` is {value!r}, which this world does not define. Choose the one it means among "
                   f"{json.dumps(choices)}, as JSON {{\"items\": ...}}.")
            room, model = 40, create_model("Chosen", items=(str, ...))
        schema = {"type": "object", "title": "Chosen", "required": ["items"], "properties": {"items": answer}}
        before = piece.value
        try:
            short = {f: v for f, v in item.items() if isinstance(v, str | int | float) and len(str(v)) < 40}
            said = f"`domain.{match.group(1)}[{i}]` ({json.dumps(short, ensure_ascii=False)})"
            items = self._session.ask_aside(f"{self._world_so_far()}In {said}: {ask}",
                                            model, max_tokens=room, schema=schema).items
            holder[key] = list(dict.fromkeys(items)) if many else items
            piece.value = piece.model.model_validate(data)
        except (ReplyError, ValidationError):
            piece.value = before
            return False
        if any(p.path.startswith(at) and p.code == Code.UNKNOWN_REFERENCE for p in self._check()):
            piece.value = before
            return False
        shown = ", ".join(holder[key]) if many else holder[key]
        self.progress("chose", self._attempt, f"{at.removeprefix('domain.')}: {shown}")
        return True

    def _rename_listed(self, problem: DomainProblem, done: set[str]) -> bool:
        """The name of an item that is no key (`victim_metrics[0].name`), copied from the worked example or
        repeating another, and still wrong once asked for alone (`_reword`), is chosen among three new names the
        model gives at once, hotter, under the field's own pattern: the first that clears the problem is kept."""
        match = re.match(rf"^domain\.(\w+)\[(\d+)\]\.({NAME_FIELDS})$", problem.path)
        if not match or not (is_copy(problem) or problem.code in RENAMED_FOR):
            return False
        i, key = int(match.group(2)), match.group(3)
        if self._family.domain.KEYS.get(match.group(1)) == key:
            return False  # a key: renamed everywhere it is used (`_rename_if_key`)
        piece, whole = self._holder_of(match.group(1), i)
        item = None if whole else piece
        if piece is None or problem.path in done:
            return piece is not None
        done.add(problem.path)
        data = piece.value.model_dump()
        records = [data] if item else data["items"]
        i = 0 if item else i
        record_model = piece.model if item else list_item_model(piece.model.model_fields["items"].annotation)
        if record_model is None or i >= len(records) or key not in record_model.model_fields:
            return False
        info = record_model.model_fields[key]
        siblings = [p.value.model_dump() for p in self._pieces if item and p.field == item.field and p is not item
                    and p.index is not None and not p.keys and p.value is not None]
        old, taken = records[i][key], [r[key] for j, r in enumerate(records + siblings) if j != i and key in r]
        if any(other is not piece and other.value is not None and json.dumps(old) in other.value.model_dump_json()
               for other in self._pieces):
            return False  # named elsewhere: renamed here alone, a reference would dangle
        shown = {f: v for f, v in records[i].items() if f != key and isinstance(v, str | int | float)}
        values = self._three_values(
            f"`{problem.path}` is wrong: {unquoted(problem, False)}. The record: "
            f"{json.dumps(shown, ensure_ascii=False)}. Name three other values for its `{key}` as JSON "
            f"{{\"values\": [...]}}, each another than every one of {json.dumps([old, *taken])}. `{key}`: "
            f"{without_examples(info.description or '')}", info, old)
        if values is None:
            return False
        before = piece.value
        for new in values:
            if new == old or new in taken:
                continue
            records[i][key] = new
            try:
                piece.value = piece.model.model_validate(data)
            except ValidationError:
                continue
            if not any(p.path == problem.path for p in self._check()):
                self.progress("chose", self._attempt, f"{problem.path.removeprefix('domain.')}: {old!r} -> {new!r}")
                return True
        piece.value = before
        return False

    def _rename_in_record(self, problem: DomainProblem, done: set[str]) -> bool:
        """An identifier of a record of the domain (`header.date_field`, `record_table.id_column`) copied from the
        worked example or clashing with another name is chosen among three values (`_other_value`), not the
        whole record written again: rewritten whole, a record keeps the copied identifier."""
        match = re.match(r"^domain\.(\w+)\.(\w+)$", problem.path)
        if not match or not (is_copy(problem) or problem.code in (Code.DUPLICATE_NAME, Code.NAME_CLASH)):
            return False
        piece = next((p for p in self._pieces if p.path == f"domain.{match.group(1)}" and not p.keys
                      and p.part is None and p.value is not None), None)
        field = match.group(2)
        if piece is None or field not in piece.model.model_fields or problem.path in done:
            return piece is not None and problem.path in done
        info = piece.model.model_fields[field]
        if not any(getattr(m, "pattern", None) for m in info.metadata):
            return False  # identifiers only: a text is asked for again aside (`_rewrite_text`)
        done.add(problem.path)

        def put(value: typing.Any) -> None:
            piece.value = value

        if self._other_value(piece.path, piece.value, field, [unquoted(problem, False)], put):
            return True
        done.discard(problem.path)  # none of the three clears it: the later repairs may still take it
        return False

    def _holder_of(self, field: str, index: int) -> tuple[typing.Any, bool]:
        """The piece that holds item `index` of the list `field`, and whether it is the whole list written as one
        piece (then the item is `value.items[index]`); (None, False) when neither is written."""
        item = next((p for p in self._pieces if p.field == field and p.index == index and not p.keys
                     and p.value is not None), None)
        if item is not None:
            return item, False
        whole = next((p for p in self._pieces if p.field == field and p.index is None and not p.keys
                      and p.value is not None and "items" in p.model.model_fields), None)
        return whole, whole is not None

    def _three_values(self, instruction: str, info: typing.Any, old: str) -> list[str] | None:
        """Three values for a short field at once, aside and hotter, each under the field's own bounds and pattern
        (of three, one is likely another than the one a small model keeps writing), without repeats and with names
        of their own before `old` with words added ('cases_received_today', which the copy check passes); None if
        no usable answer."""
        three = create_model("ThreeValues", values=(list[typing.Annotated[str, *info.metadata]],
                                                    Field(min_length=3, max_length=3)))
        try:
            values = self._session.ask_aside(f"{self._world_so_far()}{instruction}", three, max_tokens=120,
                                             schema=bounded(three.model_json_schema()),
                                             temperature=REPEAT_TEMPERATURE).values
        except (ReplyError, ValidationError):
            return None
        return sorted(dict.fromkeys(v.strip() for v in values), key=lambda v: extends(v, old))

    def _drop_surplus(self, problem: DomainProblem) -> bool:
        """A record of an item's list that is wrong as a whole (`faults[0].metrics[3]`: healthy and faulty values
        equal) is dropped where the list has more records than its schema needs: nothing is lost, and no request
        is spent (asked for again, such a record tends to come back the same). So is a line of such a list that
        still copies an example after a round asked for it again."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)\[(\d+)\]$", problem.path)
        if not match or problem not in self._check():
            return False  # not of this form, or a record dropped before it moved this one
        piece = next((p for p in self._pieces if p.field == match.group(1) and p.index == int(match.group(2))
                      and p.value is not None), None)
        name, k = match.group(3), int(match.group(4))
        records = getattr(piece.value, name, None) if piece is not None else None
        if not isinstance(records, list) or k >= len(records) or not (
                isinstance(records[k], BaseModel) or (isinstance(records[k], str) and is_copy(problem)
                                                      and self._rounds_seen.get(str(problem), 0) >= 2)):
            return False  # lines and references have repairs of their own, but for a copy
        needed = next((m.min_length for m in piece.model.model_fields[name].metadata
                       if getattr(m, "min_length", None) is not None), 0)
        if len(records) <= needed:
            return False
        data = piece.value.model_dump()
        del data[name][k]
        try:
            piece.value = piece.model.model_validate(data)
        except ValidationError:
            return False
        self.progress("dropped", self._attempt, f"{problem.path.removeprefix('domain.')} ({problem.message})")
        return True

    def _rewrite_part(self, problem: DomainProblem, done: set[str]) -> bool:
        """A problem inside a record nested in a list item (`faults[0].constraint.fix`), or with one record of a
        list inside it (`faults[2].metrics[1]`, a reading whose healthy and faulty values are equal), is fixed by
        asking for that record alone, with the problems and the item as it stands: rewriting the whole item costs every
        field again, and a small model repeats the mistake there (a constraint whose fix is the usual fix). A
        record copied from the worked example is asked for aside (in the example's sight, it is copied back)."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)(?:\[(\d+)\])?(?:\.|$)", problem.path)
        piece = next((p for p in self._pieces if match and p.field == match.group(1)
                      and p.index == int(match.group(2)) and p.value is not None), None)
        name = match.group(3) if match else ""
        info = piece.model.model_fields.get(name) if piece is not None else None
        k = None if not match or match.group(4) is None else int(match.group(4))
        part = info and (info.annotation if k is None else list_item_model(info.annotation))
        if not is_model(part) or (k is not None and k >= len(getattr(piece.value, name))):
            return False
        at = f"{piece.path}.{name}" + ("" if k is None else f"[{k}]")
        if at in done:  # one request per record and round, with all of its problems
            return True
        done.add(at)
        problems = [p for p in self._check() if p.path.startswith((at + ".", at + "[")) or p.path == at]
        described = any(p.code in FROM_DESCRIPTION for p in problems)
        guide = field_guide(part.model_fields)
        if described:  # the example it copied is not shown again
            guide = "\n".join(without_examples(line) for line in guide.splitlines())
        item = piece.value.model_dump(mode="json")
        # A record of a list (a fault's reading) is shown with its siblings; a record field with the item's rest.
        rest = item if k is not None else {key: v for key, v in item.items() if key != name}
        instruction = (f"`{at}` has problems:\n" + "\n".join(f"- {unquoted(p)}" for p in problems[:6]) +
                       f"\n`{piece.path}` as it stands: {json.dumps(rest, ensure_ascii=False)}\n"
                       f"Write `{at}` again as JSON, fixing every problem.\nFields:\n{guide}")
        room = max(200, max_tokens_for(piece, self._example) // (2 if k is None else 4))
        schema = with_placeholders(bounded(part.model_json_schema()), self._family, at)

        def put(value: typing.Any) -> None:
            data = piece.value.model_dump()
            if k is None:
                data[name] = value.model_dump()
            else:
                data[name][k] = value.model_dump()
            piece.value = piece.model.model_validate(data)

        try:
            if described or any(p.code in FROM_EXAMPLE for p in problems):
                value = self._session.ask_aside(f"{self._world_so_far()}{instruction}", part, max_tokens=room,
                                                schema=schema)
            else:
                value = self._session.ask(instruction, part, max_tokens=room, schema=schema)
            put(value)
            still = [p for p in self._check() if p.path.startswith((at + ".", at + "[")) or p.path == at]
            if still and set(still) & set(problems):
                # The same mistake again: once more, aside and hotter, shown what it wrote unless that was a copy
                # (shown a copy, a small model writes it back)
                copy = described or any(p.code in FROM_EXAMPLE for p in still)
                wrote = "" if copy else f" as {value.model_dump_json()}"
                value = self._session.ask_aside(
                    f"{self._world_so_far()}You wrote `{at}`{wrote}, and it still has problems:\n" +
                    "\n".join(f"- {unquoted(p)}" for p in still[:6]) + f"\n{instruction}", part,
                    max_tokens=room, temperature=REPEAT_TEMPERATURE, schema=schema)
                put(value)
                still = [p for p in self._check() if p.path.startswith((at + ".", at + "[")) or p.path == at]
                fields = {p.path.removeprefix(at + ".") for p in still}
                if len(fields) == 1 and (field := fields.pop()) in part.model_fields:
                    self._other_value(at, value, field, [p.message for p in still], put)
        except (ReplyError, ValidationError):
            return False
        self.progress("rewrote", self._attempt, at.removeprefix("domain."))
        return True

    def _other_value(self, at: str, record: typing.Any, field: str, wrong: list[str],
                     put: Callable[[typing.Any], None]) -> bool:
        """A short field of a record that stays wrong however the record is asked for (a constraint whose fix is
        the usual fix, asked for alone, then again hotter) is chosen among three values the model names at once:
        of three, one is likely another than the one it keeps writing. The first that clears the problem is
        kept, and where the record's texts name the old value they name the new one (a note's '(fix)')."""
        info = type(record).model_fields[field]
        if info.annotation is not str or not any(getattr(m, "max_length", 999) <= 60 for m in info.metadata):
            return False
        old = getattr(record, field)
        values = self._three_values(
            f"`{at}` is {record.model_dump_json()}. Its `{field}` stays wrong: {'; '.join(wrong[:3])}. Name three "
            f"other values for `{field}` as JSON {{\"values\": [...]}}, each another than {old!r}. `{field}`: "
            f"{info.description or ''}", info, old)
        if values is None:
            return False
        data = record.model_dump()
        for new in values:
            if new == old:
                continue
            named = {k: v.replace(f"({old})", f"({new})") if isinstance(v, str) else v for k, v in data.items()}
            put(type(record).model_validate({**named, field: new}))
            if not any(p.path == f"{at}.{field}" for p in self._check()):
                self.progress("chose", self._attempt, f"{at.removeprefix('domain.')}.{field}: {old!r} -> {new!r}")
                return True
        put(record)
        return False
