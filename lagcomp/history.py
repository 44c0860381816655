"""Per-tick history of every player slot, and rewinding it to past times (REFERENCES section 7).

A preallocated ring buffer holds one record per tick: the tick's server time and, per player
slot, position, velocity, view angles, stance, alive, active and generation. Rewinding a time
finds the two records around it and interpolates linearly between them (yaw along the shortest
arc), with Source's rules:

* never extrapolate: a time newer than the newest record gets the newest record;
* a time older than the oldest record is clamped to the oldest record and flagged ``clamped``;
* never interpolate across a discontinuity: a generation change (teleport, respawn, slot reuse),
  a dead or inactive record, or a horizontal jump longer than ``teleport_jump_m``. The older
  record of the pair is used as is (the state last known at or before the time);
* a player dead or inactive in the record used is not hittable.

Interpolation deltas are computed once per record when the next record arrives (not per shot),
zeroed across discontinuities, so a rewind is one gather plus one multiply-add per value:
``v(t) = v[k] + f * delta[k]``. At a tick boundary f is exactly 0, so rewinding to a record's
own time returns that record bit for bit.

Units: seconds, meters, meters per second, degrees.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from lagcomp.config import HistoryConfig
from world.state import WorldLimits, WorldState

log = logging.getLogger(__name__)


class HistoryError(ValueError):
    """A record or a rewind request was refused (time not increasing, non-finite, empty history...)."""


@dataclass(frozen=True, slots=True)
class Bracket:
    """Where each requested time falls in the history.

    Attributes:
        ring: (S,) ring index of the record used as the base: the newest record at or before the
            time (the oldest record when the time is older than the history).
        frac: (S,) interpolation fraction in [0, 1) towards the following record (0 on a clamp,
            at or after the newest record, or exactly on a record's time).
        clamped: (S,) the time was older than the oldest record.
    """

    ring: np.ndarray
    frac: np.ndarray
    clamped: np.ndarray


@dataclass(frozen=True, slots=True)
class Rewound:
    """Player state at S times for M slots, structure of arrays with shape (S, M).

    Attributes:
        times_s: (S,) the requested times (s). slots: (M,) the player slots.
        pos: (S,M,3) feet position (m). vel: (S,M,3) velocity (m/s).
        yaw: (S,M) deg in [-180, 180). pitch: (S,M) deg. stance: (S,M) int8 (of the base record).
        alive: (S,M) hittable: alive and active in the record used.
        generation: (S,M) uint32 generation of the record used.
        clamped: (S,) the time was older than the history; the oldest record was used.
    """

    times_s: np.ndarray
    slots: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    yaw: np.ndarray
    pitch: np.ndarray
    stance: np.ndarray
    alive: np.ndarray
    generation: np.ndarray
    clamped: np.ndarray


@dataclass(frozen=True, slots=True)
class PairState:
    """Rewound state of P (time, slot) pairs, each array with leading shape P (same fields as Rewound)."""

    pos: np.ndarray
    vel: np.ndarray
    yaw: np.ndarray
    pitch: np.ndarray
    stance: np.ndarray
    alive: np.ndarray
    generation: np.ndarray


RING_X, RING_Y, RING_Z, RING_VX, RING_VY, RING_VZ, RING_YAW, RING_PITCH = range(8)
"""Rows of :attr:`RingView.f`: feet (m), velocity (m/s), yaw and pitch (deg) of each record."""
RING_DELTA = 8
"""Row offset of each value's delta towards the next record (zero across discontinuities and for
the newest record): row ``RING_X + RING_DELTA`` is dx."""


class RingView(NamedTuple):
    """The ring buffer's storage as :meth:`TickHistory.ring_view` hands it out.

    Attributes:
        head: ring index the next record goes to. count: records kept (the oldest is at
            ``(head - count) % C``).
        time: (C,) record times (s). f: (C, 16, N) the float components by ``RING_*`` row.
        stance: (C, N) int8. hittable: (C, N) alive and active. generation: (C, N) uint32.
    """

    head: int
    count: int
    time: np.ndarray
    f: np.ndarray
    stance: np.ndarray
    hittable: np.ndarray
    generation: np.ndarray


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One stored tick, read-only views into the ring (valid until the ring slot is overwritten).

    Attributes:
        tick, time_s: the tick number and its server time (s).
        pos, vel: (N,3) m and m/s. yaw, pitch: (N,) deg. stance: (N,) int8.
        alive, active: (N,) bool. generation: (N,) uint32.
    """

    tick: int
    time_s: float
    pos: np.ndarray
    vel: np.ndarray
    yaw: np.ndarray
    pitch: np.ndarray
    stance: np.ndarray
    alive: np.ndarray
    active: np.ndarray
    generation: np.ndarray


