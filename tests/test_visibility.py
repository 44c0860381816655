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


@pytest.mark.parametrize("map_name", ["corridors", "city"])
def test_piece_blocks_is_the_walks_own_clip(map_name: str) -> None:
    # The cached-occluder test must agree with the walk: every piece the walk reports stops the
    # ray, and a ray the walk finds clear is touched by no piece at all.
    from world.mapfile import builtin_map
    from world.ray_kernel import piece_blocks, walk

    geometry = MapGeometry(builtin_map(map_name))
    args = geometry.ray_args
    frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges = args[:7]
    n_pieces = n_box + cv_height.shape[0]
    marks = np.zeros(n_pieces, dtype=np.int64)
    rng = np.random.default_rng(3)
    x0, y0, x1, y1 = frame[0], frame[1], frame[2], frame[3]
    blocked = clear = 0
    for stamp in range(1, 3001):
        o = (rng.uniform(x0 + 1, x1 - 1), rng.uniform(y0 + 1, y1 - 1), rng.uniform(0.3, 2.0))
        e = (o[0] + rng.normal(0, 15), o[1] + rng.normal(0, 15), rng.uniform(0.0, 2.2))
        v = (e[0] - o[0], e[1] - o[1], e[2] - o[2])
        hit, piece = walk(*o, *v, 1.0, True, *args, marks, stamp)
        if piece >= 0:
            blocked += 1
            assert piece_blocks(piece, *o, *v, 1.0, frame, n_box, boxes, cv_height, cv_planes, cv_edges)
        elif hit == np.inf:
            clear += 1
            some = rng.integers(0, n_pieces, 40)
            assert not any(piece_blocks(int(p), *o, *v, 1.0, frame, n_box, boxes, cv_height, cv_planes, cv_edges)
                           for p in some)
    assert blocked > 300 and clear > 100


def test_cached_occluders_never_change_the_visible_sets() -> None:
    # A culler that remembers occluders over many refreshes sees exactly what a fresh one sees
    # (the cache only skips walks it can prove blocked), while most hidden samples come from it.
    from world.mapfile import builtin_map

    geometry = MapGeometry(builtin_map("city"))
    x0, y0, x1, y1 = builtin_map("city").bounds
    rng = np.random.default_rng(11)
    n = 24
    w = WorldState(WorldLimits(max_players=n))
    for slot in range(n):
        w.activate(slot, 1, 7, 35)
        w.spawn(slot, (rng.uniform(x0 + 2, x1 - 2), rng.uniform(y0 + 2, y1 - 2), 0.0), 0.0)
    kept = VisibilityCuller(VisibilityConfig(), geometry, n, 64)
    rtt = np.full(n, 0.08)
    for tick in range(12):
        step = rng.normal(0.0, 0.4, (n, 2))
        w.pos[:, :2] = np.clip(w.pos[:, :2] + step, [x0 + 1, y0 + 1], [x1 - 1, y1 - 1])
        w.vel[:, :2] = step * 16
        kept.refresh(tick, w, rtt, all_viewers=True)
        fresh = VisibilityCuller(VisibilityConfig(), geometry, n, 64)
        fresh.refresh(tick, w, rtt, all_viewers=True)
        assert np.array_equal(kept.visible, fresh.visible)
    assert kept.rays_cached > kept.rays_cast


def test_in_sight_is_line_of_sight_now_and_excludes_players_sent_only_by_prediction() -> None:
    culler, rtt = _culler(rtt_s=0.15)
    # B behind the wall's north end running north: sent (about to appear) but not in sight.
    moving = _world((20.0, 45.0), (40.0, 34.5), vel_b=(0.0, 6.0))
    culler.refresh(0, moving, rtt, all_viewers=True)
    assert culler.visible[0, 1] and not culler.in_sight[0, 1]
    # Standing still behind the wall: neither sent nor in sight.
    still = _world((20.0, 45.0), (40.0, 34.5))
    culler.refresh(1, still, rtt, all_viewers=True)
    assert not culler.visible[0, 1] and not culler.in_sight[0, 1]
    # Open ground: in sight both ways, and in sight is always a subset of sent.
    still.teleport(0, (20.0, 5.0, 0.0))
    still.teleport(1, (40.0, 5.0, 0.0))
    culler.refresh(2, still, rtt, all_viewers=True)
    assert culler.in_sight[0, 1] and culler.in_sight[1, 0]
    assert not (culler.in_sight & ~culler.visible).any()
    culler.forget(1)
    assert not culler.in_sight[:, 1].any() and not culler.in_sight[1].any()
