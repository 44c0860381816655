"""What aim cheats compute from a client's own knowledge: enemies, bone points, visibility, the
angles that put a shot on a point (with the own recoil punch compensated) and movement keys that
keep walking the same way when a cheat turns the view.

Everything here uses only what a client has: its Perception (snapshots interpolated at the view
time), the map geometry it ships, and the weapon table. Units: meters, seconds, degrees; angles
follow ``world.state`` (yaw 0 = +x counter-clockwise, pitch up), and a shot flies along
``yaw - punch_yaw, pitch + punch_pitch`` (``physics.weapon_state``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bots.honest import is_enemy, keys_toward
from bots.perception import Intent, Perception, SeenEntity
from physics.buttons import Buttons
from physics.weapon_state import current_spread_deg
from world.constants import (
    CROUCHING_EYE_M,
    STANCE_CROUCHING,
    STANCE_STANDING,
    STANDING_EYE_M,
)
from world.geometry import MapGeometry
from world.hitbox import BONE_IDS, RADIUS, Bone, world_capsules
from world.state import PITCH_LIMIT_DEG
from world.weapons import WeaponSpec, weapon

__all__ = [
    "BAIT_RADIUS_M",
    "Sight",
    "aim_angles",
    "angle_between",
    "bone_column",
    "bone_point",
    "command_eye",
    "counter_strafe",
    "direction_angles",
    "enemies",
    "eye_at",
    "held_spec",
    "punch_at_fire",
    "remap_keys",
    "spread_ok",
    "visible_sights",
    "wrap",
]

_CROUCH = int(Buttons.CROUCH)

BAIT_RADIUS_M = 0.15
"""Radius (m) a cheat assumes for a skeleton-less entity (a bait record is a point target)."""


def wrap(angle: float) -> float:
    """An angle (deg) wrapped to [-180, 180)."""
    return (angle + 180.0) % 360.0 - 180.0


def bone_column(bone: str | Bone) -> int:
    """Column of ``bone`` (a Bone or its lower-case name) in ``world.hitbox.BONE_IDS``."""
    b = bone if isinstance(bone, Bone) else Bone[bone.upper()]
    return int(np.flatnonzero(BONE_IDS == int(b))[0])


def held_spec(p: Perception) -> WeaponSpec | None:
    """The spec of the held weapon, None for an empty hand or an unknown id."""
    if not p.weapon:
        return None
    try:
        return weapon(p.weapon)
    except KeyError:
        return None


def enemies(p: Perception, include_hidden: bool) -> list[SeenEntity]:
    """Alive enemies of the snapshot; ``include_hidden`` keeps ``rendered=False`` records too
    (what a cheat reading the raw entity list does; a human never sees them)."""
    return [e for e in p.entities if e.alive and is_enemy(p, e) and (e.rendered or include_hidden)]


def bone_point(e: SeenEntity, column: int) -> tuple[float, float, float]:
    """World centre (m) of the bone in ``column`` of entity ``e`` (its stance and yaw). A record
    that is not rendered has no skeleton: a bait record's ``pos`` is the bait's centre
    (``server/snapshots.py``), which is where an entity-list cheat aims."""
    if not e.rendered:
        return e.pos
    stance = STANCE_CROUCHING if e.crouching else STANCE_STANDING
    a, b, _ = world_capsules(np.array([e.pos]), np.array([e.yaw_deg]), np.array([stance]))
    c = 0.5 * (a[0, column] + b[0, column])
    return float(c[0]), float(c[1]), float(c[2])


def bone_radius(e: SeenEntity, column: int) -> float:
    """Radius (m) of the bone capsule in ``column`` (the assumed bait radius when not rendered)."""
    if not e.rendered:
        return BAIT_RADIUS_M
    return float(RADIUS[STANCE_CROUCHING if e.crouching else STANCE_STANDING, column])


def eye_at(pos: tuple[float, float, float], crouching: bool, vel: tuple[float, float, float] = (0.0, 0.0, 0.0),
           ahead_s: float = 0.0) -> tuple[float, float, float]:
    """Eye (m) of a body at feet ``pos``, moved ``ahead_s`` seconds along ``vel`` (m/s): the origin
    of a shot fired by the next command is the eye after that command's movement."""
    h = CROUCHING_EYE_M if crouching else STANDING_EYE_M
    return pos[0] + vel[0] * ahead_s, pos[1] + vel[1] * ahead_s, max(pos[2] + vel[2] * ahead_s, 0.0) + h


