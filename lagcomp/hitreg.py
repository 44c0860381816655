"""Batched hit registration with lag compensation and walls (DESIGN "resolve shots").

``register_shots`` resolves S rays at once. For each ray every other player is rewound to the
ray's rewind time and tested against the ray in vectorised stages, each cheaper per pair than the
next and each conservative (it only drops pairs the next stage would reject):

1. line test, on all (shot, player) pairs: is the player's rewound horizontal position within
   the widest body bound of the ray's horizontal line? Five products per pair on the base
   record's x, y and their deltas, before anything else is rewound;
2. body bound, on the survivors: the full rewound state of the pair, then the exact ray vs the
   vertical cylinder enclosing every bone of the player's stance, clipped to [0, max range];
3. bones, on the survivors: the ray in the body's local frame, each bone's bounding sphere,
   then the exact capsule test where the sphere is met; the nearest player entry per shot wins
   (ties: lowest slot).

The three stages and the baits run in one compiled pass over the batch (``_players_kernel``).
Walls are then queried once for the whole batch with ``geometry.first_wall_hit``, the ray cut at
the candidate player's entry (or the weapon range on a miss): a wall found before the player
blocks the shot. The shooter is never a candidate; dead or inactive players (in the record used)
are never hit.

Optional bait targets (AimDetect's invisible targets) are capsules tested after the players:
they never stop a ray and never take damage; a shot reports ``bait_hit`` when it touches one
before any wall and within range (players do not hide baits: AimDetect asks whether the aim went
there, not whether the bullet would have).

Units: meters, seconds, degrees.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numba
import numpy as np

from lagcomp.config import HistoryConfig, HitregConfig
from lagcomp.history import (
    RING_DELTA,
    RING_VX,
    RING_VY,
    RING_VZ,
    RING_X,
    RING_Y,
    RING_YAW,
    RING_Z,
    HistoryError,
    RingView,
    TickHistory,
    bracket_kernel,
)
from lagcomp.shot import RewindDecision, ShotClaim, ShotResult
from world.constants import CROUCHING_EYE_M, STANDING_EYE_M
from world.hitbox import (
    BONE_IDS,
    BOUND_RADIUS,
    BOUND_ZMAX,
    BOUND_ZMIN,
    LOCAL_A,
    LOCAL_B,
    RADIUS,
)
from world.state import WorldLimits, WorldState
from world.weapons import BONE_GROUP_OF_ID, WEAPONS
from world.weapons import weapon as weapon_spec

log = logging.getLogger(__name__)

_EYE_HEIGHT = np.array([STANDING_EYE_M, CROUCHING_EYE_M])
"""Eye height above the feet (m), indexed by stance."""

# The bone tables split into components once, so the narrow phase works on (pairs, bones) planes.
_LAX, _LAY, _LAZ = (np.ascontiguousarray(LOCAL_A[..., i]) for i in range(3))
_LBX, _LBY, _LBZ = (np.ascontiguousarray(LOCAL_B[..., i]) for i in range(3))
_BOUND_R_MAX = float(np.max(BOUND_RADIUS))
# Bounding sphere of every bone capsule (stance, bone): centre and squared radius, with 1 mm to
# spare so rounding never culls a grazing hit.
_MIDX, _MIDY, _MIDZ = ((_LAX + _LBX) / 2.0, (_LAY + _LBY) / 2.0, (_LAZ + _LBZ) / 2.0)
_RADIUS = np.ascontiguousarray(RADIUS, dtype=np.float64)
_BOUND_RADIUS, _BOUND_ZMIN, _BOUND_ZMAX = (np.ascontiguousarray(b, dtype=np.float64) for b in (BOUND_RADIUS, BOUND_ZMIN, BOUND_ZMAX))
_SPHERE_R2 = (np.sqrt((_LBX - _LAX) ** 2 + (_LBY - _LAY) ** 2 + (_LBZ - _LAZ) ** 2) / 2.0 + RADIUS + 1e-3) ** 2


class WallQueries(Protocol):
    """What hit registration needs from the map geometry (``world.geometry.MapGeometry``)."""

    def first_wall_hit(self, origin: np.ndarray, direction: np.ndarray, max_dist: np.ndarray | float) -> np.ndarray:
        """(N,) distance (m) to the first wall along each ray within max_dist, else inf."""
        ...


class ShotError(ValueError):
    """A shot batch was refused (shapes, non-finite values, zero direction, bad slot)."""


@dataclass(frozen=True, slots=True)
class ShotBatch:
    """S rays to resolve, structure of arrays. Build it with :meth:`build` (validates, normalises).

    Attributes:
        shooter: (S,) intp player slot. origin: (S,3) authoritative eye position (m), from the
            shooter's current state (not rewound). direction: (S,3) unit vectors.
        time_s: (S,) rewind time (s) of the targets. max_range: (S,) weapon range (m).
        weapon: (S,) int16 weapon id. pellet: (S,) int16 pellet index (0 for single-ray weapons).
    """

    shooter: np.ndarray
    origin: np.ndarray
    direction: np.ndarray
    time_s: np.ndarray
    max_range: np.ndarray
    weapon: np.ndarray
    pellet: np.ndarray

    def __len__(self) -> int:
        return int(self.shooter.shape[0])

    @classmethod
    def build(
        cls,
        shooter: np.ndarray,
        origin: np.ndarray,
        direction: np.ndarray,
        time_s: np.ndarray | float,
        max_range: np.ndarray | float,
        weapon: np.ndarray | int = 0,
        pellet: np.ndarray | int = 0,
    ) -> ShotBatch:
        """Validate and normalise; scalars broadcast to (S,). Raises ShotError on bad input."""
        sh = np.asarray(shooter, dtype=np.intp).reshape(-1)
        s = sh.shape[0]
        try:
            # A copy: the batch owns writeable arrays (a read-only one would be a new kernel specialisation).
            o = np.array(origin, dtype=np.float64).reshape(s, 3) if s else np.zeros((0, 3))
            d = np.asarray(direction, dtype=np.float64).reshape(s, 3) if s else np.zeros((0, 3))
            t = _column(time_s, np.float64, s)
            rng = _column(max_range, np.float64, s)
            w = _column(weapon, np.int16, s)
            p = _column(pellet, np.int16, s)
        except Exception as exc:
            # The shooters are checked first (_check_rays does it for the batches that get there).
            if np.any(sh < 0):
                raise ShotError(_RAY_ERRORS[_NEGATIVE_SHOOTER]) from None
            if isinstance(exc, ValueError):
                raise ShotError(f"shot arrays do not match {s} shooters: {exc}") from exc
            raise
        unit = np.empty((s, 3))
        failed = _check_rays(np.ascontiguousarray(sh), np.ascontiguousarray(o), np.ascontiguousarray(d), t, rng, unit)
        if failed:
            raise ShotError(_RAY_ERRORS[failed])
        return cls(shooter=sh, origin=o, direction=unit, time_s=t, max_range=rng, weapon=w, pellet=p)


def _column(values: np.ndarray | list[float] | float, dtype: type, s: int) -> np.ndarray:
    """(s,) array of ``dtype`` of its own: ``values`` copied, or broadcast when a scalar or shorter
    (ValueError when they do not broadcast). np.broadcast_to costs ~5 us a call; a batch's
    columns are usually whole already."""
    a = np.array(values, dtype=dtype)
    return a if a.shape == (s,) else np.broadcast_to(a, (s,)).copy()


_NEGATIVE_SHOOTER = 7
_RAY_ERRORS: dict[int, str] = {
    _NEGATIVE_SHOOTER: "shooter slots must be >= 0",
    1: "origin contains NaN or inf",
    2: "direction contains NaN or inf",
    3: "time_s contains NaN or inf",
    4: "max_range contains NaN or inf",
    5: "max_range must be positive",
    6: "direction has zero length",
}
"""``_check_rays``' failures, in the order the checks are made."""


