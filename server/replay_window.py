"""Per-client packet sequence replay protection (netcode.io's 256-entry window).

Every authenticated packet carries a sequence number. A packet is refused when its number was
already seen (a duplicate or a replay) or when it is so old that the window no longer remembers
whether it was seen; any other number is accepted, including ones that arrive out of order.
Sequence numbers are uint32 and are not expected to wrap: at 128 packets/s that takes 388 days.
"""

from __future__ import annotations

from enum import Enum

DEFAULT_WINDOW = 256
"""Entries remembered (netcode.io's replay buffer size): 2 s of packets at 128 Hz."""


class ReplayVerdict(str, Enum):
    """Outcome of offering a sequence number to the window."""

    FRESH = "fresh"
    DUPLICATE = "duplicate"
    TOO_OLD = "too_old"


_FRESH = ReplayVerdict.FRESH
"""Module constant: reading an Enum member off its class costs ~50 ns more than a global."""


class ReplayWindow:
    """Remembers the newest ``size`` sequence numbers of one client.

    Slot ``seq % size`` holds the last number stored there (-1 for none), so a lookup is O(1)
    and the state is bounded whatever the client sends.
    """

    __slots__ = ("size", "_seen", "newest")

    def __init__(self, size: int = DEFAULT_WINDOW) -> None:
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        self.size = size
        self._seen: list[int] = [-1] * size
        self.newest: int = -1
        """Highest sequence number accepted so far (-1 before the first)."""

    def check(self, seq: int) -> ReplayVerdict:
        """Classify ``seq`` without recording it."""
        if seq < 0:
            return ReplayVerdict.TOO_OLD
        if seq + self.size <= self.newest:
            return ReplayVerdict.TOO_OLD
        if self._seen[seq % self.size] == seq:
            return ReplayVerdict.DUPLICATE
        return ReplayVerdict.FRESH

    def accept(self, seq: int) -> ReplayVerdict:
        """Classify ``seq`` and, when FRESH, record it. Call only after the packet authenticated,
        so that a forged packet cannot push the window forward."""
        # check(), inline: this runs for every authenticated packet.
        if seq < 0 or seq + self.size <= self.newest:
            return ReplayVerdict.TOO_OLD
        index = seq % self.size
        if self._seen[index] == seq:
            return ReplayVerdict.DUPLICATE
        self._seen[index] = seq
        if seq > self.newest:
            self.newest = seq
        return _FRESH
