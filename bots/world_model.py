"""What a client knows of the world: a buffer of snapshots, the view time, entity interpolation
and client-side ray casts.

A client does not draw the newest snapshot: it renders the world ``interp_delay_s`` in the past
(Source's ``cl_interp``, 0.1 s) so that there are nearly always two snapshots around the rendered
time, and interpolates every entity linearly between them; it never extrapolates. The rendered
server time (the *view time*) is the client's estimate of the server clock minus that delay; the
estimate follows the arrival of snapshots and advances smoothly with the client's own clock in
between (see :meth:`WorldModel.view_time_at`).

A snapshot may come in several datagrams (``part`` / ``part_count``): parts are merged by tick.
Every part is usable alone, so a lost part only hides its entities at that tick: interpolation
then bridges the entity from the frame before to the next frame that has it (up to
``max_gap_s``). A frame whose parts all arrived is *complete*: an entity missing from it really
left the snapshot (culled, disconnected) and disappears when the view time reaches that frame.

Units: meters, seconds, degrees; server time on the server's clock, ``now_s`` on the client's.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np

from bots.perception import SeenEntity
from server.entity_block import ENTITY_BYTES, ENTITY_DTYPE, EntityFlags, load_floats
from server.protocol import OwnState, Snapshot
from world.constants import STANCE_CROUCHING, STANCE_STANDING
from world.geometry import MapGeometry
from world.hitbox import BONE_IDS, ray_capsule, world_capsules

log = logging.getLogger(__name__)

_ALIVE = int(EntityFlags.ALIVE)
_CROUCHING = int(EntityFlags.CROUCHING)
_NOT_RENDERED = int(EntityFlags.NOT_RENDERED)


@dataclass(frozen=True, slots=True)
class WorldModelConfig:
    """Snapshot buffering and interpolation.

    Attributes:
        interp_delay_s: the client renders this far behind its estimate of the server clock (s).
            Source's ``cl_interp`` default 0.1 s: two 64 Hz snapshots may be lost without a stall.
        buffer_s: frames older than this behind the newest are forgotten (s). Source keeps 1 s of
            lag-compensation records (``sv_maxunlag``); a backtracking cheat cannot reach further
            anyway, and interpolation only needs ``interp_delay_s``.
        max_frames: hard cap on buffered frames (128 Hz snapshots over ``buffer_s``).
        max_gap_s: an entity missing from incomplete frames is interpolated across at most this
            much server time (s); beyond it the entity is held at its last state instead.
        max_interp_speed_m_s: an entity that moved faster than this between two frames (m/s)
            teleported or respawned: it is shown at the earlier state until the later frame
            instead of sliding across the map. 20 m/s is three times the fastest legal move.
        clock_resync_s: when a snapshot's server time disagrees with the clock estimate by more
            than this (s), the estimate jumps instead of slewing (first snapshot, server hiccup).
        clock_gain: fraction of the disagreement corrected per newest snapshot (slewing), so
            network jitter does not shake the view time.
    """

    interp_delay_s: float = 0.1
    buffer_s: float = 1.2
    max_frames: int = 160
    max_gap_s: float = 0.25
    max_interp_speed_m_s: float = 20.0
    clock_resync_s: float = 0.25
    clock_gain: float = 0.1

    def __post_init__(self) -> None:
        for name in ("buffer_s", "max_gap_s", "max_interp_speed_m_s", "clock_resync_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"WorldModelConfig.{name} must be positive and finite, got {value!r}")
        if not (math.isfinite(self.interp_delay_s) and self.interp_delay_s >= 0.0):
            raise ValueError("WorldModelConfig.interp_delay_s must be >= 0")
        if not 0.0 < self.clock_gain <= 1.0:
            raise ValueError("WorldModelConfig.clock_gain must be in (0, 1]")
        if self.max_frames < 2:
            raise ValueError("WorldModelConfig.max_frames must be at least 2")


_NO_INTS = np.zeros((0, 4), dtype=np.intp)
_NO_FLOATS = np.zeros((0, 8), dtype=np.float64)
_NO_INTS.flags.writeable = False  # shared by every empty frame: never to be written
_NO_FLOATS.flags.writeable = False


# The wire record's byte columns and its 8 consecutive f4 (pos xyz, vel xyz, yaw, pitch).
_BYTE_COLUMNS = np.array([ENTITY_DTYPE.fields[k][1] for k in ("slot", "flags", "weapon", "health")], dtype=np.int64)
_FLOAT_OFFSET = ENTITY_DTYPE.fields["pos"][1]
if [ENTITY_DTYPE.fields[k][1] - _FLOAT_OFFSET for k in ("pos", "vel", "yaw", "pitch")] != [0, 12, 24, 28]:
    raise ImportError("the entity record's floats are no longer pos, vel, yaw, pitch in a row")


@numba.njit(cache=True, nogil=True)
def _unpack(data: bytes, own: int, byte_columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(ints (K, 4): slot, flags, weapon, health; floats (K, 8): pos xyz, vel xyz, yaw, pitch) of
    the records of the entity block ``data`` whose slot is not ``own``, sorted by slot."""
    raw = np.frombuffer(data, np.uint8)
    n = raw.shape[0] // ENTITY_BYTES
    slot_col = byte_columns[0]
    order = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        if raw[i * ENTITY_BYTES + slot_col] == own:
            continue
        # Insertion sort by slot (stable; a block holds a few records, its slots are distinct).
        j = k
        while j > 0 and raw[order[j - 1] * ENTITY_BYTES + slot_col] > raw[i * ENTITY_BYTES + slot_col]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
        k += 1
    ints = np.empty((k, 4), dtype=np.intp)
    floats = np.empty((k, 8))
    bits = np.empty(8, np.uint32)
    f4 = bits.view(np.float32)
    for r in range(k):
        base = order[r] * ENTITY_BYTES
        for c in range(4):
            ints[r, c] = raw[base + byte_columns[c]]
        load_floats(raw, base, bits)
        for c in range(8):
            floats[r, c] = f4[c]
    return ints, floats


