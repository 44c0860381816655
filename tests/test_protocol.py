"""Wire protocol: round trips, every rejection reason, fuzzing, the entity block, size budgets."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from physics.buttons import ALL_BUTTONS
from server.entity_block import (
    ENTITY_BYTES,
    ENTITY_DTYPE,
    EntityBlockError,
    EntityFlags,
    EntityLimits,
    decode_entities,
    encode_entities,
    make_entities,
    split_entities,
)
from server.protocol import (
    CMD_BUTTONS,
    CMD_DURATION,
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
    COOKIE_BYTES,
    DEFAULT_LIMITS,
    NONCE_BYTES,
    PROTOCOL_VERSION,
    TOKEN_BYTES,
    U32_MAX,
    Accept,
    AcceptLimits,
    Challenge,
    ChallengeResponse,
    Command,
    Connect,
    Correction,
    Disconnect,
    DisconnectCode,
    Input,
    Message,
    MsgType,
    Notice,
    NoticeCode,
    OwnState,
    Ping,
    Pong,
    ProtocolError,
    ProtocolLimits,
    RefuseCode,
    Reject,
    RejectReason,
    ServerDisconnect,
    Shot,
    Snapshot,
    command_arrays,
    command_record,
    command_seq,
    command_seqs,
    decode,
    decode_client,
    decode_server,
    encode,
    max_entities_per_snapshot,
    pack_command,
    pack_commands,
    peek_type,
    unpack_command,
)
from world.hitbox import Bone
from world.weapons import WeaponId

LIM = DEFAULT_LIMITS
V = PROTOCOL_VERSION


def pk(*items: Any) -> bytes:
    """Raw msgpack of an array, bypassing the encoder (to craft bad datagrams)."""
    return msgpack.packb(list(items), use_bin_type=True)


# ------------------------------------------------------------------------------------------------
# Strategies


def fl(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


u32 = st.integers(0, U32_MAX)
times = fl(0.0, 1e9)
coord = fl(-LIM.coord_limit_m, LIM.coord_limit_m)
speed = fl(-LIM.speed_limit_m_s, LIM.speed_limit_m_s)
vec_pos = st.tuples(coord, coord, coord)
vec_vel = st.tuples(speed, speed, speed)
yaw = fl(-360.0, 360.0)
pitch = fl(-89.0, 89.0)
weapons = st.sampled_from([int(w) for w in WeaponId])
weapon_or_none = st.sampled_from([0] + [int(w) for w in WeaponId])
printable = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), min_size=1, max_size=8
).filter(str.isprintable)
token = st.binary(min_size=TOKEN_BYTES, max_size=TOKEN_BYTES)
nonce = st.binary(min_size=NONCE_BYTES, max_size=NONCE_BYTES)
cookie = st.binary(min_size=COOKIE_BYTES, max_size=COOKIE_BYTES)


@st.composite
def commands(draw: st.DrawFn) -> tuple[Command, ...]:
    n = draw(st.integers(1, LIM.max_commands))
    seqs = sorted(draw(st.sets(u32, min_size=n, max_size=n)))
    return tuple(
        Command(
            seq=s, client_tick=draw(u32), view_time_s=draw(times),
            duration_s=draw(fl(0.0, 0.1).filter(lambda d: d > 0.0)),
            forward=draw(fl(-1.0, 1.0)), side=draw(fl(-1.0, 1.0)), yaw_deg=draw(yaw), pitch_deg=draw(pitch),
            buttons=draw(st.integers(0, 255)), weapon_switch=draw(weapon_or_none),
            recoil_pitch_deg=draw(fl(-180.0, 180.0)), recoil_yaw_deg=draw(fl(-180.0, 180.0)), pos=draw(vec_pos),
        )
        for s in seqs
    )


@st.composite
def inputs(draw: st.DrawFn) -> Input:
    cmds = draw(commands())
    seqs = [c.seq for c in cmds]
    shots = tuple(
        Shot(
            cmd_seq=draw(st.sampled_from(seqs)), weapon=draw(weapons), yaw_deg=draw(yaw), pitch_deg=draw(pitch),
            view_time_s=draw(times), claimed_victim=draw(st.none() | st.integers(0, 255)),
            claimed_hit_point=draw(st.none() | vec_pos), claimed_bone=draw(st.sampled_from([int(b) for b in Bone])),
        )
        for _ in range(draw(st.integers(0, LIM.max_shots)))
    )
    return Input.with_commands(draw(token), draw(u32), draw(times), draw(st.none() | u32), cmds, shots)


@st.composite
def entity_blocks(draw: st.DrawFn) -> bytes:
    """Valid blocks from a drawn seed (drawing every float through hypothesis is slow)."""
    n = draw(st.integers(0, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    rec = make_entities(
        rng.permutation(256)[:n], rng.integers(0, 8, n), rng.uniform(-1e4, 1e4, (n, 3)),
        rng.uniform(-100, 100, (n, 3)), rng.uniform(-360, 360, n), rng.uniform(-89, 89, n),
        rng.choice([0] + [int(w) for w in WeaponId], n), rng.integers(0, 256, n),
    )
    return encode_entities(rec)


own_states = st.builds(
    OwnState, pos=vec_pos, vel=vec_vel, yaw_deg=yaw, pitch_deg=pitch, health=fl(0.0, 255.0), weapon=weapon_or_none,
    ammo=st.integers(0, 0xFFFF), reserve=st.integers(0, 0xFFFF), stance=st.integers(0, 1),
    on_ground=st.booleans(), alive=st.booleans(),
)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    count = draw(st.integers(1, LIM.max_snapshot_parts))
    return Snapshot(
        draw(u32), draw(times), draw(st.none() | u32), draw(own_states), draw(entity_blocks()),
        draw(st.integers(0, count - 1)), count,
    )


messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Connect, nonce, printable),
    st.builds(ChallengeResponse, cookie, nonce, printable),
    inputs(),
    st.builds(Ping, token, u32, times),
    st.builds(Disconnect, token, u32),
    st.builds(Challenge, cookie),
    st.builds(
        Accept, token, st.integers(0, 255), st.integers(1, 1000), printable, times,
        st.builds(AcceptLimits, st.integers(1, 0xFFFF), st.integers(1, 255), st.integers(0, 255),
                  fl(0.0, 10.0), fl(0.0, 1e6), fl(0.0, 1e9)),
    ),
    st.builds(Reject, st.sampled_from(RefuseCode)),
    snapshots(),
    st.builds(Correction, u32, vec_pos, vec_vel),
    st.builds(Notice, st.sampled_from(NoticeCode), printable | st.just(""),
              st.lists(fl(-1e12, 1e12), max_size=8).map(tuple)),
    st.builds(Pong, u32, times, times),
    st.builds(ServerDisconnect, st.sampled_from(DisconnectCode)),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_round_trip_every_message(message: Message) -> None:
    data = encode(message)
    assert len(data) <= LIM.max_datagram_bytes
    assert decode(data) == message
    assert peek_type(data) in MsgType


# ------------------------------------------------------------------------------------------------
# Fixed examples and their crafted corruptions

TOKEN = bytes(range(TOKEN_BYTES))
NONCE = bytes(range(100, 100 + NONCE_BYTES))
COOKIE = bytes(range(COOKIE_BYTES))


def command(seq: int = 10, **kw: Any) -> bytes:
    """One packed command record (any value the record can hold, valid or not)."""
    fields: dict[str, Any] = dict(
        seq=seq, client_tick=500, view_time_s=12.5, duration_s=1 / 128, forward=1.0, side=0.0, yaw_deg=45.0,
        pitch_deg=-3.0, buttons=1, weapon_switch=0, recoil_pitch_deg=0.5, recoil_yaw_deg=-0.1, pos=(1.0, 2.0, 0.0),
    )
    fields.update(kw)
    return pack_command(Command(**fields))


def shot(**kw: Any) -> list[Any]:
    fields: dict[str, Any] = dict(
        cmd_seq=10, weapon=2, yaw_deg=45.0, pitch_deg=-3.0, view_time_s=12.4, victim=3, point=[5.0, 5.0, 1.5], bone=2,
    )
    fields.update(kw)
    return list(fields.values())


def input_dgram(*, cmds: list[bytes] | Any = None, shots: list[Any] | None = None, **kw: Any) -> bytes:
    """An INPUT datagram; ``cmds``: records joined into the command block, or any object to send instead."""
    fields: dict[str, Any] = dict(token=TOKEN, packet_seq=7, client_time_s=100.0, ack_tick=None)
    fields.update(kw)
    block = command() if cmds is None else b"".join(cmds) if isinstance(cmds, list) else cmds
    return pk(V, 3, *fields.values(), block, [shot()] if shots is None else shots)


def own(**kw: Any) -> list[Any]:
    fields: dict[str, Any] = dict(
        pos=[0.0, 0.0, 0.0], vel=[0.0, 0.0, 0.0], yaw=0.0, pitch=0.0, health=100.0, weapon=1, ammo=7, reserve=35,
        stance=0, on_ground=True, alive=True,
    )
    fields.update(kw)
    return list(fields.values())


def entity_bytes(**kw: Any) -> bytes:
    rec = np.zeros(2, dtype=ENTITY_DTYPE)
    rec["slot"] = [1, 2]
    rec["weapon"] = 1
    for name, value in kw.items():
        rec[name][0] = value
    return rec.tobytes()


def snapshot_dgram(entities: bytes | None = None, **kw: Any) -> bytes:
    fields: dict[str, Any] = dict(tick=5, time=1.0, last=None, part=0, count=1, own=own())
    fields.update(kw)
    return pk(V, 19, *fields.values(), entity_bytes() if entities is None else entities)


def padded(*items: Any) -> bytes:
    return pk(*items, bytes(300))


CASES: list[tuple[RejectReason, bytes]] = [
    (RejectReason.TOO_LARGE, pk(V, 4, TOKEN, 1, bytes(1300))),
    (RejectReason.UNPADDED, pk(V, 1, NONCE, "bob", b"")),
    (RejectReason.UNPADDED, pk(V, 2, COOKIE, NONCE, "bob", bytes(100))),
    (RejectReason.NOT_MSGPACK, b"\xc1"),
    (RejectReason.NOT_MSGPACK, b""),
    (RejectReason.NOT_MSGPACK, input_dgram()[:-3]),
    (RejectReason.NOT_MSGPACK, input_dgram() + b"\x00"),
    (RejectReason.NOT_MSGPACK, b"\x91" * 600),  # nested too deep for msgpack's stack
    (RejectReason.NOT_MSGPACK, msgpack.packb({(1, 2): 3}, use_bin_type=True)),  # non-str map key
    (RejectReason.NOT_MSGPACK, pk(*range(70))),  # array longer than max_array_len
    (RejectReason.NOT_ARRAY, msgpack.packb({"v": 1})),
    (RejectReason.NOT_ARRAY, msgpack.packb(12)),
    (RejectReason.BAD_VERSION, pk(1, 4, TOKEN, 1, 1.0)),  # protocol version 1: commands were arrays
    (RejectReason.BAD_VERSION, pk(V + 1, 4, TOKEN, 1, 1.0)),
    (RejectReason.BAD_VERSION, pk(True, 4, TOKEN, 1, 1.0)),
    (RejectReason.BAD_VERSION, pk("1", 4, TOKEN, 1, 1.0)),
    (RejectReason.UNKNOWN_TYPE, pk(V, 99, TOKEN)),
    (RejectReason.BAD_TYPE, pk(V, "ping", TOKEN, 1, 1.0)),
    (RejectReason.BAD_ARITY, pk(1)),
    (RejectReason.BAD_ARITY, pk(V, 4, TOKEN, 1)),
    (RejectReason.BAD_TYPE, pk(V, 4, TOKEN, True, 1.0)),  # bool is not an int
    (RejectReason.BAD_TYPE, pk(V, 4, TOKEN, 1, False)),  # bool is not a float
    (RejectReason.BAD_TYPE, pk(V, 4, TOKEN, 1.0, 1.0)),  # a float is not an int
    (RejectReason.BAD_TYPE, pk(V, 4, "token", 1, 1.0)),
    (RejectReason.BAD_TYPE, pk(V, 4, TOKEN, 1, {"t": 1})),
    (RejectReason.BAD_TYPE, pk(V, 4, TOKEN, 1, msgpack.ExtType(5, b"xx"))),
    (RejectReason.BAD_TYPE, b"\x95" + pk(V, 4, TOKEN, 1)[1:] + b"\xd6\xff\x00\x00\x00\x01"),  # timestamp ext
    (RejectReason.BAD_TYPE, input_dgram(cmds="commands")),
    (RejectReason.BAD_TYPE, input_dgram(cmds=(list(COMMAND_STRUCT.unpack(command())),))),  # version 1: arrays
    (RejectReason.BAD_TYPE, snapshot_dgram(own=own(alive=1))),
    (RejectReason.BAD_LENGTH, pk(V, 4, TOKEN[:-1], 1, 1.0)),
    (RejectReason.BAD_LENGTH, padded(V, 1, NONCE + b"x", "bob")),
    (RejectReason.BAD_LENGTH, pk(V, 16, COOKIE[:8])),
    (RejectReason.BAD_LENGTH, pk(V, 21, 1, "hi", [1.0] * 9)),
    (RejectReason.BAD_LENGTH, input_dgram(cmds=[command()[:-1]])),
    (RejectReason.BAD_STRING, padded(V, 1, NONCE, "")),
    (RejectReason.BAD_STRING, padded(V, 1, NONCE, "x" * 33)),
    (RejectReason.BAD_STRING, padded(V, 1, NONCE, "bad\nname")),
    (RejectReason.BAD_STRING, padded(V, 1, NONCE, "\x1b[31mred")),
    (RejectReason.BAD_STRING, bytes([0x95, V, 1, 0xC4, 16]) + NONCE + b"\xa2\xff\xfe" + b"\xc5\x01\x2c" + bytes(300)),
    (RejectReason.NON_FINITE, pk(V, 4, TOKEN, 1, float("nan"))),
    (RejectReason.NON_FINITE, input_dgram(cmds=[command(yaw_deg=float("inf"))])),
    (RejectReason.NON_FINITE, input_dgram(cmds=[command(pos=(1.0, float("-inf"), 0.0))])),
    (RejectReason.OUT_OF_RANGE, pk(V, 4, TOKEN, -1, 1.0)),
    (RejectReason.OUT_OF_RANGE, pk(V, 4, TOKEN, U32_MAX + 1, 1.0)),
    (RejectReason.OUT_OF_RANGE, pk(V, 4, TOKEN, 2**64 - 1, 1.0)),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(pitch_deg=89.5)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(forward=1.01)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(side=-2)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(duration_s=0.0)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(duration_s=0.11)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(cmds=[command(pos=(10_000.5, 0.0, 0.0))])),
    (RejectReason.OUT_OF_RANGE, input_dgram(shots=[shot(victim=256)])),
    (RejectReason.OUT_OF_RANGE, input_dgram(shots=[shot(victim=-2)])),
    (RejectReason.OUT_OF_RANGE, snapshot_dgram(part=1, count=1)),
    (RejectReason.OUT_OF_RANGE, snapshot_dgram(entities=entity_bytes(pitch=90.0))),
    (RejectReason.OUT_OF_RANGE, pk(V, 20, 3, [0.0, 0.0, 0.0], [0.0, 0.0, 101.0])),
    (RejectReason.NO_COMMANDS, input_dgram(cmds=b"", shots=[])),
    (RejectReason.TOO_MANY_COMMANDS, input_dgram(cmds=[command(s) for s in range(1, 6)], shots=[])),
    (RejectReason.TOO_MANY_SHOTS, input_dgram(shots=[shot()] * 9)),
    (RejectReason.COMMAND_ORDER, input_dgram(cmds=[command(11), command(10)])),
    (RejectReason.COMMAND_ORDER, input_dgram(cmds=[command(10), command(10)])),
    (RejectReason.ORPHAN_SHOT, input_dgram(shots=[shot(cmd_seq=9)])),
    (RejectReason.UNKNOWN_WEAPON, input_dgram(shots=[shot(weapon=0)])),
    (RejectReason.UNKNOWN_WEAPON, input_dgram(cmds=[command(weapon_switch=8)])),
    (RejectReason.UNKNOWN_WEAPON, snapshot_dgram(entities=entity_bytes(weapon=9))),
    (RejectReason.UNKNOWN_BONE, input_dgram(shots=[shot(bone=1)])),
    (RejectReason.UNKNOWN_BONE, input_dgram(shots=[shot(bone=18)])),
    (RejectReason.UNKNOWN_BUTTONS, input_dgram(cmds=[command(buttons=256)])),
    (RejectReason.UNKNOWN_CODE, pk(V, 18, 99)),
    (RejectReason.UNKNOWN_CODE, pk(V, 23, 0)),
    (RejectReason.UNKNOWN_CODE, pk(V, 21, 77, "", [])),
    (RejectReason.BAD_ENTITY_BLOCK, snapshot_dgram(entities=entity_bytes()[:-1])),
    (RejectReason.NON_FINITE, snapshot_dgram(entities=entity_bytes(yaw=float("nan")))),
    (RejectReason.UNKNOWN_FLAGS, snapshot_dgram(entities=entity_bytes(flags=8))),
    (RejectReason.DUPLICATE_SLOT, snapshot_dgram(entities=entity_bytes(slot=2))),
]


@pytest.mark.parametrize(("reason", "datagram"), CASES, ids=[f"{i}-{r.value}" for i, (r, _) in enumerate(CASES)])
def test_crafted_datagram_is_rejected_for_its_reason(reason: RejectReason, datagram: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(datagram)
    assert info.value.reason is reason, str(info.value)


def test_every_reason_is_reachable() -> None:
    covered = {r for r, _ in CASES} | {RejectReason.WRONG_DIRECTION}
    assert covered == set(RejectReason)


def test_wrong_direction() -> None:
    snap = snapshot_dgram()
    ping = pk(V, 4, TOKEN, 1, 1.0)
    with pytest.raises(ProtocolError) as info:
        decode_client(snap)
    assert info.value.reason is RejectReason.WRONG_DIRECTION
    with pytest.raises(ProtocolError) as info:
        decode_server(ping)
    assert info.value.reason is RejectReason.WRONG_DIRECTION
    assert isinstance(decode_client(ping), Ping)
    assert isinstance(decode_server(snap), Snapshot)


def test_crafted_templates_are_valid() -> None:
    """The corruptions above start from datagrams that decode, so each case tests one defect."""
    msg = decode(input_dgram())
    assert isinstance(msg, Input)
    assert msg.shots[0].claimed_victim == 3 and msg.shots[0].claimed_bone == Bone.HEAD
    assert isinstance(decode(snapshot_dgram()), Snapshot)
    assert isinstance(decode(padded(V, 1, NONCE, "bob")), Connect)
    assert isinstance(decode(padded(V, 2, COOKIE, NONCE, "bob")), ChallengeResponse)


def test_ints_are_accepted_for_floats() -> None:
    msg = decode(input_dgram(client_time_s=100, shots=[shot(yaw_deg=45, point=[5, 5, 1])]))
    assert isinstance(msg, Input)
    s = msg.shots[0]
    assert (msg.client_time_s, s.yaw_deg, s.claimed_hit_point) == (100.0, 45.0, (5.0, 5.0, 1.0))
    assert all(type(x) is float for x in (msg.client_time_s, s.yaw_deg, *s.claimed_hit_point))


def test_victim_minus_one_and_nil_hit_point_decode_to_none() -> None:
    msg = decode(input_dgram(shots=[shot(victim=-1, point=None, bone=0)]))
    assert isinstance(msg, Input)
    assert msg.shots[0].claimed_victim is None and msg.shots[0].claimed_hit_point is None


# ------------------------------------------------------------------------------------------------
# The INPUT command block: packed records, validated in one pass


def test_command_record_layout_is_the_documented_one() -> None:
    """PROTOCOL.md, "The INPUT command block": offsets, types and little-endianness of every field."""
    assert COMMAND_BYTES == 104
    c = Command(0x01020304, 0xA0B0C0D0, 12.5, 1 / 128, 0.25, -0.5, 45.0, -3.0, 0x81, 6, 0.75, -0.125, (1.5, -2.5, 3.25))
    rec = pack_command(c)
    assert len(rec) == COMMAND_BYTES
    assert rec[:4] == bytes([4, 3, 2, 1])  # uint32 little-endian
    u32 = {0: c.seq, 4: c.client_tick, 56: c.buttons, 60: c.weapon_switch}
    f64 = {8: c.view_time_s, 16: c.duration_s, 24: c.forward, 32: c.side, 40: c.yaw_deg, 48: c.pitch_deg,
           64: c.recoil_pitch_deg, 72: c.recoil_yaw_deg, 80: c.pos[0], 88: c.pos[1], 96: c.pos[2]}
    assert {o: struct.unpack_from("<I", rec, o)[0] for o in u32} == u32
    assert {o: struct.unpack_from("<d", rec, o)[0] for o in f64} == f64
    assert unpack_command(rec, 0) == c


def test_input_accessors_agree() -> None:
    cmds = [Command(s, s, 1.0, 0.01, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, 0.0, (0.0, 0.0, 0.0)) for s in (3, 5, 9)]
    msg = Input.with_commands(TOKEN, 1, 2.0, None, cmds)
    assert msg.command_block == pack_commands(cmds) and msg.command_count == 3
    assert msg.commands == tuple(cmds)
    assert command_seqs(msg.command_block) == (3, 5, 9)
    assert [command_seq(msg.command_block, i) for i in range(3)] == [3, 5, 9]
    assert unpack_command(msg.command_block, 2) == cmds[2]
    with pytest.raises(ValueError):
        pack_command(cmds[0]._replace(seq=U32_MAX + 1))
    with pytest.raises(ValueError):
        pack_command(cmds[0]._replace(buttons=-1))


def _any_finite(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats in [lo, hi] including -0.0, subnormals and the bounds themselves."""
    edges = [lo, hi, math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf)]
    inner = [x for x in (0.0, -0.0, 5e-324, -5e-324) if lo <= x <= hi]
    return st.sampled_from(edges + inner) | fl(lo, hi)


