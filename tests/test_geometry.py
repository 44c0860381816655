"""MapGeometry: exact 3D line of sight, ray distances, points, player circles and sweeps."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from world.constants import (
    CROUCHING_EYE_M,
    CROUCHING_HEIGHT_M,
    FULL_WALL_HEIGHT_M,
    LOW_COVER_HEIGHT_M,
    PLAYER_RADIUS_M,
    STANDING_EYE_M,
)
from world.geometry import SWEEP_SKIN_M, MapGeometry
from world.mapfile import GameMap, builtin_map, parse_map

R = PLAYER_RADIUS_M


def arena() -> GameMap:
    """40 x 30 m: a full wall box x 10-12, y 10-20; low cover x 20-21, y 10-20; an L-shaped
    full wall and a rotated low box for the non-box code paths."""
    return parse_map(
        {
            "format": "referee-map/1",
            "name": "arena",
            "bounds": [0, 0, 40, 30],
            "walls": [
                {"id": "full", "polygon": [[10, 10], [12, 10], [12, 20], [10, 20]], "height": FULL_WALL_HEIGHT_M},
                {"id": "low", "polygon": [[20, 10], [21, 10], [21, 20], [20, 20]], "height": LOW_COVER_HEIGHT_M},
                {"id": "ell", "polygon": [[30, 2], [38, 2], [38, 4], [32, 4], [32, 8], [30, 8]], "height": FULL_WALL_HEIGHT_M},
                {"id": "rot", "polygon": [[30, 20], [32, 22], [31, 23], [29, 21]], "height": LOW_COVER_HEIGHT_M},
                {"id": "tri", "polygon": [[3, 24], [8, 25], [4, 28]], "height": 2.5},
            ],
            "spawns": [{"id": "s1", "pos": [5, 5], "yaw": 0}],
        },
        source="arena",
    )


@pytest.fixture(scope="module")
def geo() -> MapGeometry:
    return MapGeometry(arena())


@pytest.fixture(scope="module")
def builtin_geos() -> dict[str, MapGeometry]:
    return {name: MapGeometry(builtin_map(name)) for name in ("open", "corridors", "city")}


def pts(*rows: tuple[float, ...]) -> np.ndarray:
    return np.array(rows, dtype=float)


def reference_los(game_map: GameMap, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Brute force with shapely, independent of MapGeometry: for every distinct wall height, the
    part of each segment at or below that height must not touch a wall of that height, and the
    segment must stay strictly inside the bounds."""
    heights = np.array([w.height for w in game_map.walls])
    polys = np.array([shapely.Polygon(w.polygon) for w in game_map.walls], dtype=object)
    inner = shapely.box(*game_map.bounds)
    clear = shapely.contains_properly(inner, shapely.linestrings(np.stack([p0[:, :2], p1[:, :2]], axis=1)))
    dz = p1[:, 2] - p0[:, 2]
    for h in np.unique(heights):
        union = shapely.union_all(polys[heights == h])
        with np.errstate(divide="ignore", invalid="ignore"):
            th = (h - p0[:, 2]) / dz
        lo = np.where(dz < 0, np.clip(th, 0, None), 0.0)
        hi = np.where(dz > 0, np.clip(th, None, 1.0), 1.0)
        flat_above = (dz == 0) & (p0[:, 2] > h)
        for i in np.flatnonzero(clear & (lo <= hi) & ~flat_above):
            a = p0[i, :2] + lo[i] * (p1[i, :2] - p0[i, :2])
            b = p0[i, :2] + hi[i] * (p1[i, :2] - p0[i, :2])
            piece = shapely.LineString([a, b]) if hi[i] > lo[i] else shapely.Point(a)
            if shapely.intersects(union, piece):
                clear[i] = False
    return clear


def random_free_points(geometry: MapGeometry, n: int, rng: np.random.Generator, radius: float = 0.05) -> np.ndarray:
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    p = rng.uniform((xmin, ymin), (xmax, ymax), size=(8 * n, 2))
    p = p[~geometry.circle_blocked(p, radius)]
    assert len(p) >= n
    return p[:n]


# ------------------------------------------------------------------------ line of sight


def test_full_wall_blocks(geo: MapGeometry) -> None:
    assert not geo.los_clear(pts((5, 15, STANDING_EYE_M)), pts((15, 15, STANDING_EYE_M)))[0]
    # Even at 3.9 m (a jump) a 4 m wall blocks.
    assert not geo.los_clear(pts((5, 15, 3.9)), pts((15, 15, 3.9)))[0]


def test_standing_eye_sees_standing_head_over_low_cover(geo: MapGeometry) -> None:
    assert geo.los_clear(pts((17, 15, STANDING_EYE_M)), pts((30, 15, STANDING_EYE_M)))[0]
    assert geo.los_clear(pts((19.5, 15, STANDING_EYE_M)), pts((21.5, 15, STANDING_EYE_M)))[0]


def test_crouching_eye_behind_low_cover_is_blocked(geo: MapGeometry) -> None:
    behind = 20 - R - 0.05
    assert not geo.los_clear(pts((behind, 15, CROUCHING_EYE_M)), pts((35, 15, STANDING_EYE_M)))[0]


