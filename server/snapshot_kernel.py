"""The compiled writer of one tick's SNAPSHOT datagrams.

The server sends every client a snapshot 64 times a second; encoded one by one with msgpack, the
Python glue around ~15 small packs a datagram cost more than all the rest of the snapshot phase.
This kernel writes every datagram of a tick into one buffer in a single call, choosing each value's
MessagePack encoding exactly as the ``msgpack`` package does for the same Python value (smallest
integer form, floats as float 64, ``bin`` for the entity block), so that each datagram is byte for
byte ``protocol.encode(Snapshot(...))``; tests hold the two together.
"""

from __future__ import annotations

import sys

import numba
import numpy as np

from server.entity_block import ENTITY_BYTES, EntityFlags
from world.constants import STANCE_CROUCHING

if sys.byteorder != "little":  # pragma: no cover - every host this runs on is little-endian
    raise ImportError("server.snapshot_kernel copies floats byte by byte as a little-endian host stores them")

OWN_BOUND_BYTES = 256
"""More than the fields a datagram adds after the shared head and before its block can take: the
own state (11 items, at most 122 bytes), sequence, part, part count and the block's bin header."""

_ALIVE = int(EntityFlags.ALIVE)
_CROUCHING = int(EntityFlags.CROUCHING)
if ENTITY_BYTES != 2 + 8 * 4 + 2:  # pragma: no cover - layout consistency
    raise AssertionError("the entity record layout changed: update _put_record")


@numba.njit(cache=True, nogil=True, inline="always")
def _put_be(out: np.ndarray, o: int, v: int, n: int) -> int:  # pragma: no cover - compiled
    for k in range(n):
        out[o + k] = (v >> (8 * (n - 1 - k))) & 0xFF
    return o + n


@numba.njit(cache=True, nogil=True)
def _put_int(out: np.ndarray, o: int, v: int) -> int:  # pragma: no cover - compiled
    """msgpack's smallest form of the integer ``v``."""
    if v >= 0:
        if v < 0x80:
            out[o] = v
            return o + 1
        if v < 0x100:
            out[o] = 0xCC
            return _put_be(out, o + 1, v, 1)
        if v < 0x10000:
            out[o] = 0xCD
            return _put_be(out, o + 1, v, 2)
        if v < 0x100000000:
            out[o] = 0xCE
            return _put_be(out, o + 1, v, 4)
        out[o] = 0xCF
        return _put_be(out, o + 1, v, 8)
    if v >= -32:
        out[o] = v & 0xFF
        return o + 1
    if v >= -0x80:
        out[o] = 0xD0
        return _put_be(out, o + 1, v, 1)
    if v >= -0x8000:
        out[o] = 0xD1
        return _put_be(out, o + 1, v, 2)
    if v >= -0x80000000:
        out[o] = 0xD2
        return _put_be(out, o + 1, v, 4)
    out[o] = 0xD3
    return _put_be(out, o + 1, v, 8)


@numba.njit(cache=True, nogil=True)
def _put_float(out: np.ndarray, o: int, x: float, f64: np.ndarray, f64_bytes: np.ndarray) -> int:  # pragma: no cover - compiled
    """``x`` as msgpack's float 64 (a Python float packs so), big-endian; ``f64``: (1,) float64
    scratch, ``f64_bytes`` its bytes (the host's order, little-endian)."""
    f64[0] = x
    out[o] = 0xCB
    for k in range(8):
        out[o + 1 + k] = f64_bytes[7 - k]
    return o + 9


