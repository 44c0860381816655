"""Movement model: speed limits, collision, gravity, stance speeds, friction (real MapGeometry)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from physics import movement, movement_kernel
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


# ------------------------------------------------------------------ compiled kernel

RESULT_FIELDS = ("pos", "vel", "on_ground", "stance", "crouch_pressed", "touched_wall")
needs_kernel = pytest.mark.skipif(not movement._KERNEL_EXACT, reason="movement kernel disabled on this platform")


def both_paths(
    pos: np.ndarray, vel: np.ndarray, og: np.ndarray, stance: np.ndarray, cmd: MoveCommands,
    speed: np.ndarray | float, geometry: object, cfg: MovementConfig = CFG,
) -> tuple[MoveResult, MoveResult]:
    """(vectorised numpy, compiled kernel) results of the same step, whatever the batch size."""
    state = movement._checked_state(pos, vel, og, stance, speed, len(cmd))
    vec = movement._simulate_vector(*state, cmd, geometry, cfg)  # type: ignore[arg-type]
    ker = movement._simulate_kernel(*state, cmd, geometry, cfg)  # type: ignore[arg-type]
    return vec, ker


def assert_identical(vec: MoveResult, ker: MoveResult) -> None:
    """Same dtypes, shapes and bytes (bit for bit, signs of zeros included)."""
    for name in RESULT_FIELDS:
        a, b = getattr(vec, name), getattr(ker, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        assert a.tobytes() == b.tobytes(), (name, a, b)


def assert_single_identical(vec: MoveResult, pos: np.ndarray, vel: np.ndarray, og: np.ndarray, stance: np.ndarray,
                            cmd: MoveCommands, speed: np.ndarray | float, geometry: MapGeometry, cfg: MovementConfig) -> None:
    """``simulate_one`` of each row (one command each) gives the batch's row bit for bit."""
    speeds = np.broadcast_to(np.asarray(speed, dtype=np.float64), (len(cmd),))
    for i in range(len(cmd)):
        one = MoveCommands.single(float(cmd.forward_move[i]), float(cmd.side_move[i]), float(cmd.yaw_deg[i]),
                                  int(cmd.buttons[i]), float(cmd.dt_s[i]), float(cmd.pitch_deg[i]))
        p, v, g, st, pressed = movement.simulate_one(tuple(pos[i].tolist()), tuple(vel[i].tolist()), bool(og[i]),
                                                     int(stance[i]), one, float(speeds[i]), geometry, cfg)
        assert np.array(p).tobytes() == vec.pos[i].tobytes() and np.array(v).tobytes() == vec.vel[i].tobytes()
        assert (g, st, pressed) == (bool(vec.on_ground[i]), int(vec.stance[i]), bool(vec.crouch_pressed[i]))


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(
    x=st.floats(allow_nan=False, allow_infinity=False) | st.floats(-20.0, 20.0),
    y=st.floats(allow_nan=False, allow_infinity=False) | st.floats(-20.0, 20.0) | st.floats(-1e-9, 1e-9),
)
def test_kernel_hypot_matches_numpy(x: float, y: float) -> None:
    with np.errstate(over="ignore"):
        expected = np.hypot(x, y)
        got = movement_kernel.primitives(np.zeros(1), np.array([[x, y]]), np.zeros((1, 2)))[3]
    assert got.tobytes() == np.array([expected]).tobytes()


def random_state(rng: np.random.Generator, geometry: MapGeometry, n: int) -> tuple[np.ndarray, ...]:
    """Positions near the spawns (outside walls), some airborne, random velocities and stances."""
    spawns = np.array([(s.x, s.y) for s in geometry.game_map.spawns])
    xy = spawns[rng.integers(0, len(spawns), n)]
    moved = xy + rng.uniform(-4.0, 4.0, (n, 2))
    ok = ~geometry.circle_blocked(moved)
    xy[ok] = moved[ok]
    air = rng.random(n) < 0.3
    pos = np.column_stack([xy, np.where(air, rng.uniform(0.0, 2.0, n), 0.0)])
    vel = np.column_stack([rng.uniform(-9.0, 9.0, (n, 2)), np.where(air, rng.uniform(-8.0, 8.0, n), 0.0)])
    return pos, vel, ~air, rng.integers(0, 2, n).astype(np.int8)


