"""``snap_after_delay``: an aimbot that waits like a human, then snaps like a machine.

Built only on Referee's public cheat API (``bots.cheats.CheatHooks`` and the client-side geometry
of ``bots.cheats.targeting``). Each client tick it looks for enemies whose chosen bone is in line
of sight; once one has been in sight for ``delay_s`` it puts the view exactly on that bone in one
tick (the own recoil punch pulled down), fires when the weapon can, holds the view there for
``hold_s`` and then gives the mouse back to the honest hand. The same enemy is snapped to again
only after another ``delay_s`` of sight. Units: seconds, degrees, meters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bots.cheats import BuildContext, CheatHooks
from bots.cheats.params import check_bone, check_positive
from bots.cheats.targeting import (
    Sight,
    aim_angles,
    bone_column,
    command_eye,
    held_spec,
    punch_at_fire,
    remap_keys,
    visible_sights,
)
from bots.perception import Intent, Perception
from physics.buttons import Buttons

__all__ = ["SnapAfterDelay", "SnapAfterDelayParams"]

_FIRE = int(Buttons.FIRE)


@dataclass(frozen=True, slots=True)
class SnapAfterDelayParams:
    """Parameters (a scenario's ``[bots.params]``).

    Attributes:
        delay_s: time (s) an enemy must have been in sight before the snap (a human reaction).
        hold_s: how long (s) the view stays locked after the snap.
        bone: the bone snapped to (a ``world.hitbox.Bone`` name in lower case).
        include_hidden: treat ``rendered=False`` entities (AimDetect baits) as enemies.
        autofire: press FIRE while locked, whenever the weapon can fire and the target is in range.
    """

    delay_s: float = 0.25
    hold_s: float = 0.3
    bone: str = "head"
    include_hidden: bool = False
    autofire: bool = True

    def __post_init__(self) -> None:
        check_positive("SnapAfterDelayParams", "delay_s", self.delay_s, allow_zero=True)
        check_positive("SnapAfterDelayParams", "hold_s", self.hold_s)
        check_bone("SnapAfterDelayParams", "bone", self.bone)


class SnapAfterDelay(CheatHooks):
    """The hooks of ``snap_after_delay`` (only ``intent`` is overridden)."""

    name = "snap_after_delay"

    def __init__(self, params: SnapAfterDelayParams = SnapAfterDelayParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.columns = (bone_column(params.bone),)
        self.target: int | None = None
        """Slot the view is locked on, None when none."""
        self._lock_until_s = 0.0
        self._in_sight_since: dict[int, float] = {}

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        prm = self.params
        if not p.alive:
            self.target = None
            self._in_sight_since.clear()
            self.release_view()
            return honest
        now = p.now_s
        eye = command_eye(p, honest.buttons, self.dt_s)
        sights = {s.slot: s for s in visible_sights(p, self.geometry, eye, self.columns, prm.include_hidden)}
        # Forget enemies out of sight: the delay starts again when they reappear.
        self._in_sight_since = {slot: self._in_sight_since.get(slot, now) for slot in sights}
        sight = self._locked_sight(now, sights)
        if sight is None:
            last = self.release_view()
            if last is None:
                return honest
            # The release tick keeps the view where the snap left it; the hand goes on from there.
            fwd, side = remap_keys(honest, last[0])
            return replace(honest, yaw_deg=last[0], pitch_deg=last[1], forward=fwd, side=side)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        yaw, pitch = aim_angles(sight.yaw_deg, sight.pitch_deg, punch)
        self.hold_view(yaw, pitch)
        buttons = honest.buttons & ~_FIRE
        spec = held_spec(p)
        if prm.autofire and spec is not None and sight.distance_m <= spec.max_range_m and self.fire_ready(p):
            buttons |= _FIRE
        fwd, side = remap_keys(honest, yaw)
        return replace(honest, yaw_deg=yaw, pitch_deg=pitch, forward=fwd, side=side, buttons=buttons,
                       aim_target=sight.slot)

    def _locked_sight(self, now_s: float, sights: dict[int, Sight]) -> Sight | None:
        """The sight to hold this tick: the locked one while the lock lasts, else the nearest
        enemy in sight for at least ``delay_s`` (a new lock), else None."""
        if self.target is not None:
            if self.target in sights and now_s < self._lock_until_s:
                return sights[self.target]
            # The lock is over: the next snap at this enemy needs another full delay of sight.
            if self.target in self._in_sight_since:
                self._in_sight_since[self.target] = now_s
            self.target = None
        ready = [s for slot, s in sights.items() if now_s - self._in_sight_since[slot] >= self.params.delay_s]
        if not ready:
            return None
        chosen = min(ready, key=lambda s: s.distance_m)
        self.target = chosen.slot
        self._lock_until_s = now_s + self.params.hold_s
        return chosen
