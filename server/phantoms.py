"""Phantoms: per viewer, an enemy player who does not exist, always behind walls.

Each viewer's snapshots may carry one extra entity record, the viewer's *phantom*: on the wire it
is a player record like any other (rendered, alive, standing, a primary weapon, plausible health,
walking or running at a player's speeds on the map's floor, in a player slot no one holds), but
it is placed and moved so that the viewer never has a line of sight to it. A human never sees it;
a client that draws every record it receives (a wallhack) shows it like a player, and its user
aims at it and walks toward it. ``AimSample.phantom_angle_deg`` gives the wallhack detector the
angle between each command's view and the phantom's chest. The phantom is not in the world: it
takes no damage, stops no ray, never kills or dies, and no kill feed names it.

**Never in sight.** A viewer's phantom is checked at the culler's rate (``refresh_hz``, each
viewer on its own ticks): every position it held over the last ``trail_s`` seconds (a client
draws entities a round trip and its interpolation late) and where it will be by the next check
must be hidden from every eye the viewer may have until then: its eye now and where it could be
``rtt + period + horizon_margin_s`` ahead (along its velocity, and at top speed in six other
directions, each move swept against the walls), at the top of a jump (a higher eye sees
everything a lower one does: walls are prisms from the floor). The checked points are the top
of the phantom's centre line and both sides ``lateral_m`` beside it at that height (the top of
a vertical line hides everything below it, see ``server.visibility``). A check that fails tries
new headings; when none is hidden the phantom is removed at once, and the snapshots go without
a phantom for ``gap_s``. A viewer who dies loses its phantom.

**Slot.** Phantoms use the highest slot no player holds (one slot for every viewer's phantom:
each viewer only ever receives its own). When a player takes that slot every phantom is removed.
With every slot taken there are none.

Deterministic: every choice comes from the generator the core seeds.
"""

from __future__ import annotations

import math

import numpy as np

from server.config import PhantomConfig
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from world.constants import STANDING_CHEST_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import BOUND_ZMAX
from world.state import WorldState

__all__ = ["Phantoms"]

_DIRECTIONS = 6
"""Directions, besides its velocity, in which a viewer's eye is moved at top speed."""
_FLAGS = int(EntityFlags.ALIVE)
_PATH_STEP_M = 0.4
"""Spacing of the checked points along the path ahead (m)."""
_TOP_M = float(BOUND_ZMAX[0]) + 0.05
"""Height of the checked points above the phantom's feet (m): above a standing body's bound."""


