"""Navigation graph: free nodes, clear edges, A* paths between spawns, smoothing, real cover."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import shapely

from bots.nav import NavCache, NavConfig, NavGraph
from world.constants import CROUCHING_HEIGHT_M, PLAYER_RADIUS_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.mapfile import builtin_map


@pytest.fixture(scope="module")
def graphs(city_geometry: MapGeometry, open_geometry: MapGeometry) -> dict[str, NavGraph]:
    corridors = MapGeometry(builtin_map("corridors"))
    return {"open": NavGraph(open_geometry), "corridors": NavGraph(corridors), "city": NavGraph(city_geometry)}


def _edges(g: NavGraph) -> tuple[np.ndarray, np.ndarray]:
    src = np.repeat(np.arange(len(g.nodes)), np.diff(g.indptr))
    return src, g.indices


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_nodes_are_free_and_edges_are_clear_moves(graphs: dict[str, NavGraph], name: str) -> None:
    g = graphs[name]
    geo = g.geometry
    assert len(g.nodes) > 1000
    assert not geo.circle_blocked(g.nodes).any()
    src, dst = _edges(g)
    assert len(src) == len(dst) > len(g.nodes)
    # Independent check with the physics' own sweep (the graph uses a distance test).
    assert not geo.sweep(g.nodes[src], g.nodes[dst]).hit.any()
    # Symmetric adjacency, weights = lengths.
    lengths = np.hypot(*(g.nodes[dst] - g.nodes[src]).T)
    assert np.allclose(g.weights, lengths)
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert all((b, a) in pairs for a, b in list(pairs)[:2000])


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_astar_joins_spawns_with_clear_segments(graphs: dict[str, NavGraph], name: str) -> None:
    g = graphs[name]
    spawns = g.geometry.game_map.spawns
    a = spawns[0]
    # The farthest spawn from the first one makes the longest search.
    b = max(spawns, key=lambda s: math.hypot(s.x - a.x, s.y - a.y))
    path = g.find_path((a.x, a.y), (b.x, b.y))
    assert path is not None and len(path) >= 1
    pts = np.array([(a.x, a.y)] + path)
    assert np.allclose(pts[-1], (b.x, b.y))
    assert not g.geometry.sweep(pts[:-1], pts[1:]).hit.any()
    assert not g.geometry.circle_blocked(pts).any()
    length = float(np.sum(np.hypot(*np.diff(pts, axis=0).T)))
    assert length >= math.hypot(b.x - a.x, b.y - a.y) - 1e-9


def test_every_spawn_reaches_every_other(graphs: dict[str, NavGraph]) -> None:
    for name, g in graphs.items():
        comps = {int(g.component[g.nearest_node((s.x, s.y))]) for s in g.geometry.game_map.spawns}
        assert len(comps) == 1, name


def test_astar_is_optimal_on_the_graph(graphs: dict[str, NavGraph]) -> None:
    """A* with the octile heuristic finds the same cost as Dijkstra (scipy) on the same graph."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    g = graphs["corridors"]
    n = len(g.nodes)
    mat = csr_matrix((g.weights, g.indices, g.indptr), shape=(n, n))
    rng = np.random.default_rng(0)
    main = np.flatnonzero(g.component == np.bincount(g.component).argmax())
    for _ in range(10):
        s, t = (int(v) for v in rng.choice(main, 2, replace=False))
        ids = g.astar(s, t)
        assert ids is not None and ids[0] == s and ids[-1] == t
        cost = sum(math.dist(g.nodes[i], g.nodes[j]) for i, j in itertools.pairwise(ids))
        best = dijkstra(mat, indices=s)[t]
        assert cost == pytest.approx(best, rel=1e-9)


def test_smoothing_shortens_paths_and_keeps_them_clear(graphs: dict[str, NavGraph]) -> None:
    g = graphs["open"]
    start, goal = (5.0, 5.0), (110.0, 100.0)
    raw = g.find_path(start, goal, smooth=False)
    smooth = g.find_path(start, goal, smooth=True)
    assert raw is not None and smooth is not None
    assert len(smooth) < len(raw)

    def length(p: list[tuple[float, float]]) -> float:
        pts = np.array([start] + p)
        return float(np.sum(np.hypot(*np.diff(pts, axis=0).T)))

    assert length(smooth) <= length(raw) + 1e-9
    pts = np.array([start] + smooth)
    assert not g.geometry.sweep(pts[:-1], pts[1:]).hit.any()


def test_unreachable_goal_gives_none() -> None:
    from world.mapfile import GameMap, Spawn, Wall

    # A wall across the whole map splits it in two.
    gm = GameMap(
        name="split", bounds=(0.0, 0.0, 20.0, 20.0),
        walls=(Wall("w", ((9.5, 0.0), (10.5, 0.0), (10.5, 20.0), (9.5, 20.0)), 4.0),),
        spawns=(Spawn("a", 2.0, 2.0, 0.0),),
    )
    g = NavGraph(MapGeometry(gm))
    assert g.find_path((2.0, 2.0), (18.0, 18.0)) is None
    assert g.find_path((2.0, 2.0), (8.0, 18.0)) is not None