def command_eye(p: Perception, buttons: int, dt_s: float) -> tuple[float, float, float]:
    """Eye (m) after the next command: the stance that command's CROUCH button gives (held =
    crouched) and the own velocity over one tick of ``dt_s`` (s). A shot of that command leaves
    from there."""
    return eye_at(p.pos, bool(buttons & _CROUCH), p.vel, dt_s)


def direction_angles(eye: tuple[float, float, float], point: tuple[float, float, float]) -> tuple[float, float, float]:
    """(yaw deg, pitch deg, distance m) of the line from ``eye`` to ``point``."""
    dx, dy, dz = point[0] - eye[0], point[1] - eye[1], point[2] - eye[2]
    horiz = math.hypot(dx, dy)
    return math.degrees(math.atan2(dy, dx)), math.degrees(math.atan2(dz, horiz)), math.hypot(horiz, dz)


def punch_at_fire(punch_pitch_deg: float, punch_yaw_deg: float, weapon_id: int, dt_s: float) -> tuple[float, float]:
    """The recoil punch (pitch, yaw deg) a shot of the next command will fly with: the punch
    seen now, recovered for one command of ``dt_s`` seconds at the weapon's recovery rate (the
    magnitude falls linearly, as in ``physics.weapon_state``)."""
    mag = math.hypot(punch_pitch_deg, punch_yaw_deg)
    if mag <= 0.0 or not weapon_id:
        return 0.0, 0.0
    try:
        rate = weapon(weapon_id).recoil_recovery_deg_s
    except KeyError:
        return punch_pitch_deg, punch_yaw_deg
    scale = max(mag - rate * dt_s, 0.0) / mag
    return punch_pitch_deg * scale, punch_yaw_deg * scale


def spread_ok(p: Perception, buttons: int, max_factor: float) -> bool:
    """Is the held weapon accurate enough to shoot now? Its current spread cone (own speed, ground
    contact and the stance this command's CROUCH gives) is at most ``max_factor`` times the cone
    when standing still in that stance: the "wait for accuracy" of aimbots' auto-fire, which
    otherwise fire while running at several degrees of spread. 0 disables the check."""
    if not p.weapon or max_factor <= 0.0:
        return bool(p.weapon)
    stance = STANCE_CROUCHING if buttons & _CROUCH else STANCE_STANDING
    now = float(current_spread_deg(p.weapon, math.hypot(p.vel[0], p.vel[1]), p.on_ground, stance))
    still = float(current_spread_deg(p.weapon, 0.0, True, stance))
    return now <= max_factor * still + 1e-9


def aim_angles(yaw_deg: float, pitch_deg: float, punch: tuple[float, float]) -> tuple[float, float]:
    """View angles (deg) whose shot, kicked by ``punch`` (pitch up, yaw right), flies along
    (``yaw_deg``, ``pitch_deg``): pull down exactly the punch. Pitch is clamped to the world's
    limit, yaw wrapped."""
    yaw = wrap(yaw_deg + punch[1])
    pitch = min(max(pitch_deg - punch[0], -PITCH_LIMIT_DEG), PITCH_LIMIT_DEG)
    return yaw, pitch