@st.composite
def exact_commands(draw: st.DrawFn) -> list[Command]:
    n = draw(st.integers(1, LIM.max_commands))
    seqs = sorted(draw(st.sets(u32, min_size=n, max_size=n)))
    coord = _any_finite(-LIM.coord_limit_m, LIM.coord_limit_m)
    return [
        Command(
            seq=s, client_tick=draw(u32), view_time_s=draw(_any_finite(0.0, LIM.max_time_s)),
            duration_s=draw(_any_finite(5e-324, LIM.max_command_duration_s)),
            forward=draw(_any_finite(-1.0, 1.0)), side=draw(_any_finite(-1.0, 1.0)),
            yaw_deg=draw(_any_finite(-360.0, 360.0)), pitch_deg=draw(_any_finite(-89.0, 89.0)),
            buttons=draw(st.integers(0, ALL_BUTTONS)), weapon_switch=draw(weapon_or_none),
            recoil_pitch_deg=draw(_any_finite(-180.0, 180.0)), recoil_yaw_deg=draw(_any_finite(-180.0, 180.0)),
            pos=(draw(coord), draw(coord), draw(coord)),
        )
        for s in seqs
    ]


@settings(max_examples=300, deadline=None)
@given(exact_commands())
def test_command_block_round_trip_is_bit_exact(cmds: list[Command]) -> None:
    msg = decode(encode(Input.with_commands(TOKEN, 1, 2.0, None, cmds)))
    assert isinstance(msg, Input)
    got = msg.commands
    assert got == tuple(cmds)
    for a, b in zip(got, cmds, strict=True):  # == does not tell -0.0 from 0.0
        assert [math.copysign(1.0, x) for x in (*a[2:8], *a[10:12], *a.pos)] == [
            math.copysign(1.0, x) for x in (*b[2:8], *b[10:12], *b.pos)
        ]
        assert all(type(x) is float for x in (*a[2:8], *a[10:12], *a.pos))
        assert all(type(x) is int for x in (a.seq, a.client_tick, a.buttons, a.weapon_switch))


