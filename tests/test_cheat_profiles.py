"""Cheat profiles: the registry, and each profile's hooks doing what the cheat does, on synthetic
perceptions and a real client's world model (its own hit detection, its snapshot buffer)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

import bots.build as build
from bots.cheats import (
    Backtrack,
    CBug,
    EspBrain,
    FakeLag,
    LockAimbot,
    Noclip,
    NoRecoil,
    ProAim,
    RageAimbot,
    RapidFire,
    SilentAim,
    SmoothAimbot,
    Speedhack,
    Teleport,
    Triggerbot,
    TriggerbotParams,
    Wallhack,
)
from bots.cheats.targeting import (
    aim_angles,
    bone_column,
    bone_point,
    direction_angles,
    punch_at_fire,
)
from bots.client import BotClient
from bots.nav import NavGraph
from bots.perception import Intent, Perception
from bots.prediction import MoveState
from bots.profiles import PROFILES, profile_names
from physics.buttons import Buttons
from physics.weapon_state import WeaponState
from server.entity_block import EntityFlags, encode_entities, make_entities
from server.protocol import Command, OwnState, Shot, Snapshot
from testbed.bot_factory import DefaultBotFactory
from testbed.scenario import parse_scenario_text
from world.constants import STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import Bone
from world.mapfile import GameMap, parse_map
from world.weapons import WeaponId, weapon

DT = 1.0 / 64.0
ALIVE = int(EntityFlags.ALIVE)
BAIT = int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)
RIFLE = int(WeaponId.RIFLE)
PISTOL = int(WeaponId.PISTOL)
FIRE = int(Buttons.FIRE)
CROUCH = int(Buttons.CROUCH)
CHEATS = (
    "lock_aimbot", "rage_aimbot", "smooth_aimbot", "silent_aim", "proaim", "triggerbot", "no_recoil", "speedhack",
    "teleport", "noclip", "cbug", "rapid_fire", "wallhack", "backtrack", "fake_lag",
)


def tiny_map() -> GameMap:
    """60 x 40 m: a full wall at x 30..32 (y 5..35), two spawns facing each other."""
    return parse_map(
        {
            "format": "referee-map/1",
            "name": "tiny",
            "bounds": [0, 0, 60, 40],
            "walls": [{"id": "wall", "polygon": [[30, 5], [32, 5], [32, 35], [30, 35]], "height": 4}],
            "spawns": [{"id": "a", "pos": [5, 20], "yaw": 0}, {"id": "b", "pos": [50, 20], "yaw": 180}],
        }
    )


@pytest.fixture(scope="module")
def game_map() -> GameMap:
    return tiny_map()


@pytest.fixture(scope="module")
def geometry(game_map: GameMap) -> MapGeometry:
    return MapGeometry(game_map)


@pytest.fixture(scope="module")
def nav(geometry: MapGeometry) -> NavGraph:
    return NavGraph(geometry)


Row = tuple[int, int, tuple[float, float, float], float]
"""(slot, flags, feet position, yaw)."""


def make_bot(profile: str, game_map: GameMap, geometry: MapGeometry, nav: NavGraph, params: dict | None = None,
             seed: int = 1) -> BotClient:
    return build.make_bot(profile, name=f"t-{profile}"[:32], skill="average", params=params or {},
                             game_map=game_map, geometry=geometry, nav=nav, tick_rate_hz=64,
                             rng=np.random.default_rng(seed))


def feed(client: BotClient, frames: list[list[Row]], t0: float = 1.0,
         vel: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
    """Snapshots at server times t0, t0 + DT, ... with these entity rows (own slot 0)."""
    client.world.own_slot = 0
    own = OwnState((5.0, 20.0, 0.0), (0.0, 0.0, 0.0), 0.0, 0.0, 100.0, RIFLE, 10, 40, 0, True, True)
    for k, rows in enumerate(frames):
        n = len(rows)
        recs = make_entities(
            np.array([r[0] for r in rows], dtype=np.intp), np.array([r[1] for r in rows], dtype=np.intp),
            np.array([r[2] for r in rows], dtype=np.float64).reshape(n, 3), np.tile(np.asarray(vel), (n, 1)),
            np.array([r[3] for r in rows], dtype=np.float64), np.zeros(n), np.full(n, RIFLE, dtype=np.intp),
            np.full(n, 100.0),
        )
        tick = round(t0 / DT) + k
        client.world.add_snapshot(Snapshot(tick, t0 + k * DT, None, own, encode_entities(recs), 0, 1), t0 + k * DT)


def place(client: BotClient, pos: tuple[float, float, float]) -> None:
    """The client's predicted own state (its eye is where its shots start)."""
    client.predictor.reset(MoveState(pos, (0.0, 0.0, 0.0), True, 0), None)