def _columns(data: bytes, own_slot: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A SNAPSHOT's entity block (validated when the datagram was decoded) -> (ints (K, 4):
    slot, flags, weapon, health; floats (K, 8): pos xyz, vel xyz, yaw, pitch) of the records not
    of ``own_slot``, sorted by slot. Interpolation is then one kernel call on the floats."""
    if not data:
        return _NO_INTS, _NO_FLOATS
    ints, floats = _unpack(data, -1 if own_slot is None else own_slot, _BYTE_COLUMNS)
    return (ints, floats) if len(ints) else (_NO_INTS, _NO_FLOATS)


@dataclass(slots=True)
class Frame:
    """One server tick as received so far (mutable while its parts arrive).

    Attributes:
        tick, server_time_s (s), last_cmd_seq: from the first part received.
        own: the receiver's authoritative state (first part received).
        part_count: datagrams of this snapshot; parts: indices received.
        ints: (K, 4) slot, flags, weapon, health of every entity received (own slot removed),
            sorted by slot; floats: (K, 8) their pos (m), vel (m/s), yaw, pitch (deg).
    """

    tick: int
    server_time_s: float
    last_cmd_seq: int | None
    own: OwnState
    part_count: int
    parts: set[int] = field(default_factory=set)
    ints: np.ndarray = field(default_factory=lambda: _NO_INTS)
    floats: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    slot_key: bytes = b""
    """The slots' bytes: two frames list the same entities exactly when their keys are equal
    (compared at every interpolation, built once per datagram)."""

    @property
    def complete(self) -> bool:
        """Every part arrived: an entity absent from the frame is absent from the tick."""
        return len(self.parts) >= self.part_count

    @property
    def slots(self) -> np.ndarray:
        """(K,) slots of the entities (sorted)."""
        return self.ints[:, 0]

    def view(self) -> EntityView:
        """The frame's entities as they are (no interpolation)."""
        return _view(self.ints, self.floats)


class SnapshotUpdate(NamedTuple):
    """What adding one SNAPSHOT datagram did.

    new_tick: the first part of a tick not buffered before. newest: that tick is now the newest
    (its ``own`` state is the freshest authoritative state). duplicate: the part was already
    buffered. stale: older than the buffer; dropped.
    """

    new_tick: bool
    newest: bool
    duplicate: bool
    stale: bool


# The outcomes of a first part (immutable, shared): every snapshot datagram returns one.
_NEW_NEWEST = SnapshotUpdate(True, True, False, False)
_NEW = SnapshotUpdate(True, False, False, False)


