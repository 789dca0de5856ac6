"""A dependency graph too shallow for its family, deepened one link at a time."""

from __future__ import annotations

import typing

from pydantic import ValidationError, create_model

from openadapt.designer.repairs.common import RepairBase, identity
from openadapt.families.domain import DomainProblem
from openadapt.llm.chat import ReplyError


class GraphRepairs(RepairBase):
    def _deepen(self, problem: DomainProblem) -> bool:
        """A graph too shallow for its family (no chain of three components) is deepened one link at a time: the
        item at the end of a longest chain is asked which later item it needs, among names that keep the graph
        acyclic. The model chooses the link, the program only where one is missing: rewriting the items gives
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
                    f"In this world, {context}Which one of these does `{end}` ({identity(piece)}) itself need in "
                    f"order to work: {', '.join(options)}? Answer as JSON {{\"needs\": ...}}.", choice,
                    max_tokens=40).needs
                piece.value = piece.model.model_validate({**piece.value.model_dump(), found: [*needs[end], link]})
            except (ReplyError, ValidationError):
                return False
            self.progress("linked", self._attempt, f"{end} needs {link}")
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


