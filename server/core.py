"""The authoritative game core: a step function over datagrams and time, with no sockets inside.

``receive`` takes one datagram from an address and returns the immediate replies (handshake,
pong); ``step`` runs one fixed tick at a given server time and returns the datagrams to send.
Behind UDP a transport calls them in real time; in-process the testbed calls them in virtual time
(DESIGN principle 2). The tick follows DESIGN's flow in order:

1. apply inputs (movement simulation, validation, corrections, weapon actions, aim samples),
2. resolve shots (lag-compensated batched hit registration, damage, kills, baits),
3. detect (the anticheat pipeline consumes the tick's events),
4. record (history ring buffer, replay file),
5. snapshot (per-client visibility culling, encode, send).
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from itertools import accumulate, chain
from typing import Any, TypeVar

import numba
import numpy as np

from anticheat.events import AimSample, ConnectionSample, Detection, KillEvent, SessionEvent, SpawnEvent
from anticheat.pipeline import DetectionPipeline
from lagcomp.history import TickHistory
from lagcomp.hitreg import BaitTargets, ShotBatch, eye_positions, hit_damage, register_shots, to_shot_results
from lagcomp.rewind_policy import DECISIONS, rewind_time
from lagcomp.shot import ShotClaim
from physics.buttons import Buttons
from physics.movement import MoveCommands, simulate_sequence
from physics.validation import MovementValidator, TimerBalance, Verdict
from physics.weapon_state import WeaponState, current_spread_deg, shot_directions
from server import protocol as proto
from server.config import ServerConfig
from server.events import EventBus, PlayerConnected, PlayerDisconnected
from server.handshake import CookieStatus, Handshake, TokenStatus
from server.netstats import NetStats
from server.rate_limit import ClientRateLimiter, RateVerdict
from server.recording import ReplayWriter
from server.replay_window import ReplayVerdict, ReplayWindow
from server.session import Address, ClientSession
from server.snapshots import SnapshotBuilder
from server.spawns import choose_spawn
from server.tick_stats import TickStats
from server.visibility import VisibilityCuller
from world.constants import CROUCHING_CHEST_M, CROUCHING_EYE_M, STANDING_CHEST_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import Bone
from world.mapfile import GameMap
from world.state import WorldLimits, WorldState
from world.weapons import WEAPONS, WeaponId

log = logging.getLogger(__name__)

Outgoing = list[tuple[Address, bytes]]
_CHEST_M = np.array([STANDING_CHEST_M, CROUCHING_CHEST_M])
_EYE_M = np.array([STANDING_EYE_M, CROUCHING_EYE_M])
_RELOAD = int(Buttons.RELOAD)
"""An int, not the flag: ``int & IntFlag`` goes through the enum's Python operator."""
_PENDING = int(Verdict.PENDING)
"""An int: comparing a numpy int8 with the IntEnum goes through the enum's Python operator."""
_EMPTY_HAND_SPEED_M_S = 6.0
_MAX_RANGE_M = {int(w): spec.max_range_m for w, spec in WEAPONS.items()}
"""Weapon range (m) by plain int id: constructing the WeaponId enum per ray cost more than the lookup."""


def _move_speeds() -> np.ndarray:
    """Move speed (m/s) by held weapon id, an empty hand (id 0) included."""
    speeds = np.full(max(int(w) for w in WEAPONS) + 1, _EMPTY_HAND_SPEED_M_S)
    for wid, spec in WEAPONS.items():
        speeds[int(wid)] = spec.move_speed_m_s
    return speeds


_MOVE_SPEED_M_S = _move_speeds()
_YAW, _PITCH = 3, 4
"""Rows of yaw_deg and pitch_deg in _TickCommands.numbers."""
_AIM_FIELDS = (
    "player", "tick", "time_s", "seq", "yaw_deg", "pitch_deg", "recoil_pitch_deg", "recoil_yaw_deg",
    "server_punch_pitch_deg", "server_punch_yaw_deg", "buttons", "weapon", "weapon_switch", "stance", "on_ground",
    "speed_m_s", "target", "target_angle_deg", "target_distance_m",
)
if tuple(f.name for f in fields(AimSample)) != _AIM_FIELDS or hasattr(AimSample, "__post_init__"):  # pragma: no cover
    raise AssertionError("AimSample changed: update ServerCore._aim_samples and _aim_sample")


_T = TypeVar("_T")


