"""Decoding: :func:`decode` is the border of the server; :func:`decode_client` (the server's) and
:func:`decode_server` (a client's) add the fast paths of the messages sent every tick."""

from __future__ import annotations

from typing import Any, Final

import msgpack

from server.protocol.codes import (
    CLIENT_TYPES,
    PROTOCOL_VERSION,
    SERVER_TYPES,
    TOKEN_BYTES,
    U32_MAX,
    UNAUTHENTICATED_TYPES,
    MsgType,
    ProtocolError,
    RejectReason,
)
from server.protocol.commands import (
    COMMAND_BYTES,
    KNOWN_BUTTONS,
    KNOWN_WEAPON_SWITCHES,
    check_command_block,
)
from server.protocol.limits import DEFAULT_LIMITS, ProtocolLimits
from server.protocol.messages import ClientMessage, Input, Message, ServerMessage
from server.protocol.parsers import PARSERS, parse_snapshot

_tuple_new = tuple.__new__
"""What NamedTuple._make calls, minus its Python-level length check: for the hot constructors."""


_MSG_TYPES: Final = {int(t): t for t in MsgType}
"""Type id -> MsgType: a dict lookup instead of the enum's call, which costs ~0.3 us a datagram."""
_SNAPSHOT_ID: Final = int(MsgType.SNAPSHOT)
_SNAPSHOT_ITEMS: Final = 2 + PARSERS[MsgType.SNAPSHOT][0]


def peek_type(datagram: bytes, limits: ProtocolLimits = DEFAULT_LIMITS) -> MsgType:
    """Validate the envelope only ([version, type, ...]) and return the type; raises ProtocolError."""
    return _envelope(datagram, limits)[0]


def _envelope(datagram: bytes, lim: ProtocolLimits) -> tuple[MsgType, tuple[Any, ...]]:
    size = len(datagram)
    if size > lim.max_datagram_bytes:
        raise ProtocolError(RejectReason.TOO_LARGE, f"{size} bytes")
    try:
        # raw=False and strict_map_key=True are msgpack's defaults, and it bounds str, bin and ext
        # lengths by the datagram's size (checked above) by itself; every keyword costs time here.
        obj = msgpack.unpackb(datagram, use_list=False, max_array_len=64, max_map_len=16)
    except UnicodeDecodeError:
        raise ProtocolError(RejectReason.BAD_STRING, "invalid UTF-8") from None
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types; all mean "not msgpack"
        raise ProtocolError(RejectReason.NOT_MSGPACK, type(exc).__name__) from None
    if type(obj) is not tuple:
        raise ProtocolError(RejectReason.NOT_ARRAY, type(obj).__name__)
    if len(obj) < 2:
        raise ProtocolError(RejectReason.BAD_ARITY, f"message has {len(obj)} elements")
    version, mtype = obj[0], obj[1]
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise ProtocolError(RejectReason.BAD_VERSION, repr(version)[:32])
    if type(mtype) is not int:
        raise ProtocolError(RejectReason.BAD_TYPE, "type must be an int")
    kind = _MSG_TYPES.get(mtype)
    if kind is None:
        raise ProtocolError(RejectReason.UNKNOWN_TYPE, str(mtype))
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
        raise ProtocolError(RejectReason.WRONG_DIRECTION, kind.name)
    if kind in UNAUTHENTICATED_TYPES and len(datagram) < limits.min_unauth_request_bytes:
        raise ProtocolError(RejectReason.UNPADDED, f"{kind.name} of {len(datagram)} bytes")
    arity, parser = PARSERS[kind]
    if len(obj) != arity + 2:
        raise ProtocolError(RejectReason.BAD_ARITY, f"{kind.name} has {len(obj) - 2} fields, expected {arity}")
    return parser(obj[2:], limits)


_INPUT_ID: Final = int(MsgType.INPUT)
_INPUT_ITEMS: Final = 2 + PARSERS[MsgType.INPUT][0]


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
                and not check_command_block(block, limits._command_bounds, KNOWN_BUTTONS, KNOWN_WEAPON_SWITCHES)
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
            return parse_snapshot(m[2:], limits)
    return decode(datagram, limits, allowed=SERVER_TYPES)  # type: ignore[return-value]
