"""Encoding: a message to one datagram, and the pieces the server's compiled snapshot writer
starts from. Encoding does not range-check fields: the receiver's decode is the border."""

from __future__ import annotations

from typing import Any, Final

import msgpack

from server.entity_block import ENTITY_BYTES
from server.protocol.codes import (
    PROTOCOL_VERSION,
    U32_MAX,
    UNAUTHENTICATED_TYPES,
    MsgType,
    ProtocolError,
    RejectReason,
    Vec3,
)
from server.protocol.limits import DEFAULT_LIMITS, ProtocolLimits
from server.protocol.messages import (
    MESSAGE_TYPE,
    Accept,
    Challenge,
    ChallengeResponse,
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
    Shot,
    Snapshot,
)
from world.weapons import WeaponId

_SNAPSHOT_ID: Final = int(MsgType.SNAPSHOT)


def _vec(v: Vec3) -> list[float]:
    return [v[0], v[1], v[2]]



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

