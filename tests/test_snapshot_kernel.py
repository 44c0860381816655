"""The compiled snapshot writer chooses every MessagePack encoding as the msgpack package does."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from server import protocol as proto
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from server.snapshot_kernel import OWN_BOUND_BYTES, parts_bound, write_snapshots

# Each integer family's edges: fixint, uint8/16/32/64, negative fixint and int8/16/32/64.
_INT_EDGES = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1,
              -1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]
_FLOATS = [0.0, -0.0, 1.5, -179.999, 1e-300, 5e-324, 1e300, float("inf"), float("-inf")]


def _write(columns: tuple[np.ndarray, ...], slots: list[int], seqs: list[int], runs: list[list[int]],
           extra: np.ndarray, per_part: int, head: bytes) -> list[bytes]:
    rows = np.array([r for run in runs for r in run], dtype=np.intp)
    ends = np.cumsum([len(run) for run in runs]).astype(np.intp)
    parts = [max(1, -(-len(run) // per_part)) for run in runs]
    bound = parts_bound(len(slots), rows.size, per_part)
    assert bound >= sum(parts)
    out = np.empty(bound * (len(head) + OWN_BOUND_BYTES) + rows.size * ENTITY_BYTES, dtype=np.uint8)
    bounds = np.empty(bound + 1, dtype=np.int64)
    parts_of = np.empty(len(slots), dtype=np.int64)
    n, largest = write_snapshots(np.frombuffer(head, dtype=np.uint8), np.array(slots, dtype=np.intp),
                                 np.array(seqs, dtype=np.int64), ends, rows, extra, per_part, *columns, out, bounds,
                                 parts_of)
    assert n == sum(parts) and parts_of.tolist() == parts
    got = [out[bounds[k] : bounds[k + 1]].tobytes() for k in range(n)]
    assert largest == max(map(len, got))
    return got


def _columns(rng: np.random.Generator, cap: int, weapons: int = 8) -> tuple[np.ndarray, ...]:
    """World and weapon columns as the frame hands them to the writer (pos, vel, yaw, pitch,
    health, held, ammo, reserve, stance, on_ground, alive), with awkward floats and halves."""
    floats = np.array(_FLOATS)
    health = rng.uniform(0.0, 255.0, cap).astype(np.float32)
    health[::5] = np.floor(health[::5]) + 0.5  # rounding half to even
    return (
        rng.choice(floats, (cap, 3)), rng.normal(0.0, 1e3, (cap, 3)), rng.choice(floats, cap),
        rng.uniform(-89.0, 89.0, cap), health, rng.integers(0, weapons, cap).astype(np.int8),
        rng.integers(0, 32768, (cap, weapons)).astype(np.int16), rng.integers(0, 32768, (cap, weapons)).astype(np.int16),
        rng.integers(0, 2, cap).astype(np.int8), rng.random(cap) < 0.5, rng.random(cap) < 0.5,
    )


def _own(columns: tuple[np.ndarray, ...], slot: int) -> list[object]:
    pos, vel, yaw, pitch, health, held, ammo, reserve, stance, on_ground, alive = columns
    h = int(held[slot])
    return [pos[slot].tolist(), vel[slot].tolist(), float(yaw[slot]), float(pitch[slot]), float(health[slot]), h,
            int(ammo[slot, h]) if h else 0, int(reserve[slot, h]) if h else 0, int(stance[slot]),
            bool(on_ground[slot]), bool(alive[slot])]


def _record(columns: tuple[np.ndarray, ...], slot: int) -> bytes:
    pos, vel, yaw, pitch, health, held, _, _, stance, _, alive = columns
    flags = (int(EntityFlags.ALIVE) if alive[slot] else 0) | (int(EntityFlags.CROUCHING) if stance[slot] == 1 else 0)
    one = slice(slot, slot + 1)
    with np.errstate(over="ignore"):  # 1e300 becomes inf as a float32, as in the writer
        return make_entities(np.array([slot]), np.array([flags]), pos[one], vel[one], yaw[one], pitch[one],
                             held[one], health[one]).tobytes()


@pytest.mark.parametrize("seed", range(4))
def test_datagrams_are_msgpack_of_the_same_values(seed: int) -> None:
    """Own states and records from the columns, baits from their table, in parts of 29."""
    rng = np.random.default_rng(seed)
    cap = 40
    columns = _columns(rng, cap)
    extra = rng.integers(0, 256, (3, ENTITY_BYTES)).astype(np.uint8)
    head = proto.snapshot_head(int(rng.integers(0, 2**32)), float(rng.uniform(0, 1e6)))
    seqs = [int(v) for v in rng.choice(np.array(_INT_EDGES[:9]), 12)] + [-1, -5]
    slots = rng.integers(0, cap, len(seqs)).tolist()
    # Empty, short (bin8), long (bin16) and several-part snapshots.
    runs = [rng.integers(0, cap + 3, int(n)).tolist() for n in rng.choice([0, 1, 7, 8, 29, 30, 75], len(seqs))]
    per_part = 29
    got = _write(columns, slots, seqs, runs, extra, per_part, head)
    want = []
    for slot, seq, run in zip(slots, seqs, runs, strict=True):
        records = [_record(columns, r) if r < cap else extra[r - cap].tobytes() for r in run]
        blocks = [b"".join(records[i : i + per_part]) for i in range(0, len(run), per_part)] or [b""]
        for i, block in enumerate(blocks):
            body = [seq if seq >= 0 else None, i, len(blocks), _own(columns, slot), block]
            want.append(head + b"".join(msgpack.packb(v, use_bin_type=True) for v in body))
    assert got == want


def test_integer_edges_encode_as_msgpack() -> None:
    cap = len(_INT_EDGES)
    rng = np.random.default_rng(9)
    columns = list(_columns(rng, cap))
    edges = np.array(_INT_EDGES, dtype=np.int64)
    # The held weapon's ammo and reserve take every edge (the writer takes any integer dtype).
    columns[5] = np.ones(cap, dtype=np.int8)
    columns[6] = np.column_stack([np.zeros(cap, np.int64), edges])
    columns[7] = np.column_stack([np.zeros(cap, np.int64), np.roll(edges, 1)])
    head = proto.snapshot_head(7, 0.5)
    seqs = [v for v in _INT_EDGES if v >= 0]
    slots = list(range(len(seqs)))
    got = _write(tuple(columns), slots, seqs, [[] for _ in seqs], np.zeros((0, ENTITY_BYTES), np.uint8), 29, head)
    for datagram, slot, seq in zip(got, slots, seqs, strict=True):
        own = _own(tuple(columns), slot)
        assert datagram == head + b"".join(msgpack.packb(v, use_bin_type=True) for v in [seq, 0, 1, own, b""])


def test_a_row_outside_the_columns_is_refused_not_read() -> None:
    rng = np.random.default_rng(2)
    columns = _columns(rng, 4)
    for slots, rows in (([4], []), ([0], [5]), ([-1], [])):
        out = np.empty(4096, dtype=np.uint8)
        n, _ = write_snapshots(np.frombuffer(proto.snapshot_head(1, 0.0), dtype=np.uint8),
                               np.array(slots, dtype=np.intp), np.zeros(1, np.int64),
                               np.array([len(rows)], dtype=np.intp), np.array(rows, dtype=np.intp),
                               np.zeros((1, ENTITY_BYTES), np.uint8), 29, *columns, out, np.empty(4, np.int64),
                               np.empty(1, np.int64))
        assert n == -1


def test_snapshot_head_starts_every_encoded_snapshot() -> None:
    own = proto.OwnState((1.5, -2.0, 0.0), (0.25, 0.0, -9.8), -179.5, 12.0, 87.0, 2, 11, 60, 0, True, True)
    for tick, t in ((0, 0.0), (9, 0.5), (2**32 - 1, 1e9 + 0.5)):
        message = proto.Snapshot(tick=tick, server_time_s=t, last_cmd_seq=None, own=own, entities=b"", part=0,
                                 part_count=1)
        assert proto.encode(message).startswith(proto.snapshot_head(tick, t))


def test_frame_refuses_a_datagram_over_the_size_limit() -> None:
    from physics.weapon_state import WeaponState
    from server.snapshots import SnapshotBuilder
    from world.state import WorldLimits, WorldState

    builder = SnapshotBuilder(proto.DEFAULT_LIMITS)
    world = WorldState(WorldLimits(max_players=64))
    world.active[:] = True
    frame = builder.frame(world, WeaponState(64), tick=1, server_time_s=0.0)
    fits = list(range(1, 1 + builder.per_part))
    assert len(frame.datagrams(0, fits, [], 5)) == 1
    builder.per_part *= 2  # as if the part size were miscounted
    frame = builder.frame(world, WeaponState(64), tick=1, server_time_s=0.0)
    with pytest.raises(proto.ProtocolError) as info:
        frame.datagrams(0, list(range(1, 1 + builder.per_part)), [], 5)
    assert info.value.reason is proto.RejectReason.TOO_LARGE


@pytest.mark.parametrize("seed", range(6))
def test_a_ticks_snapshots_at_once_are_each_snapshot_alone(seed: int) -> None:
    """Many viewers in one call, with empty runs and baits for several of them (baits of viewers
    whose runs end at the same index must still go to their own viewer)."""
    from physics.weapon_state import WeaponState
    from server.snapshots import SnapshotBuilder
    from world.state import WorldLimits, WorldState

    rng = np.random.default_rng(seed)
    cap = 40
    world = WorldState(WorldLimits(max_players=cap))
    world.active[:] = True
    world.alive[:] = rng.random(cap) < 0.8
    world.pos[:] = rng.uniform(-50.0, 50.0, (cap, 3))
    builder = SnapshotBuilder(proto.DEFAULT_LIMITS)
    frame = builder.frame(world, WeaponState(cap), tick=5, server_time_s=0.078125)
    slots = rng.permutation(cap)[:12]
    runs = [np.sort(rng.choice(cap, int(n), replace=False)) for n in rng.choice([0, 0, 3, 30, 35], 12)]
    # Listed against the viewers' order, as the server's baits come (by when they were placed).
    baits = {int(s): [(100 + 3 * k + j, (float(k), float(j), 2.15)) for j in range(int(rng.integers(1, 3)))]
             for k, s in reversed(list(enumerate(slots))) if rng.random() < 0.6}
    # Baits of players who get no snapshot this tick are in the table too, and shown to nobody.
    others = [int(s) for s in rng.permutation(cap) if s not in slots][:2]
    baits.update({s: [(90 + j, (1.0, float(j), 2.15))] for j, s in enumerate(others)})
    seqs = rng.integers(-1, 1000, 12).tolist()
    got = frame.datagrams_many(slots.astype(np.intp), seqs, np.concatenate(runs).astype(np.intp),
                               np.cumsum([len(r) for r in runs]).astype(np.intp), baits)
    one = builder.frame(world, WeaponState(cap), tick=5, server_time_s=0.078125)
    want = [one.datagrams(int(s), r.tolist(), baits.get(int(s), []), q)
            for s, r, q in zip(slots, runs, seqs, strict=True)]
    assert got == want
    # The next tick, with the same baits, reuses the stacked bait records and writes the same.
    again = builder.frame(world, WeaponState(cap), tick=5, server_time_s=0.078125)
    assert again.datagrams_many(slots.astype(np.intp), seqs, np.concatenate(runs).astype(np.intp),
                                np.cumsum([len(r) for r in runs]).astype(np.intp), baits) == want
