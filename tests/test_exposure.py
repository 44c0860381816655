"""Which of a victim's bones the shooter could see (lagcomp.exposure) and the server recording it."""

from __future__ import annotations

import numpy as np
import pytest

from lagcomp.exposure import EXPOSURE_BONES, bone_centres, exposure_masks
from world.constants import LOW_COVER_HEIGHT_M, STANCE_CROUCHING, STANCE_STANDING, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import Bone
from world.mapfile import GameMap, Spawn, Wall

HEAD, UPPER, LOWER = (1 << int(b) for b in (Bone.HEAD, Bone.UPPER_TORSO, Bone.LOWER_TORSO))


@pytest.fixture(scope="module")
def cover() -> MapGeometry:
    """A 40 x 40 m field with one low wall (1.2 m) across x = 20..20.4 and a full wall further south."""
    gm = GameMap(
        name="cover", bounds=(0.0, 0.0, 40.0, 40.0),
        walls=(Wall("low", ((20.0, 15.0), (20.4, 15.0), (20.4, 25.0), (20.0, 25.0)), LOW_COVER_HEIGHT_M),
               Wall("full", ((20.0, 2.0), (20.4, 2.0), (20.4, 8.0), (20.0, 8.0)), 4.0)),
        spawns=(Spawn("a", 5.0, 30.0, 0.0),),
    )
    return MapGeometry(gm)


def test_bone_centres_are_the_capsule_midpoints_turned_with_the_body() -> None:
    feet = np.array([[10.0, 5.0, 0.0], [10.0, 5.0, 0.0]])
    c = bone_centres(feet, np.array([0.0, 90.0]), np.array([STANCE_CROUCHING, STANCE_CROUCHING]))
    # Crouched head capsule: (0.10, 0, 1.02)-(0.10, 0, 1.04) -> 0.10 m forward, 1.03 m up.
    assert c[0, 0] == pytest.approx([10.10, 5.0, 1.03])
    assert c[1, 0] == pytest.approx([10.0, 5.10, 1.03])  # facing +y, forward is +y
    standing = bone_centres(feet[:1], np.array([0.0]), np.array([STANCE_STANDING]))
    assert [b.name for b in EXPOSURE_BONES] == ["HEAD", "UPPER_TORSO", "LOWER_TORSO"]
    assert standing[0, :, 2] == pytest.approx([1.685, 1.26, 1.03])


def test_low_cover_hides_the_lower_torso_of_a_standing_target_and_all_of_a_crouching_one(cover: MapGeometry) -> None:
    eye = np.array([[10.0, 20.0, STANDING_EYE_M]] * 4)
    feet = np.array([[21.0, 20.0, 0.0], [21.0, 20.0, 0.0], [30.0, 30.0, 0.0], [21.0, 5.0, 0.0]])
    stance = np.array([STANCE_STANDING, STANCE_CROUCHING, STANCE_STANDING, STANCE_STANDING])
    eye[3] = (10.0, 5.0, STANDING_EYE_M)
    masks = exposure_masks(eye, feet, np.full(4, 180.0), stance, cover.los_clear)
    assert masks[0] == HEAD | UPPER  # behind the low wall, standing: lower torso hidden
    assert masks[1] == 0  # crouched behind it: nothing shows
    assert masks[2] == HEAD | UPPER | LOWER  # in the open
    assert masks[3] == 0  # behind the full wall
    assert exposure_masks(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=int), cover.los_clear) == []


def test_the_server_records_what_a_hit_victim_showed() -> None:
    from tests.test_server_core import _armed_duel, run_ticks
    from server import protocol as proto
    from world.weapons import WeaponId

    core, log, a, b = _armed_duel()
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=0.0, pitch_deg=-1.5, view_time_s=0.0)

    def script(c, now):  # type: ignore[no-untyped-def]
        if c is b:
            core.world.health[b.slot] = 100.0
            return c.command(now, yaw=180.0)
        aim = 0.0 if core.tick % 80 == 20 else 60.0 if core.tick % 80 == 60 else None
        if aim is None:
            return c.command(now, yaw=0.0, pitch=-1.5)
        return c.command(now, yaw=aim, pitch=-1.5, buttons=1, shots=(shot._replace(yaw_deg=aim, view_time_s=now - 0.1),))

    run_ticks(core, [a, b], 320, script)
    mine = [s for s in log.shots if s.shooter == a.slot]
    hits = [s for s in mine if s.victim is not None]
    misses = [s for s in mine if s.victim is None]
    assert hits and misses
    assert {s.exposed for s in hits} == {HEAD | UPPER | LOWER}  # an open duel: everything shows
    assert {s.exposed for s in misses} == {None}
