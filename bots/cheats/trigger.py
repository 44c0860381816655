"""Triggerbot: the human aims, the cheat pulls the trigger.

``triggerbot`` (:class:`Triggerbot`): every tick it casts the ray the next shot would take (the
human's view angles plus the recoil punch, from the own eye, against the entities interpolated at
the view time and the walls: ``ClientView.claim_shot``) and presses FIRE exactly when that ray
meets an enemy's hitbox and the weapon can fire: no reaction time at all. The human's own trigger
presses are dropped (``keep_honest_fire`` keeps them). Reading raw snapshots, it also fires when
the crosshair crosses a ``rendered=False`` record (an AimDetect bait) with ``include_hidden``.
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
    """

    include_hidden: bool = True
    keep_honest_fire: bool = False


class Triggerbot(CheatHooks):
    """``triggerbot``: FIRE exactly when the crosshair ray intersects an enemy hitbox."""

    name = "triggerbot"

    def __init__(self, params: TriggerbotParams = TriggerbotParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.on_target: int | None = None
        """Slot under the crosshair at the last tick, None when none."""

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        self.on_target = None
        buttons = honest.buttons if self.params.keep_honest_fire else honest.buttons & ~_FIRE
        client = self.client
        spec = held_spec(p)
        if client is None or spec is None or not self.fire_ready(p):
            return replace(honest, buttons=buttons)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        claim = client.claim_shot(honest.yaw_deg, honest.pitch_deg, p.weapon, p.view_time_s, punch,
                                  include_hidden=self.params.include_hidden)
        if claim.victim is not None:
            ent = next((e for e in p.entities if e.slot == claim.victim), None)
            if ent is None or is_enemy(p, ent):
                self.on_target = claim.victim
                buttons |= _FIRE
        return replace(honest, buttons=buttons)
