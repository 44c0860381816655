"""The entity block of a SNAPSHOT: a packed little-endian array of fixed-size records.

A snapshot carries its visible entities as one msgpack ``bin`` holding these records back to back
instead of one msgpack array per entity: packing 32 players this way costs ~1 us against ~52 us as
dicts (REFERENCES section 9), and a client in any language reads it with a struct layout.

Record layout (36 bytes, no padding, little-endian)::

    offset  size  type  field
         0     1  u1    slot       player slot (< max slots)
         1     1  u1    flags      EntityFlags bits (bits 3..7 must be zero in protocol version 1)
         2    12  3xf4  pos        feet position x, y, z (m)
        14    12  3xf4  vel        velocity x, y, z (m/s)
        26     4  f4    yaw        view yaw (deg)
        30     4  f4    pitch      view pitch (deg, within +/-89)
        34     1  u1    weapon     held weapon id (0 = none, else a WeaponId)
        35     1  u1    health     hit points, rounded (0..255)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntFlag

import numba
import numpy as np

from world.state import PITCH_LIMIT_DEG, WorldLimits
from world.weapons import WeaponId


class EntityFlags(IntFlag):
    """Bits of an entity record's ``flags`` byte."""

    NONE = 0
    ALIVE = 1
    CROUCHING = 2
    NOT_RENDERED = 4
    """A bait target (AimDetect): the server sends it, a human client must not draw it, so only an
    aimbot reading raw snapshots ever aims at it."""


KNOWN_FLAGS: int = int(EntityFlags.ALIVE | EntityFlags.CROUCHING | EntityFlags.NOT_RENDERED)
RESERVED_FLAGS: int = 0b0011_1000
"""Bits 3..5, reserved for future flags; like bits 6..7 they must be zero in protocol version 1."""
_KNOWN_FLAG_BYTES = bytes(b for b in range(256) if not b & ~KNOWN_FLAGS)

ENTITY_DTYPE = np.dtype(
    [
        ("slot", "u1"),
        ("flags", "u1"),
        ("pos", "<f4", (3,)),
        ("vel", "<f4", (3,)),
        ("yaw", "<f4"),
        ("pitch", "<f4"),
        ("weapon", "u1"),
        ("health", "u1"),
    ]
)
"""One entity record (packed: numpy structured dtypes carry no alignment padding unless asked)."""

ENTITY_BYTES: int = ENTITY_DTYPE.itemsize
"""Size of one record (bytes): 36."""

_WEAPON_BYTES = bytes([0, *(int(w) for w in WeaponId)])
"""Valid weapon bytes: 0 (none) and every WeaponId."""
_KNOWN_WEAPONS = np.zeros(256, dtype=np.bool_)
_KNOWN_WEAPONS[list(_WEAPON_BYTES)] = True
_FLOATS_OFFSET = 2
_WEAPON_OFFSET = 34
_FLOATS_PER_RECORD = 8
"""pos, vel, yaw and pitch are 8 consecutive f4 from byte 2 of a record: one strided view checks them."""
if (ENTITY_DTYPE.fields["pos"][1], ENTITY_DTYPE.fields["pitch"][1], ENTITY_DTYPE.fields["weapon"][1]) != (
    _FLOATS_OFFSET, _FLOATS_OFFSET + 4 * (_FLOATS_PER_RECORD - 1), _WEAPON_OFFSET
):  # pragma: no cover - layout consistency
    raise AssertionError("entity record offsets no longer match the byte-column checks")


@dataclass(frozen=True, slots=True)
class EntityLimits:
    """Ranges an entity record must respect.

    Attributes:
        max_slots: slots must be below this (the protocol's u1 allows 256; the server's world has 128).
        coord_limit_m: |pos component| limit (m); WorldLimits' 10,000 m.
        speed_limit_m_s: |vel component| limit (m/s); WorldLimits' 100 m/s.
        yaw_limit_deg: |yaw| limit (deg); 360 so that an unwrapped yaw in (-360, 360) passes.
        pitch_limit_deg: |pitch| limit (deg); Source's 89.
    """

    max_slots: int = 256
    coord_limit_m: float = WorldLimits().coord_limit_m
    speed_limit_m_s: float = WorldLimits().speed_limit_m_s
    yaw_limit_deg: float = 360.0
    pitch_limit_deg: float = PITCH_LIMIT_DEG
    _float_bounds: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bounds = [self.coord_limit_m] * 3 + [self.speed_limit_m_s] * 3 + [self.yaw_limit_deg, self.pitch_limit_deg]
        object.__setattr__(self, "_float_bounds", np.array(bounds, dtype=np.float64))


