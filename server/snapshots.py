"""Per-client snapshot datagrams: the receiving player's own state plus the packed entity block."""

from __future__ import annotations

from collections.abc import Sequence

import msgpack
import numpy as np

from physics.weapon_state import WeaponState
from server import protocol as proto
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from server.snapshot_kernel import OWN_BOUND_BYTES, parts_bound, write_snapshots
from world.state import WorldLimits, WorldState

_BAIT_FLAGS = int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)
_NO_RECORDS = np.zeros((0, ENTITY_BYTES), dtype=np.uint8)


class SnapshotFrame:
    """One tick's snapshots, written by one compiled call (:mod:`server.snapshot_kernel`) straight
    from the world's and the weapons' columns: a view, valid while they do not change (take it
    once per tick, after the simulation, and use it at once).

    Records and own states are those of :meth:`SnapshotBuilder.build`'s definition: flags ALIVE
    and CROUCHING from the world, the held weapon from ``weapons``, health rounded to a byte.
    """

    def __init__(
        self, builder: SnapshotBuilder, world: WorldState, weapons: WeaponState, *, tick: int, server_time_s: float
    ) -> None:
        self._per_part = builder.per_part
        self._limit = builder.limits.max_datagram_bytes
        self._players = min(world.capacity, weapons.capacity)
        """Rows below this are player slots; the baits' rows follow."""
        self._columns = (world.pos, world.vel, world.yaw, world.pitch, world.health, weapons.weapon, weapons.ammo,
                         weapons.reserve, world.stance, world.on_ground, world.alive)
        self._head = np.frombuffer(proto.snapshot_head(tick, server_time_s, builder.packer), dtype=np.uint8)
        self._bait_records = builder.bait_records

    def datagrams(
        self, slot: int, targets: Sequence[int] | np.ndarray, baits: list[tuple[int, tuple[float, float, float]]],
        last_cmd_seq: int,
    ) -> list[bytes]:
        """Datagrams of ``slot``'s snapshot (see :meth:`SnapshotBuilder.build`); ``targets`` in order."""
        return self.datagrams_many(
            np.array([slot], dtype=np.intp), [last_cmd_seq], np.array(targets, dtype=np.intp),
            np.array([len(targets)], dtype=np.intp), {slot: baits} if baits else None,
        )[0]

    def datagrams_many(
        self, slots: np.ndarray, last_cmd_seqs: list[int], targets: np.ndarray, ends: np.ndarray,
        baits: dict[int, list[tuple[int, tuple[float, float, float]]]] | None = None,
        *, phantoms: tuple[int, np.ndarray, np.ndarray] | None = None,
    ) -> list[list[bytes]]:
        """Datagrams of the snapshots of ``slots`` (intp), one list per slot in order: slot
        ``slots[i]`` sees players ``targets[ends[i - 1]:ends[i]]`` (intp, in order) and then its
        ``baits`` (entity id, centre m), and its last applied command is ``last_cmd_seqs[i]`` (-1:
        none). ``phantoms``: (their entity id, indices into ``slots`` of the viewers with one, their
        (M, 36) uint8 records), each record put among its viewer's players in slot order, where
        a player in that slot would be. Raises ProtocolError(TOO_LARGE) like ``encode``."""
        n = len(slots)
        if not n:
            return []
        extra = _NO_RECORDS
        # Contiguous, as the writer was compiled for: np.nonzero's columns are strided views, and a
        # new layout would compile a second specialisation inside a tick.
        rows = np.ascontiguousarray(targets, dtype=np.intp)
        ends = np.ascontiguousarray(ends, dtype=np.intp)
        if phantoms is not None and phantoms[1].size:
            rows, ends, extra = self._with_phantoms(rows, ends, *phantoms)
        if baits:
            rows, ends, bait_records = self._with_baits(slots, rows, ends, baits, first=len(extra))
            if bait_records.size:
                extra = np.ascontiguousarray(np.vstack((extra, bait_records))) if extra.size else bait_records
        per = self._per_part
        bound = parts_bound(n, rows.size, per)
        out = np.empty(bound * (self._head.size + OWN_BOUND_BYTES) + rows.size * ENTITY_BYTES, dtype=np.uint8)
        bounds = np.empty(bound + 1, dtype=np.int64)
        parts_of = np.empty(n, dtype=np.int64)
        written, largest = write_snapshots(
            self._head, slots, np.array(last_cmd_seqs, dtype=np.int64), ends, rows, extra, per, *self._columns, out,
            bounds, parts_of,
        )
        if written < 0:
            raise ValueError(f"a snapshot names a slot outside the {self._players} the frame holds")
        if largest > self._limit:
            raise proto.ProtocolError(proto.RejectReason.TOO_LARGE, f"SNAPSHOT encodes to {largest} bytes")
        cuts = bounds[: written + 1].tolist()
        data = out[: cuts[-1]].tobytes()
        datagrams = [data[cuts[k] : cuts[k + 1]] for k in range(written)]
        if written == n:
            return [[d] for d in datagrams]
        grouped = []
        k = 0
        for m in parts_of.tolist():
            grouped.append(datagrams[k : k + m])
            k += m
        return grouped

    def _with_phantoms(
        self, targets: np.ndarray, ends: np.ndarray, entity: int, idx: np.ndarray, records: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, ends, records): viewer ``idx[j]``'s phantom (row C + j) among its players'
        rows where slot ``entity`` falls in their order."""
        starts = np.concatenate(([0], ends[:-1]))
        # Players of a viewer's run below the phantom's slot: its place in the run.
        below = np.add.reduceat(np.append(targets < entity, False).astype(np.intp), starts) if targets.size else \
            np.zeros(len(ends), dtype=np.intp)
        below = np.where(starts < targets.size, below, 0)
        # reduceat gives a run that is empty the next element's value: count those as none.
        below = np.where(ends > starts, below, 0)
        at = starts[idx] + below[idx]
        place = np.arange(len(idx)) + at
        merged = np.empty(targets.size + len(idx), dtype=np.intp)
        players = np.ones(merged.size, dtype=bool)
        players[place] = False
        merged[players] = targets
        merged[place] = self._players + np.arange(len(idx))
        added = np.zeros(len(ends), dtype=np.intp)
        added[idx] = 1
        return merged, ends + np.cumsum(added), records

    def _with_baits(
        self, slots: np.ndarray, targets: np.ndarray, ends: np.ndarray,
        baits: dict[int, list[tuple[int, tuple[float, float, float]]]], *, first: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, ends, bait records): each viewer's bait rows after its players' rows; the rows
        of every live bait follow the player slots and ``first`` other extra records, in the
        order ``baits`` lists them (the same table tick after tick while the baits live, so its
        records are stacked once)."""
        viewer = {slot: i for i, slot in enumerate(slots.tolist())}
        # In viewer order: an empty run ends where the next one does, so baits of several viewers
        # can go in at one index, and there they must come in viewer order.
        mine = sorted((i, shooter) for shooter in baits if (i := viewer.get(shooter)) is not None)
        if not any(baits[shooter] for _, shooter in mine):
            return targets, ends, _NO_RECORDS
        row_of: dict[tuple[int, tuple[float, float, float]], int] = {}
        for shown in baits.values():
            for b in shown:
                row_of.setdefault(b, self._players + first + len(row_of))
        end = ends.tolist()
        added = [0] * len(end)
        at: list[int] = []
        rows: list[int] = []
        for i, shooter in mine:
            shown = baits[shooter]
            added[i] = len(shown)
            at += [end[i]] * len(shown)
            rows += [row_of[b] for b in shown]
        # np.insert(targets, at, rows) without its fixed cost: ``at`` ascends, so the k-th inserted
        # row lands at at[k] + k and the players' rows keep their order in the other places.
        place = np.arange(len(rows)) + np.array(at, dtype=np.intp)
        merged = np.empty(targets.size + len(rows), dtype=np.intp)
        players = np.ones(merged.size, dtype=bool)
        players[place] = False
        merged[players] = targets
        merged[place] = rows
        return merged, ends + np.cumsum(added), self._bait_records(list(row_of))


