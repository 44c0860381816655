"""Compiled phantom tick (:mod:`server.phantoms`): every viewer due this tick in one call.

A phantom's check is many small operations: a viewer's eight eyes (seven swept moves), then
three rays from each eye to each of up to fourteen positions (its trail and its way ahead),
every one of which must be blocked; a placement tries two dozen positions and each new leg up to
eight headings. In numpy that was ~100 calls of fixed overhead per viewer (1-1.4 ms a tick with 8
players at 64 Hz). :func:`advance` walks every phantom one tick and checks those of the tick's
viewers in one compiled pass, handing over to :func:`resume` (re-heading, placing) at the first
viewer that needs a draw, on the map's ray walk
(:func:`world.ray_kernel.walk`) and sweep (:mod:`world.sweep_kernel`), drawing from the core's
generator itself (numba's ``np.random.Generator`` draws what NumPy's does, from the same state).

It performs the numpy formulation's operations in the same order, so the phantoms placed, their
legs and every draw are equal bit for bit; :func:`reference_update` is that formulation (the
code it replaced), kept as the reference the tests hold the kernel to. One thing only the kernel
does: before walking a ray it clips the piece that stopped the same (eye, sample) ray last time
(``hints``), which, when it still blocks, proves the ray blocked at the cost of one clip (see
:func:`world.ray_kernel.piece_blocks`); a hint that no longer blocks proves nothing and the ray
is walked, so every answer is the walk's. And a new leg's way ahead is checked from its far end
(only whether any point is seen matters there), where a failing heading is usually seen.

:func:`aim_angles` is the angle from each command's view to its player's phantom (every applied
command asks), with :func:`reference_aim_angles` its numpy formulation.

Floats are IEEE double without fast-math (deterministic, as every kernel here).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from world.geometry import MapGeometry
from world.ray_kernel import piece_blocks, walk
from world.sweep_kernel import circles_blocked, sweep

__all__ = [
    "EYES", "PARAMS", "PhantomArrays", "advance", "aim_angles", "reference_aim_angles", "reference_update", "resume",
]

DIRECTIONS = 6
"""Directions, besides its velocity, in which a viewer's eye is moved at top speed."""
EYES = DIRECTIONS + 2
"""Eyes checked per viewer: where it is, where its velocity takes it, the six directions."""
PATH_STEP_M = 0.4
"""Spacing of the checked points along the path ahead (m)."""

PARAMS = (
    "dt_s", "period_s", "horizon_margin_s", "lateral_m", "min_range_sq", "max_range_sq", "lifetime_s", "gap_s",
    "speed_min_m_s", "speed_max_m_s", "leg_min_s", "leg_max_s", "top_m", "eye_z_m", "top_speed_m_s",
    "player_radius_m",
)
"""The float parameters, in the order of the ``params`` array (m, s, m/s; ranges squared, m^2)."""
(_DT, _PERIOD, _MARGIN, _LATERAL, _MIN_SQ, _MAX_SQ, _LIFETIME, _GAP, _SPEED_MIN, _SPEED_MAX, _LEG_MIN, _LEG_MAX,
 _TOP, _EYE_Z, _TOP_SPEED, _RADIUS) = range(len(PARAMS))
_PLACED, _REMOVED, _NEXT_SERIAL = range(3)


class PhantomArrays:
    """Every viewer's phantom as arrays by viewer slot, written in place by the kernels.

    shown (C,) bool; pos, vel, leg_end (C, 3) feet, velocity, end of the current leg (m, m/s);
    yaw, pitch (C,) deg; weapon (C,) id; health (C,); serial (C,); expires, next_place (C,) s;
    trail (C, L, 2) the positions at the last L checks (m), oldest first, trail_n (C,) how many;
    counters (3,) placed, removed early, next serial; hints (C, EYES, 3) the piece that last
    stopped each (eye, sample) ray (-1: none), a hint only.
    """

    __slots__ = ("counters", "expires", "health", "hints", "leg_end", "next_place", "pitch", "pos", "serial", "shown",
                 "trail", "trail_n", "vel", "weapon", "yaw")

    def __init__(self, capacity: int, trail_len: int) -> None:
        self.shown = np.zeros(capacity, dtype=np.bool_)
        self.pos = np.zeros((capacity, 3))
        self.vel = np.zeros((capacity, 3))
        self.yaw = np.zeros(capacity)
        self.pitch = np.zeros(capacity)
        self.weapon = np.zeros(capacity, dtype=np.int64)
        self.health = np.zeros(capacity)
        self.serial = np.zeros(capacity, dtype=np.int64)
        self.leg_end = np.zeros((capacity, 3))
        self.expires = np.zeros(capacity)
        self.next_place = np.zeros(capacity)
        self.trail = np.zeros((capacity, trail_len, 2))
        self.trail_n = np.zeros(capacity, dtype=np.int64)
        self.counters = np.array([0, 0, 1], dtype=np.int64)
        self.hints = np.full((capacity, EYES, 3), -1, dtype=np.int32)

    def state(self) -> tuple[np.ndarray, ...]:
        """The state arrays :func:`advance` and :func:`resume` take, in their order (``hints`` follows)."""
        return (self.shown, self.pos, self.vel, self.yaw, self.pitch, self.weapon, self.health, self.serial,
                self.leg_end, self.expires, self.next_place, self.trail, self.trail_n, self.counters)

    def remove(self, v: int, now_s: float, gap_s: float, *, early: bool) -> None:
        """Take viewer ``v``'s phantom away at ``now_s`` (s); the next one ``gap_s`` (s) later."""
        self.shown[v] = False
        self.vel[v] = 0.0
        self.trail_n[v] = 0
        self.next_place[v] = now_s + gap_s
        self.counters[_REMOVED] += early