@numba.njit(cache=True, nogil=True)
def _check_rays(
    shooter: np.ndarray, o: np.ndarray, d: np.ndarray, t: np.ndarray, max_range: np.ndarray, unit: np.ndarray
) -> int:  # pragma: no cover - compiled
    """0 when the rays pass ShotBatch's checks, with their unit directions in ``unit`` (each
    component divided by sqrt((x*x + y*y) + z*z), numpy's norm); else the first failed check's
    key in ``_RAY_ERRORS`` (the shooters first, then each check over every ray before the next
    one, as before: one compiled pass instead of a dozen numpy calls for the few rays of a tick)."""
    for i in range(shooter.shape[0]):
        if shooter[i] < 0:
            return _NEGATIVE_SHOOTER
    n = o.shape[0]
    for i in range(n):
        if not (math.isfinite(o[i, 0]) and math.isfinite(o[i, 1]) and math.isfinite(o[i, 2])):
            return 1
    for i in range(n):
        if not (math.isfinite(d[i, 0]) and math.isfinite(d[i, 1]) and math.isfinite(d[i, 2])):
            return 2
    for i in range(n):
        if not math.isfinite(t[i]):
            return 3
    for i in range(n):
        if not math.isfinite(max_range[i]):
            return 4
    for i in range(n):
        if max_range[i] <= 0.0:
            return 5
    for i in range(n):
        norm = math.sqrt((d[i, 0] * d[i, 0] + d[i, 1] * d[i, 1]) + d[i, 2] * d[i, 2])
        if norm == 0.0:
            return 6
        unit[i, 0] = d[i, 0] / norm
        unit[i, 1] = d[i, 1] / norm
        unit[i, 2] = d[i, 2] / norm
    return 0


@dataclass(frozen=True, slots=True)
class BaitTargets:
    """B invisible bait capsules (AimDetect): segment a-b swept by radius (a == b: a sphere).

    Attributes:
        a, b: (B,3) segment ends (m). radius: (B,) m.
        shooter: (B,) intp: the only shooter whose rays see this bait, or -1 for every shooter
            (a bait is shown to one client, so only that client's aim can reveal it).
    """

    a: np.ndarray
    b: np.ndarray
    radius: np.ndarray
    shooter: np.ndarray

    @classmethod
    def spheres(cls, centre: np.ndarray, radius: np.ndarray | float, shooter: np.ndarray | int = -1) -> BaitTargets:
        """Bait spheres at (B,3) centres (m) with radius (m), visible to ``shooter`` (-1: all)."""
        c = np.asarray(centre, dtype=np.float64).reshape(-1, 3)
        n = c.shape[0]
        return cls(a=c, b=c.copy(), radius=_column(radius, np.float64, n), shooter=_column(shooter, np.intp, n))


