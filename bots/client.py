"""A sans-IO game client: the connection, the tick loop of a player, and its claims.

:class:`BotClient` holds no socket and reads no clock: a driver (``bots.udp`` over real UDP, or
an in-process network in virtual time) hands it datagrams with ``receive`` and calls ``step`` at
``next_step_s``; every datagram to send comes back from ``start``, ``step`` and ``disconnect``.
That keeps one client implementation for real-time and virtual-time runs, and makes it testable
without a network.

What it does, in PROTOCOL.md's terms:

* the handshake (CONNECT with a nonce -> CHALLENGE -> CHALLENGE_RESPONSE -> ACCEPT or REJECT),
  resending with backoff; then every packet carries the token and a packet sequence number;
* one client tick per server tick: build a :class:`~bots.perception.Perception` (own predicted
  state, entities interpolated at the view time), ask the brain, turn the Intent into a
  Command (movement predicted with the server's own movement code, ``bots.prediction``) and into
  shots when the client's own weapon prediction lets the weapon fire; each INPUT carries the
  newest 4 commands (Quake 3 redundancy) and their shots;
* shots carry the client's own hit detection as claims: a ray from the eye along view + recoil
  punch against the interpolated hitboxes and the walls (``WorldModel.cast_shot``);
* reconciliation with snapshots and CORRECTIONs, PING once a second for its own RTT;
* every step of that goes through :class:`bots.hooks.ClientHooks`, the identity by default.

Bad datagrams are counted by reason and dropped; nothing a server sends raises out of
``receive``. Units: meters, seconds, degrees. Client time (``now_s``) is any monotonic clock.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, NamedTuple, TypeVar

import numpy as np

from bots.hooks import ClientHooks
from bots.perception import Brain, Intent, Perception
from bots.prediction import MoveState, PredictionConfig, Predictor, state_from_correction
from bots.world_model import EntityView, ShotClaim, WorldModel, WorldModelConfig, seen_rows
from physics.buttons import ALL_BUTTONS, Buttons
from physics.config import WeaponConfig
from physics.evidence import FireKind
from physics.weapon_state import NO_WEAPON, WeaponState
from server.protocol import (
    DEFAULT_LIMITS,
    NONCE_BYTES,
    Accept,
    AcceptLimits,
    Challenge,
    ChallengeResponse,
    Command,
    Connect,
    Correction,
    Disconnect,
    Input,
    Notice,
    OwnState,
    Ping,
    Pong,
    ProtocolError,
    ProtocolLimits,
    Reject,
    ServerDisconnect,
    Shot,
    Snapshot,
    decode_server,
    encode,
    pack_command,
)
from world.constants import CROUCHING_EYE_M, STANCE_CROUCHING, STANCE_STANDING, STANDING_EYE_M
from world.geometry import MapGeometry
from world.mapfile import GameMap
from world.state import PITCH_LIMIT_DEG, view_direction, wrap_deg
from world.weapons import WeaponId, weapon as weapon_spec

log = logging.getLogger(__name__)

_K = TypeVar("_K", bound=Hashable)


class RepeatedWarning(Generic[_K]):
    """A warning logged once per process and key, every occurrence counted.

    The first occurrence of a key is logged at WARNING, saying that repeats are counted; every
    later one is logged at DEBUG only and counted, so a condition that every bot of a swarm meets
    (or that a datagram stream repeats) cannot flood the log. :meth:`counts` gives the totals.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._counts: dict[_K, int] = {}
        self._lock = threading.Lock()

    def __call__(self, key: _K, msg: str, *args: object) -> bool:
        """Count one occurrence of ``key``; log ``msg % args`` at WARNING if it is the first (then
        returns True), else at DEBUG."""
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
        if n == 1:
            self._log.warning(msg + " (logged once; repeats are counted)", *args)
            return True
        self._log.debug(msg + " (occurrence %d)", *args, n)
        return False

    def counts(self) -> dict[_K, int]:
        """Occurrences so far, by key."""
        with self._lock:
            return dict(self._counts)


_MAP_MISMATCH: RepeatedWarning[tuple[str, str]] = RepeatedWarning(log)
"""ACCEPTs naming another map than the client's, by (server map, client map)."""


def map_mismatches() -> dict[tuple[str, str], int]:
    """How many connections in this process were accepted by a server running another map than
    the client's, by (server map, client map); the first was logged as a warning."""
    return _MAP_MISMATCH.counts()


_WEAPON_IDS = frozenset(int(w) for w in WeaponId)
_FIRE = int(Buttons.FIRE)
_RELOAD = int(Buttons.RELOAD)
_EMPTY_HAND_SPEED_M_S = 6.0
"""Move speed (m/s) with no weapon, as the server core simulates it (only before a first spawn)."""
_U32 = 0xFFFF_FFFF