def _slot_setter_constructor(cls: type[_T], names: tuple[str, ...]) -> Callable[..., _T]:
    """A function of ``names`` (positional) building a ``cls``, a frozen slotted dataclass without
    ``__post_init__``, equal to ``cls(*values)``. A frozen dataclass's ``__init__`` stores each field
    through ``object.__setattr__``; storing through the slot descriptors directly halves the cost,
    which matters for the ~190 AimSamples of every 128 Hz tick."""
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
    body = "".join(f"    _set_{n}(obj, {n})\n" for n in names)
    exec(f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n", namespace)
    make: Callable[..., _T] = namespace["make"]
    return make


_aim_sample = _slot_setter_constructor(AimSample, _AIM_FIELDS)


@numba.njit(cache=True, nogil=True)
def _command_columns(
    words: np.ndarray, halves: np.ndarray, order: np.ndarray, numbers: np.ndarray, claimed: np.ndarray,
    yaw: np.ndarray, rad: np.ndarray, ints: np.ndarray, floats: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Row i of the tick's commands from record ``order[i]`` of ``words``/``halves``
    (``proto.command_arrays``): ``numbers`` (6, N) duration_s, forward, side, yaw_deg, pitch_deg,
    buttons; ``claimed`` (N, 3); ``yaw`` (N,) the view yaw wrapped to [-180, 180) (deg); ``rad``
    (2, N) that yaw and the pitch in radians; ``ints`` (3, N) seq, buttons, weapon_switch;
    ``floats`` (4, N) yaw_deg, pitch_deg, recoil_pitch_deg, recoil_yaw_deg as sent. The wrap and
    the radians are numpy's expressions, which give the same bits compiled (x * (pi / 180) is
    how numpy's radians computes)."""
    to_rad = math.pi / 180.0
    for i in range(order.shape[0]):
        r = order[i]
        for k in range(5):
            numbers[k, i] = words[r, 2 + k]
        numbers[5, i] = float(halves[r, 14])
        for k in range(3):
            claimed[i, k] = words[r, 10 + k]
        y = (words[r, 5] + 180.0) % 360.0 - 180.0
        yaw[i] = y
        rad[0, i] = y * to_rad
        rad[1, i] = words[r, 6] * to_rad
        ints[0, i] = halves[r, 0]
        ints[1, i] = halves[r, 14]
        ints[2, i] = halves[r, 15]
        floats[0, i] = words[r, 5]
        floats[1, i] = words[r, 6]
        floats[2, i] = words[r, 8]
        floats[3, i] = words[r, 9]


@numba.njit(cache=True, nogil=True)
def _round_to_world(
    a: int, b: int, slots: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, alive: np.ndarray, pos: np.ndarray,
    vel: np.ndarray, ground: np.ndarray, stance: np.ndarray, pressed: np.ndarray, w_yaw: np.ndarray,
    w_pitch: np.ndarray, w_pos: np.ndarray, w_vel: np.ndarray, w_ground: np.ndarray, w_stance: np.ndarray,
    live: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Rows ``a:b`` of the tick's commands (one round: distinct slots) into the world: every row's
    view angles (deg), and the alive rows' simulated position, velocity (m, m/s), on-ground flag
    and stance. Writes the alive rows' indices into the round to ``live``; returns (alive rows,
    of them with a crouch press)."""
    n_live = 0
    n_pressed = 0
    for i in range(b - a):
        r = a + i
        s = slots[r]
        w_yaw[s] = yaw[r]
        w_pitch[s] = pitch[r]
        if alive[r]:
            live[n_live] = i
            n_live += 1
            for k in range(3):
                w_pos[s, k] = pos[r, k]
                w_vel[s, k] = vel[r, k]
            w_ground[s] = ground[r]
            w_stance[s] = stance[r]
            if pressed[r]:
                n_pressed += 1
    return n_live, n_pressed


@numba.njit(cache=True)
def _aim_candidates(
    slots: np.ndarray, stops: np.ndarray, moved: np.ndarray, cos_sin: np.ndarray, offset: int, pos: np.ndarray,
    stance: np.ndarray, row_pos: np.ndarray, row_stance: np.ndarray, eye_m: np.ndarray, chest_m: np.ndarray,
    visible: np.ndarray, alive: np.ndarray, active: np.ndarray,
    cos_out: np.ndarray, dist_out: np.ndarray, target_out: np.ndarray, counts: np.ndarray,
) -> int:
    """For each viewer ``slots[i]``, every visible, alive, active other player in slot order: the
    clipped cosine of the angle between the view and the line from the eye to the player's chest,
    and the eye-chest distance (m). Rows go one after the other into the flat outputs,
    ``counts[i]`` each; returns the total. ``cos_sin[:, :, offset + i]``: cos and sin of viewer i's
    yaw and pitch (radians), numpy's (the view is ``world.state.view_direction``'s).

    The viewers come in rounds, round r ending before row ``stops[r]``, and each round sees the
    world as it leaves it: ``pos`` and ``stance`` (not modified) as they were before the first
    round, where each round's ``moved`` rows first put their player at ``row_pos``, ``row_stance``.

    The arithmetic is the numpy version's, bit for bit: the norm sums (x*x + y*y) + z*z as numpy's
    axis reduction does, and the dot product sums (x + z) + y as ``einsum`` does for three terms
    (its vector reduction); tests/test_server_core.py checks both against numpy."""
    pos = pos.copy()
    stance = stance.copy()
    n = 0
    cap = pos.shape[0]
    first = 0
    for stop in stops:
        for i in range(first, stop):
            if moved[i]:
                s = slots[i]
                pos[s, 0] = row_pos[i, 0]
                pos[s, 1] = row_pos[i, 1]
                pos[s, 2] = row_pos[i, 2]
                stance[s] = row_stance[i]
        for i in range(first, stop):
            s = slots[i]
            ex = pos[s, 0]
            ey = pos[s, 1]
            ez = pos[s, 2] + eye_m[stance[s]]
            col = offset + i
            cp = cos_sin[0, 1, col]
            vx = cp * cos_sin[0, 0, col]
            vy = cp * cos_sin[1, 0, col]
            vz = cos_sin[1, 1, col]
            start = n
            for t in range(cap):
                if t == s or not (visible[s, t] and alive[t] and active[t]):
                    continue
                x = pos[t, 0] - ex
                y = pos[t, 1] - ey
                z = (pos[t, 2] + chest_m[stance[t]]) - ez
                d = math.sqrt((x * x + y * y) + z * z)
                c = ((vx * x + vz * z) + vy * y) / max(d, 1e-9)
                if c < -1.0:
                    c = -1.0
                elif c > 1.0:
                    c = 1.0
                cos_out[n] = c
                dist_out[n] = d
                target_out[n] = t
                n += 1
            counts[i] = n - start
        first = stop
    return n


@numba.njit(cache=True)
def _aim_gather(
    angle: np.ndarray, dist: np.ndarray, target: np.ndarray, counts: np.ndarray, slots: np.ndarray,
    moved: np.ndarray, vel: np.ndarray, ground: np.ndarray, stance: np.ndarray, row_vel: np.ndarray,
    row_ground: np.ndarray, row_stance: np.ndarray, floats: np.ndarray, ints: np.ndarray, on_ground: np.ndarray,
) -> None:
    """Per viewer i, the AimSample numbers but the weapon's: floats[:, i] horizontal speed, target
    angle (deg, 180 without a target), target distance (m, 0 without); ints[:, i] target slot (-1
    none), stance; on_ground[i]. The viewer's state is its row's (``row_*``) where ``moved[i]``,
    else its slot's (``vel``, ``ground``, ``stance``).

    The target is the candidate with the smallest angle (the first of equals, as ``argmin``); none
    without candidates or with a NaN angle among them (``argmin`` would have picked the NaN)."""
    j = 0
    for i in range(counts.shape[0]):
        b = -1
        low = np.inf
        nan_seen = False
        for _ in range(counts[i]):
            a = angle[j]
            if math.isnan(a):
                nan_seen = True
            elif a < low:
                low = a
                b = j
            j += 1
        s = slots[i]
        if moved[i]:
            floats[0, i] = math.hypot(row_vel[i, 0], row_vel[i, 1])
            ints[1, i] = row_stance[i]
            on_ground[i] = row_ground[i]
        else:
            floats[0, i] = math.hypot(vel[s, 0], vel[s, 1])
            ints[1, i] = stance[s]
            on_ground[i] = ground[s]
        if b < 0 or nan_seen:
            floats[1, i] = 180.0
            floats[2, i] = 0.0
            ints[0, i] = -1
        else:
            floats[1, i] = angle[b]
            floats[2, i] = dist[b]
            ints[0, i] = target[b]


@dataclass(slots=True)
class _Bait:
    entity_id: int
    shooter: int
    centre: tuple[float, float, float]
    expires_s: float


@dataclass(slots=True)
class _PendingShot:
    session: ClientSession
    shot: proto.Shot
    origin: np.ndarray
    directions: np.ndarray
    cmd_time_s: float
    recoil: tuple[float, float]
    view: tuple[float, float]
    """(yaw, pitch) of the command that fired (deg)."""
    punch: tuple[float, float]
    """(pitch, yaw) kick the shot flew with (deg)."""
    prev_aim: tuple[float, float, float, float] | None
    """(yaw, pitch, punch pitch, punch yaw) after the command before (deg), None when unknown."""
    cmd_dt_s: float


_NO_ROWS = np.zeros(0, dtype=np.intp)
_NO_ROWS.flags.writeable = False


class _TickCommands:
    """The tick's commands as arrays, round after round (N rows), and what movement leaves there
    for validation after the last round.

    Attributes:
        words, order: the records' 8-byte words (``proto.command_arrays``, read-only), row i
            from record order[i].
        slots, times: (N,) player slot and command clock after the command (s).
        numbers: (6, N) duration_s, forward, side, yaw_deg, pitch_deg and buttons: what movement
            reads. claimed: (N, 3) claimed positions (m).
        seq, view_yaw, view_pitch, recoil_pitch, recoil_yaw, buttons, switch: per row, those
            fields as Python values (they go into AimSamples; angles in deg).
        yaw: (N,) the view yaw as the world keeps it, in [-180, 180) (deg).
        alive: (N,) the player is alive (so its command moves it); all_alive: all are.
        cos_sin: (2, 2, N) cos and sin of yaw and pitch (radians).
        prev_pos, prev_vel, prev_ground, speed, pos, vel, ground, stance, pressed: per moved row,
            the state before the command, the held weapon's move speed (m/s) and the simulated
            position, velocity, on-ground flag, stance and crouch press.
        move: the moved rows' commands when one movement batch took them all (validation's
            too), else None.
        aim: per row, the AimSample values of the player after the command's movement as lists
            (they go into Python objects): horizontal speed, target angle, target distance,
            target slot (-1 none), stance, on ground (``_aim_gather``'s).
    """

    __slots__ = ("aim", "alive", "all_alive", "buttons", "claimed", "cos_sin", "ground", "move", "numbers", "order",
                 "pos", "prev_ground", "prev_pos", "prev_vel", "pressed", "recoil_pitch", "recoil_yaw", "seq",
                 "slots", "speed", "stance", "switch", "times", "vel", "view_pitch", "view_yaw", "words", "yaw")

    def __init__(self, words: np.ndarray, halves: np.ndarray, order: np.ndarray, slots: list[int],
                 times: list[float], world: WorldState) -> None:
        n = order.shape[0]
        self.words = words
        self.order = order
        self.slots = np.array(slots, dtype=np.intp)
        self.times = np.array(times)
        self.numbers = np.empty((6, n))
        self.claimed = np.empty((n, 3))
        self.yaw = np.empty(n)
        rad = np.empty((2, n))
        ints = np.empty((3, n), dtype=np.int64)
        floats = np.empty((4, n))
        _command_columns(words, halves, order, self.numbers, self.claimed, self.yaw, rad, ints, floats)
        self.seq, self.buttons, self.switch = ints.tolist()
        self.view_yaw, self.view_pitch, self.recoil_pitch, self.recoil_yaw = floats.tolist()
        # Alive or dead stays as it was for the whole phase: kills come with the shots, after it.
        self.alive = world.alive[self.slots]
        self.all_alive = bool(self.alive.all())
        # The transcendental functions stay numpy's (the compiled kernels' libm could differ from
        # numpy's vectorised ones in the last bit): cos and sin of every view, once.
        self.cos_sin = np.empty((2, 2, n))
        np.cos(rad, out=self.cos_sin[0])
        np.sin(rad, out=self.cos_sin[1])
        self.prev_pos = np.empty((n, 3))
        self.prev_vel = np.empty((n, 3))
        self.prev_ground = np.empty(n, dtype=bool)
        self.speed = np.empty(n)
        self.pos = np.empty((n, 3))
        self.vel = np.empty((n, 3))
        self.ground = np.empty(n, dtype=bool)
        self.stance = np.empty(n, dtype=np.int8)
        self.pressed = np.empty(n, dtype=bool)
        self.aim: list[list[Any]] = [[None] * n for _ in range(6)]
        self.move: MoveCommands | None = None

    def command(self, row: int) -> proto.Command:
        """Row ``row`` as a Command (for the few rows that act on the weapon)."""
        return proto.unpack_command(self.words[self.order[row]].tobytes(), 0)


@dataclass(slots=True)
class _Round:
    """One round of a tick's commands: the players' k-th commands, rows ``start:stop`` of the
    tick's command arrays (round after round)."""

    sessions: list[ClientSession]
    start: int
    stop: int
    acting: list[int]
    """Indices into the round of the commands that act on the weapon (switch, reload, shots)."""
    switches: bool
    """A command of the round switches weapons: the move speed of the player's next command may
    change (the switch comes after the round's movement)."""
    live: np.ndarray
    """Indices into the round of the players that moved (alive)."""
    mark: int = 0
    """Where the round's movement evidence goes in the tick's events: before its shots and aim
    samples (the claims are validated after the tick's last round)."""


def _crosshairs(aims: list[tuple[float, float, float, float]]) -> np.ndarray:
    """(M, 3) unit directions of the spread-free crosshairs of (yaw, pitch, punch pitch, punch yaw)
    aims (deg): view plus punch, as physics.shot_directions aims; ``view_direction``'s values.
    The yaws and pitches share one array, so one radians, one cos and one sin call serve them
    all (numpy's trigonometry gives each element the same bits whatever the array)."""
    m = len(aims)
    angles = [y - punch_yaw for y, _, _, punch_yaw in aims]
    angles += [min(90.0, max(-90.0, p + punch_pitch)) for _, p, punch_pitch, _ in aims]
    rad = np.radians(np.array(angles))
    cos, sin = np.cos(rad), np.sin(rad)
    out = np.empty((m, 3))
    out[:, 0] = cos[m:] * cos[:m]
    out[:, 1] = cos[m:] * sin[:m]
    out[:, 2] = sin[m:]
    return out


def _round_rows(lens: list[int]) -> tuple[list[list[int]], list[int] | None]:
    """Rounds of commands taken ``lens[i]`` per session, rows in session order (session 0's
    commands, then session 1's...): each round's sessions (indices, in order) and, for each row
    in round order, its row in session order (None when the two orders are the same: one command
    per session at most)."""
    if max(lens) == 1:
        return [[i for i, n in enumerate(lens) if n]], None
    starts = [0, *accumulate(lens[:-1])]
    members: list[list[int]] = []
    rows: list[int] = []
    for k in range(max(lens)):
        them = [i for i, n in enumerate(lens) if n > k]
        members.append(them)
        rows += [starts[i] + k for i in them]
    return members, rows


class ServerCore:
    """One match's authoritative server (sans-IO).

    Args:
        config: server configuration. game_map: the map. secret: HMAC key for cookies and tokens
        (>= 32 bytes). seed: seeds every random choice (spawns, spread, session salts), so a
        virtual-time match is reproducible. pipeline: the anticheat pipeline (None: no detection).
        recorder: replay writer (None: no recording). bus: operator event bus.
        geometry: prepared map geometry, when the caller already built it.
    """

    def __init__(
        self,
        config: ServerConfig,
        game_map: GameMap,
        *,
        secret: bytes,
        seed: int,
        pipeline: DetectionPipeline | None = None,
        recorder: ReplayWriter | None = None,
        bus: EventBus | None = None,
        geometry: MapGeometry | None = None,
    ) -> None:
        self.config = config
        self.map = game_map
        self.geometry = geometry or MapGeometry(game_map)
        seeds = np.random.SeedSequence(seed).spawn(3)
        self._spawn_rng = np.random.default_rng(seeds[0])
        self._spread_rng = np.random.default_rng(seeds[1])
        self._salt_rng = np.random.default_rng(seeds[2])
        cap = config.max_clients
        self.world = WorldState(WorldLimits(max_players=cap))
        self.weapons = WeaponState(cap, config.weapons)
        self.validator = MovementValidator(cap, config.validation, config.movement)
        self.timer = TimerBalance(cap, config.validation)
        self.history = TickHistory(config.history(), cap)
        self.culler = VisibilityCuller(config.visibility, self.geometry, cap, config.tick_rate_hz)
        self.netstats = NetStats(config.netstats)
        self.handshake = Handshake(
            secret, clock=lambda: self.time_s, random_bytes=self._random_bytes, config=config.handshake
        )
        self.snapshots = SnapshotBuilder(config.protocol)
        self.pipeline = pipeline
        self.recorder = recorder
        self.bus = bus or EventBus()
        self.sessions: dict[Address, ClientSession] = {}
        self.by_slot: dict[int, ClientSession] = {}
        self.rejections: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.detections: dict[int, Counter[str]] = {}
        self.departed: list[DepartedPlayer] = []
        """Players who left, in leaving order: their record as it stood when they left."""
        self.tick = 0
        self.time_s = 0.0
        self.tick_dt_s = config.tick_dt_s
        self.tick_stats = TickStats(self.tick_dt_s)
        self._baits: list[_Bait] = []
        self._bait_room = config.snapshot_bait_room()
        self._max_packet_jump = config.max_packet_jump()
        self._bait_cache: BaitTargets | None = None
        """The baits as hit registration takes them, None until needed after a change."""
        self._next_bait_id = 200
        self._next_conn_sample_s = 0.0
        self._datagrams_this_tick = 0
        self._tick_events: list[Any] = []
        self._session_events: list[SessionEvent] = []
        self._out: Outgoing = []
        self._kicks: dict[int, str] = {}
        # Load (or compile) the kernels now, not in the middle of the first tick that needs them.
        self.weapons.sync_to(self.world)
        self._aim_kernels(np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0, bool), np.zeros((2, 2, 0)), 0,
                          np.zeros((0, 3)), np.zeros(0, np.int8), np.zeros((0, 3)), np.zeros(0, bool))
        warm = _TickCommands(*proto.command_arrays(b""), np.arange(0), [], [], self.world)
        w = self.world
        _round_to_world(0, 0, warm.slots, warm.yaw, warm.numbers[_PITCH], warm.alive, warm.pos, warm.vel, warm.ground,
                        warm.stance, warm.pressed, w.yaw, w.pitch, w.pos, w.vel, w.on_ground, w.stance,
                        np.empty(0, dtype=np.intp))

    # ------------------------------------------------------------------ time

    def next_tick_s(self) -> float:
        """Server time (s) of the next tick: tick k runs at k * tick_dt."""
        return (self.tick + 1) * self.tick_dt_s

    def _random_bytes(self, n: int) -> bytes:
        return self._salt_rng.bytes(n)

    # ------------------------------------------------------------------ receive

    def receive(self, addr: Address, datagram: bytes, now_s: float) -> Outgoing:
        """Handle one datagram from ``addr`` at server time ``now_s`` (s); returns immediate replies.

        Never raises on a datagram: anything invalid is dropped and counted by reason in
        ``rejections``.
        """
        self._datagrams_this_tick += 1
        if self._datagrams_this_tick > self.config.max_datagrams_per_tick:
            self.rejections["tick_budget"] += 1
            return []
        try:
            msg = proto.decode_client(datagram, self.config.protocol)
        except proto.ProtocolError as exc:
            self.rejections[exc.reason.value] += 1
            return []
        except Exception:  # a decoder bug must not reach the transport's callback either
            self.rejections["internal_error"] += 1
            log.exception("error decoding a datagram from %s", addr)
            return []
        try:
            kind = type(msg)
            if kind is proto.Input:  # every client's per-tick packet: tested first, never answered
                session = self._authenticate(addr, msg, len(datagram), now_s)
                if session is not None:
                    self._on_input(session, msg, now_s)
                return []
            if kind is proto.Connect:
                return self._on_connect(addr, msg, len(datagram))
            if kind is proto.ChallengeResponse:
                return self._on_challenge_response(addr, msg, len(datagram), now_s)
            session = self._authenticate(addr, msg, len(datagram), now_s)
            if session is None:
                return []
            if kind is proto.Ping:
                pong = proto.Pong(ping_seq=msg.packet_seq, client_time_s=msg.client_time_s, server_time_s=now_s)
                return [(addr, proto.encode(pong, self.config.protocol))]
            if kind is proto.Disconnect:
                self._drop(session, "client")
            return []
        except Exception:  # never let one datagram stop the server; count and keep going
            self.rejections["internal_error"] += 1
            log.exception("error handling a datagram from %s", addr)
            return []

    def _on_connect(self, addr: Address, msg: proto.Connect, size: int) -> Outgoing:
        cookie = self.handshake.issue_cookie(addr, msg.nonce)
        reply = proto.encode(proto.Challenge(cookie=cookie), self.config.protocol)
        if len(reply) > size:  # no amplification: never answer bigger than asked
            self.rejections["unpadded_connect"] += 1
            return []
        return [(addr, reply)]

    def _on_challenge_response(self, addr: Address, msg: proto.ChallengeResponse, size: int, now_s: float) -> Outgoing:
        status = self.handshake.check_cookie(addr, msg.nonce, msg.cookie)
        if status is not CookieStatus.VALID:
            self.rejections[f"cookie_{status.value}"] += 1
            return []
        session = self.sessions.get(addr)
        if session is None:
            slot = self.world.free_slot()
            if slot is None:
                self.rejections["server_full"] += 1
                reply = proto.encode(proto.Reject(code=proto.RefuseCode.SERVER_FULL), self.config.protocol)
                return [(addr, reply)] if len(reply) <= size else []
            session = self._open_session(addr, slot, msg.name, now_s)
        accept = proto.Accept(
            token=session.creds.token,
            slot=session.slot,
            tick_rate_hz=self.config.tick_rate_hz,
            map_name=self.map.name,
            server_time_s=now_s,
            limits=proto.AcceptLimits(
                max_datagram_bytes=self.config.protocol.max_datagram_bytes,
                max_commands=self.config.protocol.max_commands,
                max_shots=self.config.protocol.max_shots,
                max_command_duration_s=self.config.protocol.max_command_duration_s,
                max_packets_per_s=self.config.rate_limit.packets_per_s,
                max_bytes_per_s=self.config.rate_limit.bytes_per_s,
            ),
        )
        reply = proto.encode(accept, self.config.protocol)
        if len(reply) > size:
            self.rejections["unpadded_response"] += 1
            return []
        return [(addr, reply)]

    def _open_session(self, addr: Address, slot: int, name: str, now_s: float) -> ClientSession:
        creds = self.handshake.open_session(slot, addr)
        session = ClientSession(
            slot=slot,
            address=addr,
            name=name,
            creds=creds,
            window=ReplayWindow(max_jump=self._max_packet_jump),
            max_seq_jump=self._max_packet_jump * self.config.protocol.max_commands,
            limiter=ClientRateLimiter(self.config.rate_limit, now_s),
            connected_s=now_s,
            last_packet_s=now_s,
            cmd_time_s=now_s,
        )
        self.sessions[addr] = session
        self.by_slot[slot] = session
        self.world.activate(slot, weapon=int(WeaponId.PISTOL), ammo=0, reserve=0)
        self.netstats.open(slot, now_s)
        self.validator.clear(slot)
        self.timer.reset(slot)
        self.culler.forget(slot)
        self.detections[slot] = Counter()
        # Detector state follows from this event, live and in a replay alike.
        self._session_events.append(SessionEvent(player=slot, tick=self.tick, time_s=now_s, kind="connect", name=name))
        session.respawn_at_s = now_s
        self.counters["connects"] += 1
        self.bus.publish(PlayerConnected(slot=slot, name=name, address=f"{addr[0]}:{addr[1]}", time_s=now_s))
        return session

    def _authenticate(self, addr: Address, msg: Any, size: int, now_s: float) -> ClientSession | None:
        session = self.sessions.get(addr)
        if session is None:
            self.rejections["unknown_session"] += 1
            return None
        status = self.handshake.check_token(session.creds, msg.token, addr)
        if status is not TokenStatus.VALID:
            self.rejections[f"token_{status.value}"] += 1
            return None
        verdict = session.window.accept(msg.packet_seq)
        if verdict is not ReplayVerdict.FRESH:
            self.rejections[f"replay_{verdict.value}"] += 1
            return None
        rate = session.limiter.allow(size, now_s)
        if rate is not RateVerdict.OK:
            self.rejections[f"rate_{rate.value}"] += 1
            return None
        session.last_packet_s = now_s
        return session

    def _on_input(self, session: ClientSession, msg: proto.Input, now_s: float) -> None:
        self.netstats.on_input(session.slot, msg.packet_seq, msg.client_time_s, msg.ack_tick, now_s)
        block = msg.command_block
        too_new = session.commands_too_new
        new = session.queue(block, msg.shots, self.config.max_queued_commands)
        counters = self.counters
        counters["commands_received"] += new
        refused = session.commands_too_new - too_new
        if refused:
            self.rejections["command_too_new"] += refused
        counters["commands_redundant"] += len(block) // proto.COMMAND_BYTES - new - refused

    def _drop(self, session: ClientSession, reason: str) -> None:
        slot = session.slot
        # Taken before the slot is released: the link figures and the sanction are the slot's.
        # The detection counter stays shared, so detections delivered later (the detectors'
        # flush at close) still count for the player who left, unless the slot is reused.
        self.departed.append(
            DepartedPlayer(self._player_record(session), self.detections.setdefault(slot, Counter()), self.time_s, reason)
        )
        self.sessions.pop(session.address, None)
        self.by_slot.pop(slot, None)
        self.world.deactivate(slot)
        self.weapons.clear(slot)
        self.validator.clear(slot)
        self.timer.reset(slot)
        self.culler.forget(slot)
        self.netstats.close(slot)
        self._session_events.append(
            SessionEvent(player=slot, tick=self.tick, time_s=self.time_s, kind="disconnect", name=session.name)
        )
        self.counters[f"disconnect_{reason}"] += 1
        self.bus.publish(PlayerDisconnected(slot=slot, name=session.name, reason=reason, time_s=self.time_s))

    # ------------------------------------------------------------------ tick

    def step(self, now_s: float) -> Outgoing:
        """Run one tick at server time ``now_s`` (s); returns the datagrams to send.

        The cyclic garbage collector is paused for the tick: its collections cost 1-10 ms (gen 0/1,
        80 ms for gen 2) whenever the allocation count crosses a threshold, wherever that falls, and
        were most of the slow ticks' "inputs" time. Paused, the collection runs at the first
        allocation after the tick, once its datagrams are out; reference counting still frees
        everything acyclic at once."""
        if not gc.isenabled():
            # The embedding application manages the collector itself.
            return self._step(now_s)
        gc.disable()
        try:
            return self._step(now_s)
        finally:
            gc.enable()

    def _step(self, now_s: float) -> Outgoing:
        started = time.perf_counter()
        cpu_started = time.thread_time()
        self.tick += 1
        self.time_s = now_s
        self._datagrams_this_tick = 0
        self._tick_events = self._session_events
        self._session_events = []
        self._out = []
        clock = time.perf_counter
        stats = self.tick_stats
        self._apply_kicks()
        self._expire_clients(now_s)
        self._respawn_due(now_s)
        t0 = clock()
        pending = self._apply_inputs(now_s)
        self._resend_corrections(now_s)
        t1 = clock()
        self._resolve_shots(pending, now_s)
        self._connection_samples(now_s)
        t2 = clock()
        detections = self._detect()
        t3 = clock()
        self.history.record(self.tick, now_s, self.world)
        if self.recorder is not None:
            self.recorder.write_tick(self.tick, now_s, [*self._tick_events, *detections])
        if any(b.expires_s <= now_s for b in self._baits):
            self._baits = [b for b in self._baits if b.expires_s > now_s]
            self._bait_cache = None
        t4 = clock()
        self.culler.refresh(self.tick, self.world, self._rtt_array())
        t5 = clock()
        self._send_snapshots(now_s)
        t6 = clock()
        stats.add_phases(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
        stats.add(t6 - started, time.thread_time() - cpu_started)
        return self._out

    def kick(self, slot: int, reason: str = "kicked") -> bool:
        """Disconnect the player in ``slot`` at the start of the next tick (SERVER_DISCONNECT
        KICKED is sent); ``reason`` is the departure reason reports show. False when the slot is
        not connected. Safe to call between ticks from another task of the same event loop."""
        if slot not in self.by_slot:
            return False
        self._kicks[slot] = reason
        return True

    def _apply_kicks(self) -> None:
        kicks, self._kicks = self._kicks, {}
        for slot, reason in kicks.items():
            session = self.by_slot.get(slot)
            if session is not None:
                self._send(session, proto.ServerDisconnect(proto.DisconnectCode.KICKED))
                self._drop(session, reason)

    def live_players(self) -> list[dict[str, Any]]:
        """The connected players now, by slot: each one's :meth:`report` record plus
        ``connected_s`` (server time of connecting, s) and ``address`` ("host:port")."""
        players = []
        for session in sorted(self.by_slot.values(), key=lambda s: s.slot):
            record = self._player_record(session)
            record.update(connected_s=round(session.connected_s, 3),
                          address=f"{session.address[0]}:{session.address[1]}")
            players.append(record)
        return players

    def _expire_clients(self, now_s: float) -> None:
        for session in list(self.sessions.values()):
            if now_s - session.last_packet_s > self.config.client_timeout_s:
                self._drop(session, "timeout")

    def _respawn_due(self, now_s: float) -> None:
        for session in self.by_slot.values():
            if session.respawn_at_s is None or session.respawn_at_s > now_s:
                continue
            slot = session.slot
            spawn = choose_spawn(self.map, self.world, slot, self._spawn_rng)
            self.world.spawn(slot, (spawn.x, spawn.y, 0.0), spawn.yaw_deg)
            primary = int(self._spawn_rng.choice(self.config.primaries))
            session.cmd_time_s = max(session.cmd_time_s, now_s - self.config.validation.timer_lag_floor_s)
            self.weapons.spawn(slot, [primary, int(WeaponId.PISTOL)], session.cmd_time_s)
            self.validator.reset(slot, now_s)
            self.timer.reset(slot)
            session.respawn_at_s = None
            self._tick_events.append(SpawnEvent(player=slot, tick=self.tick, time_s=now_s))
            correction = proto.Correction(
                cmd_seq=max(session.last_applied_seq, 0), pos=(spawn.x, spawn.y, 0.0), vel=(0.0, 0.0, 0.0)
            )
            self._send(session, correction)
            session.last_correction_s = now_s
        self.weapons.sync_to(self.world)

    def _resend_corrections(self, now_s: float) -> None:
        """While a client has not acknowledged a setback or respawn, send it the current
        authoritative state again every ``correction_resend_s``: UDP may have lost the last one, and
        the per-command corrections in between are suppressed (they would repeat the same news)."""
        w = self.world
        resend_s = self.config.correction_resend_s
        due = [s for s in self.by_slot.values() if now_s - s.last_correction_s >= resend_s]
        if not due:
            return
        # Sending changes neither who is alive nor who awaits an ack: both are read once.
        alive = w.alive.tolist()
        waiting = self.validator.awaiting_acks(now_s).tolist()
        for session in due:
            slot = session.slot
            if not alive[slot] or not waiting[slot]:
                continue
            self.counters["corrections_resent"] += 1
            session.last_correction_s = now_s
            # Stamped with the newest applied command: an older stamp is dropped by the client as stale.
            self._send(session, proto.Correction(cmd_seq=max(session.last_applied_seq, 0), pos=_vec(w.pos[slot]),
                                                 vel=_vec(w.vel[slot])))

    # ---------------------------------------------------------- 1. apply inputs

    def _apply_inputs(self, now_s: float) -> list[_PendingShot]:
        sessions = [s for s in self.by_slot.values() if s.queued]
        if not sessions:
            return []
        taken = self._take_commands(sessions, now_s)
        if not any(taken):
            self.weapons.sync_to(self.world)
            return []
        commands, rounds = self._tick_commands(sessions, taken)
        pending: list[_PendingShot] = []
        moved = 0
        for k, round_ in enumerate(rounds):
            if k == moved:
                moved = self._move(rounds, k, commands)
            pending.extend(self._apply_round(round_, commands, now_s))
        self._validate_moves(rounds, commands, now_s)
        self.weapons.sync_to(self.world)
        return pending

    def _take_commands(self, sessions: list[ClientSession], now_s: float) -> list[list[bytes]]:
        """Each session's command records to apply this tick (the timer check's share of its queue)."""
        for s in sessions:
            if s.last_applied_seq < 0:
                # The client's first commands: it may have learnt its spawn only now (a lost ACCEPT
                # delays everything), so the wait for its acknowledgement starts here, not at spawn.
                self.validator.reset(s.slot, now_s)
        slots = np.array([s.slot for s in sessions], dtype=np.intp)
        counts = [len(s.queued) for s in sessions]
        accepted, evidence = self.timer.on_commands_batch(
            slots, np.array(counts, dtype=np.int64), self.tick_dt_s, now_s, self.tick, positions=self.world.pos[slots]
        )
        self._tick_events.extend(evidence)
        taken: list[list[bytes]] = []
        for session, n_ok, n in zip(sessions, accepted.tolist(), counts, strict=True):
            if n_ok < n:
                self.rejections["timer_dropped"] += n - n_ok
            records = session.take(n_ok, drop_oldest=n - n_ok)
            session.commands_applied += len(records)
            taken.append(records)
        return taken

    def _tick_commands(
        self, sessions: list[ClientSession], taken: list[list[bytes]]
    ) -> tuple[_TickCommands, list[_Round]]:
        """The taken records as the tick's command arrays, in rounds: one command per player per
        round, round k holding the k-th commands in session order (their movement is batched
        across rounds by _move). Advances each session's command clock."""
        lens = [len(records) for records in taken]
        words, halves = proto.command_arrays(b"".join(chain.from_iterable(taken)))
        # The command clock, each player's commands in turn: nothing reads it while the tick's
        # commands are applied.
        durations = words[:, proto.CMD_DURATION].tolist()
        times: list[float] = []
        shots: list[bool] = []
        first = 0
        for session, n in zip(sessions, lens, strict=True):
            t = session.cmd_time_s
            for duration in durations[first : first + n]:
                t += duration
                times.append(t)
            first += n
            session.cmd_time_s = t
            shots += [bool(session.shots)] * n
        members, rows = _round_rows(lens)
        if rows is None:
            order = np.arange(len(times))
        else:
            order = np.array(rows, dtype=np.intp)
            times = [times[r] for r in rows]
            shots = [shots[r] for r in rows]
        them_all = [[sessions[i] for i in them] for them in members]
        commands = _TickCommands(words, halves, order, [s.slot for them in them_all for s in them], times, self.world)
        switch, buttons = commands.switch, commands.buttons
        acting_rows = [r for r, shot in enumerate(shots) if shot or switch[r] or buttons[r] & _RELOAD]
        rounds: list[_Round] = []
        start = 0
        for them in them_all:
            stop = start + len(them)
            acting = [r - start for r in acting_rows if start <= r < stop]
            switches = any(switch[start + i] for i in acting)
            rounds.append(_Round(them, start, stop, acting, switches, _NO_ROWS))
            start = stop
        return commands, rounds

    def _move(self, rounds: list[_Round], first: int, commands: _TickCommands) -> int:
        """Simulate the movement of rounds ``first`` up to the next one with a weapon switch, in one
        call (each player's commands in turn), and find what each command's aim sample sees;
        returns the round after them. A switch changes the move speed of the player's later
        commands, so those move once the switch happened."""
        last = first
        while last < len(rounds) - 1 and not rounds[last].switches:
            last += 1
        a, b = rounds[first].start, rounds[last].stop
        rows = slice(a, b) if commands.all_alive else a + np.flatnonzero(commands.alive[a:b])
        ls = commands.slots[rows]
        w = self.world
        if ls.size:
            move = MoveCommands.from_block(commands.numbers[:, rows])
            if first == 0 and last == len(rounds) - 1:
                commands.move = move
            speed = _MOVE_SPEED_M_S[self.weapons.weapon[ls]]
            result, prev_pos, prev_vel, prev_ground = simulate_sequence(
                ls, w.pos, w.vel, w.on_ground, w.stance, move, speed, self.geometry, self.config.movement
            )
            commands.prev_pos[rows] = prev_pos
            commands.prev_vel[rows] = prev_vel
            commands.prev_ground[rows] = prev_ground
            commands.speed[rows] = speed
            commands.pos[rows] = result.pos
            commands.vel[rows] = result.vel
            commands.ground[rows] = result.on_ground
            commands.stance[rows] = result.stance
            commands.pressed[rows] = result.crouch_pressed
        stops = np.array([r.stop - a for r in rounds[first : last + 1]], dtype=np.intp)
        floats, ints, ground = self._aim_kernels(
            commands.slots[a:b], stops, commands.alive[a:b], commands.cos_sin, a, commands.pos[a:b],
            commands.stance[a:b], commands.vel[a:b], commands.ground[a:b],
        )
        for column, values in zip(commands.aim, (*floats.tolist(), *ints.tolist(), ground.tolist()), strict=True):
            column[a:b] = values
        return last + 1

    def _apply_round(self, round_: _Round, commands: _TickCommands, now_s: float) -> list[_PendingShot]:
        w = self.world
        a, b = round_.start, round_.stop
        slots = commands.slots[a:b]
        self.weapons.advance_slots(slots, commands.times[a:b])
        # The kept position is always the simulated one, whatever the claim's verdict.
        live = np.empty(b - a, dtype=np.intp)
        n_live, n_pressed = _round_to_world(
            a, b, commands.slots, commands.yaw, commands.numbers[_PITCH], commands.alive, commands.pos, commands.vel,
            commands.ground, commands.stance, commands.pressed, w.yaw, w.pitch, w.pos, w.vel, w.on_ground, w.stance,
            live,
        )
        round_.live = live = live[:n_live]
        if n_live:
            round_.mark = len(self._tick_events)
            if n_pressed:
                pressed = commands.pressed
                for i in live.tolist():
                    if pressed[a + i]:
                        self.weapons.note_crouch_presses(slots[i : i + 1], float(commands.times[a + i]))
        pending: list[_PendingShot] = []
        for i in round_.acting:
            session, cmd = round_.sessions[i], commands.command(a + i)
            t_cmd = float(commands.times[a + i])
            if cmd.weapon_switch:
                self.weapons.switch_weapon(session.slot, cmd.weapon_switch, t_cmd)
            if cmd.buttons & _RELOAD:
                self.weapons.start_reload(session.slot, t_cmd)
            for shot in session.shots.pop(cmd.seq, ()):
                p = self._fire(session, cmd, shot, t_cmd, now_s)
                if p is not None:
                    pending.append(p)
        self._aim_samples(round_, commands, now_s)
        return pending

    def _validate_moves(self, rounds: list[_Round], commands: _TickCommands, now_s: float) -> None:
        """Validate every round's claims (in round order, one validator call), send the
        corrections, and put each round's movement evidence where the round left room for it."""
        moved = [r for r in rounds if r.live.size]
        if not moved:
            return
        columns = (commands.slots, commands.prev_pos, commands.prev_vel, commands.prev_ground, commands.pos,
                   commands.claimed, commands.speed)
        if commands.all_alive:
            # Every row: the columns themselves, not views of them (a numpy call each).
            move = commands.move if commands.move is not None else MoveCommands.from_block(commands.numbers)
        else:
            rows = np.flatnonzero(commands.alive)
            move = commands.move if commands.move is not None else MoveCommands.from_block(commands.numbers[:, rows])
            columns = tuple(c[rows] for c in columns)
        slots, prev_pos, prev_vel, prev_ground, pos, claimed, speed = columns
        verdicts = self.validator.validate_batches(
            [r.live.size for r in moved], slots, prev_pos, prev_vel, prev_ground, move, pos, claimed, speed,
            self.geometry, self.tick, now_s,
        )
        resend_s = self.config.correction_resend_s
        placed: list[tuple[int, tuple[Any, ...]]] = []
        for r, verdict in zip(moved, verdicts, strict=True):
            if verdict.evidence:
                placed.append((r.mark, verdict.evidence))
            # (A comprehension over the few flags of a round costs less than np.flatnonzero.)
            for j in [j for j, back in enumerate(verdict.setback.tolist()) if back]:
                i = int(r.live[j])
                session, seq = r.sessions[i], commands.seq[r.start + i]
                if verdict.verdict[j] == _PENDING and now_s - session.last_correction_s < resend_s:
                    # Still awaiting the ack of a correction just sent: it already carries this news.
                    self.counters["corrections_suppressed"] += 1
                    continue
                session.last_correction_seq = seq
                session.last_correction_s = now_s
                self.counters["corrections"] += 1
                self._send(session, proto.Correction(cmd_seq=seq, pos=_vec(verdict.pos[j]),
                                                     vel=_vec(commands.vel[r.start + i])))
        # Last first, so that the earlier marks still point where they did.
        for mark, evidence in reversed(placed):
            self._tick_events[mark:mark] = evidence

    def _fire(self, session: ClientSession, cmd: proto.Command, shot: proto.Shot, t_cmd: float, now_s: float) -> _PendingShot | None:
        slot = session.slot
        w = self.world
        outcome = self.weapons.try_fire(slot, shot.weapon, t_cmd, self.tick, alive=bool(w.alive[slot]))
        if not outcome.accepted:
            if outcome.evidence is not None:
                self._tick_events.append(outcome.evidence)
            self.rejections[f"shot_{outcome.evidence.kind.value if outcome.evidence else 'refused'}"] += 1
            return None
        spec = WEAPONS[WeaponId(shot.weapon)]
        speed = float(np.hypot(w.vel[slot, 0], w.vel[slot, 1]))
        spread = float(current_spread_deg(spec.id, speed, bool(w.on_ground[slot]), int(w.stance[slot])))
        directions = shot_directions(
            shot.yaw_deg, shot.pitch_deg, outcome.punch_pitch_deg, outcome.punch_yaw_deg,
            spread, spec.pellets, spec.pellet_spread_deg, self._spread_rng,
        )
        origin = eye_positions(w, np.array([slot]))[0]
        session.shots_fired += 1
        last = session.last_aim
        prev_aim = None
        if last is not None and last.seq == cmd.seq - 1:
            prev_aim = (last.yaw_deg, last.pitch_deg, last.server_punch_pitch_deg, last.server_punch_yaw_deg)
        return _PendingShot(session, shot, origin, directions, t_cmd, (cmd.recoil_pitch_deg, cmd.recoil_yaw_deg),
                            (cmd.yaw_deg, cmd.pitch_deg), (outcome.punch_pitch_deg, outcome.punch_yaw_deg),
                            prev_aim, float(cmd.duration_s))

    def _aim_kernels(
        self, slots: np.ndarray, stops: np.ndarray, moved: np.ndarray, cos_sin: np.ndarray, offset: int,
        row_pos: np.ndarray, row_stance: np.ndarray, row_vel: np.ndarray, row_ground: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(floats, ints, on_ground) of ``_aim_gather`` for viewers ``slots`` in rounds ending at
        ``stops`` (their cos and sin from column ``offset`` of ``cos_sin``), the ``moved`` rows'
        players at their ``row_*`` state from their round on (``_aim_candidates``); the world as
        it is before the first round."""
        w = self.world
        k = len(slots)
        cap = w.pos.shape[0]
        cos = np.empty(k * cap)
        dist = np.empty(k * cap)
        target = np.empty(k * cap, dtype=np.intp)
        counts = np.empty(k, dtype=np.intp)
        n = _aim_candidates(slots, stops, moved, cos_sin, offset, w.pos, w.stance, row_pos, row_stance, _EYE_M,
                            _CHEST_M, self.culler.visible, w.alive, w.active, cos, dist, target, counts)
        floats = np.empty((3, k))
        ints = np.empty((2, k), dtype=np.int64)
        ground = np.empty(k, dtype=bool)
        _aim_gather(np.degrees(np.arccos(cos[:n])), dist, target, counts, slots, moved, w.vel, w.on_ground, w.stance,
                    row_vel, row_ground, row_stance, floats, ints, ground)
        return floats, ints, ground

    def _aim_samples(self, round_: _Round, commands: _TickCommands, now_s: float) -> None:
        a, b = round_.start, round_.stop
        slots = commands.slots[a:b]
        wpn = self.weapons
        speed, angle, distance, target_slot, stance, on_ground = (column[a:b] for column in commands.aim)
        tick = self.tick
        events = self._tick_events
        make = _aim_sample
        # Column lists, not a list per row: every list is a container the garbage collector
        # counts, and a tick makes ~190 samples.
        c = commands
        for session, seq, yaw, pitch, rp, ry, buttons, switch, pp, py, sp, ang, dst, tgt, held, st, ground in zip(
            round_.sessions, c.seq[a:b], c.view_yaw[a:b], c.view_pitch[a:b], c.recoil_pitch[a:b], c.recoil_yaw[a:b],
            c.buttons[a:b], c.switch[a:b], wpn.punch_pitch_deg[slots].tolist(), wpn.punch_yaw_deg[slots].tolist(),
            speed, angle, distance, target_slot, wpn.weapon[slots].tolist(), stance, on_ground, strict=True,
        ):
            sample = make(
                session.slot, tick, now_s, seq, yaw, pitch, rp, ry, pp, py, buttons, held, switch, st, ground, sp,
                tgt if tgt >= 0 else None, ang, dst,
            )
            session.last_aim = sample
            events.append(sample)

    # ---------------------------------------------------------- 2. resolve shots

    def _resolve_shots(self, pending: list[_PendingShot], now_s: float) -> None:
        if not pending:
            return
        # Columns as Python lists, turned into arrays once: a tick has a few rays, and numpy's
        # fixed cost per call, not the arithmetic, was most of this phase.
        policy = self.config.rewind
        rows: list[tuple[_PendingShot, int]] = []
        time_list: list[float] = []
        codes: list[int] = []
        for p in pending:
            # A shot's pellets share its rewind: rewind_times' values, one shot at a time in Python.
            t, code = rewind_time(now_s, self._latency_s(p.session.slot), p.shot.view_time_s, policy)
            for k in range(p.directions.shape[0]):
                rows.append((p, k))
                time_list.append(t)
                codes.append(code)
        n_rows = len(rows)
        shooter = [p.session.slot for p, _ in rows]
        weapon_ids = [p.shot.weapon for p, _ in rows]
        origin = [p.origin for p, _ in rows]
        direction = [p.directions for p in pending]
        # Probe rays ride in the same batch and never deal damage: the spread-free crosshair of
        # the shot, and that of the previous command one command earlier (first contact).
        probed = [row for row, (p, k) in enumerate(rows) if k == 0 and p.prev_aim is not None]
        n_probed = len(probed)
        if probed:
            pend = [rows[r][0] for r in probed]
            shooter += [shooter[r] for r in probed] * 2
            origin += [origin[r] for r in probed] * 2
            direction.append(_crosshairs([(*p.view, *p.punch) for p in pend] + [p.prev_aim for p in pend]))
            # (max(0, t), not np.maximum: the two differ only on a -0.0 back time, which never occurs.)
            time_list += [time_list[r] for r in probed] + [max(0.0, time_list[r] - p.cmd_dt_s) for r, p in zip(probed, pend)]
            weapon_ids += [weapon_ids[r] for r in probed] * 2
        batch = ShotBatch.build(
            shooter=shooter,
            origin=origin,
            direction=np.concatenate(direction),
            time_s=time_list,
            max_range=[_MAX_RANGE_M[w] for w in weapon_ids],
            weapon=weapon_ids,
            pellet=[k for _, k in rows] + [0] * (2 * n_probed),
        )
        hits = register_shots(batch, self.history, self.geometry, now_s, self.config.hitreg, baits=self._bait_targets())
        victims = hits.victim.tolist()
        first_contact: list[bool | None] = [None] * n_rows
        for j, row in enumerate(probed):
            now_on = victims[n_rows + j]
            if now_on >= 0:
                first_contact[row] = victims[n_rows + n_probed + j] != now_on
        damage = hit_damage(batch, hits)[:n_rows].tolist()  # the probes' rows deal nothing
        # Damage row by row, in order: a pellet can kill a victim the next rows then cannot damage.
        # The health each row leaves is worked out here, as the world stores it (float32), but the
        # world changes below, row after row with each result, as before: a kill's subscribers see
        # the world as it is when that kill happens.
        w = self.world
        stored = w.health.dtype.type
        health: dict[int, float] = {}
        left: list[float | None] = [None] * n_rows
        for row in range(n_rows):
            victim = victims[row]
            now_health = health.get(victim) if victim >= 0 else None
            if victim < 0 or (now_health is None and not w.alive[victim]) or now_health == 0.0:
                damage[row] = 0.0
                continue
            if damage[row] <= 0.0:
                continue
            before = float(w.health[victim]) if now_health is None else now_health
            left[row] = health[victim] = float(stored(max(0.0, before - damage[row])))
        claims = {id(p): self._claim(p) for p in pending}
        claimed_pos = self._claimed_victims(rows, time_list)
        results = to_shot_results(
            batch, hits, claims=[claims[id(p)] for p, _ in rows], tick=self.tick, time_s=now_s,
            decisions=[DECISIONS[c] for c in codes], damage=damage, first_contact=first_contact,
            claimed_victim_pos=[claimed_pos.get(row) for row in range(n_rows)],
        )
        for row, result in enumerate(results):
            self._tick_events.append(result)
            remaining = left[row]
            if remaining is None:
                continue
            p, k = rows[row]
            victim = victims[row]
            if k == 0 or victim not in victims[row - k : row]:
                p.session.hits += 1
            w.health[victim] = remaining
            if remaining <= 0.0:
                self._kill(p.session, victim, int(p.shot.weapon), result.bone, result.distance_m, now_s)

    def _claimed_victims(self, rows: list[tuple[_PendingShot, int]], times: list[float]) -> dict[int, tuple[float, float, float]]:
        """Rewound feet of each claimed victim (pellet 0 rows whose claims name a victim and a hit
        point), by row: where the victim the client says it hit really was at the rewind time
        (``times[row]``, s)."""
        cap = self.config.max_clients
        claimed = [r for r, (p, k) in enumerate(rows)
                   if k == 0 and p.shot.claimed_hit_point is not None and p.shot.claimed_victim is not None
                   and 0 <= p.shot.claimed_victim < cap]
        if not claimed or len(self.history) == 0:
            return {}
        pos, alive = self.history.feet([times[r] for r in claimed], [rows[r][0].shot.claimed_victim for r in claimed])
        return {r: (x, y, z) for r, (x, y, z), ok in zip(claimed, pos.tolist(), alive.tolist(), strict=True) if ok}

    def _claim(self, p: _PendingShot) -> ShotClaim:
        s = p.shot
        return ShotClaim(
            shooter=p.session.slot,
            weapon=s.weapon,
            yaw_deg=s.yaw_deg,
            pitch_deg=s.pitch_deg,
            view_time_s=s.view_time_s,
            claimed_victim=s.claimed_victim,
            claimed_hit_point=s.claimed_hit_point,
            claimed_bone=s.claimed_bone,
            recoil_pitch_deg=p.recoil[0],
            recoil_yaw_deg=p.recoil[1],
            seq=s.cmd_seq,
            view=p.view,
            prev_view=None if p.prev_aim is None else p.prev_aim[:2],
        )

    def _kill(self, killer: ClientSession, victim: int, weapon_id: int, bone: int, distance: float, now_s: float) -> None:
        w = self.world
        victim_pos = w.pos[victim].copy()
        w.kill(victim)
        killer.kills += 1
        victim_session = self.by_slot.get(victim)
        if victim_session is not None:
            victim_session.deaths += 1
            victim_session.respawn_at_s = now_s + self.config.respawn_delay_s
        event = KillEvent(
            killer=killer.slot, victim=victim, tick=self.tick, time_s=now_s, weapon=weapon_id, bone=bone,
            distance_m=distance, killer_stance=int(w.stance[killer.slot]), headshot=bone == int(Bone.HEAD),
        )
        self._tick_events.append(event)
        self.bus.publish(event)
        if self.config.bait.enabled:
            self._place_bait(killer.slot, victim_pos, now_s)

    def _place_bait(self, shooter: int, victim_pos: np.ndarray, now_s: float) -> None:
        used = {b.entity_id for b in self._baits}
        for _ in range(56):
            candidate = self._next_bait_id
            self._next_bait_id = 200 + (self._next_bait_id - 199) % 56
            if candidate not in used:
                centre = (float(victim_pos[0]), float(victim_pos[1]), float(victim_pos[2] + self.config.bait.height_m))
                self._baits.append(_Bait(candidate, shooter, centre, now_s + self.config.bait.duration_s))
                self._bait_cache = None
                self.counters["baits_placed"] += 1
                return

    def _bait_targets(self) -> BaitTargets | None:
        # Built once per change of the baits (placed or expired), not on every tick with a shot.
        if self._bait_cache is None and self._baits:
            self._bait_cache = BaitTargets.spheres(
                np.array([b.centre for b in self._baits]),
                self.config.bait.radius_m,
                np.array([b.shooter for b in self._baits]),
            )
        return self._bait_cache

    # ---------------------------------------------------------- 3. detect

    def _connection_samples(self, now_s: float) -> None:
        if now_s < self._next_conn_sample_s:
            return
        self._next_conn_sample_s = now_s + self.config.connection_sample_interval_s
        for session in self.by_slot.values():
            s = self.netstats.sample(session.slot, now_s)
            self._tick_events.append(
                ConnectionSample(
                    player=session.slot, time_s=now_s, rtt_ms=s.rtt_ms, jitter_ms=s.jitter_ms,
                    loss=s.loss, since_update_s=s.since_update_s,
                )
            )

    def _detect(self) -> list[Detection]:
        if self.pipeline is None:
            return []
        found = self.pipeline.feed_many(self._tick_events)
        for d in found:
            counter = self.detections.get(d.player)
            if counter is not None:
                counter[f"{d.detector}:{d.kind}"] += 1
            self.bus.publish(d)
        return found

    # ---------------------------------------------------------- 5. snapshot

    def _send_snapshots(self, now_s: float) -> None:
        """Send this tick's share of the snapshots: with one every N ticks, a client gets its
        snapshot on the ticks where slot % N == tick % N, so each tick encodes 1/N of them instead
        of every N-th tick encoding them all (the snapshot ticks were the slowest ones)."""
        every = self.config.snapshot_every
        phase = self.tick % every
        sessions = [s for s in self.by_slot.values() if s.slot % every == phase]
        if not sessions:
            return
        w = self.world
        frame = self.snapshots.frame(w, self.weapons, tick=self.tick, server_time_s=now_s)
        slots = [s.slot for s in sessions]
        viewers = np.array(slots, dtype=np.intp)
        # Every viewer's targets from one nonzero over the visibility rows (row-major, so each
        # viewer's targets come out in slot order, as flatnonzero of its row gives them).
        seen = self.culler.visible[viewers] & w.active[None, :]
        ends = np.cumsum(np.count_nonzero(seen, axis=1))
        targets = np.nonzero(seen)[1]
        baits: dict[int, list[tuple[int, tuple[float, float, float]]]] = {}
        for b in self._baits:
            baits.setdefault(b.shooter, []).append((b.entity_id, b.centre))
        if len(self._baits) > self._bait_room:
            # A viewer who sees everyone gets only the newest baits that fit (the default limits
            # leave room for all 56 up to 177 clients).
            room = self._bait_room
            baits = {shooter: shown[max(0, len(shown) - room):] if room else [] for shooter, shown in baits.items()}
        snapshots = frame.datagrams_many(viewers, [s.last_applied_seq for s in sessions], targets, ends, baits)
        out = self._out
        tick = self.tick
        on_sent = self.netstats.on_snapshot_sent
        for session, slot, datagrams in zip(sessions, slots, snapshots, strict=True):
            address = session.address
            for datagram in datagrams:
                out.append((address, datagram))
            on_sent(slot, tick, now_s)

    def _send(self, session: ClientSession, message: Any) -> None:
        self._out.append((session.address, proto.encode(message, self.config.protocol)))

    # ---------------------------------------------------------- helpers

    def _latency_s(self, slot: int) -> float:
        """Age of the client's view when its command arrives, less interpolation (s): the smoothed
        round trip. The client renders what the server sent one downstream trip ago and its
        command takes an upstream trip back; Source's "outgoing latency" is measured send-to-ack,
        a round trip too."""
        return self.netstats.rtt_ms(slot) / 1000.0

    def _rtt_array(self) -> np.ndarray:
        rtt = np.zeros(self.config.max_clients)
        rtt_ms = self.netstats.rtt_ms
        for slot in self.by_slot:
            rtt[slot] = rtt_ms(slot) / 1000.0
        return rtt

    def _player_record(self, session: ClientSession) -> dict[str, Any]:
        """One connected player's record as :meth:`report` lists it (without ``connected``)."""
        s = self.netstats.sample(session.slot, self.time_s)
        sanction = None
        if self.pipeline is not None and self.pipeline.policy is not None:
            decision = self.pipeline.evaluate(self.pipeline.key_of(session.slot))
            if decision is not None:
                sanction = {"recommended": decision.recommended.name.lower(), "applied": decision.applied.name.lower(),
                            "score": round(decision.score, 3), "needs_review": decision.needs_review}
        return {
            "slot": session.slot, "name": session.name,
            "rtt_ms": round(s.rtt_ms, 1), "jitter_ms": round(s.jitter_ms, 1), "loss": round(s.loss, 4),
            "shots": session.shots_fired, "hits": session.hits, "kills": session.kills, "deaths": session.deaths,
            "commands": session.commands_applied,
            "corrections": int(self.validator.desyncs[session.slot]),
            "detections": dict(self.detections.get(session.slot, {})),
            "sanction": sanction,
        }

    def report(self) -> dict[str, Any]:
        """What the server recorded: per player and for the server itself (plain JSON-able data).

        ``players`` lists everyone seen in the session: those still connected (by slot, with
        ``connected`` true, ``left_s`` and ``left_reason`` null), then those who left, in leaving
        order, with ``connected`` false, ``left_s`` (server time they left, s) and ``left_reason``
        (``client``, ``timeout``...), their figures as they stood when they left and every
        detection counted for them (including ones the detectors delivered after they left).
        A player who left and came back appears once per stay."""
        players = []
        for session in sorted(self.by_slot.values(), key=lambda s: s.slot):
            record = self._player_record(session)
            record.update(connected=True, left_s=None, left_reason=None)
            players.append(record)
        for gone in self.departed:
            record = dict(gone.record)
            record.update(detections=dict(gone.detections), connected=False, left_s=round(gone.left_s, 3),
                          left_reason=gone.reason)
            players.append(record)
        return {
            "tick": self.tick,
            "time_s": self.time_s,
            "players": players,
            "rejections": dict(self.rejections),
            "counters": dict(self.counters),
            "tick_stats": self.tick_stats.summary(),
            "visibility_rays": self.culler.rays_cast,
            "visibility_rays_cached": self.culler.rays_cached,
        }

    def close(self) -> None:
        """End of the match: detectors deliver what they still hold (recorded like any tick's
        detections, so a replay re-run ends the same way), then the recording is closed."""
        if self.pipeline is not None:
            held = self.pipeline.flush()
            for d in held:
                counter = self.detections.get(d.player)
                if counter is not None:
                    counter[f"{d.detector}:{d.kind}"] += 1
                self.bus.publish(d)
            if held and self.recorder is not None:
                self.recorder.write_tick(self.tick, self.time_s, held)
        if self.recorder is not None:
            self.recorder.close()


@dataclass(slots=True)
class DepartedPlayer:
    """A player who left: ``record`` (their :meth:`ServerCore.report` entry when they left),
    ``detections`` (their live detection counter), ``left_s`` (server time, s), ``reason``."""

    record: dict[str, Any]
    detections: Counter[str]
    left_s: float
    reason: str


def _vec(v: np.ndarray) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


__all__ = ["DepartedPlayer", "Outgoing", "ServerCore"]
