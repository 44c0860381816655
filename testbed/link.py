"""User-space network link emulator: latency, jitter, loss, burst loss, duplication, reordering, rate.

The kernel on the lab machines has no netem (REFERENCES section 9), so impaired links are
emulated here. The core is pure: no clock and no sockets inside. Time is passed in as
``now_s`` (seconds, any monotonic origin: ``loop.time()`` behind real UDP, a virtual clock
in-process), every random choice draws from an injected ``numpy.random.Generator``, so the
delivery schedule is a deterministic function of the seed and the submissions.

A ``Link`` is ONE direction. ``latency_ms`` is the ONE-WAY delay: a client that should see a
"ping" (round trip) of 300 ms gets ``latency_ms=150`` on each direction; ``PathConfig.from_ping``
does that halving. Loss likewise applies per direction, so a request/response exchange over a
path with loss ``p`` each way succeeds with probability ``(1 - p) ** 2``.

Order of the decisions for each submitted packet (netem's order): loss (plain or
Gilbert-Elliott), then duplication, then delay (rate queue, latency + jitter, reorder hold-back),
then the queue limit. The generator is consumed by a fixed number of draws per submission
whatever the outcome, so changing ``loss`` does not shift the jitter of later packets. Those
draws are taken ahead, a block of packets at a time, in one compiled call (the same numbers in the
same order as one ``random(4)``, ``standard_normal(2)`` [, ``pareto(2)``] per packet): a link's
generator must be its own.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numba
import numpy as np

JitterDistribution = Literal["normal", "pareto_normal"]

# Lomax (numpy's ``pareto``) with shape a has mean 1/(a-1) and variance a/((a-1)^2 (a-2)): used
# to standardize it. Shape 5 keeps a heavy right tail (skewness ~2.5 after mixing) while the
# fourth moment stays finite, so a measured standard deviation converges to ``jitter_ms``;
# shape 3 (closer to netem's table) made sample deviations of 5000 packets stray by 25 %.
_PARETO_SHAPE = 5.0
_PARETO_MEAN = 1.0 / (_PARETO_SHAPE - 1.0)
_PARETO_STD = math.sqrt(_PARETO_SHAPE / ((_PARETO_SHAPE - 1.0) ** 2 * (_PARETO_SHAPE - 2.0)))
# netem's "paretonormal" mixes a quarter normal with three quarters Pareto; weights are on the
# variance so the sum keeps unit variance and ``jitter_ms`` stays the standard deviation.
_PN_NORMAL_W = math.sqrt(0.25)
_PN_PARETO_W = math.sqrt(0.75)

_DRAW_BLOCK = 256
"""Packets whose random draws are taken in one call (the call costs ~10 us of argument handling,
one packet's draws through numpy ~1.5 us)."""


@numba.njit(cache=True, nogil=True)
def _draws(rng: np.random.Generator, n: int, pareto: bool) -> np.ndarray:  # pragma: no cover - compiled
    """(n, 8) draws of n packets, in the order numpy's per-packet calls make them: 4 uniforms
    [loss, duplicate, reorder, burst state], 2 standard normals, then (``pareto``) 2 Lomax draws
    of shape ``_PARETO_SHAPE`` (else zeros). Numba's generator methods are numpy's algorithms on
    the same bit generator: the numbers and the generator's final state are the same."""
    out = np.zeros((n, 8))
    for i in range(n):
        for j in range(4):
            out[i, j] = rng.random()
        for j in range(4, 6):
            out[i, j] = rng.standard_normal()
        if pareto:
            for j in range(6, 8):
                out[i, j] = rng.pareto(_PARETO_SHAPE)
    return out


# Compile (or load from numba's cache) now, not at a link's first packet.
_draws(np.random.default_rng(0), 1, True)


def _fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a finite fraction in [0, 1], got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _from_mapping_keys(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {unknown} (known: {sorted(known)})")
    return dict(data)


@dataclass(frozen=True, slots=True)
class GilbertElliott:
    """Two-state (good/bad) Markov burst-loss model, netem's ``loss gemodel p r 1-h 1-k``.

    The state moves once per submitted packet, then the packet is lost with the loss
    probability of the state it is in. The link starts in the good state.

    Attributes:
        p_enter_bad: probability (0..1) of moving good -> bad before a packet.
        p_leave_bad: probability (0..1) of moving bad -> good before a packet; the mean length
            of a bad period is ``1 / p_leave_bad`` packets.
        loss_in_good: loss probability (0..1) while good (netem's ``1-k``). Default 0.
        loss_in_bad: loss probability (0..1) while bad (netem's ``1-h``). Default 1.
    """

    p_enter_bad: float
    p_leave_bad: float
    loss_in_good: float = 0.0
    loss_in_bad: float = 1.0

    def __post_init__(self) -> None:
        _fraction("p_enter_bad", self.p_enter_bad)
        _fraction("p_leave_bad", self.p_leave_bad)
        _fraction("loss_in_good", self.loss_in_good)
        _fraction("loss_in_bad", self.loss_in_bad)

    @property
    def bad_fraction(self) -> float:
        """Stationary share (0..1) of packets sent in the bad state."""
        total = self.p_enter_bad + self.p_leave_bad
        # Both zero: the chain never leaves its initial good state.
        return 0.0 if total == 0.0 else self.p_enter_bad / total

    @property
    def mean_loss(self) -> float:
        """Long-run loss fraction (0..1)."""
        bad = self.bad_fraction
        return bad * self.loss_in_bad + (1.0 - bad) * self.loss_in_good

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GilbertElliott:
        """Build from a decoded TOML table; unknown keys raise ValueError."""
        return cls(**_from_mapping_keys(cls, data))


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """Impairments of one direction of a path.

    Attributes:
        latency_ms: ONE-WAY base delay (ms). A round-trip "ping" of 300 ms is 150 ms each way.
        jitter_ms: standard deviation (ms) of the per-packet delay noise added to
            ``latency_ms``; the total delay is clipped at 0 (a packet never arrives before it
            was sent), which shrinks the spread when ``jitter_ms`` is comparable to the latency.
        jitter_distribution: ``"normal"`` or ``"pareto_normal"`` (netem-style heavy right tail,
            zero mean, unit variance before scaling by ``jitter_ms``).
        loss: independent loss probability (0..1) per packet. Must be 0 when ``loss_burst``
            is set (the two models are alternatives, not additive).
        loss_burst: optional Gilbert-Elliott burst-loss model replacing ``loss``.
        duplicate: probability (0..1) that a delivered packet is delivered twice; the copy is
            delayed independently (its own jitter draw).
        reorder: probability (0..1) that a packet is held back by ``reorder_extra_ms`` beyond
            its normal delay and taken out of the FIFO chain, so packets sent after it may
            overtake it (counted as ``reordered`` whether or not anything actually overtakes).
        reorder_extra_ms: extra hold-back (ms) of a reordered packet. Default 20 ms.
        rate_kbit_s: optional bottleneck bandwidth (kilobits per second, 1 kbit = 1000 bits).
            Packets are serialized one after the other (``len * 8 / rate``) before the
            propagation delay, like netem's ``rate``. None means unlimited.
        queue_limit: packets in flight (accepted, not yet delivered) above which new packets
            are dropped and counted as ``overflowed``, so a flood cannot grow memory.
            Default 1000 (netem's default ``limit``).
        preserve_order: when True (default), jitter never reorders: a packet is never
            scheduled before the previous non-reordered packet of the same link, so packets
            bunch up behind a slow one instead of overtaking it (what a single router queue
            does, and what netem does with ``rate``). Reordering then only comes from
            ``reorder``. When False, each packet keeps its own jittered time and jitter alone
            reorders (netem's tfifo behaviour without ``rate``).
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    jitter_distribution: JitterDistribution = "normal"
    loss: float = 0.0
    loss_burst: GilbertElliott | None = None
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_extra_ms: float = 20.0
    rate_kbit_s: float | None = None
    queue_limit: int = 1000
    preserve_order: bool = True

    def __post_init__(self) -> None:
        _non_negative("latency_ms", self.latency_ms)
        _non_negative("jitter_ms", self.jitter_ms)
        if self.jitter_distribution not in ("normal", "pareto_normal"):
            raise ValueError(
                f"jitter_distribution must be 'normal' or 'pareto_normal', got {self.jitter_distribution!r}"
            )
        _fraction("loss", self.loss)
        _fraction("duplicate", self.duplicate)
        _fraction("reorder", self.reorder)
        _non_negative("reorder_extra_ms", self.reorder_extra_ms)
        if self.loss_burst is not None:
            if not isinstance(self.loss_burst, GilbertElliott):
                raise ValueError(f"loss_burst must be a GilbertElliott or None, got {self.loss_burst!r}")
            if self.loss != 0.0:
                raise ValueError("set either loss or loss_burst, not both")
        if self.rate_kbit_s is not None:
            if isinstance(self.rate_kbit_s, bool) or not (math.isfinite(self.rate_kbit_s) and self.rate_kbit_s > 0.0):
                raise ValueError(f"rate_kbit_s must be a positive finite number or None, got {self.rate_kbit_s!r}")
        if isinstance(self.queue_limit, bool) or not isinstance(self.queue_limit, int) or self.queue_limit < 1:
            raise ValueError(f"queue_limit must be an integer >= 1, got {self.queue_limit!r}")
        if not isinstance(self.preserve_order, bool):
            raise ValueError(f"preserve_order must be a bool, got {self.preserve_order!r}")

    @property
    def mean_loss(self) -> float:
        """Long-run loss fraction (0..1) of this direction, whichever loss model is set."""
        return self.loss_burst.mean_loss if self.loss_burst is not None else self.loss

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LinkConfig:
        """Build from a decoded TOML table (``loss_burst`` as a nested table); unknown keys raise."""
        values = _from_mapping_keys(cls, data)
        burst = values.get("loss_burst")
        if isinstance(burst, Mapping):
            values["loss_burst"] = GilbertElliott.from_mapping(burst)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class PathConfig:
    """Both directions of a client's path.

    Attributes:
        uplink: client -> server direction.
        downlink: server -> client direction.
    """

    uplink: LinkConfig = field(default_factory=LinkConfig)
    downlink: LinkConfig = field(default_factory=LinkConfig)

    @classmethod
    def symmetric(cls, config: LinkConfig) -> PathConfig:
        """The same impairments in both directions."""
        return cls(uplink=config, downlink=config)

    @classmethod
    def from_ping(cls, ping_ms: float, **link_fields: Any) -> PathConfig:
        """A symmetric path whose round trip is ``ping_ms`` (ms): ``ping_ms / 2`` each way.

        Other ``LinkConfig`` fields apply to each direction as given (so ``loss=p`` loses a
        fraction ``1 - (1 - p) ** 2`` of round trips).
        """
        _non_negative("ping_ms", ping_ms)
        return cls.symmetric(LinkConfig(latency_ms=ping_ms / 2.0, **link_fields))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PathConfig:
        """Build from a decoded TOML table with optional ``uplink``/``downlink`` sub-tables."""
        values = _from_mapping_keys(cls, data)
        return cls(
            uplink=LinkConfig.from_mapping(values.get("uplink", {})),
            downlink=LinkConfig.from_mapping(values.get("downlink", {})),
        )


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Counters of one link (packets).

    Attributes:
        sent: packets submitted.
        dropped: packets lost by the loss model (``loss`` or ``loss_burst``).
        overflowed: packets or duplicate copies refused because ``queue_limit`` was reached.
        duplicated: extra copies made by the duplication model (each then subject to the
            queue limit like any packet).
        reordered: packets held back by the reorder model.
        delivered: packets (copies included) handed out by ``due``.
        in_flight: packets accepted and not yet delivered.

    Identity: ``sent - dropped + duplicated - overflowed == delivered + in_flight``.
    """

    sent: int
    dropped: int
    overflowed: int
    duplicated: int
    reordered: int
    delivered: int
    in_flight: int


def _pareto_noise(n0: float, n1: float, p0: float, p1: float) -> tuple[float, float]:
    """``pareto_normal``'s two unit-variance, zero-mean delay noises (original and duplicate copy)
    from a packet's two standard normals and two Lomax draws (the other distribution uses the
    normals as they are)."""
    # numpy's element-wise operations, one element at a time: the same roundings.
    p0, p1 = (p0 - _PARETO_MEAN) / _PARETO_STD, (p1 - _PARETO_MEAN) / _PARETO_STD
    return _PN_NORMAL_W * n0 + _PN_PARETO_W * p0, _PN_NORMAL_W * n1 + _PN_PARETO_W * p1


class Link:
    """One direction of an impaired path; pure and deterministic for a given generator.

    ``submit`` decides a packet's fate and delivery time; ``due`` hands out, in delivery
    order, every packet whose time has come; ``next_due_s`` lets a scheduler (real or virtual
    time) sleep or jump straight to the next delivery. Packets due at the same instant come
    out in submission order.
    """

    __slots__ = (
        "_config",
        "_rng",
        "_queue",
        "_seq",
        "_fifo_tail_s",
        "_busy_until_s",
        "_bad_state",
        "_latency_s",
        "_jitter_s",
        "_extra_s",
        "_sent",
        "_block",
        "_next",
        "_pareto",
        "_dropped",
        "_overflowed",
        "_duplicated",
        "_reordered",
        "_delivered",
    )

    def __init__(self, config: LinkConfig, rng: np.random.Generator) -> None:
        self._config = config
        self._rng = rng
        self._queue: list[tuple[float, int, bytes]] = []
        self._seq = 0
        self._fifo_tail_s = -math.inf
        self._busy_until_s = -math.inf
        self._bad_state = False
        self._latency_s = config.latency_ms / 1000.0
        self._jitter_s = config.jitter_ms / 1000.0
        self._extra_s = config.reorder_extra_ms / 1000.0
        self._pareto = config.jitter_distribution == "pareto_normal"
        self._block: list[list[float]] = []  # draws of the next packets (rows of ``_draws``)
        self._next = 0
        self._sent = 0
        self._dropped = 0
        self._overflowed = 0
        self._duplicated = 0
        self._reordered = 0
        self._delivered = 0

    @property
    def config(self) -> LinkConfig:
        """The impairments of this link."""
        return self._config

    @property
    def in_flight(self) -> int:
        """Packets accepted and not yet delivered."""
        return len(self._queue)

    def stats(self) -> LinkStats:
        """A snapshot of the counters."""
        return LinkStats(
            sent=self._sent,
            dropped=self._dropped,
            overflowed=self._overflowed,
            duplicated=self._duplicated,
            reordered=self._reordered,
            delivered=self._delivered,
            in_flight=len(self._queue),
        )

    def submit(self, payload: bytes, now_s: float) -> None:
        """Offer a packet sent at ``now_s`` (s); it is dropped, or scheduled (maybe twice)."""
        if not math.isfinite(now_s):
            raise ValueError(f"now_s must be finite, got {now_s!r}")
        cfg = self._config
        self._sent += 1
        # Fixed draws per packet: [loss, duplicate, reorder, burst-state transition], 2 noises.
        if self._next == len(self._block):
            self._block = _draws(self._rng, _DRAW_BLOCK, self._pareto).tolist()
            self._next = 0
        u_loss, u_dup, u_reorder, u_state, n0, n1, p0, p1 = self._block[self._next]
        self._next += 1
        noise = _pareto_noise(n0, n1, p0, p1) if self._pareto else (n0, n1)

        if cfg.loss_burst is not None:
            ge = cfg.loss_burst
            if self._bad_state:
                self._bad_state = u_state >= ge.p_leave_bad
            else:
                self._bad_state = u_state < ge.p_enter_bad
            p_loss = ge.loss_in_bad if self._bad_state else ge.loss_in_good
        else:
            p_loss = cfg.loss
        if u_loss < p_loss:
            self._dropped += 1
            return

        reorder = u_reorder < cfg.reorder
        if reorder:
            self._reordered += 1
        self._schedule(payload, now_s, noise[0], reorder)
        if u_dup < cfg.duplicate:
            # The copy is made before the queue, so it may overflow like any packet.
            self._duplicated += 1
            self._schedule(payload, now_s, noise[1], False)

    def due(self, now_s: float) -> list[bytes]:
        """Remove and return the packets whose delivery time is <= ``now_s`` (s), in order."""
        queue = self._queue
        out: list[bytes] = []
        while queue and queue[0][0] <= now_s:
            out.append(heapq.heappop(queue)[2])
        self._delivered += len(out)
        return out

    def next_due_s(self) -> float | None:
        """Delivery time (s) of the next packet, or None when nothing is in flight."""
        return self._queue[0][0] if self._queue else None

    def _schedule(self, payload: bytes, now_s: float, noise: float, reorder: bool) -> None:
        """Queue one copy, unless the queue limit refuses it."""
        cfg = self._config
        if len(self._queue) >= cfg.queue_limit:
            self._overflowed += 1
            return
        start_s = now_s
        if cfg.rate_kbit_s is not None:
            # Serialization at the bottleneck happens before propagation, one packet at a time.
            start_s = max(now_s, self._busy_until_s) + len(payload) * 8.0 / (cfg.rate_kbit_s * 1000.0)
            self._busy_until_s = start_s
        # max(0.0, d) and max(at_s, tail) as conditionals (same values, NaN included): per packet.
        delay = self._latency_s + self._jitter_s * noise
        at_s = start_s + (delay if delay > 0.0 else 0.0)  # noqa: FURB136
        if reorder:
            at_s += self._extra_s
        elif cfg.preserve_order:
            tail = self._fifo_tail_s
            if tail > at_s:  # noqa: PLR1730
                at_s = tail
            self._fifo_tail_s = at_s
        heapq.heappush(self._queue, (at_s, self._seq, payload))
        self._seq += 1


class LinkPair:
    """A bidirectional path: an uplink (client -> server) and a downlink (server -> client).

    Each direction gets its own generator spawned from ``rng``, so traffic in one direction
    never shifts the random decisions of the other.
    """

    __slots__ = ("_path", "uplink", "downlink")

    def __init__(self, path: PathConfig, rng: np.random.Generator) -> None:
        up_rng, down_rng = rng.spawn(2)
        self._path = path
        self.uplink = Link(path.uplink, up_rng)
        self.downlink = Link(path.downlink, down_rng)

    @classmethod
    def from_seed(cls, path: PathConfig, seed: int) -> LinkPair:
        """A pair whose two streams derive from one integer seed."""
        return cls(path, np.random.default_rng(seed))

    @property
    def path(self) -> PathConfig:
        """The impairments of both directions."""
        return self._path

    def next_due_s(self) -> float | None:
        """Earliest delivery time (s) over both directions, or None when both are empty."""
        up = self.uplink.next_due_s()
        down = self.downlink.next_due_s()
        if up is None:
            return down
        if down is None:
            return up
        return min(up, down)