@settings(max_examples=200, deadline=None)
@given(exact_commands())
def test_command_arrays_read_what_unpack_command_reads(cmds: list[Command]) -> None:
    """The server's tick reads queued records as arrays: every field, bit for bit (sign of zero too)."""
    block = pack_commands(cmds)
    records = b"".join(command_record(block, i) for i in range(len(cmds)))
    assert records == block
    words, halves = command_arrays(records)
    assert words.shape == (len(cmds), 13) and halves.shape == (len(cmds), 26)
    fields = {
        "duration_s": CMD_DURATION, "forward": CMD_FORWARD, "side": CMD_SIDE, "yaw_deg": CMD_YAW,
        "pitch_deg": CMD_PITCH, "recoil_pitch_deg": CMD_RECOIL_PITCH, "recoil_yaw_deg": CMD_RECOIL_YAW,
    }
    for name, word in fields.items():
        got = words[:, word].tolist()
        want = [getattr(c, name) for c in cmds]
        assert [struct.pack("<d", x) for x in got] == [struct.pack("<d", x) for x in want], name
    assert [tuple(p) for p in words[:, CMD_POS : CMD_POS + 3].tolist()] == [c.pos for c in cmds]
    assert halves[:, CMD_SEQ].tolist() == [c.seq for c in cmds]
    assert halves[:, CMD_BUTTONS].tolist() == [c.buttons for c in cmds]
    assert halves[:, CMD_SWITCH].tolist() == [c.weapon_switch for c in cmds]