# ---------------------------------------------------------------------------------- the kernel


@numba.njit(cache=True, nogil=True)
def _remove(v: int, now_s: float, early: bool, shown: np.ndarray, vel: np.ndarray, next_place: np.ndarray,
            trail_n: np.ndarray, counters: np.ndarray, gap_s: float) -> None:  # pragma: no cover - compiled
    shown[v] = False
    vel[v, 0] = vel[v, 1] = vel[v, 2] = 0.0
    trail_n[v] = 0
    next_place[v] = now_s + gap_s
    if early:
        counters[_REMOVED] += 1


@numba.njit(cache=True, nogil=True)
def _first_seen(
    eyes: np.ndarray, feet: np.ndarray, n_feet: int, lateral_m: float, top_m: float, hints: np.ndarray,
    marks: np.ndarray, stamp: np.ndarray, ray: tuple, backwards: bool = False,
) -> int:  # pragma: no cover - compiled
    """Index of the first of ``feet[:n_feet]`` (m) (the last, ``backwards``) at which a
    phantom's checked points (its top and both sides ``lateral_m`` beside it, at ``top_m``) are
    in line of sight of one of ``eyes`` (E, 3) (m); -1 when every one is hidden. ``hints[e, j]``
    is tried before each walk and takes the piece that stopped the walk. ``ray``: the map's
    ray-walk arguments."""
    frame, n_box, boxes, cv_height, cv_planes, cv_edges = ray[0], ray[2], ray[3], ray[4], ray[5], ray[6]
    n_eyes = eyes.shape[0]
    for i in range(n_feet):
        k = n_feet - 1 - i if backwards else i
        fx, fy = feet[k, 0], feet[k, 1]
        for e in range(n_eyes):
            ex, ey, ez = eyes[e, 0], eyes[e, 1], eyes[e, 2]
            dx, dy = fx - ex, fy - ey
            norm = math.hypot(dx, dy)
            if norm < 1e-9:
                norm = 1.0
            sx, sy = -dy / norm * lateral_m, dx / norm * lateral_m
            for j in range(3):
                if j == 0:
                    px, py = fx, fy
                elif j == 1:
                    px, py = fx + sx, fy + sy
                else:
                    px, py = fx - sx, fy - sy
                vx, vy, vz = px - ex, py - ey, top_m - ez
                piece = hints[e, j]
                if piece >= 0 and piece_blocks(piece, ex, ey, ez, vx, vy, vz, 1.0, frame, n_box, boxes, cv_height,
                                               cv_planes, cv_edges):
                    continue
                stamp[0] += 1
                hit, piece = walk(ex, ey, ez, vx, vy, vz, 1.0, True, *ray, marks, stamp[0])
                if hit == math.inf:
                    return k
                hints[e, j] = piece
    return -1


@numba.njit(cache=True, nogil=True)
def _write_path(feet: np.ndarray, first: int, sx: float, sy: float, dx: float, dy: float,
                reach: float) -> int:  # pragma: no cover - compiled
    """Write the points from (sx, sy) along the unit (dx, dy) up to ``reach`` (m), at most
    PATH_STEP_M apart, the start excluded, into ``feet`` from row ``first``; returns the rows
    used in all (``feet`` has room for :func:`_path_rows` of them from ``first``)."""
    n = max(1, math.ceil(reach / PATH_STEP_M))
    step = reach / n
    for k in range(1, n + 1):
        d = k * step
        feet[first + k - 1, 0] = sx + d * dx
        feet[first + k - 1, 1] = sy + d * dy
    return first + n


