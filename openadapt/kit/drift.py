"""Schema drift: fields renamed silently in the middle of an episode.

A `FieldRename` takes effect at a step: observations from that step on show the new name, and the agent is not
told. An action is judged against the schema of the observation it answers (the one of the previous step), so
the first action that must use the new name is the one taken after the first observation that shows it.
Naming a renamed field by its old name is *stale*: it costs `penalty` on every step it happens. The agent has
*adapted* once it has used a new name.

The environment keeps its records under the canonical (original) names; `view` renames them for display and
`resolve` maps the name an action uses back to the canonical one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class FieldRename:
    old: str
    new: str
    at_step: int

    def __post_init__(self) -> None:
        if self.old == self.new:
            raise ValueError(f"rename of {self.old!r} to itself")
        if self.at_step < 1:
            raise ValueError(f"rename {self.old!r} -> {self.new!r}: at_step must be at least 1")


class FieldUse(Enum):
    CURRENT = "current"  # the name the schema has now
    STALE = "stale"  # a name that was renamed away
    UNKNOWN = "unknown"  # never a name of this schema (or a new name before its rename)


class SchemaDrift:
    """The renames of one episode, and what the agent has done about them."""

    __slots__ = ("adapted_at", "penalty", "renames", "stale_uses", "_by_new", "_by_old")

    def __init__(self, renames: Sequence[FieldRename] = (), penalty: float = 0.1):
        olds = [r.old for r in renames]
        if len(set(olds)) != len(olds):
            raise ValueError(f"a field is renamed twice: {olds}")
        self.renames = tuple(renames)
        self.penalty = penalty
        self._by_old = {r.old: r for r in self.renames}
        self._by_new = {r.new: r for r in self.renames}
        self.stale_uses = 0
        self.adapted_at: int | None = None  # step of the first use of a new name

    def fired(self, step: int) -> list[FieldRename]:
        """Renames in effect at `step`."""
        return [r for r in self.renames if step >= r.at_step]

    def name(self, canonical: str, step: int) -> str:
        """The name a canonical field is shown under at `step`."""
        rename = self._by_old.get(canonical)
        return rename.new if rename is not None and step >= rename.at_step else canonical

    def view(self, record: Mapping[str, V], step: int) -> dict[str, V]:
        """`record` (canonical names) as the agent sees it at `step`; key order is kept."""
        return {self.name(key, step): value for key, value in record.items()}

    def classify(self, used: str, fields: Sequence[str], step: int) -> tuple[FieldUse, str | None]:
        """How `used` relates to the schema shown at `step`, whose canonical fields are `fields`; returns the
        canonical name for a current use."""
        rename = self._by_new.get(used)
        if rename is not None:
            if step >= rename.at_step and rename.old in fields:
                return FieldUse.CURRENT, rename.old
            return FieldUse.UNKNOWN, None
        if used in fields:
            rename = self._by_old.get(used)
            if rename is not None and step >= rename.at_step:
                return FieldUse.STALE, None
            return FieldUse.CURRENT, used
        return FieldUse.UNKNOWN, None

    def judge(self, used: str, fields: Sequence[str], step: int, acted_at: int) -> tuple[FieldUse, str | None, float]:
        """`classify` plus bookkeeping for an action taken at step `acted_at`: the cost of a stale use
        (`penalty`) and adaptation (the first current use of a renamed field)."""
        use, canonical = self.classify(used, fields, step)
        if use is FieldUse.STALE:
            self.stale_uses += 1
            return use, None, self.penalty
        if use is FieldUse.CURRENT and used in self._by_new and self.adapted_at is None:
            self.adapted_at = acted_at
        return use, canonical, 0.0

    @property
    def adapted(self) -> bool:
        return self.adapted_at is not None
