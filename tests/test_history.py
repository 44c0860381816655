"""Tick history: exact records, interpolation rules, clamping and the ring buffer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lagcomp.config import HistoryConfig, LagCompConfig, RewindPolicy
from lagcomp.history import HistoryError, TickHistory
from world.state import WorldLimits, WorldState

DT = 1.0 / 64.0


def _world(n: int = 4) -> WorldState:
    state = WorldState(WorldLimits(max_players=n))
    for slot in range(n):
        state.activate(slot, weapon=1, ammo=7, reserve=35)
        state.spawn(slot, (10.0 + slot, 10.0, 0.0), 0.0)
    return state


def _recorded(positions: np.ndarray, yaws: np.ndarray | None = None) -> tuple[TickHistory, WorldState]:
    """History of len(positions) ticks of one moving player (slot 0) among 3 still ones."""
    state = _world()
    hist = TickHistory(HistoryConfig(), state.capacity)
    for k, p in enumerate(positions):
        state.pos[0] = p
        state.vel[0] = (k, -k, 0.5 * k)
        if yaws is not None:
            state.yaw[0] = yaws[k]
        state.pitch[0] = -10.0 + k
        hist.record(k, k * DT, state)
    return hist, state


def test_capacity_spans_the_configured_length() -> None:
    assert HistoryConfig().capacity == 65
    assert HistoryConfig(tick_rate_hz=128, length_s=1.5).capacity == 193
    with pytest.raises(ValueError):
        HistoryConfig(length_s=0.5)
    with pytest.raises(ValueError):
        LagCompConfig(history=HistoryConfig(length_s=1.0), policy=RewindPolicy(max_unlag_s=2.0))


def test_config_from_mapping_refuses_unknown_keys() -> None:
    cfg = LagCompConfig.from_mapping({"history": {"tick_rate_hz": 128}, "policy": {"max_unlag_s": 0.25}})
    assert cfg.history.tick_rate_hz == 128 and cfg.policy.max_unlag_s == 0.25
    with pytest.raises(ValueError, match="unknown"):
        LagCompConfig.from_mapping({"history": {"tickrate": 128}})


def test_exact_at_tick_boundaries() -> None:
    rng = np.random.default_rng(3)
    positions = rng.uniform(0, 50, (20, 3))
    yaws = rng.uniform(-180, 180, 20)
    hist, _ = _recorded(positions, yaws)
    times = np.arange(20) * DT
    rw = hist.rewind(times, np.array([0, 1]))
    assert rw.pos.shape == (20, 2, 3)
    np.testing.assert_array_equal(rw.pos[:, 0], positions)
    np.testing.assert_array_equal(rw.yaw[:, 0], yaws)
    np.testing.assert_array_equal(rw.vel[:, 0, 0], np.arange(20.0))
    np.testing.assert_array_equal(rw.pitch[:, 0], -10.0 + np.arange(20))
    assert rw.alive.all() and not rw.clamped.any()


def test_lerp_between_records_and_shortest_arc_yaw() -> None:
    positions = np.array([[0.0, 0.0, 0.0], [0.4, 0.8, 0.5], [0.4, 0.8, 0.5]])
    hist, _ = _recorded(positions, np.array([170.0, -170.0, -170.0]))
    rw = hist.rewind(np.array([0.25 * DT, 0.5 * DT]), np.array([0]))
    np.testing.assert_allclose(rw.pos[:, 0], [[0.1, 0.2, 0.125], [0.2, 0.4, 0.25]], atol=1e-12)
    np.testing.assert_allclose(rw.vel[:, 0], [[0.25, -0.25, 0.125], [0.5, -0.5, 0.25]], atol=1e-12)
    # 170 -> -170 crosses the seam: a quarter of the 20 degree arc is 175, half is the seam itself.
    assert rw.yaw[0, 0] == pytest.approx(175.0)
    assert rw.yaw[1, 0] == pytest.approx(-180.0)
    assert np.all((rw.yaw >= -180.0) & (rw.yaw < 180.0))


def test_never_extrapolates_and_clamps_to_the_oldest_record() -> None:
    positions = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.5, 0.0, 0.0]])
    hist, _ = _recorded(positions)
    rw = hist.rewind(np.array([-1.0, -1e-9, 10.0, 2 * DT + 1e-9]), np.array([0]))
    np.testing.assert_array_equal(rw.clamped, [True, True, False, False])
    np.testing.assert_array_equal(rw.pos[:, 0, 0], [0.0, 0.0, 1.5, 1.5])


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(*(st.floats(-0.3, 0.3, allow_nan=False) for _ in range(3))), min_size=2, max_size=80
    ),
    queries=st.lists(st.floats(-0.5, 2.0, allow_nan=False), min_size=1, max_size=20),
)
def test_rewound_position_lies_on_the_bracketing_segment(
    steps: list[tuple[float, float, float]], queries: list[float]
) -> None:
    positions = np.cumsum(np.array(steps), axis=0) + 50.0
    hist, _ = _recorded(positions)
    times = hist.times_s()
    q = np.array(queries)
    rw = hist.rewind(q, np.array([0]))
    kept = positions[-len(times):]
    for i, t in enumerate(q):
        p = rw.pos[i, 0]
        if t >= times[-1]:
            np.testing.assert_array_equal(p, kept[-1])
        elif t < times[0]:
            assert rw.clamped[i]
            np.testing.assert_array_equal(p, kept[0])
        else:
            k = int(np.searchsorted(times, t, side="right") - 1)
            a, b = kept[k], kept[k + 1]
            seg = b - a
            u = float(np.clip(np.dot(p - a, seg) / max(np.dot(seg, seg), 1e-300), 0.0, 1.0))
            assert np.linalg.norm(a + u * seg - p) <= 1e-9
            frac = (t - times[k]) / (times[k + 1] - times[k])
            np.testing.assert_allclose(p, a + frac * seg, atol=1e-9)


def test_no_interpolation_across_a_generation_change() -> None:
    state = _world()
    hist = TickHistory(HistoryConfig(), state.capacity)
    hist.record(0, 0.0, state)
    state.teleport(0, (12.0, 10.0, 0.0))  # 2 m: a short jump, but the generation says discontinuity
    hist.record(1, DT, state)
    rw = hist.rewind(np.array([0.5 * DT, DT]), np.array([0]))
    np.testing.assert_array_equal(rw.pos[0, 0], [10.0, 10.0, 0.0])
    np.testing.assert_array_equal(rw.pos[1, 0], [12.0, 10.0, 0.0])
    assert rw.generation[0, 0] + 1 == rw.generation[1, 0]
    assert rw.alive.all()


def test_no_interpolation_across_a_long_jump_without_generation_change() -> None:
    state = _world()
    hist = TickHistory(HistoryConfig(), state.capacity)
    hist.record(0, 0.0, state)
    state.pos[0, 0] += 1.7  # longer than 64 Source units in one tick
    state.pos[1, 0] += 1.6  # shorter: interpolated
    hist.record(1, DT, state)
    rw = hist.rewind(np.array([0.5 * DT]), np.array([0, 1]))
    assert rw.pos[0, 0, 0] == 10.0
    assert rw.pos[0, 1, 0] == pytest.approx(11.0 + 0.8)


def test_dead_records_are_not_hittable_and_not_interpolated() -> None:
    state = _world()
    hist = TickHistory(HistoryConfig(), state.capacity)
    hist.record(0, 0.0, state)
    state.pos[0] = (11.0, 10.0, 0.0)
    state.kill(0)
    hist.record(1, DT, state)
    state.spawn(0, (30.0, 30.0, 0.0), 90.0)
    hist.record(2, 2 * DT, state)
    state.deactivate(1)
    hist.record(3, 3 * DT, state)
    rw = hist.rewind(np.array([0.5 * DT, DT, 1.5 * DT, 2 * DT, 3 * DT]), np.array([0, 1]))
    # Alive at the older record of the pair: state as last known, not lerped towards the corpse.
    np.testing.assert_array_equal(rw.pos[0, 0], [10.0, 10.0, 0.0])
    np.testing.assert_array_equal(rw.alive[:, 0], [True, False, False, True, True])
    np.testing.assert_array_equal(rw.pos[3, 0], [30.0, 30.0, 0.0])
    np.testing.assert_array_equal(rw.alive[:, 1], [True, True, True, True, False])


def test_ring_wraps_around() -> None:
    state = _world(2)
    cfg = HistoryConfig()
    hist = TickHistory(cfg, 2)
    n = 3 * cfg.capacity + 7
    for k in range(n):
        state.pos[0, 0] = float(k)
        hist.record(k, k * DT, state)
    assert len(hist) == cfg.capacity
    assert hist.newest_tick == n - 1
    assert hist.oldest_time_s == pytest.approx((n - cfg.capacity) * DT)
    times = np.array([(n - 1) * DT, (n - 10.5) * DT, (n - cfg.capacity) * DT, 0.0])
    rw = hist.rewind(times, np.array([0]))
    np.testing.assert_allclose(rw.pos[:, 0, 0], [n - 1, n - 10.5, n - cfg.capacity, n - cfg.capacity])
    np.testing.assert_array_equal(rw.clamped, [False, False, False, True])
    assert hist.record_at(0).tick == n - cfg.capacity
    assert hist.record_at(-1).pos[0, 0] == n - 1


def test_record_refuses_bad_times_and_mismatched_state() -> None:
    state = _world()
    hist = TickHistory(HistoryConfig(), state.capacity)
    with pytest.raises(HistoryError):
        hist.rewind(np.array([0.0]))
    hist.record(0, 1.0, state)
    with pytest.raises(HistoryError):
        hist.record(1, 1.0, state)
    with pytest.raises(HistoryError):
        hist.record(1, float("nan"), state)
    with pytest.raises(HistoryError):
        hist.record(1, 2.0, _world(3))
    with pytest.raises(HistoryError):
        hist.rewind(np.array([np.nan]))
    with pytest.raises(HistoryError):
        hist.rewind(np.array([1.0]), np.array([7]))
    # The record is a copy: later changes to the world do not leak into the past.
    state.pos[0] = (99.0, 99.0, 0.0)
    assert hist.rewind(np.array([1.0])).pos[0, 0, 0] == 10.0


def test_rewind_all_slots_by_default() -> None:
    hist, state = _recorded(np.zeros((3, 3)))
    rw = hist.rewind(np.array([0.0, DT]))
    assert rw.pos.shape == (2, state.capacity, 3)
    assert rw.stance.shape == rw.generation.shape == (2, state.capacity)


def _numpy_link(h: TickHistory, j: int, i: int) -> np.ndarray:
    """Record j's 8 deltas towards record i as numpy computes them element-wise (the reference)."""
    from lagcomp.history import RING_PITCH, RING_VX, RING_VY, RING_VZ, RING_X, RING_Y, RING_YAW, RING_Z

    f = h.ring_view().f
    hit = h.ring_view().hittable
    gen = h.ring_view().generation
    dx = f[i, RING_X] - f[j, RING_X]
    dy = f[i, RING_Y] - f[j, RING_Y]
    jump = h.config.teleport_jump_m
    ok = hit[j] & hit[i] & (gen[j] == gen[i]) & (dx * dx + dy * dy <= jump * jump)
    rows = [dx, dy, f[i, RING_Z] - f[j, RING_Z], f[i, RING_VX] - f[j, RING_VX], f[i, RING_VY] - f[j, RING_VY],
            f[i, RING_VZ] - f[j, RING_VZ], (f[i, RING_YAW] - f[j, RING_YAW] + 180.0) % 360.0 - 180.0,
            f[i, RING_PITCH] - f[j, RING_PITCH]]
    return np.stack([np.where(ok, r, 0.0) for r in rows])


