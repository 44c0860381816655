"""Prepared wall geometry of a map with batched line-of-sight, ray, point and movement queries.

Walls are vertical prisms: footprint polygon x, y (meters), solid from the floor up to the
wall's height. The map bounds act as infinitely tall walls for every query: rays stop at them,
players cannot leave them, and points on or outside them count as inside a wall. Solids are
closed: touching a wall (a face, an edge, the top) counts as hitting it.

All queries take batches (numpy arrays, one row per query) and are vectorised: Python loops run
over walls only at construction time. Rays are exact (no sampling; float rounding only):

* every footprint becomes convex pieces: itself when convex, else boxes (rectilinear footprints
  cut along their vertices) or triangles; a prism is the union of its pieces' prisms, so the
  first entry into a wall is the first entry into any of its pieces;
* a uniform grid over the bounds maps each cell to the pieces touching it (CSR arrays); a ray
  visits only the cells it crosses, so its cost scales with the walls near it, not with the map.
  Rays are walked in growing stretches and drop out once their answer is known, so the work
  behind the first wall a ray meets is mostly skipped;
* z is linear along a ray, so against one convex prism the ray is a clipping problem: intersect
  the ray's parameter interval with each edge's half-plane (a slab test for boxes, Cyrus-Beck for
  other convex pieces, grouped by edge count) and with the interval where z <= height. The entry
  parameter of that interval is the hit; this covers side faces, the top face and rays starting
  inside.

Point queries (:meth:`MapGeometry.point_in_wall`, :meth:`MapGeometry.circle_blocked`) use prepared
shapely unions of the footprints (one per distinct wall height).

Movement (:meth:`MapGeometry.sweep`) works on the original footprint edges grown by the player
radius (the Minkowski sum: offset edges plus a circle per vertex).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import shapely

from world.constants import PLAYER_RADIUS_M
from world.mapfile import GameMap

log = logging.getLogger(__name__)

SWEEP_SKIN_M: Final = 1e-3
"""Clearance (m) a sweep leaves between the player circle and the wall it stopped against, so
the end position is strictly outside every wall despite float rounding."""

DEFAULT_CELL_SIZE_M: Final = 4.0
"""Broadphase grid cell size (m). About the size of a building wall segment: smaller cells cost
more cell visits per ray, larger ones more edge tests per cell (measured on the city map)."""

_LOS_PAD_M: Final = 1e-6
"""Pieces are registered in every cell within this distance (m), so float rounding in the ray's
cell walk can never skip a piece lying exactly on a cell border."""

_CHUNK_FIRST_M: Final = 8.0
_CHUNK_GROWTH: Final = 1.5
"""Rays are walked in stretches ending at 8, 20, 38, 65... m (each 1.5x the previous reach plus
8 m); a ray stops being walked once its first hit is known, which on dense maps skips most of
the work behind the first wall at the cost of one pass per stretch."""

_HUGE: Final = 1e300
"""Stands in for 1 / 0 in slab tests: (x - x0) * _HUGE keeps the sign of x - x0 and is exactly
0 when x == x0, where an IEEE inf would give NaN."""

_FAR_T: Final = 1e30
"""Cap on a ray's parameter range (m for rays with unit directions): a vertical ray with an
infinite max distance would otherwise let a _HUGE-scaled slab bound pass for a real hit."""

_MAX_CELLS: Final = 250_000
"""Upper bound on grid cells (memory and build time); the cell size grows for huge maps."""


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Outcome of :meth:`MapGeometry.sweep` for N moving circles.

    end: (N, 2) final centre (m); equals p1 exactly when nothing was hit.
    fraction: (N,) time of impact as a fraction of the displacement, in [0, 1]; 1 when no hit.
    hit: (N,) True when the circle touched a wall or the bounds.
    normal: (N, 2) unit contact normal pointing away from the obstacle; zero when no hit.
    """

    end: np.ndarray
    fraction: np.ndarray
    hit: np.ndarray
    normal: np.ndarray


