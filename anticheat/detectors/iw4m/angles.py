"""IW4MAdmin's view-angle measures: Offset (silent aim), Snap and Strain.

Angles are (pitch, yaw) pairs in degrees; differences wrap at 180 so that 179 and -179 are 2 apart.

Offset. IW4MAdmin takes a = the angles of the snapshot before the hit, b = the snapshot after it and
c = the angles the hit was fired with, and per axis computes ``(|a-b| - |a-c| - |b-c|) / 2``. By the
triangle inequality that is never positive: it is minus half the *detour* the shot's angles make off
the straight way from a to b. ``sqrt(dx^2 + dy^2)`` squares the sign away, so the measure is the detour
``(|a-c| + |c-b| - |a-b|) / 2`` per axis, which is what :func:`view_angle_offset` returns (non-negative).
It is 0 whenever c lies between a and b on both axes (any smooth human motion, however fast) and equals
how far c jumped beyond the a-b span when the shot's angles flick away and back (silent aim). The
seed's ``((a - b) + (c - b)) - (a - c)`` simplifies to ``2 (c - b)`` with b as the hit snapshot, i.e. the
distance from the hit angles to the next snapshot: large for silent aim but also for any fast honest
turn, so we use the detour form of the actual implementation.

Snap. The change of angular step across the arrival at the hit: with samples a and b one and two steps
before the hit and c the hit's angles, ``|(c - b) - (b - a)|`` (Euclidean over pitch and yaw, deg per
step). A flick that lands on a target in one step gives a large value, smooth tracking a small one.

Strain. Target-switching effort between consecutive hits (IW4MAdmin's Strain.cs): per hit,
``dt = max(50 ms, time since the previous hit)``, ``v = |dpitch| + |dyaw|``, then
``strain *= base ** (2 ** (dt / 250 ms) / 1000)`` and ``strain += v ** 0.99 / dt * (distance / 1 inch) / 1000``
(dt in ms). The decay is negligible below a second and total after a few seconds.
"""

from __future__ import annotations

import math

__all__ = ["Angles", "StrainMeter", "abs_angle_diff", "signed_angle_diff", "snap_distance", "view_angle_offset"]

Angles = tuple[float, float]
"""(pitch_deg, yaw_deg)."""


def abs_angle_diff(a: float, b: float) -> float:
    """Smallest absolute difference between two angles (deg), in [0, 180]."""
    d = abs(a - b) % 360.0
    return 360.0 - d if d > 180.0 else d


def signed_angle_diff(to: float, frm: float) -> float:
    """``to - frm`` wrapped to [-180, 180) (deg)."""
    return (to - frm + 180.0) % 360.0 - 180.0


def view_angle_offset(a: Angles, b: Angles, c: Angles) -> float:
    """IW4MAdmin's offset (deg): how far the hit angles ``c`` detour off the way from ``a`` to ``b``."""
    total = 0.0
    for i in (0, 1):
        detour = (abs_angle_diff(a[i], c[i]) + abs_angle_diff(c[i], b[i]) - abs_angle_diff(a[i], b[i])) / 2.0
        total += detour * detour
    return math.sqrt(total)


def snap_distance(a: Angles, b: Angles, c: Angles) -> float:
    """Change of angular step (deg per step) from ``a -> b`` to ``b -> c``."""
    total = 0.0
    for i in (0, 1):
        step1 = signed_angle_diff(b[i], a[i])
        step2 = signed_angle_diff(c[i], b[i])
        total += (step2 - step1) ** 2
    return math.sqrt(total)


class StrainMeter:
    """Running strain of one player's session (three scalars)."""

    __slots__ = ("value", "last_angles", "last_time_s", "base", "halving_s", "min_dt_s", "unit_m")

    def __init__(self, base: float = 0.9, halving_s: float = 0.25, min_dt_s: float = 0.05, unit_m: float = 0.0254):
        self.value = 0.0
        self.last_angles: Angles | None = None
        self.last_time_s: float | None = None
        self.base = base
        self.halving_s = halving_s
        self.min_dt_s = min_dt_s
        self.unit_m = unit_m

    def update(self, time_s: float, angles: Angles, distance_m: float) -> float:
        """Account one hit at ``time_s`` fired with ``angles`` over ``distance_m``; returns the strain."""
        dt_s = self.min_dt_s if self.last_time_s is None else max(self.min_dt_s, time_s - self.last_time_s)
        self.last_time_s = time_s
        dt_ms = dt_s * 1000.0
        # Past ~64 halvings the factor is 0 to double precision; capping avoids an overflow of 2 ** x.
        self.value *= self.base ** (2.0 ** min(dt_s / self.halving_s, 64.0) / 1000.0)
        if self.last_angles is None:
            self.last_angles = angles
            return self.value
        moved = abs_angle_diff(angles[0], self.last_angles[0]) + abs_angle_diff(angles[1], self.last_angles[1])
        if moved == 0.0:
            return self.value
        self.value += (moved**0.99 / dt_ms) * (max(0.0, distance_m) / self.unit_m) / 1000.0
        self.last_angles = angles
        return self.value
