"""The straightforward one-shot-at-a-time hit registration: the baseline and the test oracle.

Everything :func:`lagcomp.hitreg.register_shots` does, written the obvious way and independently
of it: a Python loop over shots; per shot a Python loop over players that rewinds each one from
the two raw history records with scalar math (same rules: no extrapolation, clamp to the oldest
record, no interpolation across a generation change, a dead record or a teleport jump), a scalar
bounding-cylinder check, then every bone capsule of the surviving players with
``world.hitbox.ray_capsule``; walls with one shapely LineString per shot against the map's wall
footprints (prisms of their height, bounds as infinite walls). Same answers, much slower; the
benchmark and the tests compare the two.

Units: meters, seconds, degrees.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np
import shapely

from lagcomp.config import HitregConfig
from lagcomp.hitreg import BaitTargets, HitBatch, ShotBatch
from lagcomp.history import TickHistory
from world.hitbox import BONE_IDS, BOUND_RADIUS, ray_capsule, world_capsules
from world.mapfile import GameMap


class NaiveWalls:
    """Wall prisms of a map queried one ray at a time with shapely (the LOS baseline)."""

    def __init__(self, game_map: GameMap) -> None:
        self._polys = [shapely.Polygon(w.polygon) for w in game_map.walls]
        self._heights = [w.height for w in game_map.walls]
        self._tree = shapely.STRtree(self._polys)
        self._bounds = game_map.bounds

    def first_wall_hit(self, origin: np.ndarray, direction: np.ndarray, max_dist: float) -> float:
        """Distance (m) along one unit ray to the first point inside or on a wall prism (at or below
        its top) or on the bounds within max_dist, else inf; 0 when starting in a wall or outside."""
        ox, oy, oz = (float(v) for v in origin)
        dx, dy, dz = (float(v) for v in direction)
        xmin, ymin, xmax, ymax = self._bounds
        if ox <= xmin or ox >= xmax or oy <= ymin or oy >= ymax:
            return 0.0
        best = math.inf
        tx = (xmax - ox) / dx if dx > 0 else ((xmin - ox) / dx if dx < 0 else math.inf)
        ty = (ymax - oy) / dy if dy > 0 else ((ymin - oy) / dy if dy < 0 else math.inf)
        t_exit = min(tx, ty)
        if t_exit <= max_dist:
            best = t_exit
        t_end = min(max_dist, t_exit)
        h = math.hypot(dx, dy)
        if h == 0.0:
            point = shapely.Point(ox, oy)
            for i in self._tree.query(point, predicate="intersects"):
                height = self._heights[i]
                if oz <= height:
                    return 0.0
                if dz < 0.0:
                    t = (height - oz) / dz
                    if t <= t_end:
                        best = min(best, t)
            return best
        line = shapely.LineString([(ox, oy), (ox + dx * t_end, oy + dy * t_end)])
        for i in self._tree.query(line, predicate="intersects"):
            height = self._heights[i]
            inter = line.intersection(self._polys[i])
            for piece in getattr(inter, "geoms", [inter]):
                if piece.is_empty:
                    continue
                ts = [math.hypot(x - ox, y - oy) / h for x, y in piece.coords]
                ta, tb = min(ts), max(ts)
                if oz + ta * dz <= height:
                    best = min(best, ta)
                elif dz < 0.0:
                    t = (height - oz) / dz
                    if ta <= t <= tb:
                        best = min(best, t)
        return best


def _wrap(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


def register_shots_naive(
    batch: ShotBatch,
    history: TickHistory,
    walls: NaiveWalls,
    now_s: float,
    config: HitregConfig | None = None,
    baits: BaitTargets | None = None,
) -> HitBatch:
    """Same contract as :func:`lagcomp.hitreg.register_shots`, one shot at a time."""
    cfg = config or HitregConfig()
    margin = cfg.broad_margin_m
    jump2 = history.config.teleport_jump_m ** 2
    times = history.times_s().tolist()
    n_players = history.max_players
    s_total = len(batch)
    out_victim = np.full(s_total, -1, dtype=np.int32)
    out_bone = np.zeros(s_total, dtype=np.int8)
    out_dist = np.zeros(s_total)
    out_blocked = np.zeros(s_total, dtype=bool)
    out_occluded = np.full(s_total, -1, dtype=np.int32)
    out_vpos = np.full((s_total, 3), np.nan)
    out_speed = np.zeros(s_total)
    out_gen = np.zeros(s_total, dtype=np.uint32)
    out_clamped = np.zeros(s_total, dtype=bool)
    out_bait = np.zeros(s_total, dtype=bool)
    out_bait_idx = np.full(s_total, -1, dtype=np.int32)

    for s in range(s_total):
        t = min(float(batch.time_s[s]), float(now_s))
        origin = batch.origin[s]
        direction = batch.direction[s]
        ox, oy, oz = (float(v) for v in origin)
        dx, dy, dz = (float(v) for v in direction)
        rng = float(batch.max_range[s])
        shooter = int(batch.shooter[s])

        k = bisect_right(times, t) - 1
        clamped = k < 0
        k = max(k, 0)
        frac = 0.0
        if not clamped and k < len(times) - 1:
            frac = min((t - times[k]) / (times[k + 1] - times[k]), math.nextafter(1.0, 0.0))
        rec0 = history.record_at(k)
        rec1 = history.record_at(k + 1) if k + 1 < len(times) else None
        pos0, vel0 = rec0.pos.tolist(), rec0.vel.tolist()
        yaw0, stance0 = rec0.yaw.tolist(), rec0.stance.tolist()
        alive0, active0, gen0 = rec0.alive.tolist(), rec0.active.tolist(), rec0.generation.tolist()
        if rec1 is not None:
            pos1, vel1, yaw1 = rec1.pos.tolist(), rec1.vel.tolist(), rec1.yaw.tolist()
            alive1, active1, gen1 = rec1.alive.tolist(), rec1.active.tolist(), rec1.generation.tolist()

        h = math.hypot(dx, dy)
        best_t, best_n, best_col = math.inf, -1, -1
        best_pos: list[float] = []
        best_vel: list[float] = []
        for n in range(n_players):
            if n == shooter or not (alive0[n] and active0[n]):
                continue
            p = list(pos0[n])
            v = list(vel0[n])
            yaw = yaw0[n]
            if frac > 0.0 and rec1 is not None:
                jx, jy = pos1[n][0] - p[0], pos1[n][1] - p[1]
                if alive1[n] and active1[n] and gen1[n] == gen0[n] and jx * jx + jy * jy <= jump2:
                    p = [p[i] + frac * (pos1[n][i] - p[i]) for i in range(3)]
                    v = [v[i] + frac * (vel1[n][i] - v[i]) for i in range(3)]
                    yaw = yaw + frac * _wrap(yaw1[n] - yaw)
                    if yaw >= 180.0:
                        yaw -= 360.0
                    if yaw < -180.0:
                        yaw += 360.0
            # Bounding cylinder in 2D (exact distance to the ray's horizontal line).
            r_bound = float(BOUND_RADIUS[stance0[n]]) + margin
            qx, qy = p[0] - ox, p[1] - oy
            if h > 0.0:
                if abs(qx * dy - qy * dx) / h > r_bound or (qx * dx + qy * dy) / h < -r_bound:
                    continue
            if math.hypot(qx, qy) > rng * h + r_bound:
                continue
            a, b, r = world_capsules(np.array([p]), np.array([yaw]), np.array([stance0[n]]))
            tb = ray_capsule(origin, direction, a[0], b[0], r[0])
            col = int(np.argmin(tb))
            tn = float(tb[col])
            if tn <= rng and tn < best_t:
                best_t, best_n, best_col, best_pos, best_vel = tn, n, col, p, v

        wall_t = walls.first_wall_hit(origin, direction, rng)
        out_clamped[s] = clamped
        if best_n >= 0 and not wall_t < best_t:
            out_victim[s] = best_n
            out_bone[s] = BONE_IDS[best_col]
            out_dist[s] = best_t
            out_vpos[s] = best_pos
            out_speed[s] = math.sqrt(sum(c * c for c in best_vel))
            out_gen[s] = gen0[best_n]
        elif wall_t <= rng:
            out_blocked[s] = True
            out_occluded[s] = best_n
            out_dist[s] = wall_t
        else:
            out_dist[s] = rng

        if baits is not None:
            best_bait, best_bait_t = -1, math.inf
            for i in range(baits.a.shape[0]):
                if baits.shooter[i] >= 0 and baits.shooter[i] != shooter:
                    continue
                tb_ = float(ray_capsule(origin, direction, baits.a[i], baits.b[i], baits.radius[i]))
                if tb_ <= rng and tb_ < best_bait_t:
                    best_bait, best_bait_t = i, tb_
            if best_bait >= 0 and best_bait_t < wall_t:
                out_bait[s] = True
                out_bait_idx[s] = best_bait

    return HitBatch(
        victim=out_victim,
        bone=out_bone,
        distance=out_dist,
        hit_point=batch.origin + out_dist[:, None] * batch.direction,
        blocked_by_wall=out_blocked,
        occluded_victim=out_occluded,
        victim_pos=out_vpos,
        victim_speed=out_speed,
        victim_generation=out_gen,
        clamped=out_clamped,
        bait_hit=out_bait,
        bait_index=out_bait_idx,
    )
