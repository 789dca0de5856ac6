"""The state a pieces design works on, explicit: the pieces as written, the conversation they are written in,
the family, its worked example and the task. The checks read it, the repairs (`repair.py`) read and write it, and
nothing else does."""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from openadapt.designer.copying import copied_from_example
from openadapt.designer.deadline import Deadline
from openadapt.designer.pieces import (
    Piece,
    assemble,
    cut_rambles,
    distinct_references,
    drop_repeated_prose,
    is_model,
    thin_repeats,
)
from openadapt.designer.session import Session
from openadapt.families.base import Family
from openadapt.families.domain import Code, Domain, DomainError, DomainProblem

PHRASE_ROUNDS = 2  # repair rounds that find one field description's phrase before it counts as this world's
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")


@dataclass
class Draft:
    family: Family
    example: Domain  # the worked example (another world)
    others: list[Domain]  # the family's other examples: what all share is the family's vocabulary, not a copy
    task: str
    session: Session
    deadline: Deadline
    progress: Callable[[str, int, str], None]
    pieces: list[Piece] = field(default_factory=list)
    attempt: int = 1  # the package attempt the pieces are written for (progress lines name it)
    unwritten: set[str] = field(default_factory=set)  # pieces not asked for: the time limit had passed
    rounds_seen: dict[str, int] = field(default_factory=dict)  # per problem (as `str` gives it): rounds that found it
    item_tries: dict[str, int] = field(default_factory=dict)  # per list item: the running rounds that found it wrong
    phrase_rounds: dict[tuple[str, str], int] = field(default_factory=dict)  # per field and described phrase

    @property
    def domain(self) -> type[Domain]:
        return self.family.domain

    def say(self, phase: str, detail: str) -> None:
        self.progress(phase, self.attempt, detail)

    def data(self) -> dict[str, Any]:
        """The domain as the pieces hold it, through the pure normalisers (repeats dropped again after the tidy:
        two lines with different names can tidy to one)."""
        drafted = distinct_references(cut_rambles(assemble(self.pieces)), self.domain)
        tidied = self.domain.tidy(drop_repeated_prose(drafted))
        return thin_repeats(drop_repeated_prose(tidied), self.domain)

    def check(self) -> list[DomainProblem]:
        """Every problem of the draft: pieces not written, the family's checks, what it took from the examples."""
        data = self.data()
        missing = [DomainProblem(path=p.path, code=Code.UNWRITTEN, message=f"not written: {self.deadline} was reached"
                                 if p.path in self.unwritten else "no usable answer was written")
                   for p in self.pieces if p.value is None]
        try:
            self.family.parse_domain(data)
            problems = []
        except DomainError as exc:
            problems = exc.problems
        copies = [p for p in copied_from_example(data, self.example, self.others, self.task)
                  if self.phrase_rounds.get(described_phrase(p), 0) < PHRASE_ROUNDS]
        return missing + problems + copies

    def world_so_far(self, without: str | None = None) -> str:
        """The header fields as written (who the agent is, what the system and its parts are called): what a piece
        written outside the conversation needs to know of this world; `without` leaves out the text being
        rewritten, so that it is not copied back."""
        header = next((p for p in self.pieces if p.field is None and p.value is not None), None)
        if header is None:
            return ""
        return f"This world's domain so far: {header.value.model_dump_json(exclude={without} if without else None)}\n\n"

    def accept_phrases(self, problems: list[DomainProblem]) -> list[DomainProblem]:
        """`problems` less the phrases now taken as this world's: a phrase of a field description's example that
        the field's texts take over `PHRASE_ROUNDS` rounds running, rewritten in between, is a term two worlds
        share. A whole copied text, anything from the worked example, or a phrase with a number in it (a part
        number is the example's world, not a form) stays a problem however often it comes back."""
        for key in {described_phrase(p) for p in problems} - {None}:
            if re.search(r"\d", key[1]):
                continue
            self.phrase_rounds[key] = self.phrase_rounds.get(key, 0) + 1
            if self.phrase_rounds[key] == PHRASE_ROUNDS:
                self.say("accepted", f"{key[0].removeprefix('domain.')}: {key[1]!r} (taken from its description's "
                         f"example {PHRASE_ROUNDS} rounds running: this world's words too)")
        return [p for p in problems if self.phrase_rounds.get(described_phrase(p), 0) < PHRASE_ROUNDS]

    def keys_piece(self, list_name: str) -> Piece | None:
        return next((p for p in self.pieces if p.keys and p.field == list_name and p.value is not None), None)

    def items(self, list_name: str) -> list[Piece]:
        """The pieces of a keyed list's items, in order."""
        return [p for p in self.pieces if p.field == list_name and p.index is not None and not p.keys]

    def locate(self, path: str) -> Node | None:
        """The node a domain path names, in the piece that holds it; None where no written piece does."""
        steps = tuple(name or int(index) for name, index in _STEP.findall(path.removeprefix("domain")))
        for piece in self.pieces:
            if piece.value is None or piece.keys or not steps:
                continue
            if piece.index is not None:
                within = steps[2:] if steps[:2] == (piece.field, piece.index) else None
            elif piece.part is not None:
                within = ("items", *steps[2:]) if steps[:2] == (piece.field, piece.part) else None
            elif piece.field is None:
                within = steps if steps[0] in piece.model.model_fields else None
            elif steps[0] == piece.field:  # a record of the domain, or a list written whole (its `items`)
                whole = typing.get_origin(self.domain.model_fields[piece.field].annotation) is list
                within = ("items", *steps[1:]) if whole else steps[1:]
            else:
                within = None
            if within is not None:
                return Node.at(path, piece, within)
        return None


