"""Per-client snapshot datagrams: the receiving player's own state plus the packed entity block."""

from __future__ import annotations

import msgpack
import numpy as np

from physics.weapon_state import WeaponState
from server import protocol as proto
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from world.state import WorldState

_BAIT_FLAGS = int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)


class SnapshotFrame:
    """What every client's snapshot of one tick is made of, gathered once for all of them: each
    slot's entity record (bytes) and own-state fields as Python values. A client's snapshot is
    then a join of its visible records and one encode per part.

    Records and own states are those of :meth:`SnapshotBuilder.build`'s definition: flags ALIVE
    and CROUCHING from the world, the held weapon from ``weapons``, health rounded to a byte.
    """

    def __init__(
        self, builder: SnapshotBuilder, world: WorldState, weapons: WeaponState, *, tick: int, server_time_s: float
    ) -> None:
        self._per_part = builder.per_part
        # Only slots up to the last active one: nothing else is ever sent or receives (a snapshot
        # shows and goes to active players only), and the rest would double the work at 64 of 128.
        active = np.flatnonzero(world.active[: min(world.capacity, weapons.capacity)])
        cap = int(active[-1]) + 1 if active.size else 0
        flags = np.where(world.alive[:cap], int(EntityFlags.ALIVE), 0) | np.where(
            world.stance[:cap] == 1, int(EntityFlags.CROUCHING), 0
        )
        held = weapons.weapon[:cap]
        blob = make_entities(
            np.arange(cap), flags, world.pos[:cap], world.vel[:cap], world.yaw[:cap], world.pitch[:cap], held,
            world.health[:cap],
        ).tobytes()
        self.records = [blob[i : i + ENTITY_BYTES] for i in range(0, len(blob), ENTITY_BYTES)]
        """Entity record (bytes) of each slot up to the last active one."""
        rows = np.arange(cap)
        hidx = held.astype(np.intp)
        has = held != 0
        self._pos = world.pos[:cap].tolist()
        self._vel = world.vel[:cap].tolist()
        self._yaw = world.yaw[:cap].tolist()
        self._pitch = world.pitch[:cap].tolist()
        self._health = world.health[:cap].tolist()
        self._held = held.tolist()
        self._ammo = np.where(has, weapons.ammo[rows, hidx], 0).tolist()
        self._reserve = np.where(has, weapons.reserve[rows, hidx], 0).tolist()
        self._stance = world.stance[:cap].tolist()
        self._on_ground = world.on_ground[:cap].tolist()
        self._alive = world.alive[:cap].tolist()
        self._baits: dict[tuple[int, tuple[float, float, float]], bytes] = {}
        self._encoder = proto.SnapshotEncoder(tick, server_time_s, builder.limits, builder.packer)

    def datagrams(
        self, slot: int, targets: list[int], baits: list[tuple[int, tuple[float, float, float]]], last_cmd_seq: int
    ) -> list[bytes]:
        """Datagrams of ``slot``'s snapshot (see :meth:`SnapshotBuilder.build`); ``targets`` in order."""
        all_records = self.records
        per = self._per_part
        if not baits and len(targets) <= per:
            # The usual snapshot: one part, no bait.
            blocks = [b"".join([all_records[t] for t in targets])]
        else:
            records = [all_records[t] for t in targets]
            for bait in baits:
                record = self._baits.get(bait)
                if record is None:
                    record = self._baits[bait] = _bait_record(*bait)
                records.append(record)
            # At least one part, so an empty snapshot still carries the player's own state.
            blocks = [b"".join(records[i : i + per]) for i in range(0, len(records), per)] or [b""]
        encoder = self._encoder
        own = encoder.own(
            self._pos[slot], self._vel[slot], self._yaw[slot], self._pitch[slot], self._health[slot], self._held[slot],
            self._ammo[slot], self._reserve[slot], self._stance[slot], self._on_ground[slot], self._alive[slot],
        )
        return encoder.datagrams(last_cmd_seq if last_cmd_seq >= 0 else None, own, blocks)


def _bait_record(entity_id: int, centre: tuple[float, float, float]) -> bytes:
    """The record of a bait target: NOT_RENDERED, at rest, full health."""
    return make_entities(
        np.array([entity_id]), np.array([_BAIT_FLAGS]), np.array([centre]), np.zeros((1, 3)), np.zeros(1),
        np.zeros(1), np.zeros(1, dtype=np.int64), np.full(1, 100.0),
    ).tobytes()


class SnapshotBuilder:
    """Encodes SNAPSHOT datagrams (split into parts when the entities do not fit one datagram)."""

    def __init__(self, limits: proto.ProtocolLimits) -> None:
        self.limits = limits
        self.per_part = proto.max_entities_per_snapshot(limits)
        self.packer = msgpack.Packer(use_bin_type=True)

    def frame(self, world: WorldState, weapons: WeaponState, *, tick: int, server_time_s: float) -> SnapshotFrame:
        """The state every snapshot of this tick is cut from (take it once per tick, after the
        simulation; it is a copy, later changes to ``world`` do not show)."""
        return SnapshotFrame(self, world, weapons, tick=tick, server_time_s=server_time_s)

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
        frame = self.frame(world, weapons, tick=tick, server_time_s=server_time_s)
        return frame.datagrams(slot, np.asarray(targets, dtype=np.intp).tolist(), baits, last_cmd_seq)