def angle_between(yaw1: float, pitch1: float, yaw2: float, pitch2: float) -> float:
    """Great-circle angle (deg) between two view directions."""
    p1, p2 = math.radians(pitch1), math.radians(pitch2)
    dy = math.radians(wrap(yaw2 - yaw1))
    c = math.sin(p1) * math.sin(p2) + math.cos(p1) * math.cos(p2) * math.cos(dy)
    return math.degrees(math.acos(min(max(c, -1.0), 1.0)))


def remap_keys(honest: Intent, yaw_deg: float) -> tuple[float, float]:
    """Digital movement keys that move in the world direction the honest keys meant (relative to
    the honest view yaw) while the view looks along ``yaw_deg``: a player whose view a cheat turns
    keeps walking where it wanted to."""
    f, s = honest.forward, honest.side
    if f == 0.0 and s == 0.0:
        return 0.0, 0.0
    if abs(wrap(yaw_deg - honest.yaw_deg)) < 1e-9:
        return f, s
    bearing = honest.yaw_deg + math.degrees(math.atan2(-s, f))
    return keys_toward(bearing, yaw_deg)


def counter_strafe(p: Perception, yaw_deg: float, settle_m_s: float = 0.5) -> tuple[float, float]:
    """Digital keys (forward, side) against the own horizontal velocity, seen from a view along
    ``yaw_deg``: each axis faster than ``settle_m_s`` (m/s) gets the opposite key, so the body
    stops within a few ticks (the way players stop before a shot)."""
    yaw = math.radians(yaw_deg)
    vf = p.vel[0] * math.cos(yaw) + p.vel[1] * math.sin(yaw)
    vs = p.vel[0] * math.sin(yaw) - p.vel[1] * math.cos(yaw)
    fwd = -math.copysign(1.0, vf) if abs(vf) > settle_m_s else 0.0
    side = -math.copysign(1.0, vs) if abs(vs) > settle_m_s else 0.0
    return fwd, side


@dataclass(frozen=True, slots=True)
class Sight:
    """A target a cheat can shoot: the entity, the visible bone aimed at (its column and world
    point, m), and the yaw/pitch (deg) and distance (m) of that point from the eye."""

    entity: SeenEntity
    column: int
    point: tuple[float, float, float]
    yaw_deg: float
    pitch_deg: float
    distance_m: float

    @property
    def slot(self) -> int:
        """The target's slot."""
        return self.entity.slot

    @property
    def radius_m(self) -> float:
        """Radius (m) of the bone aimed at."""
        return bone_radius(self.entity, self.column)


def visible_sights(
    p: Perception,
    geometry: MapGeometry | None,
    eye: tuple[float, float, float],
    columns: tuple[int, ...],
    include_hidden: bool,
    need_los: bool = True,
) -> list[Sight]:
    """One Sight per alive enemy with a bone in line of sight of ``eye``: the first of ``columns``
    (bone preference order) that the eye sees. One batched line-of-sight query for all of them.
    Without ``geometry`` or with ``need_los`` False every enemy counts as visible (first bone)."""
    ents = enemies(p, include_hidden)
    if not ents:
        return []
    pts = [[bone_point(e, c) for c in (columns if e.rendered else columns[:1])] for e in ents]
    if geometry is not None and need_los:
        flat = np.asarray([q for row in pts for q in row], dtype=np.float64)
        clear = geometry.los_clear(np.tile(np.asarray(eye, dtype=np.float64), (len(flat), 1)), flat).tolist()
    else:
        clear = [True] * sum(len(r) for r in pts)
    out: list[Sight] = []
    k = 0
    for e, row in zip(ents, pts, strict=True):
        cols = columns if e.rendered else columns[:1]
        chosen = None
        for j, q in enumerate(row):
            if clear[k + j]:
                chosen = (cols[j], q)
                break
        k += len(row)
        if chosen is None:
            continue
        yaw, pitch, dist = direction_angles(eye, chosen[1])
        out.append(Sight(e, chosen[0], chosen[1], yaw, pitch, dist))
    return out
