"""Movement evidence: what movement validation found wrong with a client's claims."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class MovementKind(str, Enum):
    """Kinds of movement evidence (REFERENCES sections 4 and 6)."""

    SPEED = "speed"
    """Claimed displacement faster than the movement model allows (beyond tolerance)."""
    TELEPORT = "teleport"
    """Claimed position jumped farther than any movement could (Nex-AC: >= 40 m)."""
    WALL_CLIP = "wall_clip"
    """Claimed path passes through a wall or ends inside one."""
    TIMER = "timer"
    """Commands arrive faster than real time: the command-time balance ran ahead of the server clock."""


@dataclass(frozen=True, slots=True)
class MovementEvidence:
    """One validation failure, with the measured values.

    Attributes:
        player: slot. tick: server tick. time_s: server time (s). kind: what was wrong.
        value: the measured quantity (speed kind: m/s; teleport: m; wall_clip: m of claimed path
            inside walls or distance from the authoritative position; timer: ms ahead of the clock).
        limit: the threshold it broke (same unit as value).
        claimed: claimed position (m) or None. authoritative: server position after correction (m).
        setback: True when the server corrected the client back to ``authoritative``.
    """

    player: int
    tick: int
    time_s: float
    kind: MovementKind
    value: float
    limit: float
    claimed: tuple[float, float, float] | None
    authoritative: tuple[float, float, float]
    setback: bool


class FireKind(str, Enum):
    """Why a shot command was refused by weapon mechanics."""

    TOO_SOON = "too_soon"
    """Fired before the weapon's interval allowed (with or without a crouch-cancel)."""
    EMPTY = "empty"
    """No rounds in the magazine."""
    RELOADING = "reloading"
    """Fired during a reload."""
    WRONG_WEAPON = "wrong_weapon"
    """The shot named a weapon the player is not holding."""
    DEAD = "dead"
    """A dead player fired."""
    SWITCHING = "switching"
    """Fired while the weapon was still being deployed after a switch."""


@dataclass(frozen=True, slots=True)
class FireEvidence:
    """A refused shot, with the measured interval.

    Attributes:
        player, tick, time_s (s), weapon (id the client named), kind.
        interval_s: time since the previous accepted shot (s), or inf if none.
        allowed_s: the shortest interval the weapon allowed at that moment (s): the crouch-cancel
            interval when a cancel was armed, the normal fire interval otherwise.
    """

    player: int
    tick: int
    time_s: float
    weapon: int
    kind: FireKind
    interval_s: float
    allowed_s: float
