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
"""

from __future__ import annotations

import numpy as np

from server.config import VisibilityConfig
from world.constants import CROUCHING_EYE_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import BOUND_ZMAX
from world.state import WorldState

_EYE = np.array([STANDING_EYE_M, CROUCHING_EYE_M])
# Sample heights as fractions of the stance's body height: the top of the centre line (it stands
# for every point below it, see the module doc) and the sides at shoulder height.
_TOP_FRACTION = 0.97
_SIDE_FRACTION = 0.70


class VisibilityCuller:
    """Visible-set matrix ``visible[viewer, target]`` over player slots, refreshed incrementally."""

    def __init__(self, config: VisibilityConfig, geometry: MapGeometry, capacity: int, tick_rate_hz: float) -> None:
        self.config = config
        self.geometry = geometry
        self.visible = np.zeros((capacity, capacity), dtype=bool)
        self.period_ticks = max(1, round(tick_rate_hz / config.refresh_hz))
        self.period_s = self.period_ticks / tick_rate_hz
        self.rays_cast = 0

    def forget(self, slot: int) -> None:
        """Clear a slot's row and column (player left or joined)."""
        self.visible[slot, :] = False
        self.visible[:, slot] = False

    def refresh(self, tick: int, world: WorldState, rtt_s: np.ndarray, *, all_viewers: bool = False) -> None:
        """Recompute the rows of this tick's share of viewers (every viewer when ``all_viewers``).

        Args:
            tick: server tick (selects the viewers: slot % period == tick % period).
            world: current state. rtt_s: (capacity,) each viewer's round trip (s).
        """
        cap = self.visible.shape[0]
        active = world.active
        if not self.config.enabled:
            self.visible[:] = active[None, :] & world.alive[None, :]
            np.fill_diagonal(self.visible, False)
            return
        slots = np.arange(cap)
        mine = active if all_viewers else active & (slots % self.period_ticks == tick % self.period_ticks)
        viewers = np.flatnonzero(mine)
        if viewers.size == 0:
            return
        targets = np.flatnonzero(active & world.alive)
        self.visible[viewers, :] = False
        if targets.size == 0:
            return
        vi, ti = np.meshgrid(viewers, targets, indexing="ij")
        keep = vi != ti
        vi, ti = vi[keep], ti[keep]
        if vi.size == 0:
            return
        horizon = rtt_s[vi] + self.period_s + self.config.horizon_margin_s
        seen = self._visible_pairs(world, vi, ti, horizon)
        self.visible[vi[seen], ti[seen]] = True

    def _visible_pairs(self, world: WorldState, vi: np.ndarray, ti: np.ndarray, horizon: np.ndarray) -> np.ndarray:
        """(P,) True where the viewer's eye sees any sample of the target, now or both moved ahead.

        Two batched queries per refresh, whatever the number of pairs: the head-top ray of every
        pair now, then every other sample (now and predicted) of the pairs still hidden. The
        geometry has a fixed cost per call, so fewer, larger calls are what keeps this cheap.
        """
        eye_now, feet_now, height = self._poses(world, vi, ti, np.zeros_like(horizon))
        top = feet_now.copy()
        top[:, 2] += height * _TOP_FRACTION
        seen = self._clear(eye_now, top)
        hidden = np.flatnonzero(~seen)
        if hidden.size == 0:
            return seen
        p0s, p1s, owner = [], [], []
        for k, ahead in enumerate((np.zeros(hidden.size), horizon[hidden])):
            eye, feet, h = self._poses(world, vi[hidden], ti[hidden], ahead)
            # The head-top ray of "now" was the first query.
            for point in self._samples(eye, feet, h, skip_top=k == 0):
                p0s.append(eye)
                p1s.append(point)
                owner.append(hidden)
        clear = self._clear(np.concatenate(p0s), np.concatenate(p1s))
        seen[np.concatenate(owner)[clear]] = True
        return seen

    @staticmethod
    def _poses(world: WorldState, vi: np.ndarray, ti: np.ndarray, ahead_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Viewer eyes, target feet (both moved ``ahead_s`` along their velocities) and body heights."""
        eye = world.pos[vi] + world.vel[vi] * ahead_s[:, None]
        eye[:, 2] = world.pos[vi, 2] + _EYE[world.stance[vi]]
        feet = world.pos[ti] + world.vel[ti] * ahead_s[:, None]
        feet[:, 2] = world.pos[ti, 2]
        return eye, feet, BOUND_ZMAX[world.stance[ti]]

    def _samples(self, eye: np.ndarray, feet: np.ndarray, height: np.ndarray, skip_top: bool) -> list[np.ndarray]:
        """Sample points of the target's extents: the top of the centre line (standing for all of
        it) and both sides at shoulder height across the line of sight."""
        out = []
        if not skip_top:
            point = feet.copy()
            point[:, 2] += height * _TOP_FRACTION
            out.append(point)
        d = feet[:, :2] - eye[:, :2]
        norm = np.hypot(d[:, 0], d[:, 1])
        norm = np.where(norm > 1e-9, norm, 1.0)
        side = np.column_stack([-d[:, 1] / norm, d[:, 0] / norm]) * self.config.lateral_m
        for sign in (1.0, -1.0):
            point = feet.copy()
            point[:, :2] += sign * side
            point[:, 2] += height * _SIDE_FRACTION
            out.append(point)
        return out

    def _clear(self, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
        self.rays_cast += p0.shape[0]
        return self.geometry.los_clear(p0, p1)
