"""Prepared wall geometry of a map with batched line-of-sight, ray, point and movement queries.

Walls are vertical prisms: footprint polygon x, y (meters), solid from the floor up to the
wall's height. The map bounds act as infinitely tall walls for every query: rays stop at them,
players cannot leave them, and points on or outside them count as inside a wall. Solids are
closed: touching a wall (a face, an edge, the top) counts as hitting it.

All queries take batches (numpy arrays, one row per query). Rays are exact (no sampling of
the answer; float rounding only):

* every footprint becomes convex pieces: itself when convex, else boxes (rectilinear footprints
  cut along their vertices) or triangles; a prism is the union of its pieces' prisms, so the
  first entry into a wall is the first entry into any of its pieces;
* a fine uniform grid over the bounds lists in each cell every piece within half a cell of it;
  a ray sampled once per cell length meets every piece it touches, so its cost scales with the
  walls near it, not with the map, and it stops at the first wall (:mod:`world.ray_kernel`, a
  compiled walk, one ray at a time);
* z is linear along a ray, so against one convex prism the ray is a clipping problem: intersect
  the ray's parameter interval with each edge's half-plane (a slab test for boxes, Cyrus-Beck for
  other convex pieces) and with the interval where z <= height. The entry parameter of that
  interval is the hit; this covers side faces, the top face and rays starting inside.

Point queries (:meth:`MapGeometry.point_in_wall`) use prepared shapely unions of the footprints
(one per distinct wall height).

Movement (:meth:`MapGeometry.sweep`) works on the original footprint edges grown by the player
radius (the Minkowski sum: offset edges plus a circle per vertex), over a coarser grid of
edges, circle by circle in a compiled kernel (:mod:`world.sweep_kernel`): the server and the
bots sweep a few circles at a time, many times per tick. :meth:`MapGeometry.circle_blocked` runs
in the same kernel up to the player radius (larger circles ask shapely).
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import shapely

from world import sweep_kernel
from world.constants import PLAYER_RADIUS_M
from world.mapfile import GameMap
from world.ray_kernel import RayTables, first_entries, first_entries_checked, first_entry
from world.sweep_kernel import SWEEP_SKIN_M, SweepTables

log = logging.getLogger(__name__)

DEFAULT_CELL_SIZE_M: Final = 4.0
"""Broadphase grid cell size (m) of sweeps. About the size of a building wall segment: smaller
cells cost more cell visits per move, larger ones more edge tests per cell."""

_LOS_PAD_M: Final = 1e-6
"""Pieces are registered in every cell within this distance (m), so float rounding in the ray's
cell walk can never skip a piece lying exactly on a cell border."""

_MAX_CELLS: Final = 250_000
"""Upper bound on grid cells (memory and build time); the cell size grows for huge maps."""

_RAY_CELL_M: Final = 2.0
"""Cell size (m) of the ray kernel's sampling grid (at most the broadphase cell)."""

_SKIP_CAP: Final = 64
"""Largest clearance (fine cells) tracked for skipping empty stretches of a ray."""

_SWEEP_BOX_PAD_M: Final = 1e-6
"""Margin (m) of the per-edge boxes that let the sweep kernel skip edges far from the path."""

_FOOTPRINT_PAD_M: Final = 1e-6
"""Footprints are listed in every sweep cell within this distance (m), so rounding in a point's
cell index can never miss the footprint it is inside."""


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
    if not np.isfinite(arr).all():
        bad = ~np.isfinite(arr).all(axis=1)
        raise ValueError(f"{name} contains NaN or inf (first bad row {int(np.flatnonzero(bad)[0])})")
    return arr


