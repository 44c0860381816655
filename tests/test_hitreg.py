"""Batched hit registration: walls, low cover, bones, nearest player, range, lag compensation,
baits, and agreement with the one-shot-at-a-time baseline."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.hitreg import build_scenario, build_shots
from lagcomp.config import HistoryConfig, HitregConfig
from lagcomp.history import HistoryError, TickHistory
from lagcomp.hitreg import (
    BaitTargets,
    HitBatch,
    ShotBatch,
    ShotError,
    hit_damage,
    register_shots,
    shots_from_state,
    to_shot_result,
    to_shot_results,
)
from lagcomp.naive import NaiveWalls, register_shots_naive
from lagcomp.shot import RewindDecision, ShotClaim
from world.constants import STANCE_CROUCHING
from world.geometry import MapGeometry
from world.hitbox import BONE_IDS, Bone, world_capsules
from world.mapfile import builtin_map, parse_map
from world.state import WorldLimits, WorldState
from world.weapons import WeaponId
from world.weapons import weapon as weapon_spec

DT = 1.0 / 64.0

# A lab map: a full wall across y = 42.5 and low cover across y = 57.5, both at x in [20, 21].
LAB = parse_map(
    {
        "format": "referee-map/1",
        "name": "lab",
        "bounds": [0, 0, 100, 100],
        "walls": [
            {"id": "full", "polygon": [[20, 40], [21, 40], [21, 45], [20, 45]], "height": 4.0},
            {"id": "low", "polygon": [[20, 55], [21, 55], [21, 60], [20, 60]], "height": 1.2},
        ],
        "spawns": [{"id": "s", "pos": [5, 5], "yaw": 0}],
    },
    source="lab",
)


@pytest.fixture(scope="module")
def lab() -> MapGeometry:
    return MapGeometry(LAB)


Player = tuple[tuple[float, float], float, int]  # (x, y), yaw, stance


def _world(players: list[Player], ticks: int = 2) -> tuple[WorldState, TickHistory, float]:
    """Static players recorded for ``ticks`` ticks; returns (state, history, now_s)."""
    state = WorldState(WorldLimits(max_players=max(len(players), 2)))
    for slot, ((x, y), yaw, stance) in enumerate(players):
        state.activate(slot, weapon=int(WeaponId.RIFLE), ammo=10, reserve=40)
        state.spawn(slot, (x, y, 0.0), yaw)
        state.set_stance(slot, stance)
    hist = TickHistory(HistoryConfig(), state.capacity)
    for k in range(ticks):
        hist.record(k, k * DT, state)
    return state, hist, (ticks - 1) * DT


def _bone_centre(state: WorldState, slot: int, bone: Bone) -> np.ndarray:
    a, b, _ = world_capsules(state.pos[[slot]], state.yaw[[slot]], state.stance[[slot]])
    col = list(BONE_IDS).index(int(bone))
    return (a[0, col] + b[0, col]) / 2.0


def _shoot(
    state: WorldState,
    hist: TickHistory,
    geom: MapGeometry,
    shooter: int,
    aim: np.ndarray,
    now: float,
    time_s: float | None = None,
    weapon: WeaponId = WeaponId.RIFLE,
    baits: BaitTargets | None = None,
) -> HitBatch:
    eye = state.pos[shooter].copy()
    eye[2] += 1.05 if state.stance[shooter] == STANCE_CROUCHING else 1.64
    batch = shots_from_state(state, np.array([shooter]), (aim - eye)[None, :], now if time_s is None else time_s, int(weapon))
    hits = register_shots(batch, hist, geom, now, baits=baits)
    naive = register_shots_naive(batch, hist, NaiveWalls(geom.game_map), now, baits=baits)
    _assert_same(hits, naive)
    return hits


def _assert_same(a: HitBatch, b: HitBatch) -> None:
    np.testing.assert_array_equal(a.victim, b.victim)
    np.testing.assert_array_equal(a.bone, b.bone)
    np.testing.assert_allclose(a.distance, b.distance, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.hit_point, b.hit_point, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(a.blocked_by_wall, b.blocked_by_wall)
    np.testing.assert_array_equal(a.occluded_victim, b.occluded_victim)
    np.testing.assert_array_equal(a.victim_generation, b.victim_generation)
    np.testing.assert_allclose(a.victim_pos, b.victim_pos, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.victim_speed, b.victim_speed, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(a.clamped, b.clamped)
    np.testing.assert_array_equal(a.bait_hit, b.bait_hit)
    np.testing.assert_array_equal(a.bait_index, b.bait_index)


# ------------------------------------------------------------------------------ walls and cover


def test_full_wall_blocks_a_standing_player(lab: MapGeometry) -> None:
    state, hist, now = _world([((10.0, 42.5), 0.0, 0), ((30.0, 42.5), 180.0, 0)])
    hits = _shoot(state, hist, lab, 0, _bone_centre(state, 1, Bone.HEAD), now)
    assert hits.victim[0] == -1 and hits.bone[0] == 0
    assert hits.blocked_by_wall[0] and hits.occluded_victim[0] == 1
    assert hits.hit_point[0, 0] == pytest.approx(20.0)
    assert hits.distance[0] == pytest.approx(np.linalg.norm(hits.hit_point[0] - (10.0, 42.5, 1.64)))
    assert np.isnan(hits.victim_pos[0]).all()


def test_low_cover_hides_a_crouching_player_but_not_a_standing_one(lab: MapGeometry) -> None:
    state, hist, now = _world([((10.0, 57.5), 0.0, 0), ((22.0, 57.5), 180.0, 0)])
    hits = _shoot(state, hist, lab, 0, _bone_centre(state, 1, Bone.HEAD), now)
    assert hits.victim[0] == 1 and hits.bone[0] == Bone.HEAD and not hits.blocked_by_wall[0]

    state, hist, now = _world([((10.0, 57.5), 0.0, 0), ((22.0, 57.5), 180.0, STANCE_CROUCHING)])
    for bone in (Bone.HEAD, Bone.UPPER_TORSO):
        hits = _shoot(state, hist, lab, 0, _bone_centre(state, 1, bone), now)
        assert hits.victim[0] == -1 and hits.blocked_by_wall[0] and hits.occluded_victim[0] == 1


def test_a_crouching_shooter_cannot_shoot_over_low_cover(lab: MapGeometry) -> None:
    for stance, expect_hit in ((0, True), (STANCE_CROUCHING, False)):
        state, hist, now = _world([((19.2, 57.5), 0.0, stance), ((31.0, 57.5), 180.0, 0)])
        hits = _shoot(state, hist, lab, 0, _bone_centre(state, 1, Bone.UPPER_TORSO), now)
        assert bool(hits.victim[0] == 1) is expect_hit
        assert bool(hits.blocked_by_wall[0]) is (not expect_hit)


# ------------------------------------------------------------------------------ bones and targets


@pytest.mark.parametrize(
    ("target_yaw", "bone"),
    [
        (180.0, Bone.HEAD),
        (0.0, Bone.HEAD),
        (0.0, Bone.UPPER_TORSO),  # from behind: the arms are in front of the chest
        (90.0, Bone.LOWER_TORSO),
        (0.0, Bone.LOWER_RIGHT_LEG),
        (180.0, Bone.LEFT_FOOT),
    ],
)
def test_ray_at_a_bone_centre_hits_that_bone(lab: MapGeometry, target_yaw: float, bone: Bone) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), target_yaw, 0)])
    hits = _shoot(state, hist, lab, 0, _bone_centre(state, 1, bone), now)
    assert hits.victim[0] == 1 and hits.bone[0] == bone


def test_the_nearest_player_on_the_line_wins(lab: MapGeometry) -> None:
    # The farther player has the lower slot, so this is decided by distance, not slot order.
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((85.0, 80.0), 180.0, 0), ((72.0, 80.0), 180.0, 0)])
    aim = _bone_centre(state, 1, Bone.UPPER_TORSO)
    aim[2] = 1.26
    hits = _shoot(state, hist, lab, 0, aim, now)
    assert hits.victim[0] == 2
    assert hits.distance[0] < 12.0


def test_max_range_is_respected(lab: MapGeometry) -> None:
    state, hist, now = _world([((10.0, 80.0), 0.0, 0), ((50.0, 80.0), 180.0, 0)])
    aim = _bone_centre(state, 1, Bone.HEAD)
    pistol = _shoot(state, hist, lab, 0, aim, now, weapon=WeaponId.PISTOL)  # 35 m range, target at 40 m
    assert pistol.victim[0] == -1 and not pistol.blocked_by_wall[0]
    assert pistol.distance[0] == pytest.approx(35.0)
    rifle = _shoot(state, hist, lab, 0, aim, now, weapon=WeaponId.RIFLE)
    assert rifle.victim[0] == 1


def test_never_the_shooter_nor_dead_or_inactive_players(lab: MapGeometry) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((70.0, 80.0), 180.0, 0), ((80.0, 80.0), 180.0, 0)])
    down = _shoot(state, hist, lab, 0, state.pos[0] + (0.05, 0.0, 0.3), now)  # at its own legs
    assert down.victim[0] == -1
    state.kill(1)
    state.deactivate(2)
    hist.record(99, now + DT, state)
    aim = _bone_centre(state, 1, Bone.HEAD)
    aim[0] = 80.0
    hits = _shoot(state, hist, lab, 0, aim, now + DT)
    assert hits.victim[0] == -1
    # At the earlier time both were alive: lag compensation still hits the nearer one.
    hits = _shoot(state, hist, lab, 0, aim, now + DT, time_s=now)
    assert hits.victim[0] == 1


def test_vertical_and_steep_rays(lab: MapGeometry) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), 180.0, 0), ((20.5, 50.0), 0.0, 0)])
    head = _bone_centre(state, 1, Bone.HEAD)
    origins = np.array([head + (0.0, 0.0, 3.0), head + (0.0, 0.0, 3.0), head - (0.0, 0.0, 0.5), (20.5, 42.5, 6.0)])
    dirs = np.array([(0.0, 0.0, -1.0), (0.0, 0.0, 1.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0)])
    batch = ShotBatch.build([0, 0, 0, 0], origins, dirs, now, 100.0)
    hits = register_shots(batch, hist, lab, now)
    _assert_same(hits, register_shots_naive(batch, hist, NaiveWalls(LAB), now))
    assert hits.victim[0] == 1 and hits.bone[0] == Bone.HEAD
    assert hits.distance[0] == pytest.approx(3.0 - 0.1 - 0.015, abs=1e-9)
    assert hits.victim[1] == -1  # straight up, nothing above
    # Starting inside the upper torso: that capsule does not count, the neck above it does.
    assert hits.victim[2] == 1 and hits.bone[2] == Bone.NECK
    assert hits.blocked_by_wall[3] and hits.distance[3] == pytest.approx(2.0)  # onto the 4 m wall's top


# ------------------------------------------------------------------------------ lag compensation


def test_a_moving_target_is_hit_where_it_was_not_where_it_is(lab: MapGeometry) -> None:
    state = WorldState(WorldLimits(max_players=2))
    for slot in range(2):
        state.activate(slot, weapon=int(WeaponId.RIFLE), ammo=10, reserve=40)
    state.spawn(0, (50.0, 80.0, 0.0), 0.0)
    state.spawn(1, (70.0, 70.0, 0.0), 180.0)
    hist = TickHistory(HistoryConfig(), 2)
    speed = 4.0
    for k in range(65):
        state.pos[1] = (70.0, 70.0 + speed * k * DT, 0.0)
        state.vel[1] = (0.0, speed, 0.0)
        hist.record(k, k * DT, state)
    now = 64 * DT
    then = now - 0.2 + 0.3 * DT  # between two ticks
    past = np.array([70.0, 70.0 + speed * then, 1.26])
    hits = _shoot(state, hist, lab, 0, past, now, time_s=then)
    assert hits.victim[0] == 1 and hits.bone[0] != Bone.NONE
    np.testing.assert_allclose(hits.victim_pos[0], [70.0, 70.0 + speed * then, 0.0], atol=1e-9)
    assert hits.victim_speed[0] == pytest.approx(speed)
    assert not hits.clamped[0]
    # The same ray judged against the current positions misses: the target has moved 0.8 m on.
    assert _shoot(state, hist, lab, 0, past, now, time_s=now).victim[0] == -1
    # ... and aiming at where it is now misses when rewound.
    now_pos = np.array([70.0, 70.0 + speed * now, 1.26])
    assert _shoot(state, hist, lab, 0, now_pos, now, time_s=then).victim[0] == -1
    # Older than the history: clamped to the oldest record and flagged.
    old = _shoot(state, hist, lab, 0, np.array([70.0, 70.0, 1.26]), now, time_s=-0.5)
    assert old.clamped[0] and old.victim[0] == 1


# ------------------------------------------------------------------------------ baits


def test_baits_are_reported_but_never_stop_a_ray(lab: MapGeometry) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), 180.0, 0)])
    head = _bone_centre(state, 1, Bone.HEAD)
    bait_above = BaitTargets.spheres(head + (0.0, 0.0, 0.5), 0.15)
    # Aimed at the bait: it is reported, nobody is hit.
    hits = _shoot(state, hist, lab, 0, head + (0.0, 0.0, 0.5), now, baits=bait_above)
    assert hits.bait_hit[0] and hits.bait_index[0] == 0 and hits.victim[0] == -1
    # A bait in front of the head does not protect it.
    bait_front = BaitTargets.spheres([head - (3.0, 0.0, 0.0), (0.0, 0.0, 50.0)], 0.2)
    hits = _shoot(state, hist, lab, 0, head, now, baits=bait_front)
    assert hits.victim[0] == 1 and hits.bone[0] == Bone.HEAD and hits.bait_hit[0] and hits.bait_index[0] == 0
    assert hits.distance[0] == pytest.approx(np.linalg.norm(head - state.pos[0] - (0, 0, 1.64)) - 0.1, abs=0.05)
    # Shown to another shooter only: invisible to this one.
    hidden = BaitTargets.spheres(head + (0.0, 0.0, 0.5), 0.15, shooter=1)
    assert not _shoot(state, hist, lab, 0, head + (0.0, 0.0, 0.5), now, baits=hidden).bait_hit[0]


def test_a_bait_behind_a_wall_is_not_hit(lab: MapGeometry) -> None:
    state, hist, now = _world([((10.0, 42.5), 0.0, 0), ((5.0, 90.0), 0.0, 0)])
    bait = BaitTargets.spheres([(30.0, 42.5, 1.7)], 0.2)
    hits = _shoot(state, hist, lab, 0, np.array([30.0, 42.5, 1.7]), now, baits=bait)
    assert not hits.bait_hit[0] and hits.bait_index[0] == -1 and hits.blocked_by_wall[0]


# ------------------------------------------------------------------------------ contract helpers


def test_shot_result_and_damage(lab: MapGeometry) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), 180.0, 0)])
    head = _bone_centre(state, 1, Bone.HEAD)
    eye = state.pos[0] + (0, 0, 1.64)
    dirs = np.stack([head - eye, (0.0, 1.0, 0.0)])
    batch = shots_from_state(state, np.array([0, 0]), dirs, now, int(WeaponId.RIFLE))
    np.testing.assert_allclose(batch.origin[0], eye)
    assert batch.max_range[0] == 100.0
    hits = register_shots(batch, hist, lab, now)
    dmg = hit_damage(batch, hits)
    assert dmg[0] == pytest.approx(48.0 * 4.0 * 0.98 ** (hits.distance[0] / 10.0)) and dmg[1] == 0.0
    claim = ShotClaim(shooter=0, weapon=int(WeaponId.RIFLE), yaw_deg=0.0, pitch_deg=0.0, claimed_victim=1)
    res = to_shot_result(batch, hits, 0, claim=claim, tick=7, time_s=now, decision=RewindDecision.CLAIMED,
                         damage=float(dmg[0]))
    assert res.victim == 1 and res.bone == Bone.HEAD and res.damage == dmg[0] and res.claim is claim
    assert res.victim_pos == (75.0, 80.0, 0.0) and res.rewind_decision is RewindDecision.CLAIMED
    miss = to_shot_result(batch, hits, 1, claim=claim, tick=7, time_s=now, decision=RewindDecision.ESTIMATE, damage=5.0)
    assert miss.victim is None and miss.victim_pos is None and miss.damage == 0.0 and miss.blocked_by_wall


def test_shot_batch_validation(lab: MapGeometry) -> None:
    ok = ShotBatch.build([0], [(1.0, 1.0, 1.0)], [(3.0, 4.0, 0.0)], 0.0, 10.0)
    np.testing.assert_allclose(ok.direction[0], [0.6, 0.8, 0.0])
    with pytest.raises(ShotError):
        ShotBatch.build([0], [(1.0, 1.0, 1.0)], [(0.0, 0.0, 0.0)], 0.0, 10.0)
    with pytest.raises(ShotError):
        ShotBatch.build([0], [(1.0, np.nan, 1.0)], [(1.0, 0.0, 0.0)], 0.0, 10.0)
    with pytest.raises(ShotError):
        ShotBatch.build([0], [(1.0, 1.0, 1.0)], [(1.0, 0.0, 0.0)], 0.0, 0.0)
    with pytest.raises(ShotError):
        ShotBatch.build([0, 1], [(1.0, 1.0, 1.0)], [(1.0, 0.0, 0.0)], 0.0, 10.0)
    with pytest.raises(ShotError):
        ShotBatch.build([-1], [(1.0, 1.0, 1.0)], [(1.0, 0.0, 0.0)], 0.0, 10.0)
    _, hist, now = _world([((60.0, 80.0), 0.0, 0)])
    empty = register_shots(ShotBatch.build([], [], [], 0.0, 1.0), hist, lab, now)
    assert len(empty) == 0


def test_shot_batch_checks_in_order_and_normalises_as_numpy() -> None:
    rng = np.random.default_rng(4)
    d = rng.normal(0.0, 1.0, (500, 3)) * 10.0 ** rng.uniform(-150, 150, (500, 1))
    batch = ShotBatch.build(np.zeros(500, dtype=np.intp), np.zeros((500, 3)), d, 0.0, 10.0)
    # Bit for bit numpy's norm and division (the rays' hit points, and so the replays, hang on them).
    assert np.array_equal(batch.direction, d / np.sqrt(np.sum(d * d, axis=1))[:, None])
    good = {"origin": [(1.0, 1.0, 1.0)] * 2, "direction": [(1.0, 0.0, 0.0)] * 2, "time_s": [0.0, 0.0],
            "max_range": [10.0, 10.0]}
    # Several faults at once: the first check in order names the reason.
    cases = [
        ({"origin": [(1.0, 1.0, 1.0), (np.inf, 0.0, 0.0)], "direction": [(np.nan, 0.0, 0.0)] * 2}, "origin"),
        ({"direction": [(1.0, 0.0, 0.0), (0.0, np.nan, 0.0)], "time_s": [np.inf, 0.0]}, "direction contains"),
        ({"time_s": [0.0, np.nan], "max_range": [np.inf, 1.0]}, "time_s"),
        ({"max_range": [1.0, np.nan], "direction": [(0.0, 0.0, 0.0)] * 2}, "max_range contains"),
        ({"max_range": [1.0, -1.0], "direction": [(0.0, 0.0, 0.0)] * 2}, "positive"),
        ({"direction": [(1.0, 0.0, 0.0), (0.0, 0.0, 0.0)]}, "zero length"),
    ]
    for change, reason in cases:
        args = {**good, **change}
        with pytest.raises(ShotError, match=reason):
            ShotBatch.build([0, 1], args["origin"], args["direction"], args["time_s"], args["max_range"])
    # A negative shooter is named before every other fault, shapes included.
    for change, _ in [*cases, ({"origin": [(1.0, 1.0, 1.0)] * 3}, "")]:
        args = {**good, **change}
        with pytest.raises(ShotError, match="shooter slots must be >= 0"):
            ShotBatch.build([0, -1], args["origin"], args["direction"], args["time_s"], args["max_range"])
    with pytest.raises(ShotError, match="do not match 2 shooters"):
        ShotBatch.build([0, 1], [(1.0, 1.0, 1.0)] * 3, good["direction"], 0.0, 10.0)


# ------------------------------------------------------------------------------ batched == naive


def test_batched_equals_naive_on_the_city_map(city_geometry: MapGeometry) -> None:
    sc = build_scenario("city", players=64, shots=2500, seed=11, geometry=city_geometry)
    hits = register_shots(sc.shots, sc.history, sc.geometry, sc.now_s)
    naive = register_shots_naive(sc.shots, sc.history, sc.walls, sc.now_s)
    _assert_same(hits, naive)
    # The scenario exercises every outcome.
    assert (hits.victim >= 0).sum() > 50
    assert hits.blocked_by_wall.sum() > 500 and (hits.occluded_victim >= 0).sum() > 20
    assert hits.clamped.sum() > 10 and (hits.bone == Bone.HEAD).sum() > 0
    # Block sizes change nothing but the speed.
    _assert_same(register_shots(sc.shots, sc.history, sc.geometry, sc.now_s, HitregConfig(7, 3)), hits)


@pytest.fixture(scope="module")
def corridors() -> tuple[MapGeometry, NaiveWalls]:
    geom = MapGeometry(builtin_map("corridors"))
    return geom, NaiveWalls(geom.game_map)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), players=st.integers(2, 20), noise=st.floats(0.0, 5.0))
def test_batched_equals_naive_on_random_worlds(
    corridors: tuple[MapGeometry, NaiveWalls], seed: int, players: int, noise: float
) -> None:
    geom, walls = corridors
    sc = build_scenario("corridors", players=players, shots=10, seed=seed, geometry=geom, walls=walls)
    batch = build_shots(sc.state, sc.history, sc.now_s, 150, seed=seed + 7, noise_deg=noise)
    baits = BaitTargets.spheres(sc.history.rewind(np.array([sc.now_s])).pos[0, : min(players, 4)] + (0, 0, 2.1), 0.2)
    hits = register_shots(batch, sc.history, sc.geometry, sc.now_s, baits=baits)
    _assert_same(hits, register_shots_naive(batch, sc.history, sc.walls, sc.now_s, baits=baits))
    hits2 = register_shots(replace(batch), sc.history, sc.geometry, sc.now_s)
    np.testing.assert_array_equal(hits2.victim, hits.victim)


# ------------------------------------------------------------------------------ the server's small batches


def _fields_equal(a: HitBatch, b: HitBatch) -> None:
    """Bit for bit (NaN where NaN), field by field."""
    for name in HitBatch.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name


def _rows(batch: ShotBatch, rows: list[int]) -> ShotBatch:
    return ShotBatch(**{name: getattr(batch, name)[rows] for name in ShotBatch.__dataclass_fields__})


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), players=st.integers(2, 12), rays=st.integers(1, 12), records=st.integers(1, 3))
def test_small_batches_agree_with_naive_and_with_themselves(
    corridors: tuple[MapGeometry, NaiveWalls], seed: int, players: int, rays: int, records: int
) -> None:
    """A tick's batch: a few rays (pellets of one shooter, repeated shooters, crosshair probes at the
    same and an earlier time), rewound anywhere from before the history (clamped) to after now,
    with per-shooter and shared baits, over a long or a one-record history. The batch agrees with
    the one-shot-at-a-time baseline, and every ray comes out bit for bit as it does alone and in
    a bigger batch (nothing carries from one ray to the next)."""
    geom, walls = corridors
    sc = build_scenario("corridors", players=players, shots=10, seed=seed, geometry=geom, walls=walls)
    rng = np.random.default_rng(seed)
    history = sc.history
    if records < 3:  # the first ticks of a match: one or two records
        history = TickHistory(HistoryConfig(), players)
        for k in range(records):
            history.record(k, sc.now_s - (records - 1 - k) * DT, sc.state)
    big = build_shots(sc.state, sc.history, sc.now_s, 4 * rays, seed=seed + 7, noise_deg=float(rng.uniform(0.0, 3.0)))
    pick = rng.choice(4 * rays, rays, replace=False).tolist()
    if rays > 2:
        pick[1] = pick[0]  # a probe: the same ray again
    small = _rows(big, pick)
    oldest = history.oldest_time_s
    times = small.time_s.copy()
    times[rng.random(rays) < 0.2] = oldest - 0.05  # older than the history: clamped
    times[rng.random(rays) < 0.1] = sc.now_s + 0.01  # a claim slightly ahead of now
    small = replace(small, time_s=times)
    live = sc.state.live_slots()
    centres = sc.state.pos[live[:3]] + (0.0, 0.0, 2.1)
    owners = np.array([int(small.shooter[0]), -1, int(live[-1])])[: len(centres)]
    baits = BaitTargets.spheres(centres, 0.3, owners)
    for b in (None, baits):
        hits = register_shots(small, history, geom, sc.now_s, baits=b)
        _assert_same(hits, register_shots_naive(small, history, walls, sc.now_s, baits=b))
        for i in range(rays):
            _fields_equal(register_shots(_rows(small, [i]), history, geom, sc.now_s, baits=b), _rows_of(hits, [i]))
        both = register_shots(_rows(small, list(range(rays)) * 2), history, geom, sc.now_s, baits=b)
        _fields_equal(_rows_of(both, list(range(rays))), hits)
        _fields_equal(_rows_of(both, list(range(rays, 2 * rays))), hits)


def _rows_of(hits: HitBatch, rows: list[int]) -> HitBatch:
    return HitBatch(**{name: getattr(hits, name)[rows] for name in HitBatch.__dataclass_fields__})


def test_an_empty_history_refuses_rays_but_not_an_empty_batch(lab: MapGeometry) -> None:
    hist = TickHistory(HistoryConfig(), 2)
    empty = ShotBatch.build(np.zeros(0, dtype=np.intp), np.zeros((0, 3)), np.zeros((0, 3)), 0.0, 1.0)
    assert len(register_shots(empty, hist, lab, 0.0)) == 0
    one = ShotBatch.build([0], [[1.0, 1.0, 1.0]], [[1.0, 0.0, 0.0]], 0.0, 10.0)
    with pytest.raises(HistoryError):
        register_shots(one, hist, lab, 0.0)
    _, hist, _ = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), 180.0, 0)])
    with pytest.raises(HistoryError):
        register_shots(one, hist, lab, float("nan"))


def test_shot_results_are_to_shot_result_row_by_row(lab: MapGeometry) -> None:
    state, hist, now = _world([((60.0, 80.0), 0.0, 0), ((75.0, 80.0), 180.0, 0), ((60.0, 90.0), 0.0, 1)])
    head = _bone_centre(state, 1, Bone.HEAD)
    eye = state.pos[0] + (0, 0, 1.64)
    dirs = np.stack([head - eye, (0.0, 1.0, 0.0), head - eye, (1.0, 0.0, -0.01)])
    batch = shots_from_state(state, np.array([0, 0, 0, 2]), dirs, now - np.array([0.0, 0.01, 5.0, 0.0]),
                             int(WeaponId.RIFLE), pellet=np.array([0, 1, 0, 0]))
    baits = BaitTargets.spheres([(75.0, 80.0, 2.0)], 0.3, 0)
    hits = register_shots(batch, hist, lab, now, baits=baits)
    claims = [ShotClaim(shooter=int(s), weapon=int(WeaponId.RIFLE), yaw_deg=1.0 * i, pitch_deg=0.0)
              for i, s in enumerate(batch.shooter[:3])]
    decisions = [RewindDecision.CLAIMED, RewindDecision.ESTIMATE, RewindDecision.MAX_UNLAG]
    damage = [12.5, 0.0, 3.0]
    contact = [True, None, False]
    claimed = [(1.0, 2.0, 3.0), None, None]
    got = to_shot_results(batch, hits, claims=claims, tick=9, time_s=now, decisions=decisions, damage=damage,
                          first_contact=contact, claimed_victim_pos=claimed)
    want = [to_shot_result(batch, hits, i, claim=claims[i], tick=9, time_s=now, decision=decisions[i], damage=damage[i],
                           first_contact=contact[i], claimed_victim_pos=claimed[i]) for i in range(3)]
    assert got == want
    assert [type(v) for v in (got[0].victim, got[0].bone, got[0].distance_m, got[0].origin[0])] == [int, int, float, float]


def _damage_reference(batch: ShotBatch, hits: HitBatch) -> np.ndarray:
    """hit_damage as it was written before its table: WeaponSpec.damage_at per weapon id."""
    dmg = np.zeros(len(batch))
    hit = hits.victim >= 0
    for wid in np.unique(batch.weapon[hit]):
        rows = hit & (batch.weapon == wid)
        dmg[rows] = weapon_spec(int(wid)).damage_at(hits.bone[rows], hits.distance[rows])
    return dmg


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 3),
            st.sampled_from([int(w) for w in WeaponId]),
            st.sampled_from([0, *BONE_IDS.tolist()]),
            st.floats(0.0, 150.0, allow_nan=False),
        ),
        max_size=12,
    )
)
def test_hit_damage_matches_damage_at_bit_for_bit(rows: list[tuple[int, int, int, float]]) -> None:
    s = len(rows)
    victim, weapon, bone, distance = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [], [])
    batch = ShotBatch.build(np.zeros(s, dtype=np.intp), np.zeros((s, 3)), np.tile([1.0, 0.0, 0.0], (s, 1)), 0.0, 200.0,
                            np.array(weapon, dtype=np.int16))
    hits = _hits(victim, bone, distance)
    got = hit_damage(batch, hits)
    assert got.dtype == np.float64 and got.shape == (s,)
    np.testing.assert_array_equal(got, _damage_reference(batch, hits))
    assert got.tobytes() == _damage_reference(batch, hits).tobytes()


def test_hit_damage_refuses_an_unknown_weapon_that_hit() -> None:
    batch = ShotBatch.build([0, 0], np.zeros((2, 3)), [(1.0, 0.0, 0.0)] * 2, 0.0, 10.0, [99, 0])
    assert hit_damage(batch, _hits([-1, -1], [0, 0], [10.0, 10.0])).tolist() == [0.0, 0.0]
    with pytest.raises(KeyError, match="99"):
        hit_damage(batch, _hits([1, -1], [2, 0], [10.0, 10.0]))


def _hits(victim: list[int], bone: list[int], distance: list[float]) -> HitBatch:
    s = len(victim)
    return HitBatch(
        victim=np.array(victim, dtype=np.int32), bone=np.array(bone, dtype=np.int8),
        distance=np.array(distance, dtype=np.float64), hit_point=np.zeros((s, 3)),
        blocked_by_wall=np.zeros(s, dtype=bool), occluded_victim=np.full(s, -1, dtype=np.int32),
        victim_pos=np.zeros((s, 3)), victim_speed=np.zeros(s), victim_generation=np.zeros(s, dtype=np.uint32),
        clamped=np.zeros(s, dtype=bool), bait_hit=np.zeros(s, dtype=bool), bait_index=np.full(s, -1, dtype=np.int32),
    )
