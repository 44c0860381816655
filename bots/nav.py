"""Navigation for bots: a grid graph of free cells over a map, A* paths, smoothing, cover.

A bot knows the map file like a real client, so it may plan on the walls' geometry. The graph is a
uniform grid (``NavConfig.cell_m``) whose nodes are cell centres where the player circle, grown by a
safety margin, touches no wall; edges join 8-connected neighbours when the player circle can sweep
straight from one centre to the other (:meth:`NavGraph.moves_clear`, the predicate of
``MapGeometry.sweep`` hitting nothing), so following any edge, and any smoothed shortcut (checked
the same way), never walks into a wall.

Build cost is a few vectorised geometry calls (about 0.3 s on the 200 x 200 m city map). Graphs
are cached per geometry object in a :class:`NavCache` owned by the caller.

Units: meters. Positions are (x, y) on the floor.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass

import numba
import numpy as np
import shapely

from world.constants import CROUCHING_HEIGHT_M, PLAYER_RADIUS_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.sweep_kernel import segment_distance

log = logging.getLogger(__name__)

_SQRT2 = math.sqrt(2.0)
_WALL_CELL_M = 2.0
"""Cell size (m) of the grid of wall boundary segments behind :meth:`NavGraph.moves_clear`."""
_WALL_PAD_M = 1e-3
"""Segments are listed in every cell within the player radius plus this (m): far above rounding."""
# Neighbour offsets; the first four are the "forward" half used to build each edge once.
_OFFSETS = ((1, 0), (0, 1), (1, 1), (1, -1), (-1, 0), (0, -1), (-1, -1), (-1, 1))


@numba.njit(cache=True, nogil=True)
def _astar(
    start: int, goal: int, xs: np.ndarray, ys: np.ndarray, indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Node indices of a shortest path from ``start`` to ``goal`` (A* with the octile heuristic,
    ties in the open heap broken by insertion order), empty when ``goal`` is not reached."""
    gx, gy = xs[goal], ys[goal]
    k = _SQRT2 - 2.0  # octile distance = dx + dy + (sqrt2 - 2) min(dx, dy)
    n = xs.shape[0]
    best = np.full(n, np.inf)
    parent = np.full(n, -1, dtype=np.int64)
    closed = np.zeros(n, dtype=np.bool_)
    best[start] = 0.0
    dx, dy = abs(xs[start] - gx), abs(ys[start] - gy)
    heap = [(dx + dy + k * (dx if dx < dy else dy), 0, start)]  # noqa: FURB136
    counter = 1
    while heap:
        _, _, cur = heapq.heappop(heap)
        if cur == goal:
            length = 1
            node = cur
            while parent[node] >= 0:
                node = parent[node]
                length += 1
            path = np.empty(length, dtype=np.int64)
            node = cur
            for i in range(length - 1, -1, -1):
                path[i] = node
                node = parent[node]
            return path
        if closed[cur]:
            continue
        closed[cur] = True
        g = best[cur]
        for e in range(indptr[cur], indptr[cur + 1]):
            nb = indices[e]
            ng = g + weights[e]
            if ng < best[nb]:
                best[nb] = ng
                parent[nb] = cur
                dx, dy = abs(xs[nb] - gx), abs(ys[nb] - gy)
                heapq.heappush(heap, (ng + (dx + dy + k * (dx if dx < dy else dy)), counter, nb))  # noqa: FURB136
                counter += 1
    return np.empty(0, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _segment_to_segment(
    ax: float, ay: float, bx: float, by: float, cx: float, cy: float, dx: float, dy: float
) -> float:  # pragma: no cover - compiled
    """Distance between segments AB and CD, GEOS's ``Distance::segmentToSegment`` operation for
    operation (what shapely's ``dwithin`` measures between a line and a polygon's boundary)."""
    if ax == bx and ay == by:
        return segment_distance(ax, ay, cx, cy, dx, dy)
    if cx == dx and cy == dy:
        return segment_distance(dx, dy, ax, ay, bx, by)
    crossing = not (max(ax, bx) < min(cx, dx) or min(ax, bx) > max(cx, dx)
                    or max(ay, by) < min(cy, dy) or min(ay, by) > max(cy, dy))
    if crossing:
        denom = (bx - ax) * (dy - cy) - (by - ay) * (dx - cx)
        if denom == 0.0:
            crossing = False
        else:
            r = ((ay - cy) * (dx - cx) - (ax - cx) * (dy - cy)) / denom
            s = ((ay - cy) * (bx - ax) - (ax - cx) * (by - ay)) / denom
            crossing = 0.0 <= r <= 1.0 and 0.0 <= s <= 1.0
    if crossing:
        return 0.0
    return min(segment_distance(ax, ay, cx, cy, dx, dy), segment_distance(bx, by, cx, cy, dx, dy),
               segment_distance(cx, cy, ax, ay, bx, by), segment_distance(dx, dy, ax, ay, bx, by))


@numba.njit(cache=True, nogil=True)
def _moves_clear(
    a: np.ndarray, b: np.ndarray, r: float, segs: np.ndarray, frame: np.ndarray, nx: int, ny: int,
    cell_start: np.ndarray, cell_segs: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """(K,) bool: segment a -> b (a point when a == b) is farther than ``r`` from every wall
    boundary segment ``segs`` (S, 4) and does not lie inside the walls. ``frame``: grid origin x,
    y and cell size; a cell lists (CSR) every boundary segment within ``r`` of it, so the cells
    overlapping a query's bounding box hold every segment that can be within ``r`` of it."""
    x0, y0, cell = frame[0], frame[1], frame[2]
    out = np.empty(a.shape[0], dtype=np.bool_)
    for q in range(a.shape[0]):
        ax, ay, bx, by = a[q, 0], a[q, 1], b[q, 0], b[q, 1]
        point = ax == bx and ay == by
        ix0 = min(max(int((min(ax, bx) - x0) / cell), 0), nx - 1)
        ix1 = min(max(int((max(ax, bx) - x0) / cell), 0), nx - 1)
        iy0 = min(max(int((min(ay, by) - y0) / cell), 0), ny - 1)
        iy1 = min(max(int((max(ay, by) - y0) / cell), 0), ny - 1)
        near = False
        for ix in range(ix0, ix1 + 1):
            for iy in range(iy0, iy1 + 1):
                c = ix * ny + iy
                for k in range(cell_start[c], cell_start[c + 1]):
                    s = cell_segs[k]
                    if point:
                        d = segment_distance(ax, ay, segs[s, 0], segs[s, 1], segs[s, 2], segs[s, 3])
                    else:
                        d = _segment_to_segment(segs[s, 0], segs[s, 1], segs[s, 2], segs[s, 3], ax, ay, bx, by)
                    if d <= r:
                        near = True
                        break
                if near:
                    break
            if near:
                break
        if not near:
            # Farther than r from every boundary: inside the walls exactly when the start is,
            # which a crossing count along the ray to +x decides without rounding trouble.
            iy = min(max(int((ay - y0) / cell), 0), ny - 1)
            seen = np.zeros(segs.shape[0], dtype=np.bool_)
            for ix in range(min(max(int((ax - x0) / cell), 0), nx - 1), nx):
                c = ix * ny + iy
                for k in range(cell_start[c], cell_start[c + 1]):
                    s = cell_segs[k]
                    if seen[s]:
                        continue
                    seen[s] = True
                    sy0, sy1 = segs[s, 1], segs[s, 3]
                    if (sy0 > ay) != (sy1 > ay) and ax < segs[s, 0] + (ay - sy0) / (sy1 - sy0) * (segs[s, 2] - segs[s, 0]):
                        near = not near
        out[q] = not near
    return out


@dataclass(frozen=True, slots=True)
class NavConfig:
    """Navigation graph parameters.

    Attributes:
        cell_m: grid spacing (m). 1 m keeps 1 m-wide doorways passable and the city map at ~40 k
            cells.
        margin_m: extra clearance (m) around the player circle for a node, so a bot drifting a
            little off its path does not graze walls.
        cover_search_m: :meth:`NavGraph.cover_points_near` looks this far (m) from the position.
        cover_body_height_m: top (m) of the body that must be hidden at a cover point; the
            crouching hull top by default (low cover hides a crouching player).
        cover_body_half_width_m: half-width (m) of the body that must be hidden; sample points sit
            this far left and right of the cell centre across the threat's line of sight.
        threat_eye_m: eye height (m) of the threat above its feet.
        smooth_lookahead: path smoothing tries shortcuts up to this many waypoints ahead.
    """

    cell_m: float = 1.0
    margin_m: float = 0.05
    cover_search_m: float = 15.0
    cover_body_height_m: float = CROUCHING_HEIGHT_M
    cover_body_half_width_m: float = PLAYER_RADIUS_M
    threat_eye_m: float = STANDING_EYE_M
    smooth_lookahead: int = 24

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cell_m) and self.cell_m > 0.0):
            raise ValueError(f"cell_m must be a positive number of meters, got {self.cell_m!r}")
        if self.margin_m < 0.0 or self.cover_search_m <= 0.0 or self.smooth_lookahead < 1:
            raise ValueError("margin_m >= 0, cover_search_m > 0 and smooth_lookahead >= 1 required")


