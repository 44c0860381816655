"""Cheats that forge the shot rather than the view: silent aim and proaim.

* ``silent_aim`` (:class:`SilentAim`): the view angles in the commands stay the human's; only the
  shot's yaw/pitch jump onto the head of the enemy nearest the crosshair (within ``fov_deg``),
  with the recoil punch compensated, and the shot's claims (victim, hit point, bone) are the
  client's own hit detection along those forged angles (``ClientView.claim_shot``). With
  ``autofire`` the trigger is pulled whenever such a target exists and the weapon can fire.
* ``proaim`` (:class:`ProAim`): SA-MP's "proaim" teleports the victim in front of the shooter's
  bullet: the shots claim the target as their victim and a hit point far from where the victim
  really is (``offset_m`` away along the shot, 20-200 m by default), while the view is aimed at
  the target only roughly (``aim_noise_deg`` of scatter per tick).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.aimbot import fallback_columns
from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.params import check_bone, check_positive, check_range
from bots.cheats.targeting import (
    Sight,
    aim_angles,
    angle_between,
    command_eye,
    direction_angles,
    eye_at,
    held_spec,
    punch_at_fire,
    remap_keys,
    spread_ok,
    visible_sights,
)
from bots.perception import Intent, Perception
from physics.buttons import Buttons
from server.protocol import Shot
from world.hitbox import BONE_IDS
from world.state import view_direction
from world.weapons import weapon

__all__ = ["ProAim", "ProAimParams", "SilentAim", "SilentAimParams"]

_FIRE = int(Buttons.FIRE)


@dataclass(frozen=True, slots=True)
class SilentAimParams:
    """Silent aim.

    Attributes:
        fov_deg: targets within this cone (deg, full angle) around the shot direction qualify.
        bone: bone the forged shots go to; fallback_to_body: the next visible bone when hidden.
        include_hidden: treat ``rendered=False`` entities (bait targets) as enemies.
        autofire: pull the trigger whenever a target qualifies and the weapon can fire.
        max_spread_factor: auto-fire waits until the weapon's spread cone is at most this many times
            its standing-still cone (moving spread; 0 = never wait).
    """

    fov_deg: float = 60.0
    bone: str = "head"
    fallback_to_body: bool = True
    include_hidden: bool = True
    autofire: bool = True
    max_spread_factor: float = 2.5

    def __post_init__(self) -> None:
        if not 0.0 < self.fov_deg <= 360.0:
            raise ValueError(f"SilentAimParams.fov_deg must be in (0, 360], got {self.fov_deg!r}")
        check_bone("SilentAimParams", "bone", self.bone)
        check_positive("SilentAimParams", "max_spread_factor", self.max_spread_factor, allow_zero=True)


@dataclass(frozen=True, slots=True)
class ProAimParams:
    """Proaim.

    Attributes:
        offset_m: (min, max) distance (m) between the claimed hit point and the target's real
            position, drawn uniformly per shot (the "teleported" victim).
        aim_noise_deg: sd (deg) per axis of the scatter of the rough aim at the target.
        bone: the bone aimed at roughly and claimed as hit.
        include_hidden: treat ``rendered=False`` entities (bait targets) as enemies.
        autofire: pull the trigger whenever a target is in sight and the weapon can fire.
        max_spread_factor: auto-fire waits until the weapon's spread cone is at most this many times
            its standing-still cone (moving spread; 0 = never wait).
    """

    offset_m: tuple[float, float] = (20.0, 200.0)
    aim_noise_deg: float = 0.6
    bone: str = "upper_torso"
    include_hidden: bool = False
    autofire: bool = True
    max_spread_factor: float = 2.5

    def __post_init__(self) -> None:
        check_range("ProAimParams", "offset_m", *self.offset_m, allow_zero=False)
        check_positive("ProAimParams", "aim_noise_deg", self.aim_noise_deg, allow_zero=True)
        check_bone("ProAimParams", "bone", self.bone)
        check_positive("ProAimParams", "max_spread_factor", self.max_spread_factor, allow_zero=True)


class SilentAim(CheatHooks):
    """``silent_aim``: human view angles, forged shot angles and claims."""

    name = "silent_aim"

    def __init__(self, params: SilentAimParams = SilentAimParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.columns = fallback_columns(params.bone, params.fallback_to_body)
        self.target: int | None = None

    def _sight(self, p: Perception, eye: tuple[float, float, float], yaw: float, pitch: float,
               punch: tuple[float, float]) -> Sight | None:
        """The qualifying enemy nearest the shot direction of view (yaw, pitch) + punch."""
        half = 0.5 * self.params.fov_deg
        sy, sp = yaw - punch[1], pitch + punch[0]
        best: Sight | None = None
        best_a = math.inf
        for s in visible_sights(p, self.geometry, eye, self.columns, self.params.include_hidden):
            a = angle_between(sy, sp, s.yaw_deg, s.pitch_deg)
            if a <= half and a < best_a:
                best, best_a = s, a
        return best

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        self.target = None
        prm = self.params
        if not prm.autofire or not self.fire_ready(p) or not spread_ok(p, honest.buttons, prm.max_spread_factor):
            return honest
        dt = self.dt_s
        eye = command_eye(p, honest.buttons, dt)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, dt)
        sight = self._sight(p, eye, honest.yaw_deg, honest.pitch_deg, punch)
        spec = held_spec(p)
        if sight is None or spec is None or sight.distance_m > spec.max_range_m:
            return honest
        self.target = sight.slot
        return replace(honest, buttons=honest.buttons | _FIRE)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        client = self.client
        if not shots or client is None:
            return shots
        st = client.predicted
        eye = eye_at(st.pos, st.stance == 1)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        out = []
        for shot in shots:
            sight = self._sight(p, eye, shot.yaw_deg, shot.pitch_deg, punch)
            if sight is None:
                out.append(shot)
                continue
            yaw, pitch = aim_angles(sight.yaw_deg, sight.pitch_deg, punch)
            claim = client.claim_shot(yaw, pitch, shot.weapon, shot.view_time_s, punch,
                                      include_hidden=self.params.include_hidden)
            out.append(shot._replace(yaw_deg=yaw, pitch_deg=pitch, claimed_victim=claim.victim,
                                     claimed_hit_point=claim.point, claimed_bone=claim.bone))
        return out


class ProAim(CheatHooks):
    """``proaim``: rough aim, and every shot claims the target hit at a point far from it."""

    name = "proaim"

    def __init__(self, params: ProAimParams = ProAimParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.columns = fallback_columns(params.bone, True)
        self.target: Sight | None = None

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        prm = self.params
        if not p.alive:
            self.target = None
            self.release_view()
            return honest
        dt = self.dt_s
        eye = command_eye(p, honest.buttons, dt)
        sights = visible_sights(p, self.geometry, eye, self.columns, prm.include_hidden)
        keep = [s for s in sights if self.target is not None and s.slot == self.target.slot]
        sight = keep[0] if keep else (min(sights, key=lambda s: s.distance_m) if sights else None)
        self.target = sight
        if sight is None:
            last = self.release_view()
            if last is None:
                return honest
            fwd, side = remap_keys(honest, last[0])
            return replace(honest, yaw_deg=last[0], pitch_deg=last[1], forward=fwd, side=side)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, dt)
        noise = rng.standard_normal(2) * prm.aim_noise_deg
        yaw, pitch = aim_angles(sight.yaw_deg + float(noise[0]), sight.pitch_deg + float(noise[1]), punch)
        self.hold_view(yaw, pitch)
        fwd, side = remap_keys(honest, yaw)
        buttons = honest.buttons & ~_FIRE
        spec = held_spec(p)
        if (prm.autofire and spec is not None and sight.distance_m <= spec.max_range_m and self.fire_ready(p)
                and spread_ok(p, honest.buttons, prm.max_spread_factor)):
            buttons |= _FIRE
        return replace(honest, yaw_deg=yaw, pitch_deg=pitch, forward=fwd, side=side, buttons=buttons,
                       aim_target=sight.slot)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        client = self.client
        sight = self.target
        if not shots or client is None or sight is None:
            return shots
        st = client.predicted
        eye = np.asarray(eye_at(st.pos, st.stance == 1))
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        lo, hi = self.params.offset_m
        bone = int(BONE_IDS[sight.column])
        out = []
        for shot in shots:
            d = view_direction(shot.yaw_deg - punch[1], min(max(shot.pitch_deg + punch[0], -90.0), 90.0))
            _, _, dist = direction_angles(tuple(eye.tolist()), sight.point)  # type: ignore[arg-type]
            offset = float(rng.uniform(lo, hi))
            try:
                reach = weapon(shot.weapon).max_range_m
            except KeyError:
                reach = dist + offset
            # In front of the shooter when the target is far enough, else beyond it (within range).
            along = dist - offset if dist - offset >= 1.0 else min(dist + offset, reach)
            point = eye + d * along
            out.append(shot._replace(claimed_victim=sight.slot,
                                     claimed_hit_point=(float(point[0]), float(point[1]), float(point[2])),
                                     claimed_bone=bone))
        return out