def held_commands(rng: np.random.Generator, n: int, prev: MoveCommands | None) -> MoveCommands:
    """Random commands held for spans (so players reach walls and slide along them): move values
    in and out of [-1, 1] and exact zeros, any buttons (JUMP, CROUCH, WALK, SPRINT, ...), a few
    durations; the yaw drifts every command."""
    if prev is None or rng.random() < 0.1:
        return MoveCommands(
            forward_move=rng.choice([0.0, 1.0, -1.0, 0.5]) * np.ones(n) if rng.random() < 0.5 else rng.uniform(-1.5, 1.5, n),
            side_move=np.where(rng.random(n) < 0.5, 0.0, rng.uniform(-1.5, 1.5, n)),
            yaw_deg=rng.uniform(-180.0, 180.0, n),
            pitch_deg=rng.uniform(-89.0, 89.0, n),
            buttons=rng.integers(0, 256, n),
            dt_s=np.full(n, rng.choice([1.0 / 128.0, DT, 1.0 / 32.0, 0.1])),
        )
    return MoveCommands(
        prev.forward_move, prev.side_move, prev.yaw_deg + rng.normal(0.0, 4.0, n), prev.pitch_deg,
        np.where(rng.random(n) < 0.05, prev.buttons ^ int(Buttons.JUMP), prev.buttons), prev.dt_s,
    )


def run_both_paths(
    geometry: MapGeometry, rng: np.random.Generator, n: int, steps: int, cfg: MovementConfig
) -> int:
    """Steps n players through both paths (and each player alone through ``simulate_one``),
    asserting identical results; returns the wall touches."""
    pos, vel, og, stance = random_state(rng, geometry, n)
    speed: np.ndarray | float = rng.uniform(0.0, 10.0, n) if rng.random() < 0.5 else float(rng.choice([0.0, RIFLE_SPEED, 9.5]))
    cmd = None
    touches = 0
    for _ in range(steps):
        cmd = held_commands(rng, n, cmd)
        if n == 1 and rng.random() < 0.5:
            cmd = MoveCommands.single(float(cmd.forward_move[0]), float(cmd.side_move[0]), float(cmd.yaw_deg[0]),
                                      int(cmd.buttons[0]), float(cmd.dt_s[0]), float(cmd.pitch_deg[0]))
        vec, ker = both_paths(pos, vel, og, stance, cmd, speed, geometry, cfg)
        assert_identical(vec, ker)
        assert_single_identical(vec, pos, vel, og, stance, cmd, speed, geometry, cfg)
        touches += int(vec.touched_wall.sum())
        pos, vel, og, stance = vec.pos, vec.vel, vec.on_ground, vec.stance
        if rng.random() < 0.03:
            vel = vel + rng.uniform(-6.0, 6.0, vel.shape)
    return touches


@needs_kernel
@pytest.mark.parametrize("map_name", ["corridors", "city"])
@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 40),
    sprint=st.sampled_from([1.0, 1.3]),
    air_cap=st.booleans(),
)
def test_kernel_matches_vectorised(
    map_name: str, seed: int, n: int, sprint: float, air_cap: bool, city_geometry: MapGeometry, corridors_geometry: MapGeometry
) -> None:
    """Random states and commands on the real maps, 100 commands: the compiled kernel and the
    numpy model give the same bits, whatever the inputs."""
    geometry = city_geometry if map_name == "city" else corridors_geometry
    cfg = MovementConfig(sprint_factor=sprint, air_speed_cap=air_cap)
    run_both_paths(geometry, np.random.default_rng(seed), n, 100, cfg)


