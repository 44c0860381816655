"""Compiled ray walk of :class:`world.geometry.MapGeometry`: first entry of rays into wall prisms.

A ray o + t v (t in [0, t_end]) is sampled once per fine-grid cell length from its origin, the
last sample at the end of the walk. A fine cell lists every convex piece within half a cell of
it, and every point of the walk is within half a cell length of a sample, so the pieces listed
in the sampled cells include every piece the ray touches. Each is clipped against the whole ray
once (a slab test for boxes, Cyrus-Beck for other convex pieces, both intersected with the
parameter interval where the ray is at or below the piece's top); the smallest entry parameter,
or the bounds exit, is the answer.

Why compiled: the server casts thousands of visibility rays per tick and most stop at the first
wall after a few cells. In numpy the fixed cost of each batched pass dominated (several
microseconds per ray); walked one by one in machine code a ray costs well under a microsecond,
and a single ray needs no Python-float twin of the kernel.

Floats are IEEE double without fast-math, so answers are deterministic and do not depend on the
batch a ray arrives in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

HUGE = 1e300
"""Stands in for 1 / 0 in slab tests: (x - x0) * HUGE keeps the sign of x - x0 and is exactly
0 when x == x0, where an IEEE inf would give NaN."""

FAR_T = 1e30
"""Cap on a ray's parameter range: a vertical ray with an infinite max distance would otherwise
let a HUGE-scaled slab bound pass for a real hit."""


@dataclass(frozen=True, slots=True)
class RayTables:
    """Everything the kernel reads about one map, as flat arrays.

    frame: xmin, ymin, xmax, ymax (m), fine cell size (m), its inverse, and the largest sample
    position per axis in cell units (samples are truncated to a cell index below it).
    ny: fine cells along y (cell id = ix * ny + iy). n_box: pieces with id < n_box are boxes.
    boxes: (n_box, 5) x0, y0, x1, y1, height (m). cv_height: (n_cv,) m. cv_planes: (n_cv, K, 3)
    outward half-planes nx x + ny y <= c of each convex piece, cv_edges: (n_cv,) how many are
    real. cell_start / cell_items: CSR of piece ids per fine cell. skip: per cell, how many
    samples a ray may advance from it without missing a listed cell (1 for occupied cells).
    """

    frame: np.ndarray
    ny: int
    n_box: int
    boxes: np.ndarray
    cv_height: np.ndarray
    cv_planes: np.ndarray
    cv_edges: np.ndarray
    cell_start: np.ndarray
    cell_items: np.ndarray
    skip: np.ndarray

    def args(self) -> tuple[object, ...]:
        """The kernel's map arguments, in order."""
        return (self.frame, self.ny, self.n_box, self.boxes, self.cv_height, self.cv_planes, self.cv_edges,
                self.cell_start, self.cell_items, self.skip)


