"""The simulated outbound mail API (an HTTP mail relay) with deterministic, seeded failures.

- A flaky network: the first `flaps` sends of the episode fail with `[Errno 101] Network is unreachable`,
  whatever the recipient. The failure is transient: the same send succeeds once the network is back.
- An unroutable recipient: a retired mailbox, or (in some episodes) the subject's primary address, fails with
  `550 5.1.1 Recipient address rejected: unroutable` every time. The failure is permanent: retrying it is a loop
  (counted), and the right move is the subject's backup contact.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSIENT = "[Errno 101] Network is unreachable"
PERMANENT = "550 5.1.1 Recipient address rejected: unroutable"


def normalise(address: str) -> str:
    return address.strip().lower()


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    recipient: str
    status: str  # delivered, transient or permanent
    pdf_version: int

    def line(self) -> str:
        detail = {"delivered": f"DELIVERED 250 2.0.0 queued as msg-{self.number:03d} (report PDF v{self.pdf_version})",
                  "transient": f"FAILED {TRANSIENT} (transient: the same send can succeed later)",
                  "permanent": f"FAILED {PERMANENT} (permanent: this address will never accept mail)"}[self.status]
        return f"send #{self.number} to {self.recipient}: {detail}"


class MailApi:
    """One episode's relay. `send` never raises: an unknown address is the caller's to reject first."""

    __slots__ = ("_flaps", "_unroutable", "attempts", "delivered", "known", "loops", "rejected")

    def __init__(self, known: frozenset[str], unroutable: frozenset[str], flaps: int):
        self.known = known
        self._unroutable = unroutable
        self._flaps = flaps
        self.attempts: list[Attempt] = []
        self.delivered: dict[str, int] = {}  # recipient -> PDF version it received
        self.rejected: set[str] = set()  # addresses that failed permanently
        self.loops = 0  # sends to an address that had already failed permanently

    def is_known(self, address: str) -> bool:
        return normalise(address) in self.known

    def send(self, address: str, pdf_version: int) -> Attempt:
        recipient = normalise(address)
        if recipient in self.rejected:  # known to be permanent, whatever the network does now
            self.loops += 1
        if self._flaps > 0:
            self._flaps -= 1
            status = "transient"
        elif recipient in self._unroutable:
            self.rejected.add(recipient)
            status = "permanent"
        else:
            self.delivered[recipient] = pdf_version
            status = "delivered"
        attempt = Attempt(len(self.attempts) + 1, recipient, status, pdf_version)
        self.attempts.append(attempt)
        return attempt

    @property
    def status(self) -> str:
        """A one-word summary for the observation."""
        if self.delivered:
            return "delivered"
        if not self.attempts:
            return "not_sent"
        return {"transient": "failed_transient", "permanent": "failed_permanent"}[self.attempts[-1].status]