def perceive(client: BotClient, pos: tuple[float, float, float], vt: float, *, tick: int = 200, weapon_id: int = RIFLE,
             ammo: int = 10, punch: tuple[float, float] = (0.0, 0.0), yaw: float = 0.0, pitch: float = 0.0,
             owned: tuple[int, ...] = (RIFLE, PISTOL), crouching: bool = False, alive: bool = True) -> Perception:
    place(client, pos)
    return Perception(
        now_s=tick * DT, view_time_s=vt, tick=tick, slot=0, pos=pos, vel=(0.0, 0.0, 0.0), yaw_deg=yaw,
        pitch_deg=pitch, crouching=crouching, on_ground=True, alive=alive, health=100.0, weapon=weapon_id, ammo=ammo,
        reserve=30, reloading=False, punch_pitch_deg=punch[0], punch_yaw_deg=punch[1],
        entities=client.world.interpolate(vt).seen(), weapons_owned=owned,
    )


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def head_angles(client: BotClient, p: Perception, slot: int) -> tuple[float, float]:
    e = next(e for e in p.entities if e.slot == slot)
    eye = (p.pos[0], p.pos[1], p.pos[2] + STANDING_EYE_M)
    yaw, pitch, _ = direction_angles(eye, bone_point(e, bone_column("head")))
    return yaw, pitch


def shot_of(seq: int, yaw: float, pitch: float, vt: float, weapon_id: int = RIFLE) -> Shot:
    return Shot(cmd_seq=seq, weapon=weapon_id, yaw_deg=yaw, pitch_deg=pitch, view_time_s=vt)


def command(seq: int, pos: tuple[float, float, float], yaw: float = 0.0, forward: float = 0.0,
            recoil: tuple[float, float] = (0.0, 0.0)) -> Command:
    return Command(seq=seq, client_tick=seq, view_time_s=1.0, duration_s=DT, forward=forward, side=0.0, yaw_deg=yaw,
                   pitch_deg=0.0, buttons=0, weapon_switch=0, recoil_pitch_deg=recoil[0], recoil_yaw_deg=recoil[1],
                   pos=pos)


# ------------------------------------------------------------------------------------- registry


def test_registry_lists_every_profile_and_labels_ground_truth() -> None:
    names = profile_names()
    assert names[0] == "honest"
    assert set(names) == {"honest", *CHEATS}
    assert set(PROFILES) == set(names)
    for n in names:
        assert build.ground_truth(n) == n
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        build.ground_truth("nope")
    with pytest.raises(TypeError):
        PROFILES["x"] = PROFILES["honest"]  # type: ignore[index]