@numba.njit(cache=True, nogil=True)
def _clip(
    piece: int, ox: float, oy: float, z: float, vx: float, vy: float, ix: float, iy: float, iz: float,
    down: bool, t_in: float, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray,
) -> float:  # pragma: no cover - compiled
    """Entry parameter of the ray into one piece within [0, t_in], or inf where it does not
    touch it. ``z`` is the origin's height as :func:`_frame_setup` adjusts it.

    The same clip as the inner loop of :func:`walk`, which keeps its own inline copy: calling
    this from there, even inlined by numba, made every ray 20 % slower. Tests hold the two to
    the same answers."""
    # The parameter interval where the ray is at or below the piece's top: a descending ray
    # enters it, any other ray leaves it.
    t_h = ((boxes[piece, 4] if piece < n_box else cv_height[piece - n_box]) - z) * iz
    if down:
        enter = t_h if t_h > 0.0 else 0.0
        leave = t_in
    else:
        enter = 0.0
        leave = t_h if t_h < t_in else t_in
    if piece < n_box:
        t1, t2 = (boxes[piece, 0] - ox) * ix, (boxes[piece, 2] - ox) * ix
        near, far = (t1, t2) if t1 < t2 else (t2, t1)
        if near > enter:
            enter = near
        if far < leave:
            leave = far
        if enter > leave:
            return math.inf
        t1, t2 = (boxes[piece, 1] - oy) * iy, (boxes[piece, 3] - oy) * iy
        near, far = (t1, t2) if t1 < t2 else (t2, t1)
        if near > enter:
            enter = near
        if far < leave:
            leave = far
    else:
        c = piece - n_box
        for e in range(cv_edges[c]):
            pnx, pny, pc = cv_planes[c, e, 0], cv_planes[c, e, 1], cv_planes[c, e, 2]
            # Inside the half-plane while num + t den <= 0.
            num = pnx * ox + pny * oy - pc
            den = pnx * vx + pny * vy
            # Parallel to the edge the ray is inside for all t (num <= 0) or for none: a tiny
            # negative den turns that into an entry bound of -huge or +huge.
            if den == 0.0:
                den = -1e-300
            bound = -num / den
            if den < 0.0:
                if bound > enter:
                    enter = bound
            elif bound < leave:
                leave = bound
    return enter if enter <= leave else math.inf


@numba.njit(cache=True, nogil=True, inline="always")
def _frame_setup(
    ox: float, oy: float, oz: float, vx: float, vy: float, vz: float, t_end: float, frame: np.ndarray,
) -> tuple[float, float, float, float, float, float, bool]:  # pragma: no cover - compiled
    """(t_exit, t_in, ix, iy, iz, z, down) of a ray whose origin is strictly inside the bounds:
    where it leaves them, its walked range, inverse direction (HUGE for 1 / 0) and clip height."""
    xmin, ymin, xmax, ymax = frame[0], frame[1], frame[2], frame[3]
    tx = (xmax - ox) / vx if vx > 0.0 else ((xmin - ox) / vx if vx < 0.0 else math.inf)
    ty = (ymax - oy) / vy if vy > 0.0 else ((ymin - oy) / vy if vy < 0.0 else math.inf)
    t_exit = ty if ty < tx else tx
    t_in = t_end if t_end < t_exit else t_exit
    t_in = t_in if t_in < FAR_T else FAR_T
    ix = 1.0 / vx if vx != 0.0 else HUGE
    iy = 1.0 / vy if vy != 0.0 else HUGE
    iz = 1.0 / vz if vz != 0.0 else HUGE
    # A level ray (vz == 0) is at or below a top for its whole length iff z <= height; with
    # 1 / 0 -> HUGE that needs height - z > 0 even at equality, hence z one ulp lower.
    z = np.nextafter(oz, -math.inf) if vz == 0.0 else oz
    return t_exit, t_in, ix, iy, iz, z, vz < 0.0