@dataclass(frozen=True, slots=True)
class HitBatch:
    """Outcome of S rays, structure of arrays.

    Attributes:
        victim: (S,) int32 slot hit, -1 for none.
        bone: (S,) int8 bone id hit (0 for none).
        distance: (S,) m from the origin to ``hit_point``.
        hit_point: (S,3) m: the player entry point; else the wall impact; else the end of range.
        blocked_by_wall: (S,) a wall stopped the ray within range before any player.
        occluded_victim: (S,) int32 the player the ray would have hit without that wall, -1 for
            none (``blocked_by_wall & occluded_victim >= 0``: a wall stood between shot and player).
        victim_pos: (S,3) the victim's rewound feet position (m), NaN without a victim.
        victim_speed: (S,) its rewound speed (m/s), 0 without a victim.
        victim_generation: (S,) uint32 its generation in the record used, 0 without a victim.
        clamped: (S,) the rewind time was older than the history (oldest record used).
        bait_hit: (S,) the ray touched a bait before any wall and within range.
        bait_index: (S,) int32 the nearest such bait, -1 for none.
    """

    victim: np.ndarray
    bone: np.ndarray
    distance: np.ndarray
    hit_point: np.ndarray
    blocked_by_wall: np.ndarray
    occluded_victim: np.ndarray
    victim_pos: np.ndarray
    victim_speed: np.ndarray
    victim_generation: np.ndarray
    clamped: np.ndarray
    bait_hit: np.ndarray
    bait_index: np.ndarray

    def __len__(self) -> int:
        return int(self.victim.shape[0])


# ---------------------------------------------------------------------------------- helpers


def eye_positions(state: WorldState, slots: np.ndarray) -> np.ndarray:
    """(M,3) current eye positions (m) of ``slots``: feet plus the stance's eye height."""
    sl = np.asarray(slots, dtype=np.intp)
    eye = state.pos[sl].copy()
    eye[:, 2] += _EYE_HEIGHT[state.stance[sl].astype(np.intp)]
    return eye


def shots_from_state(
    state: WorldState,
    shooter: np.ndarray,
    direction: np.ndarray,
    time_s: np.ndarray | float,
    weapon: np.ndarray | int,
    pellet: np.ndarray | int = 0,
) -> ShotBatch:
    """A ShotBatch whose origins are the shooters' current eyes and ranges their weapons' ranges."""
    sh = np.asarray(shooter, dtype=np.intp).reshape(-1)
    w = np.broadcast_to(np.asarray(weapon, dtype=np.int16), sh.shape)
    uniq = np.unique(w)
    ranges = np.empty(sh.shape, dtype=np.float64)
    for wid in uniq:  # a handful of weapon ids, not a loop over shots
        ranges[w == wid] = weapon_spec(int(wid)).max_range_m
    return ShotBatch.build(sh, eye_positions(state, sh), direction, time_s, ranges, w, pellet)


@numba.njit(cache=True, nogil=True)
def _meets_cylinder(
    qx: float, qy: float, qz: float, dx: float, dy: float, dz: float,
    radius: float, zmin: float, zmax: float, tm: float,
) -> bool:  # pragma: no cover - compiled
    """Does the ray t*d for t in [0, tm] meet the vertical bounding cylinder of a body whose feet
    are at q relative to the ray's origin? The cylinder (already widened by the broad margin)
    spans z in [feet + zmin, feet + zmax]. Exact up to rounding (hence the margin). The
    operations and order of the numpy version it replaced (IEEE double, no fast-math); min / max
    are written as numpy's (nan propagates, the first on ties)."""
    inf = math.inf
    h2 = dx * dx + dy * dy
    dot = qx * dx + qy * dy
    c2 = qx * qx + qy * qy - radius * radius
    disc = dot * dot - h2 * c2
    root = math.sqrt(disc if (disc >= 0.0 or math.isnan(disc)) else 0.0)
    if h2 > 0.0:
        lo = (dot - root) / h2
        hi = (dot + root) / h2
        ok = disc >= 0.0
    else:
        lo = -inf
        hi = inf
        ok = c2 <= 0.0
    if dz != 0.0:
        za = (qz + zmin) / dz
        zb = (qz + zmax) / dz
        zlo = za if (za <= zb or math.isnan(za)) else zb
        zhi = za if (za >= zb or math.isnan(za)) else zb
    else:
        zlo = -inf
        zhi = inf
        ok = ok and qz + zmin <= 0.0 and 0.0 <= qz + zmax
    lo = lo if (lo >= zlo or math.isnan(lo)) else zlo
    lo = lo if (lo >= 0.0 or math.isnan(lo)) else 0.0
    hi = hi if (hi <= zhi or math.isnan(hi)) else zhi
    hi = hi if (hi <= tm or math.isnan(hi)) else tm
    return ok and lo <= hi


