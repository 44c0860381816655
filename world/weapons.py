"""The weapon table: timings, damage, range, spread, recoil and movement speed.

Units: seconds, meters, degrees, hit points. Movement speeds are Counter-Strike 2's weapon speeds
converted from Source units (1 u = 0.0254 m). Maximum ranges follow BustAim's table of "normal"
ranges (its out-of-range check adds 10 on top). Crouch-cancel ("C-bug") timings are chosen so that a
perfectly timed, scripted cancel beats the Nex-AC auto-C thresholds (REFERENCES section 2) while a
human doing it by hand stays above them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from world.hitbox import BONE_GROUP, Bone

SOURCE_UNIT_M = 0.0254


class WeaponId(IntEnum):
    """Weapon ids as they travel on the wire and in recordings."""

    PISTOL = 1
    RIFLE = 2
    SMG = 3
    SHOTGUN = 4
    SNIPER = 5
    ASSAULT_RIFLE = 6
    MINIGUN = 7


@dataclass(frozen=True, slots=True)
class WeaponSpec:
    """One weapon's mechanics.

    Attributes:
        id, name: identity.
        fire_interval_s: shortest time between two shots when the crouch-cancel exploit is not used.
        automatic: holding fire keeps shooting.
        magazine: rounds per magazine; reserve: spare rounds at spawn.
        reload_s: reload duration.
        damage: hit points per bullet (per pellet) at 0 m on the chest.
        group_multiplier: damage factor per BodyGroup (head, neck, chest, stomach, arms, legs).
        range_modifier_per_10m: damage factor per 10 m of distance (falloff).
        max_range_m: a bullet travels this far and no farther.
        spread_deg: radius of the random cone when standing still.
        moving_spread_deg: extra cone radius at full weapon speed (scales with horizontal speed).
        airborne_spread_deg: extra cone radius while not on the ground.
        crouch_spread_factor: cone multiplier when crouching.
        pellets: rays per shot (shotgun > 1); pellet_spread_deg: radius of the pellet pattern.
        recoil_pattern: per consecutive shot (pitch up, yaw right) view kick in degrees; the last
            entry repeats. Empty means the weapon has no recoil.
        recoil_recovery_deg_s: how fast the accumulated kick returns to zero.
        move_speed_m_s: top ground speed while holding it.
        cbug: crouching within ``cbug_window_s`` after a shot cancels the post-shot recovery;
            the next shot is then allowed after ``cbug_interval_s`` instead of ``fire_interval_s``.
    """

    id: WeaponId
    name: str
    fire_interval_s: float
    automatic: bool
    magazine: int
    reserve: int
    reload_s: float
    damage: float
    group_multiplier: tuple[float, float, float, float, float, float]
    range_modifier_per_10m: float
    max_range_m: float
    spread_deg: float
    moving_spread_deg: float
    airborne_spread_deg: float
    crouch_spread_factor: float
    move_speed_m_s: float
    recoil_pattern: tuple[tuple[float, float], ...] = ()
    recoil_recovery_deg_s: float = 10.0
    pellets: int = 1
    pellet_spread_deg: float = 0.0
    cbug: bool = False
    cbug_window_s: float = 0.0
    cbug_interval_s: float = 0.0
    _group_mult: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cbug and not 0.0 < self.cbug_interval_s < self.fire_interval_s:
            raise ValueError(f"{self.name}: cbug_interval_s must be in (0, fire_interval_s)")
        object.__setattr__(self, "_group_mult", np.array(self.group_multiplier, dtype=np.float64))

    @property
    def has_recoil(self) -> bool:
        """True when firing kicks the view (IW4MAdmin's recoil check skips weapons without)."""
        return any(p != 0.0 or y != 0.0 for p, y in self.recoil_pattern)

    def damage_at(self, bone: np.ndarray, distance_m: np.ndarray) -> np.ndarray:
        """Damage (hit points) of hits on ``bone`` ids at ``distance_m`` meters (arrays broadcast)."""
        groups = BONE_GROUP_OF_ID[np.asarray(bone, dtype=np.intp)]
        mult = np.where(groups >= 0, self._group_mult[np.clip(groups, 0, None)], 0.0)
        return self.damage * mult * self.range_modifier_per_10m ** (np.asarray(distance_m) / 10.0)

    def recoil_kick(self, shot_index: int) -> tuple[float, float]:
        """View kick (pitch, yaw) in degrees of the ``shot_index``-th consecutive shot (0-based)."""
        if not self.recoil_pattern:
            return (0.0, 0.0)
        return self.recoil_pattern[min(shot_index, len(self.recoil_pattern) - 1)]


BONE_GROUP_OF_ID = np.full(max(int(b) for b in Bone) + 1, -1, dtype=np.intp)
for _bone, _group in BONE_GROUP.items():
    BONE_GROUP_OF_ID[int(_bone)] = int(_group)

_STANDARD_MULT = (4.0, 1.5, 1.0, 1.25, 1.0, 0.75)


def _climb(n: int, first: float, growth: float, cap: float, sway: float) -> tuple[tuple[float, float], ...]:
    """A deterministic spray pattern: pitch kick grows to a cap while yaw sways left and right."""
    out = []
    for i in range(n):
        pitch = min(cap, first + growth * i)
        yaw = sway * np.sin(i * 0.7) * min(1.0, i / 6.0)
        out.append((round(pitch, 3), round(float(yaw), 3)))
    return tuple(out)


WEAPONS: dict[WeaponId, WeaponSpec] = {
    WeaponId.PISTOL: WeaponSpec(
        id=WeaponId.PISTOL, name="pistol", fire_interval_s=0.60, automatic=False, magazine=7, reserve=35,
        reload_s=2.2, damage=45.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.90,
        max_range_m=35.0, spread_deg=0.4, moving_spread_deg=2.0, airborne_spread_deg=6.0,
        crouch_spread_factor=0.7, move_speed_m_s=230 * SOURCE_UNIT_M,
        recoil_pattern=((2.0, 0.2),), recoil_recovery_deg_s=8.0,
        cbug=True, cbug_window_s=0.25, cbug_interval_s=0.20,
    ),
    WeaponId.RIFLE: WeaponSpec(
        id=WeaponId.RIFLE, name="rifle", fire_interval_s=0.80, automatic=False, magazine=10, reserve=40,
        reload_s=2.5, damage=48.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.98,
        max_range_m=100.0, spread_deg=0.15, moving_spread_deg=3.5, airborne_spread_deg=8.0,
        crouch_spread_factor=0.7, move_speed_m_s=215 * SOURCE_UNIT_M,
        recoil_pattern=((2.5, 0.3),), recoil_recovery_deg_s=8.0,
        cbug=True, cbug_window_s=0.25, cbug_interval_s=0.30,
    ),
    WeaponId.SMG: WeaponSpec(
        id=WeaponId.SMG, name="smg", fire_interval_s=0.075, automatic=True, magazine=30, reserve=120,
        reload_s=2.1, damage=26.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.85,
        max_range_m=35.0, spread_deg=0.9, moving_spread_deg=1.5, airborne_spread_deg=5.0,
        crouch_spread_factor=0.8, move_speed_m_s=240 * SOURCE_UNIT_M,
        recoil_pattern=_climb(30, 0.35, 0.05, 0.7, 0.5), recoil_recovery_deg_s=12.0,
    ),
    WeaponId.SHOTGUN: WeaponSpec(
        id=WeaponId.SHOTGUN, name="shotgun", fire_interval_s=1.00, automatic=False, magazine=6, reserve=30,
        reload_s=3.0, damage=20.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.70,
        max_range_m=40.0, spread_deg=0.6, moving_spread_deg=1.0, airborne_spread_deg=4.0,
        crouch_spread_factor=0.9, move_speed_m_s=220 * SOURCE_UNIT_M,
        recoil_pattern=((4.0, 0.5),), recoil_recovery_deg_s=10.0,
        pellets=8, pellet_spread_deg=3.5,
        cbug=True, cbug_window_s=0.30, cbug_interval_s=0.40,
    ),
    WeaponId.SNIPER: WeaponSpec(
        id=WeaponId.SNIPER, name="sniper", fire_interval_s=1.25, automatic=False, magazine=5, reserve=25,
        reload_s=3.0, damage=115.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.99,
        max_range_m=300.0, spread_deg=0.05, moving_spread_deg=8.0, airborne_spread_deg=12.0,
        crouch_spread_factor=0.5, move_speed_m_s=200 * SOURCE_UNIT_M,
        recoil_pattern=((4.5, 0.4),), recoil_recovery_deg_s=6.0,
        cbug=True, cbug_window_s=0.25, cbug_interval_s=0.32,
    ),
    WeaponId.ASSAULT_RIFLE: WeaponSpec(
        id=WeaponId.ASSAULT_RIFLE, name="assault_rifle", fire_interval_s=0.10, automatic=True, magazine=30,
        reserve=90, reload_s=2.5, damage=36.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.96,
        max_range_m=100.0, spread_deg=0.5, moving_spread_deg=3.0, airborne_spread_deg=7.0,
        crouch_spread_factor=0.7, move_speed_m_s=215 * SOURCE_UNIT_M,
        recoil_pattern=_climb(30, 0.6, 0.12, 1.4, 0.8), recoil_recovery_deg_s=10.0,
    ),
    WeaponId.MINIGUN: WeaponSpec(
        id=WeaponId.MINIGUN, name="minigun", fire_interval_s=0.05, automatic=True, magazine=100, reserve=200,
        reload_s=5.0, damage=30.0, group_multiplier=_STANDARD_MULT, range_modifier_per_10m=0.95,
        max_range_m=75.0, spread_deg=1.5, moving_spread_deg=2.0, airborne_spread_deg=5.0,
        crouch_spread_factor=1.0, move_speed_m_s=150 * SOURCE_UNIT_M,
        recoil_pattern=((0.15, 0.1),), recoil_recovery_deg_s=20.0,
    ),
}

WEAPON_BY_NAME: dict[str, WeaponSpec] = {w.name: w for w in WEAPONS.values()}


def weapon(weapon_id: int) -> WeaponSpec:
    """The spec of ``weapon_id``; raises KeyError naming the id when unknown."""
    try:
        return WEAPONS[WeaponId(weapon_id)]
    except ValueError:
        raise KeyError(f"unknown weapon id {weapon_id!r}") from None