def _block_reason(block: Any) -> RejectReason | None:
    try:
        decode(input_dgram(cmds=block, shots=[]))
    except ProtocolError as exc:
        return exc.reason
    return None


_NAN, _INF = float("nan"), float("inf")
_FLOAT_FIELDS: dict[str, tuple[float, float]] = {
    "view_time_s": (0.0, LIM.max_time_s),
    "duration_s": (0.0, LIM.max_command_duration_s),
    "forward": (-1.0, 1.0),
    "side": (-1.0, 1.0),
    "yaw_deg": (-LIM.yaw_limit_deg, LIM.yaw_limit_deg),
    "pitch_deg": (-LIM.pitch_limit_deg, LIM.pitch_limit_deg),
    "recoil_pitch_deg": (-LIM.recoil_limit_deg, LIM.recoil_limit_deg),
    "recoil_yaw_deg": (-LIM.recoil_limit_deg, LIM.recoil_limit_deg),
    "pos.x": (-LIM.coord_limit_m, LIM.coord_limit_m),
    "pos.y": (-LIM.coord_limit_m, LIM.coord_limit_m),
    "pos.z": (-LIM.coord_limit_m, LIM.coord_limit_m),
}


def _record(**kw: Any) -> bytes:
    """A valid record with the given fields replaced; ``pos.x`` etc. replace one component."""
    pos = [1.0, 2.0, 0.0]
    for i, axis in enumerate("xyz"):
        if f"pos.{axis}" in kw:
            pos[i] = kw.pop(f"pos.{axis}")
    return command(pos=tuple(pos), **kw)


def _float_cases() -> list[tuple[str, float, RejectReason | None]]:
    cases: list[tuple[str, float, RejectReason | None]] = []
    for name, (lo, hi) in _FLOAT_FIELDS.items():
        cases += [(name, _NAN, RejectReason.NON_FINITE), (name, _INF, RejectReason.NON_FINITE),
                  (name, -_INF, RejectReason.NON_FINITE), (name, -_NAN, RejectReason.NON_FINITE)]
        cases += [(name, math.nextafter(hi, _INF), RejectReason.OUT_OF_RANGE), (name, hi, None)]
        if name == "duration_s":  # (0, max]: zero of either sign is out of range, the tiniest positive is in
            cases += [(name, 0.0, RejectReason.OUT_OF_RANGE), (name, -0.0, RejectReason.OUT_OF_RANGE),
                      (name, 5e-324, None), (name, -1.0, RejectReason.OUT_OF_RANGE)]
        else:
            cases += [(name, math.nextafter(lo, -_INF), RejectReason.OUT_OF_RANGE), (name, lo, None)]
    return cases


