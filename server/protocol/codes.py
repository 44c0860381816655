"""The protocol's codes: version, fixed sizes, message type ids, and the reasons and codes that
messages carry (REJECT, SERVER_DISCONNECT, NOTICE) or that :func:`~server.protocol.decode` refuses
a datagram with (:class:`RejectReason` in a :class:`ProtocolError`)."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Final

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