@needs_kernel
@pytest.mark.parametrize("map_name", ["corridors", "city"])
def test_kernel_matches_vectorised_along_walls(map_name: str, city_geometry: MapGeometry, corridors_geometry: MapGeometry) -> None:
    """Fixed seeds that do slide along walls and into corners a lot (the property test above
    is not vacuous there)."""
    geometry = city_geometry if map_name == "city" else corridors_geometry
    touches = sum(run_both_paths(geometry, np.random.default_rng(seed), n, 150, CFG) for seed, n in ((1, 1), (2, 4), (3, 16)))
    assert touches > 100


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 20), sprint=st.sampled_from([1.0, 1.3]), air_cap=st.booleans())
def test_max_horizontal_speed_kernel_matches_numpy(seed: int, n: int, sprint: float, air_cap: bool) -> None:
    """The compiled bound and its numpy reference give the same bits: zero and tiny velocities,
    move values on and beyond the clip bounds, signed zeros, every button, several durations."""
    rng = np.random.default_rng(seed)
    cfg = MovementConfig(sprint_factor=sprint, air_speed_cap=air_cap)
    vel = rng.normal(0.0, 5.0, (n, 3)) * rng.choice([0.0, 1e-9, 1.0], (n, 1))
    vel = vel if rng.random() < 0.5 else vel[:, :2].copy()
    og = rng.random(n) < 0.6
    speed = rng.choice([0.0, RIFLE_SPEED, 6.0, 9.5, 100.0], n)
    cmd = MoveCommands(
        rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, 1.3], n), rng.choice([0.0, -0.0, 1.0, -1.0, 0.7], n),
        rng.uniform(-720.0, 720.0, n), np.zeros(n), rng.integers(0, 256, n), rng.choice([1.0 / 128.0, DT, 0.1, 1e-6], n),
    )
    got = max_horizontal_speed(vel, og, cmd, speed, cfg)
    want = movement._max_horizontal_speed_numpy(vel, og, speed, cmd, cfg)
    assert got.tobytes() == want.tobytes()


class BlockingGeometry:
    """Sweeps like the wrapped geometry but reports every slide end as inside a wall."""

    def __init__(self, inner: MapGeometry) -> None:
        self.inner = inner

    def sweep(self, p0: np.ndarray, p1: np.ndarray) -> object:
        return self.inner.sweep(p0, p1)

    def circle_blocked(self, p: np.ndarray) -> np.ndarray:
        return np.ones(len(p), dtype=bool)


def test_vectorised_slide_ending_in_a_wall_keeps_the_start(wall_geometry: MapGeometry) -> None:
    """The defensive 'ended inside a wall' branch of the numpy model: it keeps the start and stops
    the player."""
    geometry = BlockingGeometry(wall_geometry)
    n = 3
    pos = np.array([[4.58, 0.0, 0.0], [-20.0, 0.0, 0.0], [4.58, 1.0, 0.3]])
    vel = np.array([[6.0, 1.0, 0.0], [6.0, 0.0, 0.0], [5.0, -2.0, 1.0]])
    og = np.array([True, True, False])
    cmd = MoveCommands(np.ones(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=int), np.full(n, DT))
    res = movement._simulate_vector(*movement._checked_state(pos, vel, og, np.zeros(n), RIFLE_SPEED, n), cmd, geometry, CFG)  # type: ignore[arg-type]
    assert res.touched_wall.tolist() == [True, False, True]
    assert np.array_equal(res.pos[[0, 2], :2], pos[[0, 2], :2]) and not res.vel[[0, 2], :2].any()


class SievedGeometry:
    """The wrapped geometry's kernel tables without its edges in the sweep grid: sweeps pass
    through walls (a geometry bug), while the circle test still sees a centre inside one."""

    def __init__(self, inner: MapGeometry) -> None:
        args = list(inner.sweep_args)
        args[4] = np.zeros_like(args[4])  # cell_start: every cell empty
        self.sweep_args = tuple(args)


@needs_kernel
def test_kernel_slide_ending_in_a_wall_keeps_the_start(caplog: pytest.LogCaptureFixture) -> None:
    """The kernel's 'ended inside a wall' branch: a player inside a footprint that reaches the
    bounds hits the bounds, slides on along them (the sieved sweep sees no wall) and ends inside
    the footprint: it keeps its start, stops and the kernel says so."""
    block = Wall("b", ((-10.0, -49.9), (10.0, -49.9), (10.0, 0.0), (-10.0, 0.0)), 4.0)
    geometry = SievedGeometry(MapGeometry(GameMap(name="block", bounds=(-50.0, -50.0, 50.0, 50.0), walls=(block,), spawns=())))
    pos = np.array([[0.0, -49.55, 0.0], [-20.0, 20.0, 0.0]])
    vel = np.array([[3.0, -3.0, 0.0], [3.0, 0.0, 0.0]])
    cmd = MoveCommands(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2, dtype=int), np.full(2, DT))
    state = movement._checked_state(pos, vel, np.ones(2, dtype=bool), np.zeros(2), RIFLE_SPEED, 2)
    with caplog.at_level("WARNING", logger="physics.movement"):
        res = movement._simulate_kernel(*state, cmd, geometry, MovementConfig(friction=0.0))  # type: ignore[arg-type]
    assert res.touched_wall.tolist() == [True, False]
    assert np.array_equal(res.pos[0, :2], pos[0, :2]) and not res.vel[0, :2].any()
    assert res.pos[1, 0] > pos[1, 0]
    assert "inside a wall for 1 players" in caplog.text


