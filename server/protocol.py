"""The wire protocol: messages, their MessagePack encoding, and validation at the border.

One message per UDP datagram, at most 1200 bytes of payload (netcode.io, REFERENCES section 7).
A message is a msgpack array ``[version, type, field, ...]``; PROTOCOL.md at the repository root
documents the exact field order and msgpack types of every message for clients in other languages.
The commands of an INPUT travel as one packed block of fixed-size little-endian records (like a
snapshot's entity block), validated in one compiled pass: every client sends an INPUT per tick.

:func:`decode` is the border of the server: anything that is not a well-formed, in-range message
raises :class:`ProtocolError` whose ``reason`` is a :class:`RejectReason`, so the server can count
every rejection by cause, and nothing else ever escapes it (DESIGN principle 6). Float fields
accept a msgpack int as well (a client in a language that writes ``0`` for ``0.0`` is not wrong)
and decode it to a Python float; bool is never accepted for an int or a float.

Bots import this module, so it must never import server internals; it imports world tables and
the physics button bits only.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import msgpack
import numba
import numpy as np

from physics.buttons import ALL_BUTTONS
from server.entity_block import ENTITY_BYTES, EntityBlockError, EntityLimits, check_block
from world.hitbox import Bone
from world.state import PITCH_LIMIT_DEG, WorldLimits
from world.weapons import WeaponId

PROTOCOL_VERSION: Final = 2
NONCE_BYTES: Final = 16
"""Client nonce in CONNECT / CHALLENGE_RESPONSE (bytes)."""
COOKIE_BYTES: Final = 40
"""Challenge cookie: 8 bytes issue time + 32 bytes HMAC-SHA256 (see server.handshake)."""
TOKEN_BYTES: Final = 16
"""Session token: HMAC-SHA256 truncated to 128 bits, sent in every authenticated packet."""
U32_MAX: Final = 0xFFFF_FFFF

Vec3 = tuple[float, float, float]


class RejectReason(str, Enum):
    """Why :func:`decode` refused a datagram (the server counts rejections by these values)."""

    TOO_LARGE = "too_large"
    """Datagram longer than ``max_datagram_bytes`` (or encode produced one)."""
    UNPADDED = "unpadded"
    """CONNECT / CHALLENGE_RESPONSE shorter than ``min_unauth_request_bytes`` (anti-amplification)."""
    NOT_MSGPACK = "not_msgpack"
    """Not exactly one valid msgpack object (garbage, truncated, trailing bytes, too deep)."""
    NOT_ARRAY = "not_array"
    """The top-level object is not an array."""
    BAD_VERSION = "bad_version"
    """The first element is not the integer PROTOCOL_VERSION."""
    UNKNOWN_TYPE = "unknown_type"
    """The type element is not a known MsgType."""
    WRONG_DIRECTION = "wrong_direction"
    """A server-to-client type sent to the server, or the reverse."""
    BAD_ARITY = "bad_arity"
    """A message, shot, vector or limits array has the wrong number of elements."""
    BAD_TYPE = "bad_type"
    """A field has the wrong msgpack type (bool for an int, str for a float, map, ext...)."""
    BAD_LENGTH = "bad_length"
    """A fixed-size bin (nonce, cookie, token) has the wrong length, an INPUT command block is
    not whole records, or a list is too long."""
    BAD_STRING = "bad_string"
    """A string is empty where not allowed, too long, not UTF-8, or has non-printable characters."""
    NON_FINITE = "non_finite"
    """A float is NaN or infinite."""
    OUT_OF_RANGE = "out_of_range"
    """A number lies outside its documented range."""
    NO_COMMANDS = "no_commands"
    """An INPUT with an empty command block."""
    TOO_MANY_COMMANDS = "too_many_commands"
    TOO_MANY_SHOTS = "too_many_shots"
    COMMAND_ORDER = "command_order"
    """Command sequence numbers of an INPUT are not strictly increasing."""
    ORPHAN_SHOT = "orphan_shot"
    """A shot names a command sequence number that is not in the same INPUT."""
    UNKNOWN_WEAPON = "unknown_weapon"
    UNKNOWN_BONE = "unknown_bone"
    UNKNOWN_BUTTONS = "unknown_buttons"
    """Button bits outside the defined ones."""
    UNKNOWN_CODE = "unknown_code"
    """A reject, disconnect or notice code that is not defined."""
    BAD_ENTITY_BLOCK = "bad_entity_block"
    """The SNAPSHOT entity block's length is not a multiple of the record size."""
    UNKNOWN_FLAGS = "unknown_flags"
    """Reserved entity flag bits are set."""
    DUPLICATE_SLOT = "duplicate_slot"
    """Two entity records name the same slot."""


class ProtocolError(ValueError):
    """A datagram was refused; ``reason`` says why, the message adds the field for logs."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason


class MsgType(IntEnum):
    """Message type ids (second array element). Client to server < 16 <= server to client."""

    CONNECT = 1
    CHALLENGE_RESPONSE = 2
    INPUT = 3
    PING = 4
    DISCONNECT = 5
    CHALLENGE = 16
    ACCEPT = 17
    REJECT = 18
    SNAPSHOT = 19
    CORRECTION = 20
    NOTICE = 21
    PONG = 22
    SERVER_DISCONNECT = 23


CLIENT_TYPES: Final = frozenset(
    {MsgType.CONNECT, MsgType.CHALLENGE_RESPONSE, MsgType.INPUT, MsgType.PING, MsgType.DISCONNECT}
)
SERVER_TYPES: Final = frozenset(set(MsgType) - CLIENT_TYPES)
UNAUTHENTICATED_TYPES: Final = frozenset({MsgType.CONNECT, MsgType.CHALLENGE_RESPONSE})
"""Client messages without a session token: they are padded so that no reply is larger."""


class RefuseCode(IntEnum):
    """Why the server refused a connection (REJECT)."""

    SERVER_FULL = 1
    BAD_VERSION = 2
    INVALID_COOKIE = 3
    EXPIRED_COOKIE = 4
    BANNED = 5
    RATE_LIMITED = 6
    MALFORMED = 7


class DisconnectCode(IntEnum):
    """Why the server ended a session (SERVER_DISCONNECT)."""

    TIMEOUT = 1
    KICKED = 2
    BANNED = 3
    SHUTDOWN = 4
    PROTOCOL_VIOLATION = 5
    RATE_LIMITED = 6
    TOKEN_EXPIRED = 7


class NoticeCode(IntEnum):
    """What a NOTICE reports; the meaning of its numbers is listed per code in PROTOCOL.md."""

    INFO = 1
    """Free text; no numbers."""
    KILL = 2
    """numbers: killer slot, victim slot, weapon id, bone id, distance (m)."""
    SPAWN = 3
    """numbers: slot, x, y, z (m)."""
    DETECTION = 4
    """For operators: numbers: slot, severity (0..1), measured value; text: detector and kind."""
    SANCTION = 5
    """numbers: slot; text: the sanction (kick, ban...)."""


# ---------------------------------------------------------------------------------------------
# The INPUT command record: one fixed-size little-endian record per command (PROTOCOL.md,
# "The INPUT command block")

COMMAND_STRUCT: Final = struct.Struct("<IIddddddIIddddd")
"""One command record, fields in :class:`Command` order with ``pos`` as its 3 components::

    offset  size  type  field
         0     4  u32   seq
         4     4  u32   client_tick
         8     8  f64   view_time_s       (s)
        16     8  f64   duration_s        (s)
        24     8  f64   forward
        32     8  f64   side
        40     8  f64   yaw_deg           (deg)
        48     8  f64   pitch_deg         (deg)
        56     4  u32   buttons
        60     4  u32   weapon_switch
        64     8  f64   recoil_pitch_deg  (deg)
        72     8  f64   recoil_yaw_deg    (deg)
        80    24  3xf64 pos               (m)

