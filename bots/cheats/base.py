"""The common base of every cheat profile's hooks, and what a profile is built with.

:class:`CheatHooks` is a :class:`bots.hooks.ClientHooks` that remembers its client (to read the
tick rate, the world model and its own claims), the brain it rides on (to hand the mouse back
after an aimbot let go), and when its own weapon last fired (so that scripted FIRE presses come
only when the weapon can fire). Subclasses edit shots in :meth:`CheatHooks.edit_shots`; the base
class's ``shots`` records the shot time first.

Units: meters, seconds, degrees. Hooks keep their own state; all randomness comes from the rng the
client passes to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bots.hooks import ClientHooks, ClientView
from bots.perception import Perception
from server.protocol import Shot
from world.geometry import MapGeometry
from world.mapfile import GameMap
from world.weapons import weapon

if TYPE_CHECKING:
    from bots.honest import HonestBrain
    from bots.nav import NavGraph

__all__ = ["BuildContext", "CheatHooks"]

_EPS_S = 1e-6
"""Slack (s) on fire-interval comparisons (the weapon code's own epsilon is of this order)."""


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a profile's hooks may be built with: what a real client ships (the map, its geometry,
    a navigation graph built from it) and the server's tick rate (Hz)."""

    game_map: GameMap
    geometry: MapGeometry
    nav: NavGraph | None
    tick_rate_hz: int


class CheatHooks(ClientHooks):
    """Base of the cheat hooks: client access, brain hand-over and the own fire clock.

    Attributes:
        client: the client these hooks sit in (set by ``attach``), or None before.
        name: the profile name (ground truth label).
    """

    name = "cheat"

    def __init__(self, ctx: BuildContext | None = None) -> None:
        self.ctx = ctx
        self.client: ClientView | None = None
        self._brain: HonestBrain | None = None
        self._last_shot_tick: int | None = None
        self._last_shot_weapon = 0
        self._locked: tuple[float, float] | None = None

    # ------------------------------------------------------------------ wiring

    def attach(self, client: ClientView) -> None:
        self.client = client

    def bind_brain(self, brain: HonestBrain) -> None:
        """The honest brain this cheat rides on (for :meth:`hand_over`)."""
        self._brain = brain

    def hand_over(self, yaw_deg: float, pitch_deg: float) -> None:
        """Give the mouse back to the human at the view the cheat left (deg): the brain's hand
        continues from there instead of jumping back to where it was before the cheat moved it."""
        if self._brain is not None:
            self._brain.aim.reset(yaw_deg, pitch_deg)

    def hold_view(self, yaw_deg: float, pitch_deg: float) -> None:
        """The cheat writes the view this tick (remembered for :meth:`release_view`)."""
        self._locked = (yaw_deg, pitch_deg)

    def release_view(self) -> tuple[float, float] | None:
        """The cheat stops writing the view: hands the mouse over at the last written view and
        returns it (None when the cheat was not writing it)."""
        last = self._locked
        if last is not None:
            self.hand_over(*last)
            self._locked = None
        return last

    @property
    def dt_s(self) -> float:
        """Duration of one client tick (s)."""
        if self.client is not None:
            return 1.0 / self.client.tick_rate_hz
        if self.ctx is not None:
            return 1.0 / self.ctx.tick_rate_hz
        return 1.0 / 64.0

    @property
    def geometry(self) -> MapGeometry | None:
        """The map's geometry, None without a build context."""
        return self.ctx.geometry if self.ctx is not None else None

    # ------------------------------------------------------------------ fire clock

    def fire_ready(self, p: Perception) -> bool:
        """Would a FIRE in this tick's command produce a shot? Alive, holding a weapon, not
        reloading, with a round (or a reserve: the trigger then reloads) and at least the weapon's
        fire interval after this client's last shot with it."""
        if not p.alive or not p.weapon or p.reloading:
            return False
        if p.ammo <= 0:
            return p.reserve > 0
        if self._last_shot_tick is None or self._last_shot_weapon != p.weapon:
            return True
        try:
            interval = weapon(p.weapon).fire_interval_s
        except KeyError:
            return False
        return self.ticks_since_shot(p) * self.dt_s >= interval - _EPS_S

    def ticks_since_shot(self, p: Perception) -> int:
        """Client ticks from the last shot's command to this tick's (a large number when none)."""
        if self._last_shot_tick is None:
            return 1 << 30
        return p.tick - self._last_shot_tick

    @property
    def last_shot_tick(self) -> int | None:
        """Client tick of the last shot sent, None before any."""
        return self._last_shot_tick

    def shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        out = self.edit_shots(shots, p, rng)
        if out:
            self._last_shot_tick = p.tick
            self._last_shot_weapon = out[-1].weapon
        return out

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        """Subclasses' shot editing (identity here)."""
        return shots