def test_simulate_picks_the_kernel_when_exact(wall_geometry: MapGeometry, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> MoveResult:
        raise AssertionError("wrong path")

    for n in (1, 16, 17, 64):
        with monkeypatch.context() as m:
            m.setattr(movement, "_simulate_vector", refuse)
            m.setattr(movement, "_KERNEL_EXACT", True)
            cmd = MoveCommands(np.ones(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=int), np.full(n, DT))
            res = simulate(np.tile([-20.0, 0.0, 0.0], (n, 1)), np.zeros((n, 3)), np.ones(n, dtype=bool), np.zeros(n), cmd, RIFLE_SPEED, wall_geometry)
            assert res.pos.shape == (n, 3)
    with monkeypatch.context() as m:  # a platform whose primitives differ: always the numpy model
        m.setattr(movement, "_simulate_kernel", refuse)
        m.setattr(movement, "_KERNEL_EXACT", False)
        simulate(np.array([[-20.0, 0.0, 0.0]]), np.zeros((1, 3)), [True], [0], MoveCommands.single(1.0), RIFLE_SPEED, wall_geometry)
        p, v, g, st, pressed = movement.simulate_one((-20.0, 0.0, 0.0), (0.0, 0.0, 0.0), True, 0, MoveCommands.single(1.0), RIFLE_SPEED, wall_geometry)
        assert p[0] > -20.0 and g and st == 0 and not pressed


@pytest.mark.parametrize(
    ("pos", "vel", "og", "stance", "speed"),
    [
        (np.zeros((1, 2)), np.zeros((1, 3)), [True], [0], RIFLE_SPEED),
        (np.zeros((2, 3)), np.zeros((2, 3)), [True], [0], RIFLE_SPEED),
        (np.array([[0.0, np.inf, 0.0]]), np.zeros((1, 3)), [True], [0], RIFLE_SPEED),
        (np.zeros((1, 3)), np.array([[0.0, 0.0, np.nan]]), [True], [0], RIFLE_SPEED),
        (np.array([[np.inf, -np.inf, 0.0]]), np.zeros((1, 3)), [True], [0], RIFLE_SPEED),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True, False], [0], RIFLE_SPEED),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True], [0, 1], RIFLE_SPEED),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True], [0], -1.0),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True], [0], np.nan),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True], [0], np.array([np.inf])),
        (np.zeros((1, 3)), np.zeros((1, 3)), [True], [0], np.array([1.0, 2.0])),
    ],
)
def test_bad_state_is_refused(
    pos: np.ndarray, vel: np.ndarray, og: list[bool], stance: list[int], speed: object, wall_geometry: MapGeometry
) -> None:
    with pytest.raises(ValueError):
        simulate(pos, vel, og, stance, MoveCommands.single(1.0), speed, wall_geometry)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pos", "vel", "speed", "message"),
    [
        ((0.0, np.inf, 0.0), (0.0, 0.0, 0.0), RIFLE_SPEED, "NaN or inf"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, np.nan), RIFLE_SPEED, "NaN or inf"),
        ((np.inf, -np.inf, 0.0), (0.0, 0.0, 0.0), RIFLE_SPEED, "NaN or inf"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), -1.0, "weapon_speed"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), np.nan, "weapon_speed"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), np.inf, "weapon_speed"),
    ],
)
def test_simulate_one_refuses_bad_state(
    pos: tuple[float, float, float], vel: tuple[float, float, float], speed: float, message: str, wall_geometry: MapGeometry
) -> None:
    with pytest.raises(ValueError, match=message):
        movement.simulate_one(pos, vel, True, 0, MoveCommands.single(1.0), speed, wall_geometry)
    cmd = MoveCommands(np.ones(2), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2, dtype=int), np.full(2, DT))
    with pytest.raises(ValueError, match="batch of one"):
        movement.simulate_one((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), True, 0, cmd, RIFLE_SPEED, wall_geometry)


