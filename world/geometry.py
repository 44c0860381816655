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

Point queries (:meth:`MapGeometry.point_in_wall`, :meth:`MapGeometry.circle_blocked`) use prepared
shapely unions of the footprints (one per distinct wall height).

Movement (:meth:`MapGeometry.sweep`) works on the original footprint edges grown by the player
radius (the Minkowski sum: offset edges plus a circle per vertex), over a coarser grid of
edges. The server and the bots sweep a few circles at a time, many times per tick, where a numpy
call's fixed cost (about a microsecond) dominates: sweeps of up to _SCALAR_SWEEP_ROWS circles
run circle by circle with Python floats over the same cells and edges, in the same order, as
the batched kernel (so ties pick the same normal). Single points skip the array plumbing around
the shapely predicates.
"""

# The scalar (small-batch) paths write min / max as conditional expressions on purpose: they are
# several times cheaper than the builtins, and "a if a < b else b" keeps np.minimum's choice on
# ties (the second operand), which fixes the sign of a zero result the same way.
# ruff: noqa: FURB136, PLR1730

from __future__ import annotations

import bisect
import itertools
import logging
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import shapely

from world.constants import PLAYER_RADIUS_M
from world.mapfile import GameMap
from world.ray_kernel import RayTables, first_entries, first_entry

log = logging.getLogger(__name__)

SWEEP_SKIN_M: Final = 1e-3
"""Clearance (m) a sweep leaves between the player circle and the wall it stopped against, so
the end position is strictly outside every wall despite float rounding."""

DEFAULT_CELL_SIZE_M: Final = 4.0
"""Broadphase grid cell size (m) of sweeps. About the size of a building wall segment: smaller
cells cost more cell visits per move, larger ones more edge tests per cell."""

_CORNER_EPS: Final = 1e-9
"""A grid-line crossing this close (cell units) to a grid line of the other axis is treated as
passing through the grid corner (see :func:`_cells_along`); far above coordinate rounding."""

_LOS_PAD_M: Final = 1e-6
"""Pieces are registered in every cell within this distance (m), so float rounding in the ray's
cell walk can never skip a piece lying exactly on a cell border."""

_MAX_CELLS: Final = 250_000
"""Upper bound on grid cells (memory and build time); the cell size grows for huge maps."""

_RAY_CELL_M: Final = 2.0
"""Cell size (m) of the ray kernel's sampling grid (at most the broadphase cell)."""

_SCALAR_SWEEP_ROWS: Final = 24
"""Sweeps of at most this many circles run circle by circle with Python floats (see
:meth:`MapGeometry._sweep_one`): a short move meets few edges (measured: this beats the batched
kernel up to about 30 circles, moves of 0.2 to 10 m)."""

_SKIP_CAP: Final = 64
"""Largest clearance (fine cells) tracked for skipping empty stretches of a ray."""