DEFAULT_ENTITY_LIMITS = EntityLimits()


class EntityBlockError(ValueError):
    """An entity block broke the layout or a range; ``kind`` says which check failed.

    Kinds: ``length`` (not a multiple of the record size), ``non_finite``, ``out_of_range``,
    ``unknown_weapon``, ``unknown_flags``, ``duplicate_slot``.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def make_entities(
    slots: np.ndarray,
    flags: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    yaw_deg: np.ndarray,
    pitch_deg: np.ndarray,
    weapon: np.ndarray,
    health: np.ndarray,
) -> np.ndarray:
    """Build records from structure-of-arrays columns (the world's own layout), vectorized.

    Args:
        slots (N,) ints; flags (N,) EntityFlags ints; pos (N,3) m; vel (N,3) m/s; yaw_deg, pitch_deg
        (N,) deg; weapon (N,) ids; health (N,) hit points (rounded to the nearest integer, clipped
        to 0..255).
    Returns:
        (N,) array of ENTITY_DTYPE.
    """
    n = len(slots)
    out = np.empty(n, dtype=ENTITY_DTYPE)
    out["slot"] = slots
    out["flags"] = flags
    out["pos"] = pos
    out["vel"] = vel
    out["yaw"] = yaw_deg
    out["pitch"] = pitch_deg
    out["weapon"] = weapon
    out["health"] = np.clip(np.rint(np.asarray(health, dtype=np.float64)), 0, 255)
    return out


def _float_view(data: bytes) -> np.ndarray:
    """(N, 8) float32 view of pos, vel, yaw, pitch of every record (no copy)."""
    n = len(data) // ENTITY_BYTES
    return np.ndarray(
        (n, _FLOATS_PER_RECORD), dtype="<f4", buffer=data, offset=_FLOATS_OFFSET, strides=(ENTITY_BYTES, 4)
    )


@numba.njit(cache=True, nogil=True)
def load_floats(raw: np.ndarray, base: int, bits: np.ndarray) -> None:  # pragma: no cover - compiled
    """The bits of the 8 f4 of the record at byte ``base`` of ``raw`` (a uint8 view of a block)
    into the (8,) uint32 ``bits``; read them through ``bits.view(np.float32)``. Records are 36
    bytes, so their floats are unaligned and are assembled byte by byte (little-endian)."""
    at = base + _FLOATS_OFFSET
    for c in range(_FLOATS_PER_RECORD):
        k = at + 4 * c
        bits[c] = (np.uint32(raw[k]) | np.uint32(raw[k + 1]) << np.uint32(8) | np.uint32(raw[k + 2]) << np.uint32(16)
                   | np.uint32(raw[k + 3]) << np.uint32(24))


_CHECK_SIGNATURE = numba.boolean(
    numba.types.Bytes(numba.uint8, 1, "C", readonly=True), numba.float64[::1], numba.int64, numba.int64,
    numba.boolean[::1],
)


@numba.njit(_CHECK_SIGNATURE, cache=True, nogil=True)
def _records_pass(
    data: bytes, bounds: np.ndarray, max_slots: int, known_flags: int, known_weapons: np.ndarray
) -> bool:  # pragma: no cover - compiled
    """True when every record of ``data`` (whole records: the caller checked the length) has
    its 8 floats within ``bounds`` (NaN fails the comparison), a slot below ``max_slots`` seen
    once, only ``known_flags`` bits and a weapon byte marked in ``known_weapons``.

    Compiled with its signature at import (or loaded from the cache): no snapshot waits for a
    compilation."""
    raw = np.frombuffer(data, np.uint8)
    bits = np.empty(_FLOATS_PER_RECORD, np.uint32)
    floats = bits.view(np.float32)
    seen = np.zeros(256, np.bool_)
    for base in range(0, raw.shape[0], ENTITY_BYTES):
        load_floats(raw, base, bits)
        for c in range(_FLOATS_PER_RECORD):
            if not abs(floats[c]) <= bounds[c]:
                return False
        slot = raw[base]
        if slot >= max_slots or seen[slot] or raw[base + 1] & ~known_flags or not known_weapons[raw[base + _WEAPON_OFFSET]]:
            return False
        seen[slot] = True
    return True


def check_block(data: bytes, limits: EntityLimits = DEFAULT_ENTITY_LIMITS) -> None:
    """Raise EntityBlockError unless ``data`` is whole records, all finite, in range, with known
    ids and no slot twice.

    One compiled pass over the records decides; only a block that failed it is checked again
    here, check by check, to name the reason.
    """
    size = len(data)
    if size % ENTITY_BYTES:
        raise EntityBlockError("length", f"{size} bytes is not a multiple of {ENTITY_BYTES}")
    if not size or _records_pass(data, limits._float_bounds, limits.max_slots, KNOWN_FLAGS, _KNOWN_WEAPONS):
        return
    floats = _float_view(data)
    if not (np.abs(floats) <= limits._float_bounds).all():
        _explain_floats(floats, limits)
    slots = data[0::ENTITY_BYTES]
    if max(slots) >= limits.max_slots:
        raise EntityBlockError("out_of_range", f"slot >= {limits.max_slots}")
    if data[1::ENTITY_BYTES].translate(None, _KNOWN_FLAG_BYTES):
        raise EntityBlockError("unknown_flags", "reserved flag bits are set")
    if data[_WEAPON_OFFSET::ENTITY_BYTES].translate(None, _WEAPON_BYTES):
        raise EntityBlockError("unknown_weapon", "weapon id is neither 0 nor a WeaponId")
    # A duplicated slot would let one record silently shadow another on the client.
    if len(set(slots)) != len(slots):
        raise EntityBlockError("duplicate_slot", "a slot appears twice")
    raise AssertionError("the compiled entity check refused a block the byte checks pass")  # pragma: no cover


def _explain_floats(floats: np.ndarray, limits: EntityLimits) -> None:
    if not np.isfinite(floats).all():
        raise EntityBlockError("non_finite", "a float field is NaN or infinite")
    names = ("pos", "pos", "pos", "vel", "vel", "vel", "yaw", "pitch")
    column = int(np.argmax((np.abs(floats) > limits._float_bounds).any(axis=0)))
    bound = float(limits._float_bounds[column])
    raise EntityBlockError("out_of_range", f"|{names[column]}| > {bound}")


def encode_entities(
    records: np.ndarray, limits: EntityLimits = DEFAULT_ENTITY_LIMITS, *, validate: bool = True
) -> bytes:
    """Pack records of ENTITY_DTYPE into the wire block (bytes, len = N * ENTITY_BYTES).

    With ``validate`` the server refuses to send a record a client would refuse to read.
    """
    if records.dtype != ENTITY_DTYPE:
        raise TypeError(f"records must have ENTITY_DTYPE, got {records.dtype}")
    data = records.tobytes()
    if validate:
        check_block(data, limits)
    return data


def decode_entities(data: bytes, limits: EntityLimits = DEFAULT_ENTITY_LIMITS) -> np.ndarray:
    """Read and validate a wire block; returns a read-only (N,) ENTITY_DTYPE view of ``data``.

    Raises EntityBlockError when the length is not a multiple of ENTITY_BYTES or a record fails
    :func:`check_block`.
    """
    check_block(data, limits)
    return np.frombuffer(data, dtype=ENTITY_DTYPE)


def split_entities(records: np.ndarray, per_part: int) -> list[np.ndarray]:
    """Cut records into consecutive parts of at most ``per_part`` (one part per SNAPSHOT datagram).

    Always returns at least one part, so an empty snapshot still goes out (it carries the
    player's own state).
    """
    if per_part < 1:
        raise ValueError(f"per_part must be at least 1, got {per_part}")
    if len(records) == 0:
        return [records]
    return [records[i : i + per_part] for i in range(0, len(records), per_part)]