Every float is a float64, so a command reaches the server with exactly the values the client
simulated (replays and determinism do not depend on the encoding); every float sits at a multiple
of 8 bytes, so a record is 13 eight-byte words and the block reads as a float64 array.
"""
COMMAND_BYTES: Final = COMMAND_STRUCT.size
"""Size of one command record (bytes): 104."""
_COMMAND_SEQ = struct.Struct("<I")
_COMMAND_HEAD = struct.Struct(COMMAND_STRUCT.format[:-3])
"""Every field of a record before pos."""
_COMMAND_POS = struct.Struct("<ddd")
_COMMAND_POS_OFFSET = _COMMAND_HEAD.size
_SEQS_BY_COUNT: dict[int, struct.Struct] = {}
"""Record count -> a struct reading the seq of each record (built on first use of a count)."""
_tuple_new = tuple.__new__
"""What NamedTuple._make calls, minus its Python-level length check: for the hot constructors."""
_COMMAND_WORDS = COMMAND_BYTES // 8
_DURATION_WORD = 2
_COMMAND_VALUE_NAMES: Final = (
    "seq", "client_tick", "view_time_s", "duration_s", "forward", "side", "yaw_deg", "pitch_deg",
    "buttons", "weapon_switch", "recoil_pitch_deg", "recoil_yaw_deg", "pos.x", "pos.y", "pos.z",
)
"""The values of a record in COMMAND_STRUCT order (the block check reports failures by this index)."""
if (COMMAND_BYTES, _COMMAND_WORDS * 8, len(_COMMAND_VALUE_NAMES), _COMMAND_POS_OFFSET) != (
    104, 104, 15, 80
):  # pragma: no cover - layout consistency
    raise AssertionError("command record layout no longer matches its word-wise check")


def _command_bounds(limits: ProtocolLimits) -> np.ndarray:
    """(13, 2) [low, high] per 8-byte word of a record, for the float words (the two integer
    words' rows are unused). duration_s also has to be > 0, which the check adds."""
    bounds = np.zeros((_COMMAND_WORDS, 2))
    max_time, yaw, pitch = limits.max_time_s, limits.yaw_limit_deg, limits.pitch_limit_deg
    recoil, coord = limits.recoil_limit_deg, limits.coord_limit_m
    rows = {
        1: (0.0, max_time), 2: (0.0, limits.max_command_duration_s), 3: (-1.0, 1.0), 4: (-1.0, 1.0),
        5: (-yaw, yaw), 6: (-pitch, pitch), 8: (-recoil, recoil), 9: (-recoil, recoil),
        10: (-coord, coord), 11: (-coord, coord), 12: (-coord, coord),
    }
    for word, row in rows.items():
        bounds[word] = row
    return bounds


@dataclass(frozen=True)
class ProtocolLimits:
    """Every limit the codec enforces, with its unit and anchor.

    Not slotted: the INPUT command block check keeps its bounds array in a plain attribute, derived
    state rather than a field, so that configuration dumps (replay headers) hold only the limits.

    Attributes:
        max_datagram_bytes: largest datagram accepted or produced (bytes); netcode.io's 1200.
        min_unauth_request_bytes: CONNECT and CHALLENGE_RESPONSE are padded to at least this many
            bytes, which exceeds the largest reply to them (ACCEPT, ~150 bytes): no amplification.
        max_commands: commands per INPUT; Quake 3 re-sends the last 3 commands with the new one.
            Less than 256 (the command block check reports a record index in 8 bits).
        max_shots: shots per INPUT; 4 commands of 0.1 s at the minigun's 0.05 s interval fire 8.
        max_name_bytes, max_map_name_bytes, max_notice_text_bytes: UTF-8 lengths (bytes).
        max_notice_numbers: numbers in a NOTICE.
        max_snapshot_parts: a snapshot may span this many datagrams (29 entities fit in one).
        coord_limit_m: |position component| (m); WorldLimits' 10,000 m.
        speed_limit_m_s: |velocity component| (m/s); WorldLimits' 100 m/s.
        pitch_limit_deg: |pitch| (deg); Source's 89.
        yaw_limit_deg: |yaw| (deg); 360 so an unwrapped angle just past +/-180 still passes.
        recoil_limit_deg: |reported recoil component| (deg); far beyond any weapon's kick.
        max_command_duration_s: a command covers (0, this] seconds; 0.1 s is 10 Hz, the slowest client.
        max_time_s: time fields lie in [0, this] (s); 1e10 s admits Unix epoch clocks.
        max_slots: slots must be below this; 256 is what one byte holds.
        max_health: health field upper bound (hit points); what one entity byte holds.
        max_ammo: ammo and reserve upper bound (rounds); what a uint16 holds.
        max_tick_rate_hz: ACCEPT tick rate upper bound (Hz).
        notice_number_limit: |NOTICE number| bound.
    """

    max_datagram_bytes: int = 1200
    min_unauth_request_bytes: int = 256
    max_commands: int = 4
    max_shots: int = 8
    max_name_bytes: int = 32
    max_map_name_bytes: int = 32
    max_notice_text_bytes: int = 120
    max_notice_numbers: int = 8
    max_snapshot_parts: int = 8
    coord_limit_m: float = WorldLimits().coord_limit_m
    speed_limit_m_s: float = WorldLimits().speed_limit_m_s
    pitch_limit_deg: float = PITCH_LIMIT_DEG
    yaw_limit_deg: float = 360.0
    recoil_limit_deg: float = 180.0
    max_command_duration_s: float = 0.1
    max_time_s: float = 1e10
    max_slots: int = 256
    max_health: float = 255.0
    max_ammo: int = 0xFFFF
    max_tick_rate_hz: int = 1000
    notice_number_limit: float = 1e12
    _entity_limits: EntityLimits = field(init=False, repr=False, compare=False)
    if TYPE_CHECKING:
        _command_bounds: np.ndarray

    def __post_init__(self) -> None:
        if not 1 <= self.max_commands <= 255:
            raise ValueError(f"ProtocolLimits.max_commands must lie in 1..255, got {self.max_commands}")
        entity = EntityLimits(
            max_slots=self.max_slots,
            coord_limit_m=self.coord_limit_m,
            speed_limit_m_s=self.speed_limit_m_s,
            yaw_limit_deg=self.yaw_limit_deg,
            pitch_limit_deg=self.pitch_limit_deg,
        )
        object.__setattr__(self, "_entity_limits", entity)
        object.__setattr__(self, "_command_bounds", _command_bounds(self))

    def entity_limits(self) -> EntityLimits:
        """The same ranges for the SNAPSHOT entity block."""
        return self._entity_limits


DEFAULT_LIMITS: Final = ProtocolLimits()


# ---------------------------------------------------------------------------------------------
# Messages: client to server


@dataclass(frozen=True, slots=True)
class Connect:
    """First packet of a client. ``nonce``: 16 random bytes; ``name``: 1..32 UTF-8 bytes.

    Encoding pads it to ``min_unauth_request_bytes``; the padding is not a field.
    """

    nonce: bytes
    name: str


@dataclass(frozen=True, slots=True)
class ChallengeResponse:
    """Echo of the CHALLENGE cookie and the CONNECT nonce. The name travels again because the
    server keeps nothing between CONNECT and this packet. Padded like CONNECT."""

    cookie: bytes
    nonce: bytes
    name: str


class Command(NamedTuple):
    """One input command (the client's movement and aim over ``duration_s``).

    The records inside a message (Command, Shot, OwnState, AcceptLimits) and the INPUT itself are
    NamedTuples, not frozen dataclasses: equally immutable, and built 3-5x faster, which matters
    for the INPUT every client sends every tick. Their field order is the wire order; on the wire
    a command is one COMMAND_STRUCT record.

    Attributes:
        seq: command sequence number (uint32, strictly increasing per client).
        client_tick: the client's tick counter when it sampled the command (uint32).
        view_time_s: the server time (s) the client was rendering.
        duration_s: time this command covers (s), in (0, 0.1].
        forward, side: movement intent in [-1, 1] (side positive = right).
        yaw_deg, pitch_deg: view angles (deg); pitch in [-89, 89], positive up.
        buttons: physics.buttons.Buttons bitmask.
        weapon_switch: 0 for none, else the WeaponId to switch to.
        recoil_pitch_deg, recoil_yaw_deg: the recoil kick the client reports it is under (deg).
        pos: the position the client claims after this command (m) - evidence, never truth.
    """

    seq: int
    client_tick: int
    view_time_s: float
    duration_s: float
    forward: float
    side: float
    yaw_deg: float
    pitch_deg: float
    buttons: int
    weapon_switch: int
    recoil_pitch_deg: float
    recoil_yaw_deg: float
    pos: Vec3


class Shot(NamedTuple):
    """A shot fired during a command; everything but the angles is a claim (evidence).

    Attributes:
        cmd_seq: sequence number of the command (in the same INPUT) that fired it.
        weapon: WeaponId fired. yaw_deg, pitch_deg: view angles of the shot (deg).
        view_time_s: server time (s) the client was rendering when it fired.
        claimed_victim: slot the client says it hit, or None (-1 on the wire).
        claimed_hit_point: where the client says the bullet hit (m), or None (nil).
        claimed_bone: hit location id (0 none, else world.hitbox.Bone).
    """

    cmd_seq: int
    weapon: int
    yaw_deg: float
    pitch_deg: float
    view_time_s: float
    claimed_victim: int | None = None
    claimed_hit_point: Vec3 | None = None
    claimed_bone: int = 0


class Input(NamedTuple):
    """The per-tick client packet.

    Attributes:
        token: session token from ACCEPT. packet_seq: uint32, one counter over INPUT, PING and
        DISCONNECT (checked against the replay window; gaps measure loss).
        client_time_s: the client's own clock when sending (s; any origin); gives jitter.
        ack_tick: tick of the newest SNAPSHOT received, or None before the first.
        command_block: 1..4 commands, oldest first (the newest plus re-sends against loss), as
            packed COMMAND_STRUCT records, the wire form; :func:`decode` has validated every
            record. Build it with :meth:`with_commands` or :func:`pack_commands`; read it with
            :attr:`commands`, or one record at a time with :func:`command_seq` and
            :func:`unpack_command` (the server unpacks only the commands new to it).
        shots: 0..8 shots fired by those commands.
    """

    token: bytes
    packet_seq: int
    client_time_s: float
    ack_tick: int | None
    command_block: bytes
    shots: tuple[Shot, ...] = ()

    @classmethod
    def with_commands(
        cls,
        token: bytes,
        packet_seq: int,
        client_time_s: float,
        ack_tick: int | None,
        commands: Iterable[Command],
        shots: Iterable[Shot] = (),
    ) -> Input:
        """An INPUT carrying ``commands`` (oldest first), packed; ValueError for a command whose
        integer fields do not fit a uint32 (the record cannot hold it)."""
        return cls(token, packet_seq, client_time_s, ack_tick, pack_commands(commands), tuple(shots))

    @property
    def command_count(self) -> int:
        """Number of command records in the block."""
        return len(self.command_block) // COMMAND_BYTES

    @property
    def commands(self) -> tuple[Command, ...]:
        """Every command of the block, oldest first, with the exact values sent (floats are float64
        on the wire). Unpacks all of them on each access."""
        return tuple(unpack_command(self.command_block, i) for i in range(self.command_count))


@dataclass(frozen=True, slots=True)
class Ping:
    """Latency probe; the server answers with PONG. ``client_time_s``: the client's clock (s)."""

    token: bytes
    packet_seq: int
    client_time_s: float


@dataclass(frozen=True, slots=True)
class Disconnect:
    """The client leaves."""

    token: bytes
    packet_seq: int


# ---------------------------------------------------------------------------------------------
# Messages: server to client


@dataclass(frozen=True, slots=True)
class Challenge:
    """Reply to CONNECT: a stateless cookie to echo in CHALLENGE_RESPONSE."""

    cookie: bytes


class AcceptLimits(NamedTuple):
    """Limits the client must respect, announced in ACCEPT.

    Attributes: max_datagram_bytes (bytes), max_commands and max_shots per INPUT,
    max_command_duration_s (s), max_packets_per_s and max_bytes_per_s (the rate limiter's
    sustained rates, packets/s and bytes/s).
    """

    max_datagram_bytes: int
    max_commands: int
    max_shots: int
    max_command_duration_s: float
    max_packets_per_s: float
    max_bytes_per_s: float


@dataclass(frozen=True, slots=True)
class Accept:
    """The session is open. ``tick_rate_hz``: server ticks per second; ``server_time_s``: the
    server clock (s) when sent; ``slot``: the client's player slot."""

    token: bytes
    slot: int
    tick_rate_hz: int
    map_name: str
    server_time_s: float
    limits: AcceptLimits


@dataclass(frozen=True, slots=True)
class Reject:
    """The connection attempt was refused."""

    code: RefuseCode


class OwnState(NamedTuple):
    """The receiving player's authoritative state.

    Attributes: pos (m), vel (m/s), yaw_deg, pitch_deg (deg), health (hit points, 0..255),
    weapon (0 none or WeaponId), ammo and reserve (rounds), stance (0 standing, 1 crouching),
    on_ground, alive.
    """

    pos: Vec3
    vel: Vec3
    yaw_deg: float
    pitch_deg: float
    health: float
    weapon: int
    ammo: int
    reserve: int
    stance: int
    on_ground: bool
    alive: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """World state at a tick, culled for the receiver.

    Attributes:
        tick (uint32), server_time_s (s), last_cmd_seq: the receiver's newest applied command
        (None before the first). part / part_count: when the visible entities do not fit one
        datagram (29 records do) the snapshot is sent as several self-contained parts, each with
        a slice of the entities. own: the receiver's state. entities: the packed entity block
        (server.entity_block), validated on decode; read it with ``decode_entities``.
    """

    tick: int
    server_time_s: float
    last_cmd_seq: int | None
    own: OwnState
    entities: bytes
    part: int = 0
    part_count: int = 1


@dataclass(frozen=True, slots=True)
class Correction:
    """Setback: the command ``cmd_seq`` ended at ``pos`` (m) with ``vel`` (m/s), not where claimed."""

    cmd_seq: int
    pos: Vec3
    vel: Vec3


@dataclass(frozen=True, slots=True)
class Notice:
    """Kill feed, respawn, detection notices for operators. ``numbers`` per NoticeCode."""

    code: NoticeCode
    text: str = ""
    numbers: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Pong:
    """Answer to PING: echoes its sequence and time; ``server_time_s`` is the server clock (s)."""

    ping_seq: int
    client_time_s: float
    server_time_s: float


@dataclass(frozen=True, slots=True)
class ServerDisconnect:
    """The server ended the session."""

    code: DisconnectCode


ClientMessage = Connect | ChallengeResponse | Input | Ping | Disconnect
ServerMessage = Challenge | Accept | Reject | Snapshot | Correction | Notice | Pong | ServerDisconnect
Message = ClientMessage | ServerMessage

MESSAGE_TYPE: Final[dict[type, MsgType]] = {
    Connect: MsgType.CONNECT,
    ChallengeResponse: MsgType.CHALLENGE_RESPONSE,
    Input: MsgType.INPUT,
    Ping: MsgType.PING,
    Disconnect: MsgType.DISCONNECT,
    Challenge: MsgType.CHALLENGE,
    Accept: MsgType.ACCEPT,
    Reject: MsgType.REJECT,
    Snapshot: MsgType.SNAPSHOT,
    Correction: MsgType.CORRECTION,
    Notice: MsgType.NOTICE,
    Pong: MsgType.PONG,
    ServerDisconnect: MsgType.SERVER_DISCONNECT,
}


# ---------------------------------------------------------------------------------------------
# Encoding


def _vec(v: Vec3) -> list[float]:
    return [v[0], v[1], v[2]]


def pack_command(c: Command) -> bytes:
    """One command as its wire record (COMMAND_BYTES bytes). No range checks, like :func:`encode`;
    ValueError when an integer field does not fit a uint32 or a field is not a number."""
    pos = c.pos
    try:
        return COMMAND_STRUCT.pack(
            c.seq, c.client_tick, c.view_time_s, c.duration_s, c.forward, c.side, c.yaw_deg, c.pitch_deg,
            c.buttons, c.weapon_switch, c.recoil_pitch_deg, c.recoil_yaw_deg, pos[0], pos[1], pos[2],
        )
    except struct.error as exc:
        raise ValueError(f"command {c.seq!r} does not fit the command record: {exc}") from None


def pack_commands(commands: Iterable[Command]) -> bytes:
    """The command block of an INPUT: the records of ``commands`` back to back, in the given
    order (oldest first). See :func:`pack_command`."""
    return b"".join([pack_command(c) for c in commands])


def command_seq(block: bytes, index: int) -> int:
    """``seq`` of record ``index`` of a command block, without unpacking the rest of it."""
    return _COMMAND_SEQ.unpack_from(block, index * COMMAND_BYTES)[0]  # type: ignore[no-any-return]


def command_seqs(block: bytes) -> tuple[int, ...]:
    """``seq`` of every record of a command block, in one unpack (the rest stays packed)."""
    count = len(block) // COMMAND_BYTES
    layout = _SEQS_BY_COUNT.get(count)
    if layout is None:
        layout = _SEQS_BY_COUNT[count] = struct.Struct("<" + f"I{COMMAND_BYTES - 4}x" * count)
    return layout.unpack_from(block)  # type: ignore[no-any-return]


def command_record(block: bytes, index: int) -> bytes:
    """Record ``index`` of a command block, still packed (COMMAND_BYTES bytes)."""
    offset = index * COMMAND_BYTES
    return bytes(block[offset : offset + COMMAND_BYTES])


CMD_DURATION, CMD_FORWARD, CMD_SIDE, CMD_YAW, CMD_PITCH, CMD_RECOIL_PITCH, CMD_RECOIL_YAW, CMD_POS = (
    2, 3, 4, 5, 6, 8, 9, 10
)
"""Word (8-byte) index of each float field in a command record, as :func:`command_arrays` reads it
(``pos`` takes words 10-12)."""
CMD_SEQ, CMD_BUTTONS, CMD_SWITCH = 0, 14, 15
"""Half-word (4-byte) index of the integer fields seq, buttons and weapon_switch in a record."""
if (CMD_RECOIL_PITCH * 8, CMD_POS * 8, CMD_BUTTONS * 4, CMD_SWITCH * 4) != (64, 80, 56, 60):  # pragma: no cover
    raise AssertionError("command record layout no longer matches its word indices")


def command_arrays(records: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Command records back to back (N * COMMAND_BYTES bytes) as two read-only views of the same
    bytes: (N, 13) float64 words (index them with ``CMD_DURATION`` ... ``CMD_POS``) and (N, 26)
    uint32 halves (``CMD_SEQ``, ``CMD_BUTTONS``, ``CMD_SWITCH``). The values are exactly those of
    :func:`unpack_command`."""
    n = len(records) // COMMAND_BYTES
    words = np.frombuffer(records, dtype="<f8", count=n * _COMMAND_WORDS).reshape(n, _COMMAND_WORDS)
    halves = np.frombuffer(records, dtype="<u4", count=n * 2 * _COMMAND_WORDS).reshape(n, 2 * _COMMAND_WORDS)
    return words, halves


def unpack_command(block: bytes, index: int) -> Command:
    """Record ``index`` of a command block as a Command (exact values: every float is a float64)."""
    offset = index * COMMAND_BYTES
    # Command._make without its Python-level length check (the structs always give 12 + 3
    # values): this is on the server's receive path, and 40 % cheaper than Command(...).
    pos = _COMMAND_POS.unpack_from(block, offset + _COMMAND_POS_OFFSET)
    return _tuple_new(Command, _COMMAND_HEAD.unpack_from(block, offset) + (pos,))  # type: ignore[no-any-return]


def _shot_fields(s: Shot) -> list[Any]:
    victim = -1 if s.claimed_victim is None else s.claimed_victim
    point = None if s.claimed_hit_point is None else _vec(s.claimed_hit_point)
    return [s.cmd_seq, s.weapon, s.yaw_deg, s.pitch_deg, s.view_time_s, victim, point, s.claimed_bone]


def _own_fields(o: OwnState) -> list[Any]:
    return [
        _vec(o.pos), _vec(o.vel), o.yaw_deg, o.pitch_deg, o.health, o.weapon, o.ammo, o.reserve,
        o.stance, o.on_ground, o.alive,
    ]


def _fields(m: Message) -> list[Any]:
    """The message's fields after [version, type], in wire order (padding excluded)."""
    if isinstance(m, Input):
        return [
            m.token, m.packet_seq, m.client_time_s, m.ack_tick, m.command_block,
            [_shot_fields(s) for s in m.shots],
        ]
    if isinstance(m, Snapshot):
        return [m.tick, m.server_time_s, m.last_cmd_seq, m.part, m.part_count, _own_fields(m.own), m.entities]
    if isinstance(m, Connect):
        return [m.nonce, m.name]
    if isinstance(m, ChallengeResponse):
        return [m.cookie, m.nonce, m.name]
    if isinstance(m, Ping):
        return [m.token, m.packet_seq, m.client_time_s]
    if isinstance(m, Disconnect):
        return [m.token, m.packet_seq]
    if isinstance(m, Challenge):
        return [m.cookie]
    if isinstance(m, Accept):
        lim = m.limits
        return [
            m.token, m.slot, m.tick_rate_hz, m.map_name, m.server_time_s,
            [lim.max_datagram_bytes, lim.max_commands, lim.max_shots, lim.max_command_duration_s,
             lim.max_packets_per_s, lim.max_bytes_per_s],
        ]
    if isinstance(m, (Reject, ServerDisconnect)):
        return [int(m.code)]
    if isinstance(m, Correction):
        return [m.cmd_seq, _vec(m.pos), _vec(m.vel)]
    if isinstance(m, Notice):
        return [int(m.code), m.text, [float(x) for x in m.numbers]]
    if isinstance(m, Pong):
        return [m.ping_seq, m.client_time_s, m.server_time_s]
    raise TypeError(f"not a protocol message: {type(m).__name__}")


def encode(message: Message, limits: ProtocolLimits = DEFAULT_LIMITS, *, check_size: bool = True) -> bytes:
    """Encode a message to one datagram (bytes).

    Encoding does not range-check fields (a test client may send malformed values on purpose;
    the receiver's decode is the border). CONNECT and CHALLENGE_RESPONSE get their padding here.
    Raises ProtocolError(TOO_LARGE) when ``check_size`` and the datagram would exceed
    ``max_datagram_bytes``; TypeError for a non-message.
    """
    mtype = MESSAGE_TYPE.get(type(message))
    if mtype is None:
        raise TypeError(f"not a protocol message: {type(message).__name__}")
    body: list[Any] = [PROTOCOL_VERSION, int(mtype), *_fields(message)]
    if mtype in UNAUTHENTICATED_TYPES:
        body.append(b"")
        short = limits.min_unauth_request_bytes - len(msgpack.packb(body, use_bin_type=True))
        if short > 0:
            # A bin of n > 255 bytes has a 3-byte header instead of 2: the result may be 1 byte
            # longer than the minimum, never shorter.
            body[-1] = bytes(short)
    data: bytes = msgpack.packb(body, use_bin_type=True)
    if check_size and len(data) > limits.max_datagram_bytes:
        raise ProtocolError(RejectReason.TOO_LARGE, f"{mtype.name} encodes to {len(data)} bytes")
    return data


def snapshot_head(tick: int, server_time_s: float, packer: msgpack.Packer | None = None) -> bytes:
    """The bytes every SNAPSHOT datagram of one tick starts with: the message's array header (9
    items) and its four items every client's snapshot shares (version, type, ``tick``,
    ``server_time_s`` in s). ``packer``: a ``msgpack.Packer(use_bin_type=True)`` to reuse (building
    one costs more than packing a snapshot); the server's compiled writer
    (``server.snapshot_kernel``) appends the rest of each datagram."""
    pack = (packer or msgpack.Packer(use_bin_type=True)).pack
    # 0x99: a fixarray of the message's 9 items.
    return b"\x99" + pack(PROTOCOL_VERSION) + pack(_SNAPSHOT_ID) + pack(tick) + pack(server_time_s)  # type: ignore[no-any-return]


def max_entities_per_snapshot(limits: ProtocolLimits = DEFAULT_LIMITS) -> int:
    """How many entity records fit one SNAPSHOT datagram in the worst case (29 with defaults)."""
    worst_own = OwnState(
        pos=(-1e4, -1e4, -1e4), vel=(-1.5, -1.5, -1.5), yaw_deg=-1.5, pitch_deg=-1.5, health=1.5,
        weapon=int(max(WeaponId)), ammo=limits.max_ammo, reserve=limits.max_ammo, stance=1,
        on_ground=True, alive=True,
    )
    probe = bytes(ENTITY_BYTES * 8)  # > 255 bytes: the 3-byte bin16 header of a full block
    worst = Snapshot(
        tick=U32_MAX, server_time_s=1.5, last_cmd_seq=U32_MAX, own=worst_own, entities=probe,
        part=limits.max_snapshot_parts - 1, part_count=limits.max_snapshot_parts,
    )
    overhead = len(encode(worst, limits, check_size=False)) - len(probe)
    return (limits.max_datagram_bytes - overhead) // ENTITY_BYTES


# ---------------------------------------------------------------------------------------------
# Decoding and validation


def _fail(reason: RejectReason, what: str) -> ProtocolError:
    return ProtocolError(reason, what)


def _int(v: object, lo: int, hi: int, what: str) -> int:
    if type(v) is not int:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be an int")
    if not lo <= v <= hi:
        raise _fail(RejectReason.OUT_OF_RANGE, f"{what}={v} outside [{lo}, {hi}]")
    return v


def _float(v: object, lo: float, hi: float, what: str) -> float:
    t = type(v)
    if t is float:
        if lo <= v <= hi:  # type: ignore[operator]
            return v  # type: ignore[return-value]
        if not math.isfinite(v):  # type: ignore[arg-type]
            raise _fail(RejectReason.NON_FINITE, what)
        raise _fail(RejectReason.OUT_OF_RANGE, f"{what}={v} outside [{lo}, {hi}]")
    if t is int:
        if not lo <= v <= hi:  # type: ignore[operator]
            raise _fail(RejectReason.OUT_OF_RANGE, f"{what}={v} outside [{lo}, {hi}]")
        return float(v)  # type: ignore[arg-type]
    raise _fail(RejectReason.BAD_TYPE, f"{what} must be a float")


def _bool(v: object, what: str) -> bool:
    if type(v) is not bool:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be a bool")
    return v


def _array(v: object, n: int, what: str) -> tuple[Any, ...]:
    if type(v) is not tuple:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be an array")
    if len(v) != n:
        raise _fail(RejectReason.BAD_ARITY, f"{what} has {len(v)} elements, expected {n}")
    return v


def _vec3(v: object, limit: float, what: str) -> Vec3:
    a = _array(v, 3, what)
    return (_float(a[0], -limit, limit, what), _float(a[1], -limit, limit, what), _float(a[2], -limit, limit, what))


def _bin(v: object, n: int, what: str) -> bytes:
    if type(v) is not bytes:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be bin")
    if len(v) != n:
        raise _fail(RejectReason.BAD_LENGTH, f"{what} has {len(v)} bytes, expected {n}")
    return v


def _text(v: object, min_bytes: int, max_bytes: int, what: str) -> str:
    if type(v) is not str:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be a str")
    size = len(v.encode("utf-8"))
    if not min_bytes <= size <= max_bytes or not v.isprintable():
        raise _fail(RejectReason.BAD_STRING, f"{what}: {min_bytes}..{max_bytes} printable UTF-8 bytes")
    return v


_E = TypeVar("_E", bound=IntEnum)


def _code(v: object, enum: type[_E], what: str) -> _E:
    if type(v) is not int:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be an int")
    try:
        return enum(v)
    except ValueError:
        raise _fail(RejectReason.UNKNOWN_CODE, f"{what}={v}") from None


_WEAPON_IDS: Final = frozenset(int(w) for w in WeaponId)
_BONE_IDS: Final = frozenset(int(b) for b in Bone)


def _weapon(v: object, allow_none: bool, what: str) -> int:
    if type(v) is not int:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be an int")
    if v in _WEAPON_IDS or (allow_none and v == 0):
        return v
    raise _fail(RejectReason.UNKNOWN_WEAPON, f"{what}={v}")


# The command block of an INPUT is checked in one compiled pass over its records; the reason of
# the first failure is worked out in Python, on the rare packet that has one.

_KNOWN_BUTTONS: Final = int(ALL_BUTTONS)
_KNOWN_WEAPON_SWITCHES: Final = sum(1 << w for w in {0, *_WEAPON_IDS})
"""Bit w set when weapon_switch w is valid (0 = none, or a WeaponId)."""
if max(_WEAPON_IDS) > 62:  # pragma: no cover - the mask must fit an int64
    raise AssertionError("weapon ids no longer fit the command check's bit mask")
_BLOCK_NON_FINITE = 1
_BLOCK_OUT_OF_RANGE = 2
_BLOCK_UNKNOWN_BUTTONS = 3
_BLOCK_UNKNOWN_WEAPON = 4
_BLOCK_COMMAND_ORDER = 5
_BLOCK_REASONS: Final = {
    _BLOCK_NON_FINITE: RejectReason.NON_FINITE,
    _BLOCK_OUT_OF_RANGE: RejectReason.OUT_OF_RANGE,
    _BLOCK_UNKNOWN_BUTTONS: RejectReason.UNKNOWN_BUTTONS,
    _BLOCK_UNKNOWN_WEAPON: RejectReason.UNKNOWN_WEAPON,
    _BLOCK_COMMAND_ORDER: RejectReason.COMMAND_ORDER,
}
_BUTTONS_WORD = 7
"""Word 7 holds buttons (its first uint32) and weapon_switch; word 0 holds seq and client_tick,
which every uint32 value satisfies."""
_BLOCK_SIGNATURE = numba.int64(
    numba.types.Bytes(numba.uint8, 1, "C", readonly=True), numba.float64[:, ::1], numba.int64, numba.int64
)


@numba.njit(_BLOCK_SIGNATURE, cache=True, nogil=True)
def _check_command_block(block: bytes, bounds: np.ndarray, known_buttons: int, known_weapons: int) -> int:
    """0 when every record of ``block`` (whole records: the caller checked the length) passes,
    else ``reason << 16 | record << 8 | value`` of the first failure (``_BLOCK_*`` reason, record
    index, index into _COMMAND_VALUE_NAMES). Records are checked in order, each one's values in
    wire order; the seq order only once every record passed, in PROTOCOL.md's order of checks.

    Compiled with its signature at import (or loaded from the cache), so no INPUT ever waits for
    a compilation. NaN fails every comparison, so one range test per float catches it too.
    """
    words = np.frombuffer(block, np.float64)
    halves = words.view(np.uint32)
    n = words.shape[0] // _COMMAND_WORDS
    for i in range(n):
        base = i * _COMMAND_WORDS
        for w in range(1, _COMMAND_WORDS):
            if w == _BUTTONS_WORD:
                if halves[2 * (base + w)] & ~known_buttons:
                    return _BLOCK_UNKNOWN_BUTTONS << 16 | i << 8 | 8
                weapon = halves[2 * (base + w) + 1]
                if weapon > 62 or not (known_weapons >> weapon) & 1:
                    return _BLOCK_UNKNOWN_WEAPON << 16 | i << 8 | 9
                continue
            v = words[base + w]
            if bounds[w, 0] <= v <= bounds[w, 1] and (w != _DURATION_WORD or v > 0.0):
                continue
            reason = _BLOCK_OUT_OF_RANGE if np.isfinite(v) else _BLOCK_NON_FINITE
            # Value index: the words before the buttons word hold value w + 1 (word 0 holds two).
            return reason << 16 | i << 8 | (w + 1 if w < _BUTTONS_WORD else w + 2)
    for i in range(1, n):
        if halves[2 * i * _COMMAND_WORDS] <= halves[2 * (i - 1) * _COMMAND_WORDS]:
            return _BLOCK_COMMAND_ORDER << 16 | i << 8
    return 0


def _command_block_error(block: bytes, status: int) -> ProtocolError:
    reason = _BLOCK_REASONS[status >> 16]
    record, value = (status >> 8) & 0xFF, status & 0xFF
    if reason is RejectReason.COMMAND_ORDER:
        return _fail(reason, f"command seq {command_seq(block, record)} after {command_seq(block, record - 1)}")
    found = COMMAND_STRUCT.unpack_from(block, record * COMMAND_BYTES)[value]
    return _fail(reason, f"commands[{record}].{_COMMAND_VALUE_NAMES[value]}={found!r}")


def _shot(v: object, lim: ProtocolLimits) -> Shot:
    if type(v) is tuple and len(v) == 8:
        cmd_seq, weapon, yaw, pitch, vt, victim, point, bone = v
        yl, pl, cl = lim.yaw_limit_deg, lim.pitch_limit_deg, lim.coord_limit_m
        if (
            type(cmd_seq) is int and type(weapon) is int and type(victim) is int and type(bone) is int
            and type(yaw) is float and type(pitch) is float and type(vt) is float
            and 0 <= cmd_seq <= U32_MAX and weapon in _WEAPON_IDS and bone in _BONE_IDS
            and -1 <= victim < lim.max_slots and -yl <= yaw <= yl and -pl <= pitch <= pl
            and 0.0 <= vt <= lim.max_time_s
        ):
            if point is None:
                return Shot(cmd_seq, weapon, yaw, pitch, vt, None if victim == -1 else victim, None, bone)
            if type(point) is tuple and len(point) == 3:
                x, y, z = point
                if (
                    type(x) is float and type(y) is float and type(z) is float
                    and -cl <= x <= cl and -cl <= y <= cl and -cl <= z <= cl
                ):
                    return Shot(cmd_seq, weapon, yaw, pitch, vt, None if victim == -1 else victim, point, bone)
    return _shot_checked(v, lim)


def _shot_checked(v: object, lim: ProtocolLimits) -> Shot:
    f = _array(v, 8, "shot")
    victim = _int(f[5], -1, lim.max_slots - 1, "shot.claimed_victim")
    point = None if f[6] is None else _vec3(f[6], lim.coord_limit_m, "shot.claimed_hit_point")
    bone = f[7]
    if type(bone) is not int:
        raise _fail(RejectReason.BAD_TYPE, "shot.claimed_bone must be an int")
    if bone not in _BONE_IDS:
        raise _fail(RejectReason.UNKNOWN_BONE, f"shot.claimed_bone={bone}")
    return Shot(
        cmd_seq=_int(f[0], 0, U32_MAX, "shot.cmd_seq"),
        weapon=_weapon(f[1], False, "shot.weapon"),
        yaw_deg=_float(f[2], -lim.yaw_limit_deg, lim.yaw_limit_deg, "shot.yaw_deg"),
        pitch_deg=_float(f[3], -lim.pitch_limit_deg, lim.pitch_limit_deg, "shot.pitch_deg"),
        view_time_s=_float(f[4], 0.0, lim.max_time_s, "shot.view_time_s"),
        claimed_victim=None if victim == -1 else victim,
        claimed_hit_point=point,
        claimed_bone=bone,
    )


def _input(f: tuple[Any, ...], lim: ProtocolLimits) -> Input:
    token = _bin(f[0], TOKEN_BYTES, "token")
    packet_seq = _int(f[1], 0, U32_MAX, "packet_seq")
    client_time = _float(f[2], 0.0, lim.max_time_s, "client_time_s")
    ack = None if f[3] is None else _int(f[3], 0, U32_MAX, "ack_tick")
    block, raw_shots = f[4], f[5]
    if type(block) is not bytes:
        raise _fail(RejectReason.BAD_TYPE, "commands must be a bin of command records")
    size = len(block)
    if not size:
        raise _fail(RejectReason.NO_COMMANDS, "commands")
    if size % COMMAND_BYTES:
        raise _fail(RejectReason.BAD_LENGTH, f"commands: {size} bytes is not a multiple of {COMMAND_BYTES}")
    if size > lim.max_commands * COMMAND_BYTES:
        raise _fail(RejectReason.TOO_MANY_COMMANDS, f"{size // COMMAND_BYTES} > {lim.max_commands}")
    if type(raw_shots) is not tuple:
        raise _fail(RejectReason.BAD_TYPE, "shots must be an array")
    if len(raw_shots) > lim.max_shots:
        raise _fail(RejectReason.TOO_MANY_SHOTS, f"{len(raw_shots)} > {lim.max_shots}")
    status = _check_command_block(block, lim._command_bounds, _KNOWN_BUTTONS, _KNOWN_WEAPON_SWITCHES)
    if status:
        raise _command_block_error(block, status)
    shots = tuple(_shot(s, lim) for s in raw_shots)
    if shots:
        seqs = command_seqs(block)
        for s in shots:
            if s.cmd_seq not in seqs:
                raise _fail(RejectReason.ORPHAN_SHOT, f"shot.cmd_seq={s.cmd_seq}")
    return Input(token, packet_seq, client_time, ack, block, shots)


def _connect(f: tuple[Any, ...], lim: ProtocolLimits) -> Connect:
    nonce = _bin(f[0], NONCE_BYTES, "nonce")
    name = _text(f[1], 1, lim.max_name_bytes, "name")
    if type(f[2]) is not bytes:
        raise _fail(RejectReason.BAD_TYPE, "padding must be bin")
    return Connect(nonce, name)


def _challenge_response(f: tuple[Any, ...], lim: ProtocolLimits) -> ChallengeResponse:
    cookie = _bin(f[0], COOKIE_BYTES, "cookie")
    nonce = _bin(f[1], NONCE_BYTES, "nonce")
    name = _text(f[2], 1, lim.max_name_bytes, "name")
    if type(f[3]) is not bytes:
        raise _fail(RejectReason.BAD_TYPE, "padding must be bin")
    return ChallengeResponse(cookie, nonce, name)


def _ping(f: tuple[Any, ...], lim: ProtocolLimits) -> Ping:
    return Ping(
        _bin(f[0], TOKEN_BYTES, "token"),
        _int(f[1], 0, U32_MAX, "packet_seq"),
        _float(f[2], 0.0, lim.max_time_s, "client_time_s"),
    )


def _disconnect(f: tuple[Any, ...], lim: ProtocolLimits) -> Disconnect:
    return Disconnect(_bin(f[0], TOKEN_BYTES, "token"), _int(f[1], 0, U32_MAX, "packet_seq"))


def _challenge(f: tuple[Any, ...], lim: ProtocolLimits) -> Challenge:
    return Challenge(_bin(f[0], COOKIE_BYTES, "cookie"))


def _accept(f: tuple[Any, ...], lim: ProtocolLimits) -> Accept:
    a = _array(f[5], 6, "limits")
    limits = AcceptLimits(
        max_datagram_bytes=_int(a[0], 1, 0xFFFF, "limits.max_datagram_bytes"),
        max_commands=_int(a[1], 1, 255, "limits.max_commands"),
        max_shots=_int(a[2], 0, 255, "limits.max_shots"),
        max_command_duration_s=_float(a[3], 0.0, 10.0, "limits.max_command_duration_s"),
        max_packets_per_s=_float(a[4], 0.0, 1e6, "limits.max_packets_per_s"),
        max_bytes_per_s=_float(a[5], 0.0, 1e9, "limits.max_bytes_per_s"),
    )
    return Accept(
        token=_bin(f[0], TOKEN_BYTES, "token"),
        slot=_int(f[1], 0, lim.max_slots - 1, "slot"),
        tick_rate_hz=_int(f[2], 1, lim.max_tick_rate_hz, "tick_rate_hz"),
        map_name=_text(f[3], 1, lim.max_map_name_bytes, "map_name"),
        server_time_s=_float(f[4], 0.0, lim.max_time_s, "server_time_s"),
        limits=limits,
    )


def _reject(f: tuple[Any, ...], lim: ProtocolLimits) -> Reject:
    return Reject(_code(f[0], RefuseCode, "code"))


def _own(v: object, lim: ProtocolLimits) -> OwnState:
    # The own state of every snapshot (floats sent as floats) is checked in one expression; anything
    # else goes to _own_checked, which accepts it or names the reason (and returns the same
    # state for what this accepts).
    if type(v) is tuple and len(v) == 11:
        pos, vel, yaw, pitch, health, weapon, ammo, reserve, stance, on_ground, alive = v
        if type(pos) is tuple and len(pos) == 3 and type(vel) is tuple and len(vel) == 3:
            x, y, z = pos
            vx, vy, vz = vel
            c, s, yl, pl = lim.coord_limit_m, lim.speed_limit_m_s, lim.yaw_limit_deg, lim.pitch_limit_deg
            if (
                type(x) is float and type(y) is float and type(z) is float
                and -c <= x <= c and -c <= y <= c and -c <= z <= c
                and type(vx) is float and type(vy) is float and type(vz) is float
                and -s <= vx <= s and -s <= vy <= s and -s <= vz <= s
                and type(yaw) is float and -yl <= yaw <= yl and type(pitch) is float and -pl <= pitch <= pl
                and type(health) is float and 0.0 <= health <= lim.max_health
                and type(weapon) is int and (weapon in _WEAPON_IDS or weapon == 0)
                and type(ammo) is int and 0 <= ammo <= lim.max_ammo
                and type(reserve) is int and 0 <= reserve <= lim.max_ammo
                and type(stance) is int and 0 <= stance <= 1 and type(on_ground) is bool and type(alive) is bool
            ):
                return _tuple_new(OwnState, v)  # type: ignore[no-any-return]
    return _own_checked(v, lim)


def _own_checked(v: object, lim: ProtocolLimits) -> OwnState:
    f = _array(v, 11, "own")
    return OwnState(
        pos=_vec3(f[0], lim.coord_limit_m, "own.pos"),
        vel=_vec3(f[1], lim.speed_limit_m_s, "own.vel"),
        yaw_deg=_float(f[2], -lim.yaw_limit_deg, lim.yaw_limit_deg, "own.yaw_deg"),
        pitch_deg=_float(f[3], -lim.pitch_limit_deg, lim.pitch_limit_deg, "own.pitch_deg"),
        health=_float(f[4], 0.0, lim.max_health, "own.health"),
        weapon=_weapon(f[5], True, "own.weapon"),
        ammo=_int(f[6], 0, lim.max_ammo, "own.ammo"),
        reserve=_int(f[7], 0, lim.max_ammo, "own.reserve"),
        stance=_int(f[8], 0, 1, "own.stance"),
        on_ground=_bool(f[9], "own.on_ground"),
        alive=_bool(f[10], "own.alive"),
    )


_ENTITY_REASON: Final = {
    "length": RejectReason.BAD_ENTITY_BLOCK,
    "non_finite": RejectReason.NON_FINITE,
    "out_of_range": RejectReason.OUT_OF_RANGE,
    "unknown_weapon": RejectReason.UNKNOWN_WEAPON,
    "unknown_flags": RejectReason.UNKNOWN_FLAGS,
    "duplicate_slot": RejectReason.DUPLICATE_SLOT,
}


def _snapshot(f: tuple[Any, ...], lim: ProtocolLimits) -> Snapshot:
    # The header of every snapshot is checked in one expression; anything else goes to
    # _snapshot_checked, which names the reason. Past the header both check the rest alike.
    tick, server_time, last, part, part_count, own, block = f
    if not (
        type(tick) is int and 0 <= tick <= U32_MAX and type(server_time) is float and 0.0 <= server_time <= lim.max_time_s
        and (last is None or (type(last) is int and 0 <= last <= U32_MAX))
        and type(part_count) is int and 1 <= part_count <= lim.max_snapshot_parts
        and type(part) is int and 0 <= part <= part_count - 1
    ):
        return _snapshot_checked(f, lim)
    return Snapshot(tick, server_time, last, _own(own, lim), _entity_block(block, lim), part, part_count)


def _snapshot_checked(f: tuple[Any, ...], lim: ProtocolLimits) -> Snapshot:
    tick = _int(f[0], 0, U32_MAX, "tick")
    server_time = _float(f[1], 0.0, lim.max_time_s, "server_time_s")
    last = None if f[2] is None else _int(f[2], 0, U32_MAX, "last_cmd_seq")
    part_count = _int(f[4], 1, lim.max_snapshot_parts, "part_count")
    part = _int(f[3], 0, part_count - 1, "part")
    own = _own(f[5], lim)
    return Snapshot(tick, server_time, last, own, _entity_block(f[6], lim), part, part_count)


def _entity_block(block: object, lim: ProtocolLimits) -> bytes:
    if type(block) is not bytes:
        raise _fail(RejectReason.BAD_TYPE, "entities must be bin")
    try:
        check_block(block, lim.entity_limits())
    except EntityBlockError as exc:
        raise _fail(_ENTITY_REASON[exc.kind], f"entities: {exc}") from None
    return block


def _correction(f: tuple[Any, ...], lim: ProtocolLimits) -> Correction:
    return Correction(
        _int(f[0], 0, U32_MAX, "cmd_seq"),
        _vec3(f[1], lim.coord_limit_m, "pos"),
        _vec3(f[2], lim.speed_limit_m_s, "vel"),
    )


def _notice(f: tuple[Any, ...], lim: ProtocolLimits) -> Notice:
    code = _code(f[0], NoticeCode, "code")
    text = _text(f[1], 0, lim.max_notice_text_bytes, "text")
    raw = f[2]
    if type(raw) is not tuple:
        raise _fail(RejectReason.BAD_TYPE, "numbers must be an array")
    if len(raw) > lim.max_notice_numbers:
        raise _fail(RejectReason.BAD_LENGTH, f"{len(raw)} numbers > {lim.max_notice_numbers}")
    bound = lim.notice_number_limit
    return Notice(code, text, tuple(_float(x, -bound, bound, "number") for x in raw))


def _pong(f: tuple[Any, ...], lim: ProtocolLimits) -> Pong:
    return Pong(
        _int(f[0], 0, U32_MAX, "ping_seq"),
        _float(f[1], 0.0, lim.max_time_s, "client_time_s"),
        _float(f[2], 0.0, lim.max_time_s, "server_time_s"),
    )


def _server_disconnect(f: tuple[Any, ...], lim: ProtocolLimits) -> ServerDisconnect:
    return ServerDisconnect(_code(f[0], DisconnectCode, "code"))


_Parser = Callable[[tuple[Any, ...], ProtocolLimits], Message]

_PARSERS: Final[dict[int, tuple[int, _Parser]]] = {
    # type: (number of fields after [version, type], parser)
    MsgType.CONNECT: (3, _connect),
    MsgType.CHALLENGE_RESPONSE: (4, _challenge_response),
    MsgType.INPUT: (6, _input),
    MsgType.PING: (3, _ping),
    MsgType.DISCONNECT: (2, _disconnect),
    MsgType.CHALLENGE: (1, _challenge),
    MsgType.ACCEPT: (6, _accept),
    MsgType.REJECT: (1, _reject),
    MsgType.SNAPSHOT: (7, _snapshot),
    MsgType.CORRECTION: (3, _correction),
    MsgType.NOTICE: (3, _notice),
    MsgType.PONG: (3, _pong),
    MsgType.SERVER_DISCONNECT: (1, _server_disconnect),
}


_MSG_TYPES: Final = {int(t): t for t in MsgType}
"""Type id -> MsgType: a dict lookup instead of the enum's call, which costs ~0.3 us a datagram."""
_SNAPSHOT_ID: Final = int(MsgType.SNAPSHOT)
_SNAPSHOT_ITEMS: Final = 2 + _PARSERS[MsgType.SNAPSHOT][0]


def peek_type(datagram: bytes, limits: ProtocolLimits = DEFAULT_LIMITS) -> MsgType:
    """Validate the envelope only ([version, type, ...]) and return the type; raises ProtocolError."""
    return _envelope(datagram, limits)[0]


def _envelope(datagram: bytes, lim: ProtocolLimits) -> tuple[MsgType, tuple[Any, ...]]:
    size = len(datagram)
    if size > lim.max_datagram_bytes:
        raise _fail(RejectReason.TOO_LARGE, f"{size} bytes")
    try:
        # raw=False and strict_map_key=True are msgpack's defaults, and it bounds str, bin and ext
        # lengths by the datagram's size (checked above) by itself; every keyword costs time here.
        obj = msgpack.unpackb(datagram, use_list=False, max_array_len=64, max_map_len=16)
    except UnicodeDecodeError:
        raise _fail(RejectReason.BAD_STRING, "invalid UTF-8") from None
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types; all mean "not msgpack"
        raise _fail(RejectReason.NOT_MSGPACK, type(exc).__name__) from None
    if type(obj) is not tuple:
        raise _fail(RejectReason.NOT_ARRAY, type(obj).__name__)
    if len(obj) < 2:
        raise _fail(RejectReason.BAD_ARITY, f"message has {len(obj)} elements")
    version, mtype = obj[0], obj[1]
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise _fail(RejectReason.BAD_VERSION, repr(version)[:32])
    if type(mtype) is not int:
        raise _fail(RejectReason.BAD_TYPE, "type must be an int")
    kind = _MSG_TYPES.get(mtype)
    if kind is None:
        raise _fail(RejectReason.UNKNOWN_TYPE, str(mtype))
    return kind, obj


def decode(
    datagram: bytes,
    limits: ProtocolLimits = DEFAULT_LIMITS,
    *,
    allowed: frozenset[MsgType] | None = None,
) -> Message:
    """Decode and validate one datagram; raises ProtocolError (and nothing else) when refused.

    ``allowed`` restricts the accepted types (others raise WRONG_DIRECTION); see
    :func:`decode_client` and :func:`decode_server`.
    """
    kind, obj = _envelope(datagram, limits)
    if allowed is not None and kind not in allowed:
        raise _fail(RejectReason.WRONG_DIRECTION, kind.name)
    if kind in UNAUTHENTICATED_TYPES and len(datagram) < limits.min_unauth_request_bytes:
        raise _fail(RejectReason.UNPADDED, f"{kind.name} of {len(datagram)} bytes")
    arity, parser = _PARSERS[kind]
    if len(obj) != arity + 2:
        raise _fail(RejectReason.BAD_ARITY, f"{kind.name} has {len(obj) - 2} fields, expected {arity}")
    return parser(obj[2:], limits)


_INPUT_ID: Final = int(MsgType.INPUT)
_INPUT_ITEMS: Final = 2 + _PARSERS[MsgType.INPUT][0]


def decode_client(datagram: bytes, limits: ProtocolLimits = DEFAULT_LIMITS) -> ClientMessage:
    """The server's decode: only client-to-server messages.

    The INPUT every client sends every tick (floats sent as floats, no shot) is checked in one
    expression, without the general decode's layers; anything else goes to :func:`decode`, the
    definition, which accepts it or names the reason. The fast path accepts a subset of what
    :func:`decode` accepts and returns the same message for it.
    """
    if len(datagram) <= limits.max_datagram_bytes:
        try:
            m = msgpack.unpackb(datagram, use_list=False, max_array_len=64, max_map_len=16)
        except Exception:  # noqa: BLE001 - decode names the reason
            m = None
        if type(m) is tuple and len(m) == _INPUT_ITEMS:
            version, kind, token, packet_seq, client_time, ack, block, shots = m
            if (
                type(version) is int and version == PROTOCOL_VERSION and type(kind) is int and kind == _INPUT_ID
                and type(token) is bytes and len(token) == TOKEN_BYTES
                and type(packet_seq) is int and 0 <= packet_seq <= U32_MAX
                and type(client_time) is float and 0.0 <= client_time <= limits.max_time_s
                and (ack is None or (type(ack) is int and 0 <= ack <= U32_MAX))
                and type(block) is bytes and 0 < len(block) <= limits.max_commands * COMMAND_BYTES
                and not len(block) % COMMAND_BYTES
                and type(shots) is tuple and not shots
                and not _check_command_block(block, limits._command_bounds, _KNOWN_BUTTONS, _KNOWN_WEAPON_SWITCHES)
            ):
                # Input._make without its Python-level length check.
                return _tuple_new(Input, (token, packet_seq, client_time, ack, block, ()))  # type: ignore[misc]
    return decode(datagram, limits, allowed=CLIENT_TYPES)  # type: ignore[return-value]


def decode_server(datagram: bytes, limits: ProtocolLimits = DEFAULT_LIMITS) -> ServerMessage:
    """A client's decode: only server-to-client messages.

    The SNAPSHOT every client receives every tick goes straight to its parser once the envelope
    is seen to be right, without the general decode's layers (the parser then checks it as
    :func:`decode` would); anything else goes to :func:`decode`.
    """
    if len(datagram) <= limits.max_datagram_bytes:
        try:
            m = msgpack.unpackb(datagram, use_list=False, max_array_len=64, max_map_len=16)
        except Exception:  # noqa: BLE001 - decode names the reason
            m = None
        if (
            type(m) is tuple and len(m) == _SNAPSHOT_ITEMS
            and type(m[0]) is int and m[0] == PROTOCOL_VERSION and type(m[1]) is int and m[1] == _SNAPSHOT_ID
        ):
            return _snapshot(m[2:], limits)
    return decode(datagram, limits, allowed=SERVER_TYPES)  # type: ignore[return-value]