@numba.njit(cache=True, nogil=True)
def _path_rows(reach: float) -> int:  # pragma: no cover - compiled
    return max(1, math.ceil(reach / PATH_STEP_M))


@numba.njit(cache=True, nogil=True)
def _eyes(eyes: np.ndarray, px: float, py: float, pz: float, vx: float, vy: float, horizon: float,
          params: np.ndarray, swept: tuple) -> None:  # pragma: no cover - compiled
    """The (EYES, 3) eyes a viewer at (px, py, pz) moving at (vx, vy) may have until the next
    check (m), at a jump's top: where it is, where its velocity takes it in ``horizon`` (s) and
    at top speed in DIRECTIONS directions, each move swept against the walls (``swept``: the
    map's sweep arguments)."""
    reach = params[_TOP_SPEED] * horizon
    z = max(0.0, pz) + params[_EYE_Z]
    eyes[0, 0], eyes[0, 1], eyes[0, 2] = px, py, z
    for k in range(DIRECTIONS + 1):
        if k == 0:
            tx, ty = px + vx * horizon, py + vy * horizon
        else:
            angle = (k - 1) * (2.0 * math.pi / DIRECTIONS)
            tx, ty = px + reach * math.cos(angle), py + reach * math.sin(angle)
        ex, ey, _, _, _, _ = sweep(px, py, tx, ty, *swept)
        eyes[k + 1, 0], eyes[k + 1, 1], eyes[k + 1, 2] = ex, ey, z


@numba.njit(cache=True, nogil=True)
def _new_leg(
    v: int, eyes: np.ndarray, rng: np.random.Generator, headings: int, params: np.ndarray, state: tuple,
    hints: np.ndarray, marks: np.ndarray, stamp: np.ndarray, ray: tuple, swept: tuple,
) -> bool:  # pragma: no cover - compiled
    """A new straight leg from the phantom's position, at a random heading and speed, whose next
    positions stay hidden from ``eyes``; False when none of ``headings`` tries is."""
    pos, vel, yaw, pitch, leg_end = state[1], state[2], state[3], state[4], state[8]
    sx, sy = pos[v, 0], pos[v, 1]
    ahead_s = params[_PERIOD] + params[_MARGIN]
    for _ in range(headings):
        heading = rng.uniform(0.0, 2.0 * math.pi)
        speed = rng.uniform(params[_SPEED_MIN], params[_SPEED_MAX])
        length = speed * rng.uniform(params[_LEG_MIN], params[_LEG_MAX])
        dx, dy = math.cos(heading), math.sin(heading)
        ex, ey, _, _, _, _ = sweep(sx, sy, sx + dx * length, sy + dy * length, *swept)
        moved = math.hypot(ex - sx, ey - sy)
        if moved < 0.5:
            continue
        reach = min(moved, speed * ahead_s)
        feet = np.empty((_path_rows(reach), 2))
        n = _write_path(feet, 0, sx, sy, dx, dy, reach)
        # Whether any is seen, not which: the farthest first, the likeliest to be.
        if _first_seen(eyes, feet, n, params[_LATERAL], params[_TOP], hints, marks, stamp, ray, True) >= 0:
            continue
        leg_end[v, 0], leg_end[v, 1], leg_end[v, 2] = ex, ey, 0.0
        vel[v, 0], vel[v, 1], vel[v, 2] = dx * speed, dy * speed, 0.0
        y = math.degrees(heading) + rng.normal(0.0, 8.0)
        yaw[v] = (y + 180.0) % 360.0 - 180.0
        pitch[v] = rng.normal(0.0, 3.0)
        return True
    return False


_DONE, _LEG, _PLACE = 0, 1, 2
"""What a viewer's check left to do: nothing, a new leg (drawn), a placement (drawn)."""


