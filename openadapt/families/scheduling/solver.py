"""Exact search for small packing problems on a discrete time grid: the engine's own optimum.

A problem is a list of items (tasks), each with a finite list of options (a placement: which resources it holds
in which slots, as bitmasks, and what it scores) and a flag saying whether it must be placed. Two placements
conflict when they hold the same resource in a common slot. The search picks at most one option per item,
every required item placed, no conflicts, maximising the total score.

Depth-first branch and bound: required items first (fewest options first), then optional items by their best
score; each node bounds the rest by the best option of each remaining item that still fits (forward checking:
a required item left without one prunes the node). It stops at the first plan that reaches the global upper
bound, and gives up (returns None) past `node_limit` nodes, so a caller can draw a smaller instance instead.
Nothing here knows what the resources are: this helper could live in the kit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NODE_LIMIT = 40_000


@dataclass(frozen=True, slots=True)
class Option:
    score: int
    uses: tuple[tuple[int, int], ...]  # (resource index, slot bitmask)
    payload: Any = None


@dataclass(slots=True)
class Item:
    key: str
    required: bool
    options: list[Option] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Solution:
    feasible: bool
    score: int
    chosen: dict[str, Option]
    nodes: int


def interval(start: int, end: int) -> int:
    """Bitmask of slots start..end-1."""
    return ((1 << (end - start)) - 1) << start if end > start else 0


def solve(items: list[Item], resources: int, node_limit: int = NODE_LIMIT) -> Solution | None:
    order = sorted(items, key=lambda it: (not it.required, len(it.options) if it.required else 0,
                                          -max((o.score for o in it.options), default=0), it.key))
    opts = [sorted(it.options, key=lambda o: -o.score) for it in order]
    required = [it.required for it in order]
    n = len(order)
    if any(r and not o for r, o in zip(required, opts, strict=True)):
        return Solution(False, 0, {}, 0)
    upper = sum(max(o[0].score, 0) if o and not r else (o[0].score if o else 0) for o, r in zip(opts, required,
                                                                                                 strict=True))
    masks = [0] * resources
    best_score: list[int | None] = [None]
    best_choice: list[list[Option | None]] = [[]]
    choice: list[Option | None] = [None] * n
    nodes = [0]

    def fits(option: Option) -> bool:
        return all(not masks[r] & bits for r, bits in option.uses)

    def bound(i: int) -> int | None:
        total = 0
        for j in range(i, n):
            best = None
            for option in opts[j]:
                if fits(option):
                    best = option.score
                    break
            if best is None:
                if required[j]:
                    return None
                continue
            total += best if required[j] else max(best, 0)
        return total

    def dfs(i: int, score: int) -> bool:
        """True when the global upper bound is reached (stop everything)."""
        nodes[0] += 1
        if nodes[0] > node_limit:
            raise _Exhausted
        if i == n:
            if best_score[0] is None or score > best_score[0]:
                best_score[0] = score
                best_choice[0] = list(choice)
            return score >= upper
        rest = bound(i)
        if rest is None or (best_score[0] is not None and score + rest <= best_score[0]):
            return False
        for option in opts[i]:
            if not fits(option):
                continue
            for r, bits in option.uses:
                masks[r] |= bits
            choice[i] = option
            done = dfs(i + 1, score + option.score)
            for r, bits in option.uses:
                masks[r] &= ~bits
            choice[i] = None
            if done:
                return True
        if not required[i]:
            return dfs(i + 1, score)
        return False

    try:
        dfs(0, 0)
    except _Exhausted:
        return None
    if best_score[0] is None:
        return Solution(False, 0, {}, nodes[0])
    chosen = {order[i].key: option for i, option in enumerate(best_choice[0]) if option is not None}
    return Solution(True, best_score[0], chosen, nodes[0])


class _Exhausted(Exception):
    pass
