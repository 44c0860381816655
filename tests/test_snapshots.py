"""The server's snapshot datagrams are exactly the protocol's encoding of the snapshot they stand for."""

from __future__ import annotations

import numpy as np

from physics.weapon_state import WeaponState
from server import protocol as proto
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from server.snapshots import SnapshotBuilder
from world.state import WorldState
from world.weapons import WeaponId


def _world(rng: np.random.Generator) -> tuple[WorldState, WeaponState]:
    world = WorldState()
    weapons = WeaponState(world.capacity)
    for slot in range(40):
        world.activate(slot, weapon=int(WeaponId.PISTOL), ammo=0, reserve=0)
        if slot % 7 == 3:
            continue  # connected, not spawned yet: dead, unarmed
        world.spawn(slot, (float(rng.uniform(-50, 50)), float(rng.uniform(-50, 50)), 0.0), float(rng.uniform(-180, 180)))
        weapons.spawn(slot, [int(WeaponId.RIFLE), int(WeaponId.PISTOL)], 0.0)
        world.vel[slot] = rng.normal(0.0, 3.0, 3)
        world.pitch[slot] = rng.uniform(-89, 89)
        world.stance[slot] = slot % 2
        world.on_ground[slot] = slot % 3 != 0
        world.health[slot] = rng.uniform(1, 100)
    weapons.try_fire(5, int(WeaponId.RIFLE), 0.0)
    weapons.sync_to(world)
    return world, weapons


def _expected(world: WorldState, weapons: WeaponState, slot: int, targets: list[int],
              baits: list[tuple[int, tuple[float, float, float]]], tick: int, time_s: float, seq: int) -> list[bytes]:
    """The definition: encode(Snapshot) of each part, from the world's arrays directly."""
    rows = np.array(targets, dtype=np.intp)
    flags = np.where(world.alive[rows], int(EntityFlags.ALIVE), 0) | np.where(
        world.stance[rows] == 1, int(EntityFlags.CROUCHING), 0)
    blob = make_entities(rows, flags, world.pos[rows], world.vel[rows], world.yaw[rows], world.pitch[rows],
                         weapons.weapon[rows], world.health[rows]).tobytes()
    for entity_id, centre in baits:
        blob += make_entities(np.array([entity_id]), np.array([int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)]),
                              np.array([centre]), np.zeros((1, 3)), np.zeros(1), np.zeros(1),
                              np.zeros(1, dtype=np.int64), np.full(1, 100.0)).tobytes()
    held = int(weapons.weapon[slot])
    own = proto.OwnState(
        tuple(world.pos[slot].tolist()), tuple(world.vel[slot].tolist()), float(world.yaw[slot]),
        float(world.pitch[slot]), float(world.health[slot]), held,
        int(weapons.ammo[slot, held]) if held else 0, int(weapons.reserve[slot, held]) if held else 0,
        int(world.stance[slot]), bool(world.on_ground[slot]), bool(world.alive[slot]),
    )
    per = proto.max_entities_per_snapshot() * ENTITY_BYTES
    blocks = [blob[i : i + per] for i in range(0, len(blob), per)] or [b""]
    return [
        proto.encode(proto.Snapshot(tick=tick, server_time_s=time_s, last_cmd_seq=None if seq < 0 else seq, own=own,
                                    entities=block, part=i, part_count=len(blocks)))
        for i, block in enumerate(blocks)
    ]


def test_snapshot_datagrams_are_encode_of_the_snapshot() -> None:
    rng = np.random.default_rng(3)
    world, weapons = _world(rng)
    builder = SnapshotBuilder(proto.DEFAULT_LIMITS)
    frame = builder.frame(world, weapons, tick=1234, server_time_s=19.28125)
    bait = (200, (1.5, -2.25, 1.0))
    cases = [
        (0, [1, 2, 9, 17], [], 41),  # the usual: one part
        (3, [], [], -1),  # unarmed, dead, nothing seen, no command yet: own state alone
        (5, list(range(40)), [], 7),  # more than one part holds
        (6, [0, 4], [bait], 8),  # a bait after the visible players
        (8, list(range(35)), [bait, (201, (0.0, 0.0, 0.0))], 2**32 - 1),  # baits spill into a second part
    ]
    for slot, targets, baits, seq in cases:
        got = frame.datagrams(slot, targets, baits, seq)
        assert got == _expected(world, weapons, slot, targets, baits, 1234, 19.28125, seq), slot
        decoded = [proto.decode_server(d) for d in got]
        assert all(isinstance(m, proto.Snapshot) and m.tick == 1234 for m in decoded)