@dataclass(frozen=True, slots=True)
class _RayTable:
    """Per-ray columns for the pair kernels: origin (m), inverse direction (1 / v, _HUGE where
    v == 0), direction, end parameter t_in and whether the ray descends."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    ix: np.ndarray
    iy: np.ndarray
    iz: np.ndarray
    vx: np.ndarray
    vy: np.ndarray
    t_in: np.ndarray
    down: np.ndarray


@dataclass(frozen=True, slots=True)
class _ConvexGroup:
    """Convex pieces with ``k`` edges, convex ids [first, first + len(height)): edge j of piece i
    is the half-plane nx[j, i] x + ny[j, i] y <= c[j, i] (outward normal, unnormalised)."""

    k: int
    first: int
    nx: np.ndarray
    ny: np.ndarray
    c: np.ndarray
    height: np.ndarray


@dataclass(frozen=True, slots=True)
class _Grid:
    """Uniform grid over the bounds; cell (ix, iy) has id ``ix * ny + iy`` and holds the item ids
    (pieces or edges, by index) ``items[start[id]:start[id + 1]]``."""

    x0: float
    y0: float
    cell: float
    nx: int
    ny: int
    start: np.ndarray
    items: np.ndarray


def _build_grid(bounds: tuple[float, float, float, float], cell: float, geoms: np.ndarray, pad: float) -> _Grid:
    """Register each geometry in every cell within ``pad`` meters of it."""
    xmin, ymin, xmax, ymax = bounds
    nx = max(1, math.ceil((xmax - xmin) / cell))
    ny = max(1, math.ceil((ymax - ymin) / cell))
    ix, iy = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    ix, iy = ix.ravel(), iy.ravel()
    boxes = shapely.box(xmin + ix * cell, ymin + iy * cell, xmin + (ix + 1) * cell, ymin + (iy + 1) * cell)
    if len(geoms):
        edge_idx, cell_idx = shapely.STRtree(boxes).query(geoms, predicate="dwithin", distance=pad)
    else:
        edge_idx = cell_idx = np.zeros(0, dtype=np.int64)
    order = np.lexsort((edge_idx, cell_idx))
    counts = np.bincount(cell_idx, minlength=nx * ny)
    start = np.zeros(nx * ny + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    return _Grid(
        x0=xmin, y0=ymin, cell=cell, nx=nx, ny=ny, start=start, items=edge_idx[order].astype(np.int64)
    )


def _ranges(first: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows with ``counts[i]`` consecutive integers starting at ``first[i]``: (row index,
    value) of every element, flattened. The vectorised form of nested range loops."""
    total = int(counts.sum())
    rows = np.repeat(np.arange(len(counts)), counts)
    offsets = np.cumsum(counts) - counts
    values = np.arange(total) - np.repeat(offsets - first, counts)
    return rows, values


