"""The shots phase's helpers in the server core: fast paths that must give the bits of the
numpy expressions they replace (replays are compared byte for byte)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lagcomp.config import HistoryConfig
from lagcomp.history import HistoryError, TickHistory
from server.shots import crosshairs as _crosshairs
from world.state import WorldLimits, WorldState, view_direction


_ANGLE = st.floats(-720.0, 720.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_ANGLE, st.floats(-120.0, 120.0), st.floats(-10.0, 10.0), st.floats(-10.0, 10.0)),
                min_size=1, max_size=19))
def test_crosshairs_are_view_direction_bit_for_bit(aims: list[tuple[float, float, float, float]]) -> None:
    yaw = np.array([y - punch_yaw for y, _, _, punch_yaw in aims])
    pitch = np.array([min(90.0, max(-90.0, p + punch_pitch)) for _, p, punch_pitch, _ in aims])
    expected = np.asarray(view_direction(yaw, pitch), dtype=np.float64)
    got = _crosshairs(aims)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()


def test_history_feet_are_bracket_then_pairs_bit_for_bit() -> None:
    """The claimed victims' feet (TickHistory.feet): TickHistory.bracket and .pairs' values, clamps and wraps of the
    ring included, and the hittable flag of the record used."""
    rng = np.random.default_rng(8)
    n = 6
    state = WorldState(WorldLimits(max_players=n))
    for slot in range(n):
        state.activate(slot, weapon=1, ammo=10, reserve=40)
        state.spawn(slot, (float(slot), 0.0, 0.0), 0.0)
    history = TickHistory(HistoryConfig(), n)
    dt = 1.0 / 128.0
    for tick in range(400):  # more than the ring holds: it wraps
        state.pos[:n] += rng.normal(0.0, 0.05, (n, 3))
        if tick % 37 == 0:
            state.kill(int(rng.integers(n)))
        history.record(tick, tick * dt, state)
        if tick % 9:
            continue
        times = rng.uniform(-1.0, tick * dt + 0.1, int(rng.integers(1, 5)))
        slots = rng.integers(0, n, times.size).astype(np.intp)
        b = history.bracket(times)
        want = history.pairs(b.ring, b.frac, slots)
        pos, alive = history.feet(times.tolist(), slots.tolist())
        assert pos.tobytes() == want.pos.tobytes() and alive.tolist() == want.alive.tolist()
    with pytest.raises(HistoryError):
        history.feet([0.1, float("nan")], [0, 1])
    with pytest.raises(HistoryError):
        TickHistory(HistoryConfig(), n).feet([0.0], [0])
