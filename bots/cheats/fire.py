"""Fire-rate cheats: the scripted crouch-cancel (auto-C / C-bug) and rapid fire.

* ``cbug`` (:class:`CBug`): holds a weapon with a crouch-cancel (rifle, sniper, shotgun or pistol,
  switching to one the player carries), and after every shot a script presses CROUCH on the very
  next tick (well inside the weapon's ``cbug_window_s``), holds it ``crouch_ticks`` ticks, releases
  it, and fires again as soon as the shortened interval ``cbug_interval_s`` has passed while the
  human is still engaging a target. The crouch-cancel itself is legal game physics: the client's
  own weapon prediction accepts those shots, as the server does. The cheat is the script's
  inhuman timing, which puts the intervals below Nex-AC's auto-C thresholds (pistol 240 ms,
  shotgun 480 ms, rifle and sniper 380 ms) every time.
* ``rapid_fire`` (:class:`RapidFire`): ignores the fire interval altogether
  (``bypass_fire_interval``): FIRE on every ``every_ticks``-th tick while the human engages a
  target, plus ``extra_shots`` more shots in the same command. The server refuses what comes
  too soon and counts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.perception import Intent, Perception
from physics.buttons import Buttons
from server.protocol import Shot
from world.weapons import WEAPON_BY_NAME, weapon

__all__ = ["CBug", "CBugParams", "RapidFire", "RapidFireParams"]

_FIRE = int(Buttons.FIRE)
_CROUCH = int(Buttons.CROUCH)
_CBUG_WEAPONS = tuple(name for name, spec in WEAPON_BY_NAME.items() if spec.cbug)


@dataclass(frozen=True, slots=True)
class CBugParams:
    """Scripted crouch-cancel.

    Attributes:
        prefer: crouch-cancel weapons to hold, most wanted first (names from the weapon table).
        crouch_ticks: client ticks CROUCH is held after each shot (pressed on the next tick).
        extra_delay_s: added to the weapon's ``cbug_interval_s`` before the follow-up shot (s);
            0 = the first tick the game allows.
        switch_weapon: switch to a crouch-cancel weapon when holding another.
    """

    prefer: tuple[str, ...] = ("rifle", "sniper", "shotgun", "pistol")
    crouch_ticks: int = 2
    extra_delay_s: float = 0.0
    switch_weapon: bool = True

    def __post_init__(self) -> None:
        bad = [w for w in self.prefer if w not in _CBUG_WEAPONS]
        if bad or not self.prefer:
            raise ValueError(
                f"CBugParams.prefer must name crouch-cancel weapons ({', '.join(_CBUG_WEAPONS)}), got {bad or '[]'}"
            )
        if self.crouch_ticks < 1:
            raise ValueError(f"CBugParams.crouch_ticks must be >= 1, got {self.crouch_ticks!r}")
        if not (math.isfinite(self.extra_delay_s) and self.extra_delay_s >= 0.0):
            raise ValueError(f"CBugParams.extra_delay_s must be >= 0, got {self.extra_delay_s!r}")


class CBug(CheatHooks):
    """``cbug``: crouch right after every shot, fire again at the crouch-cancel interval."""

    name = "cbug"

    def __init__(self, params: CBugParams = CBugParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._prefer = tuple(int(WEAPON_BY_NAME[n].id) for n in params.prefer)
        self._exhausted: set[int] = set()
        self._pressed = 0
        """Ticks CROUCH has been held since the last shot (0: not yet pressed)."""
        self._armed = False
        """A crouch press followed the last shot within the weapon's window."""
        self.follow_ups = 0
        """FIRE presses the script added at the crouch-cancel interval (follow-up shots)."""

    def _reset(self) -> None:
        self._exhausted.clear()
        self._pressed = 0
        self._armed = False

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive:
            self._reset()
            return honest
        held = p.weapon
        try:
            spec = weapon(held) if held else None
        except KeyError:
            spec = None
        if spec is not None and spec.cbug and p.ammo <= 0 and p.reserve <= 0 and not p.reloading:
            self._exhausted.add(held)
        usable = spec is not None and spec.cbug and held not in self._exhausted
        switch = honest.weapon_switch
        buttons = honest.buttons
        if not usable:
            if self.params.switch_weapon:
                want = next((w for w in self._prefer if w in p.weapons_owned and w not in self._exhausted), 0)
                if want and want != held:
                    switch = want
            return replace(honest, weapon_switch=switch)
        if switch and switch != held:
            try:
                if not weapon(switch).cbug or switch in self._exhausted:
                    switch = 0  # the script keeps the crouch-cancel weapon in hand
            except KeyError:
                switch = 0
        assert spec is not None
        since = self.ticks_since_shot(p)
        dt = self.dt_s
        in_sequence = self.last_shot_tick is not None and since * dt < spec.fire_interval_s
        if in_sequence:
            buttons &= ~_CROUCH  # the script owns the crouch key until the weapon recovers
            if self._pressed == 0:
                if since >= 1 and since * dt <= spec.cbug_window_s + 1e-9 and not p.crouching:
                    buttons |= _CROUCH  # the press (standing -> crouching) that arms the cancel
                    self._pressed = 1
                    self._armed = True
                # Still crouched from before the shot: stand up this tick, press on the next.
            elif self._pressed < self.params.crouch_ticks:
                buttons |= _CROUCH
                self._pressed += 1
        if (
            self._armed and honest.aim_target is not None and p.ammo > 0 and not p.reloading
            and since * dt >= spec.cbug_interval_s + self.params.extra_delay_s - 1e-6
            and since * dt < spec.fire_interval_s
        ):
            buttons |= _FIRE
            self.follow_ups += 1
        return replace(honest, buttons=buttons, weapon_switch=switch)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        if shots:
            self._pressed = 0
            self._armed = False
        return shots


@dataclass(frozen=True, slots=True)
class RapidFireParams:
    """Rapid fire.

    Attributes:
        every_ticks: FIRE on every this many client ticks while engaging (1 = every tick).
        extra_shots: additional copies of every shot sent in the same command (0..7).
    """

    every_ticks: int = 1
    extra_shots: int = 1

    def __post_init__(self) -> None:
        if self.every_ticks < 1:
            raise ValueError(f"RapidFireParams.every_ticks must be >= 1, got {self.every_ticks!r}")
        if not 0 <= self.extra_shots <= 7:
            raise ValueError(f"RapidFireParams.extra_shots must be in [0, 7], got {self.extra_shots!r}")


class RapidFire(CheatHooks):
    """``rapid_fire``: shots faster than the weapon allows."""

    name = "rapid_fire"
    bypass_fire_interval = True

    def __init__(self, params: RapidFireParams = RapidFireParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive or honest.aim_target is None or not p.weapon or p.tick % self.params.every_ticks:
            return honest
        return replace(honest, buttons=honest.buttons | _FIRE)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        n = self.params.extra_shots
        if not n:
            return shots
        out: list[Shot] = []
        for s in shots:
            out.extend([s] * (1 + n))
        return out