class Phantoms:
    """Every viewer's phantom, by viewer slot.

    Attributes:
        shown: (C,) the viewer has a phantom now. pos, vel: (C, 3) its feet (m) and velocity
            (m/s). yaw, pitch: (C,) its view (deg). weapon: (C,) its held weapon id. health:
            (C,) its hit points. serial: (C,) its number (every placement takes the next one,
            from 1). slot: the entity id phantoms are sent with (None: every slot is taken).
        placed, removed: phantoms placed, and removed before their time (would have come into
            sight or their viewer died).
    """

    def __init__(
        self, config: PhantomConfig, geometry: MapGeometry, capacity: int, tick_rate_hz: float, period_ticks: int,
        rng: np.random.Generator, weapons: tuple[int, ...], top_speed_m_s: float, jump_m: float,
    ) -> None:
        self.config = config
        self.geometry = geometry
        self.capacity = capacity
        self.dt_s = 1.0 / tick_rate_hz
        self.period_ticks = period_ticks
        self.period_s = period_ticks / tick_rate_hz
        self._rng = rng
        self._weapons = np.array(weapons, dtype=np.int64)
        self._top_speed = float(top_speed_m_s)
        self._eye_z = STANDING_EYE_M + float(jump_m)
        self.shown = np.zeros(capacity, dtype=bool)
        self.pos = np.zeros((capacity, 3))
        self.vel = np.zeros((capacity, 3))
        self.yaw = np.zeros(capacity)
        self.pitch = np.zeros(capacity)
        self.weapon = np.zeros(capacity, dtype=np.int64)
        self.health = np.zeros(capacity)
        self.serial = np.zeros(capacity, dtype=np.int64)
        self.slot: int | None = None
        self.placed = 0
        self.removed = 0
        self._next_serial = 1
        self._leg_end = np.zeros((capacity, 3))
        self._expires = np.zeros(capacity)
        self._next_place = np.zeros(capacity)
        self._trail_len = max(1, math.ceil(config.trail_s / self.period_s) + 1)
        self._trail: list[list[tuple[float, float]]] = [[] for _ in range(capacity)]

    # ------------------------------------------------------------------ the tick

    def update(self, tick: int, now_s: float, world: WorldState, rtt_s: np.ndarray) -> None:
        """Move every phantom one tick, then check, re-head, remove or place those of this
        tick's share of viewers (slot % period == tick % period; ``rtt_s`` (C,) each viewer's
        round trip, s)."""
        if not self.config.enabled:
            return
        self._take_slot(world, now_s)
        if self.shown.any():
            self._walk()
        gone = self.shown & ~(world.active & world.alive)
        if gone.any():
            for v in np.flatnonzero(gone).tolist():
                self._remove(v, now_s, early=True)
        if self.slot is None:
            return
        phase = tick % self.period_ticks
        mine = np.flatnonzero(world.active & world.alive & (np.arange(self.capacity) % self.period_ticks == phase))
        for v in mine.tolist():
            horizon = float(rtt_s[v]) + self.period_s + self.config.horizon_margin_s
            if self.shown[v]:
                self._check(v, now_s, world, horizon)
            elif now_s >= self._next_place[v]:
                self._place(v, now_s, world, horizon)

    def _take_slot(self, world: WorldState, now_s: float) -> None:
        free = np.flatnonzero(~world.active[: self.capacity])
        slot = int(free[-1]) if free.size else None
        if slot != self.slot:
            for v in np.flatnonzero(self.shown).tolist():
                self._remove(v, now_s, early=True)
            self.slot = slot

    def _walk(self) -> None:
        """One tick along each shown phantom's leg, stopping at its end."""
        shown = self.shown
        step = self.vel[shown] * self.dt_s
        left = self._leg_end[shown] - self.pos[shown]
        done = np.einsum("ij,ij->i", left, left) <= np.einsum("ij,ij->i", step, step)
        moved = np.where(done[:, None], self._leg_end[shown], self.pos[shown] + step)
        self.pos[shown] = moved
        vel = self.vel[shown]
        vel[done] = 0.0
        self.vel[shown] = vel

    def _check(self, v: int, now_s: float, world: WorldState, horizon: float) -> None:
        cfg = self.config
        if now_s >= self._expires[v]:
            self._remove(v, now_s, early=False)
            return
        trail = self._trail[v]
        trail.append((float(self.pos[v, 0]), float(self.pos[v, 1])))
        del trail[: -self._trail_len]
        eyes = self._eyes(v, world, horizon)
        start = self.pos[v, :2]
        left = self._leg_end[v, :2] - start
        leg_left = float(np.hypot(*left))
        speed = float(np.hypot(*self.vel[v, :2]))
        if leg_left > 1e-6 and speed > 0.0:
            # The trail and the way ahead in one batch of rays: the usual case, both hidden.
            reach = min(leg_left, speed * (self.period_s + cfg.horizon_margin_s))
            if self._hidden(eyes, np.vstack((np.array(trail), _path(start, left / leg_left, reach)))):
                return
        if not self._hidden(eyes, np.array(trail)) or not self._new_leg(v, eyes):
            self._remove(v, now_s, early=True)

    def _place(self, v: int, now_s: float, world: WorldState, horizon: float) -> None:
        cfg = self.config
        rng = self._rng
        n = cfg.candidates
        angle = rng.uniform(0.0, 2.0 * math.pi, n)
        radius = np.sqrt(rng.uniform(cfg.min_range_m**2, cfg.max_range_m**2, n))
        at = world.pos[v, :2] + radius[:, None] * np.column_stack((np.cos(angle), np.sin(angle)))
        free = ~self.geometry.circle_blocked(at)
        if not free.any():
            self._next_place[v] = now_s + cfg.gap_s
            return
        eyes = self._eyes(v, world, horizon)
        for p in at[free]:
            if not self._hidden(eyes, p[None, :]):
                continue
            self.pos[v] = (p[0], p[1], 0.0)
            self.vel[v] = 0.0
            self._trail[v] = [(float(p[0]), float(p[1]))]
            if not self._new_leg(v, eyes):
                continue
            self.shown[v] = True
            self.serial[v] = self._next_serial
            self._next_serial += 1
            self._expires[v] = now_s + cfg.lifetime_s
            self.weapon[v] = int(rng.choice(self._weapons))
            self.health[v] = 100.0 if rng.random() < 0.6 else float(rng.integers(20, 100))
            self.placed += 1
            return
        self._next_place[v] = now_s + cfg.gap_s

    def _new_leg(self, v: int, eyes: np.ndarray) -> bool:
        """A new straight leg from the phantom's position, at a random heading and speed, whose
        next positions stay hidden from ``eyes``; False when none of ``headings`` tries is."""
        cfg = self.config
        rng = self._rng
        start = self.pos[v, :2].copy()
        for _ in range(cfg.headings):
            heading = rng.uniform(0.0, 2.0 * math.pi)
            speed = rng.uniform(cfg.speed_min_m_s, cfg.speed_max_m_s)
            length = speed * rng.uniform(cfg.leg_min_s, cfg.leg_max_s)
            direction = np.array([math.cos(heading), math.sin(heading)])
            end = self.geometry.sweep(start[None, :], (start + direction * length)[None, :]).end[0]
            if float(np.hypot(*(end - start))) < 0.5:
                continue
            reach = min(float(np.hypot(*(end - start))), speed * (self.period_s + cfg.horizon_margin_s))
            if not self._hidden(eyes, _path(start, direction, reach)):
                continue
            self._leg_end[v] = (end[0], end[1], 0.0)
            self.vel[v] = (direction[0] * speed, direction[1] * speed, 0.0)
            self.yaw[v] = math.degrees(heading) + rng.normal(0.0, 8.0)
            self.yaw[v] = (self.yaw[v] + 180.0) % 360.0 - 180.0
            self.pitch[v] = rng.normal(0.0, 3.0)
            return True
        return False

    def _remove(self, v: int, now_s: float, *, early: bool) -> None:
        self.shown[v] = False
        self.vel[v] = 0.0
        self._trail[v] = []
        self._next_place[v] = now_s + self.config.gap_s
        self.removed += early

    # ------------------------------------------------------------------ line of sight

    def _eyes(self, v: int, world: WorldState, horizon: float) -> np.ndarray:
        """(E, 3) eyes the viewer ``v`` may have until the next check (m), at a jump's top."""
        pos = world.pos[v, :2]
        reach = self._top_speed * horizon
        angles = np.arange(_DIRECTIONS) * (2.0 * math.pi / _DIRECTIONS)
        targets = np.vstack((pos + world.vel[v, :2] * horizon,
                             pos + reach * np.column_stack((np.cos(angles), np.sin(angles)))))
        ends = self.geometry.sweep(np.tile(pos, (len(targets), 1)), targets).end
        eyes = np.empty((len(ends) + 1, 3))
        eyes[0, :2] = pos
        eyes[1:, :2] = ends
        eyes[:, 2] = max(0.0, float(world.pos[v, 2])) + self._eye_z
        return eyes

    def _hidden(self, eyes: np.ndarray, feet: np.ndarray) -> bool:
        """No line of sight from any of ``eyes`` (E, 3) to the checked points of a phantom
        standing at any of ``feet`` (F, 2) (m)."""
        e = np.repeat(eyes, len(feet), axis=0)
        f = np.tile(feet, (len(eyes), 1))
        d = f - e[:, :2]
        norm = np.hypot(d[:, 0], d[:, 1])
        norm[norm < 1e-9] = 1.0
        side = np.column_stack((-d[:, 1], d[:, 0])) / norm[:, None] * self.config.lateral_m
        points = np.empty((3 * len(f), 3))
        points[:, :2] = np.vstack((f, f + side, f - side))
        points[:, 2] = _TOP_M
        return not self.geometry.los_clear(np.tile(e, (3, 1)), points).any()

    # ------------------------------------------------------------------ what others read

    def records(self, viewers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into ``viewers`` (intp) of those with a phantom, their (M, 36) uint8 entity
        records, built as a player's record is)."""
        if self.slot is None or not self.shown.any():
            return np.zeros(0, dtype=np.intp), np.zeros((0, ENTITY_BYTES), dtype=np.uint8)
        idx = np.flatnonzero(self.shown[viewers])
        v = viewers[idx]
        m = len(v)
        made = make_entities(
            np.full(m, self.slot), np.full(m, _FLAGS), self.pos[v], self.vel[v], self.yaw[v], self.pitch[v],
            self.weapon[v], self.health[v],
        ).view(np.uint8).reshape(m, ENTITY_BYTES)
        return idx.astype(np.intp), np.ascontiguousarray(made)

    def aim(self, slots: np.ndarray, eye: np.ndarray, cos_sin: np.ndarray) -> tuple[list[int | None], list[float]]:
        """Per command of the players ``slots`` with eyes ``eye`` (k, 3) (m) and views' cos and
        sin ``cos_sin`` (2, 2, k) (cos then sin, each of yaw then pitch, as TickCommands keeps them): (their phantom's serial or None, the angle
        between the view and the phantom's chest, deg, 180 without one)."""
        k = len(slots)
        if not k or not self.shown.any():
            return [None] * k, [180.0] * k
        shown = self.shown[slots]
        chest = self.pos[slots].copy()
        chest[:, 2] += STANDING_CHEST_M
        to = chest - eye
        dist = np.sqrt(np.einsum("ij,ij->i", to, to))
        dist[dist < 1e-9] = 1.0
        (cy, cp), (sy, sp) = cos_sin
        cos = (cp * cy * to[:, 0] + cp * sy * to[:, 1] + sp * to[:, 2]) / dist
        angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
        angle[~shown] = 180.0
        serial = [int(s) if on else None for s, on in zip(self.serial[slots].tolist(), shown.tolist(), strict=True)]
        return serial, angle.tolist()


def _path(start: np.ndarray, direction: np.ndarray, reach: float) -> np.ndarray:
    """(F, 2) points from ``start`` along the unit ``direction`` up to ``reach`` (m), at most
    ``_PATH_STEP_M`` apart, the start excluded (it is checked with the trail)."""
    n = max(1, math.ceil(reach / _PATH_STEP_M))
    return start + np.outer(np.arange(1, n + 1) * (reach / n), direction)
