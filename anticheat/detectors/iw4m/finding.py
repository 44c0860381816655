"""One IW4MAdmin finding (type, level, scope, value) and its penalty-reason string."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from world.hitbox import Bone

__all__ = ["Finding", "Level", "Scope", "LOCATION_NAME", "location_name"]


class Level(str, Enum):
    """IW4MAdmin's two penalty levels: a flag asks a human to look, a ban is the strong verdict."""

    FLAG = "flag"
    BAN = "ban"


class Scope(str, Enum):
    """Which hits were analysed: this session's, or every hit ever (the persisted profile)."""

    SESSION = "session"
    LIFETIME = "lifetime"


LOCATION_NAME: dict[int, str] = {
    int(Bone.HEAD): "head",
    int(Bone.NECK): "neck",
    int(Bone.UPPER_TORSO): "torso_upper",
    int(Bone.LOWER_TORSO): "torso_lower",
    int(Bone.UPPER_RIGHT_ARM): "right_arm_upper",
    int(Bone.UPPER_LEFT_ARM): "left_arm_upper",
    int(Bone.LOWER_RIGHT_ARM): "right_arm_lower",
    int(Bone.LOWER_LEFT_ARM): "left_arm_lower",
    int(Bone.RIGHT_HAND): "right_hand",
    int(Bone.LEFT_HAND): "left_hand",
    int(Bone.UPPER_RIGHT_LEG): "right_leg_upper",
    int(Bone.UPPER_LEFT_LEG): "left_leg_upper",
    int(Bone.LOWER_RIGHT_LEG): "right_leg_lower",
    int(Bone.RIGHT_FOOT): "right_foot",
    int(Bone.LEFT_FOOT): "left_foot",
    int(Bone.LOWER_LEFT_LEG): "left_leg_lower",
}
"""IW4x hit-location names per bone id; 17 (lower left leg, missing from IW4x's table) is ours."""


def location_name(bone: int) -> str:
    """IW4x name of a hit location (``bone<id>`` for an id outside the table)."""
    return LOCATION_NAME.get(int(bone), f"bone{int(bone)}")


@dataclass(frozen=True, slots=True)
class Finding:
    """A detection type whose limit was crossed.

    Attributes:
        type: IW4MAdmin's detection type name (Bone, Chest, Offset, Strain, Recoil, Snap, Button).
        level, scope: see :class:`Level` and :class:`Scope`.
        value: the measured figure; threshold: the limit it crossed at this level.
        hits: the sample size the figure is over (hits, upper-torso hits, snap hits...).
        location: bone id for Bone findings (the reason names it), else None.
    """

    type: str
    level: Level
    scope: Scope
    value: float
    threshold: float
    hits: int
    location: int | None = None

    @property
    def reason(self) -> str:
        """IW4MAdmin's penalty reason ``Type-value@hits`` (Bone: ``Bone-<loc>-value@hits``), 2 decimals."""
        if self.type == "Bone" and self.location is not None:
            return f"Bone-{location_name(self.location)}-{self.value:.2f}@{self.hits}"
        return f"{self.type}-{self.value:.2f}@{self.hits}"