@numba.njit(cache=True, nogil=True)
def _capsule_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float,
    ax: float, ay: float, az: float, bx: float, by: float, bz: float, r: float,
) -> float:  # pragma: no cover - compiled
    """Distance (m) along a unit ray to its entry into a capsule (inf where the ray misses or
    starts inside): the quadratic of ``world.hitbox.ray_capsule`` (body of the capsule, then its
    end spheres), in the same operations and order as the numpy version it replaced (IEEE double,
    no fast-math: the same bits); min is written as numpy's (the first on ties)."""
    bax, bay, baz = bx - ax, by - ay, bz - az
    oax, oay, oaz = ox - ax, oy - ay, oz - az
    baba = bax * bax + bay * bay + baz * baz
    bard = bax * dx + bay * dy + baz * dz
    baoa = bax * oax + bay * oay + baz * oaz
    rdoa = dx * oax + dy * oay + dz * oaz
    oaoa = oax * oax + oay * oay + oaz * oaz
    r2 = r * r
    big_a = baba - bard * bard
    big_b = baba * rdoa - baoa * bard
    big_c = baba * oaoa - baoa * baoa - r2 * baba
    h = big_b * big_b - big_a * big_c
    inf = math.inf
    body_ok = h >= 0.0 and big_a > 1e-12
    t_body = (-big_b - math.sqrt(h if body_ok else 0.0)) / (big_a if body_ok else 1.0)
    y = baoa + t_body * bard
    if not (body_ok and y > 0.0 and y < baba and t_body >= 0.0):
        t_body = inf
    cc = oaoa - r2
    hh = rdoa * rdoa - cc
    ok = hh >= 0.0 and cc > 0.0
    t_a = -rdoa - math.sqrt(hh if ok else 0.0)
    if not (ok and t_a >= 0.0):
        t_a = inf
    obx, oby, obz = ox - bx, oy - by, oz - bz
    bb = dx * obx + dy * oby + dz * obz
    cc = obx * obx + oby * oby + obz * obz - r2
    hh = bb * bb - cc
    ok = hh >= 0.0 and cc > 0.0
    t_b = -bb - math.sqrt(hh if ok else 0.0)
    if not (ok and t_b >= 0.0):
        t_b = inf
    t_ab = t_a if (t_a <= t_b or math.isnan(t_a)) else t_b
    return t_body if (t_body <= t_ab or math.isnan(t_body)) else t_ab


@numba.njit(cache=True, nogil=True)
def _nearest_bone(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float,
    px: float, py: float, pz: float, yaw_deg: float, st: int,
    midx: np.ndarray, midy: np.ndarray, midz: np.ndarray, sphere_r2: np.ndarray,
    lax: np.ndarray, lay: np.ndarray, laz: np.ndarray, lbx: np.ndarray, lby: np.ndarray, lbz: np.ndarray,
    radius: np.ndarray,
) -> tuple[float, int]:  # pragma: no cover - compiled
    """Nearest bone entry distance (m, inf: none) and its bone column (the first on ties, column
    0 when none, as argmin) of a unit ray against the body with feet p, yaw and stance ``st``.

    Works in the body's local frame (the bone tables' frame): rotating the ray once is cheaper
    than rotating 16 capsules, and distances along a unit ray are unchanged by a rotation. Each
    bone's bounding sphere is tested first; the exact capsule test runs only on the bones whose
    sphere the ray meets (a few per body)."""
    yaw = math.radians(yaw_deg)
    c = math.cos(yaw)
    s = math.sin(yaw)
    rx = ox - px
    ry = oy - py
    lox = rx * c + ry * s
    loy = ry * c - rx * s
    loz = oz - pz
    ldx = dx * c + dy * s
    ldy = dy * c - dx * s
    ldz = dz
    best = math.inf
    col = 0
    for b in range(midx.shape[1]):
        ocx = lox - midx[st, b]
        ocy = loy - midy[st, b]
        ocz = loz - midz[st, b]
        bb = ldx * ocx + ldy * ocy + ldz * ocz
        cc = ocx * ocx + ocy * ocy + ocz * ocz - sphere_r2[st, b]
        # The ray (t >= 0) meets the sphere: the line does, and the sphere is not wholly behind it.
        if not (bb * bb >= cc and (bb <= 0.0 or cc <= 0.0)):
            continue
        t = _capsule_entry(lox, loy, loz, ldx, ldy, ldz, lax[st, b], lay[st, b], laz[st, b],
                           lbx[st, b], lby[st, b], lbz[st, b], radius[st, b])
        if t < best or (math.isnan(t) and not math.isnan(best)):  # (argmin: the first nan wins)
            best = t
            col = b
    return best, col



