"""Exact search for small packing problems on a discrete time grid: the engine's own optimum.

A problem is a list of items (tasks). An item is placed in one of its *modes* (e.g. a site and a staff member)
at one start slot; a mode holds each of its resources from `start + offset` for `length` slots, and says which
starts it allows and what each earns. Two placements conflict when they hold a resource in a common slot. The
search picks at most one placement per item, every required item placed, no conflicts, maximising the score.

It relies on one property of the scores, which the caller must guarantee: within a mode, an item's score never
rises with a later start (a *regular* objective: starting earlier never hurts). Then some optimal plan is
produced by a serial schedule-generation scheme that places items one at a time, each at the earliest start of
its mode that fits what is already placed, in non-decreasing order of start (ties by item index): take any
optimal plan, place its items in that order at their earliest fitting starts (each moves earlier or stays, and
an item that moved earlier never blocks a later one), and repeat until nothing moves. So the search branches on
(next item, mode) only, never on the start, and skips any branch whose start would come before the last one
placed: every plan is met once, in chronological order. The fitting starts of a mode come from a few bit
operations (each resource's busy mask dilated by the mode's length), not from trying each start.

Branch and bound on top: for every remaining item, the best score any of its modes can still reach at a start
after the last one (forward checking: a required item left with none prunes the node), capped by knapsacks of
the remaining items into the free slots of the capacity pool (e.g. the sites) from the last start on, one per
set of pool resources the items are confined to. The search stops at the first plan that reaches the global
upper bound, and gives up (returns None) past `node_limit` nodes, so that a caller can draw a smaller instance.
Nothing here knows what the resources are: the helper could live in the kit.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

NODE_LIMIT = 4_000


@dataclass(slots=True)
class Mode:
    key: Hashable
    uses: tuple[tuple[int, int, int], ...]  # (resource index, offset from start, length in slots)
    scores: dict[int, tuple[int, Any]] = field(default_factory=dict)  # allowed start -> (score, payload)


@dataclass(slots=True)
class Item:
    key: str
    required: bool
    modes: list[Mode] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Placement:
    item: str
    mode: Hashable
    start: int
    score: int
    payload: Any


@dataclass(frozen=True, slots=True)
class Solution:
    feasible: bool
    score: int
    chosen: dict[str, Placement]
    nodes: int


def interval(start: int, end: int) -> int:
    """Bitmask of slots start..end-1."""
    return ((1 << (end - start)) - 1) << start if end > start else 0


def dilate(mask: int, length: int) -> int:
    """Bit s is set when any of the slots s..s+length-1 is set in `mask`: the starts a block of `length`
    slots cannot take."""
    span = 1
    while span < length:
        step = min(span, length - span)
        mask |= mask >> step
        span += step
    return mask


class _Exhausted(Exception):
    pass


@lru_cache(maxsize=65536)
def _packed(entries: tuple[tuple[int, int], ...], free: int) -> int:
    """The most (value, size) entries can earn in `free` slots (exact 0/1 knapsack)."""
    if sum(size for _, size in entries) <= free:
        return sum(value for value, _ in entries)
    best = [0] * (free + 1)
    for value, size in entries:
        for w in range(free, size - 1, -1):
            if best[w - size] + value > best[w]:
                best[w] = best[w - size] + value
    return best[free]


def _lowest(bits: int) -> int:
    return (bits & -bits).bit_length() - 1


def solve(items: list[Item], resources: int, pools: tuple[tuple[int, ...], ...] = (),
          blocked: dict[int, int] | None = None, node_limit: int = NODE_LIMIT,
          ceiling: int | None = None) -> Solution | None:
    """`pools`: groups of resources of which every mode holds exactly one for a fixed number of slots (the
    sites of a day; its staff): their free slots from the last start on cap what the remaining items can still
    place. `blocked`: slots a resource is never free (outside a person's hours), for those capacities.
    `ceiling`: a known upper bound on the optimum (that of a less constrained problem), to stop at."""
    items = sorted(items, key=lambda it: it.key)
    n = len(items)
    modes = [[m for m in it.modes if m.scores] for it in items]
    allowed = [[sum(1 << s for s in m.scores) for m in ms] for ms in modes]
    required = [it.required for it in items]
    if any(r and not m for r, m in zip(required, modes, strict=True)):
        return Solution(False, 0, {}, 0)
    tops = [max((sc for m in ms for sc, _ in m.scores.values()), default=0) for ms in modes]
    upper = sum(t if r else max(t, 0) for t, r in zip(tops, required, strict=True))
    if ceiling is not None:
        upper = min(upper, ceiling)

    # Capacity groups: for every pool, each item's own set of its resources and the whole pool. Items confined
    # to the resources of a group must fit in its free slots (the other items are bounded by their own reach).
    groups: list[tuple[tuple[int, ...], list[tuple[int, int]], int]] = []  # resources, (item, size), horizon
    for pool in pools:
        pooled = set(pool)
        usable = [frozenset(r for m in ms for r, _, _ in m.uses if r in pooled) for ms in modes]
        size = [next((length for m in ms[:1] for r, _, length in m.uses if r in pooled), 0) for ms in modes]
        for u in dict.fromkeys([*usable, frozenset(pooled)]):
            members = [i for i in range(n) if usable[i] and usable[i] <= u]
            if u and members:
                end = max(max(m.scores) + off + length for i in members for m in modes[i]
                          for r, off, length in m.uses if r in pooled)
                groups.append((tuple(sorted(u)), [(i, size[i]) for i in members], end))
    # For a group confined to one resource, the best score of each member at a start at or after each slot.
    singles: list[tuple[int, list[int], dict[int, list[int | None]]]] = []
    for resources_, members, end in groups:
        if len(resources_) == 1 and len(members) > 1:
            r = resources_[0]
            best_from: dict[int, list[int | None]] = {}
            for i, _ in members:
                row: list[int | None] = [None] * (end + 1)
                for m in modes[i]:
                    for st, (sc, _) in m.scores.items():
                        if row[st] is None or sc > row[st]:
                            row[st] = sc
                for st in range(end - 1, -1, -1):
                    if row[st + 1] is not None and (row[st] is None or row[st + 1] > row[st]):
                        row[st] = row[st + 1]
                best_from[i] = row
            singles.append((r, [i for i, _ in members], best_from))
    single_sizes = {}
    for r, members, _ in singles:
        for i in members:
            single_sizes[(r, i)] = next(length for m in modes[i] for u, _, length in m.uses if u == r)
    sequenced: dict[Any, int | None] = {}

    # Interchangeable items (same modes, starts and scores) are placed in index order: any plan that uses a
    # later twin before an earlier one (or instead of it) has an equal twin plan that does not.
    signature = [(it.required, tuple((m.key, m.uses, tuple(sorted((st, sc) for st, (sc, _) in m.scores.items())))
                                     for m in ms)) for it, ms in zip(items, modes, strict=True)]
    twin: list[int | None] = [None] * n
    seen: dict[Any, int] = {}
    for i, sig in enumerate(signature):
        twin[i] = seen.get(sig)
        seen[sig] = i

    # Interchangeable resources of a pool (every item can use them in the same ways, for the same scores, and
    # they are blocked alike): the later one is used for the first time only once the earlier one is in use.
    blocked = blocked or {}
    pool_of = {r: p for p, pool in enumerate(pools) for r in pool}
    traits: dict[int, list[Any]] = {r: [] for r in pool_of}
    for i, ms in enumerate(modes):
        for m in ms:
            for r, _, _ in m.uses:
                if r in traits:
                    traits[r].append((i, tuple(("*" if u == r else u, off, length) for u, off, length in m.uses),
                                      tuple(sorted((st, sc) for st, (sc, _) in m.scores.items()))))
    before: list[int | None] = [None] * resources
    last_of: dict[Any, int] = {}
    for r in sorted(traits):
        key = (pool_of[r], blocked.get(r, 0), tuple(sorted(traits[r])))
        before[r] = last_of.get(key)
        last_of[key] = r
    used = [0] * resources

    masks = [0] * resources
    for r, bits in blocked.items():
        masks[r] = bits
    best: list[Any] = [None, {}]  # score, chosen
    chosen: dict[int, tuple[Mode, int]] = {}
    nodes = [0]
    # The fitting starts of every mode, kept up to date as placements are made and undone: a block [a, b) on a
    # resource removes the starts [a - length + 1 - offset, b - offset) of every mode that uses it.
    flat = [(i, k) for i in range(n) for k in range(len(modes[i]))]
    fit = [allowed[i][k] for i, k in flat]
    for m, (i, k) in enumerate(flat):  # starts that would hold a blocked slot
        for r, off, length in modes[i][k].uses:
            if masks[r]:
                cut = dilate(masks[r], length)
                fit[m] &= ~(cut >> off if off >= 0 else cut << -off)
    users: list[list[tuple[int, int, int]]] = [[] for _ in range(resources)]
    for m, (i, k) in enumerate(flat):
        for r, off, length in modes[i][k].uses:
            users[r].append((m, off, length))
    item_modes: list[list[int]] = [[] for _ in range(n)]
    for m, (i, _) in enumerate(flat):
        item_modes[i].append(m)

    def place(mode: Mode, start: int) -> list[tuple[int, int]]:
        saved = []
        for r, off, length in mode.uses:
            used[r] += 1
            a, b = start + off, start + off + length
            masks[r] |= interval(a, b)
            for m, uoff, ulen in users[r]:
                lo, hi = max(0, a - ulen + 1 - uoff), b - uoff
                if hi > lo:
                    cut = fit[m] & ~interval(lo, hi)
                    if cut != fit[m]:
                        saved.append((m, fit[m]))
                        fit[m] = cut
        return saved

    def unplace(mode: Mode, start: int, saved: list[tuple[int, int]]) -> None:
        for r, off, length in mode.uses:
            used[r] -= 1
            masks[r] &= ~interval(start + off, start + off + length)
        for m, value in reversed(saved):
            fit[m] = value

    def knapsack(entries: list[tuple[int, int, bool]], free: int) -> int | None:
        """0/1 knapsack of (reach, size, required) into `free` slots; None when the required ones alone do not
        fit."""
        total = 0
        for reach, size, must in entries:
            if must:
                free -= size
                total += reach
        if free < 0:
            return None
        optional = tuple(sorted((reach, size) for reach, size, must in entries if not must and reach > 0))
        return total + _packed(optional, free)

    def sequence_bound(r: int, members: list[int], best_from: dict[int, list[int | None]], start: int,
                       reaches: dict[int, tuple[int, bool]]) -> int | None:
        """Best total of the remaining members of a one-resource group, each at the earliest start it could
        have if they ran back to back from the resource's first free slot (None: the required ones cannot)."""
        inside = [i for i in members if i in reaches]
        free_at = max(start, 0)
        while (masks[r] >> free_at) & 1:
            free_at += 1
        key = (r, tuple(inside), free_at)
        if key in sequenced:
            return sequenced[key]
        k = len(inside)
        rows = [best_from[i] for i in inside]
        size = [single_sizes[(r, i)] for i in inside]
        must = sum(1 << j for j, i in enumerate(inside) if reaches[i][1])
        f: list[int | None] = [None] * (1 << k)
        f[0] = 0
        span = [0] * (1 << k)
        best_total = None
        for subset in range(1, 1 << k):
            low = (subset & -subset).bit_length() - 1
            span[subset] = span[subset & (subset - 1)] + size[low]
            top = None
            for j in range(k):
                if subset >> j & 1:
                    prev = f[subset & ~(1 << j)]
                    at = free_at + span[subset] - size[j]
                    if prev is None or at >= len(rows[j]) or rows[j][at] is None:
                        continue
                    value = prev + rows[j][at]
                    if top is None or value > top:
                        top = value
            f[subset] = top
        for subset in range(1 << k):
            value = f[subset]
            if value is not None and subset & must == must and (best_total is None or value > best_total):
                best_total = value
        sequenced[key] = best_total
        return best_total

    def capacity_bound(reaches: dict[int, tuple[int, bool]], start: int, loose: int) -> int | None:
        tight = loose
        for r, members, best_from in singles:
            inside = [i for i in members if i in reaches]
            if len(inside) < 2:
                continue
            packed = sequence_bound(r, members, best_from, start, reaches)
            if packed is None:
                return None
            outside = loose - sum(reaches[i][0] if reaches[i][1] else max(reaches[i][0], 0) for i in inside)
            tight = min(tight, packed + outside)
        for resources_, members, end in groups:
            inside = [(reaches[i][0], size, reaches[i][1]) for i, size in members if i in reaches]
            if not inside:
                continue
            window = interval(max(start, 0), end)
            free = sum((window & ~masks[r]).bit_count() for r in resources_)
            packed = knapsack(inside, free)
            if packed is None:
                return None
            outside = loose - sum(reach if must else max(reach, 0) for reach, _, must in inside)
            tight = min(tight, packed + outside)
        return tight

    def dfs(remaining: tuple[int, ...], last: tuple[int, int], score: int) -> bool:
        """True when the global upper bound is reached (stop everything)."""
        nodes[0] += 1
        if nodes[0] > node_limit:
            raise _Exhausted
        children: list[tuple[int, int, int, int]] = []
        reaches: dict[int, tuple[int, bool]] = {}
        rest = 0
        need = False
        for i in remaining:
            ready = twin[i] is None or twin[i] not in remaining
            after = (~0 << (last[0] + (1 if i <= last[1] else 0))) if last[0] >= 0 else ~0
            reach = None
            for k, mode in enumerate(modes[i]):
                free = fit[item_modes[i][k]]
                if not free:
                    continue
                first = _lowest(free)
                if (1 << first) & after:  # the earliest fitting start comes after the last: a canonical branch
                    sc = mode.scores[first][0]
                    if ready and all(used[r] or before[r] is None or used[before[r]] for r, _, _ in mode.uses):
                        children.append((-sc, first, i, k))
                    if reach is None or sc > reach:
                        reach = sc
                    continue
                later = free & after
                if later:
                    sc = mode.scores[_lowest(later)][0]
                    if reach is None or sc > reach:
                        reach = sc
            if required[i]:
                need = True
                if reach is None:
                    return False
                rest += reach
                reaches[i] = (reach, True)
            elif reach is not None and reach > 0:
                rest += reach
                reaches[i] = (reach, False)
        if groups and reaches:
            packed = capacity_bound(reaches, last[0], rest)
            if packed is None:
                return False
            rest = packed
        if best[0] is not None and score + rest <= best[0]:
            return False
        if not need and (best[0] is None or score > best[0]):
            best[0], best[1] = score, dict(chosen)
            if score >= upper:
                return True
        children.sort()
        for neg, start, i, k in children:
            mode = modes[i][k]
            saved = place(mode, start)
            chosen[i] = (mode, start)
            done = dfs(tuple(j for j in remaining if j != i), (start, i), score - neg)
            unplace(mode, start, saved)
            del chosen[i]
            if done:
                return True
        return False

    try:
        dfs(tuple(range(n)), (-1, -1), 0)
    except _Exhausted:
        return None
    if best[0] is None:
        return Solution(False, 0, {}, nodes[0])
    picked = {}
    for i, (mode, start) in best[1].items():
        sc, payload = mode.scores[start]
        picked[items[i].key] = Placement(items[i].key, mode.key, start, sc, payload)
    return Solution(True, best[0], picked, nodes[0])
