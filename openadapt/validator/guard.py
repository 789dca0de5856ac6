"""Time limits a package cannot swallow: the call in progress, shared with the worker outside the candidate.

The candidate interrupts a call that overruns its limit with SIGALRM (a StepTimeout inside package code); a
package can catch that, install its own SIGALRM handler, or spin in C. So before each call into package code the
candidate also writes the call's deadline into a page of memory shared with the worker (an anonymous shared
mapping made before the fork), and the worker, a separate process, kills the candidate when a deadline passes by
more than `GRACE_S`. Two plain stores per call: no system call, no pipe traffic on the hot path.
"""

from __future__ import annotations

import mmap
import struct
import time

FORMAT = "dd64s"  # deadline (time.monotonic, 0 = no call in progress), limit in seconds, what is running
SIZE = struct.calcsize(FORMAT)
GRACE_S = 0.3  # past the deadline, the worker kills: the in-process interrupt had its chance


class CallGuard:
    def __init__(self, page: mmap.mmap | None = None):
        self.page = page if page is not None else mmap.mmap(-1, mmap.PAGESIZE)

    def enter(self, name: str, limit_s: float) -> tuple[float, float, bytes]:
        previous = self.read_raw()
        struct.pack_into(FORMAT, self.page, 0, time.monotonic() + limit_s, limit_s, name.encode()[:64])
        return previous

    def leave(self, previous: tuple[float, float, bytes]) -> None:
        struct.pack_into(FORMAT, self.page, 0, *previous)

    def read_raw(self) -> tuple[float, float, bytes]:
        return struct.unpack_from(FORMAT, self.page, 0)

    def overdue(self, now: float | None = None) -> tuple[str, float] | None:
        """(what, its limit) when the call in progress is past its deadline plus the grace, else None."""
        deadline, limit, name = self.read_raw()
        if deadline and (now if now is not None else time.monotonic()) > deadline + GRACE_S:
            return name.rstrip(b"\0").decode("utf-8", "replace") or "a call", limit
        return None
