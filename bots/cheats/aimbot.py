"""Aimbots that write the view angles: lock, rage and the humanised (smooth) aimbot.

* ``lock_aimbot`` (:class:`LockAimbot`): every tick the view snaps exactly onto the chosen bone of
  the nearest visible enemy (kept while it stays visible), with the own recoil punch pulled down
  exactly, and FIRE whenever the weapon can fire and the target is in range.
* ``rage_aimbot`` (:class:`RageAimbot`): the same snap with no field of view, but it changes target
  after every shot (the least recently shot visible enemy first, nearest next), so with several
  enemies in sight it flicks between them, 180 deg if needed; fires whenever the weapon can;
  head first, then the next visible bone.
* ``smooth_aimbot`` (:class:`SmoothAimbot`): a humanised aimbot; each tick the view moves a
  fraction ``strength`` of the remaining angle to the target plus a little noise, on top of the
  human's own mouse movement. ``strength`` 1 is a lock (plus noise), 0 leaves the human alone.

All read the raw entity list: with ``include_hidden`` (default) a ``rendered=False`` record (an
AimDetect bait) is a target like any other, which is what the bait exists to catch. Targets
must be in line of sight of the eye (client-side ray against the shipped map). When an aimbot
lets go of the view, the human's hand continues from where the aimbot left it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.params import check_bone, check_fraction, check_positive
from bots.cheats.targeting import (
    Sight,
    aim_angles,
    angle_between,
    bone_column,
    command_eye,
    counter_strafe,
    held_spec,
    punch_at_fire,
    remap_keys,
    spread_ok,
    visible_sights,
    wrap,
)
from bots.perception import Intent, Perception
from physics.buttons import Buttons
from server.protocol import Shot

__all__ = [
    "LockAimbot",
    "LockParams",
    "RageAimbot",
    "RageParams",
    "SmoothAimbot",
    "SmoothParams",
    "fallback_columns",
]

_FIRE = int(Buttons.FIRE)
_BODY_FALLBACK = ("head", "neck", "upper_torso", "lower_torso")


def fallback_columns(bone: str, fallback: bool) -> tuple[int, ...]:
    """Bone columns in preference order: ``bone``, then (with ``fallback``) head, neck and torso."""
    names = [bone] + ([b for b in _BODY_FALLBACK if b != bone] if fallback else [])
    return tuple(bone_column(n) for n in names)


@dataclass(frozen=True, slots=True)
class LockParams:
    """Lock aimbot.

    Attributes:
        bone: bone to lock onto ("head"; any ``world.hitbox.Bone`` name in lower case).
        fallback_to_body: when that bone is hidden, lock onto the next visible one of head, neck,
            upper and lower torso.
        include_hidden: treat ``rendered=False`` entities (bait targets) as enemies.
        autofire: press FIRE whenever the weapon can fire at a locked target in range.
        compensate_recoil: pull the view down by exactly the recoil punch.
        autostop: while locked, counter-strafe to a stop (the usual aimbot option: the weapon's
            spread grows with speed).
        max_spread_factor: auto-fire waits until the weapon's spread cone is at most this many times
            its standing-still cone (moving spread; 0 = never wait).
    """

    bone: str = "head"
    fallback_to_body: bool = True
    include_hidden: bool = True
    autofire: bool = True
    compensate_recoil: bool = True
    autostop: bool = True
    max_spread_factor: float = 2.5

    def __post_init__(self) -> None:
        check_bone("LockParams", "bone", self.bone)
        check_positive("LockParams", "max_spread_factor", self.max_spread_factor, allow_zero=True)


@dataclass(frozen=True, slots=True)
class RageParams:
    """Rage aimbot: lock without a field of view, switching target after every shot.

    Attributes:
        include_hidden: treat ``rendered=False`` entities (bait targets) as enemies.
        switch_after_shot: after each shot, prefer the visible enemy shot least recently.
        compensate_recoil: pull the view down by exactly the recoil punch.
        autostop: while a target is in sight, counter-strafe to a stop (less spread).
        max_spread_factor: fire only when the weapon's spread cone is at most this many times its
            standing-still cone (0, the default: never wait; rage fires continuously).
    """

    include_hidden: bool = True
    switch_after_shot: bool = True
    compensate_recoil: bool = True
    autostop: bool = True
    max_spread_factor: float = 0.0

    def __post_init__(self) -> None:
        check_positive("RageParams", "max_spread_factor", self.max_spread_factor, allow_zero=True)


@dataclass(frozen=True, slots=True)
class SmoothParams:
    """Humanised aimbot.

    Attributes:
        strength: fraction (0..1) of the remaining angle to the target closed per client tick;
            1 = lock, 0 = no effect (the honest player).
        noise_deg: sd (deg) of the per-axis noise added to each aimbot step (hides the exact lock).
        fov_deg: only enemies within this angle (deg) of the crosshair are pulled to (cone
            diameter, like the "FOV" setting of such cheats).
        bone: bone to pull to.
        fallback_to_body: pull to the next visible bone (head, neck, torso) when it is hidden.
        include_hidden: treat ``rendered=False`` entities (bait targets) as enemies.
        autofire: press FIRE when the crosshair is on the bone and the weapon can fire.
        max_spread_factor: auto-fire waits until the weapon's spread cone is at most this many times
            its standing-still cone (moving spread; 0 = never wait).
    """

    strength: float = 0.4
    noise_deg: float = 0.05
    fov_deg: float = 90.0
    bone: str = "head"
    fallback_to_body: bool = True
    include_hidden: bool = True
    autofire: bool = True
    max_spread_factor: float = 2.5

    def __post_init__(self) -> None:
        check_fraction("SmoothParams", "strength", self.strength)
        check_positive("SmoothParams", "max_spread_factor", self.max_spread_factor, allow_zero=True)
        check_positive("SmoothParams", "noise_deg", self.noise_deg, allow_zero=True)
        if not 0.0 < self.fov_deg <= 360.0:
            raise ValueError(f"SmoothParams.fov_deg must be in (0, 360], got {self.fov_deg!r}")
        check_bone("SmoothParams", "bone", self.bone)


class _SnapAimbot(CheatHooks):
    """Shared machinery of the aimbots that snap the view exactly: lock and rage."""

    def __init__(self, ctx: BuildContext | None, columns: tuple[int, ...], include_hidden: bool,
                 compensate_recoil: bool, autostop: bool) -> None:
        super().__init__(ctx)
        self.columns = columns
        self.include_hidden = include_hidden
        self.compensate_recoil = compensate_recoil
        self.autostop = autostop
        self.target: int | None = None
        """Slot locked onto this tick, None when none."""

    def choose(self, p: Perception, sights: list[Sight]) -> Sight | None:
        """The target of this tick among the visible ones."""
        raise NotImplementedError

    def wants_fire(self, p: Perception, sight: Sight, buttons: int) -> bool:
        """Press FIRE at ``sight`` this tick (``buttons``: the command's other buttons)?"""
        raise NotImplementedError

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive:
            self.target = None
            self.release_view()
            return honest
        dt = self.dt_s
        eye = command_eye(p, honest.buttons, dt)
        sight = self.choose(p, visible_sights(p, self.geometry, eye, self.columns, self.include_hidden))
        if sight is None:
            self.target = None
            last = self.release_view()
            if last is None:
                return honest
            # The release tick keeps the view where the aimbot left it; the hand goes on from there.
            fwd, side = remap_keys(honest, last[0])
            return replace(honest, yaw_deg=last[0], pitch_deg=last[1], forward=fwd, side=side)
        self.target = sight.slot
        punch = (0.0, 0.0)
        if self.compensate_recoil:
            punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, dt)
        yaw, pitch = aim_angles(sight.yaw_deg, sight.pitch_deg, punch)
        self.hold_view(yaw, pitch)
        fwd, side = counter_strafe(p, yaw) if self.autostop else remap_keys(honest, yaw)
        buttons = honest.buttons & ~_FIRE
        if self.wants_fire(p, sight, buttons):
            buttons |= _FIRE
        return replace(honest, yaw_deg=yaw, pitch_deg=pitch, forward=fwd, side=side, buttons=buttons,
                       aim_target=sight.slot)


