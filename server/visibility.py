"""Per-client visibility culling: a player fully behind walls is never sent to an enemy.

Each viewer's visible set is recomputed ``refresh_hz`` times a second, viewers spread over the
ticks so every tick pays the same small share. A target is visible when a line of sight exists from
the viewer's eye to any point of the target's hitbox extents (its centre line from the feet to the
top of the head, and both sides at shoulder height) through walls and low cover, either now or at
both players' positions predicted ``horizon`` seconds ahead from their velocities, where the
horizon covers the viewer's round trip, the refresh period and a margin: a player about to round a
corner is sent before he can be seen, never after (VALORANT's fog of war, REFERENCES 7).

One ray covers the whole centre line. Walls are prisms standing on the floor, and two rays from the
same eye to points on the same vertical line, one above the other, share their ground track while
the higher one is at least as high at every point of it: wherever a prism stops the higher ray
(it is at or below the prism's top there) it stops the lower one too. So if the ray to the top of
the head is blocked, so is the ray to the chest or the knees, and testing those would only cost
time (it did: 40 % of all rays).

Beside what is sent, the culler keeps ``in_sight[viewer, target]``: a line of sight exists now (the
same pass's rays at the players' current positions, so it costs nothing extra). A target sent but
not in sight is one only the prediction sends: a client that draws it (a wallhack) knows where it
is, a human does not. ``in_sight`` is as fresh as the viewer's last refresh (at most
``1 / refresh_hz`` old, 62.5 ms at the default 16 Hz).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from server.config import VisibilityConfig
from world.constants import CROUCHING_EYE_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import BOUND_ZMAX
from world.ray_kernel import piece_blocks, walk
from world.state import WorldLimits, WorldState

_EYE = np.array([STANDING_EYE_M, CROUCHING_EYE_M])
# Sample heights as fractions of the stance's body height: the top of the centre line (it stands
# for every point below it, see the module doc) and the sides at shoulder height.
_TOP_FRACTION = 0.97
_SIDE_FRACTION = 0.70


class VisibilityCuller:
    """Visible-set matrix ``visible[viewer, target]`` (sent: in sight now or predicted to be) over
    player slots, refreshed incrementally, with ``in_sight[viewer, target]`` (a line of sight now,
    as of the viewer's last refresh; always a subset of ``visible``)."""

    def __init__(self, config: VisibilityConfig, geometry: MapGeometry, capacity: int, tick_rate_hz: float) -> None:
        self.config = config
        self.geometry = geometry
        self.visible = np.zeros((capacity, capacity), dtype=bool)
        self.in_sight = np.zeros((capacity, capacity), dtype=bool)
        self.period_ticks = max(1, round(tick_rate_hz / config.refresh_hz))
        self.period_s = self.period_ticks / tick_rate_hz
        self.rays_cast = 0
        self.rays_cached = 0
        self._phase = np.arange(capacity) % self.period_ticks
        # The piece that stopped each (viewer, target, sample) ray at its last refresh: a hint
        # only (see _refresh_rows), so it never needs invalidating.
        self._occluder = np.full((capacity, capacity, 6), -1, dtype=np.int32)
        # Compile (or load from numba's cache) now, not inside the first tick that needs it.
        self._refresh(np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(capacity), WorldState(WorldLimits(max_players=1)))

    def forget(self, slot: int) -> None:
        """Clear a slot's row and column (player left or joined)."""
        self.visible[slot, :] = False
        self.visible[:, slot] = False
        self.in_sight[slot, :] = False
        self.in_sight[:, slot] = False

    def refresh(self, tick: int, world: WorldState, rtt_s: np.ndarray, *, all_viewers: bool = False) -> None:
        """Recompute the rows of this tick's share of viewers (every viewer when ``all_viewers``).

        Args:
            tick: server tick (selects the viewers: slot % period == tick % period).
            world: current state. rtt_s: (capacity,) each viewer's round trip (s).
        """
        active = world.active
        if not self.config.enabled:
            self.visible[:] = active[None, :] & world.alive[None, :]
            np.fill_diagonal(self.visible, False)
            # Nothing is tested: everything sent counts as in sight (no hidden-target evidence).
            self.in_sight[:] = self.visible
            return
        mine = active if all_viewers else active & (self._phase == tick % self.period_ticks)
        viewers = np.flatnonzero(mine)
        if viewers.size:
            self._refresh(viewers, np.flatnonzero(active & world.alive), rtt_s, world)

    def _refresh(self, viewers: np.ndarray, targets: np.ndarray, rtt_s: np.ndarray, world: WorldState) -> None:
        rays, cached = _refresh_rows(
            viewers, targets, rtt_s, self.period_s, float(self.config.horizon_margin_s), self.visible, self.in_sight,
            world.pos,
            world.vel, world.stance, _EYE, BOUND_ZMAX, _TOP_FRACTION, _SIDE_FRACTION, float(self.config.lateral_m),
            self._occluder, *self.geometry.ray_args,
        )
        self.rays_cast += rays
        self.rays_cached += cached


@numba.njit(cache=True, nogil=True)
def _refresh_rows(
    viewers: np.ndarray, targets: np.ndarray, rtt_s: np.ndarray, period_s: float, margin_s: float,
    visible: np.ndarray, in_sight: np.ndarray, pos: np.ndarray, vel: np.ndarray, stance: np.ndarray,
    eye_height: np.ndarray, body_height: np.ndarray, top_fraction: float, side_fraction: float, lateral_m: float,
    occluder: np.ndarray,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Rewrite the ``visible`` and ``in_sight`` rows of ``viewers`` over ``targets`` (slots; a
    viewer never sees itself); ``in_sight`` where a ray at the players' current positions is
    clear. Per (viewer, target) pair: the head-top ray now, then, while the target stays hidden,
    the shoulder-height sides now and the three samples with both players moved ``horizon`` =
    the viewer's round trip + ``period_s`` + ``margin_s`` seconds ahead (xy only), stopping at
    the first clear line. Returns (rays walked, rays proved blocked by their cached occluder).

    ``occluder[v, t, sample]`` is the piece that stopped that sample's ray at the last refresh
    (-1 for none). Players move little between refreshes, so the same wall usually still stops
    it: one clip against that piece proves the ray blocked without walking the grid. A piece
    that no longer blocks proves nothing and the ray is walked, so the answer is the walk's."""
    marks = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    stamp = 0
    rays = 0
    cached = 0
    for v in viewers:
        visible[v, :] = False
        in_sight[v, :] = False
        horizon = rtt_s[v] + period_s + margin_s
        eye_z = pos[v, 2] + eye_height[stance[v]]
        for t in targets:
            if t == v:
                continue
            h = body_height[stance[t]]
            seen = False
            for k in range(2):
                ahead = 0.0 if k == 0 else horizon
                ex, ey = pos[v, 0] + vel[v, 0] * ahead, pos[v, 1] + vel[v, 1] * ahead
                fx, fy = pos[t, 0] + vel[t, 0] * ahead, pos[t, 1] + vel[t, 1] * ahead
                dx, dy = fx - ex, fy - ey
                norm = math.hypot(dx, dy)
                if not norm > 1e-9:
                    norm = 1.0
                sx, sy = -dy / norm * lateral_m, dx / norm * lateral_m
                for j in range(3):
                    if j == 0:
                        px, py, pz = fx, fy, pos[t, 2] + h * top_fraction
                    else:
                        sign = 1.0 if j == 1 else -1.0
                        px, py, pz = fx + sign * sx, fy + sign * sy, pos[t, 2] + h * side_fraction
                    sample = 3 * k + j
                    piece = occluder[v, t, sample]
                    if piece >= 0 and piece_blocks(piece, ex, ey, eye_z, px - ex, py - ey, pz - eye_z, 1.0, frame, n_box,
                                                   boxes, cv_height, cv_planes, cv_edges):
                        cached += 1
                        continue
                    stamp += 1
                    rays += 1
                    hit, piece = walk(ex, ey, eye_z, px - ex, py - ey, pz - eye_z, 1.0, True, frame, ny, n_box, boxes,
                                      cv_height, cv_planes, cv_edges, cell_start, cell_items, skip, marks, stamp)
                    occluder[v, t, sample] = piece
                    if hit == math.inf:
                        seen = True
                        break
                if seen:
                    in_sight[v, t] = k == 0
                    break
            visible[v, t] = seen
    return rays, cached
