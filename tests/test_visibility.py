"""Visibility culling: walls hide, low cover hides crouchers, and movement is predicted."""

from __future__ import annotations

import numpy as np
import pytest

from server.config import VisibilityConfig
from server.visibility import VisibilityCuller
from tests.server_harness import arena_map
from world.constants import STANCE_CROUCHING
from world.geometry import MapGeometry
from world.state import WorldState, WorldLimits

WALL = {"id": "w", "polygon": [[29, 10], [31, 10], [31, 40], [29, 40]], "height": 4.0}
COVER = {"id": "c", "polygon": [[29, 45], [31, 45], [31, 55], [29, 55]], "height": 1.2}


def _world(a: tuple[float, float], b: tuple[float, float], vel_b=(0.0, 0.0)) -> WorldState:
    w = WorldState(WorldLimits(max_players=4))
    for slot, xy in ((0, a), (1, b)):
        w.activate(slot, 1, 7, 35)
        w.spawn(slot, (xy[0], xy[1], 0.0), 0.0)
    w.vel[1, :2] = vel_b
    return w


def _culler(rtt_s: float = 0.1) -> tuple[VisibilityCuller, np.ndarray]:
    geo = MapGeometry(arena_map([WALL, COVER]))
    return VisibilityCuller(VisibilityConfig(), geo, 4, 64), np.full(4, rtt_s)


def test_wall_hides_and_open_ground_shows() -> None:
    culler, rtt = _culler()
    w = _world((20.0, 25.0), (40.0, 25.0))
    culler.refresh(0, w, rtt, all_viewers=True)
    assert not culler.visible[0, 1] and not culler.visible[1, 0]
    w.teleport(0, (20.0, 5.0, 0.0))
    w.teleport(1, (40.0, 5.0, 0.0))  # both south of the wall's end (y = 10)
    culler.refresh(1, w, rtt, all_viewers=True)
    assert culler.visible[0, 1] and culler.visible[1, 0]


def test_low_cover_hides_a_crouching_player_but_not_a_standing_one() -> None:
    culler, rtt = _culler()
    w = _world((20.0, 50.0), (31.5, 50.0))
    culler.refresh(0, w, rtt, all_viewers=True)
    assert culler.visible[0, 1]
    w.stance[1] = STANCE_CROUCHING
    w.stance[0] = STANCE_CROUCHING
    culler.refresh(1, w, rtt, all_viewers=True)
    assert not culler.visible[0, 1]


def test_a_player_about_to_round_a_corner_is_sent_before_he_can_be_seen() -> None:
    culler, rtt = _culler(rtt_s=0.15)
    # A stands north-west of the wall's north end (y = 40); from A, B comes into sight once
    # B's y exceeds ~35.9. B stands at y = 34.5, hidden, running north at 6 m/s; the horizon
    # (round trip 0.15 + refresh 0.0625 + margin 0.1 s) covers 1.9 m of running.
    still = _world((20.0, 45.0), (40.0, 34.5))
    culler.refresh(0, still, rtt, all_viewers=True)
    assert not culler.visible[0, 1]
    assert not culler.geometry.los_clear(np.array([[20.0, 45.0, 1.64]]), np.array([[40.0, 34.5, 1.3]]))[0]
    moving = _world((20.0, 45.0), (40.0, 34.5), vel_b=(0.0, 6.0))
    culler.refresh(0, moving, rtt, all_viewers=True)
    assert culler.visible[0, 1]


def test_refresh_spreads_viewers_over_ticks() -> None:
    culler, rtt = _culler()
    w = _world((20.0, 5.0), (40.0, 5.0))
    assert culler.period_ticks == 4
    culler.refresh(1, w, rtt)  # slot 1's turn (1 % 4), slot 0 waits
    assert culler.visible[1, 0] and not culler.visible[0, 1]
    culler.refresh(4, w, rtt)
    assert culler.visible[0, 1]


@pytest.mark.parametrize("map_name", ["corridors", "city"])
def test_the_head_top_ray_stands_for_the_whole_centre_line(map_name: str) -> None:
    # The culler tests one ray per centre line: if any lower point of it is in sight, the top is.
    from world.mapfile import builtin_map

    game_map = builtin_map(map_name)
    geometry = MapGeometry(game_map)
    rng = np.random.default_rng(7)
    x0, y0, x1, y1 = game_map.bounds
    n = 20000
    eye = np.column_stack([rng.uniform(x0, x1, n), rng.uniform(y0, y1, n), rng.choice([1.05, 1.64], n)])
    feet = np.column_stack([eye[:, 0] + rng.normal(0, 12, n), eye[:, 1] + rng.normal(0, 12, n), np.zeros(n)])
    feet[:, 0] = np.clip(feet[:, 0], x0 + 0.5, x1 - 0.5)
    feet[:, 1] = np.clip(feet[:, 1], y0 + 0.5, y1 - 0.5)
    top = feet + np.array([0.0, 0.0, 1.75])
    top_clear = geometry.los_clear(eye, top)
    for z in (0.2, 0.7, 1.26, 1.5):
        lower_clear = geometry.los_clear(eye, feet + np.array([0.0, 0.0, z]))
        assert not np.any(lower_clear & ~top_clear)
    # Both outcomes occur, so the check is not vacuous (low cover hides lower points only).
    lower = geometry.los_clear(eye, feet + np.array([0.0, 0.0, 0.7]))
    assert top_clear.sum() > lower.sum() > 100