@pytest.mark.parametrize(("name", "value", "reason"), _float_cases())
def test_command_block_float_rules(name: str, value: float, reason: RejectReason | None) -> None:
    # The defect sits in a re-sent record in the middle: the whole packet goes, not just that command.
    block = [command(10), _record(seq=11, **{name: value}), command(12), command(13)]
    assert _block_reason(block) is reason


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"buttons": ALL_BUTTONS}, None),
        ({"buttons": ALL_BUTTONS + 1}, RejectReason.UNKNOWN_BUTTONS),
        ({"buttons": 1 << 31}, RejectReason.UNKNOWN_BUTTONS),
        ({"buttons": U32_MAX}, RejectReason.UNKNOWN_BUTTONS),
        *(({"weapon_switch": w}, None) for w in [0, *(int(w) for w in WeaponId)]),
        *(({"weapon_switch": w}, RejectReason.UNKNOWN_WEAPON)
          for w in (int(max(WeaponId)) + 1, 62, 63, 64, 255, U32_MAX)),
        ({"seq": 0, "client_tick": 0}, None),
        ({"seq": U32_MAX, "client_tick": U32_MAX}, None),
    ],
)
def test_command_block_integer_rules(fields: dict[str, int], reason: RejectReason | None) -> None:
    assert _block_reason([_record(**fields)]) is reason


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (b"", RejectReason.NO_COMMANDS),
        (command()[:1], RejectReason.BAD_LENGTH),
        (command()[:-1], RejectReason.BAD_LENGTH),
        (command() + b"\0", RejectReason.BAD_LENGTH),
        (command(1) + command(2)[:-8], RejectReason.BAD_LENGTH),
        (b"".join(command(s) for s in range(1, 6)), RejectReason.TOO_MANY_COMMANDS),
        (b"".join(command(s) for s in range(1, 12)), RejectReason.TOO_MANY_COMMANDS),
        (b"".join(command(s) for s in range(1, 5)), None),
        (command(5) + command(5), RejectReason.COMMAND_ORDER),
        (command(5) + command(4), RejectReason.COMMAND_ORDER),
        (command(1) + command(2) + command(3) + command(3), RejectReason.COMMAND_ORDER),
        (command(U32_MAX) + command(0), RejectReason.COMMAND_ORDER),
        (command(0) + command(U32_MAX), None),
        ("x" * COMMAND_BYTES, RejectReason.BAD_TYPE),  # a str where the bin belongs
        (None, RejectReason.BAD_TYPE),
    ],
)
def test_command_block_shape_rules(block: Any, reason: RejectReason | None) -> None:
    data = pk(V, 3, TOKEN, 7, 100.0, None, block, [])
    try:
        decode(data)
    except ProtocolError as exc:
        assert exc.reason is reason, str(exc)
    else:
        assert reason is None


def test_command_block_limits_come_from_protocol_limits() -> None:
    tight = ProtocolLimits(max_commands=2, coord_limit_m=100.0, max_command_duration_s=0.02)
    far = input_dgram(cmds=[command(pos=(150.0, 0.0, 0.0))], shots=[])
    slow = input_dgram(cmds=[command(duration_s=0.05)], shots=[])
    three = input_dgram(cmds=[command(s) for s in (1, 2, 3)], shots=[])
    for data in (far, slow, three):
        assert isinstance(decode(data), Input)
    for data, reason in ((far, RejectReason.OUT_OF_RANGE), (slow, RejectReason.OUT_OF_RANGE),
                         (three, RejectReason.TOO_MANY_COMMANDS)):
        with pytest.raises(ProtocolError) as info:
            decode(data, tight)
        assert info.value.reason is reason
    with pytest.raises(ValueError):
        ProtocolLimits(max_commands=256)


def test_command_block_first_failure_wins_and_is_named() -> None:
    """Records in order, each record's fields in wire order; the order of seqs last."""
    block = [command(10), command(11, yaw_deg=_NAN, pitch_deg=100.0), command(9, forward=2.0)]
    with pytest.raises(ProtocolError) as info:
        decode(input_dgram(cmds=block, shots=[]))
    assert info.value.reason is RejectReason.NON_FINITE and "commands[1].yaw_deg" in str(info.value)
    block = [command(10), command(9, buttons=512, weapon_switch=99)]
    with pytest.raises(ProtocolError) as info:
        decode(input_dgram(cmds=block, shots=[]))
    assert info.value.reason is RejectReason.UNKNOWN_BUTTONS and "commands[1].buttons" in str(info.value)
    with pytest.raises(ProtocolError) as info:
        decode(input_dgram(cmds=[command(10), command(12), command(11)], shots=[]))
    assert info.value.reason is RejectReason.COMMAND_ORDER and "11 after 12" in str(info.value)


def _reference_reason(block: bytes) -> RejectReason | None:
    """PROTOCOL.md's rules for the command block, written out in plain Python over unpacked records."""
    if not block:
        return RejectReason.NO_COMMANDS
    if len(block) % COMMAND_BYTES:
        return RejectReason.BAD_LENGTH
    if len(block) > LIM.max_commands * COMMAND_BYTES:
        return RejectReason.TOO_MANY_COMMANDS
    records = list(COMMAND_STRUCT.iter_unpack(block))
    names = list(_FLOAT_FIELDS)
    float_at = {2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 10: 6, 11: 7, 12: 8, 13: 9, 14: 10}
    for rec in records:
        for i, v in enumerate(rec):
            if i in float_at:
                name = names[float_at[i]]
                lo, hi = _FLOAT_FIELDS[name]
                if not math.isfinite(v):
                    return RejectReason.NON_FINITE
                if not lo <= v <= hi or (name == "duration_s" and v <= 0.0):
                    return RejectReason.OUT_OF_RANGE
            elif i == 8 and v & ~ALL_BUTTONS:
                return RejectReason.UNKNOWN_BUTTONS
            elif i == 9 and v != 0 and v not in {int(w) for w in WeaponId}:
                return RejectReason.UNKNOWN_WEAPON
    seqs = [rec[0] for rec in records]
    if any(b <= a for a, b in zip(seqs, seqs[1:])):
        return RejectReason.COMMAND_ORDER
    return None


def test_command_block_check_agrees_with_a_plain_reference() -> None:
    """Mutated blocks: the compiled check and the rules written out agree on every one."""
    rng = random.Random(99)
    specials = [_NAN, _INF, -_INF, 0.0, -0.0, 5e-324, 1.0, -1.0, 89.0, 89.5, 360.0, 1e4, 10_000.5, 0.1, 0.11, 1e10,
                1e11, 180.0, -180.5]
    base = b"".join(command(s) for s in (10, 11, 12, 13))
    seen: dict[RejectReason | None, int] = {}
    for i in range(4000):
        buf = bytearray(base[: COMMAND_BYTES * rng.randint(1, 4)])
        records = len(buf) // COMMAND_BYTES
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(3)
            at = rng.randrange(records) * COMMAND_BYTES
            if op == 0:  # a random byte
                buf[at + rng.randrange(COMMAND_BYTES)] = rng.randrange(256)
            elif op == 1:  # a special float in a float slot
                offset = rng.choice([8, 16, 24, 32, 40, 48, 64, 72, 80, 88, 96])
                struct.pack_into("<d", buf, at + offset, rng.choice(specials))
            else:  # a uint32 in an integer slot
                value = rng.choice([0, 1, 7, 8, 255, 256, 2**31, U32_MAX, rng.randrange(2**32)])
                struct.pack_into("<I", buf, at + rng.choice([0, 4, 56, 60]), value)
        if i % 11 == 0:  # a length that is not whole records (rarely: it hides every other defect)
            del buf[rng.randrange(len(buf)):]
        block = bytes(buf)
        want = _reference_reason(block)
        assert _block_reason(block) is want, (i, block.hex())
        seen[want] = seen.get(want, 0) + 1
    assert set(seen) >= {None, RejectReason.NON_FINITE, RejectReason.OUT_OF_RANGE, RejectReason.UNKNOWN_BUTTONS,
                         RejectReason.UNKNOWN_WEAPON, RejectReason.COMMAND_ORDER, RejectReason.BAD_LENGTH}, seen


