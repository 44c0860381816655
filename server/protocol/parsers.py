"""Decoding's per-message parsers: each checks one message's fields (after [version, type]) and
builds it, or raises :class:`ProtocolError` naming the first failure. The per-tick messages (an
INPUT's shots, a SNAPSHOT's own state and header) are checked in one expression first, with the
field-by-field check as their definition."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Final, TypeVar

from server.entity_block import EntityBlockError, check_block
from server.protocol.codes import (
    COOKIE_BYTES,
    NONCE_BYTES,
    TOKEN_BYTES,
    U32_MAX,
    DisconnectCode,
    MsgType,
    NoticeCode,
    ProtocolError,
    RefuseCode,
    RejectReason,
    Vec3,
)
from server.protocol.commands import (
    COMMAND_BYTES,
    KNOWN_BUTTONS,
    KNOWN_WEAPON_SWITCHES,
    WEAPON_IDS,
    check_command_block,
    command_block_error,
    command_seqs,
)
from server.protocol.limits import ProtocolLimits
from server.protocol.messages import (
    Accept,
    AcceptLimits,
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
from world.hitbox import Bone

_tuple_new = tuple.__new__
"""What NamedTuple._make calls, minus its Python-level length check: for the hot constructors."""


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


REFUSED_CHAR_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode general categories a protocol string may not hold: controls (line breaks included),
format characters (zero-width, bidirectional overrides), surrogates, line and paragraph
separators. Spaces (U+00A0 included), private-use and unassigned code points are accepted:
a client cannot know which code points this server's Unicode version has assigned."""


def printable(text: str) -> bool:
    """True when no character of ``text`` is in :data:`REFUSED_CHAR_CATEGORIES` (PROTOCOL.md's
    "printable")."""
    # str.isprintable refuses a superset (every space but U+0020, unassigned code points), so a
    # True from it settles the common case without a per-character lookup.
    return text.isprintable() or not any(unicodedata.category(c) in REFUSED_CHAR_CATEGORIES for c in text)


def _text(v: object, min_bytes: int, max_bytes: int, what: str) -> str:
    if type(v) is not str:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be a str")
    size = len(v.encode("utf-8"))
    if not min_bytes <= size <= max_bytes or not printable(v):
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


_BONE_IDS: Final = frozenset(int(b) for b in Bone)


def _weapon(v: object, allow_none: bool, what: str) -> int:
    if type(v) is not int:
        raise _fail(RejectReason.BAD_TYPE, f"{what} must be an int")
    if v in WEAPON_IDS or (allow_none and v == 0):
        return v
    raise _fail(RejectReason.UNKNOWN_WEAPON, f"{what}={v}")



def _shot(v: object, lim: ProtocolLimits) -> Shot:
    if type(v) is tuple and len(v) == 8:
        cmd_seq, weapon, yaw, pitch, vt, victim, point, bone = v
        yl, pl, cl = lim.yaw_limit_deg, lim.pitch_limit_deg, lim.coord_limit_m
        if (
            type(cmd_seq) is int and type(weapon) is int and type(victim) is int and type(bone) is int
            and type(yaw) is float and type(pitch) is float and type(vt) is float
            and 0 <= cmd_seq <= U32_MAX and weapon in WEAPON_IDS and bone in _BONE_IDS
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
    status = check_command_block(block, lim._command_bounds, KNOWN_BUTTONS, KNOWN_WEAPON_SWITCHES)
    if status:
        raise command_block_error(block, status)
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
                and type(weapon) is int and (weapon in WEAPON_IDS or weapon == 0)
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


def parse_snapshot(f: tuple[Any, ...], lim: ProtocolLimits) -> Snapshot:
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


Parser = Callable[[tuple[Any, ...], ProtocolLimits], Message]

PARSERS: Final[dict[int, tuple[int, Parser]]] = {
    # type: (number of fields after [version, type], parser)
    MsgType.CONNECT: (3, _connect),
    MsgType.CHALLENGE_RESPONSE: (4, _challenge_response),
    MsgType.INPUT: (6, _input),
    MsgType.PING: (3, _ping),
    MsgType.DISCONNECT: (2, _disconnect),
    MsgType.CHALLENGE: (1, _challenge),
    MsgType.ACCEPT: (6, _accept),
    MsgType.REJECT: (1, _reject),
    MsgType.SNAPSHOT: (7, parse_snapshot),
    MsgType.CORRECTION: (3, _correction),
    MsgType.NOTICE: (3, _notice),
    MsgType.PONG: (3, _pong),
    MsgType.SERVER_DISCONNECT: (1, _server_disconnect),
}
