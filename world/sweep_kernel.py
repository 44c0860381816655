"""Compiled circle sweeps and circle tests of :class:`world.geometry.MapGeometry`.

A player circle of radius r moving from A along D (t in [0, 1]) first touches a wall where it
reaches a footprint edge's offset line (the edge moved out by r) within the edge, or a vertex's
circle of radius r; a start that already overlaps an edge may only move away from it. The
circle also stays strictly inside the bounds shrunk by r. Edges are read from a grid whose cells
list every edge within ``1.01 r`` (plus a margin) of them, visited in the order the path crosses
the cells; the first smallest candidate wins, faces before vertices before overlaps, so ties pick
the same normal whatever the grid.

A circle is blocked when it is not strictly inside the bounds shrunk by r, or when a footprint
edge is within r of its centre (GEOS's point-to-segment distance, which shapely's ``dwithin``
uses), or when the centre is inside a footprint (a crossing count over the footprints listed in
its cell, needed only when every edge is farther than r, so rounding cannot flip it). It agrees
with shapely's ``dwithin`` on the footprints' union except at a distance equal to r in the last
bit, where GEOS measures the union's (differently split or oriented) boundary segments.

Why compiled: the server and every bot sweep a few circles per command, many times per tick;
numpy's fixed cost per call, or Python floats, made one sweep cost tens of microseconds, here
well under one. The sweep performs the operations of the numpy and Python-float sweeps it
replaced, in the same order (IEEE double without fast-math, so no fused multiply-add): answers
are deterministic and do not depend on the batch.
"""

# min / max are written as conditional expressions on purpose: "a if a < b else b" keeps
# np.minimum's choice on ties (the second operand), which fixes the sign of a zero result.
# ruff: noqa: FURB136

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

SWEEP_SKIN_M = 1e-3
"""Clearance (m) a sweep leaves between the player circle and the wall it stopped against, so
the end position is strictly outside every wall despite float rounding."""

CORNER_EPS = 1e-9
"""A grid-line crossing this close (cell units) to a grid line of the other axis is treated as
passing through the grid corner (both cells beside the corner are visited)."""

# Columns of SweepTables.edges.
_E0X, _E0Y, _FX, _FY, _ONX, _ONY, _INV_LEN2, _BX0, _BY0, _BX1, _BY1, _E1X, _E1Y = range(13)
EDGE_COLUMNS = 13


@dataclass(frozen=True, slots=True)
class SweepTables:
    """Everything the kernels read about one map, as flat arrays.

    frame: xmin, ymin, xmax, ymax (m), the bounds shrunk by the radius (x lo, y lo, x hi, y hi),
    the radius r (m) and the grid cell size (m). gnx, gny: grid cells per axis (cell id
    ``ix * gny + iy``). edges: (E, 13) per footprint edge: start E0, direction F = E1 - E0, unit
    outward normal, 1 / |F|^2, its box grown by r plus a margin (x0, y0, x1, y1), end E1.
    cell_start / cell_edges: CSR of edge ids per cell. poly_first: (P + 1,) the edges of
    footprint p are ``poly_first[p]:poly_first[p + 1]`` (a closed ring). cell_poly_start /
    cell_polys: CSR of the footprints touching each cell.
    """

    frame: np.ndarray
    gnx: int
    gny: int
    edges: np.ndarray
    cell_start: np.ndarray
    cell_edges: np.ndarray
    poly_first: np.ndarray
    cell_poly_start: np.ndarray
    cell_polys: np.ndarray

    def args(self) -> tuple[object, ...]:
        """The kernels' map arguments, in order."""
        return (self.frame, self.gnx, self.gny, self.edges, self.cell_start, self.cell_edges, self.poly_first,
                self.cell_poly_start, self.cell_polys)