@dataclass(frozen=True, slots=True)
class EntityView:
    """Entities at one view time, structure of arrays sorted by slot.

    Attributes: slot (K,) int; flags (K,) EntityFlags ints; pos (K, 3) feet (m); vel (K, 3)
    (m/s); yaw, pitch (K,) (deg); weapon (K,) ids; health (K,) hit points.
    """

    slot: np.ndarray
    flags: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    yaw: np.ndarray
    pitch: np.ndarray
    weapon: np.ndarray
    health: np.ndarray

    @classmethod
    def from_rows(cls, ints: np.ndarray, floats: np.ndarray) -> EntityView:
        """The view of columns as :meth:`WorldModel.interpolate_rows` returns them."""
        return _view(ints, floats)

    def __len__(self) -> int:
        return int(self.slot.shape[0])

    @property
    def alive(self) -> np.ndarray:
        """(K,) bool."""
        return (self.flags & _ALIVE) != 0

    @property
    def rendered(self) -> np.ndarray:
        """(K,) bool: False for bait targets (NOT_RENDERED), which a human never sees."""
        return (self.flags & _NOT_RENDERED) == 0

    @property
    def stance(self) -> np.ndarray:
        """(K,) 0 standing / 1 crouching."""
        return np.where((self.flags & _CROUCHING) != 0, STANCE_CROUCHING, STANCE_STANDING)

    def seen(self) -> tuple[SeenEntity, ...]:
        """The entities as the brain's records."""
        ints = zip(self.slot.tolist(), self.flags.tolist(), self.weapon.tolist(), self.health.tolist())
        floats = (p + v + [y, q] for p, v, y, q in zip(self.pos.tolist(), self.vel.tolist(), self.yaw.tolist(),
                                                     self.pitch.tolist()))
        return _seen(ints, floats)


def seen_rows(ints: np.ndarray, floats: np.ndarray) -> tuple[SeenEntity, ...]:
    """``EntityView.seen()`` of a view's columns (as :meth:`WorldModel.interpolate_rows` returns
    them) without building the view."""
    if not ints.shape[0]:
        return ()  # the usual case: fewer than one entity per tick on average
    return _seen(ints.tolist(), floats.tolist())


def _seen(ints: Iterable[Sequence[int]], floats: Iterable[Sequence[float]]) -> tuple[SeenEntity, ...]:
    """SeenEntity records of rows (slot, flags, weapon, health) and (pos xyz, vel xyz, yaw, pitch)."""
    return tuple(
        SeenEntity(slot, (x, y, z), (vx, vy, vz), yaw, pitch, bool(f & _CROUCHING), bool(f & _ALIVE), weapon, health,
                   not f & _NOT_RENDERED)
        for (slot, f, weapon, health), (x, y, z, vx, vy, vz, yaw, pitch) in zip(ints, floats)
    )


class ShotClaim(NamedTuple):
    """The client's own hit detection for one ray.

    victim: slot hit, or None. point: where the ray stopped (m): the hit on the victim, else the
    first wall, else the end of the range. bone: ``world.hitbox.Bone`` id, 0 on a miss.
    distance_m: from the origin to ``point`` (m).
    """

    victim: int | None
    point: tuple[float, float, float]
    bone: int
    distance_m: float


@numba.njit(cache=True, nogil=True)
def _interpolated(
    fa: np.ndarray, fb: np.ndarray, ta: float, tb: float, vt: float, max_speed: float
) -> np.ndarray:  # pragma: no cover - compiled
    """Rows of (pos, vel, yaw, pitch) from ``fa`` (server time ``ta``) towards ``fb`` (``tb``) at
    view time ``vt``: linear, the fraction clamped to [0, 1], yaw the short way round and wrapped
    into [-180, 180) only where it left it (in-range values stay exact). A row that moved faster
    than ``max_speed`` (m/s) teleported or respawned: it holds ``fa``. A fraction of 0 returns
    ``fa`` exactly."""
    n = fa.shape[0]
    out = np.empty((n, 8))
    span = tb - ta
    frac = 0.0
    if span > 0.0:
        x = (vt - ta) / span
        # Python's max(x, 0.0) then min(., 1.0), spelled out: on a tie they keep x.
        frac = 0.0 if 0.0 > x else x  # noqa: FURB136
        frac = 1.0 if 1.0 < frac else frac  # noqa: FURB136
    limit = (max_speed * span) * (max_speed * span)
    for i in range(n):
        f = frac
        dx, dy, dz = fb[i, 0] - fa[i, 0], fb[i, 1] - fa[i, 1], fb[i, 2] - fa[i, 2]
        # numpy's einsum adds the squares in this order; the order only matters at a tie.
        if (dx * dx + dz * dz) + dy * dy > limit:
            f = 0.0
        for j in range(8):
            out[i, j] = fa[i, j] + (fb[i, j] - fa[i, j]) * f
        turn = fb[i, 6] - fa[i, 6]
        if not (turn >= -180.0 and turn < 180.0):
            turn = (turn + 180.0) % 360.0 - 180.0
        yaw = fa[i, 6] + turn * f
        if not (yaw >= -180.0 and yaw < 180.0):
            yaw = (yaw + 180.0) % 360.0 - 180.0
        out[i, 6] = yaw
    return out


