"""The messages, client to server and server to client: their fields, units and wire order
(PROTOCOL.md lists the msgpack type of each)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from server.protocol.codes import DisconnectCode, MsgType, NoticeCode, RefuseCode, Vec3
from server.protocol.commands import (
    COMMAND_BYTES,
    Command,
    pack_commands,
    unpack_command,
)

# ---------------------------------------------------------------------------------------------
# Client to server


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
# Server to client


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