@numba.njit(cache=True, nogil=True)
def _players_kernel(
    shooter: np.ndarray, origin: np.ndarray, direction: np.ndarray, time_s: np.ndarray, max_range: np.ndarray,
    now_s: float, h: RingView, r_line: float, margin: float,
    bait_a: np.ndarray, bait_b: np.ndarray, bait_radius: np.ndarray, bait_shooter: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per ray: the nearest player along it (walls not yet applied), the nearest bait, and how far
    the walls must be searched. Returns (clamped, slot, bone, t, pos, speed, generation, bait_t,
    bait_index, limit), one row per ray: the rewind was clamped; the winner's slot (-1: none),
    bone id (0), entry distance (m, inf), rewound feet (m, NaN), speed (m/s, 0) and generation
    (0); the nearest bait's distance (m, inf) and index (-1); the wall search limit (m).

    The stages of the module docstring, for every ray in one pass: the rewind time is
    ``min(time_s, now_s)`` (as ``np.minimum``) bracketed as ``TickHistory.bracket`` does; the
    line test is ``cross(q, d)^2 <= r_line^2 |d_xy|^2`` with cross(q, d) = dy x - dx y + f dy dx_k
    - f dx dy_k - (ox dy - oy dx), summed in that order; only the pairs passing it are rewound
    (``TickHistory.pairs``' arithmetic) and go to the body bound and the bones. Slots are visited
    in ascending order, so the strict ``<`` leaves equal distances to the lowest slot. One pass
    instead of ~100 numpy calls of fixed overhead for the few rays of a tick; the line test was a
    matrix product, whose BLAS threads cost ~0.2 ms to wake."""
    s = shooter.shape[0]
    t = np.empty(s)
    for i in range(s):
        t[i] = time_s[i] if (time_s[i] <= now_s or math.isnan(time_s[i])) else now_s
    ring = np.empty(s, dtype=np.intp)
    frac = np.empty(s)
    clamped = np.empty(s, dtype=np.bool_)
    bracket_kernel(t, h.time, h.head, h.count, h.time.shape[0], ring, frac, clamped)
    win_slot = np.full(s, -1, dtype=np.int32)
    win_bone = np.zeros(s, dtype=np.int8)
    win_t = np.full(s, math.inf)
    win_pos = np.full((s, 3), math.nan)
    win_speed = np.zeros(s)
    win_gen = np.zeros(s, dtype=np.uint32)
    r2 = r_line * r_line
    f_ = h.f
    d_ = RING_DELTA
    for i in range(s):
        k = ring[i]
        f = frac[i]
        ox, oy, oz = origin[i, 0], origin[i, 1], origin[i, 2]
        dx, dy, dz = direction[i, 0], direction[i, 1], direction[i, 2]
        c0, c1, c2, c3 = dy, -dx, f * dy, -f * dx
        # (The constant term multiplied the record's row of ones: exact, so left out.)
        c4 = oy * dx - ox * dy
        lim = r2 * (dx * dx + dy * dy)
        best = math.inf
        best_n = -1
        best_col = 0
        for n in range(f_.shape[2]):
            x0, y0, ddx, ddy = f_[k, RING_X, n], f_[k, RING_Y, n], f_[k, RING_X + d_, n], f_[k, RING_Y + d_, n]
            cross = c0 * x0 + c1 * y0 + c2 * ddx + c3 * ddy + c4
            if not cross * cross <= lim or n == shooter[i] or not h.hittable[k, n]:
                continue
            st = h.stance[k, n]
            px = x0 + f * ddx
            py = y0 + f * ddy
            pz = f_[k, RING_Z, n] + f * f_[k, RING_Z + d_, n]
            if not _meets_cylinder(px - ox, py - oy, pz - oz, dx, dy, dz, _BOUND_RADIUS[st] + margin,
                                   _BOUND_ZMIN[st] - margin, _BOUND_ZMAX[st] + margin, max_range[i]):
                continue
            yaw = f_[k, RING_YAW, n] + f * f_[k, RING_YAW + d_, n]
            if yaw >= 180.0:
                yaw = yaw - 360.0
            if yaw < -180.0:
                yaw = yaw + 360.0
            tb, col = _nearest_bone(ox, oy, oz, dx, dy, dz, px, py, pz, yaw, st, _MIDX, _MIDY, _MIDZ, _SPHERE_R2,
                                    _LAX, _LAY, _LAZ, _LBX, _LBY, _LBZ, _RADIUS)
            if tb <= max_range[i] and tb < best:
                best = tb
                best_n = n
                best_col = col
        if best_n < 0:
            continue
        n = best_n
        win_slot[i] = n
        win_bone[i] = BONE_IDS[best_col]
        win_t[i] = best
        for c in range(3):
            win_pos[i, c] = f_[k, RING_X + c, n] + f * f_[k, RING_X + c + d_, n]
        vx = f_[k, RING_VX, n] + f * f_[k, RING_VX + d_, n]
        vy = f_[k, RING_VY, n] + f * f_[k, RING_VY + d_, n]
        vz = f_[k, RING_VZ, n] + f * f_[k, RING_VZ + d_, n]
        win_speed[i] = math.sqrt((vx * vx + vy * vy) + vz * vz)  # np.sum's order over 3 values
        win_gen[i] = h.generation[k, n]
    bait_t = np.empty(s)
    bait_idx = np.empty(s, dtype=np.int32)
    _baits_kernel(origin, direction, shooter, max_range, bait_a, bait_b, bait_radius, bait_shooter, bait_t, bait_idx)
    limit = np.empty(s)
    for i in range(s):
        lim_i = win_t[i] if win_slot[i] >= 0 else max_range[i]
        # Look for walls as far as the bait too, so a bait behind the victim is judged by the walls.
        if math.isfinite(bait_t[i]) and not (lim_i >= bait_t[i] or math.isnan(lim_i)):
            lim_i = bait_t[i]
        limit[i] = lim_i
    return clamped, win_slot, win_bone, win_t, win_pos, win_speed, win_gen, bait_t, bait_idx, limit


@numba.njit(cache=True, nogil=True)
def _outcome_kernel(
    origin: np.ndarray, direction: np.ndarray, max_range: np.ndarray, wall_t: np.ndarray,
    slot: np.ndarray, bone: np.ndarray, t: np.ndarray, pos: np.ndarray, speed: np.ndarray, generation: np.ndarray,
    bait_t: np.ndarray, bait_index: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Apply the walls to ``_players_kernel``'s rows: the winner's slot, bone, pos, speed,
    generation and the bait index are overwritten in place with HitBatch's victim, bone,
    victim_pos, victim_speed, victim_generation and bait_index; returns (distance, hit_point,
    blocked_by_wall, occluded_victim, bait_hit). The element-wise rules register_shots applied
    with numpy, in the same operations (hit_point = origin + distance * direction)."""
    s = slot.shape[0]
    distance = np.empty(s)
    hit_point = np.empty((s, 3))
    blocked = np.empty(s, dtype=np.bool_)
    occluded = np.full(s, -1, dtype=np.int32)
    bait_hit = np.empty(s, dtype=np.bool_)
    for i in range(s):
        w = wall_t[i]
        has_player = slot[i] >= 0
        wall_first = w < (t[i] if has_player else math.inf)
        blocked[i] = wall_first if has_player else (math.isfinite(w) and w <= max_range[i])
        if has_player and not wall_first:
            distance[i] = t[i]
        else:
            if has_player:
                occluded[i] = slot[i]
            slot[i] = -1
            bone[i] = 0
            pos[i, 0] = pos[i, 1] = pos[i, 2] = math.nan
            speed[i] = 0.0
            generation[i] = 0
            distance[i] = w if blocked[i] else max_range[i]
        for c in range(3):
            hit_point[i, c] = origin[i, c] + distance[i] * direction[i, c]
        bait_hit[i] = math.isfinite(bait_t[i]) and bait_t[i] < w
        if not bait_hit[i]:
            bait_index[i] = -1
    return distance, hit_point, blocked, occluded, bait_hit


@numba.njit(cache=True, nogil=True)
def _baits_kernel(
    o: np.ndarray, d: np.ndarray, shooter: np.ndarray, max_range: np.ndarray,
    a: np.ndarray, b: np.ndarray, radius: np.ndarray, bait_shooter: np.ndarray,
    best_out: np.ndarray, idx_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """See ``_nearest_baits``; the first bait wins ties, as argmin."""
    for i in range(o.shape[0]):
        best = math.inf
        col = 0
        for j in range(a.shape[0]):
            if bait_shooter[j] >= 0 and bait_shooter[j] != shooter[i]:
                continue
            t = _capsule_entry(o[i, 0], o[i, 1], o[i, 2], d[i, 0], d[i, 1], d[i, 2],
                               a[j, 0], a[j, 1], a[j, 2], b[j, 0], b[j, 1], b[j, 2], radius[j])
            if t <= max_range[i] and t < best:
                best = t
                col = j
        best_out[i] = best
        idx_out[i] = col if math.isfinite(best) else -1

_NO_BAITS = BaitTargets(a=np.zeros((0, 3)), b=np.zeros((0, 3)), radius=np.zeros(0), shooter=np.zeros(0, dtype=np.intp))


def _warm_kernels() -> None:
    """Compile (or load from numba's cache) the kernels at import, never inside a tick, with the
    argument types register_shots passes (a TickHistory's ring, ShotBatch's and BaitTargets' dtypes)."""
    history = TickHistory(HistoryConfig(), 1)
    history.record(0, 0.0, WorldState(WorldLimits(max_players=1)))
    batch = ShotBatch.build([0], [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0]], 0.0, 1.0)
    register_shots(batch, history, _NoWalls(), 0.0)
    register_shots(batch, history, _NoWalls(), 0.0, baits=BaitTargets.spheres([[1.0, 0.0, 1.0]], 0.1, 0))


class _NoWalls:
    """A map without walls (the warm-up's)."""

    def first_wall_hit(self, origin: np.ndarray, direction: np.ndarray, max_dist: np.ndarray | float) -> np.ndarray:
        return np.full(np.shape(origin)[0], np.inf)


def _nearest_players(
    batch: ShotBatch, history: TickHistory, now_s: float, config: HitregConfig, baits: BaitTargets | None
) -> tuple[np.ndarray, ...]:
    """``_players_kernel``'s rows for a non-empty batch: everything but the walls."""
    view = history.ring_view()
    now = float(now_s)
    if not now > -math.inf:  # NaN or -inf: no rewind time would be finite
        raise HistoryError("rewind times must be finite")
    b = _NO_BAITS if baits is None else baits
    f64 = np.float64
    return _players_kernel(
        np.ascontiguousarray(batch.shooter, dtype=np.intp), np.ascontiguousarray(batch.origin, dtype=f64),
        np.ascontiguousarray(batch.direction, dtype=f64), np.ascontiguousarray(batch.time_s, dtype=f64),
        np.ascontiguousarray(batch.max_range, dtype=f64), now, view,
        _BOUND_R_MAX + config.broad_margin_m, float(config.broad_margin_m),
        np.ascontiguousarray(b.a, dtype=f64), np.ascontiguousarray(b.b, dtype=f64),
        np.ascontiguousarray(b.radius, dtype=f64), np.ascontiguousarray(b.shooter, dtype=np.intp),
    )


def register_shots(
    batch: ShotBatch,
    history: TickHistory,
    geometry: WallQueries,
    now_s: float,
    config: HitregConfig | None = None,
    baits: BaitTargets | None = None,
) -> HitBatch:
    """Resolve S rays against the players rewound to each ray's time, the walls and the baits.

    Args:
        batch: the rays (see :class:`ShotBatch`); rewind times later than ``now_s`` are taken at now.
        history: the tick history (at least one record).
        geometry: wall queries of the current map.
        now_s: server time of registration (s).
        config: speed knobs; defaults when None.
        baits: optional bait targets (reported, never hit).
    Returns:
        a :class:`HitBatch` with one row per ray, in batch order.
    """
    cfg = config or HitregConfig()
    f64 = np.float64
    if len(batch) == 0:
        none = np.zeros(0, dtype=np.int32)
        return HitBatch(
            victim=none, bone=np.zeros(0, dtype=np.int8), distance=np.zeros(0), hit_point=np.zeros((0, 3)),
            blocked_by_wall=np.zeros(0, dtype=bool), occluded_victim=none, victim_pos=np.zeros((0, 3)),
            victim_speed=np.zeros(0), victim_generation=np.zeros(0, dtype=np.uint32),
            clamped=np.zeros(0, dtype=bool), bait_hit=np.zeros(0, dtype=bool), bait_index=none,
        )
    origin, direction = np.ascontiguousarray(batch.origin, dtype=f64), np.ascontiguousarray(batch.direction, dtype=f64)
    max_range = np.ascontiguousarray(batch.max_range, dtype=f64)
    clamped, victim, bone, t, victim_pos, speed, generation, bait_t, bait_index, limit = _nearest_players(
        batch, history, now_s, cfg, baits)
    wall_t = np.ascontiguousarray(geometry.first_wall_hit(batch.origin, batch.direction, limit), dtype=f64)
    distance, hit_point, blocked, occluded, bait_hit = _outcome_kernel(
        origin, direction, max_range, wall_t, victim, bone, t, victim_pos, speed, generation,
        bait_t, bait_index,
    )
    return HitBatch(
        victim=victim, bone=bone, distance=distance, hit_point=hit_point, blocked_by_wall=blocked,
        occluded_victim=occluded, victim_pos=victim_pos, victim_speed=speed, victim_generation=generation,
        clamped=clamped, bait_hit=bait_hit, bait_index=bait_index,
    )


_warm_kernels()


def _damage_table() -> dict[int, tuple[tuple[float, ...], float]]:
    """By weapon id: (damage at 0 m (hit points) by bone id, falloff factor per 10 m), the
    products ``WeaponSpec.damage_at`` forms before its falloff (a Python float product is numpy's
    float64 product, bit for bit)."""
    table = {}
    for wid, spec in WEAPONS.items():
        mult = [spec.group_multiplier[g] if g >= 0 else 0.0 for g in BONE_GROUP_OF_ID.tolist()]
        table[int(wid)] = (tuple(spec.damage * float(m) for m in mult), spec.range_modifier_per_10m)
    return table


_DAMAGE_AT_0M = _damage_table()


def hit_damage(batch: ShotBatch, hits: HitBatch) -> np.ndarray:
    """(S,) damage (hit points) of each ray: the weapon's damage at the bone and distance, 0 on a miss.

    ``WeaponSpec.damage_at``'s values with its base products looked up in a table: numpy's
    unique, masks and clips cost more than the few hit rows of a tick. The falloff stays numpy's
    power over a float64 array per weapon, as damage_at computes it: Python's ``**`` differs from
    it in the last bit for some distances, and replays must not."""
    victim = hits.victim.tolist()
    dmg = np.zeros(len(batch))
    rows = [i for i, v in enumerate(victim) if v >= 0]
    if not rows:
        return dmg
    weapon = batch.weapon.tolist()
    by_weapon: dict[int, list[int]] = {}
    for i in rows:
        by_weapon.setdefault(weapon[i], []).append(i)
    bone, distance = hits.bone.tolist(), hits.distance.tolist()
    for wid, idx in by_weapon.items():
        entry = _DAMAGE_AT_0M.get(wid)
        if entry is None:
            raise KeyError(f"unknown weapon id {wid!r}")  # world.weapons.weapon's refusal
        at_0m, modifier = entry
        falloff = modifier ** (np.array([distance[i] for i in idx]) / 10.0)
        dmg[idx] = np.array([at_0m[bone[i]] for i in idx]) * falloff
    return dmg


def _vec(a: np.ndarray) -> tuple[float, float, float]:
    return (float(a[0]), float(a[1]), float(a[2]))


def to_shot_result(
    batch: ShotBatch,
    hits: HitBatch,
    row: int,
    *,
    claim: ShotClaim,
    tick: int,
    time_s: float,
    decision: RewindDecision,
    damage: float,
    first_contact: bool | None = None,
    claimed_victim_pos: tuple[float, float, float] | None = None,
    exposed: int | None = None,
) -> ShotResult:
    """The :class:`ShotResult` of one ray (a cold path: one Python object per registered ray)."""
    victim = int(hits.victim[row])
    return ShotResult(
        shooter=int(batch.shooter[row]),
        tick=int(tick),
        time_s=float(time_s),
        weapon=int(batch.weapon[row]),
        pellet=int(batch.pellet[row]),
        origin=_vec(batch.origin[row]),
        direction=_vec(batch.direction[row]),
        rewind_time_s=float(batch.time_s[row]),
        rewind_decision=decision,
        rewind_clamped=bool(hits.clamped[row]),
        victim=victim if victim >= 0 else None,
        victim_generation=int(hits.victim_generation[row]),
        bone=int(hits.bone[row]),
        hit_point=_vec(hits.hit_point[row]),
        distance_m=float(hits.distance[row]),
        blocked_by_wall=bool(hits.blocked_by_wall[row]),
        victim_pos=_vec(hits.victim_pos[row]) if victim >= 0 else None,
        victim_speed_m_s=float(hits.victim_speed[row]),
        damage=float(damage) if victim >= 0 else 0.0,
        claim=claim,
        bait_hit=bool(hits.bait_hit[row]),
        first_contact=first_contact,
        claimed_victim_pos=claimed_victim_pos,
        exposed=exposed,
    )


def to_shot_results(
    batch: ShotBatch,
    hits: HitBatch,
    *,
    claims: Sequence[ShotClaim],
    tick: int,
    time_s: float,
    decisions: Sequence[RewindDecision],
    damage: Sequence[float],
    first_contact: Sequence[bool | None],
    claimed_victim_pos: Sequence[tuple[float, float, float] | None],
    exposed: Sequence[int | None] | None = None,
) -> list[ShotResult]:
    """The :class:`ShotResult` of each of the first ``len(claims)`` rays (the rest, such as probe
    rays, get none): :func:`to_shot_result` row by row, field for field, with every array turned
    into Python values once instead of indexed element by element. ``damage`` (hit points) counts
    only where the ray hit a victim; the other sequences are per ray like ``claims`` (``exposed``: none recorded when None)."""
    n = len(claims)
    victim = hits.victim[:n].tolist()
    shooter, weapon, pellet = batch.shooter[:n].tolist(), batch.weapon[:n].tolist(), batch.pellet[:n].tolist()
    origin, direction, hit_point = batch.origin[:n].tolist(), batch.direction[:n].tolist(), hits.hit_point[:n].tolist()
    victim_pos = hits.victim_pos[:n].tolist()
    exposed = [None] * n if exposed is None else exposed
    return [
        ShotResult(
            shooter=shooter[i], tick=int(tick), time_s=float(time_s), weapon=weapon[i], pellet=pellet[i],
            origin=tuple(origin[i]), direction=tuple(direction[i]), rewind_time_s=rewind_time,
            rewind_decision=decisions[i], rewind_clamped=clamped, victim=victim[i] if victim[i] >= 0 else None,
            victim_generation=generation, bone=bone, hit_point=tuple(hit_point[i]), distance_m=distance,
            blocked_by_wall=blocked, victim_pos=tuple(victim_pos[i]) if victim[i] >= 0 else None,
            victim_speed_m_s=speed, damage=float(damage[i]) if victim[i] >= 0 else 0.0, claim=claims[i],
            bait_hit=bait_hit, first_contact=first_contact[i], claimed_victim_pos=claimed_victim_pos[i],
            exposed=exposed[i],
        )
        for i, rewind_time, clamped, generation, bone, distance, blocked, speed, bait_hit in zip(
            range(n), batch.time_s[:n].tolist(), hits.clamped[:n].tolist(), hits.victim_generation[:n].tolist(),
            hits.bone[:n].tolist(), hits.distance[:n].tolist(), hits.blocked_by_wall[:n].tolist(),
            hits.victim_speed[:n].tolist(), hits.bait_hit[:n].tolist(), strict=True,
        )
    ]


__all__ = [
    "BaitTargets",
    "HitBatch",
    "ShotBatch",
    "ShotError",
    "WallQueries",
    "eye_positions",
    "hit_damage",
    "register_shots",
    "shots_from_state",
    "to_shot_result",
    "to_shot_results",
]
