"""Player body constants shared by geometry, physics, hitboxes and lag compensation.

Units: meters. Counter-Strike's hull is 32 x 72 Source units standing (1 u = 0.0254 m); our
crouched body is lower than CS's (1.15 m instead of 54 u = 1.37 m) so that the low cover of our
maps (1.20 m) hides a crouching player completely, which is the point of low cover.
"""

from __future__ import annotations

from typing import Final

PLAYER_RADIUS_M: Final = 0.41
"""Radius of the player's collision circle (CS hull half-width, 16 u)."""

STANDING_HEIGHT_M: Final = 1.83
"""Top of a standing player's hull (72 u)."""

CROUCHING_HEIGHT_M: Final = 1.15
"""Top of a crouching player's hull; below LOW_COVER_HEIGHT_M by design."""

STANDING_EYE_M: Final = 1.64
"""Eye height above the feet when standing (64 u)."""

CROUCHING_EYE_M: Final = 1.05
"""Eye height above the feet when crouching; below low cover, so a crouched player cannot shoot over it."""

STANDING_CHEST_M: Final = 1.26
"""Centre of a standing player's upper torso above the feet: the reference point of a body."""

CROUCHING_CHEST_M: Final = 0.70
"""Centre of a crouching player's upper torso above the feet."""

LOW_COVER_HEIGHT_M: Final = 1.20
"""Height of the built-in maps' low cover: above a crouching body, below a standing eye."""

FULL_WALL_HEIGHT_M: Final = 4.0
"""Height of the built-in maps' full walls: above any eye, even at the top of a jump."""

STANCE_STANDING: Final = 0
STANCE_CROUCHING: Final = 1
