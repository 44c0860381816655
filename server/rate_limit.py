"""Token-bucket rate limits per client: packets per second and bytes per second.

Pure: every call takes the current time (s), so the same code runs in real and virtual time.
A refused packet consumes nothing, so a client that floods only loses its excess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    """Sustained rates and bursts of one client.

    Attributes:
        packets_per_s: sustained packets/s; 256 = 2x a 128 Hz client sending one packet per tick.
        packet_burst: bucket depth (packets); 64 = 0.25 s at that rate, so a client whose packets
            were held back by a network hiccup (Overwatch's 250 ms rewind cap) can flush them.
        bytes_per_s: sustained bytes/s; 2 x 128 Hz x 1200-byte datagrams = 307,200.
        byte_burst: bucket depth (bytes); 0.25 s at that rate.
    """

    packets_per_s: float = 256.0
    packet_burst: float = 64.0
    bytes_per_s: float = 307_200.0
    byte_burst: float = 76_800.0

    def __post_init__(self) -> None:
        for name in ("packets_per_s", "packet_burst", "bytes_per_s", "byte_burst"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"RateLimitConfig.{name} must be positive and finite, got {value!r}")


class RateVerdict(str, Enum):
    """Outcome of :meth:`ClientRateLimiter.allow`."""

    OK = "ok"
    PACKETS = "packets"
    """Over the packet rate."""
    BYTES = "bytes"
    """Over the byte rate."""


_OK = RateVerdict.OK
"""Module constant: reading an Enum member off its class costs ~50 ns more than a global."""


class TokenBucket:
    """``rate`` tokens per second refill a bucket of ``burst`` tokens; it starts full."""

    __slots__ = ("rate", "burst", "tokens", "_last_s")

    def __init__(self, rate: float, burst: float, now_s: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self._last_s = now_s

    def refill(self, now_s: float) -> None:
        """Add the tokens earned since the last call (a clock going backwards earns nothing)."""
        elapsed = now_s - self._last_s
        if elapsed > 0.0:
            self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
            self._last_s = now_s

    def take(self, cost: float, now_s: float) -> bool:
        """Spend ``cost`` tokens if available; False (and nothing spent) otherwise."""
        self.refill(now_s)
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False


class ClientRateLimiter:
    """Both buckets of one client; a packet passes only when both can pay for it."""

    __slots__ = ("packets", "bytes")

    def __init__(self, config: RateLimitConfig, now_s: float) -> None:
        self.packets = TokenBucket(config.packets_per_s, config.packet_burst, now_s)
        self.bytes = TokenBucket(config.bytes_per_s, config.byte_burst, now_s)

    def allow(self, size_bytes: int, now_s: float) -> RateVerdict:
        """Account one datagram of ``size_bytes`` arriving at ``now_s`` (s)."""
        packets, data = self.packets, self.bytes
        # TokenBucket.refill of both buckets, inline and without min() (a builtin call costs more
        # than the rest): this runs for every authenticated packet.
        elapsed = now_s - packets._last_s
        if elapsed > 0.0:
            tokens = packets.tokens + elapsed * packets.rate
            packets.tokens = tokens if tokens < packets.burst else packets.burst
            packets._last_s = now_s
        elapsed = now_s - data._last_s
        if elapsed > 0.0:
            tokens = data.tokens + elapsed * data.rate
            data.tokens = tokens if tokens < data.burst else data.burst
            data._last_s = now_s
        if packets.tokens < 1.0:
            return RateVerdict.PACKETS
        if data.tokens < size_bytes:
            return RateVerdict.BYTES
        packets.tokens -= 1.0
        data.tokens -= size_bytes
        return _OK


class SourceRateLimiter:
    """One packet bucket per source address, for the transport to drop a flood before decoding.

    The core's :class:`ClientRateLimiter` works on authenticated sessions, after a datagram is
    decoded; this one runs on every datagram read, so it is a dict lookup and a few float
    operations. Its rate and burst should be a multiple (>= 1) of the core's per-client ones, so
    it only cuts what the core would refuse anyway. Buckets idle long enough to be full again are
    forgotten when the table is full (at most once a second); beyond ``max_sources`` tracked
    sources a new source passes unlimited (the core's per-tick budget still bounds the work),
    so memory stays bounded under a flood from many addresses.
    """

    __slots__ = ("rate", "burst", "max_sources", "_buckets", "_idle_s", "_pruned_s")

    def __init__(self, packets_per_s: float, burst: float, max_sources: int = 16_384) -> None:
        """``packets_per_s``: sustained packets per second per source; ``burst``: bucket depth
        (packets); ``max_sources``: addresses tracked at most."""
        if not (math.isfinite(packets_per_s) and packets_per_s > 0.0 and math.isfinite(burst) and burst >= 1.0):
            raise ValueError(f"need a positive finite rate and a burst >= 1, got {packets_per_s!r}, {burst!r}")
        if max_sources < 1:
            raise ValueError(f"max_sources must be >= 1, got {max_sources!r}")
        self.rate = float(packets_per_s)
        self.burst = float(burst)
        self.max_sources = max_sources
        self._buckets: dict[object, list[float]] = {}
        self._idle_s = self.burst / self.rate
        self._pruned_s = -math.inf

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, source: object, now_s: float) -> bool:
        """Account one datagram from ``source`` (any hashable address) at ``now_s`` (s); False
        when the source is over its rate (nothing is spent then)."""
        bucket = self._buckets.get(source)
        if bucket is None:
            if len(self._buckets) >= self.max_sources and not self._prune(now_s):
                return True
            self._buckets[source] = [self.burst - 1.0, now_s]
            return True
        elapsed = now_s - bucket[1]
        if elapsed > 0.0:
            tokens = bucket[0] + elapsed * self.rate
            bucket[0] = tokens if tokens < self.burst else self.burst
            bucket[1] = now_s
        if bucket[0] < 1.0:
            return False
        bucket[0] -= 1.0
        return True

    def _prune(self, now_s: float) -> bool:
        """Forget the sources whose bucket is full again; True if there is room afterwards."""
        if now_s - self._pruned_s >= 1.0:
            self._pruned_s = now_s
            idle_before = now_s - self._idle_s
            for source in [s for s, b in self._buckets.items() if b[1] <= idle_before]:
                del self._buckets[source]
        return len(self._buckets) < self.max_sources