def _rewrap(yaw: np.ndarray) -> np.ndarray:
    # Only values pushed out of [-180, 180) by the interpolation are touched, so an uninterpolated
    # yaw comes back bit for bit (a blanket modulo would perturb its last bits).
    yaw = np.where(yaw >= 180.0, yaw - 360.0, yaw)
    return np.where(yaw < -180.0, yaw + 360.0, yaw)


class TickHistory:
    """Ring buffer of per-tick player records with vectorised rewind.

    Args:
        config: ring length and the teleport threshold.
        max_players: number of player slots N (must match the WorldState recorded).
    """

    def __init__(self, config: HistoryConfig, max_players: int) -> None:
        if max_players < 1:
            raise HistoryError(f"max_players must be at least 1, got {max_players}")
        self.config = config
        c = config.capacity
        n = max_players
        self._n = n
        self._cap = c
        self._count = 0
        self._head = 0  # ring index the next record goes to
        self._time = np.zeros(c, dtype=np.float64)
        self._tick = np.zeros(c, dtype=np.int64)
        # Every float component and its delta are rows of one (C, 16, N) block (``RING_*``), each
        # (C, N) row a view, so a (time, slot) gather reads one value per row and a compiled
        # reader takes one array, not sixteen (each array argument costs a kernel call ~1 us
        # on a tick's cold caches).
        self._f = np.zeros((c, 2 * RING_DELTA, n))
        (self._x, self._y, self._z, self._vx, self._vy, self._vz, self._yaw, self._pitch,
         self._dx, self._dy, self._dz, self._dvx, self._dvy, self._dvz, self._dyaw, self._dpitch) = (
            self._f[:, r, :] for r in range(2 * RING_DELTA))
        self._stance = np.zeros((c, n), dtype=np.int8)
        self._alive = np.zeros((c, n), dtype=bool)
        self._active = np.zeros((c, n), dtype=bool)
        self._hittable = np.zeros((c, n), dtype=bool)
        self._gen = np.zeros((c, n), dtype=np.uint32)

    # ------------------------------------------------------------------ introspection
    @property
    def capacity(self) -> int:
        """Number of records the ring holds."""
        return self._cap

    @property
    def max_players(self) -> int:
        """Number of player slots N."""
        return self._n

    def __len__(self) -> int:
        return self._count

    def _ring_of(self, k: np.ndarray | int) -> np.ndarray | int:
        """Ring index of the k-th record in chronological order (0 = oldest)."""
        return (self._head - self._count + k) % self._cap

    def _require_records(self) -> None:
        if self._count == 0:
            raise HistoryError("the history is empty: record at least one tick before rewinding")

    @property
    def oldest_time_s(self) -> float:
        """Time (s) of the oldest record kept."""
        self._require_records()
        return float(self._time[self._ring_of(0)])

    @property
    def newest_time_s(self) -> float:
        """Time (s) of the newest record."""
        self._require_records()
        return float(self._time[self._ring_of(self._count - 1)])

    @property
    def newest_tick(self) -> int:
        """Tick number of the newest record."""
        self._require_records()
        return int(self._tick[self._ring_of(self._count - 1)])

    def times_s(self) -> np.ndarray:
        """(K,) times (s) of the records kept, oldest first (a copy)."""
        return self._time[self._ring_of(np.arange(self._count))]

    def record_at(self, k: int) -> HistoryRecord:
        """The k-th record in chronological order (0 = oldest, -1 = newest), as read-only views."""
        self._require_records()
        if not -self._count <= k < self._count:
            raise IndexError(f"record {k} out of range ({self._count} records)")
        i = int(self._ring_of(k % self._count))

        def ro(a: np.ndarray) -> np.ndarray:
            v = a[i]
            v.flags.writeable = False
            return v

        pos = np.stack([self._x[i], self._y[i], self._z[i]], axis=1)
        vel = np.stack([self._vx[i], self._vy[i], self._vz[i]], axis=1)
        pos.flags.writeable = False
        vel.flags.writeable = False
        return HistoryRecord(
            tick=int(self._tick[i]), time_s=float(self._time[i]), pos=pos, vel=vel,
            yaw=ro(self._yaw), pitch=ro(self._pitch), stance=ro(self._stance),
            alive=ro(self._alive), active=ro(self._active), generation=ro(self._gen),
        )

    # ------------------------------------------------------------------ recording
    def reset(self) -> None:
        """Forget every record (map change, match restart)."""
        self._count = 0
        self._head = 0

    def record(self, tick: int, time_s: float, state: WorldState) -> None:
        """Append the state of every slot at ``time_s`` (s); overwrites the oldest record when full.

        Raises HistoryError when the slot count differs, the time is not finite, or it does not
        increase strictly (interpolation needs strictly ordered, distinct times).
        """
        if state.capacity != self._n:
            raise HistoryError(f"state has {state.capacity} slots, history has {self._n}")
        t = float(time_s)
        if not np.isfinite(t):
            raise HistoryError(f"record time is not finite: {time_s!r}")
        if self._count and t <= self._time[self._ring_of(self._count - 1)]:
            raise HistoryError(f"record time {t} s does not increase (newest is {self.newest_time_s} s)")
        i = self._head
        self._time[i] = t
        self._tick[i] = int(tick)
        j = int(self._ring_of(self._count - 1)) if self._count else -1
        jump = float(self.config.teleport_jump_m)
        _record_kernel(i, j, self._f, self._stance, self._alive, self._active, self._hittable, self._gen, state.pos,
                       state.vel, state.yaw, state.pitch, state.stance, state.alive, state.active, state.generation,
                       jump * jump)
        self._head = (i + 1) % self._cap
        self._count = min(self._count + 1, self._cap)

    # ------------------------------------------------------------------ rewinding
    def bracket(self, times_s: np.ndarray) -> Bracket:
        """Locate (S,) times (s) in the history: base record, fraction and clamp flag per time."""
        self._require_records()
        t = np.ascontiguousarray(np.asarray(times_s, dtype=np.float64).reshape(-1))
        if not np.all(np.isfinite(t)):
            raise HistoryError("rewind times must be finite")
        ring = np.empty(t.size, dtype=np.intp)
        frac = np.empty(t.size)
        clamped = np.empty(t.size, dtype=np.bool_)
        bracket_kernel(t, self._time, self._head, self._count, self._cap, ring, frac, clamped)
        return Bracket(ring=ring, frac=frac, clamped=clamped)

    def feet(self, times_s: list[float], slots: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Feet (m, (P, 3)) and hittable flag ((P,) bool) of (time (s), slot) pairs: the ``pos`` and
        ``alive`` of :meth:`bracket` then :meth:`pairs`, bit for bit, in one compiled call (the
        server rewinds a shot's claimed victim with it; the two calls cost ~20 numpy calls).
        Raises HistoryError when the history is empty or a time is not finite."""
        self._require_records()
        if not all(map(math.isfinite, times_s)):
            raise HistoryError("rewind times must be finite")
        n = len(times_s)
        pos = np.empty((n, 3))
        alive = np.empty(n, dtype=np.bool_)
        _feet_kernel(np.array(times_s, dtype=np.float64), np.array(slots, dtype=np.intp), self._time, self._head,
                     self._count, self._f, self._hittable, pos, alive)
        return pos, alive

    def ring_view(self) -> RingView:
        """The ring itself, for compiled readers (hit registration rewinds inside its kernel):
        read it, never write it; valid until the next :meth:`record` or :meth:`reset`. Raises
        HistoryError when the history is empty."""
        self._require_records()
        return RingView(self._head, self._count, self._time, self._f, self._stance, self._hittable, self._gen)

    def pairs(self, ring: np.ndarray, frac: np.ndarray, slot: np.ndarray) -> PairState:
        """Rewound state of (time, slot) pairs; ``ring``, ``frac`` and ``slot`` broadcast together."""
        ring, frac, slot = np.asarray(ring), np.asarray(frac), np.asarray(slot)
        if ring.ndim == frac.ndim == slot.ndim == 1 and ring.shape == frac.shape == slot.shape:
            # Hit registration's case, a few pairs: one compiled pass instead of ~25 numpy calls.
            return self._pairs_flat(ring, frac, slot)
        ring, frac, slot = np.broadcast_arrays(ring, frac, slot)
        idx = (ring, slot)
        pos = np.stack(
            [
                self._x[idx] + frac * self._dx[idx],
                self._y[idx] + frac * self._dy[idx],
                self._z[idx] + frac * self._dz[idx],
            ],
            axis=-1,
        )
        vel = np.stack(
            [
                self._vx[idx] + frac * self._dvx[idx],
                self._vy[idx] + frac * self._dvy[idx],
                self._vz[idx] + frac * self._dvz[idx],
            ],
            axis=-1,
        )
        return PairState(
            pos=pos,
            vel=vel,
            yaw=_rewrap(self._yaw[idx] + frac * self._dyaw[idx]),
            pitch=self._pitch[idx] + frac * self._dpitch[idx],
            stance=self._stance[idx],
            alive=self._hittable[idx],
            generation=self._gen[idx],
        )

    def _pairs_flat(self, ring: np.ndarray, frac: np.ndarray, slot: np.ndarray) -> PairState:
        """:meth:`pairs` of (P,) arrays, the same arithmetic in one kernel (bit for bit)."""
        p = ring.shape[0]
        pos = np.empty((p, 3))
        vel = np.empty((p, 3))
        yaw = np.empty(p)
        pitch = np.empty(p)
        stance = np.empty(p, dtype=np.int8)
        alive = np.empty(p, dtype=np.bool_)
        gen = np.empty(p, dtype=np.uint32)
        _pairs_kernel(
            np.ascontiguousarray(ring, dtype=np.intp), np.ascontiguousarray(frac, dtype=np.float64),
            np.ascontiguousarray(slot, dtype=np.intp), self._f, self._stance, self._hittable, self._gen,
            pos, vel, yaw, pitch, stance, alive, gen,
        )
        return PairState(pos=pos, vel=vel, yaw=yaw, pitch=pitch, stance=stance, alive=alive, generation=gen)

    def rewind(self, times_s: np.ndarray, slots: np.ndarray | None = None) -> Rewound:
        """Player state at (S,) times (s) for (M,) slots (all slots when None): arrays of shape (S, M)."""
        t = np.asarray(times_s, dtype=np.float64).reshape(-1)
        sl = np.arange(self._n) if slots is None else np.asarray(slots, dtype=np.intp).reshape(-1)
        if sl.size and (sl.min() < 0 or sl.max() >= self._n):
            raise HistoryError(f"slots out of range [0, {self._n})")
        b = self.bracket(t)
        st = self.pairs(b.ring[:, None], b.frac[:, None], sl[None, :])
        return Rewound(
            times_s=t, slots=sl, pos=st.pos, vel=st.vel, yaw=st.yaw, pitch=st.pitch, stance=st.stance,
            alive=st.alive, generation=st.generation, clamped=b.clamped,
        )


_FRAC_MAX = float(np.nextafter(1.0, 0.0))


@numba.njit(cache=True, nogil=True)
def bracket_kernel(
    t: np.ndarray, time: np.ndarray, head: int, count: int, cap: int,
    ring_out: np.ndarray, frac_out: np.ndarray, clamped_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:meth:`TickHistory.bracket` for finite (S,) times, as its numpy form computed it: a right-side
    binary search over the records in chronological order, then the same fraction and clip. The
    numpy form cost ~15 calls of fixed overhead for the 1-3 rays of a typical tick."""
    for i in range(t.shape[0]):
        ti = t[i]
        lo = 0
        hi = count
        while lo < hi:  # np.searchsorted(..., side="right")
            mid = (lo + hi) // 2
            if time[(head - count + mid) % cap] <= ti:
                lo = mid + 1
            else:
                hi = mid
        k = lo - 1
        clamped = k < 0
        if k < 0:
            k = 0
        has_next = k < count - 1
        t0 = time[(head - count + k) % cap]
        frac = 0.0
        if has_next and not clamped:
            # (t - t0) / span < 1 mathematically; the clip guards the last ulp.
            frac = (ti - t0) / (time[(head - count + k + 1) % cap] - t0)
            if frac < 0.0:
                frac = 0.0
            if frac > _FRAC_MAX:
                frac = _FRAC_MAX
        ring_out[i] = (head - count + k) % cap
        frac_out[i] = frac
        clamped_out[i] = clamped


@numba.njit(cache=True, nogil=True)
def _pairs_kernel(
    ring: np.ndarray, frac: np.ndarray, slot: np.ndarray,
    f: np.ndarray, stance: np.ndarray, hittable: np.ndarray, gen: np.ndarray,
    pos_out: np.ndarray, vel_out: np.ndarray, yaw_out: np.ndarray, pitch_out: np.ndarray,
    stance_out: np.ndarray, alive_out: np.ndarray, gen_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:meth:`TickHistory.pairs` of (P,) pairs: each value is base + frac * delta, rounded as numpy
    rounds it (no fast-math, so no fused multiply-add), and the yaw re-wrapped as ``_rewrap`` does."""
    d = RING_DELTA
    for i in range(ring.shape[0]):
        r = ring[i]
        s = slot[i]
        fr = frac[i]
        for c in range(3):
            pos_out[i, c] = f[r, RING_X + c, s] + fr * f[r, RING_X + c + d, s]
            vel_out[i, c] = f[r, RING_VX + c, s] + fr * f[r, RING_VX + c + d, s]
        a = f[r, RING_YAW, s] + fr * f[r, RING_YAW + d, s]
        if a >= 180.0:
            a = a - 360.0
        if a < -180.0:
            a = a + 360.0
        yaw_out[i] = a
        pitch_out[i] = f[r, RING_PITCH, s] + fr * f[r, RING_PITCH + d, s]
        stance_out[i] = stance[r, s]
        alive_out[i] = hittable[r, s]
        gen_out[i] = gen[r, s]


@numba.njit(cache=True, nogil=True)
def _record_kernel(
    i: int, j: int, f: np.ndarray, stance_h: np.ndarray, alive_h: np.ndarray, active_h: np.ndarray,
    hittable_h: np.ndarray, gen_h: np.ndarray, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray,
    stance: np.ndarray, alive: np.ndarray, active: np.ndarray, gen: np.ndarray, jump2: float,
) -> None:  # pragma: no cover - compiled
    """Write the world's slots into record ``i`` (its deltas zero: it is the newest), then, when
    ``j`` >= 0, the deltas of record ``j`` towards it: the differences where the slot is hittable in
    both, of the same generation and moved at most sqrt(``jump2``) m horizontally, else zero (a
    respawn or teleport is never lerped across). The yaw's delta is wrapped to [-180, 180) with
    Python's float modulo, which numpy's ``%`` matches bit for bit. One pass instead of ~30 numpy
    calls a tick."""
    d = RING_DELTA
    for s in range(pos.shape[0]):
        for c in range(3):
            f[i, RING_X + c, s] = pos[s, c]
            f[i, RING_VX + c, s] = vel[s, c]
        f[i, RING_YAW, s] = yaw[s]
        f[i, RING_PITCH, s] = pitch[s]
        for r in range(d, 2 * d):
            f[i, r, s] = 0.0
        stance_h[i, s] = stance[s]
        alive_h[i, s] = alive[s]
        active_h[i, s] = active[s]
        hittable_h[i, s] = alive[s] and active[s]
        gen_h[i, s] = gen[s]
        if j < 0:
            continue
        dx = f[i, RING_X, s] - f[j, RING_X, s]
        dy = f[i, RING_Y, s] - f[j, RING_Y, s]
        if hittable_h[j, s] and hittable_h[i, s] and gen_h[j, s] == gen_h[i, s] and dx * dx + dy * dy <= jump2:
            f[j, RING_X + d, s] = dx
            f[j, RING_Y + d, s] = dy
            f[j, RING_Z + d, s] = f[i, RING_Z, s] - f[j, RING_Z, s]
            for c in range(3):
                f[j, RING_VX + c + d, s] = f[i, RING_VX + c, s] - f[j, RING_VX + c, s]
            f[j, RING_YAW + d, s] = (f[i, RING_YAW, s] - f[j, RING_YAW, s] + 180.0) % 360.0 - 180.0
            f[j, RING_PITCH + d, s] = f[i, RING_PITCH, s] - f[j, RING_PITCH, s]
        else:
            for r in range(d, 2 * d):
                f[j, r, s] = 0.0


@numba.njit(cache=True, nogil=True)
def _feet_kernel(
    times: np.ndarray, slots: np.ndarray, time: np.ndarray, head: int, count: int, f: np.ndarray,
    hittable: np.ndarray, pos_out: np.ndarray, alive_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:meth:`TickHistory.feet` for finite times: :func:`bracket_kernel`, then the base + frac * delta
    of :meth:`TickHistory.pairs` for the feet."""
    n = times.shape[0]
    ring = np.empty(n, dtype=np.intp)
    frac = np.empty(n)
    clamped = np.empty(n, dtype=np.bool_)
    bracket_kernel(times, time, head, count, time.shape[0], ring, frac, clamped)
    for i in range(n):
        r = ring[i]
        s = slots[i]
        fr = frac[i]
        for c in range(3):
            pos_out[i, c] = f[r, RING_X + c, s] + fr * f[r, RING_X + c + RING_DELTA, s]
        alive_out[i] = hittable[r, s]


def _warm_kernels() -> None:
    """Compile (or load from numba's cache) the kernels at import, never inside a tick, with the
    array layouts :class:`TickHistory` passes."""
    h = TickHistory(HistoryConfig(), 1)
    state = WorldState(WorldLimits(max_players=1))
    h.record(0, 0.0, state)
    h.record(1, 1.0, state)
    h.pairs(np.zeros(1, dtype=np.intp), np.zeros(1), np.zeros(1, dtype=np.intp))
    h.bracket(np.zeros(1))
    h.feet([0.5], [0])


_warm_kernels()

