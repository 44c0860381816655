"""The shots phase's helpers in the server core: fast paths that must give the bits of the
numpy expressions they replace (replays are compared byte for byte)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from server.core import _crosshairs
from world.state import view_direction


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
