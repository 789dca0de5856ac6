"""Progress credit that cannot be farmed: each item's credit (0..1) only ever counts at its best so far.

Long tasks (fill ten fields, then submit) learn better with a small dense signal on the way. Paying for *the
increase* of each item's best credit means that storing the same value twice, or undoing work and redoing it,
earns nothing twice; the most an episode can collect this way is `pool`, split evenly over the items. Pay the
returned amount as a per-step reward (e.g. `ShapedEnvironment.shape(gain, "progress")`).
"""

from __future__ import annotations

from collections.abc import Iterable


class ProgressLedger:
    """Per-item best credit; `update` returns what the item's new credit earns now."""

    __slots__ = ("_best", "_share")

    def __init__(self, pool: float, items: Iterable[str]):
        names = list(dict.fromkeys(items))
        if pool < 0:
            raise ValueError(f"progress pool {pool} must be non-negative")
        self._share = pool / len(names) if names else 0.0
        self._best = dict.fromkeys(names, 0.0)

    def update(self, item: str, credit: float) -> float:
        """Record `item`'s current credit (clipped to 0..1); returns the reward it earns now (>= 0)."""
        if item not in self._best:
            raise KeyError(f"unknown progress item {item!r}")
        credit = min(1.0, max(0.0, credit))
        gain = credit - self._best[item]
        if gain <= 0.0:
            return 0.0
        self._best[item] = credit
        return gain * self._share

    @property
    def earned(self) -> float:
        """What the episode has collected so far."""
        return sum(self._best.values()) * self._share
