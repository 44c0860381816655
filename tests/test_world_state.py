"""World state: guarded writes, generation counter, view vectors; hitboxes; weapon table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from world.constants import CROUCHING_HEIGHT_M, LOW_COVER_HEIGHT_M, STANCE_CROUCHING, STANCE_STANDING
from world.hitbox import (
    BONE_IDS,
    BOUND_ZMAX,
    Bone,
    ray_bound,
    ray_capsule,
    world_capsules,
)
from world.state import StateError, WorldLimits, WorldState, angles_of, view_direction, wrap_deg
from world.weapons import WEAPONS, WeaponId, weapon


def _state() -> WorldState:
    s = WorldState(WorldLimits(max_players=128))
    s.activate(0, weapon=1, ammo=7, reserve=35)
    return s


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_positions_and_angles_never_enter_state(bad: float) -> None:
    s = _state()
    s.spawn(0, (1.0, 2.0, 0.0), 0.0)
    before = s.pos[0].copy()
    with pytest.raises(StateError):
        s.teleport(0, (bad, 0.0, 0.0))
    with pytest.raises(StateError):
        s.set_view(0, bad, 0.0)
    with pytest.raises(StateError):
        s.set_view(0, 0.0, bad)
    assert np.array_equal(s.pos[0], before)
    assert np.all(np.isfinite(s.yaw)) and np.all(np.isfinite(s.pitch))


def test_out_of_range_values_are_refused() -> None:
    s = _state()
    with pytest.raises(StateError):
        s.teleport(0, (1e9, 0.0, 0.0))
    with pytest.raises(StateError):
        s.set_view(0, 0.0, 90.5)
    with pytest.raises(StateError):
        s.set_stance(0, 7)
    with pytest.raises(StateError):
        s.teleport(128, (0.0, 0.0, 0.0))
    with pytest.raises(StateError):
        s.spawn(5, (0.0, 0.0, 0.0), 0.0)  # slot 5 was never activated


def test_generation_changes_on_teleport_respawn_and_slot_reuse_but_not_on_death() -> None:
    s = _state()
    g0 = int(s.generation[0])
    s.spawn(0, (0.0, 0.0, 0.0), 0.0)
    g1 = int(s.generation[0])
    assert g1 != g0
    s.teleport(0, (5.0, 0.0, 0.0))
    g2 = int(s.generation[0])
    assert g2 != g1
    s.kill(0)
    assert int(s.generation[0]) == g2 and not s.alive[0]
    s.deactivate(0)
    s.activate(0, weapon=2, ammo=10, reserve=40)
    assert int(s.generation[0]) != g2


def test_capacity_and_free_slot() -> None:
    s = WorldState(WorldLimits(max_players=3))
    for i in range(3):
        slot = s.free_slot()
        assert slot == i
        s.activate(slot, 1, 7, 35)
    assert s.free_slot() is None
    assert WorldState().capacity >= 128


@given(st.floats(-720, 720), st.floats(-89, 89))
def test_view_direction_is_unit_and_inverts(yaw: float, pitch: float) -> None:
    d = view_direction(np.array([yaw]), np.array([pitch]))[0]
    assert abs(np.linalg.norm(d) - 1.0) < 1e-12
    y2, p2 = angles_of(d)
    assert abs(p2 - pitch) < 1e-9
    if abs(pitch) < 89:
        assert abs(wrap_deg(float(y2) - yaw)) < 1e-7


def test_wrap_deg_range() -> None:
    assert wrap_deg(180.0) == -180.0
    assert wrap_deg(-190.0) == 170.0
    assert np.allclose(wrap_deg(np.array([359.0, -1.0, 720.0])), [-1.0, -1.0, 0.0])


def _first_bone(origin: np.ndarray, direction: np.ndarray, stance: int, yaw: float = 0.0) -> tuple[int, float]:
    a, b, r = world_capsules(np.zeros((1, 3)), np.array([yaw]), np.array([stance]))
    t = ray_capsule(origin[None, None, :], direction[None, None, :], a, b, r)[0]
    i = int(np.argmin(t))
    return (int(BONE_IDS[i]), float(t[i])) if np.isfinite(t[i]) else (0, math.inf)


def test_rays_at_body_parts_resolve_to_their_bones() -> None:
    east = np.array([1.0, 0.0, 0.0])
    west = np.array([-1.0, 0.0, 0.0])
    # The target faces +x; we shoot at it from +x looking west (a frontal shot).
    assert _first_bone(np.array([10.0, 0.0, 1.685]), west, STANCE_STANDING)[0] == Bone.HEAD
    assert _first_bone(np.array([10.0, 0.0, 1.03]), west, STANCE_CROUCHING)[0] == Bone.HEAD
    # From behind, the arms held in front do not shield the chest.
    assert _first_bone(np.array([-10.0, 0.0, 1.26]), east, STANCE_STANDING)[0] == Bone.UPPER_TORSO
    assert _first_bone(np.array([-10.0, 0.0, 1.02]), east, STANCE_STANDING)[0] == Bone.LOWER_TORSO
    assert _first_bone(np.array([-10.0, -0.11, 0.3]), east, STANCE_STANDING)[0] == Bone.LOWER_RIGHT_LEG
    assert _first_bone(np.array([-10.0, 0.11, 0.3]), east, STANCE_STANDING)[0] == Bone.LOWER_LEFT_LEG
    # A ray passing above the head misses everything.
    assert _first_bone(np.array([10.0, 0.0, 1.95]), west, STANCE_STANDING)[0] == 0


def test_hitboxes_rotate_with_yaw() -> None:
    # Facing +y, the player's left side is -x: a ray along -y at x = -0.21 m meets the upper left
    # arm, while the same ray misses an unrotated player entirely.
    origin = np.array([-0.21, 10.0, 1.35])
    south = np.array([0.0, -1.0, 0.0])
    assert _first_bone(origin, south, STANCE_STANDING, yaw=90.0)[0] == Bone.UPPER_LEFT_ARM
    assert _first_bone(origin, south, STANCE_STANDING, yaw=0.0)[0] == 0
    # The hands are held forward: facing +y they are the first thing a ray from the front meets.
    assert _first_bone(np.array([0.0, 10.0, 1.33]), south, STANCE_STANDING, yaw=90.0)[0] == Bone.LEFT_HAND


def test_crouched_body_is_below_low_cover() -> None:
    a, b, r = world_capsules(np.zeros((1, 3)), np.zeros(1), np.array([STANCE_CROUCHING]))
    top = float(np.max(np.maximum(a[..., 2], b[..., 2]) + r))
    assert top <= CROUCHING_HEIGHT_M < LOW_COVER_HEIGHT_M
    assert BOUND_ZMAX[STANCE_CROUCHING] <= CROUCHING_HEIGHT_M


@given(st.floats(-3, 3), st.floats(0.0, 2.0), st.floats(-180, 180), st.sampled_from([0, 1]))
def test_broad_phase_never_misses_a_bone_hit(offset: float, z: float, yaw: float, stance: int) -> None:
    origin = np.array([-20.0, offset * 0.2, z])
    direction = np.array([1.0, 0.0, 0.0])
    a, b, r = world_capsules(np.zeros((1, 3)), np.array([yaw]), np.array([stance]))
    t_bones = ray_capsule(origin[None, None, :], direction[None, None, :], a, b, r)
    t_bound = ray_bound(origin, direction, np.zeros(3), np.array(stance))
    if np.isfinite(t_bones).any():
        assert t_bound <= t_bones.min() + 1e-9


def test_weapon_table() -> None:
    assert {w.name for w in WEAPONS.values()} >= {"pistol", "rifle", "smg", "shotgun", "sniper"}
    for wid in (WeaponId.PISTOL, WeaponId.RIFLE, WeaponId.SHOTGUN, WeaponId.SNIPER):
        spec = weapon(wid)
        assert spec.cbug and spec.cbug_interval_s < spec.fire_interval_s
    assert weapon(WeaponId.SHOTGUN).pellets > 1
    assert not weapon(WeaponId.SMG).cbug
    pistol = weapon(WeaponId.PISTOL)
    head, chest, leg = pistol.damage_at(np.array([2, 4, 15]), np.zeros(3))
    assert head == 4 * chest and leg < chest
    assert pistol.damage_at(np.array([4]), np.array([20.0]))[0] < chest
    assert pistol.damage_at(np.array([0]), np.array([0.0]))[0] == 0.0
    with pytest.raises(KeyError):
        weapon(99)