def _one_row(value: object, dims: tuple[int, ...]) -> list[float] | None:
    """The coordinates of a single finite point given as a float64 array of shape (d,) or
    (1, d), d in ``dims``, as Python floats; None for anything else, which then goes through
    :func:`_as_points` (same answers and errors, only slower)."""
    if type(value) is not np.ndarray or value.dtype != np.float64 or value.size not in dims or value.ndim > 2:
        return None
    if value.ndim == 2 and value.shape[0] != 1:
        return None
    row: list[float] = value.ravel().tolist()
    # A sum of finite values is finite unless it overflows (then the slow path decides).
    return row if math.isfinite(sum(row)) else None


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
        self._bounds_f = (float(xmin), float(ymin), float(xmax), float(ymax))
        self._build_rays(polys, heights, cell)
        self._build_edges(polys, cell)

        # Union of the footprints at least as tall as each distinct height: a point at height z
        # is inside a (closed) prism iff it is inside the union for the smallest height >= z.
        self._heights = np.unique(heights)
        self._heights_list = self._heights.tolist()
        self._unions: list[shapely.Geometry] = []
        for h in self._heights:
            union = shapely.union_all(polys[heights >= h])
            shapely.prepare(union)
            self._unions.append(union)
        self._all_walls = self._unions[0] if self._unions else shapely.Polygon()
        log.debug(
            "geometry for %r: %d walls -> %d boxes + %d convex pieces, %d edges, ray cells of %.2f m",
            game_map.name,
            len(game_map.walls),
            self._rays.n_box,
            len(self._rays.cv_height),
            len(self._sweep.edges),
            self._rays.frame[4],
        )

    def _build_rays(self, polys: np.ndarray, heights: np.ndarray, cell: float) -> None:
        """The ray kernel's tables (see :mod:`world.ray_kernel`): every footprint cut into convex
        pieces (boxes as columns x0, y0, x1, y1, height; other pieces as their edge half-planes),
        a fine grid whose cells list every piece within half a cell (so sampling a ray once per
        cell length finds every piece it touches), and per empty cell how far a ray may skip."""
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
        k = max((len(r) for r in rings), default=1)
        planes = np.zeros((len(rings), k, 3))
        for i, ring in enumerate(rings):
            # Half-plane n . x <= c of each edge, n the (unnormalised) outward normal.
            p, q = ring, np.roll(ring, -1, axis=0)
            ex, ey = q[:, 1] - p[:, 1], p[:, 0] - q[:, 0]
            planes[i, : len(ring)] = np.column_stack([ex, ey, ex * p[:, 0] + ey * p[:, 1]])
        geoms = np.array(box_geoms + [shapely.Polygon(r) for r in rings], dtype=object)
        xmin, ymin, xmax, ymax = self.game_map.bounds
        fine = max(min(cell, _RAY_CELL_M), math.sqrt((xmax - xmin) * (ymax - ymin) / _MAX_CELLS))
        grid = _build_grid(self.game_map.bounds, fine, geoms, 0.5 * fine + _LOS_PAD_M)
        # Per empty cell, how many samples a ray may skip from it: D - 1 (at least 1) for a cell
        # D cells (Chebyshev) from the nearest listed one; samples one cell length apart move at
        # most one cell per sample along each axis (one more for rounding).
        occupied = (np.diff(grid.start) > 0).reshape(grid.nx, grid.ny)
        clearance = np.where(occupied, 0, _SKIP_CAP)
        reached = occupied.copy()
        for dist in range(1, _SKIP_CAP):
            if reached.all() or not reached.any():
                break
            grown = reached.copy()
            grown[1:] |= reached[:-1]
            grown[:-1] |= reached[1:]
            grown[:, 1:] |= grown[:, :-1].copy()
            grown[:, :-1] |= grown[:, 1:].copy()
            clearance[grown & ~reached] = dist
            reached = grown
        self._rays = RayTables(
            # Sample positions (cell units) are clamped below these, which truncates to the last cell.
            frame=np.array([*self._bounds_f, fine, 1.0 / fine, grid.nx - 0.5, grid.ny - 0.5]),
            ny=int(grid.ny),
            n_box=len(boxes),
            boxes=np.array(boxes, dtype=np.float64).reshape(-1, 5),
            cv_height=np.array(ring_heights, dtype=np.float64),
            cv_planes=planes,
            cv_edges=np.array([len(r) for r in rings], dtype=np.int64),
            cell_start=grid.start.astype(np.int64),
            cell_items=grid.items.astype(np.int64),
            skip=np.maximum(clearance - 1, 1).ravel().astype(np.int64),
        )
        self._ray_args = self._rays.args()
        # Compile (or load from numba's cache) the entry points now, not inside a server tick.
        first_entries(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), True, *self._ray_args)
        first_entry(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, True, *self._ray_args)
        first_entries_checked(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0), *self._ray_args)

    def _build_edges(self, polys: np.ndarray, cell: float) -> None:
        """The sweep kernel's tables (see :mod:`world.sweep_kernel`): the original footprint edges
        (counter-clockwise, outward normal (fy, -fx)), a grid whose cells list every edge within
        the player radius (and a margin), and one listing the footprints touching each cell."""
        r = self.player_radius
        rings = [_ccw_ring(poly) for poly in polys]
        a = np.concatenate(rings) if rings else np.zeros((0, 2))
        b = np.concatenate([np.roll(ring, -1, axis=0) for ring in rings]) if rings else np.zeros((0, 2))
        f = b - a
        length = np.hypot(f[:, 0], f[:, 1])
        # Each edge's box grown by the radius plus a margin far above rounding lets a sweep skip
        # edges far from its path.
        grow = r + _SWEEP_BOX_PAD_M
        edges = np.column_stack([
            a, f,
            # + 0.0 turns -0.0 into 0.0 so reported normals print cleanly.
            f[:, 1] / length + 0.0, -f[:, 0] / length + 0.0,
            1.0 / (length * length),
            np.minimum(a[:, 0], b[:, 0]) - grow, np.minimum(a[:, 1], b[:, 1]) - grow,
            np.maximum(a[:, 0], b[:, 0]) + grow, np.maximum(a[:, 1], b[:, 1]) + grow,
            b,
        ])  # fmt: skip
        lines = shapely.linestrings(np.stack([a, b], axis=1)) if len(a) else np.zeros(0, object)
        grid = _build_grid(self.game_map.bounds, cell, lines, r * 1.01 + 10 * SWEEP_SKIN_M)
        footprints = _build_grid(self.game_map.bounds, cell, polys, _FOOTPRINT_PAD_M)
        xmin, ymin, xmax, ymax = self._bounds_f
        self._sweep = SweepTables(
            frame=np.array([xmin, ymin, xmax, ymax, xmin + r, ymin + r, xmax - r, ymax - r, r, grid.cell]),
            gnx=int(grid.nx),
            gny=int(grid.ny),
            edges=np.ascontiguousarray(edges, dtype=np.float64).reshape(-1, sweep_kernel.EDGE_COLUMNS),
            cell_start=grid.start.astype(np.int64),
            cell_edges=grid.items.astype(np.int64),
            poly_first=np.concatenate([[0], np.cumsum([len(ring) for ring in rings])]).astype(np.int64),
            cell_poly_start=footprints.start.astype(np.int64),
            cell_polys=footprints.items.astype(np.int64),
        )
        self._sweep_args = self._sweep.args()
        # Compile (or load from numba's cache) the entry points now, not inside a server tick.
        sweep_kernel.sweep(xmin, ymin, xmin, ymin, *self._sweep_args)
        sweep_kernel.sweep_rows(np.zeros((0, 2)), np.zeros((0, 2)), *self._sweep_args)
        sweep_kernel.circles_blocked(np.zeros((0, 2)), r, *self._sweep_args)
        # A single circle goes to the scalar kernel straight from Python (circle_blocked's one-row path).
        sweep_kernel.circle_blocked(xmin, ymin, r, *self._sweep_args)

    # ------------------------------------------------------------------ rays

    @property
    def ray_args(self) -> tuple[object, ...]:
        """This map's arguments of the compiled ray walk (:func:`world.ray_kernel.ray_walk`), for
        kernels elsewhere that cast their own rays."""
        return self._ray_args

    def los_clear(self, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
        """(N, 3), (N, 3) points (m) -> (N,) bool: True when the segment p0->p1 touches no wall
        prism (footprint x height, m) and stays strictly inside the bounds.

        A segment passing above a wall's top passes over it; touching a wall (a face, its top)
        counts as blocked. Raises ValueError for NaN/inf or mismatched shapes.
        """
        ra, rb = _one_row(p0, (3,)), _one_row(p1, (3,))
        if ra is not None and rb is not None:
            ax, ay, az = ra
            bx, by, bz = rb
            t = first_entry(ax, ay, az, bx - ax, by - ay, bz - az, 1.0, True, *self._ray_args)
            return np.array([t == math.inf])
        a = _as_points("p0", p0, (3,))
        b = _as_points("p1", p1, (3,))
        _same_rows("p0", a, "p1", b)
        best = first_entries(a, b - a, np.ones(len(a)), True, *self._ray_args)
        return ~np.isfinite(best)

    def first_wall_hit(self, origin: np.ndarray, direction: np.ndarray, max_dist: np.ndarray | float) -> np.ndarray:
        """(N, 3) origins (m), (N, 3) directions, max distances (m; scalar or (N,), may be inf)
        -> (N,) distance (m) along each ray to the first point inside or on a wall prism (at or
        below the wall's top) or on the map bounds, which act as infinitely tall walls; np.inf
        when there is none within max_dist. 0 (always +0.0) when the origin is inside or on a
        wall or not strictly inside the bounds.

        Directions are normalised here, so any non-zero length works. Raises ValueError for NaN,
        inf (except max_dist = +inf), zero directions or negative max_dist.
        """
        ro, rd = _one_row(origin, (3,)), _one_row(direction, (3,))
        if ro is not None and rd is not None:
            if isinstance(max_dist, (float, int)):
                limit = float(max_dist)
            elif type(max_dist) is np.ndarray and max_dist.shape in ((), (1,)) and max_dist.dtype == np.float64:
                limit = max_dist.item()
            else:
                limit = math.nan  # anything else: the general path
            dx, dy, dz = rd
            # np.linalg.norm's operations: (dx^2 + dy^2) + dz^2, correctly rounded sqrt.
            norm = math.sqrt(dx * dx + dy * dy + dz * dz)
            if norm > 0.0 and limit >= 0.0:
                t = first_entry(*ro, dx / norm, dy / norm, dz / norm, limit, False, *self._ray_args)
                return np.array([t + 0.0])
        if (
            type(origin) is np.ndarray and type(direction) is np.ndarray and origin.dtype == direction.dtype == np.float64
            and origin.ndim == 2 and origin.shape[1] == 3 and direction.shape == origin.shape
        ):
            o, d = origin, direction  # a batch as hit registration hands it: nothing to convert
        else:
            o = _as_points("origin", origin, (3,))
            d = _as_points("direction", direction, (3,))
            _same_rows("origin", o, "direction", d)
        # A copy the kernel may read; np.broadcast_to (~5 us) only for a scalar or shorter max_dist.
        md = np.array(max_dist, dtype=np.float64)
        if md.shape != (len(o),):
            md = np.broadcast_to(md, (len(o),)).copy()
        best = np.empty(len(o))
        # Checks, normalisation and walk in one compiled pass; it gives up on any fault, which the
        # checks below then name, in the order they have always been made.
        if first_entries_checked(np.ascontiguousarray(o), np.ascontiguousarray(d), md, best, *self._ray_args):
            return best
        o = _as_points("origin", o, (3,))
        d = _as_points("direction", d, (3,))
        norm = np.sqrt(np.add.reduce(d * d, axis=1))
        if not norm.all():
            raise ValueError(f"direction has zero length (first bad row {int(np.flatnonzero(norm == 0.0)[0])})")
        raise ValueError("max_dist must be non-negative and not NaN (+inf is allowed)")

    # ---------------------------------------------------------------- points

    def _outside_bounds(self, x: np.ndarray, y: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Not strictly inside the bounds shrunk by ``margin`` (m): on the border counts as out."""
        xmin, ymin, xmax, ymax = self._bounds
        return (x <= xmin + margin) | (x >= xmax - margin) | (y <= ymin + margin) | (y >= ymax - margin)

    def point_in_wall(self, p: np.ndarray) -> np.ndarray:
        """(N, 2) or (N, 3) points (m) -> (N,) bool: inside or on a wall footprint, or on or
        outside the bounds. For (N, 3) a point is inside a wall only at or below its top
        (z <= height); the floor is not solid, so z < 0 outside every footprint is free."""
        row = _one_row(p, (2, 3))
        if row is not None:
            return np.array([self._point_in_wall_one(row)])
        pts = _as_points("p", p, (2, 3))
        if len(pts) == 1:
            return np.array([self._point_in_wall_one(pts[0].tolist())])
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

    def _point_in_wall_one(self, p: list[float]) -> bool:
        """:meth:`point_in_wall` of one point (a list of 2 or 3 floats) with Python scalars."""
        x, y = p[0], p[1]
        xmin, ymin, xmax, ymax = self._bounds_f
        if x <= xmin or x >= xmax or y <= ymin or y >= ymax:
            return True
        if not self._unions:
            return False
        if len(p) == 2:
            return bool(shapely.intersects_xy(self._all_walls, x, y))
        k = bisect.bisect_left(self._heights_list, p[2])  # np.searchsorted(..., side="left")
        return k < len(self._unions) and bool(shapely.intersects_xy(self._unions[k], x, y))

    def circle_blocked(self, p: np.ndarray, radius: float | None = None) -> np.ndarray:
        """(N, 2) centres (m) -> (N,) bool: a circle of ``radius`` (m, default the player radius)
        there overlaps or touches a wall of any height, or is not strictly inside the bounds."""
        row = _one_row(p, (2,)) if radius is None else None
        if row is not None:
            return np.array([sweep_kernel.circle_blocked(row[0], row[1], self.player_radius, *self._sweep_args)])
        pts = _as_points("p", p, (2,))
        r = self.player_radius if radius is None else float(radius)
        if not (math.isfinite(r) and r >= 0.0):
            raise ValueError(f"radius must be a non-negative finite number of meters, got {radius!r}")
        if r <= self.player_radius:
            # The sweep kernel's cells list every edge within the player radius of them.
            return sweep_kernel.circles_blocked(np.ascontiguousarray(pts), r, *self._sweep_args)
        result = self._outside_bounds(pts[:, 0], pts[:, 1], margin=r)
        rest = np.flatnonzero(~result)
        if len(rest) and self._unions:
            result[rest] = shapely.dwithin(self._all_walls, shapely.points(pts[rest]), r)
        return result

    # -------------------------------------------------------------- movement

    @property
    def sweep_args(self) -> tuple[object, ...]:
        """This map's arguments of the compiled sweep kernels (:mod:`world.sweep_kernel`), for
        kernels elsewhere that move players themselves."""
        return self._sweep_args

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
        ra, rb = _one_row(p0, (2,)), _one_row(p1, (2,))
        if ra is not None and rb is not None:
            ex, ey, t, hit, nx, ny = sweep_kernel.sweep(ra[0], ra[1], rb[0], rb[1], *self._sweep_args)
            return SweepResult(
                end=np.array([[ex, ey]]), fraction=np.array([t]), hit=np.array([hit]), normal=np.array([[nx, ny]])
            )
        a = _as_points("p0", p0, (2,))
        b = _as_points("p1", p1, (2,))
        _same_rows("p0", a, "p1", b)
        end, fraction, hit, normal = sweep_kernel.sweep_rows(
            np.ascontiguousarray(a), np.ascontiguousarray(b), *self._sweep_args
        )
        return SweepResult(end=end, fraction=fraction, hit=hit, normal=normal)
