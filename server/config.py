"""Server configuration: every tolerance named, with its unit and where its default comes from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lagcomp.config import HistoryConfig, HitregConfig, RewindPolicy
from physics.config import MovementConfig, ValidationConfig, WeaponConfig
from server.handshake import HandshakeConfig
from server.netstats import NetStatsConfig
from server.protocol import ProtocolLimits, max_entities_per_snapshot
from server.rate_limit import RateLimitConfig
from world.weapons import WeaponId


@dataclass(frozen=True, slots=True)
class VisibilityConfig:
    """Per-client visibility culling (REFERENCES 4 and 7: never send what cannot be seen).

    Attributes:
        enabled: cull snapshots by line of sight (False sends every player to everyone).
        refresh_hz: how often each viewer's visible set is recomputed (Hz); viewers are spread
            over the ticks so the cost per tick is even (VALORANT-style amortised fog of war).
        horizon_margin_s: extra prediction horizon (s) on top of the viewer's latency and the
            refresh period, so that a player about to come round a corner is sent early
            and never pops in late.
        lateral_m: half-width (m) of the target's sampled extents beside its centre line (the
            body bound is 0.55-0.59 m, so the edge of a shoulder or a held gun counts).
    """

    enabled: bool = True
    refresh_hz: float = 16.0
    horizon_margin_s: float = 0.1
    lateral_m: float = 0.55

    def __post_init__(self) -> None:
        if not self.refresh_hz > 0 or self.horizon_margin_s < 0 or self.lateral_m < 0:
            raise ValueError("visibility: refresh_hz must be > 0, margins >= 0")


@dataclass(frozen=True, slots=True)
class BaitConfig:
    """AimDetect's bait target (REFERENCES 5): after a kill, an invisible target above the victim.

    Attributes:
        enabled: place baits.
        duration_s: how long a bait stays (s); inertial shots come within a second of a kill.
        height_m: height of the bait's centre above the victim's feet (m): just above a standing
            head (top 1.80 m), so honest inertial shots at the body pass below it.
        radius_m: bait sphere radius (m), a head-sized target.
    """

    enabled: bool = True
    duration_s: float = 1.0
    height_m: float = 2.15
    radius_m: float = 0.15


@dataclass(frozen=True, slots=True)
class PhantomConfig:
    """The phantom (``server.phantoms``): per viewer, one extra entity record exactly like an
    enemy player's, walking the map always out of the viewer's line of sight. Only a client that
    draws what a human cannot see (a wallhack) ever aims at it or walks toward it.

    Rate: each viewer has at most one phantom; it lives ``lifetime_s`` (6 s), then after
    ``gap_s`` (1 s) a new one is placed, so a living viewer has a phantom up to 85 % of its
    play (less where no hidden place is found at once). A phantom that would come into sight takes another heading, or is removed at once
    (a new one after ``gap_s``); every removal leaves the snapshots for at least ``gap_s``,
    longer than any client's interpolation, so no client draws it jumping.

    Attributes:
        enabled: place phantoms.
        min_range_m, max_range_m: the phantom is placed this far from the viewer (m): the range
            at which the culler sends real players about to come round a corner.
        lifetime_s: how long one phantom lives (s). gap_s: none between two (s).
        speed_min_m_s, speed_max_m_s: each leg's walking to running speed (m/s; the weapons'
            top speeds are 3.8-6.1 m/s, walking about half).
        leg_min_s, leg_max_s: a straight leg of the walk lasts this long at most (s; shorter
            where a wall stops it).
        horizon_margin_s: the viewer's eye is checked where it may be up to its round trip +
            the check period + this margin ahead (s): what it sees before the next check, and
            until a removed phantom leaves what its client draws (the client's interpolation,
            0.1 s, is inside the margin).
        trail_s: the phantom's positions of the last ``trail_s`` (s) are checked too: a client
            draws an entity where it was a round trip and its interpolation ago.
        lateral_m: half-width of the checked body beside its centre line (m; the body bound is
            0.55-0.59 m).
        candidates: random positions tried per placement; headings: per new leg.
    """

    enabled: bool = True
    min_range_m: float = 6.0
    max_range_m: float = 25.0
    lifetime_s: float = 6.0
    gap_s: float = 1.0
    speed_min_m_s: float = 2.2
    speed_max_m_s: float = 4.6
    leg_min_s: float = 0.8
    leg_max_s: float = 3.0
    horizon_margin_s: float = 0.3
    trail_s: float = 0.5
    lateral_m: float = 0.6
    candidates: int = 24
    headings: int = 8

    def __post_init__(self) -> None:
        if not 0.0 < self.min_range_m < self.max_range_m or not 0.0 < self.speed_min_m_s <= self.speed_max_m_s:
            raise ValueError("phantom: need 0 < min_range_m < max_range_m and 0 < speed_min <= speed_max")
        if not 0.0 < self.leg_min_s <= self.leg_max_s or self.lifetime_s <= 0.0 or self.gap_s <= 0.0:
            raise ValueError("phantom: need 0 < leg_min_s <= leg_max_s, lifetime_s > 0, gap_s > 0")
        if self.horizon_margin_s < 0.0 or self.trail_s < 0.0 or self.lateral_m < 0.0:
            raise ValueError("phantom: margins must be >= 0")
        if self.candidates < 1 or self.headings < 1:
            raise ValueError("phantom: candidates and headings must be >= 1")


@dataclass(frozen=True, slots=True)
class CrosshairProbeConfig:
    """Which commands get a crosshair probe.

    Attributes:
        enabled: cast the probe (off: every AimSample's ``crosshair_target`` is None).
        cone_deg: cast when the nearest visible enemy is within this angle of the view (deg), at
            its un-rewound chest: 45 deg covers a target that moved 2.4 m (0.4 s at 6 m/s) since
            the client drew it, from 3 m away.
        near_m: ... or nearer than this (m), where a rewind can move a target by more than that.
    """

    enabled: bool = True
    cone_deg: float = 45.0
    near_m: float = 5.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.cone_deg <= 180.0) or not self.near_m >= 0.0:
            raise ValueError("crosshair probe: cone_deg in [0, 180] and near_m >= 0")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server core needs besides the map.

    Attributes:
        tick_rate_hz: fixed simulation rate (Hz): 64 (CS2) default, 128 (VALORANT) supported.
        snapshot_interval_ticks: send each client a snapshot every N ticks; 0 = automatic (every
            tick up to 64 Hz, every second tick at 128 Hz: 64 snapshots/s either way). Clients
            take turns by slot (slot % N == tick % N), so every tick sends 1/N of them.
        max_clients: simultaneous players (slots).
        client_timeout_s: a client silent this long is disconnected (s).
        respawn_delay_s: time dead before respawning (s).
        correction_resend_s: a respawn CORRECTION is sent again this often (s) until the client's
            claims show it arrived: UDP may lose it, and a client that never learns where it
            spawned claims its old position, which looks like a teleport.
        primaries: weapons a player may spawn holding (one is drawn per spawn from the seeded rng);
            every player also carries the pistol as secondary.
        connection_sample_interval_s: how often connection quality goes to the detectors (s).
        max_datagrams_per_tick: datagrams processed per tick at most; the transport keeps the
            rest for later ticks or drops them (counted), so a flood cannot grow the work.
        max_queued_commands: commands kept per client awaiting their tick (older ones dropped).
        history_s: seconds of lag-compensation history kept (1..10 s; Source keeps 1 s).
        crosshair: which commands get the lag-compensated crosshair probe (``server.crosshair_probe``).
    """

    tick_rate_hz: int = 64
    snapshot_interval_ticks: int = 0
    max_clients: int = 64
    client_timeout_s: float = 10.0
    respawn_delay_s: float = 2.0
    correction_resend_s: float = 0.2
    primaries: tuple[int, ...] = (
        int(WeaponId.ASSAULT_RIFLE),
        int(WeaponId.SMG),
        int(WeaponId.RIFLE),
        int(WeaponId.SHOTGUN),
        int(WeaponId.SNIPER),
    )
    connection_sample_interval_s: float = 0.25
    max_datagrams_per_tick: int = 2048
    max_queued_commands: int = 16
    history_s: float = 1.0
    rewind: RewindPolicy = field(default_factory=RewindPolicy)
    hitreg: HitregConfig = field(default_factory=HitregConfig)
    movement: MovementConfig = field(default_factory=MovementConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    weapons: WeaponConfig = field(default_factory=WeaponConfig)
    visibility: VisibilityConfig = field(default_factory=VisibilityConfig)
    bait: BaitConfig = field(default_factory=BaitConfig)
    phantom: PhantomConfig = field(default_factory=PhantomConfig)
    crosshair: CrosshairProbeConfig = field(default_factory=CrosshairProbeConfig)
    protocol: ProtocolLimits = field(default_factory=ProtocolLimits)
    handshake: HandshakeConfig = field(default_factory=HandshakeConfig)
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)
    netstats: NetStatsConfig = field(default_factory=NetStatsConfig)

    def __post_init__(self) -> None:
        if self.tick_rate_hz not in range(16, 257):
            raise ValueError(f"tick_rate_hz must be in [16, 256], got {self.tick_rate_hz}")
        if not 1 <= self.max_clients <= 200:
            raise ValueError("max_clients must be in [1, 200] (entity ids 200-255 are baits)")
        if not self.primaries:
            raise ValueError("primaries must name at least one weapon")
        self.history()  # refuses a history length the lag compensation cannot keep, when read
        if not (math.isfinite(self.client_timeout_s) and self.client_timeout_s > 0.0):
            raise ValueError(f"client_timeout_s must be positive and finite, got {self.client_timeout_s}")
        room = self.snapshot_bait_room()
        if room < 0:
            raise ValueError(
                f"a snapshot must hold every other player ({self.max_clients - 1}) in at most "
                f"{self.protocol.max_snapshot_parts} datagrams of {self.protocol.max_datagram_bytes} bytes; "
                f"{room + self.max_clients - 1} entity records fit them"
            )

    def max_packet_jump(self) -> int:
        """How far ahead of a client's newest packet_seq its next one may be (packets): more than
        it can send, at its rate limit, in the silence after which it is disconnected."""
        limit = self.rate_limit
        return math.ceil(limit.packets_per_s * self.client_timeout_s + limit.packet_burst)

    def snapshot_bait_room(self) -> int:
        """Entity records a snapshot can carry beyond every other player (bait records): what
        ``max_snapshot_parts`` datagrams hold less ``max_clients - 1`` (negative: not even the
        players fit). A client refuses a snapshot of more parts, so no snapshot may need them."""
        per_part = max(0, max_entities_per_snapshot(self.protocol))
        return per_part * self.protocol.max_snapshot_parts - (self.max_clients - 1)

    @property
    def tick_dt_s(self) -> float:
        """Duration of one tick (s)."""
        return 1.0 / self.tick_rate_hz

    @property
    def snapshot_every(self) -> int:
        """Ticks between two snapshots."""
        if self.snapshot_interval_ticks > 0:
            return self.snapshot_interval_ticks
        return max(1, self.tick_rate_hz // 64)

    def history(self) -> HistoryConfig:
        """The lag-compensation history for this tick rate."""
        return HistoryConfig(tick_rate_hz=float(self.tick_rate_hz), length_s=self.history_s)