class ConnState(str, Enum):
    """Where the client is in its connection's life."""

    IDLE = "idle"
    CONNECTING = "connecting"
    """CONNECT sent, waiting for CHALLENGE."""
    CHALLENGED = "challenged"
    """CHALLENGE_RESPONSE sent, waiting for ACCEPT or REJECT."""
    CONNECTED = "connected"
    REJECTED = "rejected"
    DISCONNECTED = "disconnected"
    """Left (DISCONNECT sent) or told to leave (SERVER_DISCONNECT)."""
    TIMED_OUT = "timed_out"
    """No datagram from the server for ``server_timeout_s``."""
    FAILED = "failed"
    """The handshake got no answer within ``handshake_timeout_s``."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Client behaviour that is not the brain's.

    Attributes:
        default_tick_rate_hz: client ticks per second until ACCEPT announces the server's rate
            (Hz); CS2's 64.
        redundancy: commands per INPUT (the newest plus re-sends), capped by ACCEPT's
            ``max_commands``; Quake 3 sends the last 3 with the new one.
        ping_interval_s: PING period (s).
        rtt_gain: weight of a new RTT sample in the smoothed RTT (TCP's SRTT uses 1/8).
        handshake_retry_s: first resend of CONNECT / CHALLENGE_RESPONSE after this silence (s);
            PROTOCOL.md: about one second.
        handshake_backoff: each further resend waits this factor longer ...
        handshake_retry_max_s: ... up to this (s).
        handshake_timeout_s: give up the handshake after this long without ACCEPT (s).
        server_timeout_s: a connected client that hears nothing for this long stops (s); the
            server's own client timeout is 10 s.
        max_behind_s: a driver this late for a tick (s) skips the missed ticks instead of
            sending them in a burst (the server's timer check would drop the burst anyway).
        always_carried: weapons every player carries besides the spawn weapon (the game's rules
            as a real client ships them: the pistol is everyone's secondary).
        max_commands_per_step: cap on ``ClientHooks.commands_this_step``.
        max_held_datagrams: cap on datagrams held back by ``ClientHooks.hold_packet``; a full
            queue is released.
        notice_memory: NOTICE messages remembered (``BotClient.notices``).
        world: snapshot buffer, view time and interpolation (``interp_delay_s`` lives there).
        prediction: reconciliation tolerances and the movement constants.
        weapons: weapon mechanics constants (deploy time...) of the client's own weapon prediction.
        protocol: codec limits for decoding server datagrams.
    """

    default_tick_rate_hz: int = 64
    redundancy: int = 4
    ping_interval_s: float = 1.0
    rtt_gain: float = 0.125
    handshake_retry_s: float = 1.0
    handshake_backoff: float = 1.5
    handshake_retry_max_s: float = 4.0
    handshake_timeout_s: float = 30.0
    server_timeout_s: float = 10.0
    max_behind_s: float = 0.1
    always_carried: tuple[int, ...] = (int(WeaponId.PISTOL),)
    max_commands_per_step: int = 8
    max_held_datagrams: int = 128
    notice_memory: int = 32
    world: WorldModelConfig = field(default_factory=WorldModelConfig)
    prediction: PredictionConfig = field(default_factory=PredictionConfig)
    weapons: WeaponConfig = field(default_factory=WeaponConfig)
    protocol: ProtocolLimits = DEFAULT_LIMITS

    def __post_init__(self) -> None:
        if not 1 <= self.default_tick_rate_hz <= 1000:
            raise ValueError("ClientConfig.default_tick_rate_hz must be in [1, 1000]")
        if not 1 <= self.redundancy <= 255:
            raise ValueError("ClientConfig.redundancy must be in [1, 255]")
        for name in ("ping_interval_s", "handshake_retry_s", "handshake_retry_max_s", "handshake_timeout_s",
                     "server_timeout_s", "max_behind_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"ClientConfig.{name} must be positive and finite, got {value!r}")
        if not 0.0 < self.rtt_gain <= 1.0 or self.handshake_backoff < 1.0:
            raise ValueError("ClientConfig.rtt_gain must be in (0, 1] and handshake_backoff >= 1")
        if self.max_commands_per_step < 1 or self.max_held_datagrams < 1 or self.notice_memory < 0:
            raise ValueError("ClientConfig caps must be positive")
        if any(w not in _WEAPON_IDS for w in self.always_carried):
            raise ValueError("ClientConfig.always_carried names an unknown weapon")

    @property
    def interp_delay_s(self) -> float:
        """Interpolation delay (s): the world is rendered this far behind the server clock."""
        return self.world.interp_delay_s


@dataclass(frozen=True, slots=True)
class ClientStats:
    """Counters of one client (a snapshot: ``BotClient.stats`` builds a new one per call).

    Attributes:
        name, slot, state: identity and connection state; reject_code / disconnect_code: why the
            server refused or ended the session (None if it did not).
        datagrams_sent, bytes_sent, datagrams_received, bytes_received: traffic.
        bad_datagrams: received datagrams refused by the codec; bad_by_reason: the same by reason.
        unexpected: well-formed datagrams that made no sense in the current state (a CHALLENGE
            while connected, a PONG for no PING...), ignored.
        send_errors: sends the driver reported as failed.
        handshake_attempts: CONNECT and CHALLENGE_RESPONSE datagrams sent.
        commands: commands generated; inputs: INPUT datagrams; shots_sent: distinct shots (not
            counting re-sends); shots_dropped: hook shots naming a command outside the INPUT,
            or beyond the per-INPUT cap.
        snapshots: distinct snapshot ticks; snapshot_parts: SNAPSHOT datagrams;
            stale_snapshots: parts older than the buffer.
        corrections: CORRECTION messages applied; replays: reconciliations that re-simulated
            pending commands (a CORRECTION, or a snapshot disagreeing with the prediction).
        pings, pongs: PING sent, PONG matched; rtt_s: smoothed round trip (s), None before one.
        held_datagrams: datagrams held back by the fake-lag hook.
        deaths, spawns: own life-state transitions seen in snapshots.
        ticks_skipped: client ticks never played because the driver called ``step`` more than
            ``max_behind_s`` late (a starved process): no command covers them.
    """

    name: str
    slot: int | None
    state: ConnState
    reject_code: int | None
    disconnect_code: int | None
    datagrams_sent: int
    bytes_sent: int
    datagrams_received: int
    bytes_received: int
    bad_datagrams: int
    bad_by_reason: dict[str, int]
    unexpected: int
    send_errors: int
    handshake_attempts: int
    commands: int
    inputs: int
    shots_sent: int
    shots_dropped: int
    snapshots: int
    snapshot_parts: int
    stale_snapshots: int
    corrections: int
    replays: int
    pings: int
    pongs: int
    rtt_s: float | None
    held_datagrams: int
    deaths: int
    spawns: int
    ticks_skipped: int


class _WeaponMark(NamedTuple):
    """Own weapon prediction after a command: held weapon id, its magazine and reserve."""

    weapon: int
    ammo: int
    reserve: int


def _finite(x: float, fallback: float) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else fallback


def _cast(
    world: WorldModel,
    geometry: MapGeometry,
    state: MoveState,
    yaw_deg: float,
    pitch_deg: float,
    punch: tuple[float, float],
    weapon: int,
    view: EntityView,
    include_hidden: bool = False,
) -> ShotClaim:
    """Claim of a shot from the eye of ``state`` along view + punch (the fired yaw is
    ``yaw - punch_yaw``, pitch ``pitch + punch_pitch``, as in ``physics.weapon_state``)."""
    eye_h = CROUCHING_EYE_M if state.stance == STANCE_CROUCHING else STANDING_EYE_M
    eye = np.array([state.pos[0], state.pos[1], state.pos[2] + eye_h])
    aim_pitch = min(max(pitch_deg + punch[0], -90.0), 90.0)
    direction = view_direction(yaw_deg - punch[1], aim_pitch)
    return world.cast_shot(eye, direction, weapon_spec(weapon).max_range_m, view, geometry, include_hidden)


class BotClient:
    """One player's client, sans-IO (see the module docstring).

    Args:
        name: player name (1..32 UTF-8 bytes, printable).
        brain: decides every tick (``bots.perception.Brain``).
        game_map: the map the client ships (checked against ACCEPT's map name).
        rng: all of the client's randomness (nonce, brain, hooks) comes from it.
        config: client constants.
        hooks: cheat hooks; None is the honest identity.
        geometry: the map's prepared geometry; pass one shared instance for many bots (it is
            read-only and costly to build). Built from ``game_map`` when None.
    """

    def __init__(
        self,
        name: str,
        brain: Brain,
        game_map: GameMap,
        rng: np.random.Generator,
        config: ClientConfig = ClientConfig(),
        hooks: ClientHooks | None = None,
        geometry: MapGeometry | None = None,
    ) -> None:
        size = len(name.encode("utf-8"))
        if not 1 <= size <= config.protocol.max_name_bytes or not name.isprintable():
            raise ValueError(f"name must be 1..{config.protocol.max_name_bytes} printable UTF-8 bytes")
        self.name = name
        self.brain = brain
        self.game_map = game_map
        self.rng = rng
        self.config = config
        self.hooks = hooks if hooks is not None else ClientHooks()
        self.geometry = geometry if geometry is not None else MapGeometry(game_map)

        self._state = ConnState.IDLE
        self._nonce = b""
        self._cookie = b""
        self._token = b""
        self._slot: int | None = None
        self._tick_rate = config.default_tick_rate_hz
        self._limits: AcceptLimits | None = None
        self._reject_code: int | None = None
        self._disconnect_code: int | None = None
        self._handshake_start_s = 0.0
        self._resend_at_s = math.inf
        self._retry_s = config.handshake_retry_s
        self._next_step_s: float | None = None
        self._out: list[bytes] = []
        self._flush_at_s = 0.0
        self._held: list[bytes] = []
        self._last_recv_s = 0.0

        self._packet_seq = 0
        self._cmd_seq = 0
        self._tick = 0
        self._cmd_time_s = 0.0
        """Command clock (s): the sum of the durations of the commands generated, the clock the
        server runs weapon timing on (its per-player ``cmd_time_s``)."""
        self._history: deque[Command] = deque(maxlen=config.redundancy)
        self._records: deque[bytes] = deque(maxlen=config.redundancy)
        """The wire records of ``_history``, packed once each: every command is re-sent."""
        self._shots_by_seq: dict[int, list[Shot]] = {}
        self._ack_tick: int | None = None
        self._pings: dict[int, float] = {}
        self._last_ping_s = -math.inf
        self._rtt_s: float | None = None
        self._last_rtt_sample_s: float | None = None

        self.world = WorldModel(config.world)
        self._predictor = Predictor(self.geometry, MoveState((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), True, 0),
                                    config.prediction)
        self._weapons = WeaponState(1, config.weapons)
        # The owned weapons as the brain sees them, rebuilt only when the owned row changes (it
        # changes on spawn and pickup; the perception is built every tick).
        self._owned_key = b""
        self._owned: tuple[int, ...] = ()
        self._weapon_marks: dict[int, _WeaponMark] = {}
        self._alive = False
        self._health = 0.0
        self._yaw = 0.0
        self._pitch = 0.0
        self.notices: deque[Notice] = deque(maxlen=config.notice_memory)
        """The latest NOTICE messages (kill feed, spawns), newest last."""
        self.last_perception: Perception | None = None
        """The Perception handed to the brain at the last step (after ``hooks.perceive``)."""
        self.last_intent: Intent | None = None
        """The Intent executed at the last step (after ``hooks.intent``)."""

        self._c = dict.fromkeys(
            ("datagrams_sent", "bytes_sent", "datagrams_received", "bytes_received", "bad_datagrams",
             "unexpected", "send_errors", "handshake_attempts", "commands", "inputs", "shots_sent",
             "shots_dropped", "snapshots", "snapshot_parts", "stale_snapshots", "corrections", "pings",
             "pongs", "held_datagrams", "deaths", "spawns", "ticks_skipped"),
            0,
        )
        self._bad_by_reason: dict[str, int] = {}
        self.hooks.attach(self)

    # ---------------------------------------------------------------- public state

    @property
    def state(self) -> ConnState:
        """Connection state."""
        return self._state

    @property
    def connected(self) -> bool:
        """ACCEPT received and the session not ended."""
        return self._state is ConnState.CONNECTED

    @property
    def slot(self) -> int | None:
        """Own player slot (from ACCEPT), None before."""
        return self._slot

    @property
    def tick_rate_hz(self) -> int:
        """Client tick rate (Hz): the server's from ACCEPT, ``default_tick_rate_hz`` before."""
        return self._tick_rate

    @property
    def rtt_s(self) -> float | None:
        """Smoothed round-trip time from PING/PONG (s), None before the first PONG."""
        return self._rtt_s

    @property
    def last_rtt_sample_s(self) -> float | None:
        """The latest single RTT measurement (s)."""
        return self._last_rtt_sample_s

    @property
    def alive(self) -> bool:
        """Own life state as last seen in a snapshot."""
        return self._alive

    @property
    def predicted(self) -> MoveState:
        """Own predicted movement state after the newest command."""
        return self._predictor.state

    @property
    def predictor(self) -> Predictor:
        """The movement predictor (read it; the client drives it)."""
        return self._predictor

    @property
    def weapons(self) -> WeaponState:
        """The client's own weapon prediction (slot 0 is this player)."""
        return self._weapons

    @property
    def next_step_s(self) -> float | None:
        """Client time (s) at which ``step`` should next be called; None when there is nothing
        more to do (not started, or the session is over)."""
        # Identity tests, connected first: the driver asks after every step and delivery, and a
        # str enum's ``in`` compares strings for every member that is not the state.
        st = self._state
        if st is ConnState.CONNECTED:
            if self._out and self._next_step_s is not None:
                return min(self._next_step_s, self._flush_at_s)
            return self._next_step_s
        if st is ConnState.CONNECTING or st is ConnState.CHALLENGED:
            due = min(self._resend_at_s, self._handshake_start_s + self.config.handshake_timeout_s)
            return min(due, self._flush_at_s) if self._out else due
        return None

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters."""
        return ClientStats(
            name=self.name,
            slot=self._slot,
            state=self._state,
            reject_code=self._reject_code,
            disconnect_code=self._disconnect_code,
            bad_by_reason=dict(self._bad_by_reason),
            replays=self._predictor.replays,
            rtt_s=self._rtt_s,
            **self._c,
        )

    def view_time_at(self, now_s: float) -> float | None:
        """The server time (s) rendered at client time ``now_s`` (s)."""
        return self.world.view_time_at(now_s)

    def claim_shot(
        self,
        yaw_deg: float,
        pitch_deg: float,
        weapon: int,
        view_time_s: float,
        punch: tuple[float, float] = (0.0, 0.0),
        include_hidden: bool = False,
    ) -> ShotClaim:
        """The client's own hit detection for a shot fired now from the predicted eye along
        (yaw, pitch) + ``punch`` (pitch up, yaw right; deg) against the world as rendered at
        ``view_time_s`` (s): what cheat hooks use to build claims for other angles (silent aim)
        or older view times (backtrack). ``include_hidden`` lets bait targets take the ray."""
        view = self.world.interpolate(view_time_s)
        return _cast(self.world, self.geometry, self._predictor.state, yaw_deg, pitch_deg, punch, weapon, view,
                     include_hidden)

    def record_send_error(self) -> None:
        """The driver failed to send a datagram this client produced (counted)."""
        self._c["send_errors"] += 1

    # ---------------------------------------------------------------- connection

    def start(self, now_s: float) -> list[bytes]:
        """Begin the handshake at client time ``now_s`` (s); returns the CONNECT datagram."""
        if self._state is not ConnState.IDLE:
            raise RuntimeError(f"start() in state {self._state.value}")
        self._nonce = self.rng.bytes(NONCE_BYTES)
        self._state = ConnState.CONNECTING
        self._handshake_start_s = now_s
        self._last_recv_s = now_s
        self._retry_s = self.config.handshake_retry_s
        self._resend_at_s = now_s + self._retry_s
        return [self._count_out(self._handshake_packet())]

    def disconnect(self, now_s: float) -> list[bytes]:
        """Leave: a DISCONNECT datagram when connected (held fake-lag datagrams are discarded)."""
        out: list[bytes] = []
        if self._state is ConnState.CONNECTED:
            out.append(self._count_out(encode(Disconnect(self._token, self._next_packet_seq()))))
        if self._state in (ConnState.CONNECTED, ConnState.CONNECTING, ConnState.CHALLENGED):
            self._state = ConnState.DISCONNECTED
        self._held.clear()
        self._out.clear()
        return out

    def _handshake_packet(self) -> bytes:
        if self._state is ConnState.CHALLENGED:
            return encode(ChallengeResponse(self._cookie, self._nonce, self.name))
        return encode(Connect(self._nonce, self.name))

    def _count_out(self, data: bytes) -> bytes:
        self._c["datagrams_sent"] += 1
        self._c["bytes_sent"] += len(data)
        st = self._state
        if st is ConnState.CONNECTING or st is ConnState.CHALLENGED:
            self._c["handshake_attempts"] += 1
        return data

    def _next_packet_seq(self) -> int:
        seq = self._packet_seq
        self._packet_seq = (self._packet_seq + 1) & _U32
        return seq

    # ---------------------------------------------------------------- receiving

    def receive(self, datagram: bytes, now_s: float) -> None:
        """Handle one datagram from the server at client time ``now_s`` (s). Malformed ones are
        counted by reason and dropped; ones that make no sense now are counted as unexpected."""
        self._c["datagrams_received"] += 1
        self._c["bytes_received"] += len(datagram)
        try:
            msg = decode_server(datagram, self.config.protocol)
        except ProtocolError as exc:
            self._c["bad_datagrams"] += 1
            reason = exc.reason.value
            self._bad_by_reason[reason] = self._bad_by_reason.get(reason, 0) + 1
            return
        handled = self._dispatch(msg, now_s)
        if handled:
            self._last_recv_s = now_s
        else:
            self._c["unexpected"] += 1

    def _dispatch(self, msg: object, now_s: float) -> bool:
        st = self._state
        if st is ConnState.CONNECTED and isinstance(msg, Snapshot):
            # The usual datagram, straight to where the checks below would take it.
            self._on_snapshot(msg, now_s)
            return True
        if isinstance(msg, Challenge):
            if st not in (ConnState.CONNECTING, ConnState.CHALLENGED):
                return False
            self._cookie = msg.cookie
            self._state = ConnState.CHALLENGED
            self._retry_s = self.config.handshake_retry_s
            self._resend_at_s = now_s + self._retry_s
            self._out.append(self._count_out(self._handshake_packet()))
            self._flush_at_s = now_s
            return True
        if isinstance(msg, Accept):
            if st is ConnState.CONNECTED and msg.token == self._token:
                return True  # a duplicate answer to a resent CHALLENGE_RESPONSE
            if st is not ConnState.CHALLENGED:
                return False
            self._on_accept(msg, now_s)
            return True
        if isinstance(msg, Reject):
            if st not in (ConnState.CONNECTING, ConnState.CHALLENGED):
                return False
            self._state = ConnState.REJECTED
            self._reject_code = int(msg.code)
            log.info("%s: rejected by the server (code %d)", self.name, int(msg.code))
            return True
        if st is not ConnState.CONNECTED:
            return False
        if isinstance(msg, Snapshot):
            self._on_snapshot(msg, now_s)
            return True
        if isinstance(msg, Correction):
            return self._on_correction(msg)
        if isinstance(msg, Pong):
            return self._on_pong(msg, now_s)
        if isinstance(msg, Notice):
            self.notices.append(msg)
            return True
        if isinstance(msg, ServerDisconnect):
            self._state = ConnState.DISCONNECTED
            self._disconnect_code = int(msg.code)
            log.info("%s: disconnected by the server (code %d)", self.name, int(msg.code))
            return True
        return False

    def _on_accept(self, msg: Accept, now_s: float) -> None:
        self._state = ConnState.CONNECTED
        self._token = msg.token
        self._slot = msg.slot
        self._tick_rate = msg.tick_rate_hz
        self._limits = msg.limits
        self.world.own_slot = msg.slot
        self.world.observe_server_time(msg.server_time_s, now_s)
        self._next_step_s = now_s
        self._last_ping_s = -math.inf
        if msg.map_name != self.game_map.name:
            _MAP_MISMATCH((msg.map_name, self.game_map.name), "%s: server runs map %r, client has %r",
                          self.name, msg.map_name, self.game_map.name)
        if 1.0 / msg.tick_rate_hz > min(msg.limits.max_command_duration_s, self.config.protocol.max_command_duration_s):
            log.warning("%s: a %d Hz tick is longer than a command may last", self.name, msg.tick_rate_hz)

    def _on_snapshot(self, snap: Snapshot, now_s: float) -> None:
        self._c["snapshot_parts"] += 1
        update = self.world.add_snapshot(snap, now_s)
        if update.stale:
            self._c["stale_snapshots"] += 1
            return
        if update.new_tick:
            self._c["snapshots"] += 1
        if not update.newest:
            return
        self._ack_tick = snap.tick
        self._apply_own(snap.own, snap.last_cmd_seq)

    def _apply_own(self, own: OwnState, seq: int | None) -> None:
        """The newest authoritative own state: life-state transitions, then reconciliation of the
        predicted movement and weapon."""
        self._health = own.health
        auth = MoveState(own.pos, own.vel, own.on_ground, STANCE_CROUCHING if own.stance else STANCE_STANDING)
        if own.alive and not self._alive:
            self._spawned(own, auth, seq)
            return
        if not own.alive:
            if self._alive:
                self._c["deaths"] += 1
                self._alive = False
            # The dead do not move, not even by the commands still in flight: the client waits
            # where the server says it lies.
            self._predictor.reset(auth, seq, moves=False)
            return
        self._predictor.reconcile(seq, auth)
        self._reconcile_weapon(own, seq)

    def _spawned(self, own: OwnState, auth: MoveState, seq: int | None) -> None:
        self._alive = True
        self._c["spawns"] += 1
        self._predictor.reset(auth, seq)
        self._yaw, self._pitch = float(wrap_deg(own.yaw_deg)), own.pitch_deg
        loadout = [own.weapon] if own.weapon in _WEAPON_IDS else []
        loadout += [w for w in self.config.always_carried if w not in loadout]
        ws = self._weapons
        if loadout:
            ws.spawn(0, loadout, self._cmd_time_s)
            if own.weapon in _WEAPON_IDS:
                ws.ammo[0, own.weapon] = own.ammo
                ws.reserve[0, own.weapon] = own.reserve
        else:
            ws.clear(0)
        self._weapon_marks.clear()

    def _reconcile_weapon(self, own: OwnState, seq: int | None) -> None:
        """Adopt the server's held weapon, magazine and reserve where they differ from what was
        predicted for the same command (a refused shot, a reload the server finished earlier...)."""
        if seq is None:
            return
        mark = self._weapon_marks.get(seq)
        for s in [s for s in self._weapon_marks if s <= seq]:
            del self._weapon_marks[s]
        if mark is None:
            return
        ws = self._weapons
        if own.weapon != mark.weapon and own.weapon in _WEAPON_IDS:
            ws.owned[0, own.weapon] = True
            ws.switch_weapon(0, own.weapon, self._cmd_time_s)
            self._weapon_marks.clear()
            return
        held = int(ws.weapon[0])
        if own.weapon != held or held == NO_WEAPON:
            return
        d_ammo = own.ammo - mark.ammo
        d_res = own.reserve - mark.reserve
        if d_ammo or d_res:
            mag = int(ws.table.magazine[held])
            ws.ammo[0, held] = min(max(int(ws.ammo[0, held]) + d_ammo, 0), mag)
            ws.reserve[0, held] = max(int(ws.reserve[0, held]) + d_res, 0)
            for s, m in self._weapon_marks.items():
                if m.weapon == held:
                    self._weapon_marks[s] = _WeaponMark(held, m.ammo + d_ammo, m.reserve + d_res)

    def _on_correction(self, msg: Correction) -> bool:
        predicted = self._predictor.predicted_after(msg.cmd_seq)
        stance = predicted.stance if predicted is not None else self._predictor.state.stance
        result = self._predictor.reconcile(msg.cmd_seq, state_from_correction(msg.pos, msg.vel, stance), force=True)
        if result.stale:
            return True
        self._c["corrections"] += 1
        return True

    def _on_pong(self, msg: Pong, now_s: float) -> bool:
        sent = self._pings.pop(msg.ping_seq, None)
        if sent is None or sent != msg.client_time_s:
            return False
        sample = max(now_s - sent, 0.0)
        self._last_rtt_sample_s = sample
        g = self.config.rtt_gain
        self._rtt_s = sample if self._rtt_s is None else (1.0 - g) * self._rtt_s + g * sample
        self._c["pongs"] += 1
        return True

    # ---------------------------------------------------------------- stepping

    def step(self, now_s: float) -> list[bytes]:
        """One client tick at client time ``now_s`` (s); returns the datagrams to send."""
        out, self._out = self._out, []
        st = self._state
        if st is not ConnState.CONNECTED:
            if st is ConnState.CONNECTING or st is ConnState.CHALLENGED:
                return out + self._handshake_step(now_s)
            return out
        if now_s - self._last_recv_s > self.config.server_timeout_s:
            self._state = ConnState.TIMED_OUT
            log.info("%s: server silent for %.1f s", self.name, now_s - self._last_recv_s)
            return out
        if self._next_step_s is not None and now_s < self._next_step_s:
            return out  # early call (a flush): the tick is not due yet
        dt = 1.0 / self._tick_rate
        nxt = (self._next_step_s if self._next_step_s is not None else now_s) + dt
        if nxt > now_s - self.config.max_behind_s:
            self._next_step_s = nxt
        else:
            self._c["ticks_skipped"] += int((now_s - nxt) / dt) + 1
            self._next_step_s = now_s + dt
        out += self._game_step(now_s, dt)
        return self._release(out, now_s)

    def _handshake_step(self, now_s: float) -> list[bytes]:
        if now_s - self._handshake_start_s >= self.config.handshake_timeout_s:
            self._state = ConnState.FAILED
            log.info("%s: no answer to the handshake within %.1f s", self.name, self.config.handshake_timeout_s)
            return []
        if now_s < self._resend_at_s:
            return []
        self._retry_s = min(self._retry_s * self.config.handshake_backoff, self.config.handshake_retry_max_s)
        self._resend_at_s = now_s + self._retry_s
        return [self._count_out(self._handshake_packet())]

    def _release(self, out: list[bytes], now_s: float) -> list[bytes]:
        """Fake-lag hook: hold this tick's datagrams, or send everything held plus them."""
        if out and self.hooks.hold_packet(now_s, self.rng) and len(self._held) + len(out) <= self.config.max_held_datagrams:
            self._held.extend(out)
            self._c["held_datagrams"] += len(out)
            return []
        if self._held:
            out = self._held + out
            self._held = []
        return out

    def _perception(self, now_s: float, view_time_s: float, rows: tuple[np.ndarray, np.ndarray]) -> Perception:
        """What the brain sees: ``rows`` are the entities at the view time, as
        ``WorldModel.interpolate_rows`` returns them."""
        st = self._predictor.state
        # The weapons need no advance: the last command advanced them to the command clock, and
        # nothing since has moved it.
        ws = self._weapons
        held = int(ws.weapon[0])
        key = ws.owned[0].tobytes()
        if key != self._owned_key:
            self._owned_key = key
            self._owned = tuple(w for w, has in enumerate(ws.owned[0].tolist()) if has)
        # Positional, in field order (now_s ... entities, team, weapons_owned): built every tick.
        return Perception(
            now_s,
            view_time_s,
            self._tick,
            self._slot if self._slot is not None else -1,
            st.pos,
            st.vel,
            self._yaw,
            self._pitch,
            st.stance == STANCE_CROUCHING,
            st.on_ground,
            self._alive,
            self._health,
            held,
            int(ws.ammo[0, held]) if held else 0,
            int(ws.reserve[0, held]) if held else 0,
            self._reloading(self._cmd_time_s),
            float(ws.punch_pitch_deg[0]),
            float(ws.punch_yaw_deg[0]),
            seen_rows(*rows),
            None,
            self._owned,
        )

    def _reloading(self, t: float) -> bool:
        """``WeaponState.reloading(t)`` of the one slot, as a scalar (no array per call)."""
        end = float(self._weapons.reload_end_s[0])
        return not math.isnan(end) and end > t

    def _advance_weapons(self, t: float) -> None:
        """``WeaponState.advance(t)``, skipped when it is a no-op: no punch to recover and no
        reload to finish (most commands). It would also move the punch clock, which matters only
        once there is a punch, and the command clock never goes back while every kick, switch
        and spawn brings that clock up to date first."""
        ws = self._weapons
        if ws.punch_pitch_deg[0] == 0.0 and ws.punch_yaw_deg[0] == 0.0 and math.isnan(ws.reload_end_s[0]):
            return
        ws.advance(t)

    def _sanitize(self, intent: Intent) -> Intent:
        """Keep an intent inside the protocol's ranges (a brain bug must not send NaN)."""
        yaw, pitch, forward, side = intent.yaw_deg, intent.pitch_deg, intent.forward, intent.side
        # _finite of each, skipped for the finite floats every honest brain sends (_finite returns them).
        if not (type(yaw) is float and type(pitch) is float and type(forward) is float and type(side) is float
                and math.isfinite(yaw + pitch + forward + side)):
            yaw = _finite(yaw, self._yaw)
            pitch = _finite(pitch, self._pitch)
            forward = _finite(forward, 0.0)
            side = _finite(side, 0.0)
        switch = intent.weapon_switch if intent.weapon_switch in _WEAPON_IDS else 0
        lim = PITCH_LIMIT_DEG
        # min(max(x, lo), hi) spelled as conditionals (the same value for any x; every tick).
        return Intent(
            -1.0 if -1.0 > forward else 1.0 if 1.0 < forward else forward,  # noqa: FURB136
            -1.0 if -1.0 > side else 1.0 if 1.0 < side else side,  # noqa: FURB136
            float(wrap_deg(yaw)),
            -lim if -lim > pitch else lim if lim < pitch else pitch,  # noqa: FURB136
            int(intent.buttons) & ALL_BUTTONS,
            switch,
            intent.aim_target,
        )

    def _game_step(self, now_s: float, dt: float) -> list[bytes]:
        self._tick += 1
        vt = self.world.advance_view_time(now_s)
        vt = 0.0 if vt is None else vt
        rows = self.world.interpolate_rows(vt)
        p = self.hooks.perceive(self._perception(now_s, vt, rows))
        self.last_perception = p
        honest = self.brain.think(p, self.rng)
        intent = self._sanitize(self.hooks.intent(p, honest, self.rng))
        self.last_intent = intent
        n = min(max(int(self.hooks.commands_this_step(now_s, self.rng)), 1), self.config.max_commands_per_step)
        shots: list[Shot] = []
        for k in range(n):
            cmd, shot = self._make_command(intent, vt, rows, dt, k == 0)
            sent = self.hooks.command(cmd, p)
            if sent.pos != cmd.pos:
                self._predictor.override(sent.pos)
            self._history.append(sent)
            self._records.append(pack_command(sent))
            self._yaw, self._pitch = float(sent.yaw_deg), float(sent.pitch_deg)
            self._c["commands"] += 1
            if shot is not None:
                shots.append(shot)
        shots = self.hooks.shots(shots, p, self.rng)
        self._file_shots(shots)
        out = [self._input(now_s)]
        if now_s - self._last_ping_s >= self.config.ping_interval_s:
            out.append(self._ping(now_s))
        return out

    def _make_command(
        self, intent: Intent, vt: float, rows: tuple[np.ndarray, np.ndarray], dt: float, first: bool
    ) -> tuple[Command, Shot | None]:
        """One command from the intent: predicted movement, own weapon prediction, shot claim
        (against the entities ``rows`` at view time ``vt``, ``WorldModel.interpolate_rows``)."""
        self._cmd_seq = (self._cmd_seq + 1) & _U32
        seq = self._cmd_seq
        self._cmd_time_s += dt
        t = self._cmd_time_s
        alive = self._alive
        ws = self._weapons
        buttons = intent.buttons if alive else 0
        if not first:
            buttons &= ~_RELOAD
        switch = intent.weapon_switch if alive and first else 0
        forward, side = (intent.forward, intent.side) if alive else (0.0, 0.0)
        # The server's order within a command: movement with the weapon held before the command,
        # the crouch press, then switch, reload and fire (server.core); the client mirrors it so
        # its prediction of both agrees.
        self._advance_weapons(t)
        held = int(ws.weapon[0])
        speed = float(ws.table.move_speed_m_s[held]) if held else _EMPTY_HAND_SPEED_M_S
        state, pressed = self._predictor.predict(
            seq, forward, side, intent.yaw_deg, intent.pitch_deg, buttons, dt, speed, moves=alive
        )
        if pressed:
            ws.note_crouch_presses(np.array([0]), t)
        if switch and switch != held and ws.owned[0, switch]:
            ws.switch_weapon(0, switch, t)
            held = int(ws.weapon[0])
        if (
            alive and buttons & _FIRE and held and ws.ammo[0, held] <= 0 and ws.reserve[0, held] > 0
            and not self._reloading(t)
        ):
            # Auto-reload: the trigger on an empty magazine reloads, as a game client does by
            # pressing reload for the player (the server reloads on RELOAD, not on a dry click).
            buttons |= _RELOAD
        if buttons & _RELOAD:
            ws.start_reload(0, t)
        punch = (float(ws.punch_pitch_deg[0]), float(ws.punch_yaw_deg[0]))
        shot: Shot | None = None
        if alive and buttons & _FIRE and held:
            outcome = ws.try_fire(0, held, t)
            fire = outcome.accepted
            if not fire and self.hooks.bypass_fire_interval:
                fire = outcome.evidence is not None and outcome.evidence.kind is FireKind.TOO_SOON
            if fire:
                punch = (outcome.punch_pitch_deg, outcome.punch_yaw_deg) if outcome.accepted else punch
                shot = self._shot(seq, held, intent, punch, state, vt, EntityView.from_rows(*rows))
        self._weapon_marks[seq] = _WeaponMark(held, int(ws.ammo[0, held]) if held else 0,
                                              int(ws.reserve[0, held]) if held else 0)
        # Positional, in field order (seq ... recoil_yaw_deg, pos): built every tick.
        cmd = Command(
            seq, self._tick & _U32, vt, dt, float(forward), float(side), intent.yaw_deg, intent.pitch_deg,
            int(buttons), int(switch), punch[0], punch[1], self._claimable(state.pos),
        )
        return cmd, shot

    def _claimable(self, pos: tuple[float, float, float]) -> tuple[float, float, float]:
        """A claim inside the protocol's coordinate range: out of it the server would drop the
        whole INPUT (and the 3 re-sent commands with it). Only a nonsensical server state (a
        position far outside any map) can get there."""
        lim = self.config.protocol.coord_limit_m
        x, y, z = pos
        if -lim <= x <= lim and -lim <= y <= lim and -lim <= z <= lim:
            return pos
        return (min(max(pos[0], -lim), lim), min(max(pos[1], -lim), lim), min(max(pos[2], -lim), lim))

    def _shot(
        self,
        seq: int,
        weapon: int,
        intent: Intent,
        punch: tuple[float, float],
        state: MoveState,
        vt: float,
        view: EntityView,
    ) -> Shot:
        """A shot with the client's own hit detection as its claim."""
        claim = _cast(self.world, self.geometry, state, intent.yaw_deg, intent.pitch_deg, punch, weapon, view)
        return Shot(
            cmd_seq=seq,
            weapon=weapon,
            yaw_deg=intent.yaw_deg,
            pitch_deg=intent.pitch_deg,
            view_time_s=vt,
            claimed_victim=claim.victim,
            claimed_hit_point=claim.point,
            claimed_bone=claim.bone,
        )

    def _file_shots(self, shots: list[Shot]) -> None:
        """Attach this tick's shots to their commands (re-sent with them); drop the rest."""
        if not shots and not self._shots_by_seq:
            return
        live = {c.seq for c in list(self._history)[-self._commands_per_input():]}
        for s in shots:
            if s.cmd_seq not in live:
                self._c["shots_dropped"] += 1
                continue
            self._shots_by_seq.setdefault(s.cmd_seq, []).append(s)
            self._c["shots_sent"] += 1
        for seq in [q for q in self._shots_by_seq if q not in live]:
            del self._shots_by_seq[seq]

    def _commands_per_input(self) -> int:
        lim = self._limits
        return min(self.config.redundancy, lim.max_commands if lim else self.config.protocol.max_commands)

    def _input(self, now_s: float) -> bytes:
        """The INPUT of this tick: the newest commands (oldest first) and their shots; trimmed
        to the server's limits and the datagram size."""
        lim = self._limits
        max_cmds = self._commands_per_input()
        max_shots = lim.max_shots if lim else self.config.protocol.max_shots
        max_bytes = min(lim.max_datagram_bytes if lim else 1200, self.config.protocol.max_datagram_bytes)
        cmds = list(self._history)[-max_cmds:]
        records = list(self._records)[-max_cmds:]
        by_seq = self._shots_by_seq
        while True:
            shots = [s for c in cmds for s in by_seq.get(c.seq, ())] if by_seq else []
            if len(shots) > max_shots:
                # The newest shots matter: older ones already went out with earlier packets.
                shots = shots[len(shots) - max_shots:]
            msg = Input(self._token, self._packet_seq, max(now_s, 0.0), self._ack_tick, b"".join(records), tuple(shots))
            data = encode(msg, check_size=False)
            if len(data) <= max_bytes or len(cmds) == 1:
                break
            cmds, records = cmds[1:], records[1:]
        self._next_packet_seq()
        self._c["inputs"] += 1
        return self._count_out(data)

    def _ping(self, now_s: float) -> bytes:
        seq = self._next_packet_seq()
        t = max(now_s, 0.0)
        self._pings[seq] = t
        while len(self._pings) > 8:
            del self._pings[next(iter(self._pings))]
        self._last_ping_s = now_s
        self._c["pings"] += 1
        return self._count_out(encode(Ping(self._token, seq, t)))