def _in_range(p: Perception, sight: Sight) -> bool:
    spec = held_spec(p)
    return spec is not None and sight.distance_m <= spec.max_range_m


class LockAimbot(_SnapAimbot):
    """``lock_aimbot``: snap onto the nearest visible enemy's bone every tick, fire when on it."""

    name = "lock_aimbot"

    def __init__(self, params: LockParams = LockParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx, fallback_columns(params.bone, params.fallback_to_body), params.include_hidden,
                         params.compensate_recoil, params.autostop)
        self.params = params

    def choose(self, p: Perception, sights: list[Sight]) -> Sight | None:
        if not sights:
            return None
        for s in sights:
            if s.slot == self.target:
                return s  # locked: keep it while it stays visible
        return min(sights, key=lambda s: s.distance_m)

    def wants_fire(self, p: Perception, sight: Sight, buttons: int) -> bool:
        prm = self.params
        return (prm.autofire and self.fire_ready(p) and _in_range(p, sight)
                and spread_ok(p, buttons, prm.max_spread_factor))


class RageAimbot(_SnapAimbot):
    """``rage_aimbot``: snap anywhere (no field of view), a new target after every shot, fire
    whenever the weapon can."""

    name = "rage_aimbot"

    def __init__(self, params: RageParams = RageParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx, fallback_columns("head", True), params.include_hidden, params.compensate_recoil,
                         params.autostop)
        self.params = params
        self._shot_at: dict[int, int] = {}

    def choose(self, p: Perception, sights: list[Sight]) -> Sight | None:
        if not sights:
            return None
        if not self.params.switch_after_shot:
            for s in sights:
                if s.slot == self.target:
                    return s
            return min(sights, key=lambda s: s.distance_m)
        return min(sights, key=lambda s: (self._shot_at.get(s.slot, -1), s.distance_m))

    def wants_fire(self, p: Perception, sight: Sight, buttons: int) -> bool:
        return self.fire_ready(p) and spread_ok(p, buttons, self.params.max_spread_factor)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        if shots and self.target is not None:
            self._shot_at[self.target] = p.tick
            if len(self._shot_at) > 64:
                live = {e.slot for e in p.entities}
                self._shot_at = {k: v for k, v in self._shot_at.items() if k in live}
        return shots