# ------------------------------------------------------------------------------------------------
# Fuzzing: nothing but ProtocolError ever leaves decode


def _random_object(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return rng.choice([0, 1, -1, 2**31, 2**32, 2**63 - 1, -(2**63), 2**64 - 1, rng.randrange(-1000, 1000)])
    if kind == 1:
        return rng.choice([0.0, -0.0, 1.5, float("nan"), float("inf"), float("-inf"), 1e308, rng.uniform(-1e5, 1e5)])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.randbytes(rng.randrange(0, 40)).decode("utf-8", "replace")
    if kind == 4:
        return rng.randbytes(rng.choice([0, 15, 16, 17, 36, 40, 72, rng.randrange(0, 200)]))
    if kind == 5:
        return msgpack.ExtType(rng.randrange(0, 128), rng.randbytes(rng.randrange(0, 12)))
    if kind == 6:
        return rng.choice([1, 2, 3, 4, 5, 16, 17, 18, 19, 20, 21, 22, 23, 99])
    if kind == 7:
        return rng.choice([[], [0.0, 0.0, 0.0], [1, 2]])
    if kind in (8, 9, 10):
        return [_random_object(rng, depth + 1) for _ in range(rng.randrange(0, 10))]
    return {str(rng.randrange(10)): _random_object(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def _replace_random_leaf(rng: random.Random, obj: list[Any]) -> None:
    """Swap one element somewhere in a nested list for a random object (structure-aware fuzzing)."""
    node = obj
    while True:
        i = rng.randrange(len(node))
        child = node[i]
        if isinstance(child, list) and child and rng.random() < 0.7:
            node = child
            continue
        node[i] = _random_object(rng, 2)
        return


def _valid_corpus(rng: random.Random) -> list[bytes]:
    own_state = OwnState((1.0, 2.0, 0.0), (0.0, 1.0, 0.0), 10.0, 0.0, 100.0, 2, 10, 40, 0, True, True)
    entities = encode_entities(
        make_entities(np.arange(10), np.ones(10), np.zeros((10, 3)), np.zeros((10, 3)), np.zeros(10),
                      np.zeros(10), np.full(10, 2), np.full(10, 100))
    )
    msgs: list[Message] = [
        Connect(NONCE, "player"),
        ChallengeResponse(COOKIE, NONCE, "player"),
        decode(input_dgram(cmds=[command(s) for s in (10, 11, 12, 13)], shots=[shot(), shot(cmd_seq=13)])),
        Ping(TOKEN, 3, 1.0),
        Disconnect(TOKEN, 4),
        Challenge(COOKIE),
        Accept(TOKEN, 3, 128, "city", 12.0, AcceptLimits(1200, 4, 8, 0.1, 256.0, 307200.0)),
        Reject(RefuseCode.SERVER_FULL),
        Snapshot(100, 12.0, 55, own_state, entities),
        Correction(5, (1.0, 2.0, 3.0), (0.0, 0.0, 0.0)),
        Notice(NoticeCode.KILL, "a killed b", (1.0, 2.0, 2.0, 2.0, 10.5)),
        Pong(3, 1.0, 12.0),
        ServerDisconnect(DisconnectCode.KICKED),
    ]
    return [encode(m) for m in msgs]


def test_fuzz_only_protocol_errors() -> None:
    rng = random.Random(20240601)
    corpus = _valid_corpus(rng)
    outcomes = {"ok": 0, "rejected": 0}
    for i in range(20_000):
        mode = i % 6
        if mode == 0:
            data = rng.randbytes(rng.randrange(0, 1300))
        elif mode == 1:
            base = rng.choice(corpus)
            data = base[: rng.randrange(0, len(base))]
        elif mode == 2:
            buf = bytearray(rng.choice(corpus))
            for _ in range(rng.randrange(1, 6)):
                pos = rng.randrange(len(buf))
                op = rng.randrange(3)
                if op == 0:
                    buf[pos] = rng.randrange(256)
                elif op == 1:
                    buf[pos] ^= 1 << rng.randrange(8)
                else:
                    buf[pos:pos] = rng.randbytes(rng.randrange(1, 4))
            data = bytes(buf)
        elif mode == 3:
            fields = [_random_object(rng, 1) for _ in range(rng.randrange(0, 9))]
            data = msgpack.packb([1, int(rng.choice(list(MsgType))), *fields], use_bin_type=True)
        elif mode == 4:
            data = msgpack.packb(_random_object(rng), use_bin_type=True)
        else:
            tree = msgpack.unpackb(rng.choice(corpus))
            _replace_random_leaf(rng, tree)
            data = msgpack.packb(tree, use_bin_type=True)
        try:
            decode(data)
            outcomes["ok"] += 1
        except ProtocolError:
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > 15_000


# ------------------------------------------------------------------------------------------------
# Entity block


def _records(n: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    return make_entities(
        np.arange(n), np.full(n, int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)),
        rng.uniform(-100, 100, (n, 3)), rng.uniform(-7, 7, (n, 3)), rng.uniform(-180, 180, n),
        rng.uniform(-89, 89, n), np.full(n, int(WeaponId.RIFLE)), rng.uniform(0, 100, n),
    )


def test_entity_block_layout() -> None:
    assert ENTITY_BYTES == 36
    rec = _records(1)
    raw = encode_entities(rec)
    assert raw[0] == 0 and raw[1] == 5  # slot, flags
    assert np.frombuffer(raw[2:6], "<f4")[0] == rec["pos"][0, 0]
    assert raw[34] == int(WeaponId.RIFLE)


def test_entity_block_round_trip() -> None:
    rec = _records(32)
    out = decode_entities(encode_entities(rec))
    assert out.dtype == ENTITY_DTYPE and len(out) == 32
    assert out.tobytes() == rec.tobytes()
    assert not out.flags.writeable
    assert len(decode_entities(b"")) == 0


def test_make_entities_rounds_and_clips_health() -> None:
    rec = make_entities(np.arange(3), np.zeros(3), np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3), np.zeros(3),
                        np.ones(3), np.array([99.6, -5.0, 300.0]))
    assert rec["health"].tolist() == [100, 0, 255]


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("pos", np.nan, "non_finite"), ("vel", np.inf, "non_finite"), ("yaw", np.nan, "non_finite"),
        ("pos", 10_001.0, "out_of_range"), ("vel", 200.0, "out_of_range"), ("pitch", -90.0, "out_of_range"),
        ("yaw", 400.0, "out_of_range"), ("slot", 200, "out_of_range"), ("weapon", 8, "unknown_weapon"),
        ("flags", 0x40, "unknown_flags"), ("slot", 1, "duplicate_slot"),
    ],
)
def test_entity_block_validation(field: str, value: float, kind: str) -> None:
    rec = _records(3)
    rec[field][0] = value
    with pytest.raises(EntityBlockError) as info:
        decode_entities(rec.tobytes(), EntityLimits(max_slots=128))
    assert info.value.kind == kind
    with pytest.raises(EntityBlockError):
        encode_entities(rec, EntityLimits(max_slots=128))


