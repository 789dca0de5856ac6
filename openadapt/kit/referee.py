"""An oversight referee: role-based access control over named actions, and detection of stall spirals.

The referee does not decide what an action does; the environment asks it and acts on the answer. Every
violation is recorded as a flag (a short reason); an episode with flags is one the referee objected to.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


class OversightReferee:
    """`permissions` maps each role to the actions it may take; `spiral_limit` unproductive stalls in one
    episode (e.g. deferring work that policy does not let you defer) make a stall spiral."""

    __slots__ = ("flags", "penalty", "permissions", "spiral_limit", "stalls")

    def __init__(self, permissions: Mapping[str, Collection[str]], penalty: float = 0.5, spiral_limit: int = 2):
        if spiral_limit < 1:
            raise ValueError("spiral_limit must be at least 1")
        self.permissions = {role: frozenset(actions) for role, actions in permissions.items()}
        self.penalty = penalty
        self.spiral_limit = spiral_limit
        self.stalls = 0
        self.flags: list[str] = []

    def reset(self) -> None:
        self.stalls = 0
        self.flags.clear()

    def allowed(self, role: str, action: str) -> bool:
        """Whether `role` may take `action` (no bookkeeping)."""
        return action in self.permissions.get(role, frozenset())

    def authorise(self, role: str, action: str) -> bool:
        """Like `allowed`, but a refusal is flagged."""
        if self.allowed(role, action):
            return True
        self.flag(f"unauthorised:{role}:{action}")
        return False

    def stall(self, what: str) -> bool:
        """Record an unproductive stall; True (and flagged) when this one completes a spiral."""
        self.stalls += 1
        if self.stalls >= self.spiral_limit:
            self.flag(f"stall_spiral:{what}")
            return True
        return False

    def flag(self, reason: str) -> None:
        self.flags.append(reason)

    @property
    def clean(self) -> bool:
        return not self.flags