def test_crouched_body_behind_low_cover_is_hidden_from_standing_eye(geo: MapGeometry) -> None:
    behind = 20 - R - 0.05
    assert not geo.los_clear(pts((35, 15, STANDING_EYE_M)), pts((behind, 15, CROUCHING_HEIGHT_M)))[0]
    # The same line to a standing player's eye passes over the cover.
    assert geo.los_clear(pts((35, 15, STANDING_EYE_M)), pts((behind, 15, STANDING_EYE_M)))[0]


def test_segment_above_a_wall_passes_over_it(geo: MapGeometry) -> None:
    assert geo.los_clear(pts((5, 15, 4.5)), pts((15, 15, 4.01)))[0]
    assert geo.los_clear(pts((15, 15, 1.25)), pts((25, 15, 1.3)))[0]
    # Just touching the top counts as blocked (solids are closed).
    assert not geo.los_clear(pts((15, 15, 1.2)), pts((25, 15, 1.2)))[0]


def test_segment_descending_onto_the_top_is_blocked(geo: MapGeometry) -> None:
    # Starts above the footprint and goes down through the top face, never through a side.
    assert not geo.los_clear(pts((11, 12, 4.5)), pts((11, 18, 3.5)))[0]
    assert geo.los_clear(pts((11, 12, 4.5)), pts((11, 18, 4.1)))[0]


def test_segment_along_but_outside_a_wall_is_clear(geo: MapGeometry) -> None:
    assert geo.los_clear(pts((9.999, 5, 1.0)), pts((9.999, 25, 1.0)))[0]
    assert geo.los_clear(pts((5, 9.99, 1.0)), pts((25, 9.99, 1.0)))[0]
    assert not geo.los_clear(pts((5, 10.0001, 1.0)), pts((25, 10.0001, 1.0)))[0]


def test_segments_against_non_box_walls(geo: MapGeometry) -> None:
    # The notch of the L is empty; its arms are solid.
    assert geo.los_clear(pts((35, 6, 1.0)), pts((33, 6, 1.0)))[0]
    assert not geo.los_clear(pts((35, 6, 1.0)), pts((31, 6, 1.0)))[0]
    assert not geo.los_clear(pts((35, 6, 1.0)), pts((35, 1, 1.0)))[0]
    # Rotated low box: blocked at 1.0 m, clear at 1.5 m.
    assert not geo.los_clear(pts((27, 21, 1.0)), pts((34, 22, 1.0)))[0]
    assert geo.los_clear(pts((27, 21, 1.5)), pts((34, 22, 1.5)))[0]


def test_degenerate_and_out_of_bounds_segments(geo: MapGeometry) -> None:
    assert geo.los_clear(pts((5, 5, 1.0)), pts((5, 5, 1.0)))[0]
    assert not geo.los_clear(pts((11, 15, 1.0)), pts((11, 15, 1.0)))[0]
    assert geo.los_clear(pts((11, 15, 4.5)), pts((11, 15, 6.0)))[0]  # vertical, above the wall
    assert not geo.los_clear(pts((11, 15, 4.5)), pts((11, 15, 1.0)))[0]  # vertical, into the top
    assert not geo.los_clear(pts((5, 5, 1.0)), pts((45, 5, 1.0)))[0]  # leaves the bounds
    assert not geo.los_clear(pts((-1, 5, 1.0)), pts((5, 5, 1.0)))[0]
    assert geo.los_clear(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0,)