class NavGraph:
    """Grid navigation graph of one map geometry.

    Attributes:
        geometry: the map. config: parameters.
        nodes: (N, 2) free cell centres (m). component: (N,) connected-component label per node.
        indptr, indices, weights: CSR adjacency (weights in m).
    """

    def __init__(self, geometry: MapGeometry, config: NavConfig = NavConfig()) -> None:
        self.geometry = geometry
        self.config = config
        xmin, ymin, xmax, ymax = geometry.game_map.bounds
        c = config.cell_m
        self._x0, self._y0 = xmin, ymin
        self._nx = max(1, math.floor((xmax - xmin) / c))
        self._ny = max(1, math.floor((ymax - ymin) / c))
        ix, iy = np.meshgrid(np.arange(self._nx), np.arange(self._ny), indexing="ij")
        centres = np.column_stack([xmin + (ix.ravel() + 0.5) * c, ymin + (iy.ravel() + 0.5) * c])
        free = ~geometry.circle_blocked(centres, geometry.player_radius + config.margin_m)
        self._build_walls()
        self._cell_node = np.full(self._nx * self._ny, -1, dtype=np.int64)
        self._cell_node[free] = np.arange(int(free.sum()))
        self.nodes = centres[free]
        self._cell_of_node = np.flatnonzero(free)
        self._node_x = np.ascontiguousarray(self.nodes[:, 0])
        self._node_y = np.ascontiguousarray(self.nodes[:, 1])
        self._build_edges()
        self.component = self._components()
        if len(self.nodes):
            # Compile (or load from numba's cache) the path search now, not at a bot's first path.
            _astar(0, 0, self._node_x, self._node_y, self.indptr, self.indices, self.weights)
        log.debug("nav graph for %r: %d nodes, %d edges, %d components", geometry.game_map.name,
                  len(self.nodes), len(self.indices) // 2, int(self.component.max(initial=-1)) + 1)

    # -- construction --------------------------------------------------------------------------

    def _build_walls(self) -> None:
        """The boundary segments of the walls' union (exactly as GEOS stores its rings, so that
        :meth:`moves_clear` measures what shapely would) and a grid listing, per cell, every
        segment within the player radius of it."""
        geometry = self.geometry
        r = geometry.player_radius
        polys = [shapely.Polygon(w.polygon) for w in geometry.game_map.walls]
        union = shapely.union_all(polys) if polys else shapely.Polygon()
        rings = [shapely.get_coordinates(ring) for ring in shapely.get_rings(shapely.get_parts(union))]
        segs = np.concatenate([np.column_stack([c[:-1], c[1:]]) for c in rings]) if rings else np.zeros((0, 4))
        xmin, ymin, xmax, ymax = geometry.game_map.bounds
        cell = _WALL_CELL_M
        nx, ny = max(1, math.ceil((xmax - xmin) / cell)), max(1, math.ceil((ymax - ymin) / cell))
        ix, iy = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
        ix, iy = ix.ravel(), iy.ravel()
        boxes = shapely.box(xmin + ix * cell, ymin + iy * cell, xmin + (ix + 1) * cell, ymin + (iy + 1) * cell)
        if len(segs):
            seg_idx, cell_idx = shapely.STRtree(boxes).query(
                shapely.linestrings(segs.reshape(-1, 2, 2)), predicate="dwithin", distance=r + _WALL_PAD_M
            )
        else:
            seg_idx = cell_idx = np.zeros(0, dtype=np.int64)
        order = np.lexsort((seg_idx, cell_idx))
        start = np.zeros(nx * ny + 1, dtype=np.int64)
        np.cumsum(np.bincount(cell_idx, minlength=nx * ny), out=start[1:])
        self._wall_args = (
            np.ascontiguousarray(segs, dtype=np.float64), np.array([xmin, ymin, cell]), nx, ny, start,
            seg_idx[order].astype(np.int64),
        )
        # Compile (or load from numba's cache) the test now, not at a bot's first path.
        _moves_clear(np.zeros((0, 2)), np.zeros((0, 2)), r, *self._wall_args)

    def _build_edges(self) -> None:
        cells = self._cell_of_node
        cx, cy = cells // self._ny, cells % self._ny
        src: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        wts: list[np.ndarray] = []
        for dx, dy in _OFFSETS[:4]:
            nx, ny = cx + dx, cy + dy
            inside = (nx >= 0) & (nx < self._nx) & (ny >= 0) & (ny < self._ny)
            a = np.flatnonzero(inside)
            b = self._cell_node[nx[a] * self._ny + ny[a]]
            ok = b >= 0
            a, b = a[ok], b[ok]
            if not len(a):
                continue
            clear = self.moves_clear(self.nodes[a], self.nodes[b])
            a, b = a[clear], b[clear]
            w = self.config.cell_m * (_SQRT2 if dx and dy else 1.0)
            src += [a, b]
            dst += [b, a]
            wts += [np.full(len(a), w), np.full(len(a), w)]
        s = np.concatenate(src) if src else np.zeros(0, np.int64)
        d = np.concatenate(dst) if dst else np.zeros(0, np.int64)
        w = np.concatenate(wts) if wts else np.zeros(0)
        order = np.lexsort((d, s))
        s, d, w = s[order], d[order], w[order]
        self.indptr = np.zeros(len(self.nodes) + 1, dtype=np.int64)
        np.cumsum(np.bincount(s, minlength=len(self.nodes)), out=self.indptr[1:])
        self.indices = d.astype(np.int64)
        self.weights = w
        # Python lists make the A* inner loop several times faster than numpy scalar indexing.
        ind, wl, ptr = self.indices.tolist(), self.weights.tolist(), self.indptr.tolist()
        self._adj: list[list[tuple[int, float]]] = [
            list(zip(ind[ptr[i]:ptr[i + 1]], wl[ptr[i]:ptr[i + 1]])) for i in range(len(self.nodes))
        ]

    def _components(self) -> np.ndarray:
        """Connected-component label of every node (breadth-first search)."""
        n = len(self.nodes)
        label = [-1] * n
        adj = self._adj
        current = 0
        for seed in range(n):
            if label[seed] >= 0:
                continue
            label[seed] = current
            frontier = [seed]
            while frontier:
                nxt: list[int] = []
                for node in frontier:
                    for nb, _ in adj[node]:
                        if label[nb] < 0:
                            label[nb] = current
                            nxt.append(nb)
                frontier = nxt
            current += 1
        return np.asarray(label, dtype=np.int64)

    # -- queries ---------------------------------------------------------------------------------

    def moves_clear(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(K, 2), (K, 2) -> (K,) bool: the player circle (the geometry's player radius) can move
        straight from a to b without touching a wall footprint of any height or the bounds. The
        same predicate as ``MapGeometry.sweep`` hitting nothing, computed as the distance from the
        segment to the walls' union (shapely's ``dwithin``, in a compiled kernel), which is much
        cheaper for long segments."""
        a = np.asarray(a, dtype=np.float64).reshape(-1, 2)
        b = np.asarray(b, dtype=np.float64).reshape(-1, 2)
        r = self.geometry.player_radius
        # The bounds are convex: a segment is inside when both ends are.
        inside = np.ones(len(a), dtype=bool)
        xmin, ymin, xmax, ymax = self.geometry.game_map.bounds
        for pts in (a, b):
            inside &= (pts[:, 0] > xmin + r) & (pts[:, 0] < xmax - r) & (pts[:, 1] > ymin + r) & (pts[:, 1] < ymax - r)
        rows = np.flatnonzero(inside)
        out = np.zeros(len(a), dtype=bool)
        if len(rows):
            out[rows] = _moves_clear(a[rows], b[rows], r, *self._wall_args)
        return out

    def free_at(self, pos: tuple[float, float] | np.ndarray) -> bool:
        """True when the grid cell containing ``pos`` (m) is a free node (O(1); a coarse test for
        quick decisions such as which way to strafe, not a collision check)."""
        c = self.config.cell_m
        ix = math.floor((float(pos[0]) - self._x0) / c)
        iy = math.floor((float(pos[1]) - self._y0) / c)
        if not (0 <= ix < self._nx and 0 <= iy < self._ny):
            return False
        return bool(self._cell_node[ix * self._ny + iy] >= 0)

    def segment_clear(self, a: tuple[float, float] | np.ndarray, b: tuple[float, float] | np.ndarray) -> bool:
        """True when the player circle can move straight from ``a`` to ``b`` (m) without touching
        a wall."""
        return bool(self.moves_clear(np.asarray(a, dtype=np.float64)[:2], np.asarray(b, dtype=np.float64)[:2])[0])

    def nearest_node(self, pos: tuple[float, float] | np.ndarray, reachable: bool = True) -> int | None:
        """Index of the free node nearest ``pos`` (m), preferring ones the player can walk to in a
        straight line when ``reachable``; None when the graph is empty."""
        if not len(self.nodes):
            return None
        p = np.asarray(pos, dtype=np.float64)[:2]
        c = self.config.cell_m
        ix = int(np.clip((p[0] - self._x0) // c, 0, self._nx - 1))
        iy = int(np.clip((p[1] - self._y0) // c, 0, self._ny - 1))
        for radius in (1, 2, 4):
            xs = np.arange(max(0, ix - radius), min(self._nx, ix + radius + 1))
            ys = np.arange(max(0, iy - radius), min(self._ny, iy + radius + 1))
            cand = self._cell_node[(xs[:, None] * self._ny + ys[None, :]).ravel()]
            cand = cand[cand >= 0]
            if not len(cand):
                continue
            d = np.hypot(self.nodes[cand, 0] - p[0], self.nodes[cand, 1] - p[1])
            order = cand[np.argsort(d, kind="stable")]
            if not reachable:
                return int(order[0])
            starts = np.repeat(p[None, :], len(order), axis=0)
            clear = self.moves_clear(starts, self.nodes[order])
            if clear.any():
                return int(order[np.argmax(clear)])
        d = np.hypot(self.nodes[:, 0] - p[0], self.nodes[:, 1] - p[1])
        return int(np.argmin(d))

    def astar(self, start: int, goal: int) -> list[int] | None:
        """Node indices of a shortest path from ``start`` to ``goal`` (A*, octile heuristic), or
        None when they are not connected."""
        if start == goal:
            return [start]
        if self.component[start] != self.component[goal]:
            return None
        path = _astar(start, goal, self._node_x, self._node_y, self.indptr, self.indices, self.weights)
        return path.tolist() if len(path) else None

    def find_path(
        self, start: tuple[float, float] | np.ndarray, goal: tuple[float, float] | np.ndarray, smooth: bool = True
    ) -> list[tuple[float, float]] | None:
        """Waypoints (m) from ``start`` to ``goal``, excluding the start, ending at the goal
        itself when the player can stand there (else at the nearest free node). Every segment,
        including the first one from ``start``, is a clear straight move. None when unreachable."""
        s = self.nearest_node(start)
        g = self.nearest_node(goal)
        if s is None or g is None:
            return None
        ids = self.astar(s, g)
        if ids is None:
            return None
        pts = [np.asarray(start, dtype=np.float64)[:2]] + [self.nodes[i] for i in ids]
        goal_xy = np.asarray(goal, dtype=np.float64)[:2]
        if not bool(self.geometry.circle_blocked(goal_xy[None, :])[0]) and self.segment_clear(pts[-1], goal_xy):
            pts.append(goal_xy)
        if smooth:
            pts = self.smooth(pts)
        return [(float(p[0]), float(p[1])) for p in pts[1:]]

    def smooth(self, pts: list[np.ndarray]) -> list[np.ndarray]:
        """Drop waypoints that a clear straight move can skip: from each kept waypoint jump to the
        farthest of the next ``smooth_lookahead`` waypoints reachable in a straight line. Only the
        moves from kept waypoints are tested (one batched call each)."""
        if len(pts) <= 2:
            return pts
        arr = np.asarray(pts, dtype=np.float64)
        n = len(arr)
        look = self.config.smooth_lookahead
        out = [arr[0]]
        i = 0
        while i < n - 1:
            ahead = arr[i + 2 : min(n, i + look + 1)]
            clear = np.flatnonzero(self.moves_clear(np.repeat(arr[i : i + 1], len(ahead), axis=0), ahead))
            i = i + 2 + int(clear[-1]) if len(clear) else i + 1
            out.append(arr[i])
        return out

    def random_destination(self, rng: np.random.Generator, near: tuple[float, float] | np.ndarray | None = None) -> tuple[float, float]:
        """A random free node (m), uniform over the nodes; in ``near``'s component when given so
        that it is reachable from there. Draws one integer."""
        if not len(self.nodes):
            raise ValueError("the navigation graph has no free cell")
        pool = np.arange(len(self.nodes))
        if near is not None:
            start = self.nearest_node(near)
            if start is not None:
                pool = np.flatnonzero(self.component == self.component[start])
        i = int(pool[int(rng.integers(len(pool)))])
        return float(self.nodes[i, 0]), float(self.nodes[i, 1])

    def hidden_from(self, threat_eye: tuple[float, float, float] | np.ndarray, cells: np.ndarray) -> np.ndarray:
        """(K,) bool: the body at each cell centre ((K, 2), m) up to ``cover_body_height_m`` is hidden
        from ``threat_eye`` (m): the lines of sight to the top-centre and the top-left/right edges
        of the body, and to its middle, are all blocked by walls."""
        cfg = self.config
        eye = np.asarray(threat_eye, dtype=np.float64)
        k = len(cells)
        if k == 0:
            return np.zeros(0, dtype=bool)
        d = cells - eye[None, :2]
        n = np.hypot(d[:, 0], d[:, 1])
        n = np.where(n > 1e-9, n, 1.0)
        right = np.column_stack([d[:, 1] / n, -d[:, 0] / n])
        top = cfg.cover_body_height_m - 0.02
        samples = []
        for side, z in ((0.0, top), (1.0, top), (-1.0, top), (0.0, 0.5 * top), (1.0, 0.5 * top), (-1.0, 0.5 * top)):
            xy = cells + side * cfg.cover_body_half_width_m * right
            samples.append(np.column_stack([xy, np.full(k, z)]))
        pts = np.concatenate(samples)
        eyes = np.repeat(eye[None, :], len(pts), axis=0)
        visible = self.geometry.los_clear(eyes, pts).reshape(len(samples), k)
        return ~visible.any(axis=0)

    def cover_points_near(
        self,
        pos: tuple[float, float] | np.ndarray,
        threat_pos: tuple[float, float, float] | np.ndarray,
        max_points: int = 8,
    ) -> list[tuple[float, float]]:
        """Free cells (m) within ``cover_search_m`` of ``pos`` and reachable from it where a
        crouching body is hidden from a standing threat at ``threat_pos`` (feet, m), nearest
        first; at most ``max_points``."""
        cfg = self.config
        p = np.asarray(pos, dtype=np.float64)[:2]
        start = self.nearest_node(p)
        if start is None:
            return []
        d = np.hypot(self.nodes[:, 0] - p[0], self.nodes[:, 1] - p[1])
        cand = np.flatnonzero((d <= cfg.cover_search_m) & (self.component == self.component[start]))
        if not len(cand):
            return []
        threat = np.asarray(threat_pos, dtype=np.float64)
        eye = np.array([threat[0], threat[1], (threat[2] if len(threat) > 2 else 0.0) + cfg.threat_eye_m])
        hidden = self.hidden_from(eye, self.nodes[cand])
        cand = cand[hidden]
        cand = cand[np.argsort(d[cand], kind="stable")][:max_points]
        return [(float(self.nodes[i, 0]), float(self.nodes[i, 1])) for i in cand]


class NavCache:
    """Navigation graphs per map geometry object, built on first use.

    The cache keeps its geometries alive as long as it lives (a graph refers to its geometry, so a
    weak-keyed cache could never drop them anyway); own one per process or per match.
    """

    def __init__(self, config: NavConfig = NavConfig()) -> None:
        self.config = config
        self._graphs: dict[int, NavGraph] = {}

    def get(self, geometry: MapGeometry) -> NavGraph:
        """The graph of ``geometry`` (identity, not equality), built once."""
        graph = self._graphs.get(id(geometry))
        if graph is None or graph.geometry is not geometry:
            graph = NavGraph(geometry, self.config)
            self._graphs[id(geometry)] = graph
        return graph