@numba.njit(cache=True, nogil=True)
def _check(
    v: int, now_s: float, horizon: float, world_pos: np.ndarray, world_vel: np.ndarray, state: tuple,
    hints: np.ndarray, params: np.ndarray, eyes: np.ndarray, marks: np.ndarray, stamp: np.ndarray, ray: tuple,
    swept: tuple,
) -> int:  # pragma: no cover - compiled
    """The draw-free part of viewer ``v``'s turn: _DONE (hidden, or removed), _LEG (its trail is
    hidden but not its way ahead, or its leg is over: ``eyes`` hold its eyes) or _PLACE (none
    shown and one is due)."""
    (shown, pos, vel, _, _, _, _, _, leg_end, expires, next_place, trail, trail_n, counters) = state
    gap = params[_GAP]
    if not shown[v]:
        return _PLACE if now_s >= next_place[v] else _DONE
    if now_s >= expires[v]:
        _remove(v, now_s, False, shown, vel, next_place, trail_n, counters, gap)
        return _DONE
    trail_len = trail.shape[1]
    n_t = trail_n[v]
    if n_t == trail_len:
        for k in range(trail_len - 1):
            trail[v, k, 0], trail[v, k, 1] = trail[v, k + 1, 0], trail[v, k + 1, 1]
        n_t -= 1
    trail[v, n_t, 0], trail[v, n_t, 1] = pos[v, 0], pos[v, 1]
    n_t += 1
    trail_n[v] = n_t
    _eyes(eyes, world_pos[v, 0], world_pos[v, 1], world_pos[v, 2], world_vel[v, 0], world_vel[v, 1], horizon, params,
          swept)
    sx, sy = pos[v, 0], pos[v, 1]
    lx, ly = leg_end[v, 0] - sx, leg_end[v, 1] - sy
    leg_left = math.hypot(lx, ly)
    speed = math.hypot(vel[v, 0], vel[v, 1])
    lateral, top = params[_LATERAL], params[_TOP]
    if leg_left > 1e-6 and speed > 0.0:
        # The trail, then the way ahead: the usual case, both hidden. Seen on the way ahead
        # only, the trail is known hidden.
        reach = min(leg_left, speed * (params[_PERIOD] + params[_MARGIN]))
        feet = np.empty((n_t + _path_rows(reach), 2))
        feet[:n_t] = trail[v, :n_t]
        n = _write_path(feet, n_t, sx, sy, lx / leg_left, ly / leg_left, reach)
        seen = _first_seen(eyes, feet, n, lateral, top, hints[v], marks, stamp, ray)
        if seen < 0:
            return _DONE
        trail_hidden = seen >= n_t
    else:
        trail_hidden = _first_seen(eyes, trail[v], n_t, lateral, top, hints[v], marks, stamp, ray) < 0
    if not trail_hidden:
        _remove(v, now_s, True, shown, vel, next_place, trail_n, counters, gap)
        return _DONE
    return _LEG


@numba.njit(cache=True, nogil=True)
def _place(
    v: int, now_s: float, horizon: float, world_pos: np.ndarray, world_vel: np.ndarray, state: tuple,
    hints: np.ndarray, rng: np.random.Generator, weapons: np.ndarray, params: np.ndarray, candidates: int,
    headings: int, eyes: np.ndarray, marks: np.ndarray, stamp: np.ndarray, ray: tuple, swept: tuple,
) -> None:  # pragma: no cover - compiled
    """Place viewer ``v``'s phantom: ``candidates`` random positions, the first free and hidden
    one from which a hidden leg starts; none: the next try ``gap_s`` later."""
    (shown, pos, vel, _, _, weapon, health, serial, _, expires, next_place, trail, trail_n, counters) = state
    # Every angle, then every radius, drawn as the numpy formulation draws them.
    at = np.empty((candidates, 2))
    for i in range(candidates):
        at[i, 0] = rng.uniform(0.0, 2.0 * math.pi)
    for i in range(candidates):
        at[i, 1] = math.sqrt(rng.uniform(params[_MIN_SQ], params[_MAX_SQ]))
    px, py = world_pos[v, 0], world_pos[v, 1]
    for i in range(candidates):
        angle, radius = at[i, 0], at[i, 1]
        at[i, 0], at[i, 1] = px + radius * math.cos(angle), py + radius * math.sin(angle)
    blocked = circles_blocked(at, params[_RADIUS], *swept)
    if not blocked.all():
        _eyes(eyes, px, py, world_pos[v, 2], world_vel[v, 0], world_vel[v, 1], horizon, params, swept)
        vh = hints[v]
        for i in range(candidates):
            if blocked[i] or _first_seen(eyes, at[i:i + 1], 1, params[_LATERAL], params[_TOP], vh, marks, stamp,
                                         ray) >= 0:
                continue
            pos[v, 0], pos[v, 1], pos[v, 2] = at[i, 0], at[i, 1], 0.0
            vel[v, 0] = vel[v, 1] = vel[v, 2] = 0.0
            trail[v, 0, 0], trail[v, 0, 1] = at[i, 0], at[i, 1]
            trail_n[v] = 1
            if not _new_leg(v, eyes, rng, headings, params, state, vh, marks, stamp, ray, swept):
                continue
            shown[v] = True
            serial[v] = counters[_NEXT_SERIAL]
            counters[_NEXT_SERIAL] += 1
            expires[v] = now_s + params[_LIFETIME]
            weapon[v] = weapons[rng.integers(0, weapons.shape[0])]
            health[v] = 100.0 if rng.random() < 0.6 else float(rng.integers(20, 100))
            counters[_PLACED] += 1
            return
    next_place[v] = now_s + params[_GAP]