class SnapshotBuilder:
    """Encodes SNAPSHOT datagrams (split into parts when the entities do not fit one datagram)."""

    def __init__(self, limits: proto.ProtocolLimits) -> None:
        self.limits = limits
        self.per_part = proto.max_entities_per_snapshot(limits)
        self.packer = msgpack.Packer(use_bin_type=True)
        # A bait stays put while it lives (a few seconds): its record is built once, not per tick.
        self._bait_cache: dict[tuple[int, tuple[float, float, float]], np.ndarray] = {}
        self._bait_key: tuple[tuple[int, tuple[float, float, float]], ...] = ()
        self._bait_table = _NO_RECORDS
        # Compile (or load from numba's cache) the writer now, with a frame's own argument types,
        # never inside the first tick that sends a snapshot.
        world = WorldState(WorldLimits(max_players=1))
        world.active[0] = True
        self.frame(world, WeaponState(1), tick=0, server_time_s=0.0).datagrams(0, [0], [], -1)

    def bait_records(self, baits: list[tuple[int, tuple[float, float, float]]]) -> np.ndarray:
        """(N, 36) uint8 records of ``baits`` (entity id, centre m): NOT_RENDERED, at rest, full
        health. Remembers only the baits of the latest call, the live ones; the same list as
        last time returns the same array (the caller must not write to it)."""
        key = tuple(baits)
        if key == self._bait_key:
            return self._bait_table
        cache = self._bait_cache
        new = [b for b in baits if b not in cache]
        if new:
            n = len(new)
            made = make_entities(
                np.array([b[0] for b in new]), np.full(n, _BAIT_FLAGS), np.array([b[1] for b in new]),
                np.zeros((n, 3)), np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64), np.full(n, 100.0),
            ).view(np.uint8).reshape(n, ENTITY_BYTES)
            cache.update(zip(new, made, strict=True))
        self._bait_cache = {b: cache[b] for b in baits}
        table = np.stack([cache[b] for b in baits]) if baits else _NO_RECORDS
        self._bait_key, self._bait_table = key, table
        return table

    def frame(self, world: WorldState, weapons: WeaponState, *, tick: int, server_time_s: float) -> SnapshotFrame:
        """What every snapshot of this tick is cut from: a view of ``world`` and ``weapons``
        (take it once per tick, after the simulation, and use it before they change)."""
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
        return frame.datagrams(slot, targets, baits, last_cmd_seq)
