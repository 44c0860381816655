"""What a bot brain sees each client tick (Perception) and what it answers (Intent).

Sans-IO: the client library builds a :class:`Perception` from the latest snapshots and its own
prediction every client tick, calls ``Brain.think`` and turns the :class:`Intent` into an input
command and shots. A brain therefore knows only what a real client could show its player.

Units: meters, m/s, seconds, degrees. Angles follow ``world.state``: yaw 0 = +x, counter-clockwise,
pitch positive up. Positions are feet positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

Vec3 = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class SeenEntity:
    """One other player from the latest snapshots, interpolated at the client's view time.

    Attributes:
        slot: the player's slot. pos: feet position (m). vel: velocity (m/s).
        yaw_deg, pitch_deg: the player's view angles (deg). crouching: stance.
        alive: alive in the snapshot. weapon: held weapon id. health: hit points shown.
        rendered: False for a bait entity the game never draws: a human never reacts to it.
        firing: the snapshot shows this player fired recently (muzzle flash / sound); lets a
            human notice someone outside the field of view. Defaults to False when the client
            library does not know.
        team: team id, or None in free-for-all (every other player is an enemy).
    """

    slot: int
    pos: Vec3
    vel: Vec3
    yaw_deg: float
    pitch_deg: float
    crouching: bool
    alive: bool
    weapon: int
    health: int
    rendered: bool
    firing: bool = False
    team: int | None = None


@dataclass(frozen=True, slots=True)
class Perception:
    """Everything a brain knows at one client tick.

    Attributes:
        now_s: client clock (s). view_time_s: server time being rendered (s). tick: client tick.
        slot: own slot. pos (m), vel (m/s): own predicted state. yaw_deg, pitch_deg: own view
            angles as last applied (deg). crouching, on_ground: own stance and contact.
        alive: own life state. health: hit points. weapon: held weapon id. ammo: rounds in the
            magazine. reserve: spare rounds. reloading: a reload is running.
        punch_pitch_deg, punch_yaw_deg: the recoil kick the client simulates for its own weapon
            (deg, pitch up, yaw to the right; a shot flies along view + punch).
        entities: the other players in the snapshots (including ones not rendered).
        team: own team id, or None in free-for-all.
        weapons_owned: weapon ids the player carries (empty: unknown, never switch).
    """

    now_s: float
    view_time_s: float
    tick: int
    slot: int
    pos: Vec3
    vel: Vec3
    yaw_deg: float
    pitch_deg: float
    crouching: bool
    on_ground: bool
    alive: bool
    health: float
    weapon: int
    ammo: int
    reserve: int
    reloading: bool
    punch_pitch_deg: float
    punch_yaw_deg: float
    entities: tuple[SeenEntity, ...]
    team: int | None = None
    weapons_owned: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Intent:
    """A brain's answer for one client tick.

    Attributes:
        forward, side: movement wish in [-1, 1], forward along the yaw and to the right of it
            (``physics.movement`` convention).
        yaw_deg, pitch_deg: view angles to send (deg). yaw in [-180, 180), pitch in [-89, 89].
        buttons: ``physics.buttons.Buttons`` bitmask. FIRE means "fire one shot in this command":
            a brain spaces FIRE commands by at least the held weapon's ``fire_interval_s`` on its
            own clock, so the client library may turn every FIRE into a shot.
        weapon_switch: weapon id to switch to, 0 for none.
        aim_target: slot the brain means to shoot or is aiming at (ground truth for logs), or None.
    """

    forward: float = 0.0
    side: float = 0.0
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0
    buttons: int = 0
    weapon_switch: int = 0
    aim_target: int | None = None


class Brain(Protocol):
    """Anything that turns a Perception into an Intent (honest brains, cheat profiles)."""

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        """One client tick of decisions; all randomness comes from ``rng``."""
        ...