@numba.njit(cache=True, nogil=True)
def advance(
    tick: int, now_s: float, slot: int, active: np.ndarray, alive: np.ndarray, period_ticks: int, rtt_s: np.ndarray,
    world_pos: np.ndarray, world_vel: np.ndarray,
    shown: np.ndarray, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, weapon: np.ndarray,
    health: np.ndarray, serial: np.ndarray, leg_end: np.ndarray, expires: np.ndarray, next_place: np.ndarray,
    trail: np.ndarray, trail_n: np.ndarray, counters: np.ndarray, hints: np.ndarray, eyes: np.ndarray,
    params: np.ndarray,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
    sframe: np.ndarray, gnx: int, gny: int, edges: np.ndarray, scell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """One tick of every phantom up to the first draw (see :func:`reference_update` for what a
    tick does): the phantoms' slot (the highest no player holds, -1: none; a new one removes
    every phantom), each shown phantom's step along its leg, those of gone viewers (not active
    and alive) removed, then this tick's viewers (active, alive, slot % period_ticks == tick %
    period_ticks) checked in slot order until one needs the generator. Returns (the slot, that
    viewer or -1 when none does, what it needs: _LEG with its eyes in ``eyes``, or _PLACE);
    :func:`resume` goes on from there. Unboxing a generator costs a call ~20 us, and most
    ticks draw nothing."""
    capacity = shown.shape[0]
    dt, gap = params[_DT], params[_GAP]
    free = -1
    for v in range(capacity - 1, -1, -1):
        if not active[v]:
            free = v
            break
    if free != slot:
        for v in range(capacity):
            if shown[v]:
                _remove(v, now_s, True, shown, vel, next_place, trail_n, counters, gap)
    for v in range(capacity):
        if not shown[v]:
            continue
        sx, sy, sz = vel[v, 0] * dt, vel[v, 1] * dt, vel[v, 2] * dt
        lx, ly, lz = leg_end[v, 0] - pos[v, 0], leg_end[v, 1] - pos[v, 1], leg_end[v, 2] - pos[v, 2]
        if lx * lx + ly * ly + lz * lz <= sx * sx + sy * sy + sz * sz:
            pos[v, 0], pos[v, 1], pos[v, 2] = leg_end[v, 0], leg_end[v, 1], leg_end[v, 2]
            vel[v, 0] = vel[v, 1] = vel[v, 2] = 0.0
        else:
            pos[v, 0], pos[v, 1], pos[v, 2] = pos[v, 0] + sx, pos[v, 1] + sy, pos[v, 2] + sz
    for v in range(capacity):
        if shown[v] and not (active[v] and alive[v]):
            _remove(v, now_s, True, shown, vel, next_place, trail_n, counters, gap)
    if free < 0:
        return free, -1, _DONE
    state = (shown, pos, vel, yaw, pitch, weapon, health, serial, leg_end, expires, next_place, trail, trail_n,
             counters)
    ray = (frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges, cell_start, cell_items, skip)
    swept = (sframe, gnx, gny, edges, scell_start, cell_edges, poly_first, cell_poly_start, cell_polys)
    marks = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    phase = tick % period_ticks
    for v in range(capacity):
        if not (active[v] and alive[v]) or v % period_ticks != phase:
            continue
        horizon = rtt_s[v] + params[_PERIOD] + params[_MARGIN]
        need = _check(v, now_s, horizon, world_pos, world_vel, state, hints, params, eyes, marks, stamp, ray, swept)
        if need != _DONE:
            return free, v, need
    return free, -1, _DONE


@numba.njit(cache=True, nogil=True)
def resume(
    tick: int, now_s: float, first: int, need: int, active: np.ndarray, alive: np.ndarray, period_ticks: int,
    rtt_s: np.ndarray, world_pos: np.ndarray, world_vel: np.ndarray,
    shown: np.ndarray, pos: np.ndarray, vel: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, weapon: np.ndarray,
    health: np.ndarray, serial: np.ndarray, leg_end: np.ndarray, expires: np.ndarray, next_place: np.ndarray,
    trail: np.ndarray, trail_n: np.ndarray, counters: np.ndarray, hints: np.ndarray, eyes: np.ndarray,
    rng: np.random.Generator, weapons: np.ndarray, params: np.ndarray, candidates: int, headings: int,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
    sframe: np.ndarray, gnx: int, gny: int, edges: np.ndarray, scell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The rest of the tick :func:`advance` stopped at viewer ``first`` needing ``need``: that
    viewer's new leg (removed without one) or placement, then every later viewer of the tick,
    drawing from ``rng``."""
    state = (shown, pos, vel, yaw, pitch, weapon, health, serial, leg_end, expires, next_place, trail, trail_n,
             counters)
    ray = (frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges, cell_start, cell_items, skip)
    swept = (sframe, gnx, gny, edges, scell_start, cell_edges, poly_first, cell_poly_start, cell_polys)
    marks = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    phase = tick % period_ticks
    for v in range(first, shown.shape[0]):
        if not (active[v] and alive[v]) or v % period_ticks != phase:
            continue
        horizon = rtt_s[v] + params[_PERIOD] + params[_MARGIN]
        if v != first:
            need = _check(v, now_s, horizon, world_pos, world_vel, state, hints, params, eyes, marks, stamp, ray,
                          swept)
        if need == _LEG:
            if not _new_leg(v, eyes, rng, headings, params, state, hints[v], marks, stamp, ray, swept):
                _remove(v, now_s, True, shown, vel, next_place, trail_n, counters, params[_GAP])
        elif need == _PLACE:
            _place(v, now_s, horizon, world_pos, world_vel, state, hints, rng, weapons, params, candidates, headings,
                   eyes, marks, stamp, ray, swept)


@numba.njit(cache=True, nogil=True)
def aim_angles(
    slots: np.ndarray, eye: np.ndarray, cos_yaw: np.ndarray, cos_pitch: np.ndarray, sin_yaw: np.ndarray,
    sin_pitch: np.ndarray, shown: np.ndarray, pos: np.ndarray, chest_m: float, out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Per command of the players ``slots`` with eyes ``eye`` (k, 3) (m) and views given by
    their cosines and sines: the angle (deg) between the view and the chest (``chest_m`` above
    the feet) of the player's phantom into ``out``, 180 without one. The numpy formulation's
    operations in its order (:func:`reference_aim_angles`)."""
    for i in range(slots.shape[0]):
        v = slots[i]
        if not shown[v]:
            out[i] = 180.0
            continue
        tx, ty, tz = pos[v, 0] - eye[i, 0], pos[v, 1] - eye[i, 1], (pos[v, 2] + chest_m) - eye[i, 2]
        # x, z, then y: the order numpy's einsum summed the three products in (see the reference).
        dist = math.sqrt((tx * tx + tz * tz) + ty * ty)
        if dist < 1e-9:
            dist = 1.0
        cp = cos_pitch[i]
        c = (cp * cos_yaw[i] * tx + cp * sin_yaw[i] * ty + sin_pitch[i] * tz) / dist
        if c < -1.0:
            c = -1.0
        elif c > 1.0:
            c = 1.0
        out[i] = math.degrees(math.acos(c))


def reference_aim_angles(slots: np.ndarray, eye: np.ndarray, cos_sin: np.ndarray, shown: np.ndarray,
                         pos: np.ndarray, chest_m: float) -> np.ndarray:
    """:func:`aim_angles` in numpy (``cos_sin`` (2, 2, k): cos then sin, each of yaw then pitch),
    as the phantoms first computed it."""
    chest = pos[slots].copy()
    chest[:, 2] += chest_m
    to = chest - eye
    # np.einsum("ij,ij->i", to, to) summed x, z, then y (its SIMD pairs) where the phantoms were first
    # recorded; written out so that the order does not depend on the build.
    dist = np.sqrt((to[:, 0] * to[:, 0] + to[:, 2] * to[:, 2]) + to[:, 1] * to[:, 1])
    dist[dist < 1e-9] = 1.0
    (cy, cp), (sy, sp) = cos_sin
    cos = (cp * cy * to[:, 0] + cp * sy * to[:, 1] + sp * to[:, 2]) / dist
    # The C library's acos, as the kernel calls it: numpy's own arccos (SIMD on AVX-512 machines)
    # differs from it by an ulp on about one value in ten.
    angle = np.degrees(np.array([math.acos(c) for c in np.clip(cos, -1.0, 1.0).tolist()], dtype=np.float64))
    angle[~shown[slots]] = 180.0
    return angle


# ------------------------------------------------------------------------------- the reference


def reference_update(
    tick: int, now_s: float, has_slot: bool, live: np.ndarray, period_ticks: int, rtt_s: np.ndarray,
    world_pos: np.ndarray, world_vel: np.ndarray, arrays: PhantomArrays, rng: np.random.Generator,
    weapons: np.ndarray, params: np.ndarray, candidates: int, headings: int, geometry: MapGeometry,
) -> None:
    """One tick of :func:`advance` then :func:`resume` in numpy, as the phantoms first ran (the
    reference the kernels are held to).

    Args:
        tick: server tick. now_s: its time (s). has_slot: a slot is free for the phantoms (else
            they only walk, and those of gone viewers are removed). live: (C,) active and alive
            players. period_ticks: ticks between two checks of a viewer. rtt_s: (C,) each
            viewer's round trip (s). world_pos, world_vel: (C, 3) the players' feet (m) and
            velocities (m/s). arrays: the phantoms, written in place. rng: the generator every
            choice is drawn from. weapons: the weapon ids a phantom may hold. params: the
            :data:`PARAMS`. candidates: positions tried per placement. headings: tries per leg.
            geometry: the map.
    """
    a = arrays
    dt, gap = float(params[_DT]), float(params[_GAP])
    shown = a.shown
    if shown.any():
        step = a.vel[shown] * dt
        left = a.leg_end[shown] - a.pos[shown]
        done = np.einsum("ij,ij->i", left, left) <= np.einsum("ij,ij->i", step, step)
        a.pos[shown] = np.where(done[:, None], a.leg_end[shown], a.pos[shown] + step)
        vel = a.vel[shown]
        vel[done] = 0.0
        a.vel[shown] = vel
    for v in np.flatnonzero(shown & ~live).tolist():
        a.remove(v, now_s, gap, early=True)
    if not has_slot:
        return
    ref = _Reference(a, rng, weapons, params, candidates, headings, geometry)
    capacity = len(shown)
    mine = np.flatnonzero(live & (np.arange(capacity) % period_ticks == tick % period_ticks))
    for v in mine.tolist():
        horizon = float(rtt_s[v]) + float(params[_PERIOD]) + float(params[_MARGIN])
        if a.shown[v]:
            ref.check(v, now_s, world_pos, world_vel, horizon)
        elif now_s >= a.next_place[v]:
            ref.place(v, now_s, world_pos, world_vel, horizon)


class _Reference:
    """The numpy formulation's per-viewer steps (see :func:`reference_update`)."""

    def __init__(self, arrays: PhantomArrays, rng: np.random.Generator, weapons: np.ndarray, params: np.ndarray,
                 candidates: int, headings: int, geometry: MapGeometry) -> None:
        self.a = arrays
        self.rng = rng
        self.weapons = weapons
        self.p = {name: float(params[i]) for i, name in enumerate(PARAMS)}
        self.candidates = candidates
        self.headings = headings
        self.geometry = geometry

    def check(self, v: int, now_s: float, world_pos: np.ndarray, world_vel: np.ndarray, horizon: float) -> None:
        a, p = self.a, self.p
        if now_s >= a.expires[v]:
            a.remove(v, now_s, p["gap_s"], early=False)
            return
        trail = [tuple(xy) for xy in a.trail[v, : a.trail_n[v]].tolist()]
        trail.append((float(a.pos[v, 0]), float(a.pos[v, 1])))
        del trail[: -a.trail.shape[1]]
        a.trail[v, : len(trail)] = trail
        a.trail_n[v] = len(trail)
        eyes = self.eyes(v, world_pos, world_vel, horizon)
        start = a.pos[v, :2]
        left = a.leg_end[v, :2] - start
        leg_left = float(np.hypot(*left))
        speed = float(np.hypot(*a.vel[v, :2]))
        if leg_left > 1e-6 and speed > 0.0:
            reach = min(leg_left, speed * (p["period_s"] + p["horizon_margin_s"]))
            if self.hidden(eyes, np.vstack((np.array(trail), _path(start, left / leg_left, reach)))):
                return
        if not self.hidden(eyes, np.array(trail)) or not self.new_leg(v, eyes):
            a.remove(v, now_s, p["gap_s"], early=True)

    def place(self, v: int, now_s: float, world_pos: np.ndarray, world_vel: np.ndarray, horizon: float) -> None:
        a, p, rng = self.a, self.p, self.rng
        n = self.candidates
        angle = rng.uniform(0.0, 2.0 * math.pi, n)
        radius = np.sqrt(rng.uniform(p["min_range_sq"], p["max_range_sq"], n))
        at = world_pos[v, :2] + radius[:, None] * np.column_stack((np.cos(angle), np.sin(angle)))
        free = ~self.geometry.circle_blocked(at, p["player_radius_m"])
        if not free.any():
            a.next_place[v] = now_s + p["gap_s"]
            return
        eyes = self.eyes(v, world_pos, world_vel, horizon)
        for q in at[free]:
            if not self.hidden(eyes, q[None, :]):
                continue
            a.pos[v] = (q[0], q[1], 0.0)
            a.vel[v] = 0.0
            a.trail[v, 0] = q
            a.trail_n[v] = 1
            if not self.new_leg(v, eyes):
                continue
            a.shown[v] = True
            a.serial[v] = a.counters[_NEXT_SERIAL]
            a.counters[_NEXT_SERIAL] += 1
            a.expires[v] = now_s + p["lifetime_s"]
            a.weapon[v] = int(rng.choice(self.weapons))
            a.health[v] = 100.0 if rng.random() < 0.6 else float(rng.integers(20, 100))
            a.counters[_PLACED] += 1
            return
        a.next_place[v] = now_s + p["gap_s"]

    def new_leg(self, v: int, eyes: np.ndarray) -> bool:
        a, p, rng = self.a, self.p, self.rng
        start = a.pos[v, :2].copy()
        for _ in range(self.headings):
            heading = rng.uniform(0.0, 2.0 * math.pi)
            speed = rng.uniform(p["speed_min_m_s"], p["speed_max_m_s"])
            length = speed * rng.uniform(p["leg_min_s"], p["leg_max_s"])
            direction = np.array([math.cos(heading), math.sin(heading)])
            end = self.geometry.sweep(start[None, :], (start + direction * length)[None, :]).end[0]
            if float(np.hypot(*(end - start))) < 0.5:
                continue
            reach = min(float(np.hypot(*(end - start))), speed * (p["period_s"] + p["horizon_margin_s"]))
            if not self.hidden(eyes, _path(start, direction, reach)):
                continue
            a.leg_end[v] = (end[0], end[1], 0.0)
            a.vel[v] = (direction[0] * speed, direction[1] * speed, 0.0)
            a.yaw[v] = math.degrees(heading) + rng.normal(0.0, 8.0)
            a.yaw[v] = (a.yaw[v] + 180.0) % 360.0 - 180.0
            a.pitch[v] = rng.normal(0.0, 3.0)
            return True
        return False

    def eyes(self, v: int, world_pos: np.ndarray, world_vel: np.ndarray, horizon: float) -> np.ndarray:
        pos = world_pos[v, :2]
        reach = self.p["top_speed_m_s"] * horizon
        angles = np.arange(DIRECTIONS) * (2.0 * math.pi / DIRECTIONS)
        targets = np.vstack((pos + world_vel[v, :2] * horizon,
                             pos + reach * np.column_stack((np.cos(angles), np.sin(angles)))))
        ends = self.geometry.sweep(np.tile(pos, (len(targets), 1)), targets).end
        eyes = np.empty((len(ends) + 1, 3))
        eyes[0, :2] = pos
        eyes[1:, :2] = ends
        eyes[:, 2] = max(0.0, float(world_pos[v, 2])) + self.p["eye_z_m"]
        return eyes

    def hidden(self, eyes: np.ndarray, feet: np.ndarray) -> bool:
        e = np.repeat(eyes, len(feet), axis=0)
        f = np.tile(feet, (len(eyes), 1))
        d = f - e[:, :2]
        norm = np.hypot(d[:, 0], d[:, 1])
        norm[norm < 1e-9] = 1.0
        side = np.column_stack((-d[:, 1], d[:, 0])) / norm[:, None] * self.p["lateral_m"]
        points = np.empty((3 * len(f), 3))
        points[:, :2] = np.vstack((f, f + side, f - side))
        points[:, 2] = self.p["top_m"]
        return not self.geometry.los_clear(np.tile(e, (3, 1)), points).any()


def _path(start: np.ndarray, direction: np.ndarray, reach: float) -> np.ndarray:
    """(F, 2) points from ``start`` along the unit ``direction`` up to ``reach`` (m), at most
    PATH_STEP_M apart, the start excluded (it is checked with the trail)."""
    n = max(1, math.ceil(reach / PATH_STEP_M))
    return start + np.outer(np.arange(1, n + 1) * (reach / n), direction)