def test_entity_block_check_agrees_with_the_field_checks() -> None:
    # The compiled pass decides; a block refused by it is explained field by field, which must
    # then name a reason (and a block it passes must pass every field check).
    rng = np.random.default_rng(5)
    limits = EntityLimits(max_slots=128)
    refused = 0
    for _ in range(3000):
        k = int(rng.integers(1, 6))
        rec = make_entities(rng.integers(0, 140, k), rng.integers(0, 8, k), rng.normal(0.0, 4000.0, (k, 3)),
                            rng.normal(0.0, 40.0, (k, 3)), rng.normal(0.0, 200.0, k), rng.normal(0.0, 50.0, k),
                            rng.integers(0, 10, k), rng.integers(0, 300, k))
        raw = bytearray(rec.tobytes())
        raw[int(rng.integers(len(raw)))] = int(rng.integers(256))
        data = bytes(raw)
        floats = np.ndarray((k, 8), "<f4", data, 2, (ENTITY_BYTES, 4))
        slots = data[0::ENTITY_BYTES]
        ok = (
            bool((np.abs(floats) <= [1e4] * 3 + [100.0] * 3 + [360.0, 89.0]).all()) and max(slots) < 128
            and all(not b & ~7 for b in data[1::ENTITY_BYTES])
            and all(b == 0 or b in {int(w) for w in WeaponId} for b in data[34::ENTITY_BYTES])
            and len(set(slots)) == len(slots)
        )
        try:
            decode_entities(data, limits)
        except EntityBlockError:
            refused += 1
            assert not ok
        else:
            assert ok
    assert 0 < refused < 3000


def test_entity_block_length_must_be_whole_records() -> None:
    with pytest.raises(EntityBlockError) as info:
        decode_entities(bytes(ENTITY_BYTES + 1))
    assert info.value.kind == "length"


def test_split_entities() -> None:
    rec = _records(60)
    parts = split_entities(rec, 29)
    assert [len(p) for p in parts] == [29, 29, 2]
    assert len(split_entities(rec[:0], 29)) == 1


# ------------------------------------------------------------------------------------------------
# Size budgets


def _own_worst() -> OwnState:
    return OwnState((-1e4, -1e4, -1e4), (-99.5, -99.5, -99.5), -179.5, -88.5, 99.5, 7, 65535, 65535, 1, True, True)


def test_snapshot_capacity_is_exact() -> None:
    cap = max_entities_per_snapshot()
    assert cap == 29
    worst = dict(tick=U32_MAX, server_time_s=1e9 + 0.5, last_cmd_seq=U32_MAX, own=_own_worst(), part=7, part_count=8)
    assert len(encode(Snapshot(entities=encode_entities(_records(cap)), **worst))) <= 1200  # type: ignore[arg-type]
    with pytest.raises(ProtocolError) as info:
        encode(Snapshot(entities=encode_entities(_records(cap + 1)), **worst))  # type: ignore[arg-type]
    assert info.value.reason is RejectReason.TOO_LARGE


def test_worst_case_input_fits_a_datagram() -> None:
    cmds = [command(U32_MAX - 3 + i, client_tick=U32_MAX, view_time_s=1e9 + 0.5, buttons=255, weapon_switch=7,
                    pos=(-1e4 + 0.5,) * 3) for i in range(4)]
    shots = [shot(cmd_seq=U32_MAX, weapon=7, view_time_s=1e9 + 0.5, victim=255, point=[-1e4 + 0.5] * 3, bone=17)] * 8
    data = input_dgram(cmds=cmds, shots=shots, packet_seq=U32_MAX, client_time_s=1e9 + 0.5, ack_tick=U32_MAX)
    assert len(data) <= 1200
    assert isinstance(decode(data), Input)


def test_unauthenticated_replies_never_exceed_their_requests() -> None:
    connect = encode(Connect(NONCE, "x"))
    response = encode(ChallengeResponse(COOKIE, NONCE, "x"))
    assert len(connect) >= LIM.min_unauth_request_bytes and len(response) >= LIM.min_unauth_request_bytes
    widest = AcceptLimits(65535, 255, 255, 0.5, 1e6 - 0.5, 1e9 - 0.5)
    accept = encode(Accept(TOKEN, 255, 1000, "m" * 32, 1e9 + 0.5, widest))
    replies = [encode(Challenge(COOKIE)), accept, *(encode(Reject(c)) for c in RefuseCode)]
    assert max(len(r) for r in replies) <= min(len(connect), len(response))


def test_encode_refuses_oversize_and_non_messages() -> None:
    with pytest.raises(ProtocolError):
        encode(Notice(NoticeCode.INFO, "x" * 1300))
    assert len(encode(Notice(NoticeCode.INFO, "x" * 1300), check_size=False)) > 1200
    with pytest.raises(TypeError):
        encode("hello")  # type: ignore[arg-type]


def test_version_is_first() -> None:
    data = encode(Ping(TOKEN, 1, 2.0))
    assert msgpack.unpackb(data)[:2] == [PROTOCOL_VERSION, MsgType.PING]


# ------------------------------------------------------------------------------------------------
# The shot fast path accepts nothing the field-by-field checks refuse


def _tricky(base: Any) -> st.SearchStrategy[Any]:
    """Mostly the valid ``base`` value (so whole records often pass), else an edge or a wrong type."""
    if isinstance(base, list):
        base = tuple(base)
    edges = st.sampled_from(
        [0, 1, -1, 0.0, -0.0, 1.0, -1.0, 1e-300, 0.1, 0.10000000000000002, 89.0, 89.00001, -89.0,
         360.0, 360.1, 180.0, 180.5, 1e4, 10_000.001, -1e4, 255, 256, 7, 8, 17, 18, U32_MAX, U32_MAX + 1, 2**63,
         float("nan"), float("inf"), -float("inf"), True, False, None, "x", b"x", (1.0, 2.0, 3.0), (1.0, 2.0),
         (1.0, float("nan"), 3.0), (1, 2, 3), (1e5, 0.0, 0.0)]
    )
    return st.integers(0, 7).flatmap(lambda i: edges if i == 0 else st.just(base))


def _outcome(fn: Any, v: Any) -> Any:
    try:
        return ("ok", fn(v, LIM))
    except ProtocolError as exc:
        return ("err", exc.reason)


@settings(max_examples=1500, deadline=None)
@given(st.tuples(*(_tricky(b) for b in shot())))
def test_shot_fast_path_agrees_with_checks(fields: tuple[Any, ...]) -> None:
    from server.protocol.parsers import _shot, _shot_checked

    assert _outcome(_shot, fields) == _outcome(_shot_checked, fields)