def test_record_stores_the_world_and_links_deltas_as_numpy_would() -> None:
    """Random worlds (respawns, teleports, deaths, wrapping yaws) through a small ring: every stored
    value and every delta is bit for bit what numpy's element-wise formulas give."""
    from lagcomp.history import RING_DELTA

    rng = np.random.default_rng(5)
    n = 9
    h = TickHistory(HistoryConfig(tick_rate_hz=16.0), n)  # 17 records: 40 wrap the ring
    w = WorldState(WorldLimits(max_players=n))
    for k in range(40):
        w.pos[:] = rng.uniform(-100.0, 100.0, (n, 3)) if k % 7 == 0 else w.pos + rng.normal(0.0, 0.3, (n, 3))
        w.vel[:] = rng.normal(0.0, 5.0, (n, 3))
        w.yaw[:] = rng.uniform(-180.0, 180.0, n)
        w.pitch[:] = rng.uniform(-89.0, 89.0, n)
        w.stance[:] = rng.integers(0, 2, n)
        w.alive[:] = rng.random(n) < 0.8
        w.active[:] = rng.random(n) < 0.9
        w.generation[:] += (rng.random(n) < 0.1).astype(np.uint32)
        before = h.ring_view() if len(h) else None
        j = (before.head - 1) % h.capacity if before is not None else -1
        h.record(k, k / 64.0, w)
        view = h.ring_view()
        i = (view.head - 1) % h.capacity
        stored = np.stack([w.pos[:, 0], w.pos[:, 1], w.pos[:, 2], w.vel[:, 0], w.vel[:, 1], w.vel[:, 2], w.yaw, w.pitch])
        assert view.f[i, :RING_DELTA].tobytes() == stored.tobytes()
        assert not view.f[i, RING_DELTA:].any()
        assert view.hittable[i].tolist() == (w.alive & w.active).tolist()
        assert view.stance[i].tolist() == w.stance.tolist() and view.generation[i].tolist() == w.generation.tolist()
        if j >= 0 and j != i:
            assert view.f[j, RING_DELTA:].tobytes() == _numpy_link(h, j, i).tobytes()
