"""One text or line with a problem, asked for alone: an item's (`faults[1].runbook`), the header's (`alert`),
a list's line (`symptom_lines[1]`) or a record's (`texts.demand_signals[2]`)."""

from __future__ import annotations

import json
import re
import typing

from pydantic import ValidationError, create_model

from openadapt.designer.copying import is_copy, unquoted
from openadapt.designer.pieces import bounded, named_description, piece_description
from openadapt.designer.placeholders import with_placeholders
from openadapt.designer.repairs.common import REPEAT_TEMPERATURE, RepairBase, identity, without_examples
from openadapt.families.domain import FROM_DESCRIPTION, FROM_EXAMPLE, Code, DomainProblem
from openadapt.llm.chat import ReplyError


class TextRepairs(RepairBase):
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
        described = problem.code in FROM_DESCRIPTION  # its own field's example
        copied = problem.code in (Code.COPIED, Code.DESCRIBED)
        taken = problem.code in (Code.EXAMPLE_PHRASE, Code.DESCRIBED_PHRASE)  # a phrase of it
        repeated = problem.code == Code.REPEATED_TEXT
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
        # a text field keeps its own bounds and pattern in the grammar: as free text, an identifier's answer
        # could not go back into the item
        one = create_model("OneText", text=(str, info) if line is None and info.annotation is str else (str, ...))
        what = f"`{name}`" if line is None else f"line {line + 1} of `{name}`"
        what = f"{what[0].upper()}{what[1:]} of `{piece.path}`"
        must = piece.model.model_fields[name].description or ""
        if described:  # the example it copied is not shown again
            must = without_examples(must)
        if copied or taken or repeated:
            source = "the example its description gives" if described else "the worked example"
            wrong = (f"is copied from {source} of another world" if copied else f"takes a phrase from {source} "
                     "of another world" if taken else "repeats another item's")
            # never the copy itself: shown what it took, a small model writes it back
            shown = [t for t in dict.fromkeys(siblings) if not ((copied or taken) and t == current)]
            instruction = (f"{what} {wrong}. Write a new one for this item ({identity(piece, name)}) as JSON "
                           f"{{\"text\": ...}}, in its own words, different from every one of: "
                           f"{json.dumps(shown)}. What it must be: {must}")
        else:
            instruction = (f"{what} has a problem: {problem.message}. It reads: {current!r}. The item as it stands: "
                           f"{piece.value.model_dump_json()}\nWrite it again as JSON {{\"text\": ...}}, fixing the "
                           f"problem. What it must be: {must}")
        schema = with_placeholders(bounded(one.model_json_schema()), self._family, problem.path, "text",
                                   kind=_kind(piece.value))
        before = piece.value
        try:
            if copied or taken:
                # Aside, and once more hotter if the answer is a line already there (a small model often sends one
                # of the lines it was told to differ from); then the item is rewritten whole.
                said = ""
                for tries in range(2):
                    again = f"{said!r} is already there. " if said else ""
                    text = self._session.ask_aside(f"{self._world_so_far()}{again}{instruction}", one, max_tokens=160,
                                                   schema=schema, reseed=tries,
                                                   temperature=REPEAT_TEMPERATURE if said else None).text.strip()
                    if text not in siblings:
                        break
                    said = text
            else:
                text = self._session.ask(instruction, one, max_tokens=160, schema=schema).text.strip()
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
        at once (fixing one problem at a time brings another back). An answer that leaves a problem is asked for
        once more, hotter and told what is still wrong; the answer with the fewest problems is kept (a whole
        rewrite in the conversation gives the copy back, or one line written three times)."""
        match = re.match(r"^domain\.(\w+)(?:\.(\w+))?(?:\[(\d+)\])?$", problem.path)
        if not match:
            return False
        name, sub, line = match.group(1), match.group(2), None if match.group(3) is None else int(match.group(3))
        own = [p for p in self._pieces if p.index is None and not p.keys and p.value is not None]
        split = next((p for p in own if sub is not None and p.path == f"domain.{name}.{sub}"), None)
        if split is not None:  # a list of lines of a record written list by list (`messages.accept`)
            piece, at, guide = split, "items", piece_description(self._family.domain, split, self._pieces)
        elif sub is not None:  # a field of a record of the domain (`texts`), a piece of its own
            if problem.code in FROM_EXAMPLE:
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

        def problems_here() -> list[DomainProblem]:
            return [p for p in self._check() if p.path == problem.path]

        wrong = problems_here() or [problem]
        # never shown what it took from the worked example: shown the copy, a small model writes it back
        copy = any(is_copy(p) for p in wrong)
        was = "" if copy else f" It reads: {current!r}."
        told = "; ".join(unquoted(p, False) for p in wrong)
        if any(p.code in FROM_DESCRIPTION for p in wrong):  # the example it copied is not shown again
            guide = without_examples(guide)
        # Siblings with a copy of their own are not shown: shown them, a rewrite copies their copy back.
        shown: list[str] = []
        if line is not None:
            base = problem.path.rsplit("[", 1)[0]
            copied = {p.path for p in self._check() if p.path.startswith(base + "[") and is_copy(p)}
            shown = [v for j, v in enumerate(value) if j != line and f"{base}[{j}]" not in copied]
        differ = f", different from every one of: {json.dumps(shown)}" if shown else ""
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
                    f"{'a problem' if len(wrong) == 1 else 'problems'}: {told}.{was} "
                    f"Write it again for this world as JSON {{\"text\": ...}}{differ}. What it must be: {guide}", one,
                    max_tokens=160,
                    schema=with_placeholders(bounded(one.model_json_schema()), self._family, problem.path, "text",
                                             kind=_kind(before)),
                    reseed=tries,
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
            said = (f"Still wrong: {'; '.join(unquoted(p, False) for p in still)}. " if copy else
                    f"You wrote {text!r}; still wrong: {'; '.join(p.message for p in still)}. ")
        if best is None:
            piece.value = before
            return self._replace_repeat(problem, piece, line)
        piece.value = best[0]
        left = f" ({len(best[1])} problem(s) left)" if best[1] else ""
        self.progress("rewrote", self._attempt, f"{problem.path.removeprefix('domain.')}{left}")
        return True

    def _replace_repeat(self, problem: DomainProblem, piece: typing.Any, line: int | None) -> bool:
        """A line of a list of lines that repeats another and came back as a line already there each time it was
        asked for alone is dropped, and the list topped up one new line at a time if it is then too short (that
        request names every line it has, and is sampled hotter): rewriting the whole list brings the repeat back."""
        if line is None or piece.field is None or problem.code != Code.REPEATED_LINE:
            return False
        before = piece.value
        data = before.model_dump()
        if not isinstance(data.get("items"), list) or line >= len(data["items"]):
            return False  # a list of a record's (`texts.demand_signals`) has no such repeats check
        del data["items"][line]
        # Held short for a moment: the piece asks for as many lines as the family's checks need, and the top-up
        # below puts them back (or the piece is restored).
        piece.value = piece.model.model_construct(**data)
        short = next((p for p in self._check() if p.path == f"domain.{piece.field}" and p.code == Code.TOO_FEW), None)
        if short is not None and not self._top_up(short):
            piece.value = before
            return False
        try:
            piece.value = piece.model.model_validate(piece.value.model_dump())
        except ValidationError:
            piece.value = before
            return False
        self.progress("dropped", self._attempt, f"{problem.path.removeprefix('domain.')} ({problem.message})")
        return True


def _kind(item: typing.Any) -> str | None:
    """The `kind` of an item whose text is asked for again, where its texts' placeholders depend on it."""
    kind = getattr(item, "kind", None)
    return kind if isinstance(kind, str) else None
