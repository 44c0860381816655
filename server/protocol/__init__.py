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

The package's modules, each importing only those before it: ``codes`` (version, sizes, type ids,
reasons and codes), ``commands`` (the INPUT command record and the compiled block check),
``limits`` (ProtocolLimits), ``messages``, ``encoding``, ``parsers`` (each message's field
checks) and ``decoding``. Import the names from here: ``from server import protocol as proto``.

Bots import this package, so it must never import server internals; it imports world tables,
the physics button bits and the entity block only.
"""

from __future__ import annotations

from server.protocol.codes import (
    CLIENT_TYPES,
    COOKIE_BYTES,
    NONCE_BYTES,
    PROTOCOL_VERSION,
    SERVER_TYPES,
    TOKEN_BYTES,
    U32_MAX,
    UNAUTHENTICATED_TYPES,
    DisconnectCode,
    MsgType,
    NoticeCode,
    ProtocolError,
    RefuseCode,
    RejectReason,
    Vec3,
)
from server.protocol.commands import (
    CMD_BUTTONS,
    CMD_DURATION,
    CMD_VIEW_TIME,
    CMD_FORWARD,
    CMD_PITCH,
    CMD_POS,
    CMD_RECOIL_PITCH,
    CMD_RECOIL_YAW,
    CMD_SEQ,
    CMD_SIDE,
    CMD_SWITCH,
    CMD_YAW,
    COMMAND_BYTES,
    COMMAND_STRUCT,
    Command,
    command_arrays,
    command_record,
    command_seq,
    command_seqs,
    pack_command,
    pack_commands,
    unpack_command,
)
from server.protocol.decoding import decode, decode_client, decode_server, peek_type
from server.protocol.encoding import encode, max_entities_per_snapshot, snapshot_head
from server.protocol.limits import DEFAULT_LIMITS, ProtocolLimits
from server.protocol.messages import (
    MESSAGE_TYPE,
    Accept,
    AcceptLimits,
    Challenge,
    ChallengeResponse,
    ClientMessage,
    Connect,
    Correction,
    Disconnect,
    Input,
    Message,
    Notice,
    OwnState,
    Ping,
    Pong,
    Reject,
    ServerDisconnect,
    ServerMessage,
    Shot,
    Snapshot,
)

__all__ = [
    "CLIENT_TYPES", "CMD_BUTTONS", "CMD_DURATION", "CMD_FORWARD", "CMD_PITCH", "CMD_POS", "CMD_RECOIL_PITCH",
    "CMD_RECOIL_YAW", "CMD_SEQ", "CMD_SIDE", "CMD_SWITCH", "CMD_VIEW_TIME", "CMD_YAW", "COMMAND_BYTES", "COMMAND_STRUCT",
    "COOKIE_BYTES", "DEFAULT_LIMITS", "MESSAGE_TYPE", "NONCE_BYTES", "PROTOCOL_VERSION", "SERVER_TYPES",
    "TOKEN_BYTES", "U32_MAX", "UNAUTHENTICATED_TYPES", "Accept", "AcceptLimits", "Challenge", "ChallengeResponse",
    "ClientMessage", "Command", "Connect", "Correction", "Disconnect", "DisconnectCode", "Input", "Message",
    "MsgType", "Notice", "NoticeCode", "OwnState", "Ping", "Pong", "ProtocolError", "ProtocolLimits", "RefuseCode",
    "Reject", "RejectReason", "ServerDisconnect", "ServerMessage", "Shot", "Snapshot", "Vec3", "command_arrays",
    "command_record", "command_seq", "command_seqs", "decode", "decode_client", "decode_server", "encode",
    "max_entities_per_snapshot", "pack_command", "pack_commands", "peek_type", "snapshot_head", "unpack_command",
]
