"""The compiled phantom tick (server.phantom_kernel) against its numpy reference: the same
phantoms, legs and draws, bit for bit, over seeded players walking real maps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from server.config import PhantomConfig
from server.phantom_kernel import reference_aim_angles
from server.phantoms import Phantoms
from world.constants import STANDING_CHEST_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.mapfile import builtin_map
from world.state import WorldLimits, WorldState

_STATE = ("shown", "pos", "vel", "yaw", "pitch", "weapon", "health", "serial", "leg_end", "expires", "next_place",
          "trail", "trail_n", "counters")


def _pair(geometry: MapGeometry, capacity: int, seed: int, config: PhantomConfig) -> tuple[Phantoms, Phantoms]:
    def make(compiled: bool) -> Phantoms:
        return Phantoms(config, geometry, capacity, 64.0, 4, np.random.default_rng(seed), (1, 2, 3, 4, 5),
                        6.1, 0.6, compiled=compiled)

    return make(True), make(False)


def _free_spot(geometry: MapGeometry, bounds: tuple[float, ...], rng: np.random.Generator) -> np.ndarray:
    xmin, ymin, xmax, ymax = bounds
    while True:
        p = rng.uniform((xmin, ymin), (xmax, ymax))
        if not geometry.circle_blocked(p[None, :])[0]:
            return p


@pytest.mark.parametrize(("map_name", "seed"), [("city", 3), ("corridors", 11)])
def test_kernel_ticks_equal_the_reference_bit_for_bit(map_name: str, seed: int) -> None:
    """Players walk, jump, die, respawn and leave (a slot freed and taken); every tick both
    implementations hold the same arrays, bit for bit, and their generators the same state."""
    game_map = builtin_map(map_name)
    geometry = MapGeometry(game_map)
    capacity = 8
    config = PhantomConfig(lifetime_s=2.0, gap_s=0.3)
    fast, ref = _pair(geometry, capacity, seed, config)
    rng = np.random.default_rng(seed + 100)
    world = WorldState(WorldLimits(max_players=capacity))
    for s in range(6):
        world.active[s] = world.alive[s] = True
        world.pos[s, :2] = _free_spot(geometry, game_map.bounds, rng)
    rtt = rng.uniform(0.02, 0.3, capacity)
    dt = 1.0 / 64.0
    checks = 0
    for tick in range(1, 640):
        now_s = tick * dt
        if tick % 24 == 0:
            # New headings, a jump now and then, a death or a respawn.
            for s in np.flatnonzero(world.active).tolist():
                heading = rng.uniform(0.0, 2.0 * math.pi)
                speed = rng.choice([0.0, 2.5, 6.1])
                world.vel[s, :2] = (speed * math.cos(heading), speed * math.sin(heading))
                world.pos[s, 2] = rng.choice([0.0, 0.0, 0.4])
            s = int(rng.integers(0, 6))
            world.alive[s] = not world.alive[s]
        if tick == 300:
            world.active[7] = world.alive[7] = True  # the phantoms' slot taken: 6 it is
            world.pos[7, :2] = _free_spot(geometry, game_map.bounds, rng)
        if tick == 450:
            world.active[7] = world.alive[7] = False
        live = world.active & world.alive
        world.pos[live, :2] = geometry.sweep(world.pos[live, :2], world.pos[live, :2] + world.vel[live, :2] * dt).end
        fast.update(tick, now_s, world, rtt)
        ref.update(tick, now_s, world, rtt)
        checks += int(fast.shown.sum())
        assert fast.slot == ref.slot
        for name in _STATE:
            got, want = getattr(fast._arrays, name), getattr(ref._arrays, name)
            assert np.array_equal(got, want), (tick, name, got, want)
            assert got.tobytes() == want.tobytes(), (tick, name)
        assert fast._rng.bit_generator.state == ref._rng.bit_generator.state, tick
    # Every path ran: placements, legs ended, removals early and at the end of a life.
    assert fast.placed >= 10 and fast.removed >= 3 and checks > 500
    assert fast._rng.random() == ref._rng.random()


def test_no_viewer_draws_nothing_and_a_disabled_config_does_nothing() -> None:
    geometry = MapGeometry(builtin_map("corridors"))
    world = WorldState(WorldLimits(max_players=4))
    fast, _ = _pair(geometry, 4, 5, PhantomConfig())
    before = fast._rng.bit_generator.state
    for tick in range(20):
        fast.update(tick, tick / 64.0, world, np.zeros(4))
    assert fast._rng.bit_generator.state == before and not fast.shown.any() and fast.slot == 3
    off, _ = _pair(geometry, 4, 5, PhantomConfig(enabled=False))
    world.active[0] = world.alive[0] = True
    for tick in range(20):
        off.update(tick, tick / 64.0, world, np.zeros(4))
    assert off.slot is None and off.placed == 0


def test_aim_angles_equal_the_reference_bit_for_bit() -> None:
    """The angle from each command's view to its player's phantom's chest, against numpy's."""
    from server.phantom_kernel import aim_angles, reference_aim_angles
    from world.constants import STANDING_CHEST_M

    rng = np.random.default_rng(9)
    for _ in range(50):
        capacity, k = 8, int(rng.integers(1, 20))
        shown = rng.random(capacity) < 0.7
        pos = rng.uniform(-40.0, 40.0, (capacity, 3))
        pos[:, 2] = rng.choice([0.0, 0.3], capacity)
        slots = rng.integers(0, capacity, k).astype(np.intp)
        eye = pos[slots] + rng.normal(0.0, 3.0, (k, 3))
        eye[: k // 4] = pos[slots[: k // 4]] + (0.0, 0.0, STANDING_CHEST_M)  # at the chest: distance 0
        rad = np.radians(rng.uniform(-180.0, 180.0, (2, 40)))
        views = np.empty((2, 2, 40))
        np.cos(rad, out=views[0])
        np.sin(rad, out=views[1])
        a = int(rng.integers(0, 40 - k + 1))
        cos_sin = views[:, :, a : a + k]
        want = reference_aim_angles(slots, eye, cos_sin, shown, pos, STANDING_CHEST_M)
        got = np.empty(k)
        (cy, cp), (sy, sp) = cos_sin
        aim_angles(slots, eye, cy, cp, sy, sp, shown, pos, STANDING_CHEST_M, got)
        assert got.tobytes() == want.tobytes()


def test_aim_at_a_view_time_measures_to_the_phantom_where_the_client_drew_it() -> None:
    """A client renders the world a round trip and its interpolation late: the angle at a view
    time is to where the phantom was then (linear between two ticks), and a view time before its
    placement names no phantom. Checked against positions kept by hand every tick."""
    game_map = builtin_map("corridors")
    geometry = MapGeometry(game_map)
    capacity = 4
    ph = Phantoms(PhantomConfig(lifetime_s=3.0, gap_s=0.3), geometry, capacity, 64.0, 4, np.random.default_rng(5),
                  (1, 2, 3), 6.1, 0.6, history_s=1.0)
    rng = np.random.default_rng(6)
    world = WorldState(WorldLimits(max_players=capacity))
    world.active[0] = world.alive[0] = True
    world.pos[0, :2] = _free_spot(geometry, game_map.bounds, rng)
    rtt = np.full(capacity, 0.3)
    dt = 1.0 / 64.0
    kept: dict[int, tuple[int, np.ndarray]] = {}
    tick = 0
    # Until a phantom has been shown for 40 ticks.
    while not (ph.shown[0] and 0 < kept.get(tick - 40, (0, None))[0] == int(ph.serial[0])):
        tick += 1
        ph.update(tick, tick * dt, world, rtt)
        kept[tick] = (int(ph.serial[0]) if ph.shown[0] else 0, ph.pos[0].copy())
        assert tick < 2000
    eye = world.pos[:1].copy()
    eye[:, 2] += STANDING_EYE_M
    slots = np.zeros(1, dtype=np.intp)
    view = np.array([[[1.0], [1.0]], [[0.0], [0.0]]])  # yaw 0, pitch 0
    on = np.ones(1, dtype=bool)

    def want(feet: np.ndarray) -> float:
        return float(reference_aim_angles(slots, eye, view, on, feet[None, :], STANDING_CHEST_M)[0])

    then = tick - 30
    assert float(np.hypot(*(kept[tick][1] - kept[then][1])[:2])) > 0.5  # it walked: now and then differ
    serial, now_deg = ph.aim(slots, eye, view)
    assert serial == [kept[tick][0]] and now_deg[0] == pytest.approx(want(kept[tick][1]), abs=1e-9)
    serial, then_deg = ph.aim(slots, eye, view, np.array([then * dt]))
    assert serial == [kept[then][0]] and then_deg[0] == pytest.approx(want(kept[then][1]), abs=1e-9)
    assert abs(now_deg[0] - then_deg[0]) > 0.1
    # Half-way between two ticks: half-way between the two positions.
    _, mid_deg = ph.aim(slots, eye, view, np.array([(then + 0.5) * dt]))
    assert mid_deg[0] == pytest.approx(want((kept[then][1] + kept[then + 1][1]) / 2.0), abs=1e-9)
    # Just before its placement the client drew the phantom before, or none.
    first = min(t for t, (s, _) in kept.items() if s == kept[tick][0])
    serial, deg = ph.aim(slots, eye, view, np.array([(first - 1) * dt]))
    assert serial == [kept[first - 1][0] or None]
    assert serial != [None] or deg == [180.0]
