"""Authoritative per-player world state as numpy structure-of-arrays.

Every array has the player slot as its first axis, so per-tick work over players is vector work.
Writes that come from outside the simulation go through the guarded setters, which refuse
non-finite or out-of-range values: NaN and inf never enter world state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from world.constants import STANCE_CROUCHING, STANCE_STANDING

MAX_HEALTH = 100.0
"""Health of a freshly spawned player (hit points)."""

PITCH_LIMIT_DEG = 89.0
"""View pitch is clamped to [-89, 89] degrees (positive looks up), as in Source."""


class StateError(ValueError):
    """A value was refused at the world-state border (non-finite, out of range, unknown slot)."""


@dataclass(frozen=True, slots=True)
class WorldLimits:
    """Sizes and ranges of the world state.

    Attributes:
        max_players: number of player slots (at least 128 supported; arrays are preallocated).
        coord_limit_m: absolute limit on any position coordinate (m); guards against absurd input.
        speed_limit_m_s: absolute limit on any velocity component (m/s).
    """

    max_players: int = 128
    coord_limit_m: float = 10_000.0
    speed_limit_m_s: float = 100.0


class WorldState:
    """Per-player state arrays (structure of arrays), indexed by player slot.

    Arrays (units):
        pos (N,3) float64 m, feet position; vel (N,3) float64 m/s;
        yaw (N,) float64 deg in [-180, 180), 0 = +x, counter-clockwise;
        pitch (N,) float64 deg in [-89, 89], positive up;
        stance (N,) int8 (0 standing, 1 crouching); on_ground (N,) bool;
        alive (N,) bool; active (N,) bool (slot in use); health (N,) float32 hit points;
        weapon (N,) int8 weapon id; ammo (N,) int16 rounds in the magazine; reserve (N,) int16;
        generation (N,) uint32, changed on every teleport, respawn or slot reuse, so that lag
        compensation never interpolates across a discontinuity.
    """

    def __init__(self, limits: WorldLimits | None = None) -> None:
        self.limits = limits or WorldLimits()
        n = self.limits.max_players
        if n < 1:
            raise StateError("max_players must be at least 1")
        self.pos = np.zeros((n, 3), dtype=np.float64)
        self.vel = np.zeros((n, 3), dtype=np.float64)
        self.yaw = np.zeros(n, dtype=np.float64)
        self.pitch = np.zeros(n, dtype=np.float64)
        self.stance = np.zeros(n, dtype=np.int8)
        self.on_ground = np.ones(n, dtype=bool)
        self.alive = np.zeros(n, dtype=bool)
        self.active = np.zeros(n, dtype=bool)
        self.health = np.zeros(n, dtype=np.float32)
        self.weapon = np.zeros(n, dtype=np.int8)
        self.ammo = np.zeros(n, dtype=np.int16)
        self.reserve = np.zeros(n, dtype=np.int16)
        self.generation = np.zeros(n, dtype=np.uint32)

    @property
    def capacity(self) -> int:
        """Number of player slots."""
        return self.limits.max_players

    def _slot(self, slot: int) -> int:
        if not isinstance(slot, (int, np.integer)) or not 0 <= int(slot) < self.capacity:
            raise StateError(f"unknown player slot {slot!r} (capacity {self.capacity})")
        return int(slot)

    def check_position(self, pos: tuple[float, float, float] | np.ndarray) -> np.ndarray:
        """Return ``pos`` (m) as a float64 (3,) array, or raise StateError if non-finite or out of range."""
        arr = np.asarray(pos, dtype=np.float64)
        if arr.shape != (3,):
            raise StateError(f"position must have 3 components, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise StateError(f"position is not finite: {arr.tolist()}")
        if np.any(np.abs(arr) > self.limits.coord_limit_m):
            raise StateError(f"position out of range (|coord| > {self.limits.coord_limit_m} m): {arr.tolist()}")
        return arr

    def free_slot(self) -> int | None:
        """Lowest unused slot, or None when the world is full."""
        free = np.flatnonzero(~self.active)
        return int(free[0]) if free.size else None

    def activate(self, slot: int, weapon: int, ammo: int, reserve: int) -> None:
        """Take a slot for a new player: dead until spawned; the generation changes."""
        s = self._slot(slot)
        self.active[s] = True
        self.alive[s] = False
        self.health[s] = 0.0
        self.pos[s] = 0.0
        self.vel[s] = 0.0
        self.stance[s] = STANCE_STANDING
        self.weapon[s] = weapon
        self.ammo[s] = ammo
        self.reserve[s] = reserve
        self.generation[s] += 1

    def deactivate(self, slot: int) -> None:
        """Free a slot (player left)."""
        s = self._slot(slot)
        self.active[s] = False
        self.alive[s] = False
        self.generation[s] += 1

    def spawn(self, slot: int, pos: tuple[float, float, float], yaw_deg: float) -> None:
        """Place an active player alive at ``pos`` (m) facing ``yaw_deg``; bumps the generation."""
        s = self._slot(slot)
        if not self.active[s]:
            raise StateError(f"slot {s} is not active")
        self.teleport(s, pos)
        self.set_view(s, yaw_deg, 0.0)
        self.vel[s] = 0.0
        self.stance[s] = STANCE_STANDING
        self.on_ground[s] = True
        self.alive[s] = True
        self.health[s] = MAX_HEALTH

    def teleport(self, slot: int, pos: tuple[float, float, float] | np.ndarray) -> None:
        """Move a player discontinuously to ``pos`` (m); bumps the generation."""
        s = self._slot(slot)
        self.pos[s] = self.check_position(pos)
        self.generation[s] += 1

    def set_view(self, slot: int, yaw_deg: float, pitch_deg: float) -> None:
        """Set view angles (deg): yaw wrapped to [-180, 180), pitch must lie in [-89, 89]."""
        s = self._slot(slot)
        if not (math.isfinite(yaw_deg) and math.isfinite(pitch_deg)):
            raise StateError(f"view angles are not finite: yaw={yaw_deg} pitch={pitch_deg}")
        if abs(pitch_deg) > PITCH_LIMIT_DEG:
            raise StateError(f"pitch {pitch_deg} deg outside [-{PITCH_LIMIT_DEG}, {PITCH_LIMIT_DEG}]")
        self.yaw[s] = wrap_deg(yaw_deg)
        self.pitch[s] = pitch_deg

    def set_stance(self, slot: int, stance: int) -> None:
        """Set the stance (0 standing, 1 crouching)."""
        s = self._slot(slot)
        if stance not in (STANCE_STANDING, STANCE_CROUCHING):
            raise StateError(f"unknown stance {stance!r}")
        self.stance[s] = stance

    def kill(self, slot: int) -> None:
        """Mark a player dead (health 0). The generation is left alone: a death is not a jump."""
        s = self._slot(slot)
        self.alive[s] = False
        self.health[s] = 0.0
        self.vel[s] = 0.0

    def live_slots(self) -> np.ndarray:
        """Slots of active, alive players (int array)."""
        return np.flatnonzero(self.active & self.alive)


def wrap_deg(angle: float | np.ndarray) -> float | np.ndarray:
    """Wrap an angle (deg) to [-180, 180)."""
    return (angle + 180.0) % 360.0 - 180.0


def view_direction(yaw_deg: np.ndarray | float, pitch_deg: np.ndarray | float) -> np.ndarray:
    """Unit view vectors for yaw/pitch in degrees: (..., 3). Yaw 0 = +x, 90 = +y; pitch positive up."""
    yaw = np.radians(yaw_deg)
    pitch = np.radians(pitch_deg)
    cp = np.cos(pitch)
    return np.stack([cp * np.cos(yaw), cp * np.sin(yaw), np.sin(pitch)], axis=-1)


def angles_of(direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`view_direction`: (yaw_deg, pitch_deg) of (..., 3) vectors (need not be unit)."""
    d = np.asarray(direction, dtype=np.float64)
    yaw = np.degrees(np.arctan2(d[..., 1], d[..., 0]))
    pitch = np.degrees(np.arctan2(d[..., 2], np.hypot(d[..., 0], d[..., 1])))
    return yaw, pitch
