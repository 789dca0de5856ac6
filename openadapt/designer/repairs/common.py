"""What every repair shares: the designer state it works on, the temperature of a retry after a repeat,
and how an item and a description are shown to the model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from openadapt.designer.pieces import Piece
from openadapt.designer.session import Session
from openadapt.families.base import Family
from openadapt.families.domain import Domain, DomainProblem

REPEAT_TEMPERATURE = 0.9  # a line asked for again after the model repeated one


class RepairBase:
    """What the repairs read and write: `FamilyDomainDesigner`'s pieces, through its session."""

    _session: Session
    _pieces: list[Piece]
    _family: Family
    _example: Domain
    _attempt: int
    progress: Callable[[str, int, str], None]
    _check: Callable[[], list[DomainProblem]]
    _draft: Callable[[], dict]
    _world_so_far: Callable[..., str]
    _rounds_seen: dict[str, int]  # per problem (as `str` gives it): the repair rounds that found it


_EXAMPLE = re.compile(r"[,;]?\s*\(?e\.g\.\s*(?<![A-Za-z])'.*?'(?![A-Za-z])\)?")


def without_examples(description: str) -> str:
    """A field description without its quoted examples ("..., e.g. 'ERROR api-1 request to db-1 timed out'.")."""
    return _EXAMPLE.sub("", description).strip()


def identity(piece: Piece, without: str | None = None) -> str:
    """What tells an item from its siblings: its short fields (its key, its fix, its kind...), as JSON, `without`
    the one being rewritten (shown what it copied, a small model writes it back). Asked for "a different text"
    with nothing to say about this item, a small model writes its siblings' text again."""
    data = piece.value.model_dump(mode="json")
    short = {k: v for k, v in data.items() if isinstance(v, str | int | float) and len(str(v)) < 40 and k != without}
    return json.dumps(short, ensure_ascii=False)
