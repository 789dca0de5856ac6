"""Keys (component names, fault ids): a bad one renamed everywhere it is used; repeats and numbered copies
completed one new key at a time."""

from __future__ import annotations

import json
import re

from pydantic import ValidationError, create_model

from openadapt.designer.pieces import Piece, list_item_model, replace_value, resized
from openadapt.designer.repairs.common import REPEAT_TEMPERATURE, RepairBase
from openadapt.families.domain import Code, DomainProblem, extends, key_base, numbered_copies
from openadapt.llm.chat import ReplyError


class KeyRepairs(RepairBase):
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
        if problem.value is not None and key_base(problem.value) != key_base(old):
            return True  # renamed since the check (a key with two problems): the next round's check sees it anew
        single = create_model("NewKey", name=(keys_piece.model.model_fields["items"].annotation.__args__[0], ...))
        taken = ", ".join(keys_piece.value.items)
        keys = keys_piece.value.items
        # A key given to several items (a small model's one name for five faults) is renamed for this item alone;
        # a key of its own is renamed everywhere it is used (the item and every reference to it).
        shared = keys.count(old) > 1
        copy = shared or problem.code in (Code.NUMBERED_COPY, Code.COPIED, Code.DESCRIBED)
        said = ""
        for tries in range(2):  # once more, hotter and reseeded, when the answer is taken or the old one numbered
            ask = (f"{said}The name {old!r} of `{list_name}` item {index + 1} is wrong: {problem.message}. Write a "
                   f"new one as JSON {{\"name\": ...}}, different from: {taken}.")
            try:
                new = (self._session.ask(ask, single, max_tokens=60) if not tries else self._session.ask_aside(
                    f"{self._world_so_far()}{ask}", single, max_tokens=60, temperature=REPEAT_TEMPERATURE,
                    reseed=tries)).name
            except (ReplyError, ValidationError):
                return False
            # The old name numbered ('rate_hawk2') is refused twice; with words added ('weekly_rate_hawk') once,
            # then kept, which the check passes.
            copied = extends(new, old) if not tries else key_base(new) == key_base(old)
            if new.lower() not in {k.lower() for k in keys} and not (copy and copied):
                break
            said = f"{new!r} is taken, or the old name numbered or with words added. "
        else:
            return False
        keys_piece.value = keys_piece.model(items=[new if (i == index if shared else k == old) else k
                                                   for i, k in enumerate(keys)])
        item = [p for p in self._pieces if p.field == list_name and p.index == index]
        for piece in item if shared else self._pieces:
            if piece.value is not None and not piece.keys:
                renamed = replace_value(piece.value, old, new)
                try:
                    piece.value = type(piece.value).model_validate(renamed)
                except ValidationError:  # the new name breaks this piece's own bounds: it is written again
                    piece.value = None
        self.progress("renamed", self._attempt, f"{list_name} {old!r} -> {new!r}")
        return True

    def _distinct_keys(self, piece: Piece) -> bool:
        """A list of keys with repeats, or mostly numbered copies of one name where the domain wants varied keys
        ('unit-1' .. 'unit-6'), keeps its distinct keys (and the first half of the copies) and is completed one new
        key at a time, each different from those it has and no numbered copy of a repeated one: asked for the whole
        list again, a small model sends the same repeats back, and asked to rename one, it numbers it. Each is
        sampled hotter (REPEAT_TEMPERATURE): the model has repeated itself."""
        keys = list(piece.value.items)
        copies = set(numbered_copies(keys)) if piece.field in self._family.domain.VARIED_KEYS else set()
        kept: list[str] = []
        for i, key in enumerate(keys):
            if i not in copies and key.lower() not in {k.lower() for k in kept}:
                kept.append(key)
        repeated_bases = {key_base(k) for k in keys if [x.lower() for x in keys].count(k.lower()) > 1}
        repeated_bases |= {key_base(keys[i]) for i in copies}
        key_type = piece.model.model_fields["items"].annotation.__args__[0]
        one = create_model("OneKey", name=(key_type, ...))
        key_name = self._family.domain.KEYS[piece.field]
        item = list_item_model(self._family.domain.model_fields[piece.field].annotation)
        guide = item.model_fields[key_name].description or ""
        said = ""
        for tries in range(2 * len(keys)):
            if len(kept) >= len(keys):
                break
            try:
                new = self._session.ask_aside(
                    f"{self._world_so_far()}{said}Name one more of the `{piece.field}` of this world: its "
                    f"`{key_name}` as JSON {{\"name\": ...}}, another one than every one of {json.dumps(kept)}, "
                    f"not a numbered copy of one. Each `{key_name}`: {guide}", one, max_tokens=60,
                    temperature=REPEAT_TEMPERATURE, reseed=tries).name
            except (ReplyError, ValidationError):
                return False
            if new.lower() in {k.lower() for k in kept} or key_base(new) in repeated_bases:
                said = f"{new!r} is taken. "
            else:
                kept.append(new)
                said = ""
        if len(kept) < len(keys):
            return False
        piece.value = piece.model(items=kept)
        self.progress("named", self._attempt, f"{piece.path}: {', '.join(kept)}")
        return True

    def _default_name(self, problem: DomainProblem) -> bool:
        """A name repeated within a record (`names_differ`: the five tool names all 'submit_diagnosis') takes
        its field's default where the schema has one no other field of the record uses: no request (one per field
        is too slow). The first of the repeats keeps the name, unless every field had it (then it was never this
        field's name either)."""
        match = re.match(r"^domain\.(\w+)\.(\w+)$", problem.path)
        if not match or problem.code != Code.NAME_CLASH:
            return False
        name, field = match.groups()
        piece = next((p for p in self._pieces if p.field == name and p.index is None and not p.keys
                      and p.value is not None and field in p.model.model_fields), None)
        if piece is None:
            return False
        data = piece.value.model_dump()
        fields = piece.model.model_fields
        repeated = data[field]
        if problem.value is not None and problem.value != repeated:
            return True  # renamed since the check, with an earlier field's repeat
        holders = [f for f, v in data.items() if v == repeated]
        renamed = holders if len(holders) == len(data) else [f for f in holders if f != holders[0]]
        for f in renamed:
            default = fields[f].get_default()
            if isinstance(default, str) and default not in data.values():
                data[f] = default
        if data[field] == repeated:
            return False
        try:
            piece.value = piece.model.model_validate(data)
        except ValidationError:
            return False
        changed = ", ".join(f"{f} -> {data[f]}" for f in renamed if data[f] != repeated)
        self.progress("renamed", self._attempt, f"{name}: {changed}")
        return True

    def _drop_hopeless_items(self, problems: list[DomainProblem], tries: dict[str, int]) -> bool:
        """An item of a keyed list that still has two or more problems after a round of repairs was given to it
        is dropped, where the list keeps more items than its schema needs, the draft has fewer problems without it
        and nothing else names its key: its repairs have failed once, and the rest of the domain does not need it.
        `tries` counts, per item, the rounds that found it wrong (kept by the caller across rounds)."""
        dropped = False
        for name in self._family.domain.KEYS:
            items = [p for p in self._pieces if p.field == name and p.index is not None and not p.keys]
            if any(p.value is None for p in items):
                continue  # the draft's indices are not the plan's while an item is unwritten
            wrong = {p.path: sum(x.path == p.path or x.path.startswith((p.path + ".", p.path + "["))
                                 for x in problems) for p in items}
            for path, count in wrong.items():
                tries[path] = tries.get(path, 0) + 1 if count else 0
            info = self._family.domain.model_fields[name]
            needed = next((m.min_length for m in info.metadata if getattr(m, "min_length", None) is not None), 1)
            hopeless = [p for p in items if wrong[p.path] >= 2 and tries[p.path] >= 2]
            for piece in hopeless[:1]:  # one a round: the rest are judged again without it
                if len(items) <= needed or self._named_elsewhere(piece) or not self._fewer_without(piece, problems):
                    continue
                tries.pop(piece.path, None)
                moved = self._remove_item(piece)
                for old, new in moved.items():
                    tries[new] = tries.pop(old, 0)
                self.progress("dropped", self._attempt, f"{piece.path.removeprefix('domain.')} ({wrong[piece.path]} "
                              "problems left after its repairs; the list keeps enough without it)")
                dropped = True
        return dropped

    def _fewer_without(self, piece: Piece, problems: list[DomainProblem]) -> bool:
        """Whether the draft without the item has fewer problems, none of them the list now too short: not when
        the domain's own checks need as many items as there are (a report's three report types, a scheduling
        day's sites): the list then needs a new item, which costs more than the repairs saved."""
        pieces = self._pieces
        self._pieces = [p for p in pieces if p is not piece]
        try:
            without = self._check()
            short = any(p.path == f"domain.{piece.field}" and p.code == Code.TOO_FEW for p in without)
            return not short and len(without) < len(problems)
        finally:
            self._pieces = pieces

    def _named_elsewhere(self, piece: Piece) -> bool:
        key = self._family.domain.KEYS[piece.field]
        value = getattr(piece.value, key, None)
        quoted = json.dumps(value)
        return any(other is not piece and not other.keys and other.value is not None
                   and quoted in json.dumps(other.value.model_dump(mode="json")) for other in self._pieces)

    def _remove_item(self, piece: Piece) -> dict[str, str]:
        """The item out of the plan, its key out of the keys, the items after it one index down (their turns in
        the conversation follow their new paths); returns their paths, old to new."""
        keys_piece = next((p for p in self._pieces if p.keys and p.field == piece.field), None)
        if keys_piece is not None and keys_piece.value is not None:
            kept = [k for i, k in enumerate(keys_piece.value.items) if i != piece.index]
            keys_piece.model = resized(keys_piece.model, len(kept))
            keys_piece.value = keys_piece.model(items=kept)
        self._pieces.remove(piece)
        moved: dict[str, str] = {}
        for other in self._pieces:
            if other.field == piece.field and other.index is not None and other.index > piece.index:
                old = other.path
                other.index -= 1
                other.path = f"domain.{other.field}[{other.index}]"
                moved[old] = other.path
        self._session.turns = [(moved.get(key, key), ask, answer) for key, ask, answer in self._session.turns
                               if key != piece.path]
        self._session.order = [p.path for p in self._pieces]
        return moved