def test_huge_finite_state_is_accepted(wall_geometry: MapGeometry) -> None:
    """The finite-sum shortcut of the checks overflows here; finite values still pass."""
    pos, vel = (1e308, 1e308, 0.0), (1e308, 1e308, 1e308)
    movement._checked_state(np.array([pos]), np.array([vel]), [True], [0], RIFLE_SPEED, 1)
    movement.simulate_one(pos, vel, True, 0, MoveCommands.single(), RIFLE_SPEED, wall_geometry)


@pytest.mark.parametrize(
    "args",
    [
        (1.0, 0.0, 30.0, 0, DT, 0.0),
        (0, -1, 720, int(Buttons.JUMP | Buttons.CROUCH), 1, -89),
        (np.float64(0.25), 2.5, -10.0, Buttons.WALK, 0.1, 5.0),
        (True, False, 0.0, True, 1e-9, 0.0),
        (1e308, 1e308, 0.0, 255, DT, 0.0),
        (np.float32(0.5), np.int64(1), 3.0, np.int64(2), DT, 0.0),
    ],
)
def test_single_equals_full_constructor(args: tuple) -> None:
    fwd, side, yaw, buttons, dt, pitch = args
    fast = MoveCommands.single(fwd, side, yaw, buttons, dt, pitch)
    full = MoveCommands(np.array([fwd]), np.array([side]), np.array([yaw]), np.array([pitch]), np.array([int(buttons)]), np.array([dt]))
    for name in ("forward_move", "side_move", "yaw_deg", "pitch_deg", "buttons", "dt_s"):
        a, b = getattr(fast, name), getattr(full, name)
        assert a.dtype == b.dtype and a.shape == b.shape == (1,) and a.tobytes() == b.tobytes(), name
    assert len(fast) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dt_s": -DT}, "dt_s must be positive"),
        ({"dt_s": 0}, "dt_s must be positive"),
        ({"buttons": -1}, "unknown bits"),
        ({"buttons": 256}, "unknown bits"),
        ({"side": np.nan}, "side_move contains NaN"),
        ({"pitch_deg": np.inf}, "pitch_deg contains NaN"),
        ({"forward": 1e308, "side": 1e308, "yaw_deg": np.inf}, "yaw_deg contains NaN"),
    ],
)
def test_single_refuses_like_the_full_constructor(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MoveCommands.single(**kwargs)


def test_batched_command_validation() -> None:
    """The constructor's checks on batches small and large (tolist / numpy branches)."""
    for n in (3, 40):
        ok = {"forward_move": np.zeros(n), "side_move": np.zeros(n), "yaw_deg": np.zeros(n), "pitch_deg": np.zeros(n),
              "buttons": np.full(n, 255), "dt_s": np.full(n, DT)}
        assert len(MoveCommands(**ok)) == n
        for field, bad, message in (
            ("dt_s", np.r_[np.full(n - 1, DT), 0.0], "positive"),
            ("buttons", np.r_[np.zeros(n - 1, dtype=int), -3], "unknown bits"),
            ("buttons", np.r_[np.zeros(n - 1, dtype=int), 1 << 9], "unknown bits"),
            ("buttons", np.zeros(n), "integers"),
            ("yaw_deg", np.r_[np.zeros(n - 1), np.nan], "NaN"),
            ("side_move", np.zeros(n + 1), "shape"),
        ):
            with pytest.raises(ValueError, match=message):
                MoveCommands(**{**ok, field: bad})


def test_from_block_equals_the_constructor_and_checks_the_same_things() -> None:
    rng = np.random.default_rng(2)
    n = 9
    block = np.vstack([
        np.full(n, DT), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-180, 180, n),
        rng.uniform(-89, 89, n), rng.choice([0, int(Buttons.JUMP), int(Buttons.CROUCH | Buttons.WALK)], n),
    ])
    fast = MoveCommands.from_block(block)
    slow = MoveCommands(block[1], block[2], block[3], block[4], block[5].astype(np.int64), block[0])
    for name in ("forward_move", "side_move", "yaw_deg", "pitch_deg", "buttons", "dt_s"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name))
    assert fast.buttons.dtype == np.int64
    for row, value in ((1, np.nan), (3, np.inf), (0, 0.0), (0, -DT), (5, 1 << 30), (5, 0.5), (5, -1.0)):
        bad = block.copy()
        bad[row, 4] = value
        with pytest.raises(ValueError):
            MoveCommands.from_block(bad)
    with pytest.raises(ValueError):
        MoveCommands.from_block(block[:5])