def test_decode_client_fast_path_agrees_with_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_client decodes the per-tick INPUT without the general layers: same message, same
    reason as decode, for mutations of every INPUT field (and the fast path does take most)."""
    import server.protocol as protocol

    good = [command(s) for s in (1, 2, 3, 4)]
    edges: list[list[Any]] = [
        [V, 1, V + 1, True, 2.0, None],
        [3, 4, 2, True, 3.0, "3", 16],
        [TOKEN, TOKEN[:-1], TOKEN + b"x", "t" * 16, None],
        [0, U32_MAX, U32_MAX + 1, -1, True, 1.0, None],
        [0.0, 1e10, math.nextafter(1e10, _INF), -0.0, -1e-300, 5, _NAN, _INF, True, None],
        [None, 0, U32_MAX, U32_MAX + 1, -1, False, 1.5],
        [b"".join(good), good[0], b"", good[0][:-1], b"".join(good) + good[0], command(1, yaw_deg=_NAN),
         command(2) + command(1), "x", (good[0],), None],
        [[], [shot(cmd_seq=1)], [shot(cmd_seq=9)], "s", None, {}],
    ]
    base: list[Any] = [V, 3, TOKEN, 7, 100.0, None, b"".join(good), []]

    def described(msg: Any) -> tuple[Any, ...]:
        # The command block's records and the shots' types too, not only equality.
        return (type(msg), msg, [type(x) for x in msg] if isinstance(msg, Input) else None)

    _fast_path_agrees(monkeypatch, protocol.decode_client, protocol.CLIENT_TYPES, base, edges, 5, described)


@settings(max_examples=1500, deadline=None)
@given(st.tuples(*(_tricky(b) for b in own())))
def test_own_fast_path_agrees_with_checks(fields: tuple[Any, ...]) -> None:
    from server.protocol.parsers import _own, _own_checked

    assert _outcome(_own, fields) == _outcome(_own_checked, fields)


_SNAPSHOT_FIELDS = (5, 1.0, None, 0, 1, tuple(tuple(x) if isinstance(x, list) else x for x in own()), entity_bytes())


def test_snapshot_fast_path_agrees_with_checks() -> None:
    """Edge values in one or two fields of a valid SNAPSHOT body (two: the header's bounds
    depend on each other, part < part_count)."""
    from server.protocol.parsers import _snapshot_checked
    from server.protocol.parsers import parse_snapshot as _snapshot

    values = [0, 1, -1, 2, 7, 8, 9, 0.0, -0.0, 1.0, 1e10, 1e11, U32_MAX, U32_MAX + 1, _NAN, True, None, "x"]
    n = len(_SNAPSHOT_FIELDS)
    for i in range(n):
        for j in range(i, n):
            for v in values:
                for w in values if j != i else [v]:
                    fields = list(_SNAPSHOT_FIELDS)
                    fields[i], fields[j] = v, w
                    body = tuple(fields)
                    assert _outcome(_snapshot, body) == _outcome(_snapshot_checked, body), body


def test_decode_server_fast_path_agrees_with_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_server takes the per-tick SNAPSHOT past the general layers: same message, same
    reason as decode, for mutations of every SNAPSHOT field (and the fast path does take most)."""
    import server.protocol as protocol

    edges: list[list[Any]] = [
        [V, 1, V + 1, True, 2.0, None],
        [19, 3, 20, True, 19.0, "19", 99],
        [0, U32_MAX, U32_MAX + 1, -1, True, 1.0, None],
        [0.0, 1e10, math.nextafter(1e10, _INF), -0.0, -1e-300, 5, _NAN, _INF, True, None],
        [None, 0, U32_MAX, U32_MAX + 1, -1, False, 1.5],
        [0, 1, 7, 8, -1, True, 0.0, None],
        [1, 2, 8, 9, 0, True, 1.0, None],
        [own(), own(pos=[1e5, 0.0, 0.0]), own(health=_NAN), own(weapon=8), own(ammo=True), own(pos=[1, 2, 3]),
         own()[:-1], "o", None],
        [entity_bytes(), b"", entity_bytes(pitch=90.0), entity_bytes(slot=2), entity_bytes()[:-1], "e", None],
    ]
    base: list[Any] = [V, 19, 5, 1.0, None, 0, 1, own(), entity_bytes()]
    _fast_path_agrees(monkeypatch, protocol.decode_server, protocol.SERVER_TYPES, base, edges, 7,
                      lambda msg: ("ok", None, msg))


def _fast_path_agrees(
    monkeypatch: pytest.MonkeyPatch, fast: Callable[[bytes], Any], allowed: Any, base: list[Any],
    edges: list[list[Any]], seed: int, described: Callable[[Any], tuple[Any, ...]],
) -> None:
    """``fast`` (a decoder with a fast path) and ``decode`` restricted to ``allowed`` give the same
    message (as ``described``) or the same reason for 3,000 mutations of the message ``base``:
    up to two fields replaced from ``edges``, now and then a wrong arity or a cut datagram. The
    fast path must take most of them itself (falling back to decode for the others)."""
    import server.protocol.decoding as protocol

    general = {"calls": 0}

    def counted(*args: Any, **kwargs: Any) -> Any:
        general["calls"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(protocol, "decode", counted)
    rng = random.Random(seed)
    runs = 3000
    for i in range(runs):
        fields = list(base)
        for _ in range(rng.choice([0, 1, 1, 2])):
            k = rng.randrange(len(fields))
            fields[k] = rng.choice(edges[k])
        data = pk(*fields) if i % 10 else pk(*fields, 0)
        if i % 7 == 0:
            data = data[: rng.randrange(len(data) + 1)]
        outcomes = []
        for fn in (fast, lambda d: decode(d, allowed=allowed)):
            try:
                outcomes.append(described(fn(data)))
            except ProtocolError as exc:
                outcomes.append((ProtocolError, exc.reason, None))
        assert outcomes[0] == outcomes[1], fields
    calls_fast = runs - general["calls"]
    assert 500 < calls_fast < runs, calls_fast


# ------------------------------------------------------------------------------------------------
# PROTOCOL.md stays in step with the code


def _protocol_md() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "PROTOCOL.md").read_text(encoding="utf-8")


def test_protocol_md_examples_match_the_encoder() -> None:
    text = _protocol_md()
    blocks = text[text.index("## 9. Example") :].split("```")[1::2]

    def hex_of(block: str) -> bytes:
        lines = block.strip().splitlines()
        return bytes.fromhex("".join(line.strip().split("  ")[0].replace(" ", "") for line in lines))

    assert hex_of(blocks[0]) == encode(Ping(bytes(range(16)), 42, 12.5))
    cmd = Command(1, 2, 0.5, 0.0078125, 1.0, 0.0, 90.0, -2.5, 1, 0, 0.0, 0.0, (1.5, -2.0, 0.0))
    assert hex_of(blocks[1]) == encode(Input.with_commands(bytes(range(16)), 7, 100.0, None, [cmd]))


def test_protocol_md_documents_every_reason_and_type() -> None:
    text = _protocol_md()
    for reason in RejectReason:
        assert f"`{reason.value}`" in text, reason
    for mtype in MsgType:
        assert f"| {int(mtype)} | {mtype.name} |" in text, mtype
