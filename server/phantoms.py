"""Phantoms: per viewer, an enemy player who does not exist, always behind walls.

Each viewer's snapshots may carry one extra entity record, the viewer's *phantom*: on the wire it
is a player record like any other (rendered, alive, standing, a primary weapon, plausible health,
walking or running at a player's speeds on the map's floor, in a player slot no one holds), but
it is placed and moved so that the viewer never has a line of sight to it. A human never sees it;
a client that draws every record it receives (a wallhack) shows it like a player, and its user
aims at it and walks toward it. ``AimSample.phantom_angle_deg`` gives the wallhack detector the
angle between each command's view and the phantom's chest where that command's client drew it: at
the command's lag-compensation rewind time, from the ticks kept over ``max_unlag_s`` (a client on
a 300 ms link draws a walking phantom 1-2 m behind where the server has it). The phantom is not
in the world: it takes no damage, stops no ray, never kills or dies, and no kill feed names it.

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

Deterministic: every choice comes from the generator the core seeds. The tick's work (walk, checks,
placements) runs in one compiled call (:mod:`server.phantom_kernel`, which keeps the numpy
formulation as its reference).
"""

from __future__ import annotations

import math

import numpy as np

from server import phantom_kernel
from server.config import PhantomConfig
from server.entity_block import ENTITY_BYTES, EntityFlags, make_entities
from server.phantom_kernel import PARAMS, PhantomArrays
from world.constants import STANDING_CHEST_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import BOUND_ZMAX
from world.state import WorldState

__all__ = ["Phantoms"]

