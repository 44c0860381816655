"""Which of a hit victim's bones the shooter could see: the hit-location detectors' context.

A hit's location says where the shooter aims only when the rest of the body was there to be hit.
Behind low cover a standing target shows its head and upper torso, never its lower torso, so every
hit on it lands high whatever the aim. The server knows the map and the rewound pose, so it records
with each hit which bones were in view (``ShotResult.exposed``) and the detectors decide what to
count.

A bone is in view when the segment from the shot's origin (the shooter's eye) to the centre of the
bone's capsule touches no wall. Units: meters, degrees.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from world.hitbox import BONE_IDS, LOCAL_A, LOCAL_B, Bone

__all__ = ["EXPOSURE_BONES", "bone_centres", "exposure_masks"]

EXPOSURE_BONES: tuple[Bone, ...] = (Bone.HEAD, Bone.UPPER_TORSO, Bone.LOWER_TORSO)
"""The bones whose view is recorded (the ones IW4MAdmin's location ratios compare)."""

_COLUMNS = np.array([int(np.flatnonzero(BONE_IDS == int(b))[0]) for b in EXPOSURE_BONES])
_MID = (LOCAL_A[:, _COLUMNS] + LOCAL_B[:, _COLUMNS]) / 2.0  # (stance, bone, 3), the body's frame
_BITS = np.array([1 << int(b) for b in EXPOSURE_BONES], dtype=np.int64)


def bone_centres(feet: np.ndarray, yaw_deg: np.ndarray, stance: np.ndarray) -> np.ndarray:
    """(P, B, 3) world centres (m) of the :data:`EXPOSURE_BONES` capsules of P bodies with feet at
    ``feet`` (P, 3), facing ``yaw_deg`` (P,) in ``stance`` (P,) (the body frame: x forward along
    the yaw, y to the left, z up)."""
    feet = np.asarray(feet, dtype=np.float64).reshape(-1, 3)
    yaw = np.radians(np.asarray(yaw_deg, dtype=np.float64).reshape(-1))
    mid = _MID[np.asarray(stance, dtype=np.intp).reshape(-1)]  # (P, B, 3)
    cos, sin = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    out = np.empty_like(mid)
    out[..., 0] = feet[:, 0:1] + cos * mid[..., 0] - sin * mid[..., 1]
    out[..., 1] = feet[:, 1:2] + sin * mid[..., 0] + cos * mid[..., 1]
    out[..., 2] = feet[:, 2:3] + mid[..., 2]
    return out


def exposure_masks(
    origins: np.ndarray,
    feet: np.ndarray,
    yaw_deg: np.ndarray,
    stance: np.ndarray,
    los_clear: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> list[int]:
    """Per body, the bits ``1 << bone id`` of the :data:`EXPOSURE_BONES` in view from ``origins``
    (P, 3) m; ``los_clear(p0, p1)`` is the map's segment test (``MapGeometry.los_clear``)."""
    centres = bone_centres(feet, yaw_deg, stance)
    p, b = centres.shape[:2]
    if p == 0:
        return []
    eyes = np.repeat(np.asarray(origins, dtype=np.float64).reshape(-1, 3), b, axis=0)
    clear = np.asarray(los_clear(eyes, centres.reshape(-1, 3)), dtype=bool).reshape(p, b)
    return (clear * _BITS).sum(axis=1).tolist()