@numba.njit(cache=True, nogil=True)
def segment_distance(px: float, py: float, ax: float, ay: float, bx: float, by: float) -> float:  # pragma: no cover
    """Distance from P to segment AB, GEOS's ``Distance::pointToSegment`` operation for operation."""
    if ax == bx and ay == by:
        return math.sqrt((px - ax) * (px - ax) + (py - ay) * (py - ay))
    len2 = (bx - ax) * (bx - ax) + (by - ay) * (by - ay)
    r = ((px - ax) * (bx - ax) + (py - ay) * (by - ay)) / len2
    if r <= 0.0:
        return math.sqrt((px - ax) * (px - ax) + (py - ay) * (py - ay))
    if r >= 1.0:
        return math.sqrt((px - bx) * (px - bx) + (py - by) * (py - by))
    s = ((ay - py) * (bx - ax) - (ax - px) * (by - ay)) / len2
    return abs(s) * math.sqrt(len2)


@numba.njit(cache=True, nogil=True)
def circle_blocked(
    x: float, y: float, r: float,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """A circle of radius ``r`` (at most the tables' radius) at (x, y) touches a wall or the
    bounds (see the module doc)."""
    xmin, ymin, xmax, ymax, cell = frame[0], frame[1], frame[2], frame[3], frame[9]
    if x <= xmin + r or x >= xmax - r or y <= ymin + r or y >= ymax - r:
        return True
    if len(poly_first) <= 1:
        return False
    ix = min(max(int((x - xmin) / cell), 0), gnx - 1)
    iy = min(max(int((y - ymin) / cell), 0), gny - 1)
    c = ix * gny + iy
    for k in range(cell_start[c], cell_start[c + 1]):
        e = edges[cell_edges[k]]
        if segment_distance(x, y, e[_E0X], e[_E0Y], e[_E1X], e[_E1Y]) <= r:
            return True
    for k in range(cell_poly_start[c], cell_poly_start[c + 1]):
        p = cell_polys[k]
        inside = False
        for j in range(poly_first[p], poly_first[p + 1]):
            e = edges[j]
            ay, by = e[_E0Y], e[_E1Y]
            if (ay > y) != (by > y) and x < e[_E0X] + (y - ay) / (by - ay) * (e[_E1X] - e[_E0X]):
                inside = not inside
        if inside:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def sweep_hit(
    ax: float, ay: float, dx: float, dy: float,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """(time of impact or inf, normal x, normal y) of the circle at A moving along D: the bounds
    (x, then y), then the edges of the grid cells the part of the path inside the bounds crosses.

    A path enters a new cell exactly where it crosses a grid line, so the cells are its start
    cell plus, for every grid line crossed, the cell on the far side of that line (the lines of
    x, then those of y). Through a grid corner, rounding can put both crossings there on the
    wrong side of the other line and skip the diagonal cell: a crossing within CORNER_EPS (cell
    units) of the other axis's grid line also visits the cell on the other side of it (after
    that axis's crossings)."""
    xmin, ymin, xmax, ymax = frame[0], frame[1], frame[2], frame[3]
    r, cell = frame[8], frame[9]
    best, bnx, bny = math.inf, 0.0, 0.0
    # ---- bounds: x then y, the far side first.
    for axis in range(2):
        pos, vel, lo, hi = (ax, dx, frame[4], frame[6]) if axis == 0 else (ay, dy, frame[5], frame[7])
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
            if axis == 0:
                bnx, bny = sign, 0.0
            else:
                bnx, bny = 0.0, sign
    if edges.shape[0] == 0:
        return best, bnx, bny

    # ---- the part of the path inside the bounds box (Liang-Barsky clipping).
    t0, t1 = -math.inf, math.inf
    for axis in range(2):
        pos, vel, lo, hi = (ax, dx, xmin, xmax) if axis == 0 else (ay, dy, ymin, ymax)
        if vel != 0.0:
            ta, tb = (lo - pos) / vel, (hi - pos) / vel
            near = ta if ta < tb else tb
            far = ta if ta > tb else tb
            t0 = t0 if t0 > near else near
            t1 = t1 if t1 < far else far
        elif pos < lo or pos > hi:
            t0, t1 = math.inf, -math.inf
    t0 = t0 if t0 > 0.0 else 0.0
    t1 = t1 if t1 < 1.0 else 1.0
    if not t0 <= t1:
        return best, bnx, bny

    # ---- the cells the path crosses (see the docstring).
    fnx, fny = float(gnx), float(gny)
    gax, gay = (ax + t0 * dx - xmin) / cell, (ay + t0 * dy - ymin) / cell
    gbx, gby = (ax + t1 * dx - xmin) / cell, (ay + t1 * dy - ymin) / cell
    gax = 0.0 if gax < 0.0 else (fnx if gax > fnx else gax)
    gay = 0.0 if gay < 0.0 else (fny if gay > fny else gay)
    gbx = 0.0 if gbx < 0.0 else (fnx if gbx > fnx else gbx)
    gby = 0.0 if gby < 0.0 else (fny if gby > fny else gby)
    ddx, ddy = gbx - gax, gby - gay
    lines_x = math.floor(gax if gax > gbx else gbx) - math.ceil(gax if gax < gbx else gbx) + 1 if ddx != 0.0 else 0
    lines_y = math.floor(gay if gay > gby else gby) - math.ceil(gay if gay < gby else gby) + 1 if ddy != 0.0 else 0
    cells = np.empty(1 + 2 * (max(lines_x, 0) + max(lines_y, 0)), dtype=np.int64)
    cells[0] = min(int(gax), gnx - 1) * gny + min(int(gay), gny - 1)
    n_cells = 1
    corners = np.empty(max(lines_x, lines_y, 0), dtype=np.int64)
    for axis in range(2):
        if axis == 0:
            ga, gb, dd, go, do_, n_along, last_other = gax, gbx, ddx, gay, ddy, gnx, gny - 1
        else:
            ga, gb, dd, go, do_, n_along, last_other = gay, gby, ddy, gax, ddx, gny, gnx - 1
        if dd == 0.0:
            continue
        n_corners = 0
        for line in range(math.ceil(ga if ga < gb else gb), math.floor(ga if ga > gb else gb) + 1):
            entered = line if dd > 0.0 else line - 1
            if not 0 <= entered < n_along:
                continue
            at = go + (line - ga) / dd * do_
            other = int(at)
            other = 0 if other < 0 else (last_other if other > last_other else other)
            cells[n_cells] = entered * gny + other if axis == 0 else other * gny + entered
            n_cells += 1
            frac = at - math.floor(at)
            if abs(frac - 0.5) > 0.5 - CORNER_EPS:
                alt = other - 1 if frac < 0.5 else other + 1
                alt = 0 if alt < 0 else (last_other if alt > last_other else alt)
                corners[n_corners] = entered * gny + alt if axis == 0 else alt * gny + entered
                n_corners += 1
        for k in range(n_corners):
            cells[n_cells] = corners[k]
            n_cells += 1

    # ---- the candidates of each edge, edge by edge in cell order. An edge met again in a
    # later cell gives the same candidates, which never beat themselves (strict comparisons),
    # so repeats need no bookkeeping. An edge whose grown box misses the path's box cannot
    # give a candidate.
    bx, by = ax + dx, ay + dy
    sx0, sx1 = (ax, bx) if ax < bx else (bx, ax)
    sy0, sy1 = (ay, by) if ay < by else (by, ay)
    r2 = r * r
    qa = dx * dx + dy * dy
    face_t = vert_t = over_t = math.inf
    face_nx = face_ny = vert_wx = vert_wy = over_nx = over_ny = 0.0
    vert_tv = 0.0
    for ci in range(n_cells):
        c = cells[ci]
        for k in range(cell_start[c], cell_start[c + 1]):
            e = edges[cell_edges[k]]
            if e[_BX0] > sx1 or e[_BX1] < sx0 or e[_BY0] > sy1 or e[_BY1] < sy0:
                continue
            fx, fy, onx, ony, inv_len2 = e[_FX], e[_FY], e[_ONX], e[_ONY], e[_INV_LEN2]
            wx, wy = ax - e[_E0X], ay - e[_E0Y]
            s0 = wx * onx + wy * ony
            sd = dx * onx + dy * ony
            # Face: the offset line, reached while approaching it.
            if sd < 0.0 and s0 >= r:
                tf = (r - s0) / sd
                if tf <= 1.0 and tf < face_t:
                    u = ((wx + tf * dx) * fx + (wy + tf * dy) * fy) * inv_len2
                    if u >= 0.0 and u <= 1.0:
                        face_t, face_nx, face_ny = tf, onx, ony
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
                            vert_t, vert_wx, vert_wy, vert_tv = tv, wx, wy, tv
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
                        over_t, over_nx, over_ny = 0.0, rxn, ryn
    # The first smallest of faces, vertices, overlaps.
    if face_t <= vert_t and face_t <= over_t:
        t, cnx, cny = face_t, face_nx, face_ny
    elif vert_t <= over_t:
        t = vert_t
        vx, vy = vert_wx + vert_tv * dx, vert_wy + vert_tv * dy
        vlen = math.hypot(vx, vy)
        vlen = vlen if vlen > 0.0 else 1.0
        cnx, cny = vx / vlen, vy / vlen
    else:
        t, cnx, cny = over_t, over_nx, over_ny
    if t < best:
        return t, cnx, cny
    return best, bnx, bny


@numba.njit(cache=True, nogil=True)
def sweep(
    ax: float, ay: float, bx: float, by: float,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[float, float, float, bool, float, float]:  # pragma: no cover - compiled
    """``MapGeometry.sweep`` of one circle from A to B: (end x, end y, fraction, hit, normal x,
    normal y)."""
    dx, dy = bx - ax, by - ay
    t, nx, ny = sweep_hit(ax, ay, dx, dy, frame, gnx, gny, edges, cell_start, cell_edges)
    if t == math.inf:
        return bx, by, 1.0, False, 0.0, 0.0
    r = frame[8]
    ex = ax + t * dx + SWEEP_SKIN_M * nx
    ey = ay + t * dy + SWEEP_SKIN_M * ny
    if circle_blocked(ex, ey, r, frame, gnx, gny, edges, cell_start, cell_edges, poly_first, cell_poly_start, cell_polys):
        # Wedged (an acute corner): back off along the path instead, else stay put.
        length = math.hypot(dx, dy)
        back = t - SWEEP_SKIN_M / (length if length > 1e-300 else 1e-300)
        back = back if back > 0.0 else 0.0
        ex, ey = ax + back * dx, ay + back * dy
        if circle_blocked(ex, ey, r, frame, gnx, gny, edges, cell_start, cell_edges, poly_first, cell_poly_start,
                          cell_polys):
            ex, ey = ax, ay
    return ex, ey, t, True, nx, ny


@numba.njit(cache=True, nogil=True)
def sweep_rows(
    a: np.ndarray, b: np.ndarray,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`sweep` of each row of (N, 2) ``a`` -> ``b``: (end (N, 2), fraction (N,), hit (N,),
    normal (N, 2))."""
    n = a.shape[0]
    end = np.empty((n, 2))
    fraction = np.empty(n)
    hit = np.empty(n, dtype=np.bool_)
    normal = np.empty((n, 2))
    for i in range(n):
        ex, ey, t, h, nx, ny = sweep(a[i, 0], a[i, 1], b[i, 0], b[i, 1], frame, gnx, gny, edges, cell_start,
                                     cell_edges, poly_first, cell_poly_start, cell_polys)
        end[i, 0], end[i, 1], fraction[i], hit[i], normal[i, 0], normal[i, 1] = ex, ey, t, h, nx, ny
    return end, fraction, hit, normal


@numba.njit(cache=True, nogil=True)
def circles_blocked(
    pts: np.ndarray, r: float,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`circle_blocked` of each row of (N, 2) ``pts``."""
    out = np.empty(pts.shape[0], dtype=np.bool_)
    for i in range(pts.shape[0]):
        out[i] = circle_blocked(pts[i, 0], pts[i, 1], r, frame, gnx, gny, edges, cell_start, cell_edges, poly_first,
                                cell_poly_start, cell_polys)
    return out