def test_random_destinations_are_free_reachable_and_deterministic(graphs: dict[str, NavGraph]) -> None:
    g = graphs["city"]
    spawn = g.geometry.game_map.spawns[0]
    a = [g.random_destination(np.random.default_rng(5), near=(spawn.x, spawn.y)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = np.random.default_rng(6)
    dests = np.array([g.random_destination(rng, near=(spawn.x, spawn.y)) for _ in range(50)])
    assert not g.geometry.circle_blocked(dests).any()
    start = g.component[g.nearest_node((spawn.x, spawn.y))]
    assert all(g.component[g.nearest_node(d)] == start for d in dests)
    assert len({tuple(d) for d in dests}) > 40


@pytest.mark.parametrize("name", ["open", "city"])
def test_cover_points_are_hidden_from_the_threat(graphs: dict[str, NavGraph], name: str) -> None:
    g = graphs[name]
    geo = g.geometry
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
        pos = g.nodes[rng.integers(len(g.nodes))]
        threat = pos + rng.uniform(-15, 15, 2)
        if geo.circle_blocked(threat[None, :])[0]:
            continue
        spots = g.cover_points_near(pos, (threat[0], threat[1], 0.0))
        eye = np.array([threat[0], threat[1], STANDING_EYE_M])
        for sx, sy in spots:
            assert math.dist((sx, sy), pos) <= g.config.cover_search_m + 1e-9
            # A crouching body there: its head top, centre line and shoulders, all hidden.
            d = np.array([sx - eye[0], sy - eye[1]])
            right = np.array([d[1], -d[0]]) / max(np.hypot(*d), 1e-9)
            pts = []
            for side in (-1.0, -0.5, 0.0, 0.5, 1.0):
                for z in (0.3, 0.6, 0.9, CROUCHING_HEIGHT_M - 0.03):
                    xy = np.array([sx, sy]) + side * PLAYER_RADIUS_M * 0.95 * right
                    pts.append([xy[0], xy[1], z])
            pts_a = np.array(pts)
            assert not geo.los_clear(np.repeat(eye[None, :], len(pts_a), axis=0), pts_a).any()
            checked += 1
        if spots:
            dists = [math.dist(s, pos) for s in spots]
            assert dists == sorted(dists)
    assert checked > 20


def test_open_ground_is_not_cover(graphs: dict[str, NavGraph]) -> None:
    g = graphs["open"]
    # The open map's north-west corner is empty: nothing there hides from a threat 10 m away.
    assert g.cover_points_near((5.0, 115.0), (12.0, 110.0, 0.0)) == []


def test_city_graph_covers_the_map(city_geometry: MapGeometry) -> None:
    g = NavGraph(city_geometry)
    assert len(g.nodes) > 20000


def test_cache_builds_once_per_geometry(open_geometry: MapGeometry) -> None:
    cache = NavCache(NavConfig())
    a = cache.get(open_geometry)
    assert cache.get(open_geometry) is a
    other = MapGeometry(builtin_map("open"))
    assert cache.get(other) is not a


def test_nearest_node_prefers_reachable_nodes(graphs: dict[str, NavGraph]) -> None:
    g = graphs["corridors"]
    for node in g.nodes[:: max(1, len(g.nodes) // 50)]:
        p = node + np.array([0.3, -0.2])
        i = g.nearest_node(p)
        assert i is not None
        assert math.dist(g.nodes[i], p) < 2.0


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_moves_clear_agrees_with_shapely(graphs: dict[str, NavGraph], name: str) -> None:
    """The compiled clearance test against its definition (shapely's dwithin of the segment, or
    the point, to the walls' union): random moves of every length (inside walls too), points,
    and moves parallel to a wall's boundary at exactly the player radius."""
    g = graphs[name]
    r = g.geometry.player_radius
    walls = shapely.union_all([shapely.Polygon(w.polygon) for w in g.geometry.game_map.walls])
    rng = np.random.default_rng(31)
    xmin, ymin, xmax, ymax = g.geometry.game_map.bounds
    n = 3000
    a = np.column_stack([rng.uniform(xmin + r + 0.01, xmax - r - 0.01, n), rng.uniform(ymin + r + 0.01, ymax - r - 0.01, n)])
    ang = rng.uniform(0.0, 2.0 * np.pi, n)
    b = a + rng.choice([0.0, 0.5, 3.0, 20.0], n)[:, None] * np.column_stack([np.cos(ang), np.sin(ang)])
    rings = shapely.get_rings(shapely.get_parts(walls))
    segs = np.concatenate([np.column_stack([c[:-1], c[1:]]) for c in map(shapely.get_coordinates, rings)])
    s = segs[rng.integers(0, len(segs), n)]
    f = s[:, 2:] - s[:, :2]
    normal = np.column_stack([f[:, 1], -f[:, 0]]) / np.hypot(f[:, 0], f[:, 1])[:, None]
    side = rng.choice([-r, r], n)[:, None] * normal
    ga = s[:, :2] + rng.uniform(-0.5, 1.5, (n, 1)) * f + side
    gb = s[:, :2] + rng.uniform(-0.5, 1.5, (n, 1)) * f + side
    a, b = np.concatenate([a, ga]), np.clip(np.concatenate([b, gb]), [xmin, ymin], [xmax, ymax])
    inside = np.ones(len(a), dtype=bool)
    for p in (a, b):
        inside &= (p[:, 0] > xmin + r) & (p[:, 0] < xmax - r) & (p[:, 1] > ymin + r) & (p[:, 1] < ymax - r)
    same = np.all(a == b, axis=1)
    geoms = np.where(same, shapely.points(a), shapely.linestrings(np.stack([a, b], axis=1)))
    want = inside & ~shapely.dwithin(walls, geoms, r)
    np.testing.assert_array_equal(g.moves_clear(a, b), want)
    assert want.any() and not want.all()
