"""Triggerbot: the human aims, the cheat pulls the trigger.

``triggerbot`` (:class:`Triggerbot`): every tick it casts the ray the next shot would take (the
human's view angles plus the recoil punch, from the own eye, against the entities interpolated at
the view time and the walls: ``ClientView.claim_shot``) and presses FIRE exactly when that ray
meets an enemy's hitbox and the weapon can fire: no reaction time at all. The human's own trigger
presses are dropped (``keep_honest_fire`` keeps them). Reading raw snapshots, it also fires when
the crosshair crosses a ``rendered=False`` record (an AimDetect bait) with ``include_hidden``.

With ``delay_s`` (and ``delay_spread_s``) it is the "humanised" triggerbot most cheat menus offer:
on each new contact it waits a reaction delay, drawn per contact, and fires only if the crosshair
is still on the same enemy by then; once the delay has passed it keeps firing while the crosshair
stays on. Its shots are then no longer on first contact, and it lets every contact shorter than
its delay pass, like a human would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.targeting import held_spec, punch_at_fire
from bots.honest import is_enemy
from bots.perception import Intent, Perception
from physics.buttons import Buttons

__all__ = ["Triggerbot", "TriggerbotParams"]

_FIRE = int(Buttons.FIRE)


@dataclass(frozen=True, slots=True)
class TriggerbotParams:
    """Triggerbot.

    Attributes:
        include_hidden: bait targets (``rendered=False``) take the ray too.
        keep_honest_fire: also keep the human's own FIRE presses (default: only the bot fires).
        delay_s: reaction delay from the crosshair first meeting an enemy to the first FIRE (s);
            the crosshair must still be on that enemy then.
        delay_spread_s: each contact's delay is ``delay_s`` plus a uniform draw in
            [0, ``delay_spread_s``) (s).
    """

    include_hidden: bool = True
    keep_honest_fire: bool = False
    delay_s: float = 0.0
    delay_spread_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.delay_s >= 0.0 and self.delay_spread_s >= 0.0):
            raise ValueError("triggerbot: delay_s and delay_spread_s must be >= 0")


class Triggerbot(CheatHooks):
    """``triggerbot``: FIRE exactly when the crosshair ray intersects an enemy hitbox."""

    name = "triggerbot"

    def __init__(self, params: TriggerbotParams = TriggerbotParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.on_target: int | None = None
        """Slot under the crosshair at the last tick it was cast, None when none."""
        self._contact_since_s = 0.0
        self._contact_delay_s = 0.0

    @property
    def contact_delay_s(self) -> float:
        """The reaction delay drawn for the current contact (s; 0.0 without a delay)."""
        return self._contact_delay_s

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        params = self.params
        delayed = params.delay_s > 0.0 or params.delay_spread_s > 0.0
        buttons = honest.buttons if params.keep_honest_fire else honest.buttons & ~_FIRE
        client = self.client
        spec = held_spec(p)
        ready = self.fire_ready(p)
        # Without a delay nothing depends on the crosshair while the weapon cannot fire; a delayed
        # bot times each contact from its start, so it casts every tick.
        if client is None or spec is None or not (ready or delayed):
            self.on_target = None
            return replace(honest, buttons=buttons)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        claim = client.claim_shot(honest.yaw_deg, honest.pitch_deg, p.weapon, p.view_time_s, punch,
                                  include_hidden=params.include_hidden)
        victim = claim.victim
        if victim is not None:
            ent = next((e for e in p.entities if e.slot == victim), None)
            if ent is not None and not is_enemy(p, ent):
                victim = None
        if victim is not None and victim != self.on_target and delayed:
            self._contact_since_s = p.now_s
            self._contact_delay_s = params.delay_s + params.delay_spread_s * float(rng.random())
        self.on_target = victim
        if victim is not None and ready and p.now_s - self._contact_since_s >= self._contact_delay_s - 1e-9:
            buttons |= _FIRE
        return replace(honest, buttons=buttons)