def _view(ints: np.ndarray, floats: np.ndarray) -> EntityView:
    if ints is _NO_INTS:
        return _EMPTY_VIEW
    return EntityView(
        slot=ints[:, 0], flags=ints[:, 1], pos=floats[:, 0:3], vel=floats[:, 3:6], yaw=floats[:, 6],
        pitch=floats[:, 7], weapon=ints[:, 2], health=ints[:, 3],
    )


# What every frame without entities shows (its arrays are read-only, like the frame's).
_EMPTY_VIEW = EntityView(
    slot=_NO_INTS[:, 0], flags=_NO_INTS[:, 1], pos=_NO_FLOATS[:, 0:3], vel=_NO_FLOATS[:, 3:6], yaw=_NO_FLOATS[:, 6],
    pitch=_NO_FLOATS[:, 7], weapon=_NO_INTS[:, 2], health=_NO_INTS[:, 3],
)


def _assemble(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return _NO_INTS, _NO_FLOATS
    if len(parts) == 1:
        return parts[0]
    ints = np.concatenate([p[0] for p in parts])
    floats = np.concatenate([p[1] for p in parts])
    order = np.argsort(ints[:, 0], kind="stable")
    return ints[order], floats[order]


# Compile (or load from numba's cache) the kernels now, not at a bot's first snapshot.
_columns(bytes(ENTITY_BYTES), None)
_interpolated(np.zeros((1, 8)), np.zeros((1, 8)), 0.0, 1.0, 0.5, 1.0)


class WorldModel:
    """Snapshot buffer, server-clock estimate, view time and interpolation of one client.

    Args:
        config: buffering and interpolation constants.
        own_slot: the receiving player's slot; its records (if a server sent any) are dropped.
    """

    def __init__(self, config: WorldModelConfig | None = None, own_slot: int | None = None) -> None:
        self.config = config or WorldModelConfig()
        self.own_slot = own_slot
        self._frames: list[Frame] = []
        self._times: list[float] = []
        self._ticks: dict[int, Frame] = {}
        self._newest_tick: int | None = None
        self._offset_s: float | None = None
        self._view_s: float | None = None

    # ---------------------------------------------------------------- buffer

    @property
    def frames(self) -> tuple[Frame, ...]:
        """Buffered frames, oldest first (by server time)."""
        return tuple(self._frames)

    @property
    def newest(self) -> Frame | None:
        """The frame of the highest tick received, or None."""
        return None if self._newest_tick is None else self._ticks.get(self._newest_tick)

    def frame(self, tick: int) -> Frame | None:
        """The buffered frame of ``tick``, or None."""
        return self._ticks.get(tick)

    def add_snapshot(self, snap: Snapshot, now_s: float) -> SnapshotUpdate:
        """Merge one SNAPSHOT datagram (already decoded and validated) received at ``now_s`` (s)."""
        frame = self._ticks.get(snap.tick)
        ints, floats = _columns(snap.entities, self.own_slot)
        if frame is not None:
            if snap.part in frame.parts:
                return SnapshotUpdate(False, False, True, False)
            frame.parts.add(snap.part)
            if len(ints):
                # A slot is in one part only; should a server repeat it, the first copy wins.
                new = ~np.isin(ints[:, 0], frame.slots)
                ints, floats = ints[new], floats[new]
                ints = np.concatenate([frame.ints, ints])
                floats = np.concatenate([frame.floats, floats])
                order = np.argsort(ints[:, 0], kind="stable")
                frame.ints, frame.floats = ints[order], floats[order]
                frame.slot_key = frame.ints[:, 0].tobytes()
            return SnapshotUpdate(False, False, False, False)
        t = snap.server_time_s
        times = self._times
        if times and t < times[0]:
            return SnapshotUpdate(False, False, False, True)
        # Most snapshots carry no entity: their slot key is the empty one, without a numpy call.
        key = ints[:, 0].tobytes() if ints is not _NO_INTS else b""
        frame = Frame(snap.tick, t, snap.last_cmd_seq, snap.own, snap.part_count, {snap.part}, ints, floats, key)
        if times and t < times[-1]:
            at = bisect.bisect_right(times, t)
            self._frames.insert(at, frame)
            times.insert(at, t)
        else:
            # In order (nearly always): bisect_right would give the end.
            self._frames.append(frame)
            times.append(t)
        self._ticks[snap.tick] = frame
        newest = self._newest_tick is None or snap.tick > self._newest_tick
        if newest:
            self._newest_tick = snap.tick
            self.observe_server_time(snap.server_time_s, now_s)
        self._prune()
        return _NEW_NEWEST if newest else _NEW

    def _prune(self) -> None:
        cfg = self.config
        times = self._times
        oldest_kept = times[-1] - cfg.buffer_s
        n = len(times)
        drop = 0
        while drop < n - 2 and (times[drop] < oldest_kept or n - drop > cfg.max_frames):
            drop += 1
        if drop:
            for f in self._frames[:drop]:
                del self._ticks[f.tick]
            del self._frames[:drop]
            del times[:drop]

    # ---------------------------------------------------------------- clock

    def observe_server_time(self, server_time_s: float, now_s: float) -> None:
        """A server clock reading (s) that arrived at client time ``now_s`` (s): ACCEPT, or the
        newest snapshot. Jumps on the first reading or a large disagreement, else slews."""
        sample = server_time_s - now_s
        off = self._offset_s
        if off is None or abs(sample - off) > self.config.clock_resync_s:
            self._offset_s = sample
        else:
            self._offset_s = off + self.config.clock_gain * (sample - off)

    def server_time_at(self, now_s: float) -> float | None:
        """Estimated server clock (s) at client time ``now_s``; None before any reading."""
        return None if self._offset_s is None else now_s + self._offset_s

    def view_time_at(self, now_s: float) -> float | None:
        """The server time (s) rendered at client time ``now_s``: estimate minus the interpolation
        delay, never negative. None before any clock reading."""
        t = self.server_time_at(now_s)
        return None if t is None else max(0.0, t - self.config.interp_delay_s)

    def advance_view_time(self, now_s: float) -> float | None:
        """The view time for this client tick: :meth:`view_time_at`, but never going backwards
        (a clock correction slows the view down instead of replaying the past)."""
        off = self._offset_s
        if off is None:
            return self._view_s
        # view_time_at(now_s), inlined (every client tick); max(0.0, x) as a conditional.
        t = now_s + off - self.config.interp_delay_s
        t = t if t > 0.0 else 0.0  # noqa: FURB136
        view = self._view_s
        if view is not None and t < view:
            return view
        self._view_s = t
        return t

    # ---------------------------------------------------------------- interpolation

    def interpolate(self, view_time_s: float) -> EntityView:
        """Entities at server time ``view_time_s`` (s): linear between the frames around it (exact
        at a frame's time), held at the last state after the newest frame, never extrapolated.
        Before the oldest frame the oldest frame is shown."""
        return _view(*self.interpolate_rows(view_time_s))

    def interpolate_rows(self, view_time_s: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`interpolate` as columns: (ints (K, 4) slot, flags, weapon, health; floats (K, 8)
        pos, vel, yaw, pitch), sorted by slot. They may be a frame's own arrays: never write to them."""
        frames = self._frames
        if not frames:
            return _NO_INTS, _NO_FLOATS
        i = bisect.bisect_right(self._times, view_time_s) - 1
        if i < 0:
            i, view_time_s = 0, self._times[0]
        a = frames[i]
        b = frames[i + 1] if i + 1 < len(frames) else None
        if b is None:
            parts = [(a.ints, a.floats)]
        elif a.slot_key == b.slot_key and a.complete and b.complete:
            # The usual case: the same entities in both frames, one kernel call.
            return a.ints, self._interpolated(a.floats, b.floats, a.server_time_s, b.server_time_s, view_time_s)
        else:
            in_b = np.isin(a.slots, b.slots)
            rows_b = np.searchsorted(b.slots, a.slots[in_b])
            fa, fb = a.floats[in_b], b.floats[rows_b]
            parts = [(a.ints[in_b], self._interpolated(fa, fb, a.server_time_s, b.server_time_s, view_time_s))]
            if not in_b.all():
                ints, floats = a.ints[~in_b], a.floats[~in_b]
                if b.complete:
                    # Gone from the next complete tick: shown as last seen until then.
                    parts.append((ints, floats))
                else:
                    parts.extend(self._bridge(ints, floats, a.server_time_s, i + 2, view_time_s))
        if not a.complete:
            parts.extend(self._from_earlier(a, i, view_time_s))
        return _assemble(parts)

    def _interpolated(self, fa: np.ndarray, fb: np.ndarray, ta: float, tb: float, vt: float) -> np.ndarray:
        """Rows of ``fa`` (server time ``ta``) interpolated towards ``fb`` (``tb``) at ``vt``; rows
        that moved faster than ``max_interp_speed_m_s`` hold ``fa``."""
        if not len(fa):
            return fa
        return _interpolated(fa, fb, ta, tb, vt, self.config.max_interp_speed_m_s)

    def _bridge(
        self, ints: np.ndarray, floats: np.ndarray, ta: float, start: int, vt: float
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Entities last seen at server time ``ta`` and missing from the incomplete frame(s) after
        it: interpolate each towards the first frame from index ``start`` on that has it, within
        ``max_gap_s`` of ``ta`` and before any complete frame lacking it; hold the rest."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for j in range(start, len(self._frames)):
            if not len(ints):
                break
            f = self._frames[j]
            if f.server_time_s - ta > self.config.max_gap_s:
                break
            found = np.isin(ints[:, 0], f.slots)
            if found.any():
                fa = floats[found]
                fb = f.floats[np.searchsorted(f.slots, ints[found, 0])]
                out.append((ints[found], self._interpolated(fa, fb, ta, f.server_time_s, vt)))
                ints, floats = ints[~found], floats[~found]
            if f.complete:
                # The rest left the snapshot at this (later) tick: held as last seen until then.
                break
        out.append((ints, floats))
        return out

    def _from_earlier(self, a: Frame, i: int, vt: float) -> list[tuple[np.ndarray, np.ndarray]]:
        """Entities absent from the incomplete frame ``a`` (index ``i``) because a part was lost:
        their latest state in an earlier frame (within ``max_gap_s``, and not before a complete
        frame, which lists everything of its tick), bridged forward with :meth:`_bridge`."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        known = set(a.slots.tolist())
        for k in range(i - 1, -1, -1):
            f = self._frames[k]
            if a.server_time_s - f.server_time_s > self.config.max_gap_s:
                break
            take = np.fromiter((s not in known for s in f.slots.tolist()), dtype=bool, count=len(f.ints))
            if take.any():
                ints, floats = f.ints[take], f.floats[take]
                known.update(ints[:, 0].tolist())
                out.extend(self._bridge(ints, floats, f.server_time_s, i + 1, vt))
            if f.complete:
                break
        return out

    # ---------------------------------------------------------------- client-side hit detection

    @staticmethod
    def cast_shot(
        origin: np.ndarray,
        direction: np.ndarray,
        max_range_m: float,
        view: EntityView,
        geometry: MapGeometry,
        include_hidden: bool = False,
    ) -> ShotClaim:
        """The client's own hit detection (SA-MP style): the ray from ``origin`` (m) along
        ``direction`` against the bone capsules of the rendered, alive entities of ``view`` and
        the walls, up to ``max_range_m`` (m). Bait targets (not rendered) neither take nor stop
        the ray, as in a real client, unless ``include_hidden`` (a cheat reading raw snapshots)."""
        o = np.asarray(origin, dtype=np.float64)
        d = np.asarray(direction, dtype=np.float64)
        d = d / np.linalg.norm(d)
        best_t = math.inf
        victim: int | None = None
        bone = 0
        usable = view.alive & (view.rendered | include_hidden)
        if usable.any():
            rows = np.flatnonzero(usable)
            a, b, r = world_capsules(view.pos[rows], view.yaw[rows], view.stance[rows])
            t = ray_capsule(o, d, a, b, r)  # (M, bones)
            flat = int(np.argmin(t))
            m, k = divmod(flat, t.shape[1])
            if math.isfinite(float(t[m, k])) and float(t[m, k]) <= max_range_m:
                best_t = float(t[m, k])
                victim = int(view.slot[rows[m]])
                bone = int(BONE_IDS[k])
        limit = best_t if victim is not None else max_range_m
        wall = float(geometry.first_wall_hit(o[None, :], d[None, :], limit)[0])
        if math.isfinite(wall) and wall <= limit and (victim is None or wall < best_t):
            victim, bone, best_t = None, 0, wall
        elif victim is None:
            best_t = max_range_m
        p = o + d * best_t
        return ShotClaim(victim, (float(p[0]), float(p[1]), float(p[2])), bone, best_t)