def test_los_is_symmetric_and_batched(geo: MapGeometry) -> None:
    rng = np.random.default_rng(3)
    p0 = np.column_stack([random_free_points(geo, 500, rng), rng.uniform(0, 5, 500)])
    p1 = np.column_stack([random_free_points(geo, 500, rng), rng.uniform(0, 5, 500)])
    both = geo.los_clear(p0, p1)
    np.testing.assert_array_equal(both, geo.los_clear(p1, p0))
    np.testing.assert_array_equal(both[:7], geo.los_clear(p0[:7], p1[:7]))
    assert 0.1 < both.mean() < 0.9


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_los_agrees_with_shapely_brute_force(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    geometry = builtin_geos[name]
    rng = np.random.default_rng(11)
    n = 400
    a = random_free_points(geometry, n, rng)
    # Mix of long random segments and short ones (5-15 m) that often end near cover.
    b = random_free_points(geometry, n, rng)
    near = rng.uniform(size=n) < 0.5
    step = rng.normal(size=(n, 2))
    step *= (rng.uniform(5, 15, n) / np.linalg.norm(step, axis=1))[:, np.newaxis]
    b[near] = np.clip(a[near] + step[near], 0.5, geometry.game_map.bounds[2] - 0.5)
    # Heights from the floor to above the full walls: some segments pass over cover.
    p0 = np.column_stack([a, rng.uniform(0.0, 4.6, n)])
    p1 = np.column_stack([b, rng.uniform(0.0, 4.6, n)])
    ours = geometry.los_clear(p0, p1)
    ref = reference_los(geometry.game_map, p0, p1)
    np.testing.assert_array_equal(ours, ref)
    assert 0.05 < ours.mean() < 0.95  # both answers are exercised


# ---------------------------------------------------------------------- first_wall_hit


def test_first_wall_hit_box_face_distance(geo: MapGeometry) -> None:
    d = geo.first_wall_hit(pts((5, 15, 1.5), (5, 15, 1.5), (17, 15, 1.0)), pts((1, 0, 0), (2, 1, 0), (1, 0, 0)), 100.0)
    assert d[0] == pytest.approx(5.0, abs=1e-12)
    assert d[1] == pytest.approx(5.0 * math.hypot(1.0, 0.5), abs=1e-12)  # enters the face x = 10 at y = 17.5
    assert d[2] == pytest.approx(3.0, abs=1e-12)  # the low cover at x = 20


def test_first_wall_hit_through_the_top_and_from_inside(geo: MapGeometry) -> None:
    # Descending from z = 4.5 at y = 12 to 3.5 at y = 18 enters the top (z = 4) half way.
    d = geo.first_wall_hit(pts((11, 12, 4.5)), pts((0, 6, -1)), 100.0)
    assert d[0] == pytest.approx(0.5 * math.sqrt(37.0), abs=1e-12)
    assert geo.first_wall_hit(pts((11, 15, 1.0)), pts((1, 0, 0)), 100.0)[0] == 0.0
    assert geo.first_wall_hit(pts((11, 15, 6.0)), pts((0, 0, -1)), math.inf)[0] == pytest.approx(2.0)


def test_first_wall_hit_clear_and_bounds(geo: MapGeometry) -> None:
    o, d = pts((1, 5, 1.0)), pts((0, 1, 0))
    assert geo.first_wall_hit(o, d, 24.0)[0] == math.inf  # x = 1 runs clear up to the bounds
    assert geo.first_wall_hit(o, d, math.inf)[0] == pytest.approx(25.0)  # the bounds at y = 30
    assert geo.first_wall_hit(pts((5, 5, 1.0)), d, math.inf)[0] == pytest.approx(19.4)  # the triangle
    assert geo.first_wall_hit(pts((5, 5, 10.0)), pts((0, 0, 1)), math.inf)[0] == math.inf
    assert geo.first_wall_hit(pts((5, 5, 1.0)), pts((1, 0, 0)), np.array([4.9]))[0] == math.inf


@pytest.mark.parametrize("name", ["corridors", "city"])
def test_first_wall_hit_batches_are_the_numpy_formulation_bit_for_bit(
    builtin_geos: dict[str, MapGeometry], name: str
) -> None:
    """One compiled pass (checks, normalisation, walk) gives the bits of the numpy formulation:
    directions normalised by np.linalg.norm, walked by ``first_entries``, every 0 made +0.0. Rays
    from inside walls and from outside the bounds, vertical and level rays, unnormalised
    directions, finite and infinite limits, one limit for all or one per ray, arrays or lists."""
    from world.ray_kernel import first_entries

    def reference(o: np.ndarray, d: np.ndarray, limit: np.ndarray) -> np.ndarray:
        unit = d / np.linalg.norm(d, axis=1, keepdims=True)
        return first_entries(o, unit, np.array(limit, dtype=np.float64), False, *geometry._ray_args) + 0.0

    geometry = builtin_geos[name]
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    rng = np.random.default_rng(11)
    n = 400
    o = np.column_stack([rng.uniform(xmin - 5, xmax + 5, n), rng.uniform(ymin - 5, ymax + 5, n), rng.uniform(0, 6, n)])
    d = rng.normal(0.0, 1.0, (n, 3)) * rng.uniform(0.1, 30.0, (n, 1))
    d[::7, :2] = 0.0  # vertical
    d[1::7, 2] = 0.0  # level
    limit = rng.choice([0.0, 3.0, 40.0, math.inf], n)
    limit[::7] = np.where(limit[::7] == math.inf, 50.0, limit[::7])  # a vertical ray may not run forever
    want = reference(o, d, limit)
    assert geometry.first_wall_hit(o, d, limit).tobytes() == want.tobytes()
    assert geometry.first_wall_hit(o.tolist(), d.tolist(), limit.tolist()).tobytes() == want.tobytes()
    assert geometry.first_wall_hit(o, d, 25.0).tobytes() == reference(o, d, np.full(n, 25.0)).tobytes()
    # A fault anywhere in the batch is named by the general path.
    d[200] = 0.0
    with pytest.raises(ValueError, match="zero length"):
        geometry.first_wall_hit(o, d, limit)
    limit[3] = math.nan
    with pytest.raises(ValueError):
        geometry.first_wall_hit(o, rng.normal(0.0, 1.0, (n, 3)), limit)


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_first_wall_hit_consistent_with_los(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    geometry = builtin_geos[name]
    rng = np.random.default_rng(5)
    n = 400
    o = np.column_stack([random_free_points(geometry, n, rng), rng.uniform(0.0, 4.5, n)])
    d = rng.normal(size=(n, 3))
    d[:, 2] *= 0.1
    d /= np.linalg.norm(d, axis=1)[:, np.newaxis]
    length = rng.uniform(1.0, 80.0, n)
    dist = geometry.first_wall_hit(o, d, length)
    clear = geometry.los_clear(o, o + d * length[:, np.newaxis])
    np.testing.assert_array_equal(np.isinf(dist), clear)
    hit = np.flatnonzero(np.isfinite(dist) & (dist > 1e-4))
    assert len(hit) > 50
    eps = 1e-6
    before = geometry.los_clear(o[hit], o[hit] + d[hit] * (dist[hit] - eps)[:, np.newaxis])
    after = geometry.los_clear(o[hit], o[hit] + d[hit] * (dist[hit] + eps)[:, np.newaxis])
    assert before.all() and not after.any()


# ---------------------------------------------------------------------- points, circles


def test_point_in_wall(geo: MapGeometry) -> None:
    inside = geo.point_in_wall(pts((11, 15), (15, 15), (20.5, 15), (31, 6), (33, 6), (-1, 5), (40, 5)))
    np.testing.assert_array_equal(inside, [True, False, True, True, False, True, True])
    in3d = geo.point_in_wall(pts((11, 15, 3.9), (11, 15, 4.1), (20.5, 15, 1.0), (20.5, 15, 1.3), (15, 15, 0.5)))
    np.testing.assert_array_equal(in3d, [True, False, True, False, False])


def test_circle_blocked(geo: MapGeometry) -> None:
    centres = pts((10 - R - 0.01, 15), (10 - R + 0.01, 15), (5, 5), (R / 2, 5), (5, 30 - R - 0.001), (19.7, 15))
    np.testing.assert_array_equal(geo.circle_blocked(centres), [False, True, False, True, False, True])
    np.testing.assert_array_equal(geo.circle_blocked(pts((8, 15)), radius=2.5), [True])


# ------------------------------------------------------------------------------ sweep


def test_sweep_stops_at_a_box_face(geo: MapGeometry) -> None:
    res = geo.sweep(pts((5, 15)), pts((15, 15)))
    assert res.hit[0]
    np.testing.assert_allclose(res.normal[0], [-1.0, 0.0])
    assert res.fraction[0] == pytest.approx((10 - R - 5) / 10)
    np.testing.assert_allclose(res.end[0], [10 - R - SWEEP_SKIN_M, 15], atol=1e-12)
    assert not geo.circle_blocked(res.end)[0]


def test_sweep_stops_at_a_corner_with_a_radial_normal(geo: MapGeometry) -> None:
    # Moving along y = 9.8 towards +x grazes the box corner (10, 10) at distance 0.2 < R.
    res = geo.sweep(pts((5, 9.8)), pts((15, 9.8)))
    assert res.hit[0]
    contact_x = 10 - math.sqrt(R * R - 0.2 * 0.2)
    assert res.fraction[0] == pytest.approx((contact_x - 5) / 10)
    np.testing.assert_allclose(res.normal[0], [(contact_x - 10) / R, -0.2 / R], atol=1e-12)


def test_sweep_in_free_space_returns_p1_exactly(geo: MapGeometry) -> None:
    p0, p1 = pts((5, 5), (15.3, 25.1)), pts((6.123456789, 7.5), (18.7, 23.9))
    res = geo.sweep(p0, p1)
    assert not res.hit.any()
    np.testing.assert_array_equal(res.end, p1)
    np.testing.assert_array_equal(res.fraction, [1.0, 1.0])
    np.testing.assert_array_equal(res.normal, np.zeros((2, 2)))


def test_sweep_blocked_by_low_cover_and_bounds(geo: MapGeometry) -> None:
    res = geo.sweep(pts((17, 15), (5, 5)), pts((25, 15), (5, -5)))
    assert res.hit.all()
    np.testing.assert_allclose(res.normal, [[-1, 0], [0, 1]])
    np.testing.assert_allclose(res.end[1], [5, R + SWEEP_SKIN_M], atol=1e-12)


def test_sweep_never_tunnels_through_a_thin_wall() -> None:
    thin = parse_map(
        {
            "format": "referee-map/1",
            "name": "thin",
            "bounds": [0, 0, 20, 20],
            "walls": [{"id": "t", "polygon": [[10, 0.5], [10.01, 0.5], [10.01, 19.5], [10, 19.5]], "height": 0.5}],
            "spawns": [{"id": "s", "pos": [5, 5], "yaw": 0}],
        }
    )
    res = MapGeometry(thin).sweep(pts((9.5, 10)), pts((10.6, 10.3)))
    assert res.hit[0] and res.end[0, 0] < 10 - R


def test_sweep_into_an_acute_wedge_ends_free() -> None:
    # Two slabs meeting at (20, 15) at +-10 degrees: pushing out of one face touches the other.
    def slab(angle: float, side: float) -> list[list[float]]:
        # Inner face on the line through the apex; 0.3 m thick towards the outside.
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        far = (20 - 12 * c, 15 - 12 * s)
        n = (-s * 0.3 * side, c * 0.3 * side)
        return [[20, 15], [far[0], far[1]], [far[0] + n[0], far[1] + n[1]], [20 + n[0], 15 + n[1]]]

    wedge = parse_map(
        {
            "format": "referee-map/1",
            "name": "wedge",
            "bounds": [0, 0, 30, 30],
            "walls": [{"id": "a", "polygon": slab(10.0, -1.0), "height": 4}, {"id": "b", "polygon": slab(-10.0, 1.0), "height": 4}],
            "spawns": [{"id": "s", "pos": [3, 3], "yaw": 0}],
        }
    )
    geometry = MapGeometry(wedge)
    start = np.column_stack([np.full(51, 12.0), np.linspace(14.6, 15.4, 51)])
    res = geometry.sweep(start, start + pts((10.0, 0.0)))
    assert res.hit.all()
    assert not geometry.circle_blocked(res.end).any()
    assert (res.end[:, 0] > 13.0).all()  # moved in, not left at the start
    # On the centre line both arms are touched together, R / sin(10 deg) before the apex.
    assert res.end[25, 0] == pytest.approx(20.0 - R / math.sin(math.radians(10.0)), abs=0.01)


def _wall_union(geometry: MapGeometry) -> shapely.Geometry:
    walls = shapely.union_all([shapely.Polygon(w.polygon) for w in geometry.game_map.walls])
    shapely.prepare(walls)
    return walls


def _check_sweeps(geometry: MapGeometry, walls: shapely.Geometry, p0: np.ndarray, p1: np.ndarray) -> None:
    res = geometry.sweep(p0, p1)
    assert not geometry.circle_blocked(res.end).any()
    # The straight path actually travelled keeps the circle out of every wall (no tunnelling).
    moved = np.flatnonzero(np.any(res.end != p0, axis=1))
    paths = shapely.linestrings(np.stack([p0[moved], res.end[moved]], axis=1))
    assert (shapely.distance(walls, paths) >= R - 1e-9).all()
    free = ~res.hit
    np.testing.assert_array_equal(res.end[free], p1[free])
    assert ((res.fraction >= 0) & (res.fraction <= 1)).all()
    np.testing.assert_allclose(np.linalg.norm(res.normal[res.hit], axis=1), 1.0)


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_batched_sweeps_never_end_in_a_wall(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    geometry = builtin_geos[name]
    rng = np.random.default_rng(2)
    n = 3000
    p0 = random_free_points(geometry, n, rng, radius=R)
    step = rng.normal(size=(n, 2))
    step *= (rng.uniform(0, 10, n) / np.linalg.norm(step, axis=1))[:, np.newaxis]
    _check_sweeps(geometry, _wall_union(geometry), p0, p0 + step)


_FREE_STARTS = 2000


@functools.cache
def _prepared(name: str) -> tuple[MapGeometry, shapely.Geometry, np.ndarray]:
    """Geometry, wall union and free start points, built once: hypothesis runs every example of
    a test inside one fixture scope, so per-example work must stay small."""
    geometry = MapGeometry(arena() if name == "arena" else builtin_map(name))
    return geometry, _wall_union(geometry), random_free_points(geometry, _FREE_STARTS, np.random.default_rng(9), radius=R)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.integers(0, _FREE_STARTS - 1),
    angle=st.floats(0, 2 * math.pi),
    dist=st.floats(0, 10),
)
def test_sweep_property_end_is_free(start: int, angle: float, dist: float) -> None:
    geometry, walls, free = _prepared("city")
    p0 = free[start : start + 1]
    p1 = p0 + dist * np.array([[math.cos(angle), math.sin(angle)]])
    _check_sweeps(geometry, walls, p0, p1)


@settings(max_examples=60, deadline=None)
@given(
    x=st.floats(1, 39), y=st.floats(1, 29), dx=st.floats(-10, 10), dy=st.floats(-10, 10)
)
def test_sweep_property_on_the_arena(x: float, y: float, dx: float, dy: float) -> None:
    geometry, walls, _ = _prepared("arena")
    p0 = pts((x, y))
    if geometry.circle_blocked(p0)[0]:
        return
    _check_sweeps(geometry, walls, p0, p0 + pts((dx, dy)))


# ----------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_inputs_raise(geo: MapGeometry, bad: float) -> None:
    good3, bad3 = pts((5, 5, 1)), pts((5, bad, 1))
    good2, bad2 = pts((5, 5)), pts((bad, 5))
    with pytest.raises(ValueError, match="p1 contains NaN or inf"):
        geo.los_clear(good3, bad3)
    with pytest.raises(ValueError, match="origin"):
        geo.first_wall_hit(bad3, good3, 10.0)
    with pytest.raises(ValueError, match="direction"):
        geo.first_wall_hit(good3, bad3, 10.0)
    with pytest.raises(ValueError, match="p"):
        geo.point_in_wall(bad2)
    with pytest.raises(ValueError, match="p"):
        geo.circle_blocked(bad2)
    with pytest.raises(ValueError, match="p0"):
        geo.sweep(bad2, good2)
    with pytest.raises(ValueError, match="p1"):
        geo.sweep(good2, bad2)


def test_other_bad_inputs_raise(geo: MapGeometry) -> None:
    good3 = pts((5, 5, 1))
    with pytest.raises(ValueError, match="max_dist"):
        geo.first_wall_hit(good3, good3, math.nan)
    with pytest.raises(ValueError, match="max_dist"):
        geo.first_wall_hit(good3, good3, -1.0)
    with pytest.raises(ValueError, match="zero length"):
        geo.first_wall_hit(good3, pts((0, 0, 0)), 1.0)
    with pytest.raises(ValueError, match="same shape"):
        geo.los_clear(good3, pts((1, 1, 1), (2, 2, 2)))
    with pytest.raises(ValueError, match="shape"):
        geo.los_clear(pts((1, 1)), pts((1, 1)))
    with pytest.raises(ValueError, match="radius"):
        geo.circle_blocked(pts((5, 5)), radius=math.nan)


@pytest.mark.parametrize("cell", [1.0, 2.5, 9.0, 40.0])
def test_answers_do_not_depend_on_the_grid(builtin_geos: dict[str, MapGeometry], cell: float) -> None:
    ref = builtin_geos["city"]
    other = MapGeometry(ref.game_map, cell_size_m=cell)
    rng = np.random.default_rng(21)
    n = 1000
    o = np.column_stack([random_free_points(ref, n, rng), rng.uniform(0.0, 4.5, n)])
    d = rng.normal(size=(n, 3))
    d[:, 2] *= 0.05
    length = rng.uniform(1.0, 150.0, n)
    np.testing.assert_array_equal(ref.los_clear(o, o + d), other.los_clear(o, o + d))
    np.testing.assert_allclose(ref.first_wall_hit(o, d, length), other.first_wall_hit(o, d, length), rtol=0, atol=1e-9)


# ------------------------------------------------------------------------ small batches
#
# Sweeps of a few rows take a dedicated path (circle by circle with Python floats); rays of one
# row skip the array plumbing. They must answer exactly like large batches (more rows than any
# small path accepts), whatever the batch a query arrives in.

_LARGE = 300  # rows: past every small-batch path
_SPLITS = (1, 2, 3, 4, 5, 16, 17, 32, 100)


def _in_batches(fn, n: int, size: int, *arrays: np.ndarray) -> list[np.ndarray]:
    """fn over consecutive batches of ``size`` rows of ``arrays``; outputs concatenated."""
    outs = [fn(*(x[i : i + size] for x in arrays)) for i in range(0, n, size)]
    if isinstance(outs[0], np.ndarray):
        return [np.concatenate(outs)]
    return [np.concatenate([getattr(o, f) for o in outs]) for f in ("end", "fraction", "hit", "normal")]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == bool or b.dtype == bool:
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return a.shape == b.shape and bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


def _awkward_rays(geometry: MapGeometry, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Segments with the cases the kernels special-case: random and short ones, level ones at
    exactly a wall height, vertical and zero-length ones, origins on or outside the bounds,
    axis-aligned and 45 degree ones on a quarter-meter lattice (faces and grid lines exactly)."""
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    a = rng.uniform((xmin, ymin), (xmax, ymax), size=(n, 2))
    b = rng.uniform((xmin, ymin), (xmax, ymax), size=(n, 2))
    short = rng.uniform(size=n) < 0.3
    b[short] = a[short] + rng.normal(size=(int(short.sum()), 2)) * 3.0
    lattice = rng.uniform(size=n) < 0.3
    a[lattice] = np.round(a[lattice] * 4.0) / 4.0
    ang = rng.integers(0, 8, n) * (np.pi / 4.0)
    step = np.round(rng.uniform(0.25, 30.0, n) * 4.0)[:, np.newaxis] / 4.0
    b[lattice] = (a + step * np.column_stack([np.round(np.cos(ang), 12), np.round(np.sin(ang), 12)]))[lattice]
    za = rng.uniform(-0.5, 5.0, n)
    heights = np.array([0.0, LOW_COVER_HEIGHT_M, FULL_WALL_HEIGHT_M, CROUCHING_EYE_M, STANDING_EYE_M])
    snap = rng.uniform(size=n) < 0.3
    za[snap] = rng.choice(heights, int(snap.sum()))
    zb = np.where(rng.uniform(size=n) < 0.4, za, rng.uniform(-0.5, 5.0, n))
    vertical = rng.uniform(size=n) < 0.05
    b[vertical] = a[vertical]
    outside = rng.uniform(size=n) < 0.05
    a[outside] = rng.choice([xmin - 1.0, xmin, xmax], int(outside.sum()))[:, np.newaxis] * np.array([1.0, 0.0]) + a[outside] * np.array([0.0, 1.0])
    return np.column_stack([a, za]), np.column_stack([b, zb])


@pytest.mark.parametrize("name", ["open", "corridors", "city", "arena"])
def test_ray_answers_do_not_depend_on_the_batch(builtin_geos: dict[str, MapGeometry], geo: MapGeometry, name: str) -> None:
    geometry = geo if name == "arena" else builtin_geos[name]
    rng = np.random.default_rng(31)
    p0, p1 = _awkward_rays(geometry, _LARGE, rng)
    clear = geometry.los_clear(p0, p1)
    d = p1 - p0
    d[np.all(d == 0.0, axis=1)] = (0.0, 0.0, -1.0)
    limit = np.where(rng.uniform(size=_LARGE) < 0.2, np.inf, rng.uniform(0.0, 90.0, _LARGE))
    dist = geometry.first_wall_hit(p0, d, limit)
    dist_scalar = geometry.first_wall_hit(p0, d, 25.0)
    assert 0.05 < clear.mean() < 0.95 and np.isfinite(dist).mean() > 0.3
    for size in _SPLITS:
        assert _same_bits(_in_batches(geometry.los_clear, _LARGE, size, p0, p1)[0], clear), size
        assert _same_bits(_in_batches(geometry.first_wall_hit, _LARGE, size, p0, d, limit)[0], dist), size
        got = np.concatenate([geometry.first_wall_hit(p0[i : i + size], d[i : i + size], 25.0) for i in range(0, _LARGE, size)])
        assert _same_bits(got, dist_scalar), size
    # Every zero distance is +0.0 on every path.
    assert not np.signbit(dist[dist == 0.0]).any()


@pytest.mark.parametrize("name", ["open", "corridors", "city", "arena"])
@pytest.mark.parametrize("reach", [0.2, 3.0])
def test_small_sweep_batches_match_the_large_batch_path(
    builtin_geos: dict[str, MapGeometry], geo: MapGeometry, name: str, reach: float
) -> None:
    """Same end, fraction, hit and normal bit for bit, ties included: starts near walls (some
    touching the bounds), moves along 45 degree and axis directions, zero moves."""
    geometry = geo if name == "arena" else builtin_geos[name]
    rng = np.random.default_rng(17)
    p0 = random_free_points(geometry, _LARGE, rng, radius=R)
    snap = rng.uniform(size=_LARGE) < 0.3
    p0[snap] = np.round(p0[snap] * 4.0) / 4.0
    p0 = p0[~geometry.circle_blocked(p0)]
    n = len(p0)
    ang = np.where(rng.uniform(size=n) < 0.3, rng.integers(0, 8, n) * (np.pi / 4.0), rng.uniform(0.0, 2.0 * np.pi, n))
    step = rng.uniform(0.0, reach, n)[:, np.newaxis] * np.column_stack([np.cos(ang), np.sin(ang)])
    step[rng.uniform(size=n) < 0.05] = 0.0
    p1 = p0 + step
    whole = _in_batches(geometry.sweep, n, n, p0, p1)
    assert whole[2].any() and not whole[2].all()
    for size in _SPLITS:
        for got, want in zip(_in_batches(geometry.sweep, n, size, p0, p1), whole):
            assert _same_bits(got, want), size


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_rays_through_grid_corners_agree_with_shapely(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    """45 degree rays through exact corners of the broadphase grid (4 m). Rounding can put both
    crossings of a corner on the wrong side and skip the diagonal cell; the walk adds the
    neighbouring cell for crossings at a corner, the sampled paths do not depend on crossings."""
    geometry = builtin_geos[name]
    rng = np.random.default_rng(8)
    n = 1500
    width = geometry.game_map.bounds[2]
    corner = rng.integers(1, int(width / 4.0) - 1, size=(n, 2)) * 4.0
    sign = rng.choice([-1.0, 1.0], size=(n, 2))
    a = corner - rng.choice([0.5, 1.0, 1.5, 2.5], n)[:, np.newaxis] * sign
    b = a + (rng.uniform(2.0, 30.0, n) / math.sqrt(2.0))[:, np.newaxis] * sign
    keep = ((b > 0.5) & (b < width - 0.5)).all(axis=1)
    a, b = a[keep], b[keep]
    z = rng.uniform(0.2, 1.0, len(a))
    p0, p1 = np.column_stack([a, z]), np.column_stack([b, z])
    # Leave out segments that graze a footprint (a vertex on the line), where the rounding of the
    # footprint's own coordinates decides and shapely's intersects and distance can disagree.
    walls = shapely.union_all([shapely.Polygon(w.polygon) for w in geometry.game_map.walls])
    lines = shapely.linestrings(np.stack([a, b], axis=1))
    clean = shapely.intersects(walls, lines) == (shapely.distance(walls, lines) < 1e-9)
    p0, p1 = p0[clean], p1[clean]
    ref = reference_los(geometry.game_map, p0, p1)
    assert ref.sum() > 10 and (~ref).sum() > 10
    np.testing.assert_array_equal(geometry.los_clear(p0, p1), ref)  # the stretch walk
    for size in (1, 64):
        np.testing.assert_array_equal(_in_batches(geometry.los_clear, len(p0), size, p0, p1)[0], ref)


@pytest.mark.parametrize("name", ["corridors", "city"])
def test_sweeps_through_grid_corners_never_tunnel(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    """45 degree sweeps from a quarter-meter lattice through exact grid corners, one by one and
    batched: never into a wall (a skipped cell would hide its edges)."""
    geometry = builtin_geos[name]
    walls = _wall_union(geometry)
    rng = np.random.default_rng(4)
    n = 1200
    width = geometry.game_map.bounds[2]
    corner = rng.integers(1, int(width / 4.0) - 1, size=(n, 2)) * 4.0
    sign = rng.choice([-1.0, 1.0], size=(n, 2))
    p0 = corner - rng.choice([0.25, 0.5, 1.0, 1.5], n)[:, np.newaxis] * sign
    p0 = p0[~geometry.circle_blocked(p0)]
    p1 = p0 + rng.uniform(0.5, 6.0, len(p0))[:, np.newaxis] * sign[: len(p0)]
    _check_sweeps(geometry, walls, p0, p1)
    for i in range(0, len(p0), 7):
        _check_sweeps(geometry, walls, p0[i : i + 1], p1[i : i + 1])


def test_first_wall_hit_from_a_face_is_plus_zero(geo: MapGeometry) -> None:
    # On the face x = 12 of the full box, moving into it; on its corner; on the low cover's top.
    o = pts((12.0, 15.0, 1.0), (12.0, 20.0, 1.0), (20.5, 15.0, LOW_COVER_HEIGHT_M), (10.0, 10.0, 3.0))
    d = pts((-1.0, 0.0, 0.0), (-1.0, -1.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0))
    for size in (1, 2, 4):
        got = np.concatenate([geo.first_wall_hit(o[i : i + size], d[i : i + size], 10.0) for i in range(0, 4, size)])
        np.testing.assert_array_equal(got, np.zeros(4))
        assert not np.signbit(got).any()
    big = geo.first_wall_hit(np.repeat(o, 100, axis=0), np.repeat(d, 100, axis=0), 10.0)
    assert (big == 0.0).all() and not np.signbit(big).any()


def test_single_point_inputs_of_any_form(geo: MapGeometry) -> None:
    """(d,), (1, d), lists, other dtypes: the single-row fast paths answer like the general
    path, and bad single rows raise the same errors."""
    p0, p1 = [5.0, 15.0, 1.0], [15.0, 15.0, 1.0]
    for a, b in ((p0, p1), (np.array(p0), np.array(p1)), (np.array([p0]), np.array([p1])),
                 (np.array([p0], dtype=np.float32), np.array([p1], dtype=np.float32)), ([[5, 15, 1]], [[15, 15, 1]])):
        assert geo.los_clear(a, b).tolist() == [False]
        assert geo.first_wall_hit(a, np.asarray(b, dtype=float) - np.asarray(a, dtype=float), 100.0).tolist() == [5.0]
    o, d = np.array([[5.0, 15.0, 1.0]]), np.array([[1.0, 0.0, 0.0]])
    for limit in (100.0, 100, np.float64(100.0), np.array(100.0), np.array([100.0]), [100.0], math.inf):
        assert geo.first_wall_hit(o, d, limit).tolist() == [5.0]
    for limit in (4.0, np.array([4.0]), np.array([4.0], dtype=np.float32)):
        assert geo.first_wall_hit(o, d, limit).tolist() == [math.inf]
    with pytest.raises(ValueError, match="max_dist"):
        geo.first_wall_hit(o, d, np.array([math.nan]))
    for p in ([11.0, 15.0], np.array([11.0, 15.0]), np.array([[11.0, 15.0, 3.0]]), [[15.0, 15.0, 0.0]]):
        assert geo.point_in_wall(p).tolist() == geo.point_in_wall(np.array(p, dtype=float).reshape(1, -1)).tolist()
    assert geo.circle_blocked([10 - R + 0.01, 15.0]).tolist() == [True]
    assert geo.circle_blocked(np.array([10 - R - 0.01, 15.0])).tolist() == [False]
    res = geo.sweep([5.0, 15.0], [15.0, 15.0])
    assert res.end.shape == (1, 2) and res.hit.tolist() == [True]
    with pytest.raises(ValueError, match="p0 contains NaN or inf"):
        geo.los_clear(np.array([math.nan, 1.0, 1.0]), np.array([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="zero length"):
        geo.first_wall_hit(np.array([5.0, 5.0, 1.0]), np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="max_dist"):
        geo.first_wall_hit(np.array([5.0, 5.0, 1.0]), np.ones(3), -1.0)
    with pytest.raises(ValueError, match="p1 contains NaN or inf"):
        geo.sweep(np.array([5.0, 5.0]), np.array([math.inf, 5.0]))


@pytest.mark.parametrize("cell", [1.0, 2.5, 9.0, 40.0])
def test_small_batch_answers_do_not_depend_on_the_grid(builtin_geos: dict[str, MapGeometry], cell: float) -> None:
    ref = builtin_geos["city"]
    other = MapGeometry(ref.game_map, cell_size_m=cell)
    rng = np.random.default_rng(23)
    p0, p1 = _awkward_rays(ref, 200, rng)
    d = p1 - p0
    d[np.all(d == 0.0, axis=1)] = (0.0, 0.0, 1.0)
    for size in (1, 8, 40):
        for name, args in (("los_clear", (p0, p1)), ("first_wall_hit", (p0, d, 80.0))):
            got = [getattr(g, name)(*(x[i : i + size] if isinstance(x, np.ndarray) else x for x in args)) for g in (ref, other) for i in range(0, 200, size)]
            half = len(got) // 2
            assert _same_bits(np.concatenate(got[:half]), np.concatenate(got[half:])), (name, size)
    start = random_free_points(ref, 200, rng, radius=R)
    stop = start + rng.normal(size=(200, 2)) * 0.3
    for a, b in zip(_in_batches(ref.sweep, 200, 1, start, stop), _in_batches(other.sweep, 200, 1, start, stop)):
        assert _same_bits(a, b)


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_circle_blocked_agrees_with_shapely(builtin_geos: dict[str, MapGeometry], name: str) -> None:
    """The compiled circle test against shapely's dwithin on the walls' union: points anywhere
    (inside walls too) and points near edges, one by one and batched, radius up to the player's."""
    geometry = builtin_geos[name]
    walls = _wall_union(geometry)
    rng = np.random.default_rng(29)
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    n = 4000
    anywhere = np.column_stack([rng.uniform(xmin - 1.0, xmax + 1.0, n), rng.uniform(ymin - 1.0, ymax + 1.0, n)])
    edges = shapely.get_coordinates(shapely.get_rings(shapely.get_parts(walls)))
    near = edges[rng.integers(0, len(edges), n)] + rng.normal(0.0, R, (n, 2))
    pts = np.concatenate([anywhere, near])
    for radius in (None, 0.0, 0.5 * R, R):
        r = R if radius is None else radius
        inside = (pts[:, 0] > xmin + r) & (pts[:, 0] < xmax - r) & (pts[:, 1] > ymin + r) & (pts[:, 1] < ymax - r)
        want = ~inside | shapely.dwithin(walls, shapely.points(pts), r)
        np.testing.assert_array_equal(geometry.circle_blocked(pts, radius), want)
    one = [bool(geometry.circle_blocked(p)[0]) for p in pts[::97]]
    assert one == geometry.circle_blocked(pts[::97]).tolist()