@pytest.mark.parametrize("profile", ["honest", *CHEATS])
def test_every_profile_builds_a_client(profile: str, game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot(profile, game_map, geometry, nav)
    assert isinstance(client, BotClient)
    assert client.hooks.name == profile
    assert client.hooks is not None and client.brain is not None
    if profile == "wallhack":
        assert isinstance(client.brain, EspBrain)
    # The hooks are attached and the datagrams of the handshake come out.
    assert client.start(0.0)


def test_unknown_profile_and_params_are_errors(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    with pytest.raises(ValueError, match="unknown profile 'wizard'"):
        make_bot("wizard", game_map, geometry, nav)
    with pytest.raises(ValueError, match="unknown parameter 'strenght'"):
        make_bot("smooth_aimbot", game_map, geometry, nav, {"strenght": 0.5})
    with pytest.raises(ValueError, match="unknown parameter 'strength'.*'honest'"):
        make_bot("honest", game_map, geometry, nav, {"strength": 0.5})
    with pytest.raises(ValueError, match="strength"):
        make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": 1.5})
    with pytest.raises(ValueError, match="'strength' expects a number"):
        make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": "max"})
    with pytest.raises(ValueError, match="factor"):
        make_bot("speedhack", game_map, geometry, nav, {"factor": 0.5})
    with pytest.raises(ValueError, match="bone"):
        make_bot("lock_aimbot", game_map, geometry, nav, {"bone": "tail"})
    with pytest.raises(ValueError, match="prefer"):
        make_bot("cbug", game_map, geometry, nav, {"prefer": ["smg"]})
    client = make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": 1, "fov_deg": 30})
    assert isinstance(client.hooks, SmoothAimbot)
    assert client.hooks.params.strength == 1.0 and client.hooks.params.fov_deg == 30.0
    client = make_bot("backtrack", game_map, geometry, nav, {"back_s": [0.2, 0.3]})
    assert client.hooks.params.back_s == (0.2, 0.3)  # type: ignore[attr-defined]


def test_testbed_factory_builds_cheats_from_the_registry(game_map: GameMap, geometry: MapGeometry) -> None:
    scenario = parse_scenario_text(
        'map = "corridors"\nduration_s = 1.0\ntick_rate_hz = 64\nseed = 1\n'
        '[[bots]]\ncount = 1\nprofile = "smooth_aimbot"\n[bots.params]\nstrength = 0.7\n'
        '[[bots]]\ncount = 1\nprofile = "speedhack"\n',
        profiles=profile_names(),
    )
    factory = DefaultBotFactory()
    built = [factory(spec, game_map=game_map, geometry=geometry, tick_rate_hz=64, rng=np.random.default_rng(i))
             for i, spec in enumerate(scenario.players())]
    assert isinstance(built[0].hooks, SmoothAimbot)
    assert built[0].hooks.params.strength == 0.7  # type: ignore[attr-defined]
    assert isinstance(built[1].hooks, Speedhack)
    # A cheater is built like an honest bot (same skill draw from the same generator), plus hooks.
    spec = next(iter(parse_scenario_text(
        'map = "corridors"\nduration_s = 1.0\ntick_rate_hz = 64\nseed = 1\n[[bots]]\ncount = 1\nprofile = "honest"\n'
    ).players()))
    honest = factory(spec, game_map=game_map, geometry=geometry, tick_rate_hz=64, rng=np.random.default_rng(9))
    cheat = build.make_bot("lock_aimbot", name="x", skill=spec.skill, game_map=game_map, geometry=geometry,
                              rng=np.random.default_rng(9))
    assert honest.brain.skill == cheat.brain.skill  # type: ignore[attr-defined]


# -------------------------------------------------------------------------------------- aimbots


def test_turning_the_view_keeps_the_walking_direction() -> None:
    from bots.cheats.targeting import counter_strafe, remap_keys

    # Walking +x (W at yaw 0); the cheat turns the view to +y: the same walk is D (right).
    assert remap_keys(Intent(forward=1.0, yaw_deg=0.0), 90.0) == (0.0, 1.0)
    assert remap_keys(Intent(forward=1.0, yaw_deg=0.0), 180.0) == (-1.0, 0.0)
    assert remap_keys(Intent(yaw_deg=0.0), 77.0) == (0.0, 0.0)
    p = Perception(now_s=0.0, view_time_s=0.0, tick=0, slot=0, pos=(0.0, 0.0, 0.0), vel=(4.0, 0.0, 0.0),
                   yaw_deg=0.0, pitch_deg=0.0, crouching=False, on_ground=True, alive=True, health=100.0,
                   weapon=RIFLE, ammo=1, reserve=0, reloading=False, punch_pitch_deg=0.0, punch_yaw_deg=0.0,
                   entities=())
    assert counter_strafe(p, 0.0) == (-1.0, 0.0)  # moving forward: press S
    assert counter_strafe(p, 90.0) == (0.0, -1.0)  # moving to the right of the view: press A


def test_lock_aimbot_points_exactly_at_the_head(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("lock_aimbot", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, LockAimbot)
    feed(client, [[(1, ALIVE, (20.0, 23.0, 0.0), 180.0), (2, ALIVE, (26.0, 14.0, 0.0), 90.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    out = hooks.intent(p, Intent(forward=1.0, yaw_deg=120.0, pitch_deg=-10.0), rng())
    yaw, pitch = head_angles(client, p, 1)  # slot 1 is the nearest
    assert out.yaw_deg == pytest.approx(yaw, abs=1e-9) and out.pitch_deg == pytest.approx(pitch, abs=1e-9)
    assert out.buttons & FIRE and out.aim_target == 1
    claim = client.claim_shot(out.yaw_deg, out.pitch_deg, RIFLE, 1.0)
    assert claim.victim == 1 and claim.bone == int(Bone.HEAD)
    # Under recoil the view is pulled down by exactly the punch the shot will fly with.
    punch = (2.0, 0.3)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0, punch=punch, tick=201)
    out = hooks.intent(p, Intent(yaw_deg=0.0), rng())
    fired = punch_at_fire(*punch, RIFLE, DT)
    assert out.yaw_deg == pytest.approx(yaw + fired[1], abs=1e-9)
    assert out.pitch_deg == pytest.approx(pitch - fired[0], abs=1e-9)
    assert client.claim_shot(out.yaw_deg, out.pitch_deg, RIFLE, 1.0, fired).bone == int(Bone.HEAD)


def test_lock_aimbot_needs_line_of_sight_but_takes_baits(game_map: GameMap, geometry: MapGeometry,
                                                         nav: NavGraph) -> None:
    client = make_bot("lock_aimbot", game_map, geometry, nav)
    hooks = client.hooks
    feed(client, [[(1, ALIVE, (45.0, 20.0, 0.0), 180.0)]] * 2)  # behind the wall
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    honest = Intent(yaw_deg=33.0, pitch_deg=1.0, buttons=FIRE)
    assert hooks.intent(p, honest, rng()) == honest
    # A bait record (not rendered) in the open: an entity-list aimbot locks onto its centre.
    feed(client, [[(1, ALIVE, (45.0, 20.0, 0.0), 180.0), (200, BAIT, (15.0, 20.0, 2.15), 0.0)]] * 2, t0=2.0)
    p = perceive(client, (5.0, 20.0, 0.0), 2.0, tick=300)
    out = hooks.intent(p, honest, rng())
    yaw, pitch, _ = direction_angles((5.0, 20.0, STANDING_EYE_M), (15.0, 20.0, 2.15))
    assert out.aim_target == 200
    assert (out.yaw_deg, out.pitch_deg) == pytest.approx((yaw, pitch), abs=1e-4)  # float32 records
    # Letting go: the view stays where the aimbot left it and the human's hand goes on from there.
    feed(client, [[]] * 2, t0=3.0)
    p = perceive(client, (5.0, 20.0, 0.0), 3.0, tick=400)
    last = hooks.intent(p, honest, rng())
    assert (last.yaw_deg, last.pitch_deg) == (out.yaw_deg, out.pitch_deg)
    assert client.brain.aim.hand(0.0) == pytest.approx((out.yaw_deg, out.pitch_deg))  # type: ignore[attr-defined]
    assert hooks.intent(p, honest, rng()) == honest


def test_rage_aimbot_flicks_to_a_new_target_after_every_shot(game_map: GameMap, geometry: MapGeometry,
                                                             nav: NavGraph) -> None:
    client = make_bot("rage_aimbot", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, RageAimbot)
    # One enemy ahead, one behind the player: switching is a 180-degree flick.
    feed(client, [[(1, ALIVE, (20.0, 20.0, 0.0), 180.0), (2, ALIVE, (2.0, 20.1, 0.0), 0.0)]] * 2)
    seen = []
    for k in range(4):
        p = perceive(client, (5.0, 20.0, 0.0), 1.0, tick=200 + 60 * k)  # the rifle fires every 0.8 s
        out = hooks.intent(p, Intent(yaw_deg=0.0), rng())
        assert out.buttons & FIRE
        seen.append((out.aim_target, out.yaw_deg))
        hooks.shots([shot_of(k + 1, out.yaw_deg, out.pitch_deg, 1.0)], p, rng())
    assert [s[0] for s in seen] == [2, 1, 2, 1]
    assert abs(((seen[0][1] - seen[1][1]) + 180.0) % 360.0 - 180.0) > 175.0


def test_smooth_aimbot_closes_a_fraction_of_the_angle_per_tick(game_map: GameMap, geometry: MapGeometry,
                                                               nav: NavGraph) -> None:
    feed_rows = [[(1, ALIVE, (20.0, 26.0, 0.0), 180.0)]] * 2
    honest = Intent(yaw_deg=0.0, pitch_deg=0.0)
    # Strength 0: the honest player, untouched.
    client = make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": 0.0})
    feed(client, feed_rows)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    assert client.hooks.intent(p, honest, rng()) == honest
    # Strength 0.5 without noise: the remaining angle halves every tick; strength 1: a lock.
    client = make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": 0.5, "noise_deg": 0.0})
    feed(client, feed_rows)
    hooks = client.hooks
    target = None
    errors = []
    for k in range(5):
        p = perceive(client, (5.0, 20.0, 0.0), 1.0, tick=200 + k)
        target = target or head_angles(client, p, 1)
        out = hooks.intent(p, honest, rng())
        errors.append(math.hypot(out.yaw_deg - target[0], out.pitch_deg - target[1]))
    first = math.hypot(*target)
    assert errors[0] == pytest.approx(first / 2, rel=1e-6)
    for a, b in itertools.pairwise(errors):
        assert b == pytest.approx(a / 2, rel=1e-6)
    client = make_bot("smooth_aimbot", game_map, geometry, nav, {"strength": 1.0, "noise_deg": 0.0})
    feed(client, feed_rows)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    out = client.hooks.intent(p, honest, rng())
    assert (out.yaw_deg, out.pitch_deg) == pytest.approx(head_angles(client, p, 1), abs=1e-9)
    assert out.buttons & FIRE


# ---------------------------------------------------------------------- silent aim, proaim, trigger


def test_silent_aim_keeps_view_angles_and_forges_the_shot(game_map: GameMap, geometry: MapGeometry,
                                                          nav: NavGraph) -> None:
    client = make_bot("silent_aim", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, SilentAim)
    feed(client, [[(1, ALIVE, (20.0, 24.0, 0.0), 180.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    honest = Intent(forward=1.0, yaw_deg=5.0, pitch_deg=2.0)  # about 10 degrees off the target
    out = hooks.intent(p, honest, rng())
    assert (out.yaw_deg, out.pitch_deg, out.forward) == (5.0, 2.0, 1.0)  # the command's angles stay human
    assert out.buttons & FIRE
    cmd = command(1, (5.0, 20.0, 0.0), yaw=5.0)
    assert hooks.command(cmd, p) == cmd
    honest_shot = shot_of(1, 5.0, 2.0, 1.0)
    assert client.claim_shot(5.0, 2.0, RIFLE, 1.0).victim is None  # the human would miss
    (forged,) = hooks.shots([honest_shot], p, rng())
    yaw, pitch = head_angles(client, p, 1)
    assert (forged.yaw_deg, forged.pitch_deg) == pytest.approx((yaw, pitch), abs=1e-9)
    assert forged.view_time_s == 1.0 and forged.cmd_seq == 1
    assert forged.claimed_victim == 1 and forged.claimed_bone == int(Bone.HEAD)
    claim = client.claim_shot(forged.yaw_deg, forged.pitch_deg, RIFLE, 1.0)
    assert forged.claimed_hit_point == claim.point


def test_proaim_claims_hits_far_from_the_victim(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("proaim", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, ProAim)
    victim = (25.0, 20.0, 0.0)
    feed(client, [[(1, ALIVE, victim, 180.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    out = hooks.intent(p, Intent(yaw_deg=90.0), rng())
    assert out.aim_target == 1 and out.buttons & FIRE
    assert abs(out.yaw_deg) < 5.0  # roughly at the target
    shots = hooks.shots([shot_of(k, out.yaw_deg, out.pitch_deg, 1.0) for k in range(1, 9)], p, rng())
    for s in shots:
        assert s.claimed_victim == 1 and s.claimed_hit_point is not None
        off = math.dist(s.claimed_hit_point, (victim[0], victim[1], victim[2] + 1.26))
        assert 15.0 < off <= 205.0
        assert math.dist(s.claimed_hit_point, (5.0, 20.0, STANDING_EYE_M)) <= weapon(RIFLE).max_range_m + 1e-6


def test_triggerbot_fires_exactly_when_the_crosshair_is_on_an_enemy(game_map: GameMap, geometry: MapGeometry,
                                                                   nav: NavGraph) -> None:
    client = make_bot("triggerbot", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, Triggerbot)
    feed(client, [[(1, ALIVE, (20.0, 20.0, 0.0), 180.0), (200, BAIT, (15.0, 26.0, 2.15), 0.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    on = head_angles(client, p, 1)
    out = hooks.intent(p, Intent(yaw_deg=on[0], pitch_deg=on[1]), rng())
    assert out.buttons & FIRE and hooks.on_target == 1
    # Off target: no FIRE, even though the human pressed it.
    out = hooks.intent(p, Intent(yaw_deg=on[0] + 8.0, pitch_deg=on[1], buttons=FIRE), rng())
    assert not out.buttons & FIRE and hooks.on_target is None
    # The crosshair over a bait record: a triggerbot reading raw snapshots fires.
    yaw, pitch, _ = direction_angles((5.0, 20.0, STANDING_EYE_M), (15.0, 26.0, 2.15))
    out = hooks.intent(p, Intent(yaw_deg=yaw, pitch_deg=pitch), rng())
    assert out.buttons & FIRE and hooks.on_target == 200
    # Not before the weapon can fire again.
    hooks.shots([shot_of(1, yaw, pitch, 1.0)], p, rng())
    out = hooks.intent(replace(p, tick=p.tick + 1), Intent(yaw_deg=on[0], pitch_deg=on[1]), rng())
    assert not out.buttons & FIRE


def test_a_delayed_triggerbot_waits_out_each_contact_and_fires_only_if_still_on(
        game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("triggerbot", game_map, geometry, nav, params={"delay_s": 0.05})
    hooks = client.hooks
    assert isinstance(hooks, Triggerbot)
    feed(client, [[(1, ALIVE, (20.0, 20.0, 0.0), 180.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    on = head_angles(client, p, 1)
    on_intent, off_intent = Intent(yaw_deg=on[0], pitch_deg=on[1]), Intent(yaw_deg=on[0] + 8.0, pitch_deg=on[1])

    def at(k: int, intent: Intent) -> bool:
        return bool(hooks.intent(replace(p, tick=p.tick + k, now_s=(p.tick + k) * DT), intent, rng()).buttons & FIRE)

    # Contact at tick 0: held for 0.05 s (3.2 ticks at 64 Hz), then FIRE.
    assert [at(k, on_intent) for k in range(5)] == [False, False, False, False, True]
    # Off the target, then back on: the delay starts again from the new contact.
    assert not at(5, off_intent) and hooks.on_target is None
    assert [at(k, on_intent) for k in range(6, 11)] == [False, False, False, False, True]
    # A contact shorter than the delay passes without a shot.
    assert not at(11, off_intent) and not any(at(k, on_intent) for k in (12, 13)) and not at(14, off_intent)
    # A per-contact draw: the delay lies in [delay_s, delay_s + spread).
    spread = make_bot("triggerbot", game_map, geometry, nav, params={"delay_s": 0.05, "delay_spread_s": 0.1})
    assert isinstance(spread.hooks, Triggerbot)
    feed(spread, [[(1, ALIVE, (20.0, 20.0, 0.0), 180.0)]] * 2)
    spread.hooks.intent(perceive(spread, (5.0, 20.0, 0.0), 1.0), on_intent, rng())
    assert 0.05 <= spread.hooks.contact_delay_s < 0.15
    with pytest.raises(ValueError):
        TriggerbotParams(delay_s=-0.01)


# ------------------------------------------------------------------------------------ no recoil


def test_no_recoil_reports_zero_and_pulls_down_exactly(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("no_recoil", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, NoRecoil)
    feed(client, [[]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0, punch=(3.0, -0.4), weapon_id=int(WeaponId.ASSAULT_RIFLE))
    seen = hooks.perceive(p)
    assert (seen.punch_pitch_deg, seen.punch_yaw_deg) == (0.0, 0.0)  # the human never feels the kick
    out = hooks.intent(seen, Intent(yaw_deg=10.0, pitch_deg=1.0), rng())
    fired = punch_at_fire(3.0, -0.4, int(WeaponId.ASSAULT_RIFLE), DT)
    assert fired[0] < 3.0  # recovered over one command
    assert (out.yaw_deg, out.pitch_deg) == pytest.approx(aim_angles(10.0, 1.0, fired))
    # The shot flies exactly where the human aimed: view + punch = aim.
    assert out.yaw_deg - fired[1] == pytest.approx(10.0) and out.pitch_deg + fired[0] == pytest.approx(1.0)
    sent = hooks.command(command(1, (5.0, 20.0, 0.0), recoil=fired), seen)
    assert (sent.recoil_pitch_deg, sent.recoil_yaw_deg) == (0.0, 0.0)


# ------------------------------------------------------------------------------------- movement


def test_speedhack_sends_more_commands_than_ticks() -> None:
    hooks = Speedhack()
    counts = [hooks.commands_this_step(k * DT, rng()) for k in range(640)]
    assert set(counts) == {1, 2}
    assert sum(counts) == 960  # 1.5 x 640 ticks
    fast = Speedhack(build.resolve_params("speedhack", {"factor": 3.0}))
    assert sum(fast.commands_this_step(k * DT, rng()) for k in range(100)) == 300


def test_teleport_claims_jumps_beyond_40_m(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("teleport", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, Teleport)
    gen = rng()
    pos = (5.0, 20.0, 0.0)
    jumps = []
    first = perceive(client, pos, 1.0, tick=0)
    for k in range(64 * 30):
        p = replace(first, tick=k, now_s=k * DT)
        hooks.intent(p, Intent(), gen)
        cmd = command(k + 1, pos)
        sent = hooks.command(cmd, p)
        if sent.pos != cmd.pos:
            jumps.append((k * DT, sent.pos))
    assert 3 <= len(jumps) <= 11  # every 3-8 s over 30 s
    for _, where in jumps:
        assert math.dist(where, pos) > 40.0
        assert not geometry.circle_blocked(np.array([where[:2]]))[0]  # a free spot of the map
    gaps = np.diff([t for t, _ in jumps])
    assert gaps.min() >= 3.0 - 1e-9 and gaps.max() <= 8.0 + DT


def test_noclip_claims_walking_through_a_wall(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("noclip", game_map, geometry, nav, {"interval_s": [0.0, 0.0], "walk_s": 10.0})
    hooks = client.hooks
    assert isinstance(hooks, Noclip)
    feed(client, [[(1, ALIVE, (40.0, 20.0, 0.0), 180.0)]] * 2)  # an enemy behind the wall at x 30..32
    gen = rng()
    p = perceive(client, (25.0, 20.0, 0.0), 1.0, tick=0)
    claims = []
    for k in range(300):
        p = replace(p, tick=k, now_s=k * DT)
        out = hooks.intent(p, Intent(), gen)
        if k == 0:
            assert hooks.walking and out.forward == 1.0 and abs(out.yaw_deg) < 1e-6
        if not hooks.walking:
            break
        # The honest client's prediction stops at the wall; the claim does not.
        pred = client.predictor.predict(k + 1, out.forward, out.side, out.yaw_deg, 0.0, out.buttons, DT, 5.5)[0]
        sent = hooks.command(command(k + 1, pred.pos, yaw=out.yaw_deg, forward=out.forward), p)
        claims.append(sent.pos)
        p = replace(p, pos=pred.pos)
    xs = [c[0] for c in claims]
    assert client.predicted.pos[0] < 30.0  # the real movement is stopped by the wall
    assert max(xs) > 33.0  # the claims went through it
    assert not geometry.los_clear(np.array([[25.0, 20.0, 0.05]]), np.array([[max(xs), 20.0, 0.05]]))[0]
    assert xs == sorted(xs)
    assert not geometry.circle_blocked(np.array([c[:2] for c in claims])).any()  # never inside the wall


# ------------------------------------------------------------------------------------ fire rate


def test_cbug_crouches_within_the_window_after_each_shot(game_map: GameMap, geometry: MapGeometry,
                                                         nav: NavGraph) -> None:
    client = make_bot("cbug", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, CBug)
    feed(client, [[(1, ALIVE, (20.0, 20.0, 0.0), 180.0)]] * 2)
    gen = rng()
    # Holding an SMG: the script switches to a crouch-cancel weapon the player carries.
    p = perceive(client, (5.0, 20.0, 0.0), 1.0, weapon_id=int(WeaponId.SMG), owned=(int(WeaponId.SMG), PISTOL))
    assert hooks.intent(p, Intent(), gen).weapon_switch == PISTOL
    # With the pistol: shot at tick 100, then the script's crouch and its follow-up shot.
    spec = weapon(PISTOL)
    engaged = Intent(aim_target=1, buttons=CROUCH)  # the human even holds crouch: the script stands first
    ws = WeaponState(1)
    ws.spawn(0, [PISTOL], 0.0)
    assert ws.try_fire(0, PISTOL, 100 * DT).accepted
    p = perceive(client, (5.0, 20.0, 0.0), 1.0, weapon_id=PISTOL, ammo=6, tick=100)
    hooks.shots([shot_of(1, 0.0, 0.0, 1.0, PISTOL)], p, gen)
    crouched = False
    fired_at = None
    for tick in range(101, 140):
        out = hooks.intent(replace(p, tick=tick, now_s=tick * DT, crouching=crouched), engaged, gen)
        pressed = bool(out.buttons & CROUCH) and not crouched
        if pressed:
            assert (tick - 100) * DT <= spec.cbug_window_s
            ws.note_crouch_presses(np.array([0]), tick * DT)
        crouched = bool(out.buttons & CROUCH)
        if out.buttons & FIRE:
            fired_at = tick
            break
    assert fired_at is not None
    interval = (fired_at - 100) * DT
    assert spec.cbug_interval_s <= interval < spec.cbug_interval_s + DT
    assert interval < 0.240  # Nex-AC's auto-C threshold for the pistol
    outcome = ws.try_fire(0, PISTOL, fired_at * DT)
    assert outcome.accepted and outcome.cbug_used  # legal physics: the game allows it


def test_rapid_fire_ignores_the_fire_interval_and_adds_shots(game_map: GameMap, geometry: MapGeometry,
                                                             nav: NavGraph) -> None:
    client = make_bot("rapid_fire", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, RapidFire) and hooks.bypass_fire_interval
    feed(client, [[]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    for k in range(5):
        assert hooks.intent(replace(p, tick=p.tick + k), Intent(aim_target=3), rng()).buttons & FIRE
    assert not hooks.intent(p, Intent(), rng()).buttons & FIRE  # nothing to shoot at
    out = hooks.shots([shot_of(4, 0.0, 0.0, 1.0)], p, rng())
    assert len(out) == 2 and all(s.cmd_seq == 4 for s in out)


# ----------------------------------------------------------------------------------------- ESP


def test_wallhack_targets_entities_a_human_cannot_see(game_map: GameMap, geometry: MapGeometry, nav: NavGraph) -> None:
    client = make_bot("wallhack", game_map, geometry, nav)
    brain = client.brain
    hooks = client.hooks
    assert isinstance(brain, EspBrain) and isinstance(hooks, Wallhack)
    # Only a bait record (rendered=False) in front of the player.
    feed(client, [[(200, BAIT, (15.0, 22.0, 2.15), 0.0)]] * 2)
    p = perceive(client, (5.0, 20.0, 0.0), 1.0)
    assert [e.slot for e in brain.targeting.candidates(p)] == [200]
    honest = make_bot("honest", game_map, geometry, nav)
    assert honest.brain.targeting.candidates(p) == []  # type: ignore[attr-defined]
    gen = rng()
    intents = [brain.think(replace(p, tick=200 + k, now_s=(200 + k) * DT), gen) for k in range(64)]
    assert any(i.aim_target == 200 for i in intents)
    # The ESP human aims at the bait's centre (the record's pos): the last view is on it.
    yaw, pitch, _ = direction_angles((5.0, 20.0, STANDING_EYE_M), (15.0, 22.0, 2.15))
    assert math.hypot(intents[-1].yaw_deg - yaw, intents[-1].pitch_deg - pitch) < 1.5
    # Behind a wall: tracked, but no shot into the wall unless the target is about to appear.
    feed(client, [[(1, ALIVE, (40.0, 20.0, 0.0), 180.0)]] * 2, t0=3.0)
    p = perceive(client, (25.0, 20.0, 0.0), 3.0, tick=400)
    assert [e.slot for e in brain.targeting.candidates(p)] == [1]
    out = hooks.intent(p, Intent(aim_target=1, buttons=FIRE), gen)
    assert not out.buttons & FIRE and hooks.tracking_hidden == 1
    # Running out from behind the wall's end (x 30..32, y up to 35) within the pre-fire lead:
    # fire at the corner; standing still there: no.
    feed(client, [[(1, ALIVE, (38.0, 32.8, 0.0), 90.0)]] * 2, t0=4.0, vel=(0.0, 6.0, 0.0))
    p = perceive(client, (26.0, 36.0, 0.0), 4.0, tick=500)
    assert hooks.intent(p, Intent(aim_target=1, buttons=FIRE), gen).buttons & FIRE
    feed(client, [[(1, ALIVE, (38.0, 32.8, 0.0), 90.0)]] * 2, t0=5.0)
    p = perceive(client, (26.0, 36.0, 0.0), 5.0, tick=600)
    assert not hooks.intent(p, Intent(aim_target=1, buttons=FIRE), gen).buttons & FIRE


# ------------------------------------------------------------------------------------- netcode


def test_backtrack_claims_old_view_times_and_hits_the_past(game_map: GameMap, geometry: MapGeometry,
                                                           nav: NavGraph) -> None:
    client = make_bot("backtrack", game_map, geometry, nav)
    hooks = client.hooks
    assert isinstance(hooks, Backtrack)
    # A target running sideways at 5 m/s across 40 frames (0.625 s).
    frames = [[(1, ALIVE, (20.0, 10.0 + 5.0 * k * DT, 0.0), 180.0)] for k in range(40)]
    feed(client, frames, vel=(0.0, 5.0, 0.0))
    vt = 1.0 + 39 * DT
    p = perceive(client, (5.0, 20.0, 0.0), vt)
    gen = rng()
    honest = Intent(yaw_deg=0.0, pitch_deg=0.0, aim_target=1)
    out = hooks.intent(p, honest, gen)
    # Aimed at where the target was ``back`` seconds ago: behind its present position.
    now_y = 10.0 + 5.0 * 39 * DT
    assert out.yaw_deg < honest.yaw_deg
    # A shot along the present target fails now; the cheat finds the past record it hits.
    e = next(e for e in p.entities if e.slot == 1)
    past = replace(e, pos=(20.0, now_y - 5.0 * 0.25, 0.0))
    yaw, pitch, _ = direction_angles((5.0, 20.0, STANDING_EYE_M), bone_point(past, bone_column("upper_torso")))
    (shot,) = hooks.shots([shot_of(1, yaw, pitch, vt)], p, gen)
    assert shot.view_time_s <= vt - 0.15 and shot.view_time_s >= vt - 0.40 - 1e-9
    assert shot.claimed_victim == 1
    assert vt - shot.view_time_s == pytest.approx(0.25, abs=0.08)
    # Without any record to hit, the claimed view time is still older than the real one.
    (miss,) = hooks.shots([shot_of(2, yaw + 40.0, pitch, vt)], p, gen)
    assert vt - 0.40 - 1e-9 <= miss.view_time_s <= vt - 0.15 and miss.claimed_victim is None
    # The crosshair on the trail (the record 0.25 s old) pulls the trigger; on nothing, not.
    trail = make_bot("backtrack", game_map, geometry, nav, {"aim_at_past": False})
    feed(trail, frames, vel=(0.0, 5.0, 0.0))
    p = perceive(trail, (5.0, 20.0, 0.0), vt)
    assert trail.hooks.intent(p, Intent(yaw_deg=yaw, pitch_deg=pitch, aim_target=1), gen).buttons & FIRE
    assert not trail.hooks.intent(p, Intent(yaw_deg=yaw + 40.0, pitch_deg=pitch, aim_target=1), gen).buttons & FIRE


def test_fake_lag_holds_then_bursts() -> None:
    hooks = FakeLag()
    gen = rng()
    pattern = [hooks.hold_packet(k * DT, gen) for k in range(640)]
    releases = [k for k, held in enumerate(pattern) if not held]
    assert len(releases) >= 10
    holds = np.diff(releases) - 1  # ticks held between two releases
    assert holds.min() * DT >= 0.1 - DT and holds.max() * DT <= 0.3 + DT
    assert sum(pattern) > 0.85 * len(pattern)


# ------------------------------------------------------------------------ virtual-match smoke test

ARENA = {
    "format": "referee-map/1",
    "name": "arena",
    "bounds": [0, 0, 30, 30],
    "walls": [{"id": "pillar", "polygon": [[14, 14], [16, 14], [16, 16], [14, 16]], "height": 4}],
    "spawns": [
        {"id": "a", "pos": [4, 4], "yaw": 45}, {"id": "b", "pos": [26, 26], "yaw": -135},
        {"id": "c", "pos": [4, 26], "yaw": -45}, {"id": "d", "pos": [26, 4], "yaw": 135},
    ],
}


def test_virtual_match_smoke_lock_aimbot_and_speedhack(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A short match in virtual time (8 simulated s, a few wall seconds): the server registers
    the lock aimbot's shots and the speed hack's surplus commands."""
    import json

    from anticheat.events import MovementEvidence, MovementKind, ShotResult
    from server.recording import ReplayReader
    from testbed.match import run_virtual
    from testbed.scenario import load_scenario

    (tmp_path / "arena.json").write_text(json.dumps(ARENA))
    (tmp_path / "smoke.toml").write_text(
        'map = "arena.json"\nduration_s = 8.0\ntick_rate_hz = 64\nseed = 5\n'
        '[[bots]]\ncount = 2\nprofile = "honest"\nping_ms = 40.0\n'
        '[[bots]]\ncount = 1\nprofile = "lock_aimbot"\nping_ms = 40.0\nname_prefix = "lock"\n'
        '[[bots]]\ncount = 1\nprofile = "speedhack"\nping_ms = 40.0\nname_prefix = "speed"\n'
    )
    scenario = load_scenario(tmp_path / "smoke.toml", profiles=profile_names())
    result = run_virtual(scenario, replay_path=tmp_path / "smoke.replay")
    by_name = {p.name: p for p in result.players}
    lock, speed = by_name["lock-1"], by_name["speed-1"]
    assert lock.profile == "lock_aimbot" and speed.profile == "speedhack"
    assert lock.connected and speed.connected
    assert lock.shots > 0
    assert result.server["rejections"].get("timer_dropped", 0) > 0
    shots: dict[int, int] = {}
    timer: dict[int, int] = {}
    for frame in ReplayReader(tmp_path / "smoke.replay").frames():
        for e in frame.events:
            if isinstance(e, ShotResult) and e.pellet == 0:
                shots[e.shooter] = shots.get(e.shooter, 0) + 1
            elif isinstance(e, MovementEvidence) and e.kind is MovementKind.TIMER:
                timer[e.player] = timer.get(e.player, 0) + 1
    assert shots.get(lock.slot, 0) == lock.shots  # type: ignore[arg-type]
    assert timer.get(speed.slot, 0) > 0 and set(timer) == {speed.slot}


def test_every_cheat_has_a_scenario_with_honest_players() -> None:
    from testbed.scenario import builtin_scenario

    for name in CHEATS:
        scenario = builtin_scenario(f"cheat_{name}", profile_names())
        profiles = [spec.profile for spec in scenario.players()]
        assert profiles.count(name) == 1 and profiles.count("honest") == len(profiles) - 1
        assert scenario.duration_s == 60.0
    default = builtin_scenario("default", profile_names())
    assert {spec.profile for spec in default.players()} <= set(profile_names())
