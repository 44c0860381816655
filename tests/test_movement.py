"""Movement model: speed limits, collision, gravity, stance speeds, friction (real MapGeometry)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from physics.buttons import Buttons
from physics.config import MovementConfig
from physics.movement import (
    MoveCommands,
    MoveResult,
    ground_speed_cap,
    max_displacement,
    max_horizontal_speed,
    simulate,
)
from world.geometry import MapGeometry
from world.mapfile import GameMap, Wall, builtin_map
from world.weapons import WEAPONS, WeaponId

DT = 1.0 / 64.0
CFG = MovementConfig()
RIFLE_SPEED = WEAPONS[WeaponId.RIFLE].move_speed_m_s
WALL_X = 5.0


@pytest.fixture(scope="module")
def wall_geometry() -> MapGeometry:
    """A 100 m square with one long wall whose face is the line x = 5."""
    wall = Wall("w", ((WALL_X, -40.0), (WALL_X + 1.0, -40.0), (WALL_X + 1.0, 40.0), (WALL_X, 40.0)), 4.0)
    return MapGeometry(GameMap(name="wall", bounds=(-50.0, -50.0, 50.0, 50.0), walls=(wall,), spawns=()))


@pytest.fixture(scope="module")
def corridors_geometry() -> MapGeometry:
    return MapGeometry(builtin_map("corridors"))


class Player:
    """One player stepped command by command (test convenience around the batched API)."""

    def __init__(self, geometry: MapGeometry, pos: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
        self.geometry = geometry
        self.pos = np.array([pos], dtype=np.float64)
        self.vel = np.zeros((1, 3))
        self.on_ground = np.array([pos[2] == 0.0])
        self.stance = np.zeros(1, dtype=np.int8)
        self.last: MoveResult | None = None

    def step(self, forward: float = 0.0, side: float = 0.0, yaw: float = 0.0, buttons: int = 0, speed: float = RIFLE_SPEED) -> MoveResult:
        res = simulate(
            self.pos, self.vel, self.on_ground, self.stance, MoveCommands.single(forward, side, yaw, buttons, DT), speed, self.geometry, CFG
        )
        self.pos, self.vel, self.on_ground, self.stance, self.last = res.pos, res.vel, res.on_ground, res.stance, res
        return res

    @property
    def hspeed(self) -> float:
        return float(np.hypot(self.vel[0, 0], self.vel[0, 1]))


def random_commands(rng: np.random.Generator, n: int) -> MoveCommands:
    """Random inputs, including out-of-range move values (clipped) and every button."""
    return MoveCommands(
        forward_move=rng.uniform(-1.5, 1.5, n),
        side_move=rng.uniform(-1.5, 1.5, n),
        yaw_deg=rng.uniform(-180.0, 180.0, n),
        pitch_deg=rng.uniform(-89.0, 89.0, n),
        buttons=rng.integers(0, 256, n),
        dt_s=np.full(n, DT),
    )


def test_converted_constants() -> None:
    assert CFG.max_speed_m_s == pytest.approx(8.128)
    assert CFG.gravity_m_s2 == pytest.approx(20.32)
    assert CFG.jump_apex_m == pytest.approx(301.99**2 / (2 * 800) * 0.0254)


def test_reaches_weapon_speed_and_never_more(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, 0.0, 0.0))
    speeds = []
    for _ in range(128):
        p.step(forward=1.0, yaw=90.0)
        speeds.append(p.hspeed)
    assert max(speeds) <= RIFLE_SPEED + 1e-12
    assert speeds[-1] == pytest.approx(RIFLE_SPEED, abs=1e-9)


def test_diagonal_input_is_not_faster(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, -30.0, 0.0))
    for _ in range(128):
        p.step(forward=1.0, side=1.0, yaw=90.0)
    assert p.hspeed == pytest.approx(RIFLE_SPEED, abs=1e-9)


@pytest.mark.parametrize(("button", "factor"), [(Buttons.CROUCH, 0.34), (Buttons.WALK, 0.52), (Buttons.CROUCH | Buttons.WALK, 0.34)])
def test_stance_speed_factors(wall_geometry: MapGeometry, button: Buttons, factor: float) -> None:
    p = Player(wall_geometry, (-40.0, -30.0, 0.0))
    for _ in range(192):
        p.step(forward=1.0, yaw=90.0, buttons=int(button))
    assert p.hspeed == pytest.approx(factor * RIFLE_SPEED, rel=1e-9)
    assert int(p.stance[0]) == (1 if button & Buttons.CROUCH else 0)


def test_crouch_press_reported_once(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, 0.0, 0.0))
    presses = [bool(p.step(buttons=int(b)).crouch_pressed[0]) for b in (0, Buttons.CROUCH, Buttons.CROUCH, 0, Buttons.CROUCH)]
    assert presses == [False, True, False, False, True]


def test_friction_stops_a_player(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, 0.0, 0.0))
    for _ in range(128):
        p.step(forward=1.0, yaw=90.0)
    stopped_after = None
    for i in range(64):
        p.step()
        if p.hspeed == 0.0:
            stopped_after = (i + 1) * DT
            break
    # From 5.46 m/s: exponential decay at rate 5.2/s down to 2.03 m/s (ln(5.46/2.03)/5.2 = 0.19 s),
    # then linear at 2.03 * 5.2 = 10.6 m/s² (0.19 s): about 0.38 s in all.
    assert stopped_after is not None and 0.3 < stopped_after < 0.45
    before = p.pos.copy()
    p.step()
    assert np.array_equal(p.pos, before)


def test_jump_apex_matches_analytic(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, 0.0, 0.0))
    p.step(buttons=int(Buttons.JUMP))
    assert not p.on_ground[0]
    heights = [float(p.pos[0, 2])]
    ticks = 1
    while not p.on_ground[0]:
        p.step()
        heights.append(float(p.pos[0, 2]))
        ticks += 1
    apex = CFG.jump_apex_m
    # Sampled once per tick, the top of the exact parabola is missed by at most g dt² / 8.
    assert apex - CFG.gravity_m_s2 * DT**2 / 8 - 1e-9 <= max(heights) <= apex + 1e-9
    assert ticks * DT == pytest.approx(2 * CFG.jump_speed_m_s / CFG.gravity_m_s2, abs=DT)
    assert p.pos[0, 2] == 0.0 and p.vel[0, 2] == 0.0


def test_jump_only_from_ground(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (-40.0, 0.0, 0.0))
    p.step(buttons=int(Buttons.JUMP))
    vz = p.vel[0, 2]
    p.step(buttons=int(Buttons.JUMP))
    assert p.vel[0, 2] == pytest.approx(vz - CFG.gravity_m_s2 * DT)


def test_slide_keeps_tangential_velocity(wall_geometry: MapGeometry) -> None:
    # Airborne (no friction, no input), flying diagonally into the wall x = 5.
    p = Player(wall_geometry, (3.0, 0.0, 20.0))
    p.vel[:] = (4.0, 3.0, 0.0)
    touched = False
    for _ in range(60):
        p.step()
        touched |= bool(p.last is not None and p.last.touched_wall[0])
    assert touched
    assert p.pos[0, 0] <= WALL_X - wall_geometry.player_radius
    assert p.pos[0, 0] == pytest.approx(WALL_X - wall_geometry.player_radius, abs=2e-3)
    assert p.vel[0, 0] == 0.0
    assert p.vel[0, 1] == pytest.approx(3.0)
    # Slid the whole way along y: 60 ticks at 3 m/s.
    assert p.pos[0, 1] == pytest.approx(60 * DT * 3.0, abs=1e-9)


def test_running_into_wall_slides_along_it(wall_geometry: MapGeometry) -> None:
    p = Player(wall_geometry, (3.0, 0.0, 0.0))
    for _ in range(128):
        p.step(forward=1.0, yaw=45.0)
    assert p.pos[0, 0] < WALL_X - wall_geometry.player_radius
    assert p.pos[0, 1] > 5.0
    assert p.vel[0, 1] > 0.5 * RIFLE_SPEED


def test_inputs_are_not_modified(wall_geometry: MapGeometry) -> None:
    pos, vel = np.array([[4.5, 0.0, 0.0]]), np.array([[3.0, 0.0, 0.0]])
    og, stance = np.array([True]), np.array([0], dtype=np.int8)
    copies = [a.copy() for a in (pos, vel, og, stance)]
    simulate(pos, vel, og, stance, MoveCommands.single(1.0, 0.0, 0.0, int(Buttons.CROUCH)), RIFLE_SPEED, wall_geometry)
    for a, b in zip((pos, vel, og, stance), copies):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_commands_rejected(bad: float) -> None:
    with pytest.raises(ValueError):
        MoveCommands.single(forward=bad)
    with pytest.raises(ValueError):
        MoveCommands.single(yaw_deg=bad)
    with pytest.raises(ValueError):
        MoveCommands.single(dt_s=bad)


def test_malformed_commands_rejected() -> None:
    with pytest.raises(ValueError):
        MoveCommands.single(dt_s=0.0)
    with pytest.raises(ValueError):
        MoveCommands.single(buttons=1 << 12)


def test_non_finite_state_rejected(wall_geometry: MapGeometry) -> None:
    with pytest.raises(ValueError):
        simulate(np.array([[np.nan, 0.0, 0.0]]), np.zeros((1, 3)), [True], [0], MoveCommands.single(), RIFLE_SPEED, wall_geometry)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    weapon=st.sampled_from(list(WeaponId)),
    ticks=st.integers(20, 200),
)
def test_speed_never_exceeds_model_maximum(wall_geometry: MapGeometry, seed: int, weapon: WeaponId, ticks: int) -> None:
    """Any input sequence (16 players at once): horizontal speed <= the weapon's ground speed,
    per-tick displacement <= max_displacement, and the exact per-command bound holds."""
    rng = np.random.default_rng(seed)
    n = 16
    speed = WEAPONS[weapon].move_speed_m_s
    cap = float(ground_speed_cap(speed, CFG))
    pos = np.column_stack([rng.uniform(-40.0, 0.0, n), rng.uniform(-30.0, 30.0, n), np.zeros(n)])
    vel, og, stance = np.zeros((n, 3)), np.ones(n, dtype=bool), np.zeros(n, dtype=np.int8)
    for _ in range(ticks):
        cmd = random_commands(rng, n)
        bound = max_horizontal_speed(vel, og, cmd, speed, CFG)
        res = simulate(pos, vel, og, stance, cmd, speed, wall_geometry, CFG)
        hs = np.hypot(res.vel[:, 0], res.vel[:, 1])
        step = np.hypot(*(res.pos[:, :2] - pos[:, :2]).T)
        assert np.all(hs <= cap + 1e-9)
        assert np.all(hs <= bound + 1e-9)
        assert np.all(step <= max_displacement(DT, CFG, speed) + 1e-9)
        pos, vel, og, stance = res.pos, res.vel, res.on_ground, res.stance


@settings(max_examples=30, deadline=None)
@given(
    vx=st.floats(-9.0, 9.0),
    vy=st.floats(-9.0, 9.0),
    fwd=st.floats(-1.0, 1.0),
    side=st.floats(-1.0, 1.0),
    buttons=st.integers(0, 255),
    ground=st.booleans(),
)
def test_max_horizontal_speed_is_tight(wall_geometry: MapGeometry, vx: float, vy: float, fwd: float, side: float, buttons: int, ground: bool) -> None:
    """The exact bound is reached by some view yaw (sampled every 0.25 deg) and never exceeded."""
    yaws = np.arange(-180.0, 180.0, 0.25)
    n = len(yaws)
    cmd = MoveCommands(np.full(n, fwd), np.full(n, side), yaws, np.zeros(n), np.full(n, buttons), np.full(n, DT))
    vel = np.tile([vx, vy, 0.0], (n, 1))
    og = np.full(n, ground)
    pos = np.tile([-20.0, 0.0, 0.0 if ground else 1.0], (n, 1))
    res = simulate(pos, vel, og, np.zeros(n, dtype=np.int8), cmd, RIFLE_SPEED, wall_geometry, CFG)
    hs = np.hypot(res.vel[:, 0], res.vel[:, 1])
    bound = max_horizontal_speed(vel, og, cmd, RIFLE_SPEED, CFG)
    assert np.all(hs <= bound + 1e-9)
    assert hs.max() >= bound[0] * (1 - 1e-3) - 1e-9


@pytest.mark.parametrize("map_name", ["city", "corridors"])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_never_ends_inside_a_wall(map_name: str, seed: int, city_geometry: MapGeometry, corridors_geometry: MapGeometry) -> None:
    """64 players from the spawns with random inputs held for random spans, 400 ticks: never
    inside a wall after any tick, and never through one (the centre path stays clear)."""
    geometry = city_geometry if map_name == "city" else corridors_geometry
    rng = np.random.default_rng(seed)
    spawns = np.array([(s.x, s.y) for s in geometry.game_map.spawns])
    n = 64
    pos = np.column_stack([spawns[rng.integers(0, len(spawns), n)], np.zeros(n)])
    assert not geometry.circle_blocked(pos[:, :2]).any()
    vel, og, stance = np.zeros((n, 3)), np.ones(n, dtype=bool), np.zeros(n, dtype=np.int8)
    speed = WEAPONS[WeaponId.SMG].move_speed_m_s
    cmd = random_commands(rng, n)
    touches = 0
    for _ in range(400):
        # Hold inputs for a while so players actually reach walls and press along them.
        change = rng.random(n) < 0.05
        fresh = random_commands(rng, n)
        cmd = MoveCommands(
            np.where(change, fresh.forward_move, cmd.forward_move),
            np.where(change, fresh.side_move, cmd.side_move),
            np.where(change, fresh.yaw_deg, cmd.yaw_deg + rng.normal(0.0, 2.0, n)),
            cmd.pitch_deg,
            np.where(change, fresh.buttons, cmd.buttons),
            cmd.dt_s,
        )
        res = simulate(pos, vel, og, stance, cmd, speed, geometry, CFG)
        assert not geometry.circle_blocked(res.pos[:, :2]).any()
        probe = np.column_stack([pos[:, :2], np.full(n, 0.05)]), np.column_stack([res.pos[:, :2], np.full(n, 0.05)])
        assert geometry.los_clear(*probe).all()
        touches += int(res.touched_wall.sum())
        pos, vel, og, stance = res.pos, res.vel, res.on_ground, res.stance
    # They did run into walls and slide (the test would be vacuous otherwise).
    assert touches > 100
