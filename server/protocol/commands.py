"""The INPUT command record: one fixed-size little-endian record per command (PROTOCOL.md, "The
INPUT command block"), its packing and unpacking, the tick's view of many records as arrays, and
the compiled check of a whole block (every client sends an INPUT per tick)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

import numba
import numpy as np

from physics.buttons import ALL_BUTTONS
from server.protocol.codes import ProtocolError, RejectReason, Vec3
from world.weapons import WeaponId

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
COMMAND_WORDS = COMMAND_BYTES // 8
_DURATION_WORD = 2
_COMMAND_VALUE_NAMES: Final = (
    "seq", "client_tick", "view_time_s", "duration_s", "forward", "side", "yaw_deg", "pitch_deg",
    "buttons", "weapon_switch", "recoil_pitch_deg", "recoil_yaw_deg", "pos.x", "pos.y", "pos.z",
)
"""The values of a record in COMMAND_STRUCT order (the block check reports failures by this index)."""
if (COMMAND_BYTES, COMMAND_WORDS * 8, len(_COMMAND_VALUE_NAMES), _COMMAND_POS_OFFSET) != (
    104, 104, 15, 80
):  # pragma: no cover - layout consistency
    raise AssertionError("command record layout no longer matches its word-wise check")



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


CMD_VIEW_TIME, CMD_DURATION, CMD_FORWARD, CMD_SIDE, CMD_YAW, CMD_PITCH, CMD_RECOIL_PITCH, CMD_RECOIL_YAW, CMD_POS = (
    1, 2, 3, 4, 5, 6, 8, 9, 10
)
"""Word (8-byte) index of each float field in a command record, as :func:`command_arrays` reads it
(``pos`` takes words 10-12)."""
CMD_SEQ, CMD_BUTTONS, CMD_SWITCH = 0, 14, 15
"""Half-word (4-byte) index of the integer fields seq, buttons and weapon_switch in a record."""
if (CMD_VIEW_TIME * 8, CMD_RECOIL_PITCH * 8, CMD_POS * 8, CMD_BUTTONS * 4, CMD_SWITCH * 4) != (8, 64, 80, 56, 60):  # pragma: no cover
    raise AssertionError("command record layout no longer matches its word indices")


def command_arrays(records: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Command records back to back (N * COMMAND_BYTES bytes) as two read-only views of the same
    bytes: (N, 13) float64 words (index them with ``CMD_VIEW_TIME`` ... ``CMD_POS``) and (N, 26)
    uint32 halves (``CMD_SEQ``, ``CMD_BUTTONS``, ``CMD_SWITCH``). The values are exactly those of
    :func:`unpack_command`."""
    n = len(records) // COMMAND_BYTES
    words = np.frombuffer(records, dtype="<f8", count=n * COMMAND_WORDS).reshape(n, COMMAND_WORDS)
    halves = np.frombuffer(records, dtype="<u4", count=n * 2 * COMMAND_WORDS).reshape(n, 2 * COMMAND_WORDS)
    return words, halves


def unpack_command(block: bytes, index: int) -> Command:
    """Record ``index`` of a command block as a Command (exact values: every float is a float64)."""
    offset = index * COMMAND_BYTES
    # Command._make without its Python-level length check (the structs always give 12 + 3
    # values): this is on the server's receive path, and 40 % cheaper than Command(...).
    pos = _COMMAND_POS.unpack_from(block, offset + _COMMAND_POS_OFFSET)
    return _tuple_new(Command, _COMMAND_HEAD.unpack_from(block, offset) + (pos,))  # type: ignore[no-any-return]



# A block is checked in one compiled pass over its records; the reason of the first failure is
# worked out in Python, on the rare packet that has one.

WEAPON_IDS: Final = frozenset(int(w) for w in WeaponId)
KNOWN_BUTTONS: Final = int(ALL_BUTTONS)
KNOWN_WEAPON_SWITCHES: Final = sum(1 << w for w in {0, *WEAPON_IDS})
"""Bit w set when weapon_switch w is valid (0 = none, or a WeaponId)."""
if max(WEAPON_IDS) > 62:  # pragma: no cover - the mask must fit an int64
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
def check_command_block(block: bytes, bounds: np.ndarray, known_buttons: int, known_weapons: int) -> int:
    """0 when every record of ``block`` (whole records: the caller checked the length) passes,
    else ``reason << 16 | record << 8 | value`` of the first failure (``_BLOCK_*`` reason, record
    index, index into _COMMAND_VALUE_NAMES). Records are checked in order, each one's values in
    wire order; the seq order only once every record passed, in PROTOCOL.md's order of checks.

    Compiled with its signature at import (or loaded from the cache), so no INPUT ever waits for
    a compilation. NaN fails every comparison, so one range test per float catches it too.
    """
    words = np.frombuffer(block, np.float64)
    halves = words.view(np.uint32)
    n = words.shape[0] // COMMAND_WORDS
    for i in range(n):
        base = i * COMMAND_WORDS
        for w in range(1, COMMAND_WORDS):
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
        if halves[2 * i * COMMAND_WORDS] <= halves[2 * (i - 1) * COMMAND_WORDS]:
            return _BLOCK_COMMAND_ORDER << 16 | i << 8
    return 0


def command_block_error(block: bytes, status: int) -> ProtocolError:
    reason = _BLOCK_REASONS[status >> 16]
    record, value = (status >> 8) & 0xFF, status & 0xFF
    if reason is RejectReason.COMMAND_ORDER:
        return ProtocolError(reason, f"command seq {command_seq(block, record)} after {command_seq(block, record - 1)}")
    found = COMMAND_STRUCT.unpack_from(block, record * COMMAND_BYTES)[value]
    return ProtocolError(reason, f"commands[{record}].{_COMMAND_VALUE_NAMES[value]}={found!r}")

