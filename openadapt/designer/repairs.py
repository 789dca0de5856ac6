"""The mechanical repairs of a draft domain, for what a small model gets wrong the same way each time it is asked
again: a copied key renamed everywhere, a short list completed line by line, a repeated text or log line
reworded on its own, a graph too shallow deepened link by link, a wrong nested record asked for alone. Each
returns True when it fixed its problem; the designer rewrites the owning piece otherwise."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable

from pydantic import Field, ValidationError, create_model

from openadapt.designer.chat import ReplyError
from openadapt.designer.pieces import (
    Piece,
    bounded,
    field_guide,
    is_model,
    list_item_model,
    max_tokens_for,
    named_description,
    replace_value,
    resized,
    spelled,
)
from openadapt.designer.session import Session
from openadapt.families.base import Family
from openadapt.families.domain import Domain, DomainProblem, is_debris, key_base, numbered_copies

REPEAT_TEMPERATURE = 0.9  # a line asked for again after the model repeated one


class PieceRepairs:
    """Mixed into `FamilyDomainDesigner`: these read and write its pieces through its session."""

    _session: Session
    _pieces: list[Piece]
    _family: Family
    _example: Domain
    _attempt: int
    progress: Callable[[str, int, str], None]
    _check: Callable[[], list[DomainProblem]]
    _draft: Callable[[], dict]
    _world_so_far: Callable[..., str]

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
        quoted = re.match(r"^'([^']*)'", problem.message)
        if quoted and key_base(quoted.group(1)) != key_base(old):
            return True  # renamed since the check (a key with two problems): the next round's check sees it anew
        single = create_model("NewKey", name=(keys_piece.model.model_fields["items"].annotation.__args__[0], ...))
        taken = ", ".join(keys_piece.value.items)
        try:
            new = self._session.ask(f"The name {old!r} of `{list_name}` item {index + 1} is wrong: {problem.message}."
                                    f" Write a new one as JSON {{\"name\": ...}}, different from: {taken}.",
                                    single, max_tokens=60).name
        except (ReplyError, ValidationError):
            return False
        keys = keys_piece.value.items
        # A key given to several items (a small model's 'pump_fails' five times) is renamed for this item alone;
        # a key of its own is renamed everywhere it is used (the item and every reference to it).
        shared = keys.count(old) > 1
        copy = shared or "numbered copies" in problem.message
        if new.lower() in {k.lower() for k in keys} or (copy and key_base(new) == key_base(old)):
            return False  # taken, or a numbered copy of the shared key ('pump_fails_2'): no new thing
        keys_piece.value = keys_piece.model(items=[new if (i == index if shared else k == old) else k
                                                   for i, k in enumerate(keys)])
        item = [p for p in self._pieces if p.field == list_name and p.index == index]
        for piece in item if shared else self._pieces:
            if piece.value is not None and not piece.keys:
                renamed = replace_value(piece.value.model_dump(), old, new)
                try:
                    piece.value = type(piece.value).model_validate(renamed)
                except ValidationError:  # the new name breaks this piece's own bounds: it is written again
                    piece.value = None
        self.progress("renamed", self._attempt, f"{list_name} {old!r} -> {new!r}")
        return True

    def _distinct_keys(self, piece: Piece) -> bool:
        """A list of keys with repeats (a small model names five faults 'pump_fails'), or mostly numbered copies of
        one name where the domain wants varied keys ('pump-1' .. 'pump-6'), keeps its distinct keys (and the first
        half of the copies) and is completed one new key at a time, each different from those it has and no
        numbered copy of a repeated one: asked for the whole list again, the model sent the same repeats back, and
        asked to rename one, it answered 'pump_fails_2'. Each is sampled hotter (REPEAT_TEMPERATURE): the model
        has repeated itself."""
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

    def _top_up(self, problem: DomainProblem) -> bool:
        """A list of lines left too short (a small model writes one line several times; repeats are dropped) is
        completed one new line at a time, each different from those it has: asking for the whole list again
        gets the same repeats back. So is a list of lines inside an item (`faults[1].evidence`, one line short
        once its repeat was dropped: run 20 rewrote the whole fault for it, and got the repeat back), asked for
        aside with the item's identity and different from the lines of every item."""
        wanted = re.search(r"at least (\d+) items", problem.message)
        nested = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)$", problem.path)
        if nested:
            piece = next((p for p in self._pieces if p.field == nested.group(1) and p.index == int(nested.group(2))
                          and not p.keys and p.value is not None), None)
            at = nested.group(3)
        else:
            piece = next((p for p in self._pieces if p.path == problem.path and p.index is None and not p.keys),
                         None)
            at = "items"
        items = getattr(piece.value, at, None) if piece is not None and piece.value is not None and wanted else None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            return False
        # Distinct as the draft has them, tidied: two lines that tidy to one count once.
        lines, tidied, draft = [], set(), self._draft()
        where = (piece.field, piece.index, at) if nested else (piece.field, None, None)
        for item in items:
            if not is_debris(item) and (form := self._tidied(draft, *where, item)) not in tidied:
                lines.append(item)
                tidied.add(form)
        info = piece.model.model_fields[at]
        if nested:  # as many as the domain needs; told apart from every item's lines, and from this item
            need = enough = int(wanted.group(1))
            guide = info.description or ""
            others = [line for p in self._pieces if p.field == piece.field and p.index is not None and p is not piece
                      and p.value is not None for line in getattr(p.value, at, [])]
            whose = f"`{at}` of `{piece.path}` ({_identity(piece)})"
        else:  # as many as the piece asks for (it may ask for more than the domain's minimum), if they come
            need = max(int(wanted.group(1)), piece.model.model_json_schema()["properties"]["items"].get("minItems", 0))
            enough = int(wanted.group(1))
            guide = named_description(self._family.domain, piece.field, self._pieces)
            others, whose = [], f"the domain's `{piece.field}`"
        one = create_model("OneLine", line=(typing.get_args(info.annotation)[0], ...))
        # After a repeat, the rest is sampled hotter (at 0.2 the model repeats again) and each request with another
        # seed: with the same words and seed, run 14's 1.5B sent one symptom line back four times at 0.9.
        repeated, hot = "", False
        for tries in range(2 * need):
            if len(lines) >= need:
                break
            # as the model writes them: with the names its description shows, where the lines have placeholders
            shown = [spelled(self._family.domain, piece.field, self._pieces, line) for line in lines] + others
            world = self._world_so_far() if nested else ""
            try:
                # after a repeat, the description without its example: run 15's 1.5B wrote the example back six
                # times ('ERROR pump-1 request to pump-2 timed out', already the first line)
                line = self._session.ask_aside(
                    f"{world}{repeated}Write one more line for {whose} "
                    f"({without_examples(guide) if hot else guide}) as JSON "
                    f"{{\"line\": ...}}, in this task's world and different from every one of: {json.dumps(shown)}",
                    one, max_tokens=120, temperature=REPEAT_TEMPERATURE if hot else None, reseed=tries).line.strip()
            except (ReplyError, ValidationError) as exc:
                self.progress("completing", self._attempt, f"{problem.path}: unusable reply ({str(exc)[:80]})")
                return False
            if (line and (form := self._tidied(draft, *where, line)) not in tidied and not is_debris(line)
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
            if nested:
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
        """One line of a list as the domain's tidy leaves it in `draft` ('pump-1 ... pump-2' -> '{component}
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

    def _rename_nested(self, problem: DomainProblem) -> bool:
        """The name of a record in an item's list (`faults[0].metrics[1].name`) that repeats another's or copies
        the worked example is asked for alone, aside, under the name field's own pattern, different from its
        siblings' names: rewriting the whole fault gave run 16's 1.5B four `water_pressure` readings again."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)\[(\d+)\]\.(name|id)$", problem.path)
        if not match or not ("is already used by" in problem.message or "worked example" in problem.message):
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
                    f"{self._world_so_far()}{said}In `{piece.path}` ({_identity(piece)}), the `{match.group(3)}` "
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

    def _reword(self, problem: DomainProblem) -> bool:
        """One text of a list item with a problem is asked for on its own, the rest of the item kept: a field
        (`faults[1].runbook`) or one line of a list (`faults[1].evidence[0]`).
        - repeated from a sibling (a small model copies the note or the log line it wrote before, and copies it
          again when the whole item is asked for): different from all the others, in the conversation;
        - copied from the worked example: the same, aside, out of the example's sight;
        - taking a phrase of the worked example over: the same, and kept only once it is its own;
        - any other problem (a log line without `{component}`): with the problem and the item as it stands, and
          kept only if the problem is gone (otherwise the item is rewritten whole).
        Keys and references are not free text: a rename or the item's rewrite fixes those."""
        match = re.match(r"^domain\.(\w+)\[(\d+)\]\.(\w+)(?:\[(\d+)\])?$", problem.path)
        if not match:
            return False
        list_name, name = match.group(1), match.group(3)
        domain = self._family.domain
        if domain.KEYS.get(list_name) == name or f"{list_name}.{name}" in domain.REFERENCES:
            return False
        copied = "copied from the worked example" in problem.message
        taken = "from the worked example" in problem.message and not copied  # a phrase of it, in other words
        repeated = "the same text appears" in problem.message
        piece = next((p for p in self._pieces if p.field == list_name and p.index == int(match.group(2))), None)
        line = None if match.group(4) is None else int(match.group(4))
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
        info = piece.model.model_fields[name]
        # a text field keeps its own bounds and pattern in the grammar (a reading's name is an identifier: asked
        # as free text, the answer could not go back into the item, which was then rewritten with the example
        # in sight and copied again)
        one = create_model("OneText", text=(str, info) if line is None and info.annotation is str else (str, ...))
        what = f"`{name}`" if line is None else f"line {line + 1} of `{name}`"
        what = f"{what[0].upper()}{what[1:]} of `{piece.path}`"
        must = piece.model.model_fields[name].description or ""
        if "in this field's description" in problem.message:  # the example it copied is not shown again
            must = without_examples(must)
        if copied or taken or repeated:
            wrong = ("is copied from the worked example of another world" if copied else "takes a phrase from the "
                     "worked example of another world" if taken else "repeats another item's")
            # never the copy itself: shown what it took, the 1.5B wrote it back
            shown = [t for t in dict.fromkeys(siblings) if not ((copied or taken) and t == current)]
            instruction = (f"{what} {wrong}. Write a new one for this item ({_identity(piece, name)}) as JSON "
                           f"{{\"text\": ...}}, in its own words, different from every one of: "
                           f"{json.dumps(shown)}. What it must be: {must}")
        else:
            instruction = (f"{what} has a problem: {problem.message}. It reads: {current!r}. The item as it stands: "
                           f"{piece.value.model_dump_json()}\nWrite it again as JSON {{\"text\": ...}}, fixing the "
                           f"problem. What it must be: {must}")
        before = piece.value
        try:
            if copied or taken:
                # Aside, and once more hotter if the answer is a line already there (the 1.5B often sends one of
                # the lines it was told to differ from); then the item is rewritten whole.
                said = ""
                for tries in range(2):
                    again = f"{said!r} is already there. " if said else ""
                    text = self._session.ask_aside(f"{self._world_so_far()}{again}{instruction}", one, max_tokens=160,
                                                   schema=bounded(one.model_json_schema()), reseed=tries,
                                                   temperature=REPEAT_TEMPERATURE if said else None).text.strip()
                    if text not in siblings:
                        break
                    said = text
            else:
                text = self._session.ask(instruction, one, max_tokens=160).text.strip()
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
        if not repeated and any(p.path == problem.path for p in self._check()):
            piece.value = before  # still wrong: the item is rewritten whole, with all its problems
            return False
        self.progress("reworded", self._attempt, problem.path.removeprefix("domain."))
        return True

    def _rewrite_text(self, problem: DomainProblem, done: set[str]) -> bool:
        """One text of the header (`alert`), one line of a list of lines (`symptom_lines[1]`), or a text or line
        of a record of the domain (`texts.demand_signals[2]`) with problems is asked for alone and aside (the
        task and the world so far, without the worked example), the rest kept, with every problem of that path
        at once (asked for one problem at a time, run 19's alert ended its last attempt with two: no
        `{component}`, and the worked example's '% of requests failing readiness'). An answer that leaves a
        problem is asked for once more, hotter and told what is still wrong; the answer with the fewest problems
        is kept (rewriting the whole header in the conversation gave the copied alert back three attempts
        running, and a rewritten list of lines came back as one line written three times)."""
        match = re.match(r"^domain\.(\w+)(?:\.(\w+))?(?:\[(\d+)\])?$", problem.path)
        if not match:
            return False
        name, sub, line = match.group(1), match.group(2), None if match.group(3) is None else int(match.group(3))
        own = [p for p in self._pieces if p.index is None and not p.keys and p.value is not None]
        if sub is not None:  # a field of a record of the domain (`texts`), a piece of its own
            if "from the worked example" in problem.message:
                return False  # the whole record is written again aside (`_write`): one request for all its copies
            piece = next((p for p in own if p.field == name and sub in p.model.model_fields), None)
            at, guide = sub, piece.model.model_fields[sub].description if piece is not None else ""
        elif line is None:  # a header field
            piece = next((p for p in own if p.field is None and name in p.model.model_fields), None)
            at, guide = name, piece.model.model_fields[name].description if piece is not None else ""
        else:  # a list of lines, a piece of its own
            piece = next((p for p in own if p.field == name and "items" in p.model.model_fields), None)
            at, guide = "items", named_description(self._family.domain, name, self._pieces)
        if piece is None:
            return False
        value = getattr(piece.value, at, None)
        if line is not None:
            if not isinstance(value, list) or line >= len(value) or not all(isinstance(i, str) for i in value):
                return False
            current, others = value[line], [v for j, v in enumerate(value) if j != line]
        else:
            current, others = value, []
        if not isinstance(current, str):
            return False
        label = problem.path.removeprefix("domain.")
        what = f"`{label}`" if line is None else f"Line {line + 1} of `{label.rsplit('[', 1)[0]}`"
        if problem.path in done:  # one request per text and round, with all of its problems
            return True
        done.add(problem.path)

        def problems_here() -> list[str]:
            return [p.message for p in self._check() if p.path == problem.path]

        wrong = problems_here() or [problem.message]
        # never shown what it took from the worked example: shown the copy, the 1.5B wrote it back
        was = "" if any("from the worked example" in m for m in wrong) else f" It reads: {current!r}."
        differ = f", different from every one of: {json.dumps(others)}" if others else ""
        # a field keeps its own bounds and pattern in the grammar (a tool's name is an identifier)
        info = piece.model.model_fields[at]
        kind = typing.get_args(info.annotation)[0] if line is not None and typing.get_args(info.annotation) else str
        one = create_model("OneText", text=(str, info) if line is None and info.annotation is str else (kind, ...))
        before, best, said = piece.value, None, ""

        def put(text: str) -> None:
            data = before.model_dump()
            data[at] = text if line is None else [text if j == line else v for j, v in enumerate(value)]
            piece.value = piece.model.model_validate(data)

        for tries in range(2):
            try:
                text = self._session.ask_aside(
                    f"{self._world_so_far(without=name if line is None and sub is None else None)}{said}{what} has "
                    f"{'a problem' if len(wrong) == 1 else 'problems'}: {'; '.join(wrong)}.{was} Write it again for "
                    f"this world as JSON {{\"text\": ...}}{differ}. What it must be: {guide}", one, max_tokens=160,
                    schema=bounded(one.model_json_schema()), reseed=tries,
                    temperature=REPEAT_TEMPERATURE if tries else None).text.strip()
                if text == current or text in others:
                    said = f"{text!r} is already there. "
                    continue
                put(text)
            except (ReplyError, ValidationError):
                piece.value = before
                continue
            still = problems_here()
            if best is None or len(still) < len(best[1]):
                best = (piece.value, still)
            if not still:
                break
            said = f"You wrote {text!r}; still wrong: {'; '.join(still)}. "
        if best is None:
            piece.value = before
            return False
        piece.value = best[0]
        left = f" ({len(best[1])} problem(s) left)" if best[1] else ""
        self.progress("rewrote", self._attempt, f"{problem.path.removeprefix('domain.')}{left}")
        return True

    def _deepen(self, problem: DomainProblem) -> bool:
        """A graph too shallow for its family (no chain of three components) is deepened one link at a time: the
        item at the end of a longest chain is asked which later item it needs, among names that keep the graph
        acyclic. The model chooses the link, the program only where one is missing: rewriting the items gave
        the same shallow graph back."""
        list_name = problem.path.removeprefix("domain.")
        domain = self._family.domain
        found = next((key.split(".")[1] for key, ref in domain.REFERENCES.items() if key.split(".")[0] == list_name
                      and ref.later_only and ref.min_chain and ref.source.split(".")[0] == list_name), None)
        items = [p for p in self._pieces if p.field == list_name and p.index is not None and not p.keys]
        if found is None or not items or any(p.value is None for p in items):
            return False
        wanted = domain.REFERENCES[f"{list_name}.{found}"].min_chain
        key = domain.KEYS[list_name]
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
            choice = create_model("Need", needs=(typing.Literal[tuple(options)], ...))
            try:
                link = self._session.ask(
                    f"In this world, {context}Which one of these does `{end}` ({_identity(piece)}) itself need in "
                    f"order to work: {', '.join(options)}? Answer as JSON {{\"needs\": ...}}.", choice,
                    max_tokens=40).needs
                piece.value = piece.model.model_validate({**piece.value.model_dump(), found: [*needs[end], link]})
            except (ReplyError, ValidationError):
                return False
            self.progress("linked", self._attempt, f"{end} needs {link}")
        needs = {n: list(getattr(p.value, found)) for n, p in zip(names, items, strict=True)}
        return max(chain_ends(names, needs).values()) >= wanted

    def _rewrite_part(self, problem: DomainProblem, done: set[str]) -> bool:
        """A problem inside a record nested in a list item (`faults[0].constraint.fix`), or with one record of a
        list inside it (`faults[2].metrics[1]`, a reading whose healthy and faulty values are equal), is fixed by
        asking for that record alone, with the problems and the item as it stands: rewriting the whole item costs every
        field again, and a small model repeats the mistake there (a constraint whose fix is the usual fix). A
        record copied from the worked example is asked for aside, out of the example's sight: in the
        conversation the 1.5B wrote the Kubernetes example's node-pool note back into a pump fault every round."""
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
        problems = [str(p) for p in self._check() if p.path.startswith((at + ".", at + "[")) or p.path == at]
        item = piece.value.model_dump(mode="json")
        # A record of a list (a fault's reading) is shown with its siblings; a record field with the item's rest.
        rest = item if k is not None else {key: v for key, v in item.items() if key != name}
        instruction = (f"`{at}` has problems:\n" + "\n".join(f"- {p}" for p in problems[:6]) +
                       f"\n`{piece.path}` as it stands: {json.dumps(rest, ensure_ascii=False)}\n"
                       f"Write `{at}` again as JSON, fixing every problem.\nFields:\n{field_guide(part.model_fields)}")
        room = max(200, max_tokens_for(piece, self._example) // (2 if k is None else 4))

        def put(value: typing.Any) -> None:
            data = piece.value.model_dump()
            if k is None:
                data[name] = value.model_dump()
            else:
                data[name][k] = value.model_dump()
            piece.value = piece.model.model_validate(data)

        try:
            if any("from the worked example" in p for p in problems):
                value = self._session.ask_aside(f"{self._world_so_far()}{instruction}", part, max_tokens=room)
            else:
                value = self._session.ask(instruction, part, max_tokens=room)
            put(value)
            still = [str(p) for p in self._check() if p.path.startswith((at + ".", at + "[")) or p.path == at]
            if still and set(still) & set(problems):
                # The same mistake again (a constraint whose fix is still the usual fix, four attempts running;
                # a reading whose healthy and faulty values stayed equal in whole rewrites of the fault): once
                # more, aside and hotter, shown what it wrote.
                value = self._session.ask_aside(
                    f"{self._world_so_far()}You wrote `{at}` as {value.model_dump_json()}, and it still has "
                    f"problems:\n" + "\n".join(f"- {p}" for p in still[:6]) + f"\n{instruction}", part,
                    max_tokens=room, temperature=REPEAT_TEMPERATURE)
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
        three = create_model("ThreeValues", values=(list[typing.Annotated[str, *info.metadata]],
                                                    Field(min_length=3, max_length=3)))
        try:
            values = self._session.ask_aside(
                f"{self._world_so_far()}`{at}` is {record.model_dump_json()}. Its `{field}` stays wrong: "
                f"{'; '.join(wrong[:3])}. Name three other values for `{field}` as JSON {{\"values\": [...]}}, each "
                f"another than {old!r}. `{field}`: {info.description or ''}", three, max_tokens=120,
                schema=bounded(three.model_json_schema()), temperature=REPEAT_TEMPERATURE).values
        except (ReplyError, ValidationError):
            return False
        data = record.model_dump()
        for new in dict.fromkeys(v.strip() for v in values):
            if new == old:
                continue
            named = {k: v.replace(f"({old})", f"({new})") if isinstance(v, str) else v for k, v in data.items()}
            put(type(record).model_validate({**named, field: new}))
            if not any(p.path == f"{at}.{field}" for p in self._check()):
                self.progress("chose", self._attempt, f"{at.removeprefix('domain.')}.{field}: {old!r} -> {new!r}")
                return True
        put(record)
        return False


_EXAMPLE = re.compile(r"[,;]?\s*\(?e\.g\.\s*(?<![A-Za-z])'.*?'(?![A-Za-z])\)?")


def without_examples(description: str) -> str:
    """A field description without its quoted examples ("..., e.g. 'ERROR pump-1 request to pump-2 timed out'.")."""
    return _EXAMPLE.sub("", description).strip()


def chain_ends(names: list[str], needs: dict[str, list[str]]) -> dict[str, int]:
    """For each item of an ordered list whose references point only later, the length of the longest chain of
    references that ends at it (an item nothing refers to: 1)."""
    length: dict[str, int] = {}
    for name in names:
        length[name] = 1 + max((length[a] for a in names[:names.index(name)] if name in needs.get(a, [])),
                               default=0)
    return length


def _identity(piece: Piece, without: str | None = None) -> str:
    """What tells an item from its siblings: its short fields (its key, its fix, its kind...), as JSON, `without`
    the one being rewritten (shown what it copied, the 1.5B writes it back). A small model asked for "a
    different text" with nothing to say about this item writes its siblings' text again."""
    data = piece.value.model_dump(mode="json")
    short = {k: v for k, v in data.items() if isinstance(v, str | int | float) and len(str(v)) < 40 and k != without}
    return json.dumps(short, ensure_ascii=False)