@numba.njit(cache=True, nogil=True)
def _put_own(
    out: np.ndarray, o: int, s: int, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray,
    health: np.ndarray, held: np.ndarray, ammo: int, reserve: int, stance: np.ndarray,
    on_ground: np.ndarray, alive: np.ndarray, f64: np.ndarray, f64_bytes: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Slot ``s``'s own state: the 11-item array of OwnState's fields (``ammo`` and ``reserve``
    those of the held weapon)."""
    out[o] = 0x9B
    o += 1
    for vec in (pos, vel):
        out[o] = 0x93
        o += 1
        for c in range(3):
            o = _put_float(out, o, vec[s, c], f64, f64_bytes)
    o = _put_float(out, o, yaw[s], f64, f64_bytes)
    o = _put_float(out, o, pitch[s], f64, f64_bytes)
    o = _put_float(out, o, np.float64(health[s]), f64, f64_bytes)
    o = _put_int(out, o, np.int64(held[s]))
    o = _put_int(out, o, np.int64(ammo))
    o = _put_int(out, o, np.int64(reserve))
    o = _put_int(out, o, np.int64(stance[s]))
    out[o] = 0xC3 if on_ground[s] else 0xC2
    out[o + 1] = 0xC3 if alive[s] else 0xC2
    return o + 2


@numba.njit(cache=True, nogil=True)
def _put_f4(out: np.ndarray, o: int, x: float, f32: np.ndarray, f32_bytes: np.ndarray) -> int:  # pragma: no cover - compiled
    """``x`` rounded to float32 (as numpy casts it), little-endian; ``f32``: (1,) float32 scratch,
    ``f32_bytes`` its bytes."""
    f32[0] = np.float32(x)
    for k in range(4):
        out[o + k] = f32_bytes[k]
    return o + 4


@numba.njit(cache=True, nogil=True)
def _put_record(
    out: np.ndarray, o: int, s: int, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray,
    health: np.ndarray, held: np.ndarray, stance: np.ndarray, alive: np.ndarray, f32: np.ndarray,
    f32_bytes: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Slot ``s``'s entity record (server.entity_block's layout, as ``make_entities`` builds it):
    flags ALIVE and CROUCHING, floats as float32, health rounded half to even and clipped to a byte."""
    out[o] = s
    out[o + 1] = (_ALIVE if alive[s] else 0) | (_CROUCHING if stance[s] == STANCE_CROUCHING else 0)
    o += 2
    for c in range(3):
        o = _put_f4(out, o, pos[s, c], f32, f32_bytes)
    for c in range(3):
        o = _put_f4(out, o, vel[s, c], f32, f32_bytes)
    o = _put_f4(out, o, yaw[s], f32, f32_bytes)
    o = _put_f4(out, o, pitch[s], f32, f32_bytes)
    out[o] = held[s]
    h = np.rint(np.float64(health[s]))
    out[o + 1] = 0 if h < 0.0 else (255 if h > 255.0 else np.uint8(h))
    return o + 2


@numba.njit(cache=True, nogil=True)
def write_snapshots(
    head: np.ndarray, viewers: np.ndarray, seqs: np.ndarray, ends: np.ndarray, rows: np.ndarray,
    extra_records: np.ndarray, per_part: int, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray,
    health: np.ndarray, held: np.ndarray, ammo: np.ndarray, reserve: np.ndarray, stance: np.ndarray,
    on_ground: np.ndarray, alive: np.ndarray, out: np.ndarray, bounds: np.ndarray, parts_of: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Write the snapshot datagrams of ``viewers`` (slots, in order) into ``out``; returns (how
    many datagrams were written, the largest one's size in bytes), datagram k being
    ``out[bounds[k]:bounds[k + 1]]`` and viewer i's ``parts_of[i]`` of them in a row; (-1, 0)
    when a viewer or a row names a slot the columns do not hold.

    Args:
        head: the bytes every datagram of the tick starts with (``protocol.snapshot_head``).
        seqs: per viewer, the last applied command sequence (negative: none yet, packed as nil).
        ends: per viewer, the end of its run in ``rows`` (runs are consecutive, from 0).
        rows: the entities to show, each viewer's in order: a player slot (its record is made from
            the columns), or C + j for record j of ``extra_records`` (R, 36) uint8 (the baits),
            C being the columns' slot count. Split into parts of at most ``per_part`` records,
            with at least one part (an empty block).
        pos, vel (C, 3); yaw, pitch, health, held, stance, on_ground, alive (C,); ammo, reserve
            (C, W) by weapon id: the world's and the weapons' columns by slot (m, m/s, deg, hit
            points, ids and counts), read as they are.
        out: large enough: per datagram len(head) + OWN_BOUND_BYTES plus 36 bytes per row
            (there are at most ``parts_bound`` datagrams).
        bounds: ``parts_bound`` + 1 entries; parts_of: one per viewer.
    """
    cap = min(pos.shape[0], held.shape[0], ammo.shape[0])
    for i in range(viewers.size):
        if not 0 <= viewers[i] < cap:
            return -1, 0
    for r in range(rows.size):
        if not 0 <= rows[r] < cap + extra_records.shape[0]:
            return -1, 0
    f64 = np.empty(1, np.float64)
    f64_bytes = f64.view(np.uint8)
    f32 = np.empty(1, np.float32)
    f32_bytes = f32.view(np.uint8)
    width = extra_records.shape[1]
    o = 0
    k = 0
    start = 0
    largest = 0
    for i in range(viewers.size):
        s = viewers[i]
        end = ends[i]
        n = end - start
        parts = max(1, (n + per_part - 1) // per_part)
        parts_of[i] = parts
        h = held[s]
        held_ammo = ammo[s, h] if h != 0 else 0
        held_reserve = reserve[s, h] if h != 0 else 0
        for p in range(parts):
            bounds[k] = o
            for j in range(head.size):
                out[o + j] = head[j]
            o += head.size
            if seqs[i] < 0:
                out[o] = 0xC0
                o += 1
            else:
                o = _put_int(out, o, seqs[i])
            o = _put_int(out, o, p)
            o = _put_int(out, o, parts)
            o = _put_own(out, o, s, pos, vel, yaw, pitch, health, held, held_ammo, held_reserve, stance, on_ground,
                         alive, f64, f64_bytes)
            a = start + p * per_part
            b = min(end, a + per_part)
            size = (b - a) * width
            if size < 0x100:
                out[o] = 0xC4
                o = _put_be(out, o + 1, size, 1)
            elif size < 0x10000:
                out[o] = 0xC5
                o = _put_be(out, o + 1, size, 2)
            else:
                out[o] = 0xC6
                o = _put_be(out, o + 1, size, 4)
            for r in range(a, b):
                row = rows[r]
                if row < cap:
                    o = _put_record(out, o, row, pos, vel, yaw, pitch, health, held, stance, alive, f32, f32_bytes)
                else:
                    for c in range(width):
                        out[o + c] = extra_records[row - cap, c]
                    o += width
            largest = max(largest, o - bounds[k])
            k += 1
        start = end
    bounds[k] = o
    return k, largest


def parts_bound(viewers: int, records: int, per_part: int) -> int:
    """At most how many datagrams ``write_snapshots`` writes for ``viewers`` snapshots showing
    ``records`` records in all: each has max(1, ceil(n / per_part)) <= 1 + n / per_part parts."""
    return viewers + records // per_part + 1
