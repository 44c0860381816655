"""Per-client snapshot datagrams: the receiving player's own state plus the packed entity block."""

from __future__ import annotations

import numpy as np

from physics.weapon_state import WeaponState
from server import protocol as proto
from server.entity_block import EntityFlags, encode_entities, make_entities, split_entities
from world.state import WorldState


class SnapshotBuilder:
    """Encodes SNAPSHOT datagrams (split into parts when the entities do not fit one datagram)."""

    def __init__(self, limits: proto.ProtocolLimits) -> None:
        self.limits = limits
        self.per_part = proto.max_entities_per_snapshot(limits)

    def build(
        self,
        world: WorldState,
        weapons: WeaponState,
        slot: int,
        targets: np.ndarray,
        *,
        baits: list[tuple[int, tuple[float, float, float]]],
        tick: int,
        server_time_s: float,
        last_cmd_seq: int,
    ) -> list[bytes]:
        """Datagrams of one client's snapshot.

        Args:
            world, weapons: current state. slot: the receiving player.
            targets: player slots this client may see (visibility-culled).
            baits: (entity id, centre m) of bait targets shown to this client, flagged NOT_RENDERED.
            tick, server_time_s (s), last_cmd_seq: header fields (-1: no command applied yet).
        """
        held = int(weapons.weapon[slot])
        own = proto.OwnState(
            pos=_vec(world.pos[slot]),
            vel=_vec(world.vel[slot]),
            yaw_deg=float(world.yaw[slot]),
            pitch_deg=float(world.pitch[slot]),
            health=float(world.health[slot]),
            weapon=held,
            ammo=int(weapons.ammo[slot, held]) if held else 0,
            reserve=int(weapons.reserve[slot, held]) if held else 0,
            stance=int(world.stance[slot]),
            on_ground=bool(world.on_ground[slot]),
            alive=bool(world.alive[slot]),
        )
        t = np.asarray(targets, dtype=np.intp)
        flags = np.where(world.alive[t], int(EntityFlags.ALIVE), 0) | np.where(
            world.stance[t] == 1, int(EntityFlags.CROUCHING), 0
        )
        records = make_entities(
            t, flags, world.pos[t], world.vel[t], world.yaw[t], world.pitch[t], weapons.weapon[t], world.health[t]
        )
        if baits:
            n = len(baits)
            bait_records = make_entities(
                np.array([b[0] for b in baits]),
                np.full(n, int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)),
                np.array([b[1] for b in baits]),
                np.zeros((n, 3)),
                np.zeros(n),
                np.zeros(n),
                np.zeros(n, dtype=np.int64),
                np.full(n, 100.0),
            )
            records = np.concatenate([records, bait_records])
        parts = split_entities(records, self.per_part)
        seq = last_cmd_seq if last_cmd_seq >= 0 else None
        return [
            proto.encode(
                proto.Snapshot(
                    tick=tick, server_time_s=server_time_s, last_cmd_seq=seq, own=own,
                    entities=encode_entities(part, validate=False), part=i, part_count=len(parts),
                ),
                self.limits,
            )
            for i, part in enumerate(parts)
        ]


def _vec(v: np.ndarray) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))