@dataclass
class Node:
    """What a problem's path names: where in which piece, its value (as the piece dumps it) and its type."""

    path: str
    piece: Piece
    steps: tuple[str | int, ...]  # from the piece's value down to the node
    value: Any
    annotation: Any  # str, a record's model, list[...]
    info: Any  # the FieldInfo of the field that holds it, or of the list it is a line of
    name: str  # that field's name

    @classmethod
    def at(cls, path: str, piece: Piece, steps: tuple[str | int, ...]) -> Node | None:
        value: Any = piece.value.model_dump()
        annotation: Any = piece.model
        info, name = None, piece.field or ""
        for step in steps:
            if isinstance(step, str):
                if not (is_model(annotation) and step in annotation.model_fields and isinstance(value, dict)):
                    return None
                info, name = annotation.model_fields[step], step
                annotation, value = info.annotation, value.get(step)
            else:
                if typing.get_origin(annotation) is not list or not isinstance(value, list) or step >= len(value):
                    return None
                annotation, value = typing.get_args(annotation)[0], value[step]
        return cls(path, piece, steps, value, annotation, info, name)

    @property
    def is_text(self) -> bool:
        return isinstance(self.value, str)

    @property
    def is_record(self) -> bool:
        return is_model(self.annotation) and isinstance(self.value, dict)

    @property
    def line(self) -> int | None:
        """Its index where the node is one line of a list."""
        return self.steps[-1] if self.steps and isinstance(self.steps[-1], int) else None

    @property
    def parent(self) -> Node | None:
        return Node.at(self.path.rsplit("." if self.line is None else "[", 1)[0], self.piece, self.steps[:-1]) \
            if self.steps else None

    def siblings(self) -> list[Any]:
        """The other lines of its list, where it is a line."""
        if self.line is None:
            return []
        lines = self.parent.value if self.parent is not None else []
        return [v for i, v in enumerate(lines) if i != self.line]

    def put(self, new: Any) -> None:
        """The piece with `new` at this node; pydantic's ValidationError where the piece's schema refuses it."""
        new = new.model_dump() if isinstance(new, BaseModel) else new
        data = self.piece.value.model_dump()
        holder: Any = data
        for step in self.steps[:-1]:
            holder = holder[step]
        if self.steps:
            holder[self.steps[-1]] = new
        else:
            data = new
        self.piece.value = self.piece.model.model_validate(data)
        self.value = new


def described_phrase(problem: DomainProblem) -> tuple[str, str] | None:
    """(the field, list indices dropped; the phrase) of a text that takes a phrase of its field description's
    example over, else None."""
    if problem.code != Code.DESCRIBED_PHRASE or problem.value is None:
        return None
    return re.sub(r"\[\d+\]", "[]", problem.path), problem.value
