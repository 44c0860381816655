"""Wallhack / ESP: a human who sees every entity the server sends.

``wallhack`` (:class:`Wallhack` with :class:`EspBrain`): the cheat draws every entity record of
the snapshots, through walls and whether or not the game would render it. The human playing it is
the honest brain with two changes in what it sees:

* target choice (:class:`EspTargetSelector`): every alive enemy in the snapshots is a candidate,
  without the line-of-sight test and without having to be noticed first (the whole field of
  view is 360 deg: the ESP box is on screen wherever the enemy is). So the crosshair tracks hidden
  players through walls as soon as the server sends them (visibility culling sends those about
  to appear) and is already on them when they come round the corner;
* ``rendered=False`` records (AimDetect's bait) are drawn too and are targets like players; a
  bait record is a point (its ``pos`` is its centre), so the human aims at that point.

The hooks decide when to pull the trigger: only when the target is in line of sight now or will
be within ``prefire_lead_s`` at its current velocity (pre-firing a corner); never into a wall at
someone who stays behind it (``fire_through_walls`` allows that too).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np

from bots.aim import AimTarget, angular_size_deg
from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.params import check_positive
from bots.cheats.targeting import BAIT_RADIUS_M, bone_column, bone_point, command_eye
from bots.honest import (
    HonestBrain,
    HonestConfig,
    Sighting,
    TargetSelector,
    eye_position,
    is_enemy,
)
from bots.nav import NavGraph
from bots.perception import Intent, Perception, SeenEntity
from bots.skill import Skill
from physics.buttons import Buttons
from world.geometry import MapGeometry

__all__ = ["EspBrain", "EspTargetSelector", "Wallhack", "WallhackParams", "esp_brain"]

_FIRE = int(Buttons.FIRE)
_LOS_COLUMNS = (bone_column("head"), bone_column("upper_torso"), bone_column("lower_torso"))


@dataclass(frozen=True, slots=True)
class WallhackParams:
    """Wallhack / ESP.

    Attributes:
        include_hidden: draw ``rendered=False`` records (bait targets) and treat them as enemies.
        prefire_lead_s: fire at a hidden target that will be in sight within this long (s) at its
            current velocity (pre-fire at corners).
        fire_through_walls: also fire at targets that stay behind walls.
    """

    include_hidden: bool = True
    prefire_lead_s: float = 0.25
    fire_through_walls: bool = False

    def __post_init__(self) -> None:
        check_positive("WallhackParams", "prefire_lead_s", self.prefire_lead_s, allow_zero=True)


class EspTargetSelector(TargetSelector):
    """Target choice with ESP: every alive enemy record is a candidate, seen through walls."""

    def __init__(self, skill: Skill, config: HonestConfig | None = None, geometry: MapGeometry | None = None,
                 include_hidden: bool = True) -> None:
        super().__init__(skill, config or HonestConfig(), geometry)
        self.include_hidden = include_hidden

    def candidates(self, p: Perception) -> list[SeenEntity]:
        return [e for e in p.entities if e.alive and is_enemy(p, e) and (e.rendered or self.include_hidden)]


class EspBrain(HonestBrain):
    """The honest brain with ESP targeting; a skeleton-less record (a bait) is aimed at its
    ``pos``, the only point the entity list gives for it."""

    def _aim_target(self, p: Perception, s: Sighting, rng: np.random.Generator) -> AimTarget:
        e = s.entity
        if e.rendered:
            return super()._aim_target(p, s, rng)
        eye = eye_position(p.pos, p.crouching)
        dist = math.dist(eye, e.pos)
        return AimTarget(slot=e.slot, point_m=e.pos, eye_m=eye, width_deg=angular_size_deg(2.0 * BAIT_RADIUS_M, dist))


def esp_brain(
    skill: Skill, nav: NavGraph | None, geometry: MapGeometry | None, include_hidden: bool = True
) -> EspBrain:
    """An :class:`EspBrain` whose field of view covers everything (the ESP draws every enemy)."""
    sk = dataclasses.replace(skill, fov_deg=360.0)
    cfg = HonestConfig()
    return EspBrain(sk, nav=nav, geometry=geometry, targeting=EspTargetSelector(sk, cfg, geometry, include_hidden),
                    config=cfg)


class Wallhack(CheatHooks):
    """``wallhack``: fire only at targets in sight now or about to be (the brain does the rest)."""

    name = "wallhack"

    def __init__(self, params: WallhackParams = WallhackParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.tracking_hidden = 0
        """Ticks the crosshair followed a target out of line of sight."""

    def _in_sight(self, p: Perception, e: SeenEntity, buttons: int) -> tuple[bool, bool]:
        """(visible now, visible within the pre-fire lead) from the eye of the next command."""
        geo = self.geometry
        if geo is None:
            return True, True
        eye = command_eye(p, buttons, self.dt_s)
        lead = self.params.prefire_lead_s
        ahead = replace(e, pos=(e.pos[0] + e.vel[0] * lead, e.pos[1] + e.vel[1] * lead, e.pos[2]))
        cols = _LOS_COLUMNS if e.rendered else _LOS_COLUMNS[:1]
        pts = [bone_point(e, c) for c in cols] + [bone_point(ahead, c) for c in cols]
        clear = geo.los_clear(np.tile(np.asarray(eye), (len(pts), 1)), np.asarray(pts)).tolist()
        n = len(cols)
        return any(clear[:n]), any(clear[n:])

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive or honest.aim_target is None or self.params.fire_through_walls:
            return honest
        target = next((e for e in p.entities if e.slot == honest.aim_target), None)
        if target is None:
            return honest
        now, soon = self._in_sight(p, target, honest.buttons)
        if not now:
            self.tracking_hidden += 1
        if now or soon:
            return honest
        return replace(honest, buttons=honest.buttons & ~_FIRE)
