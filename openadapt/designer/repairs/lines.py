"""Lists of lines left short (repeats dropped): completed one new line at a time."""

from __future__ import annotations

import json
import re
import typing

from pydantic import ValidationError, create_model

from openadapt.designer.pieces import bounded, piece_description, resized, spelled, unlevelled
from openadapt.designer.placeholders import with_placeholders
from openadapt.designer.repairs.common import REPEAT_TEMPERATURE, RepairBase, identity, without_examples
from openadapt.families.domain import Code, DomainProblem, is_debris, is_prose
from openadapt.llm.chat import ReplyError


class LineRepairs(RepairBase):
    def _top_up(self, problem: DomainProblem) -> bool:
        """A list of lines left too short (a small model writes one line several times; repeats are dropped) is
        completed one new line at a time, each different from those it has: asking for the whole list again
        gets the same repeats back. So is a list of lines inside an item (`faults[1].evidence`), asked for aside
        with the item's identity and different from the lines of every item, and a list of lines of a record of
        the domain (`messages.anchors`): rewriting the whole item or record brings the repeat back."""
        wanted = problem.minimum if problem.code == Code.TOO_FEW else None
        nested = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)$", problem.path)
        record = re.match(r"^(domain\.\w+)\.(\w+)$", problem.path)  # a list of a record (messages.anchors)
        record = record if record and any(p.path == record.group(1) and p.index is None and not p.keys
                                          for p in self._pieces) else None
        if nested:
            piece = next((p for p in self._pieces if p.field == nested.group(1) and p.index == int(nested.group(2))
                          and not p.keys and p.value is not None), None)
            at = nested.group(3)
        elif record:
            piece = next((p for p in self._pieces if p.path == record.group(1) and p.value is not None), None)
            at = record.group(2)
        else:
            piece = next((p for p in self._pieces if p.path == problem.path and p.index is None and not p.keys),
                         None)
            at = "items"
        items = getattr(piece.value, at, None) if piece is not None and piece.value is not None and wanted else None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            return False
        # Distinct as the draft has them, tidied: two lines that tidy to one, or differ only in their level, count
        # once (a line kept here that the draft then drops would leave the list short).
        lines, tidied, draft = [], set(), self._draft()
        # no family tidies a record's lines
        where = ((piece.field, piece.index, at) if nested
                 else None if record or piece.part else (piece.field, None, None))
        for item in items:
            if not is_debris(item) and (form := unlevelled(self._tidied(draft, *where, item) if where else item)) \
                    not in tidied:
                lines.append(item)
                tidied.add(form)
        info = piece.model.model_fields[at]
        if nested or record:  # as many as the domain needs; told apart from every item's lines
            need = enough = wanted
            guide = info.description or ""
            others = [line for p in self._pieces if p.field == piece.field and p.index is not None and p is not piece
                      and p.value is not None for line in getattr(p.value, at, [])] if nested else []
            whose = f"`{at}` of `{piece.path}`" + (f" ({identity(piece)})" if nested else "")
        else:  # as many as the piece asks for (it may ask for more than the domain's minimum), if they come
            need = max(wanted, piece.model.model_json_schema()["properties"]["items"].get("minItems", 0))
            enough = wanted
            guide = piece_description(self._family.domain, piece, self._pieces)
            others, whose = [], f"the domain's `{piece.path.removeprefix('domain.')}`"
        one = create_model("OneLine", line=(typing.get_args(info.annotation)[0], ...))
        schema = with_placeholders(bounded(one.model_json_schema()), self._family, f"{problem.path}[0]", "line")
        # After a repeat, the rest is sampled hotter (at 0.2 the model repeats again) and each request with another
        # seed: with the same words and seed, even a hot request sends the same line back.
        repeated, hot = "", False
        # a list of names is asked for a name: asked for "one more line", a small model answers the list's name
        kind = "line" if any(is_prose(line) for line in items) else "name"
        for tries in range(2 * need):
            if len(lines) >= need:
                break
            # as the model writes them: with the names its description shows, where the lines have placeholders
            shown = [spelled(self._family.domain, piece.field, self._pieces, line) for line in lines] + others
            world = self._world_so_far() if nested or record else ""
            try:
                # after a repeat, the description without its example, which a small model writes back
                line = self._session.ask_aside(
                    f"{world}{repeated}Write one more {kind} for {whose} "
                    f"({without_examples(guide) if hot else guide}) as JSON "
                    f"{{\"line\": ...}}, in this task's world and different from every one of: {json.dumps(shown)}",
                    one, max_tokens=120, temperature=REPEAT_TEMPERATURE if hot else None, reseed=tries,
                    schema=schema).line.strip()
            except (ReplyError, ValidationError) as exc:
                self.progress("completing", self._attempt, f"{problem.path}: unusable reply ({str(exc)[:80]})")
                return False
            if (line and (form := unlevelled(self._tidied(draft, *where, line) if where else line)) not in tidied
                    and not is_debris(line)
                    and line not in others):
                lines.append(line)
                tidied.add(form)
                repeated = ""
            else:  # said again, the same words would come back: the next request differs
                why = "is not a line of this world" if is_debris(line) else "is already there"
                repeated, hot = f"{line!r} {why}. ", True
        if len(lines) < enough:
            self.progress("completing", self._attempt, f"{problem.path}: {len(lines)} distinct lines, not the "
                          f"{enough} it needs (last answer: {repeated.strip()[:120] or 'none'})")
            return False
        try:
            if nested or record:
                piece.value = piece.model.model_validate({**piece.value.model_dump(), at: lines})
            else:  # the piece asked the model for `need`; it now holds as many as it has (the domain judges them)
                model = resized(piece.model, len(lines))
                piece.value, piece.model = model(items=lines), model
        except ValidationError as exc:  # a line the piece's bounds refuse: the list is rewritten instead
            self.progress("completing", self._attempt, f"{problem.path}: unusable lines ({str(exc)[:80]})")
            return False
        self.progress("completing", self._attempt, f"{problem.path.removeprefix('domain.')}: {len(lines)} lines")
        return True

    def _tidied(self, draft: dict, field_name: str, index: int | None, attr: str | None, line: str) -> str:
        """One line of a list as the domain's tidy leaves it in `draft` ('api-1 ... api-2' -> '{component}
        ... {dependency}'): of a top-level list, or of list `attr` of item `index`. The draft is built once per
        top-up, not once per line."""
        if index is None:
            tidied = self._family.domain.tidy({**draft, field_name: [line]}).get(field_name)
        else:
            items = list(draft.get(field_name) or [])
            if index >= len(items) or not isinstance(items[index], dict):
                return line
            items[index] = {**items[index], attr: [line]}
            tidied = self._family.domain.tidy({**draft, field_name: items})[field_name][index].get(attr)
        return tidied[0] if isinstance(tidied, list) and len(tidied) == 1 and isinstance(tidied[0], str) else line
