"""Per-bone capsule hitboxes that depend on stance, and batched ray-vs-capsule intersection.

Hit locations use IW4MAdmin's numbering (REFERENCES section 3). Its table has no lower left leg
(14 is the lower right leg, 15/16 the feet), so we give the lower left leg id 17; 0 means no bone.

Each bone is a capsule (segment a-b swept by radius r) in the player's local frame: x forward
(the yaw direction), y to the player's left, z up from the feet, meters. The pose is a player
holding a long gun: forearms and hands in front of the chest, which is why chest hits are
not simply "every shot at the torso".
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from world.constants import STANCE_CROUCHING, STANCE_STANDING


class Bone(IntEnum):
    """Hit location ids (IW4MAdmin's numbers; LOWER_LEFT_LEG = 17 is ours)."""

    NONE = 0
    HEAD = 2
    NECK = 3
    UPPER_TORSO = 4
    LOWER_TORSO = 5
    UPPER_RIGHT_ARM = 6
    UPPER_LEFT_ARM = 7
    LOWER_RIGHT_ARM = 8
    LOWER_LEFT_ARM = 9
    RIGHT_HAND = 10
    LEFT_HAND = 11
    UPPER_RIGHT_LEG = 12
    UPPER_LEFT_LEG = 13
    LOWER_RIGHT_LEG = 14
    RIGHT_FOOT = 15
    LEFT_FOOT = 16
    LOWER_LEFT_LEG = 17


class BodyGroup(IntEnum):
    """Damage groups: weapons scale damage per group."""

    HEAD = 0
    NECK = 1
    CHEST = 2
    STOMACH = 3
    ARMS = 4
    LEGS = 5


BONE_GROUP: dict[Bone, BodyGroup] = {
    Bone.HEAD: BodyGroup.HEAD,
    Bone.NECK: BodyGroup.NECK,
    Bone.UPPER_TORSO: BodyGroup.CHEST,
    Bone.LOWER_TORSO: BodyGroup.STOMACH,
    Bone.UPPER_RIGHT_ARM: BodyGroup.ARMS,
    Bone.UPPER_LEFT_ARM: BodyGroup.ARMS,
    Bone.LOWER_RIGHT_ARM: BodyGroup.ARMS,
    Bone.LOWER_LEFT_ARM: BodyGroup.ARMS,
    Bone.RIGHT_HAND: BodyGroup.ARMS,
    Bone.LEFT_HAND: BodyGroup.ARMS,
    Bone.UPPER_RIGHT_LEG: BodyGroup.LEGS,
    Bone.UPPER_LEFT_LEG: BodyGroup.LEGS,
    Bone.LOWER_RIGHT_LEG: BodyGroup.LEGS,
    Bone.LOWER_LEFT_LEG: BodyGroup.LEGS,
    Bone.RIGHT_FOOT: BodyGroup.LEGS,
    Bone.LEFT_FOOT: BodyGroup.LEGS,
}

# (bone, a, b, radius) per stance; a == b makes a sphere.
_Cap = tuple[Bone, tuple[float, float, float], tuple[float, float, float], float]

_STANDING: tuple[_Cap, ...] = (
    (Bone.HEAD, (0.02, 0.0, 1.67), (0.02, 0.0, 1.70), 0.100),
    (Bone.NECK, (0.0, 0.0, 1.50), (0.0, 0.0, 1.54), 0.060),
    (Bone.UPPER_TORSO, (0.0, 0.0, 1.20), (0.0, 0.0, 1.32), 0.150),
    (Bone.LOWER_TORSO, (0.0, 0.0, 0.98), (0.0, 0.0, 1.08), 0.140),
    (Bone.UPPER_RIGHT_ARM, (0.0, -0.21, 1.40), (0.10, -0.22, 1.18), 0.050),
    (Bone.UPPER_LEFT_ARM, (0.0, 0.21, 1.40), (0.12, 0.20, 1.20), 0.050),
    (Bone.LOWER_RIGHT_ARM, (0.10, -0.22, 1.18), (0.32, -0.10, 1.30), 0.045),
    (Bone.LOWER_LEFT_ARM, (0.12, 0.20, 1.20), (0.45, 0.02, 1.32), 0.045),
    (Bone.RIGHT_HAND, (0.36, -0.08, 1.31), (0.36, -0.08, 1.31), 0.045),
    (Bone.LEFT_HAND, (0.50, 0.0, 1.33), (0.50, 0.0, 1.33), 0.045),
    (Bone.UPPER_RIGHT_LEG, (0.0, -0.10, 0.88), (0.0, -0.11, 0.50), 0.075),
    (Bone.UPPER_LEFT_LEG, (0.0, 0.10, 0.88), (0.0, 0.11, 0.50), 0.075),
    (Bone.LOWER_RIGHT_LEG, (0.0, -0.11, 0.48), (0.0, -0.11, 0.13), 0.060),
    (Bone.LOWER_LEFT_LEG, (0.0, 0.11, 0.48), (0.0, 0.11, 0.13), 0.060),
    (Bone.RIGHT_FOOT, (0.04, -0.11, 0.05), (0.14, -0.11, 0.05), 0.050),
    (Bone.LEFT_FOOT, (0.04, 0.11, 0.05), (0.14, 0.11, 0.05), 0.050),
)

_CROUCHING: tuple[_Cap, ...] = (
    (Bone.HEAD, (0.10, 0.0, 1.02), (0.10, 0.0, 1.04), 0.100),
    (Bone.NECK, (0.06, 0.0, 0.87), (0.08, 0.0, 0.91), 0.055),
    (Bone.UPPER_TORSO, (0.02, 0.0, 0.66), (0.05, 0.0, 0.76), 0.150),
    (Bone.LOWER_TORSO, (0.0, 0.0, 0.46), (0.0, 0.0, 0.54), 0.140),
    (Bone.UPPER_RIGHT_ARM, (0.04, -0.21, 0.82), (0.14, -0.22, 0.62), 0.050),
    (Bone.UPPER_LEFT_ARM, (0.04, 0.21, 0.82), (0.16, 0.20, 0.64), 0.050),
    (Bone.LOWER_RIGHT_ARM, (0.14, -0.22, 0.62), (0.36, -0.10, 0.74), 0.045),
    (Bone.LOWER_LEFT_ARM, (0.16, 0.20, 0.64), (0.49, 0.02, 0.76), 0.045),
    (Bone.RIGHT_HAND, (0.40, -0.08, 0.75), (0.40, -0.08, 0.75), 0.045),
    (Bone.LEFT_HAND, (0.54, 0.0, 0.77), (0.54, 0.0, 0.77), 0.045),
    (Bone.UPPER_RIGHT_LEG, (0.0, -0.10, 0.42), (0.38, -0.12, 0.45), 0.075),
    (Bone.UPPER_LEFT_LEG, (0.0, 0.10, 0.42), (0.38, 0.12, 0.45), 0.075),
    (Bone.LOWER_RIGHT_LEG, (0.38, -0.12, 0.42), (0.30, -0.12, 0.11), 0.060),
    (Bone.LOWER_LEFT_LEG, (0.38, 0.12, 0.42), (0.30, 0.12, 0.11), 0.060),
    (Bone.RIGHT_FOOT, (0.26, -0.12, 0.05), (0.36, -0.12, 0.05), 0.050),
    (Bone.LEFT_FOOT, (0.26, 0.12, 0.05), (0.36, 0.12, 0.05), 0.050),
)


def _table(caps: tuple[_Cap, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.array([c[1] for c in caps], dtype=np.float64)
    b = np.array([c[2] for c in caps], dtype=np.float64)
    r = np.array([c[3] for c in caps], dtype=np.float64)
    return a, b, r


if [c[0] for c in _STANDING] != [c[0] for c in _CROUCHING]:  # pragma: no cover - table consistency
    raise AssertionError("standing and crouching bone tables must list the same bones in the same order")

BONE_IDS = np.array([int(c[0]) for c in _STANDING], dtype=np.int8)
"""Bone id of each capsule column, in table order."""

_A_ST, _B_ST, _R_ST = _table(_STANDING)
_A_CR, _B_CR, _R_CR = _table(_CROUCHING)
LOCAL_A = np.stack([_A_ST, _A_CR])  # (stance, bone, 3)
LOCAL_B = np.stack([_B_ST, _B_CR])
RADIUS = np.stack([_R_ST, _R_CR])  # (stance, bone)
NUM_BONES = len(BONE_IDS)


def _bounds(stance: int) -> tuple[float, float, float]:
    """(horizontal radius, z min, z max) enclosing every capsule of a stance, meters."""
    pts = np.concatenate([LOCAL_A[stance], LOCAL_B[stance]])
    rr = np.concatenate([RADIUS[stance], RADIUS[stance]])
    horiz = float(np.max(np.hypot(pts[:, 0], pts[:, 1]) + rr))
    return horiz, float(np.min(pts[:, 2] - rr)), float(np.max(pts[:, 2] + rr))


BOUND_RADIUS = np.array([_bounds(STANCE_STANDING)[0], _bounds(STANCE_CROUCHING)[0]])
"""Per stance: horizontal radius (m) of a vertical cylinder around the feet enclosing every bone."""
BOUND_ZMIN = np.array([_bounds(STANCE_STANDING)[1], _bounds(STANCE_CROUCHING)[1]])
BOUND_ZMAX = np.array([_bounds(STANCE_STANDING)[2], _bounds(STANCE_CROUCHING)[2]])


def world_capsules(
    pos: np.ndarray, yaw_deg: np.ndarray, stance: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Capsules of M players in world coordinates.

    Args:
        pos: (M,3) feet positions (m). yaw_deg: (M,) yaw (deg). stance: (M,) 0 standing / 1 crouching.
    Returns:
        a, b: (M, NUM_BONES, 3) capsule segment ends (m); r: (M, NUM_BONES) radii (m).
    Columns follow :data:`BONE_IDS`.
    """
    st = np.asarray(stance, dtype=np.intp)
    yaw = np.radians(np.asarray(yaw_deg, dtype=np.float64))
    c = np.cos(yaw)[:, None]
    s = np.sin(yaw)[:, None]
    la = LOCAL_A[st]
    lb = LOCAL_B[st]
    a = np.empty_like(la)
    b = np.empty_like(lb)
    p = np.asarray(pos, dtype=np.float64)[:, None, :]
    a[..., 0] = la[..., 0] * c - la[..., 1] * s
    a[..., 1] = la[..., 0] * s + la[..., 1] * c
    a[..., 2] = la[..., 2]
    b[..., 0] = lb[..., 0] * c - lb[..., 1] * s
    b[..., 1] = lb[..., 0] * s + lb[..., 1] * c
    b[..., 2] = lb[..., 2]
    a += p
    b += p
    return a, b, RADIUS[st]


def ray_capsule(
    origin: np.ndarray, direction: np.ndarray, a: np.ndarray, b: np.ndarray, r: np.ndarray
) -> np.ndarray:
    """Distance along rays to their first entry into capsules, broadcasting over leading axes.

    Args:
        origin, direction: (..., 3) ray origins (m) and unit directions.
        a, b: (..., 3) capsule segment ends (m); r: (...) radii (m).
    Returns:
        (...) distance t >= 0 (m) to the entry point, or np.inf where the ray misses or starts
        inside the capsule (a shooter's own eye is never inside a victim).
    """
    ba = b - a
    oa = origin - a
    baba = np.einsum("...i,...i->...", ba, ba)
    bard = np.einsum("...i,...i->...", ba, direction)
    baoa = np.einsum("...i,...i->...", ba, oa)
    rdoa = np.einsum("...i,...i->...", direction, oa)
    oaoa = np.einsum("...i,...i->...", oa, oa)
    r2 = r * r
    big_a = baba - bard * bard
    big_b = baba * rdoa - baoa * bard
    big_c = baba * oaoa - baoa * baoa - r2 * baba
    h = big_b * big_b - big_a * big_c
    with np.errstate(invalid="ignore", divide="ignore"):
        body_ok = (h >= 0.0) & (big_a > 1e-12)
        t_body = np.where(body_ok, (-big_b - np.sqrt(np.where(body_ok, h, 0.0))) / np.where(body_ok, big_a, 1.0), np.inf)
        y = baoa + t_body * bard
        on_body = body_ok & (y > 0.0) & (y < baba)
    # Otherwise the ray can only enter through one of the two end spheres; test both and keep the nearer.
    t_caps = np.full(np.broadcast(h, t_body).shape, np.inf)
    for end in (a, b):
        oc = origin - end
        bb = np.einsum("...i,...i->...", direction, oc)
        cc = np.einsum("...i,...i->...", oc, oc) - r2
        hh = bb * bb - cc
        ok = (hh >= 0.0) & (cc > 0.0)
        with np.errstate(invalid="ignore"):
            t = np.where(ok, -bb - np.sqrt(np.where(ok, hh, 0.0)), np.inf)
        t = np.where(t >= 0.0, t, np.inf)
        t_caps = np.minimum(t_caps, t)
    t_body = np.where(on_body & (t_body >= 0.0), t_body, np.inf)
    return np.minimum(t_body, t_caps)


def ray_bound(origin: np.ndarray, direction: np.ndarray, pos: np.ndarray, stance: np.ndarray) -> np.ndarray:
    """Conservative broad phase: distance along rays to a capsule enclosing the whole body.

    A vertical capsule from z_min to z_max above the feet with the stance's bound radius contains
    every bone, so a ray that misses it misses every bone. Shapes broadcast like :func:`ray_capsule`;
    ``pos`` (..., 3) feet positions, ``stance`` (...) ints. Returns distances (m) or np.inf; a ray
    starting inside the bound returns 0.
    """
    st = np.asarray(stance, dtype=np.intp)
    a = np.array(pos, dtype=np.float64, copy=True)
    b = a.copy()
    a[..., 2] += BOUND_ZMIN[st]
    b[..., 2] += BOUND_ZMAX[st]
    r = BOUND_RADIUS[st]
    t = ray_capsule(origin, direction, a, b, r)
    inside = _inside_capsule(origin, a, b, r)
    return np.where(inside, 0.0, t)


def _inside_capsule(p: np.ndarray, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    ba = b - a
    pa = p - a
    denom = np.einsum("...i,...i->...", ba, ba)
    h = np.clip(np.einsum("...i,...i->...", pa, ba) / np.where(denom > 0, denom, 1.0), 0.0, 1.0)
    d = pa - ba * h[..., None]
    return np.einsum("...i,...i->...", d, d) <= r * r
