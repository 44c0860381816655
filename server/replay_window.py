"""Per-client packet sequence replay protection (netcode.io's 256-entry window).

Every authenticated packet carries a sequence number. A packet is refused when its number was
already seen (a duplicate or a replay) or when it is so old that the window no longer remembers
whether it was seen; any other number is accepted, including ones that arrive out of order.
Sequence numbers are uint32 and are not expected to wrap: at 128 packets/s that takes 388 days.

One refusal netcode.io does not need: a number further ahead of the newest than ``max_jump``.
netcode.io encrypts and authenticates every packet, so nobody can forge its sequence number; our
session token authenticates the sender but not the packet's fields, so one packet with a forged
(or corrupted) number near 2**32 would push the window past every number the client will ever
send, and lock it out for good. A client cannot legitimately get that far ahead: the server's
caller sets ``max_jump`` to more packets than the client can send in the silence after which
it is disconnected anyway.
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
    TOO_NEW = "too_new"


_FRESH = ReplayVerdict.FRESH
"""Module constant: reading an Enum member off its class costs ~50 ns more than a global."""


class ReplayWindow:
    """Remembers the newest ``size`` sequence numbers of one client.

    Slot ``seq % size`` holds the last number stored there (-1 for none), so a lookup is O(1)
    and the state is bounded whatever the client sends.
    """

    __slots__ = ("size", "max_jump", "_seen", "newest")

    def __init__(self, size: int = DEFAULT_WINDOW, max_jump: int = 2**32) -> None:
        """``size``: numbers remembered. ``max_jump``: how far ahead of the newest accepted number
        the next one may be (packets); the first number of a session may be anything."""
        if size < 1 or max_jump < 1:
            raise ValueError(f"size and max_jump must be positive, got {size} and {max_jump}")
        self.size = size
        self.max_jump = max_jump
        self._seen: list[int] = [-1] * size
        self.newest: int = -1
        """Highest sequence number accepted so far (-1 before the first)."""

    def check(self, seq: int) -> ReplayVerdict:
        """Classify ``seq`` without recording it."""
        if seq < 0:
            return ReplayVerdict.TOO_OLD
        if seq + self.size <= self.newest:
            return ReplayVerdict.TOO_OLD
        if self.newest >= 0 and seq - self.newest > self.max_jump:
            return ReplayVerdict.TOO_NEW
        if self._seen[seq % self.size] == seq:
            return ReplayVerdict.DUPLICATE
        return ReplayVerdict.FRESH

    def accept(self, seq: int) -> ReplayVerdict:
        """Classify ``seq`` and, when FRESH, record it. Call only after the packet authenticated,
        so that a forged packet cannot push the window forward."""
        # check(), inline: this runs for every authenticated packet.
        if seq < 0 or seq + self.size <= self.newest:
            return ReplayVerdict.TOO_OLD
        if self.newest >= 0 and seq - self.newest > self.max_jump:
            return ReplayVerdict.TOO_NEW
        index = seq % self.size
        if self._seen[index] == seq:
            return ReplayVerdict.DUPLICATE
        self._seen[index] = seq
        if seq > self.newest:
            self.newest = seq
        return _FRESH