@numba.njit(cache=True, nogil=True)
def piece_blocks(
    piece: int, ox: float, oy: float, oz: float, vx: float, vy: float, vz: float, t_end: float,
    frame: np.ndarray, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """True when the ray o + t v (t in [0, t_end], origin inside the bounds) touches ``piece``.

    A sufficient proof that :func:`ray_walk` with ``any_hit`` finds a hit (the walk lists every
    piece the ray touches), at the cost of one clip: callers that cast the same sight line again
    and again test the piece that stopped it last time before walking."""
    if ox <= frame[0] or ox >= frame[2] or oy <= frame[1] or oy >= frame[3]:
        return False
    _, t_in, ix, iy, iz, z, down = _frame_setup(ox, oy, oz, vx, vy, vz, t_end, frame)
    return _clip(piece, ox, oy, z, vx, vy, ix, iy, iz, down, t_in, n_box, boxes, cv_height, cv_planes, cv_edges) < math.inf


@numba.njit(cache=True, nogil=True)
def walk(
    ox: float, oy: float, oz: float, vx: float, vy: float, vz: float, t_end: float, any_hit: bool,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
    seen: np.ndarray, stamp: int,
) -> tuple[float, int]:  # pragma: no cover - compiled
    """:func:`ray_walk` that also names the piece of the answer (-1 for the bounds or no hit)."""
    xmin, ymin, xmax, ymax, fine, inv_fine, gmx, gmy = frame[0], frame[1], frame[2], frame[3], frame[4], frame[5], frame[6], frame[7]
    if ox <= xmin or ox >= xmax or oy <= ymin or oy >= ymax:
        return 0.0, -1
    t_exit, t_in, ix, iy, iz, z, down = _frame_setup(ox, oy, oz, vx, vy, vz, t_end, frame)
    best = t_exit if t_exit <= t_end else math.inf
    best_piece = -1
    if len(cell_items) == 0 or (any_hit and best < math.inf):
        return best, best_piece
    speed = math.hypot(vx, vy)
    cx0, cy0 = (ox - xmin) * inv_fine, (oy - ymin) * inv_fine
    if speed > 0.0:
        ux, uy = vx / speed, vy / speed
        step = fine / speed
        n_full = int(t_in * speed * inv_fine) + 1
        end_x, end_y = cx0 + t_in * vx * inv_fine, cy0 + t_in * vy * inv_fine
    else:
        # A vertical ray only visits its start cell.
        ux = uy = step = 0.0
        n_full = 0
        end_x, end_y = cx0, cy0
    k = 0
    while True:
        last = k >= n_full
        if last:
            cx, cy = end_x, end_y
        else:
            cx, cy = cx0 + k * ux, cy0 + k * uy
        cell = int(cx if cx < gmx else gmx) * ny + int(cy if cy < gmy else gmy)
        first, stop = cell_start[cell], cell_start[cell + 1]
        if first == stop:
            if last:
                return best, best_piece
            # The next samples up to skip[cell] - 1 cells on are in empty cells too.
            k += skip[cell]
            continue
        for j in range(first, stop):
            piece = cell_items[j]
            if seen[piece] == stamp:
                continue
            seen[piece] = stamp
            # The parameter interval where the ray is at or below the piece's top: a descending
            # ray enters it, any other ray leaves it.
            t_h = ((boxes[piece, 4] if piece < n_box else cv_height[piece - n_box]) - z) * iz
            if down:
                enter = t_h if t_h > 0.0 else 0.0
                leave = t_in
            else:
                enter = 0.0
                leave = t_h if t_h < t_in else t_in
            if piece < n_box:
                t1, t2 = (boxes[piece, 0] - ox) * ix, (boxes[piece, 2] - ox) * ix
                near, far = (t1, t2) if t1 < t2 else (t2, t1)
                if near > enter:
                    enter = near
                if far < leave:
                    leave = far
                if enter > leave:
                    continue
                t1, t2 = (boxes[piece, 1] - oy) * iy, (boxes[piece, 3] - oy) * iy
                near, far = (t1, t2) if t1 < t2 else (t2, t1)
                if near > enter:
                    enter = near
                if far < leave:
                    leave = far
            else:
                c = piece - n_box
                for e in range(cv_edges[c]):
                    pnx, pny, pc = cv_planes[c, e, 0], cv_planes[c, e, 1], cv_planes[c, e, 2]
                    num = pnx * ox + pny * oy - pc
                    den = pnx * vx + pny * vy
                    if den == 0.0:
                        den = -1e-300
                    bound = -num / den
                    if den < 0.0:
                        if bound > enter:
                            enter = bound
                    elif bound < leave:
                        leave = bound
            if enter <= leave:
                if any_hit:
                    return enter, piece
                if enter < best:
                    best = enter
                    best_piece = piece
                    best_piece = piece
        # Every piece entered before the previous sample has been tested: a piece entered
        # earlier lies within half a cell length of an already visited sample.
        if last or best <= (k - 1) * step:
            return best, best_piece
        k += 1


@numba.njit(cache=True, nogil=True)
def ray_walk(
    ox: float, oy: float, oz: float, vx: float, vy: float, vz: float, t_end: float, any_hit: bool,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
    seen: np.ndarray, stamp: int,
) -> float:  # pragma: no cover - compiled
    """First entry parameter of one ray (see the module doc); ``seen[piece] == stamp`` marks the
    pieces this ray has already clipped."""
    return walk(ox, oy, oz, vx, vy, vz, t_end, any_hit, frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges,
                cell_start, cell_items, skip, seen, stamp)[0]


@numba.njit(cache=True, nogil=True)
def first_entries(
    o: np.ndarray, v: np.ndarray, t_end: np.ndarray, any_hit: bool,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """(N,) smallest t in [0, t_end] with o + t v inside or on a wall prism or the bounds, else
    inf; 0 for an origin not strictly inside the bounds. o, v: (N, 3) (m, m per unit t);
    t_end: (N,), may be inf only when v has no horizontal part. With ``any_hit`` a ray stops at
    the first hit found, which is then only an upper bound of the first entry."""
    n = o.shape[0]
    out = np.empty(n)
    seen = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    for r in range(n):
        out[r] = walk(o[r, 0], o[r, 1], o[r, 2], v[r, 0], v[r, 1], v[r, 2], t_end[r], any_hit,
                      frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges, cell_start, cell_items, skip,
                      seen, r + 1)[0]
    return out


@numba.njit(cache=True, nogil=True)
def first_entries_checked(
    o: np.ndarray, d: np.ndarray, t_end: np.ndarray, out: np.ndarray,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """:func:`first_entries` (``any_hit`` off) of (N, 3) origins and directions of any non-zero
    length, normalised here by their norm computed as np.linalg.norm computes it over a row of
    three ((x^2 + y^2) + z^2, then a correctly rounded sqrt), with every 0 made +0.0; into ``out``. Returns False, with ``out`` undefined, when any value is NaN or
    inf (but +inf in ``t_end``), a direction is zero or a ``t_end`` negative: the caller's checks
    then name the fault. One pass instead of about ten numpy calls around the walk."""
    n = o.shape[0]
    for r in range(n):
        if not (math.isfinite(o[r, 0]) and math.isfinite(o[r, 1]) and math.isfinite(o[r, 2])):
            return False
        if not (math.isfinite(d[r, 0]) and math.isfinite(d[r, 1]) and math.isfinite(d[r, 2])):
            return False
        if not t_end[r] >= 0.0:
            return False
    seen = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    for r in range(n):
        dx, dy, dz = d[r, 0], d[r, 1], d[r, 2]
        norm = math.sqrt(dx * dx + dy * dy + dz * dz)
        if norm == 0.0:
            return False
        # A ray starting on a face can enter two pieces (or enter one and touch another) at 0.0
        # and -0.0, and which one is kept depends on the order the pieces are met in (so on the
        # grid): + 0.0 makes every zero distance 0.0.
        out[r] = walk(o[r, 0], o[r, 1], o[r, 2], dx / norm, dy / norm, dz / norm, t_end[r], False,
                      frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges, cell_start, cell_items, skip,
                      seen, r + 1)[0] + 0.0
    return True


@numba.njit(cache=True, nogil=True)
def first_entry(
    ox: float, oy: float, oz: float, vx: float, vy: float, vz: float, t_end: float, any_hit: bool,
    frame: np.ndarray, ny: int, n_box: int, boxes: np.ndarray, cv_height: np.ndarray, cv_planes: np.ndarray,
    cv_edges: np.ndarray, cell_start: np.ndarray, cell_items: np.ndarray, skip: np.ndarray,
) -> float:  # pragma: no cover - compiled
    """:func:`first_entries` of one ray given as floats (no arrays to build for the caller)."""
    seen = np.zeros(n_box + cv_height.shape[0], dtype=np.int64)
    return ray_walk(ox, oy, oz, vx, vy, vz, t_end, any_hit,
                 frame, ny, n_box, boxes, cv_height, cv_planes, cv_edges, cell_start, cell_items, skip, seen, 1)