_SWEEP_BOX_PAD_M: Final = 1e-6
"""Margin (m) of the per-edge boxes that let the scalar sweep skip edges far from the path."""


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
    cell plus, for every grid line crossed, the cell on the far side of that line. Through a grid
    corner, rounding can put both crossings there on the wrong side of the other line and skip
    the diagonal cell: a crossing within _CORNER_EPS (cell units) of the other axis's grid line
    also adds the cell on the other side of it (after the axis's crossings).
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
        at = go[seg] + t * do_[seg]
        other = np.clip(at.astype(np.int64), 0, n_other - 1)
        keep = (entered >= 0) & (entered < n_along)
        frac = at - np.floor(at)
        corner = np.flatnonzero(keep & (np.abs(frac - 0.5) > 0.5 - _CORNER_EPS))
        seg_k, entered_k, other_k = seg[keep], entered[keep], other[keep]
        rows.append(seg_k)
        cells.append(entered_k * grid.ny + other_k if along_x else other_k * grid.ny + entered_k)
        if len(corner):
            seg_c, entered_c = seg[corner], entered[corner]
            other_c = np.clip(np.where(frac[corner] < 0.5, other[corner] - 1, other[corner] + 1), 0, n_other - 1)
            rows.append(seg_c)
            cells.append(entered_c * grid.ny + other_c if along_x else other_c * grid.ny + entered_c)
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
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
        # Sweeps: the bounds shrunk by the radius, as _sweep_bounds computes them.
        self._sw_lo = np.array([xmin + self.player_radius, ymin + self.player_radius])
        self._sw_hi = np.array([xmax - self.player_radius, ymax - self.player_radius])
        self._bounds_f = (float(xmin), float(ymin), float(xmax), float(ymax))
        self._sw_bounds_f = (
            float(self._sw_lo[0]), float(self._sw_lo[1]), float(self._sw_hi[0]), float(self._sw_hi[1])
        )
        self._build_rays(polys, heights, cell)
        self._build_edges(polys, heights, cell)

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
            len(self._eh),
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
        # Compile (or load from numba's cache) both entry points now, not inside a server tick.
        first_entries(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), True, *self._ray_args)
        first_entry(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, True, *self._ray_args)

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
        # Sweeps of a few circles with Python floats: per cell its edge ids (CSR order), per edge
        # its columns and its bounding box grown by the radius plus a margin far above rounding.
        grow = self.player_radius + _SWEEP_BOX_PAD_M
        bx0, bx1 = np.minimum(a[:, 0], b[:, 0]) - grow, np.maximum(a[:, 0], b[:, 0]) + grow
        by0, by1 = np.minimum(a[:, 1], b[:, 1]) - grow, np.maximum(a[:, 1], b[:, 1]) + grow
        self._edge_rows: list[tuple[float, ...]] = [
            tuple(row)
            for row in np.stack(
                [self._e0x, self._e0y, self._fx, self._fy, self._onx, self._ony, self._inv_len2, bx0, by0, bx1, by1],
                axis=1,
            ).tolist()
        ]
        starts = self._move_grid.start.tolist()
        items = self._move_grid.items.tolist()
        self._cell_edges: list[tuple[int, ...]] = [tuple(items[i:j]) for i, j in itertools.pairwise(starts)]

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
        o = _as_points("origin", origin, (3,))
        d = _as_points("direction", direction, (3,))
        _same_rows("origin", o, "direction", d)
        # np.linalg.norm(d, axis=1) without its wrapper: the same operations, the same values.
        norm = np.sqrt(np.add.reduce(d * d, axis=1))
        if not norm.all():
            raise ValueError(f"direction has zero length (first bad row {int(np.flatnonzero(norm == 0.0)[0])})")
        d = d / norm[:, np.newaxis]
        md = np.broadcast_to(np.asarray(max_dist, dtype=np.float64), (len(o),))
        if not (md >= 0.0).all():  # also catches NaN
            raise ValueError("max_dist must be non-negative and not NaN (+inf is allowed)")
        best = first_entries(o, d, md.copy(), False, *self._ray_args)
        # A ray starting on a face can enter two pieces (or enter one and touch another) at
        # 0.0 and -0.0, and which one is kept depends on the order the pieces are met in (so on
        # the grid): + 0.0 makes every zero distance 0.0.
        best += 0.0
        return best

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
            return np.array([self._circle_blocked_xy(row[0], row[1], self.player_radius)])
        pts = _as_points("p", p, (2,))
        r = self.player_radius if radius is None else float(radius)
        if not (math.isfinite(r) and r >= 0.0):
            raise ValueError(f"radius must be a non-negative finite number of meters, got {radius!r}")
        return self._circle_blocked(pts, r)

    def _circle_blocked(self, pts: np.ndarray, r: float) -> np.ndarray:
        """:meth:`circle_blocked` of validated (N, 2) centres."""
        if len(pts) == 1:
            return np.array([self._circle_blocked_xy(*pts[0].tolist(), r)])
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
        ra, rb = _one_row(p0, (2,)), _one_row(p1, (2,))
        if ra is not None and rb is not None:
            return self._sweep_single(ra[0], ra[1], rb[0], rb[1])
        a = _as_points("p0", p0, (2,))
        b = _as_points("p1", p1, (2,))
        _same_rows("p0", a, "p1", b)
        n = len(a)
        d = b - a
        if n == 1:
            return self._sweep_single(*a[0].tolist(), *b[0].tolist())
        ax, ay = a[:, 0], a[:, 1]
        dx, dy = d[:, 0], d[:, 1]
        if n <= _SCALAR_SWEEP_ROWS:
            rows = [self._sweep_one(*row) for row in np.concatenate([a, d], axis=1).tolist()]
            best = np.array([row[0] for row in rows])
            nrm = np.array([row[1:] for row in rows])
        else:
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
            stuck = np.flatnonzero(self._circle_blocked(pushed, self.player_radius))
            if len(stuck):
                # Wedged (an acute corner): back off along the path instead, else stay put.
                sr = rows[stuck]
                length = np.hypot(dx[sr], dy[sr])
                back = np.maximum(t[stuck] - SWEEP_SKIN_M / np.maximum(length, 1e-300), 0.0)
                retreat = np.stack([ax[sr] + back * dx[sr], ay[sr] + back * dy[sr]], axis=1)
                still = self._circle_blocked(retreat, self.player_radius)
                retreat[still] = a[sr[still]]
                pushed[stuck] = retreat
            end[rows] = pushed
        return SweepResult(end=end, fraction=fraction, hit=hit, normal=nrm)

    def _sweep_single(self, ax: float, ay: float, bx: float, by: float) -> SweepResult:
        """:meth:`sweep` of one circle with Python floats (the same float operations)."""
        dx, dy = bx - ax, by - ay
        t, nx, ny = self._sweep_one(ax, ay, dx, dy)
        if t == math.inf:
            return SweepResult(
                end=np.array([[bx, by]]), fraction=np.ones(1), hit=np.zeros(1, dtype=bool), normal=np.zeros((1, 2))
            )
        r = self.player_radius
        ex = ax + t * dx + SWEEP_SKIN_M * nx
        ey = ay + t * dy + SWEEP_SKIN_M * ny
        if self._circle_blocked_xy(ex, ey, r):
            # Wedged (an acute corner): back off along the path instead, else stay put.
            length = float(np.hypot(dx, dy))
            back = t - SWEEP_SKIN_M / (length if length > 1e-300 else 1e-300)
            back = back if back > 0.0 else 0.0
            ex, ey = ax + back * dx, ay + back * dy
            if self._circle_blocked_xy(ex, ey, r):
                ex, ey = ax, ay
        return SweepResult(
            end=np.array([[ex, ey]]), fraction=np.array([t]), hit=np.ones(1, dtype=bool), normal=np.array([[nx, ny]])
        )

    def _sweep_one(self, ax: float, ay: float, dx: float, dy: float) -> tuple[float, float, float]:
        """(time of impact or inf, normal x, normal y) of one circle, as _sweep_bounds and
        _sweep_edges compute it (same float operations, same candidate order and tie-breaks),
        with Python floats. np.maximum / np.minimum keep their second argument on ties and
        np.clip its input, which the conditionals below reproduce (it fixes signs of zeros)."""
        r = self.player_radius
        best, bnx, bny = math.inf, 0.0, 0.0
        # ---- bounds, in _sweep_bounds' order x_hi, x_lo, y_hi, y_lo.
        lo_x, lo_y, hi_x, hi_y = self._sw_bounds_f
        for pos, vel, lo, hi, axis in ((ax, dx, lo_x, hi_x, 0), (ay, dy, lo_y, hi_y, 1)):
            if vel > 0.0:
                t = (hi - pos) / vel
                sign = -1.0
            elif vel < 0.0:
                t = (lo - pos) / vel
                sign = 1.0
            else:
                continue
            t = t if t > 0.0 else 0.0
            if t <= 1.0 and t < best:
                best = t
                bnx, bny = (sign, 0.0) if axis == 0 else (0.0, sign)
        if not self._edge_rows:
            return best, bnx, bny

        # ---- cells, as _box_interval + _cells_along compute them.
        xmin, ymin, xmax, ymax = self._bounds_f
        t0, t1 = -math.inf, math.inf
        for pos, vel, lo, hi in ((ax, dx, xmin, xmax), (ay, dy, ymin, ymax)):
            if vel != 0.0:
                ta, tb = (lo - pos) / vel, (hi - pos) / vel
                near, far = (ta if ta < tb else tb), (ta if ta > tb else tb)
                t0 = t0 if t0 > near else near
                t1 = t1 if t1 < far else far
            elif pos < lo or pos > hi:
                t0, t1 = math.inf, -math.inf
        t0 = t0 if t0 > 0.0 else 0.0
        t1 = t1 if t1 < 1.0 else 1.0
        if not t0 <= t1:
            return best, bnx, bny
        grid = self._move_grid
        gnx, gny, cell = grid.nx, grid.ny, grid.cell
        gax, gay = (ax + t0 * dx - xmin) / cell, (ay + t0 * dy - ymin) / cell
        gbx, gby = (ax + t1 * dx - xmin) / cell, (ay + t1 * dy - ymin) / cell
        gax = 0.0 if gax < 0.0 else (gnx if gax > gnx else gax)
        gay = 0.0 if gay < 0.0 else (gny if gay > gny else gay)
        gbx = 0.0 if gbx < 0.0 else (gnx if gbx > gnx else gbx)
        gby = 0.0 if gby < 0.0 else (gny if gby > gny else gby)
        ddx, ddy = gbx - gax, gby - gay
        cells = [min(int(gax), gnx - 1) * gny + min(int(gay), gny - 1)]
        for along_x in (True, False):
            ga, gb, dd, go, do_ = (gax, gbx, ddx, gay, ddy) if along_x else (gay, gby, ddy, gax, ddx)
            if dd == 0.0:
                continue
            n_along, last_other = (gnx, gny - 1) if along_x else (gny, gnx - 1)
            corners: list[tuple[int, int]] = []
            for line in range(math.ceil(ga if ga < gb else gb), math.floor(ga if ga > gb else gb) + 1):
                entered = line if dd > 0.0 else line - 1
                if not 0 <= entered < n_along:
                    continue
                at = go + (line - ga) / dd * do_
                other = int(at)
                other = 0 if other < 0 else (last_other if other > last_other else other)
                cells.append(entered * gny + other if along_x else other * gny + entered)
                frac = at - math.floor(at)
                if abs(frac - 0.5) > 0.5 - _CORNER_EPS:
                    alt = other - 1 if frac < 0.5 else other + 1
                    corners.append((entered, 0 if alt < 0 else (last_other if alt > last_other else alt)))
            cells.extend(e * gny + o if along_x else o * gny + e for e, o in corners)

        # ---- the pair kernel of _sweep_edges, edge by edge in the same order. An edge whose
        # box grown by r (and a margin) misses the path's box cannot give a candidate.
        bx, by = ax + dx, ay + dy
        sx0, sx1 = (ax, bx) if ax < bx else (bx, ax)
        sy0, sy1 = (ay, by) if ay < by else (by, ay)
        r2 = r * r
        qa = dx * dx + dy * dy
        face_t = vert_t = over_t = math.inf
        face_n = vert_w = over_n = (0.0, 0.0)
        vert_tv = 0.0
        seen: set[int] = set()
        rows = self._edge_rows
        for c in cells:
            for e in self._cell_edges[c]:
                if e in seen:
                    continue
                seen.add(e)
                e0x, e0y, fx, fy, onx, ony, inv_len2, x0, y0, x1, y1 = rows[e]
                if x0 > sx1 or x1 < sx0 or y0 > sy1 or y1 < sy0:
                    continue
                wx, wy = ax - e0x, ay - e0y
                s0 = wx * onx + wy * ony
                sd = dx * onx + dy * ony
                # Face: the offset line, reached while approaching it.
                if sd < 0.0 and s0 >= r:
                    tf = (r - s0) / sd
                    if tf <= 1.0 and tf < face_t:
                        u = ((wx + tf * dx) * fx + (wy + tf * dy) * fy) * inv_len2
                        if u >= 0.0 and u <= 1.0:
                            face_t, face_n = tf, (onx, ony)
                # Vertex E0: entry root of |A + tD - E0| = r while approaching.
                qb = dx * wx + dy * wy
                qc = wx * wx + wy * wy - r2
                if qc >= 0.0 and qb < 0.0 and qa > 0.0:
                    disc = qb * qb - qa * qc
                    if disc >= 0.0:
                        tv = (-qb - math.sqrt(disc if disc > 0.0 else 0.0)) / qa
                        if tv <= 1.0:
                            tv = tv if tv > 0.0 else 0.0
                            if tv < vert_t:
                                vert_t, vert_w, vert_tv = tv, (wx, wy), tv
                # Already overlapping: only motion away from the edge.
                if over_t == math.inf:
                    uc = (wx * fx + wy * fy) * inv_len2
                    uc = 0.0 if uc < 0.0 else (1.0 if uc > 1.0 else uc)
                    rx, ry = wx - uc * fx, wy - uc * fy
                    d2 = rx * rx + ry * ry
                    if d2 < r2:
                        dist = math.sqrt(d2)
                        if dist > 0.0:
                            rxn, ryn = rx / dist, ry / dist
                        else:
                            rxn, ryn = onx, ony
                        if dx * rxn + dy * ryn < 0.0:
                            over_t, over_n = 0.0, (rxn, ryn)
        # The first smallest of faces, vertices, overlaps (the stable sort of _sweep_edges).
        if face_t <= vert_t and face_t <= over_t:
            t, (cnx, cny) = face_t, face_n
        elif vert_t <= over_t:
            t = vert_t
            vx, vy = vert_w[0] + vert_tv * dx, vert_w[1] + vert_tv * dy
            vlen = float(np.hypot(vx, vy))
            vlen = vlen if vlen > 0.0 else 1.0
            cnx, cny = vx / vlen, vy / vlen
        else:
            t, (cnx, cny) = over_t, over_n
        if t < best:
            return t, cnx, cny
        return best, bnx, bny

    def _circle_blocked_xy(self, x: float, y: float, r: float) -> bool:
        """:meth:`circle_blocked` of one centre given as Python floats."""
        xmin, ymin, xmax, ymax = self._bounds_f
        if x <= xmin + r or x >= xmax - r or y <= ymin + r or y >= ymax - r:
            return True
        # shapely.points((x, y)) is several times faster than shapely.points(x, y).
        return bool(self._unions) and bool(shapely.dwithin(self._all_walls, shapely.points((x, y)), r))

    def _sweep_bounds(
        self, best: np.ndarray, nrm: np.ndarray, ax: np.ndarray, ay: np.ndarray, dx: np.ndarray, dy: np.ndarray
    ) -> None:
        r = self.player_radius
        xmin, ymin, xmax, ymax = self._bounds
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