class SmoothAimbot(CheatHooks):
    """``smooth_aimbot``: pulls the view a fraction ``strength`` of the way to the target per tick.

    The view it sends is the human's own mouse movement (the honest brain's angle changes) plus
    the aimbot's pull, so the human keeps moving the mouse while the aimbot drags it.
    """

    name = "smooth_aimbot"

    def __init__(self, params: SmoothParams = SmoothParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self.columns = fallback_columns(params.bone, params.fallback_to_body)
        self.target: int | None = None
        self._view: tuple[float, float] | None = None
        self._honest_prev: tuple[float, float] | None = None
        self._engaged = False

    def _reset(self) -> None:
        self.target = None
        self._view = None
        self._honest_prev = None
        self._engaged = False

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        prm = self.params
        if prm.strength <= 0.0:
            return honest
        if not p.alive:
            self._reset()
            return honest
        if self._view is None or self._honest_prev is None:
            self._view = self._honest_prev = (honest.yaw_deg, honest.pitch_deg)
        # The human's own mouse motion this tick, applied to the view the aimbot left.
        vy = self._view[0] + wrap(honest.yaw_deg - self._honest_prev[0])
        vp = self._view[1] + (honest.pitch_deg - self._honest_prev[1])
        self._honest_prev = (honest.yaw_deg, honest.pitch_deg)
        dt = self.dt_s
        eye = command_eye(p, honest.buttons, dt)
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, dt)
        sight = self._choose(visible_sights(p, self.geometry, eye, self.columns, prm.include_hidden), vy, vp, punch)
        buttons = honest.buttons
        aim_target = honest.aim_target
        if sight is None:
            self.target = None
            if self._engaged:
                # Let go: the human's hand continues from the view the aimbot left.
                self.hand_over(vy, vp)
                self._honest_prev = (wrap(vy), vp)
                self._engaged = False
        else:
            self.target = sight.slot
            self._engaged = True
            gy, gp = aim_angles(sight.yaw_deg, sight.pitch_deg, punch)
            k = prm.strength
            noise = rng.standard_normal(2) * prm.noise_deg if prm.noise_deg > 0.0 else np.zeros(2)
            vy = vy + k * wrap(gy - vy) + float(noise[0])
            vp = vp + k * (gp - vp) + float(noise[1])
            aim_target = sight.slot
            ready = self.fire_ready(p) and spread_ok(p, buttons, prm.max_spread_factor)
            if prm.autofire and ready and held_spec(p) is not None:
                err = angle_between(vy - punch[1], vp + punch[0], sight.yaw_deg, sight.pitch_deg)
                on = err <= math.degrees(math.atan2(sight.radius_m, max(sight.distance_m, 1e-3)))
                if on and sight.distance_m <= held_spec(p).max_range_m:  # type: ignore[union-attr]
                    buttons |= _FIRE
        vy = wrap(vy)
        vp = min(max(vp, -89.0), 89.0)
        self._view = (vy, vp)
        fwd, side = remap_keys(honest, vy)
        return replace(honest, yaw_deg=vy, pitch_deg=vp, forward=fwd, side=side, buttons=buttons,
                       aim_target=aim_target)

    def _choose(self, sights: list[Sight], vy: float, vp: float, punch: tuple[float, float]) -> Sight | None:
        """The enemy nearest the crosshair within the field of view; the current one while it
        stays within 1.5 times the field of view."""
        if not sights:
            return None
        half = 0.5 * self.params.fov_deg
        shot_yaw, shot_pitch = vy - punch[1], vp + punch[0]
        best: Sight | None = None
        best_angle = math.inf
        for s in sights:
            a = angle_between(shot_yaw, shot_pitch, s.yaw_deg, s.pitch_deg)
            if s.slot == self.target and a <= 1.5 * half:
                return s
            if a <= half and a < best_angle:
                best, best_angle = s, a
        return best
