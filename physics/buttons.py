"""Input buttons of a player command (bitmask on the wire).

Defined in physics because movement and weapon mechanics read them, and physics may not import
anticheat; ``anticheat.events`` re-exports this class for the detectors.
"""

from __future__ import annotations

from enum import IntFlag


class Buttons(IntFlag):
    """Input buttons of a command (bitmask on the wire)."""

    NONE = 0
    FIRE = 1
    JUMP = 2
    CROUCH = 4
    WALK = 8
    RELOAD = 16
    SPRINT = 32
    LEAN_LEFT = 64
    LEAN_RIGHT = 128


ALL_BUTTONS: int = int(
    Buttons.FIRE
    | Buttons.JUMP
    | Buttons.CROUCH
    | Buttons.WALK
    | Buttons.RELOAD
    | Buttons.SPRINT
    | Buttons.LEAN_LEFT
    | Buttons.LEAN_RIGHT
)
"""Every defined bit; a command with any other bit set is malformed."""