def _cells_along(grid: _Grid, ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every grid cell each segment A->B (inside the grid box) passes through, as (segment index,
    cell id) pairs, each cell once per segment (unordered).

    A segment enters a new cell exactly where it crosses a grid line, so the cells are its start
    cell plus, for every grid line crossed, the cell on the far side of that line.
    """
    gax = np.clip((ax - grid.x0) / grid.cell, 0.0, grid.nx)
    gay = np.clip((ay - grid.y0) / grid.cell, 0.0, grid.ny)
    gbx = np.clip((bx - grid.x0) / grid.cell, 0.0, grid.nx)
    gby = np.clip((by - grid.y0) / grid.cell, 0.0, grid.ny)
    ddx, ddy = gbx - gax, gby - gay

    rows = [np.arange(len(ax))]
    cells = [np.minimum(gax.astype(np.int64), grid.nx - 1) * grid.ny + np.minimum(gay.astype(np.int64), grid.ny - 1)]
    for along_x in (True, False):
        ga, gb, d = (gax, gbx, ddx) if along_x else (gay, gby, ddy)
        go, do_ = (gay, ddy) if along_x else (gax, ddx)
        n_along, n_other = (grid.nx, grid.ny) if along_x else (grid.ny, grid.nx)
        lo = np.ceil(np.minimum(ga, gb)).astype(np.int64)
        hi = np.floor(np.maximum(ga, gb)).astype(np.int64)
        counts = np.where(d != 0.0, np.maximum(hi - lo + 1, 0), 0)
        seg, line = _ranges(lo, counts)
        if not len(seg):
            continue
        positive = d[seg] > 0.0
        # Moving up the axis a crossing of line k enters cell k; moving down it enters k - 1.
        entered = np.where(positive, line, line - 1)
        t = (line - ga[seg]) / d[seg]
        other = np.clip((go[seg] + t * do_[seg]).astype(np.int64), 0, n_other - 1)
        keep = (entered >= 0) & (entered < n_along)
        seg, entered, other = seg[keep], entered[keep], other[keep]
        rows.append(seg)
        cells.append(entered * grid.ny + other if along_x else other * grid.ny + entered)
    return np.concatenate(rows), np.concatenate(cells)


def _items_along(grid: _Grid, seg: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand (segment, cell) pairs into (segment, item) candidate pairs through the grid's CSR."""
    first = np.take(grid.start, cell)
    counts = np.take(grid.start, cell + 1) - first
    rows, pos = _ranges(first, counts)
    return np.take(seg, rows), np.take(grid.items, pos)


def _box_interval(
    ax: np.ndarray, ay: np.ndarray, dx: np.ndarray, dy: np.ndarray, box: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Parameter interval [t0, t1] where A + t D lies in the closed box (xmin, ymin, xmax, ymax);
    empty when t0 > t1 (Liang-Barsky clipping)."""
    t0 = np.full(len(ax), -np.inf)
    t1 = np.full(len(ax), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for pos, vel, lo, hi in ((ax, dx, box[0], box[2]), (ay, dy, box[1], box[3])):
            ta, tb = (lo - pos) / vel, (hi - pos) / vel
            moving = vel != 0.0
            t0 = np.where(moving, np.maximum(t0, np.minimum(ta, tb)), t0)
            t1 = np.where(moving, np.minimum(t1, np.maximum(ta, tb)), t1)
            # Standing still along this axis: inside for all t or for none.
            still_out = ~moving & ((pos < lo) | (pos > hi))
            t0 = np.where(still_out, np.inf, t0)
            t1 = np.where(still_out, -np.inf, t1)
    return t0, t1


def _slot_count(k: int) -> int:
    """Edge slots of the convex group holding k-gons: 3, 4, then powers of two."""
    return k if k <= 4 else 1 << (k - 1).bit_length()


def _is_box(ring: np.ndarray) -> bool:
    return len(ring) == 4 and len(np.unique(ring[:, 0])) == 2 and len(np.unique(ring[:, 1])) == 2


def _ccw_ring(poly: shapely.Polygon) -> np.ndarray:
    """Exterior vertices, counter-clockwise, without the closing vertex or collinear vertices."""
    clean = shapely.orient_polygons(shapely.simplify(poly, 0.0))
    return np.asarray(clean.exterior.coords, dtype=np.float64)[:-1]


def _is_convex(ring: np.ndarray) -> bool:
    e = np.roll(ring, -1, axis=0) - ring
    en = np.roll(e, -1, axis=0)
    return bool(np.all(e[:, 0] * en[:, 1] - e[:, 1] * en[:, 0] >= 0.0))


def _convex_pieces(poly: shapely.Polygon, cut_strips: bool = True) -> list[np.ndarray]:
    """Counter-clockwise vertex rings of convex polygons whose union is ``poly``.

    Rectilinear footprints (every edge axis-aligned) are cut into boxes along their vertices' x
    coordinates, which keeps them on the cheap slab test; others are triangulated.
    """
    ring = _ccw_ring(poly)
    if _is_convex(ring):
        return [ring]
    edges = np.roll(ring, -1, axis=0) - ring
    if cut_strips and np.all((edges[:, 0] == 0.0) | (edges[:, 1] == 0.0)):
        xs = np.unique(ring[:, 0])
        ymin, ymax = float(ring[:, 1].min()) - 1.0, float(ring[:, 1].max()) + 1.0
        pieces: list[np.ndarray] = []
        for xa, xb in zip(xs[:-1], xs[1:]):
            strip = shapely.intersection(poly, shapely.box(xa, ymin, xb, ymax))
            for part in shapely.get_parts(strip):
                if isinstance(part, shapely.Polygon) and part.area > 0.0:
                    sub = _ccw_ring(part)
                    # A strip of a rectilinear polygon is a box; if rounding says otherwise,
                    # triangulate it rather than cut it again.
                    pieces.extend([sub] if _is_box(sub) else _convex_pieces(part, cut_strips=False))
        return pieces
    triangles = shapely.get_parts(shapely.constrained_delaunay_triangles(poly))
    return [_ccw_ring(t) for t in triangles if isinstance(t, shapely.Polygon) and t.area > 0.0]


def _as_points(name: str, value: object, dims: tuple[int, ...]) -> np.ndarray:
    """(N, d) float64 array with d in ``dims``; a single point of shape (d,) becomes (1, d)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[np.newaxis, :]
    if arr.ndim != 2 or arr.shape[1] not in dims:
        want = " or ".join(f"(N, {d})" for d in dims)
        raise ValueError(f"{name} must have shape {want}, got {np.shape(value)}")
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise ValueError(f"{name} contains NaN or inf (first bad row {int(np.flatnonzero(bad)[0])})")
    return arr


def _same_rows(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}")


class MapGeometry:
    """Batched geometric queries on one map's walls (see the module docstring for the model)."""

    game_map: GameMap
    player_radius: float

    def __init__(
        self, game_map: GameMap, player_radius: float = PLAYER_RADIUS_M, cell_size_m: float = DEFAULT_CELL_SIZE_M
    ) -> None:
        """Prepare ``game_map`` for queries; ``player_radius`` (m) is the radius used by
        :meth:`sweep` and the default of :meth:`circle_blocked`; ``cell_size_m`` (m) is the
        broadphase grid's cell size (a speed knob only: answers do not depend on it)."""
        if not (math.isfinite(player_radius) and player_radius > 0.0):
            raise ValueError(f"player_radius must be a positive finite number of meters, got {player_radius!r}")
        if not (math.isfinite(cell_size_m) and cell_size_m > 0.0):
            raise ValueError(f"cell_size_m must be a positive finite number of meters, got {cell_size_m!r}")
        self.game_map = game_map
        self.player_radius = float(player_radius)
        self._bounds = np.asarray(game_map.bounds, dtype=np.float64)
        xmin, ymin, xmax, ymax = game_map.bounds
        cell = max(cell_size_m, math.sqrt((xmax - xmin) * (ymax - ymin) / _MAX_CELLS))

        polys = np.array([shapely.Polygon(w.polygon) for w in game_map.walls], dtype=object)
        heights = np.array([w.height for w in game_map.walls], dtype=np.float64)
        self._build_pieces(polys, heights, cell)
        self._build_edges(polys, heights, cell)

        # Union of the footprints at least as tall as each distinct height: a point at height z
        # is inside a (closed) prism iff it is inside the union for the smallest height >= z.
        self._heights = np.unique(heights)
        self._unions: list[shapely.Geometry] = []
        for h in self._heights:
            union = shapely.union_all(polys[heights >= h])
            shapely.prepare(union)
            self._unions.append(union)
        self._all_walls = self._unions[0] if self._unions else shapely.Polygon()
        log.debug(
            "geometry for %r: %d walls -> %d boxes + %d convex pieces, %d edges, grid %dx%d of %.2f m",
            game_map.name,
            len(game_map.walls),
            len(self._box_h),
            sum(len(g.height) for g in self._cv_groups),
            len(self._eh),
            self._ray_grid.nx,
            self._ray_grid.ny,
            cell,
        )

    def _build_pieces(self, polys: np.ndarray, heights: np.ndarray, cell: float) -> None:
        """Convex pieces for rays: boxes as columns x0, y0, x1, y1, height; other convex pieces
        as groups of edge half-planes (see _ConvexGroup); the ray grid over all of them, boxes
        first (grid item id < number of boxes)."""
        boxes: list[tuple[float, float, float, float, float]] = []
        box_geoms: list[shapely.Geometry] = []
        rings: list[np.ndarray] = []
        ring_heights: list[float] = []
        for poly, height in zip(polys, heights):
            for ring in _convex_pieces(poly):
                if _is_box(ring):
                    x0, y0 = ring.min(axis=0)
                    x1, y1 = ring.max(axis=0)
                    boxes.append((x0, y0, x1, y1, height))
                    box_geoms.append(shapely.box(x0, y0, x1, y1))
                else:
                    rings.append(ring)
                    ring_heights.append(float(height))
        # Column arrays, not row tables: np.take on a 1-D array is several times faster than
        # gathering rows of a 2-D table, and the arithmetic then runs on contiguous memory.
        table = np.array(boxes, dtype=np.float64).reshape(-1, 5)
        self._box_x0, self._box_y0, self._box_x1, self._box_y1, self._box_h = (table[:, i].copy() for i in range(5))
        # Other convex pieces, grouped by edge count (3, 4, then up to the next power of two)
        # so that a piece's half-planes are columns of fixed-size arrays: the kernel loops over
        # k edges instead of a ragged CSR, and there are few groups. Padding repeats a piece's
        # last half-plane, which changes nothing.
        order = sorted(range(len(rings)), key=lambda i: _slot_count(len(rings[i])))
        rings = [rings[i] for i in order]
        ring_heights = [ring_heights[i] for i in order]
        self._cv_groups: list[_ConvexGroup] = []
        first = 0
        for k in sorted({_slot_count(len(r)) for r in rings}):
            members = [r for r in rings if _slot_count(len(r)) == k]
            p = np.zeros((k, len(members), 2))
            q = np.zeros((k, len(members), 2))
            for i, ring in enumerate(members):
                nxt = np.roll(ring, -1, axis=0)
                pad = k - len(ring)
                p[:, i] = np.concatenate([ring, np.repeat(ring[-1:], pad, axis=0)])
                q[:, i] = np.concatenate([nxt, np.repeat(nxt[-1:], pad, axis=0)])
            # Half-plane n . x <= c of each edge, n the (unnormalised) outward normal.
            nx, ny = q[:, :, 1] - p[:, :, 1], p[:, :, 0] - q[:, :, 0]
            self._cv_groups.append(
                _ConvexGroup(
                    k=k,
                    first=first,
                    nx=nx.copy(),
                    ny=ny.copy(),
                    c=nx * p[:, :, 0] + ny * p[:, :, 1],
                    height=np.array(ring_heights[first : first + len(members)], dtype=np.float64),
                )
            )
            first += len(members)
        geoms = np.array(box_geoms + [shapely.Polygon(r) for r in rings], dtype=object)
        self._ray_grid = _build_grid(self.game_map.bounds, cell, geoms, _LOS_PAD_M)

    def _build_edges(self, polys: np.ndarray, heights: np.ndarray, cell: float) -> None:
        """Original footprint edges (counter-clockwise, outward normal (fy, -fx)) for sweeps."""
        e0: list[np.ndarray] = []
        eh: list[np.ndarray] = []
        for poly, height in zip(polys, heights):
            ring = _ccw_ring(poly)
            e0.append(ring)
            eh.append(np.full(len(ring), height))
        a = np.concatenate(e0) if e0 else np.zeros((0, 2))
        b = np.concatenate([np.roll(r, -1, axis=0) for r in e0]) if e0 else np.zeros((0, 2))
        f = b - a
        length = np.hypot(f[:, 0], f[:, 1])
        self._e0x, self._e0y = a[:, 0].copy(), a[:, 1].copy()
        self._fx, self._fy = f[:, 0].copy(), f[:, 1].copy()
        self._inv_len2 = 1.0 / (length * length)
        # + 0.0 turns -0.0 into 0.0 so reported normals print cleanly.
        self._onx, self._ony = f[:, 1] / length + 0.0, -f[:, 0] / length + 0.0
        self._eh = np.concatenate(eh) if eh else np.zeros(0)
        lines = shapely.linestrings(np.stack([a, b], axis=1)) if len(a) else np.zeros(0, object)
        self._move_grid = _build_grid(self.game_map.bounds, cell, lines, self.player_radius * 1.01 + 10 * SWEEP_SKIN_M)

    # ------------------------------------------------------------------ rays

    def _first_entry(self, o: np.ndarray, v: np.ndarray, t_end: np.ndarray, any_hit: bool) -> np.ndarray:
        """Smallest t in [0, t_end] with o + t v inside or on a wall prism or the bounds, else inf.

        o, v: (N, 3); t_end: (N,) non-negative, may be inf only when v has no horizontal part.
        With ``any_hit`` a ray stops as soon as some hit is known (enough for line of sight) and
        the returned t is then only an upper bound of the first one.
        """
        n = len(o)
        best = np.full(n, np.inf)
        if n == 0:
            return best
        xmin, ymin, xmax, ymax = self._bounds
        ox, oy = o[:, 0], o[:, 1]
        vx, vy = v[:, 0], v[:, 1]

        outside = self._outside_bounds(ox, oy)
        best[outside] = 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            tx = np.where(vx > 0, (xmax - ox) / vx, np.where(vx < 0, (xmin - ox) / vx, np.inf))
            ty = np.where(vy > 0, (ymax - oy) / vy, np.where(vy < 0, (ymin - oy) / vy, np.inf))
        t_exit = np.minimum(tx, ty)
        leaves = ~outside & (t_exit <= t_end)
        best[leaves] = t_exit[leaves]
        rows = np.flatnonzero(~outside)
        if not len(rows) or not len(self._ray_grid.items):
            return best

        # From here on everything is indexed by position in `rows`.
        rv = v[rows]
        # Walls lie inside the bounds: look no further than the bounds exit.
        t_in = np.minimum(np.minimum(t_end[rows], t_exit[rows]), _FAR_T)
        speed = np.hypot(rv[:, 0], rv[:, 1])
        with np.errstate(divide="ignore"):
            inv = np.where(rv != 0.0, 1.0 / rv, _HUGE)
            inv_speed = np.where(speed > 0.0, 1.0 / speed, 0.0)
        # A level ray (v_z == 0) is at or below a top for its whole length iff z <= height; with
        # 1 / 0 -> _HUGE that needs height - z > 0 even at equality, hence z one ulp lower.
        z = np.where(rv[:, 2] == 0.0, np.nextafter(o[rows, 2], -np.inf), o[rows, 2])
        ray = _RayTable(
            x=o[rows, 0], y=o[rows, 1], z=z, ix=inv[:, 0].copy(), iy=inv[:, 1].copy(), iz=inv[:, 2].copy(),
            vx=rv[:, 0].copy(), vy=rv[:, 1].copy(), t_in=t_in, down=rv[:, 2] < 0.0,
        )
        local = best[rows]
        # Vertical rays only ever visit their start cell.
        t_walk = np.where(speed > 0.0, t_in, 0.0)

        # Walk the rays in growing stretches, dropping every ray whose answer is settled: on a
        # dense map most rays are blocked within their first meters, so most of the grid walk and
        # the pair tests behind the first wall are never done. The kernels clip each pair over
        # the whole ray, so a hit at t <= (end of the walked stretch) is exact: every piece the ray
        # could have entered before it lies in a cell already visited.
        active = np.arange(len(rows))
        t_from = np.zeros(len(rows))
        reach = _CHUNK_FIRST_M
        while len(active):
            t_to = np.minimum(t_walk[active], reach * inv_speed[active])
            ta, tb = t_from[active], t_to
            x, y, dx, dy = ray.x[active], ray.y[active], ray.vx[active], ray.vy[active]
            seg, cell = _cells_along(self._ray_grid, x + ta * dx, y + ta * dy, x + tb * dx, y + tb * dy)
            seg, piece = _items_along(self._ray_grid, np.take(active, seg), cell)
            if len(seg):
                is_box = piece < len(self._box_h)
                hit_seg, hit_t = self._box_entries(ray, seg[is_box], piece[is_box])
                np.minimum.at(local, hit_seg, hit_t)
                if self._cv_groups:
                    self._convex_entries(local, ray, seg[~is_box], piece[~is_box] - len(self._box_h))
            found = local[active]
            settled = np.isfinite(found) if any_hit else found <= tb
            keep = ~settled & (tb < t_walk[active])
            t_from[active] = tb
            active = active[keep]
            reach = reach * _CHUNK_GROWTH + _CHUNK_FIRST_M
        best[rows] = local
        return best

    @staticmethod
    def _z_window(ray: _RayTable, seg: np.ndarray, height: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Parameter interval [lo, hi] of each ray ``seg`` within [0, t_in] where the ray is at
        or below ``height``: a descending ray enters it, any other ray leaves it."""
        t_h = (height - np.take(ray.z, seg)) * np.take(ray.iz, seg)
        t_in = np.take(ray.t_in, seg)
        down = np.take(ray.down, seg)
        lo = np.where(down & (t_h > 0.0), t_h, 0.0)
        hi = np.where(down, t_in, np.minimum(t_h, t_in))
        return lo, hi

    def _box_entries(self, ray: _RayTable, seg: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slab test of (ray, box) pairs: (ray index, entry parameter) of the pairs that hit."""
        lo, hi = self._z_window(ray, seg, np.take(self._box_h, box))
        x, ix = np.take(ray.x, seg), np.take(ray.ix, seg)
        t1 = (np.take(self._box_x0, box) - x) * ix
        t2 = (np.take(self._box_x1, box) - x) * ix
        enter = np.maximum(lo, np.minimum(t1, t2))
        leave = np.minimum(hi, np.maximum(t1, t2))
        y, iy = np.take(ray.y, seg), np.take(ray.iy, seg)
        t1 = (np.take(self._box_y0, box) - y) * iy
        t2 = (np.take(self._box_y1, box) - y) * iy
        np.maximum(enter, np.minimum(t1, t2), out=enter)
        np.minimum(leave, np.maximum(t1, t2), out=leave)
        hit = enter <= leave
        return seg[hit], enter[hit]

    def _convex_entries(self, best: np.ndarray, ray: _RayTable, seg: np.ndarray, piece: np.ndarray) -> None:
        """Cyrus-Beck clipping of (ray, convex piece) pairs; lowers ``best`` to the entry
        parameter of the pairs that hit."""
        for group in self._cv_groups:
            sel = np.flatnonzero((piece >= group.first) & (piece < group.first + len(group.height)))
            if not len(sel):
                continue
            s = seg[sel]
            p = piece[sel] - group.first
            x, y = np.take(ray.x, s), np.take(ray.y, s)
            vx, vy = np.take(ray.vx, s), np.take(ray.vy, s)
            enter, leave = self._z_window(ray, s, np.take(group.height, p))
            for j in range(group.k):
                nx, ny = np.take(group.nx[j], p), np.take(group.ny[j], p)
                # Inside the half-plane while num + t den <= 0.
                num = nx * x + ny * y - np.take(group.c[j], p)
                den = nx * vx + ny * vy
                # Parallel to the edge the ray is inside for all t (num <= 0) or for none: a tiny
                # negative den turns that into an entry bound of -huge or +huge.
                den[den == 0.0] = -1e-300
                with np.errstate(divide="ignore", over="ignore"):
                    bound = -num / den
                # Moving into the half-plane bounds the entry, moving out bounds the exit.
                # (np.where + maximum: ufuncs with where= masks are several times slower.)
                np.maximum(enter, np.where(den < 0.0, bound, -np.inf), out=enter)
                np.minimum(leave, np.where(den > 0.0, bound, np.inf), out=leave)
            hit = enter <= leave
            np.minimum.at(best, s[hit], enter[hit])

    def los_clear(self, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
        """(N, 3), (N, 3) points (m) -> (N,) bool: True when the segment p0->p1 touches no wall
        prism (footprint x height, m) and stays strictly inside the bounds.

        A segment passing above a wall's top passes over it; touching a wall (a face, its top)
        counts as blocked. Raises ValueError for NaN/inf or mismatched shapes.
        """
        a = _as_points("p0", p0, (3,))
        b = _as_points("p1", p1, (3,))
        _same_rows("p0", a, "p1", b)
        return ~np.isfinite(self._first_entry(a, b - a, np.ones(len(a)), any_hit=True))

    def first_wall_hit(self, origin: np.ndarray, direction: np.ndarray, max_dist: np.ndarray | float) -> np.ndarray:
        """(N, 3) origins (m), (N, 3) directions, max distances (m; scalar or (N,), may be inf)
        -> (N,) distance (m) along each ray to the first point inside or on a wall prism (at or
        below the wall's top) or on the map bounds, which act as infinitely tall walls; np.inf
        when there is none within max_dist. 0 when the origin is inside a wall or not strictly
        inside the bounds.

        Directions are normalised here, so any non-zero length works. Raises ValueError for NaN,
        inf (except max_dist = +inf), zero directions or negative max_dist.
        """
        o = _as_points("origin", origin, (3,))
        d = _as_points("direction", direction, (3,))
        _same_rows("origin", o, "direction", d)
        norm = np.linalg.norm(d, axis=1)
        if np.any(norm == 0.0):
            raise ValueError(f"direction has zero length (first bad row {int(np.flatnonzero(norm == 0.0)[0])})")
        d = d / norm[:, np.newaxis]
        md = np.broadcast_to(np.asarray(max_dist, dtype=np.float64), (len(o),))
        if np.isnan(md).any() or (md < 0.0).any():
            raise ValueError("max_dist must be non-negative and not NaN (+inf is allowed)")
        return self._first_entry(o, d, md.copy(), any_hit=False)

    # ---------------------------------------------------------------- points

    def _outside_bounds(self, x: np.ndarray, y: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Not strictly inside the bounds shrunk by ``margin`` (m): on the border counts as out."""
        xmin, ymin, xmax, ymax = self._bounds
        return (x <= xmin + margin) | (x >= xmax - margin) | (y <= ymin + margin) | (y >= ymax - margin)

    def point_in_wall(self, p: np.ndarray) -> np.ndarray:
        """(N, 2) or (N, 3) points (m) -> (N,) bool: inside or on a wall footprint, or on or
        outside the bounds. For (N, 3) a point is inside a wall only at or below its top
        (z <= height); the floor is not solid, so z < 0 outside every footprint is free."""
        pts = _as_points("p", p, (2, 3))
        x, y = pts[:, 0], pts[:, 1]
        result = self._outside_bounds(x, y)
        if not self._unions:
            return result
        if pts.shape[1] == 2:
            rest = np.flatnonzero(~result)
            result[rest] = shapely.intersects_xy(self._all_walls, x[rest], y[rest])
            return result
        # Walls at least as tall as z: the union for the smallest distinct height >= z.
        group = np.searchsorted(self._heights, pts[:, 2], side="left")
        for k, union in enumerate(self._unions):
            rows = np.flatnonzero(~result & (group == k))
            if len(rows):
                result[rows] = shapely.intersects_xy(union, x[rows], y[rows])
        return result

    def circle_blocked(self, p: np.ndarray, radius: float | None = None) -> np.ndarray:
        """(N, 2) centres (m) -> (N,) bool: a circle of ``radius`` (m, default the player radius)
        there overlaps or touches a wall of any height, or is not strictly inside the bounds."""
        pts = _as_points("p", p, (2,))
        r = self.player_radius if radius is None else float(radius)
        if not (math.isfinite(r) and r >= 0.0):
            raise ValueError(f"radius must be a non-negative finite number of meters, got {radius!r}")
        result = self._outside_bounds(pts[:, 0], pts[:, 1], margin=r)
        rest = np.flatnonzero(~result)
        if len(rest) and self._unions:
            result[rest] = shapely.dwithin(self._all_walls, shapely.points(pts[rest]), r)
        return result

    # -------------------------------------------------------------- movement

    def sweep(self, p0: np.ndarray, p1: np.ndarray) -> SweepResult:
        """Move player circles (radius ``player_radius``, m) from p0 to p1 ((N, 2), m), stopping
        at the first contact with a wall of any height or the bounds.

        On contact the end is the contact position pushed SWEEP_SKIN_M (m) out along the contact
        normal, so it is never inside a wall (wedged in an acute corner, where that push would
        touch the other wall, it backs off along the path instead, or stays at p0). Without
        contact the end is p1 exactly. A start that already overlaps a wall (never produced by
        this method) may only move away from what it overlaps. Raises ValueError for NaN/inf or
        mismatched shapes.
        """
        a = _as_points("p0", p0, (2,))
        b = _as_points("p1", p1, (2,))
        _same_rows("p0", a, "p1", b)
        n = len(a)
        ax, ay = a[:, 0], a[:, 1]
        dx, dy = b[:, 0] - ax, b[:, 1] - ay
        best = np.full(n, np.inf)
        nrm = np.zeros((n, 2))

        self._sweep_bounds(best, nrm, ax, ay, dx, dy)
        self._sweep_edges(best, nrm, ax, ay, dx, dy)

        hit = np.isfinite(best)
        end = b.copy()
        fraction = np.ones(n)
        if hit.any():
            rows = np.flatnonzero(hit)
            t = best[rows]
            fraction[rows] = t
            contact = np.stack([ax[rows] + t * dx[rows], ay[rows] + t * dy[rows]], axis=1)
            pushed = contact + SWEEP_SKIN_M * nrm[rows]
            stuck = np.flatnonzero(self.circle_blocked(pushed))
            if len(stuck):
                # Wedged (an acute corner): back off along the path instead, else stay put.
                sr = rows[stuck]
                length = np.hypot(dx[sr], dy[sr])
                back = np.maximum(t[stuck] - SWEEP_SKIN_M / np.maximum(length, 1e-300), 0.0)
                retreat = np.stack([ax[sr] + back * dx[sr], ay[sr] + back * dy[sr]], axis=1)
                still = self.circle_blocked(retreat)
                retreat[still] = a[sr[still]]
                pushed[stuck] = retreat
            end[rows] = pushed
        return SweepResult(end=end, fraction=fraction, hit=hit, normal=nrm)

    def _sweep_bounds(
        self, best: np.ndarray, nrm: np.ndarray, ax: np.ndarray, ay: np.ndarray, dx: np.ndarray, dy: np.ndarray
    ) -> None:
        r = self.player_radius
        xmin, ymin, xmax, ymax = self._bounds
        with np.errstate(divide="ignore", invalid="ignore"):
            for pos, vel, lo, hi, axis in ((ax, dx, xmin + r, xmax - r, 0), (ay, dy, ymin + r, ymax - r, 1)):
                # Time to reach the inner (shrunk) bounds; a start already past them moving out
                # stops at once.
                t_hi = np.where(vel > 0.0, np.maximum((hi - pos) / vel, 0.0), np.inf)
                t_lo = np.where(vel < 0.0, np.maximum((lo - pos) / vel, 0.0), np.inf)
                for t, sign in ((t_hi, -1.0), (t_lo, 1.0)):
                    better = (t <= 1.0) & (t < best)
                    best[better] = t[better]
                    nrm[better] = 0.0
                    nrm[better, axis] = sign

    def _sweep_edges(
        self, best: np.ndarray, nrm: np.ndarray, ax: np.ndarray, ay: np.ndarray, dx: np.ndarray, dy: np.ndarray
    ) -> None:
        if not len(self._eh):
            return
        r = self.player_radius
        # Walk only the part of the path inside the bounds box: contacts beyond it are preceded
        # by the bounds contact anyway.
        t0, t1 = _box_interval(ax, ay, dx, dy, self._bounds)
        t0, t1 = np.maximum(t0, 0.0), np.minimum(t1, 1.0)
        walk = np.flatnonzero(t0 <= t1)
        seg, cell = _cells_along(
            self._move_grid,
            ax[walk] + t0[walk] * dx[walk],
            ay[walk] + t0[walk] * dy[walk],
            ax[walk] + t1[walk] * dx[walk],
            ay[walk] + t1[walk] * dy[walk],
        )
        seg, edge = _items_along(self._move_grid, walk[seg], cell)
        if not len(seg):
            return
        px, py, qx, qy = ax[seg], ay[seg], dx[seg], dy[seg]
        e0x, e0y, fx, fy = self._e0x[edge], self._e0y[edge], self._fx[edge], self._fy[edge]
        onx, ony = self._onx[edge], self._ony[edge]
        wx, wy = px - e0x, py - e0y

        cand_t: list[np.ndarray] = []
        cand_seg: list[np.ndarray] = []
        cand_nx: list[np.ndarray] = []
        cand_ny: list[np.ndarray] = []

        # Face: the edge's outward offset line at distance r, reached while approaching it.
        s0 = wx * onx + wy * ony
        sd = qx * onx + qy * ony
        with np.errstate(divide="ignore", invalid="ignore"):
            tf = (r - s0) / sd
            u = ((wx + tf * qx) * fx + (wy + tf * qy) * fy) * self._inv_len2[edge]
        face = (sd < 0.0) & (s0 >= r) & (tf <= 1.0) & (u >= 0.0) & (u <= 1.0)
        cand_t.append(tf[face])
        cand_seg.append(seg[face])
        cand_nx.append(onx[face])
        cand_ny.append(ony[face])

        # Vertex E0 of each edge: entry root of |A + tD - E0| = r while approaching.
        qa = qx * qx + qy * qy
        qb = qx * wx + qy * wy
        qc = wx * wx + wy * wy - r * r
        disc = qb * qb - qa * qc
        vert = (qc >= 0.0) & (qb < 0.0) & (disc >= 0.0) & (qa > 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tv = (-qb - np.sqrt(np.maximum(disc, 0.0))) / qa
        vert &= tv <= 1.0
        tv = np.maximum(tv[vert], 0.0)
        vx = wx[vert] + tv * qx[vert]
        vy = wy[vert] + tv * qy[vert]
        vlen = np.hypot(vx, vy)
        vlen = np.where(vlen > 0.0, vlen, 1.0)
        cand_t.append(tv)
        cand_seg.append(seg[vert])
        cand_nx.append(vx / vlen)
        cand_ny.append(vy / vlen)

        # Already overlapping an edge: only motion away from it is allowed.
        uc = np.clip((wx * fx + wy * fy) * self._inv_len2[edge], 0.0, 1.0)
        rx, ry = wx - uc * fx, wy - uc * fy
        d2 = rx * rx + ry * ry
        over = d2 < r * r
        if over.any():
            dist = np.sqrt(d2[over])
            safe = dist > 0.0
            rxn = np.where(safe, rx[over] / np.where(safe, dist, 1.0), onx[over])
            ryn = np.where(safe, ry[over] / np.where(safe, dist, 1.0), ony[over])
            into = qx[over] * rxn + qy[over] * ryn < 0.0
            cand_t.append(np.zeros(int(into.sum())))
            cand_seg.append(seg[over][into])
            cand_nx.append(rxn[into])
            cand_ny.append(ryn[into])

        t = np.concatenate(cand_t)
        if not len(t):
            return
        s = np.concatenate(cand_seg)
        cnx, cny = np.concatenate(cand_nx), np.concatenate(cand_ny)
        order = np.lexsort((t, s))
        s, t, cnx, cny = s[order], t[order], cnx[order], cny[order]
        first = np.ones(len(s), dtype=bool)
        first[1:] = s[1:] != s[:-1]
        s, t, cnx, cny = s[first], t[first], cnx[first], cny[first]
        better = t < best[s]
        s = s[better]
        best[s] = t[better]
        nrm[s, 0] = cnx[better]
        nrm[s, 1] = cny[better]