_FLAGS = int(EntityFlags.ALIVE)
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
        compiled: the tick runs the compiled kernel (False: its numpy reference, for tests).
    """

    def __init__(
        self, config: PhantomConfig, geometry: MapGeometry, capacity: int, tick_rate_hz: float, period_ticks: int,
        rng: np.random.Generator, weapons: tuple[int, ...], top_speed_m_s: float, jump_m: float,
        *, compiled: bool = True, history_s: float = 1.0,
    ) -> None:
        self.config = config
        self.geometry = geometry
        self.capacity = capacity
        self.compiled = compiled
        self.dt_s = 1.0 / tick_rate_hz
        self.period_ticks = period_ticks
        self.period_s = period_ticks / tick_rate_hz
        self._rng = rng
        self._weapons = np.array(weapons, dtype=np.int64)
        values = {
            "dt_s": self.dt_s, "period_s": self.period_s, "horizon_margin_s": config.horizon_margin_s,
            "lateral_m": config.lateral_m, "min_range_sq": config.min_range_m**2, "max_range_sq": config.max_range_m**2,
            "lifetime_s": config.lifetime_s, "gap_s": config.gap_s, "speed_min_m_s": config.speed_min_m_s,
            "speed_max_m_s": config.speed_max_m_s, "leg_min_s": config.leg_min_s, "leg_max_s": config.leg_max_s,
            "top_m": _TOP_M, "eye_z_m": STANDING_EYE_M + float(jump_m), "top_speed_m_s": float(top_speed_m_s),
            "player_radius_m": geometry.player_radius,
        }
        self._params = np.array([float(values[name]) for name in PARAMS])
        self._arrays = PhantomArrays(capacity, max(1, math.ceil(config.trail_s / self.period_s) + 1))
        a = self._arrays
        self.shown, self.pos, self.vel, self.yaw, self.pitch = a.shown, a.pos, a.vel, a.yaw, a.pitch
        self.weapon, self.health, self.serial = a.weapon, a.health, a.serial
        self.slot: int | None = None
        self._eyes = np.zeros((phantom_kernel.EYES, 3))
        # Where each phantom was after each of the last ticks: a client aims at the phantom it
        # draws, a round trip and its interpolation old (history_s covers the longest rewind).
        length = max(2, math.ceil(history_s * tick_rate_hz) + 2)
        self._hist_time = np.full(length, -np.inf)
        self._hist_pos = np.zeros((length, capacity, 3))
        self._hist_serial = np.zeros((length, capacity), dtype=np.int64)
        self._hist_head = length - 1
        if config.enabled and compiled:
            # Compile (or load from numba's cache) now, not inside the first tick: with no player
            # live nothing is checked or drawn, and every phantom slot's state stays as it is.
            idle = np.zeros(capacity, dtype=np.bool_)
            rtt, zeros = np.zeros(capacity), np.zeros((capacity, 3))
            phantom_kernel.advance(0, 0.0, -1, idle, idle, self.period_ticks, rtt, zeros, zeros, *self._kernel_state(),
                                   self._params, *geometry.ray_args, *geometry.sweep_args)
            phantom_kernel.resume(0, 0.0, 0, 0, idle, idle, self.period_ticks, rtt, zeros, zeros,
                                  *self._kernel_state(), *self._draw_args(), *geometry.ray_args, *geometry.sweep_args)
            # As aim() passes them: slots, and each row of the views' (2, 2, k) cos/sin, 1-D slices.
            (cy, cp), (sy, sp) = np.ones((2, 2, 2))[:, :, :1]
            phantom_kernel.aim_angles(np.zeros(2, dtype=np.intp)[:1], np.zeros((1, 3)), cy, cp, sy, sp, self.shown,
                                      self.pos, STANDING_CHEST_M, np.empty(1))

    @property
    def placed(self) -> int:
        """Phantoms placed so far."""
        return int(self._arrays.counters[0])

    @property
    def removed(self) -> int:
        """Phantoms removed before their time (would have come into sight, or their viewer died)."""
        return int(self._arrays.counters[1])

    # ------------------------------------------------------------------ the tick

    def update(self, tick: int, now_s: float, world: WorldState, rtt_s: np.ndarray) -> None:
        """Move every phantom one tick, then check, re-head, remove or place those of this
        tick's share of viewers (slot % period == tick % period; ``rtt_s`` (C,) each viewer's
        round trip, s)."""
        if not self.config.enabled:
            return
        if not self.compiled:
            self._take_slot(world, now_s)
            phantom_kernel.reference_update(
                tick, now_s, self.slot is not None, world.active & world.alive, self.period_ticks, rtt_s, world.pos,
                world.vel, self._arrays, self._rng, self._weapons, self._params, self.config.candidates,
                self.config.headings, self.geometry,
            )
            self._remember(now_s)
            return
        geo = self.geometry
        slot, first, need = phantom_kernel.advance(
            tick, now_s, -1 if self.slot is None else self.slot, world.active, world.alive, self.period_ticks, rtt_s,
            world.pos, world.vel, *self._kernel_state(), self._params, *geo.ray_args, *geo.sweep_args,
        )
        self.slot = None if slot < 0 else slot
        if first >= 0:
            # Only now the generator, whose unboxing costs a call ~20 us: most ticks draw nothing.
            phantom_kernel.resume(
                tick, now_s, first, need, world.active, world.alive, self.period_ticks, rtt_s, world.pos, world.vel,
                *self._kernel_state(), *self._draw_args(), *geo.ray_args, *geo.sweep_args,
            )
        self._remember(now_s)

    def _remember(self, now_s: float) -> None:
        """Keep this tick's phantoms (as the snapshots stamped ``now_s``, s, send them)."""
        h = self._hist_head = (self._hist_head + 1) % len(self._hist_time)
        self._hist_time[h] = now_s
        self._hist_pos[h] = self.pos
        np.multiply(self.serial, self.shown, out=self._hist_serial[h])

    def _kernel_state(self) -> tuple[np.ndarray, ...]:
        a = self._arrays
        return (*a.state(), a.hints, self._eyes)

    def _draw_args(self) -> tuple[object, ...]:
        return (self._rng, self._weapons, self._params, self.config.candidates, self.config.headings)

    def _take_slot(self, world: WorldState, now_s: float) -> None:
        free = np.flatnonzero(~world.active[: self.capacity])
        slot = int(free[-1]) if free.size else None
        if slot != self.slot:
            for v in np.flatnonzero(self.shown).tolist():
                self._arrays.remove(v, now_s, self.config.gap_s, early=True)
            self.slot = slot

    # ------------------------------------------------------------------ what others read

    @property
    def active(self) -> bool:
        """A phantom is shown now, or was within the kept ticks (a lagging client still draws it)."""
        return bool(self.shown.any() or self._hist_serial.any())

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

    def aim(self, slots: np.ndarray, eye: np.ndarray, cos_sin: np.ndarray,
            view_s: np.ndarray | None = None) -> tuple[list[int | None], list[float]]:
        """Per command of the players ``slots`` with eyes ``eye`` (k, 3) (m) and views' cos and
        sin ``cos_sin`` (2, 2, k) (cos then sin, each of yaw then pitch, as TickCommands keeps
        them): (the serial of the phantom the player's client was drawing, or None; the angle
        between the view and that phantom's chest, deg, 180 without one).

        ``view_s`` (k,): the server time each client was drawing when it sampled the command
        (s; lag compensation's rewind time). The phantom is taken where it was then (linear
        between the two ticks around it, the client's interpolation), so a client aiming at
        what it draws is on it whatever its ping. None: where the phantoms are now."""
        k = len(slots)
        # With view times the caller has checked ``active``: no second scan of the kept ticks.
        if not k or (view_s is None and not self.shown.any()):
            return [None] * k, [180.0] * k
        if view_s is None:
            shown, pos, serials = self.shown, self.pos, self.serial
            index = slots
        else:
            serials, pos = self._rewound(slots, np.asarray(view_s, dtype=np.float64))
            shown = serials > 0
            index = np.arange(k)
        angle = np.empty(k)
        (cy, cp), (sy, sp) = cos_sin
        phantom_kernel.aim_angles(index, eye, cy, cp, sy, sp, shown, pos, STANDING_CHEST_M, angle)
        on = shown[index].tolist()
        serial = [int(s) if o else None for s, o in zip(serials[index].tolist(), on, strict=True)]
        return serial, angle.tolist()

    def _rewound(self, slots: np.ndarray, view_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(serial (k,), 0 where none was shown; feet (k, 3), m) of the phantoms of ``slots``
        at times ``view_s`` (s), from the kept ticks: the last tick at or before each time,
        moved linearly toward the next one when it is the same phantom. Times before the
        oldest kept tick take the oldest; after the newest, the newest."""
        length = len(self._hist_time)
        order = (np.arange(1, length + 1) + self._hist_head) % length
        times = self._hist_time[order]
        at = np.searchsorted(times, view_s, side="right") - 1
        at = np.clip(at, 0, length - 1)
        nxt = np.minimum(at + 1, length - 1)
        i0, i1 = order[at], order[nxt]
        serial = self._hist_serial[i0, slots]
        p0, p1 = self._hist_pos[i0, slots], self._hist_pos[i1, slots]
        t0, t1 = times[at], times[nxt]
        same = (self._hist_serial[i1, slots] == serial) & (t1 > t0) & np.isfinite(t0)
        frac = np.zeros(len(slots))
        np.divide(view_s - t0, t1 - t0, out=frac, where=same)
        frac = np.clip(frac, 0.0, 1.0)[:, None]
        return serial, p0 + (p1 - p0) * frac

