"""Deterministic generator of the built-in maps (``open``, ``corridors``, ``city``).

``python -m world.mapgen`` rewrites ``world/maps/*.json``; ``--check`` only verifies that the
committed files are what the generator produces (same seed, same numpy/shapely). Every map is
validated through :func:`world.mapfile.parse_map` before it is written. Units: meters, degrees.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

import numpy as np
import shapely

from world.constants import FULL_WALL_HEIGHT_M, LOW_COVER_HEIGHT_M
from world.mapfile import GameMap, Spawn, Wall, dump_map, map_to_json_obj, parse_map

log = logging.getLogger(__name__)

SEED: Final = 20240917
"""Seed of every built-in map; change it only together with the committed JSON files."""

SPAWN_CLEARANCE_M: Final = 1.0
"""Minimum distance (m) from a generated spawn to any wall: well above the player radius so a
spawned player can turn and move at once."""

Coords = tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class _Piece:
    """A wall being generated: id prefix, footprint, height (m)."""

    kind: str
    polygon: shapely.Polygon
    height: float


def _r(value: float, step: float = 0.01) -> float:
    """Round to ``step`` meters so generated files are short; returns a clean float."""
    return round(round(value / step) * step, 6)


def _rect(x0: float, y0: float, x1: float, y1: float) -> shapely.Polygon:
    return shapely.box(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def _rotated_rect(cx: float, cy: float, length: float, width: float, angle_deg: float) -> shapely.Polygon:
    """Rectangle of ``length`` along ``angle_deg`` and ``width`` across it, centred on (cx, cy),
    corners rounded to 1 cm."""
    a = math.radians(angle_deg)
    ux, uy = math.cos(a) * length / 2, math.sin(a) * length / 2
    vx, vy = -math.sin(a) * width / 2, math.cos(a) * width / 2
    corners = [(cx - ux - vx, cy - uy - vy), (cx + ux - vx, cy + uy - vy), (cx + ux + vx, cy + uy + vy), (cx - ux + vx, cy - uy + vy)]
    return shapely.Polygon([(_r(x), _r(y)) for x, y in corners])


def _rock(rng: np.random.Generator, cx: float, cy: float, radius: float) -> shapely.Polygon:
    """Irregular convex boulder of about ``radius`` meters."""
    count = int(rng.integers(6, 10))
    angles = np.sort(rng.uniform(0.0, 2 * math.pi, count))
    radii = radius * rng.uniform(0.7, 1.0, count)
    pts = [(_r(cx + r * math.cos(t)), _r(cy + r * math.sin(t))) for t, r in zip(angles, radii)]
    hull = shapely.convex_hull(shapely.MultiPoint(pts))
    return hull if isinstance(hull, shapely.Polygon) else shapely.box(cx - radius, cy - radius, cx + radius, cy + radius)


def _coords(poly: shapely.Polygon) -> Coords:
    ring = shapely.orient_polygons(shapely.simplify(poly, 0.0)).exterior.coords
    return tuple((float(x), float(y)) for x, y in list(ring)[:-1])


def _spread_spawns(
    rng: np.random.Generator,
    pieces: Sequence[_Piece],
    bounds: tuple[float, float, float, float],
    count: int,
    region: shapely.Geometry | None = None,
    step: float = 1.0,
) -> tuple[Spawn, ...]:
    """``count`` spawns spread out by farthest-point sampling over free grid points at least
    SPAWN_CLEARANCE_M from every wall and the bounds (and inside ``region`` if given), each
    facing the map centre."""
    xmin, ymin, xmax, ymax = bounds
    xs = np.arange(xmin + 2.0, xmax - 2.0 + 1e-9, step)
    ys = np.arange(ymin + 2.0, ymax - 2.0 + 1e-9, step)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
    walls = shapely.union_all([p.polygon for p in pieces])
    shapely.prepare(walls)
    free = ~shapely.dwithin(walls, shapely.points(pts), SPAWN_CLEARANCE_M)
    if region is not None:
        shapely.prepare(region)
        free &= shapely.intersects_xy(region, pts[:, 0], pts[:, 1])
    cand = pts[free]
    if len(cand) < count:
        raise RuntimeError(f"only {len(cand)} spawn candidates for {count} spawns")
    chosen = [int(rng.integers(len(cand)))]
    dist = np.hypot(cand[:, 0] - cand[chosen[0], 0], cand[:, 1] - cand[chosen[0], 1])
    while len(chosen) < count:
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.hypot(cand[:, 0] - cand[nxt, 0], cand[:, 1] - cand[nxt, 1]))
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    spawns = []
    for i, k in enumerate(chosen):
        x, y = float(cand[k, 0]), float(cand[k, 1])
        yaw = float(round(math.degrees(math.atan2(cy - y, cx - x))) % 360)
        spawns.append(Spawn(id=f"s{i + 1}", x=_r(x), y=_r(y), yaw_deg=yaw))
    return tuple(spawns)


def _finish(name: str, bounds: tuple[float, float, float, float], pieces: Sequence[_Piece], spawns: tuple[Spawn, ...]) -> GameMap:
    counters: dict[str, int] = {}
    walls = []
    for piece in pieces:
        counters[piece.kind] = counters.get(piece.kind, 0) + 1
        walls.append(Wall(id=f"{piece.kind}{counters[piece.kind]}", polygon=_coords(piece.polygon), height=piece.height))
    game_map = GameMap(name=name, bounds=bounds, walls=tuple(walls), spawns=spawns, source=f"mapgen:{name}")
    # Round-trip through the validator: the generator must never write a map the loader rejects.
    return parse_map(map_to_json_obj(game_map), source=f"mapgen:{name}")


def _free_of(placed: shapely.Geometry | None, candidate: shapely.Polygon, gap: float) -> bool:
    return placed is None or shapely.is_empty(placed) or shapely.distance(placed, candidate) >= gap


# ----------------------------------------------------------------------------------- open


def generate_open(seed: int = SEED) -> GameMap:
    """120 x 120 m field with ~40 scattered boxes, rocks and wall slabs, half of them low cover."""
    rng = np.random.default_rng([seed, 1])
    bounds = (0.0, 0.0, 120.0, 120.0)
    pieces: list[_Piece] = []
    placed: shapely.Geometry | None = None
    target, tries = 42, 0
    while len(pieces) < target and tries < 5000:
        tries += 1
        cx, cy = (_r(v, 0.1) for v in rng.uniform(8.0, 112.0, 2))
        kind_roll = rng.uniform()
        if kind_roll < 0.45:
            kind = "box"
            poly = _rotated_rect(cx, cy, rng.uniform(1.5, 5.0), rng.uniform(1.2, 3.0), rng.uniform(0.0, 180.0))
        elif kind_roll < 0.8:
            kind = "rock"
            poly = _rock(rng, cx, cy, rng.uniform(1.0, 3.0))
        else:
            kind = "slab"
            poly = _rotated_rect(cx, cy, rng.uniform(6.0, 12.0), 0.6, rng.uniform(0.0, 180.0))
        # Slabs are mostly full walls (cover to hide behind), boxes and rocks split evenly.
        full = rng.uniform() < (0.75 if kind == "slab" else 0.5)
        # Keep 3 m between obstacles so no pocket traps a player.
        if not _free_of(placed, poly, 3.0):
            continue
        pieces.append(_Piece(kind, poly, FULL_WALL_HEIGHT_M if full else LOW_COVER_HEIGHT_M))
        placed = poly if placed is None else shapely.union(placed, poly)
    spawns = _spread_spawns(rng, pieces, bounds, 20, region=shapely.box(5.0, 5.0, 115.0, 115.0))
    return _finish("open", bounds, pieces, spawns)


# ------------------------------------------------------------------------------ corridors


def generate_corridors(seed: int = SEED) -> GameMap:
    """60 x 60 m indoor level: a 4 x 4 grid of rooms joined by 2.5-4 m corridors (a random
    spanning tree plus a few loops), door frames at some corridor mouths, partition walls with
    doors in some rooms and low crates."""
    rng = np.random.default_rng([seed, 2])
    bounds = (0.0, 0.0, 60.0, 60.0)
    n, cell = 4, 15.0
    rooms: dict[tuple[int, int], tuple[float, float, float, float]] = {}
    for i in range(n):
        for j in range(n):
            w, h = (_r(v, 0.5) for v in rng.uniform(8.5, 11.5, 2))
            cx = (i + 0.5) * cell + _r(rng.uniform(-0.75, 0.75), 0.25)
            cy = (j + 0.5) * cell + _r(rng.uniform(-0.75, 0.75), 0.25)
            rooms[(i, j)] = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)

    # Random spanning tree (depth-first) so every room is reachable, plus extra loops.
    links: list[tuple[tuple[int, int], tuple[int, int]]] = []
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        i, j = stack[-1]
        nbrs = [(i + di, j + dj) for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)) if 0 <= i + di < n and 0 <= j + dj < n]
        nbrs = [c for c in nbrs if c not in seen]
        if not nbrs:
            stack.pop()
            continue
        nxt = nbrs[int(rng.integers(len(nbrs)))]
        links.append(((i, j), nxt))
        seen.add(nxt)
        stack.append(nxt)
    all_pairs = [((i, j), (i + 1, j)) for i in range(n - 1) for j in range(n)] + [((i, j), (i, j + 1)) for i in range(n) for j in range(n - 1)]
    linked = {tuple(sorted(link)) for link in links}
    extra = [p for p in all_pairs if p not in linked]
    for k in rng.permutation(len(extra))[:5]:
        links.append(extra[int(k)])

    corridors: list[tuple[float, float, float, float, bool]] = []  # x0, y0, x1, y1, horizontal
    for a, b in links:
        a, b = sorted((a, b))
        ra, rb = rooms[a], rooms[b]
        width = _r(rng.uniform(2.5, 4.0), 0.25)
        horizontal = a[1] == b[1]
        lo_axis, hi_axis = (1, 3) if horizontal else (0, 2)
        lo = max(ra[lo_axis], rb[lo_axis]) + width / 2 + 0.5
        hi = min(ra[hi_axis], rb[hi_axis]) - width / 2 - 0.5
        mid = _r(rng.uniform(lo, hi), 0.25)
        if horizontal:
            corridors.append((ra[2] - 0.5, mid - width / 2, rb[0] + 0.5, mid + width / 2, True))
        else:
            corridors.append((mid - width / 2, ra[3] - 0.5, mid + width / 2, rb[1] + 0.5, False))

    free = shapely.union_all([_rect(*r) for r in rooms.values()] + [_rect(*c[:4]) for c in corridors])
    solid = shapely.difference(shapely.box(*bounds), free)
    pieces: list[_Piece] = []
    # Cutting the solid along the 15 m cells leaves no holes: the free space is connected and
    # reaches every cell border, so no free region is enclosed inside one tile.
    for i in range(n):
        for j in range(n):
            part = shapely.intersection(solid, shapely.box(i * cell, j * cell, (i + 1) * cell, (j + 1) * cell))
            for geom in shapely.get_parts(part):
                if isinstance(geom, shapely.Polygon) and geom.area > 1e-6:
                    if len(geom.interiors):
                        raise RuntimeError("corridors generator produced a wall with a hole")
                    pieces.append(_Piece("wall", geom, FULL_WALL_HEIGHT_M))

    # Door frames: narrow some corridor mouths to a 1.4 m door.
    for x0, y0, x1, y1, horizontal in corridors:
        for end in (0, 1):
            if rng.uniform() < 0.5:
                continue
            t = 0.3
            if horizontal:
                gap_lo = (y0 + y1) / 2 - 0.7
                xa = x0 + 0.5 if end == 0 else x1 - 0.5 - t
                frames = [_rect(xa, y0, xa + t, gap_lo), _rect(xa, gap_lo + 1.4, xa + t, y1)]
            else:
                gap_lo = (x0 + x1) / 2 - 0.7
                ya = y0 + 0.5 if end == 0 else y1 - 0.5 - t
                frames = [_rect(x0, ya, gap_lo, ya + t), _rect(gap_lo + 1.4, ya, x1, ya + t)]
            pieces.extend(_Piece("door", f, FULL_WALL_HEIGHT_M) for f in frames)

    mouths = shapely.union_all([_rect(*c[:4]).buffer(2.5) for c in corridors])
    for (i, j), (x0, y0, x1, y1) in sorted(rooms.items()):
        # Partition with a door across some rooms, away from the corridor mouths on its line.
        if rng.uniform() < 0.5:
            first_vertical = bool(rng.uniform() < 0.5)
            # Try both orientations: a partition must not stand in a corridor mouth.
            for vertical in (first_vertical, not first_vertical):
                a0, a1, b0, b1 = (x0, x1, y0, y1) if vertical else (y0, y1, x0, x1)
                pos = _r(rng.uniform(a0 + 3.5, a1 - 3.5), 0.25)
                door = _r(rng.uniform(b0 + 1.0, b1 - 2.5), 0.25)
                parts = [(b0, door), (door + 1.5, b1)]
                rects = [_rect(pos - 0.15, s, pos + 0.15, e) if vertical else _rect(s, pos - 0.15, e, pos + 0.15) for s, e in parts]
                if not any(shapely.intersects(r, _rect(*c[:4])) for r in rects for c in corridors):
                    pieces.extend(_Piece("part", r, FULL_WALL_HEIGHT_M) for r in rects)
                    break
        placed = shapely.union_all([p.polygon for p in pieces])
        for _ in range(int(rng.integers(1, 3))):
            for _attempt in range(40):
                cx, cy = _r(rng.uniform(x0 + 1.5, x1 - 1.5), 0.25), _r(rng.uniform(y0 + 1.5, y1 - 1.5), 0.25)
                crate = _rotated_rect(cx, cy, _r(rng.uniform(1.0, 2.0), 0.25), _r(rng.uniform(0.8, 1.4), 0.25), float(rng.choice([0.0, 90.0])))
                if shapely.distance(placed, crate) >= 1.6 and not shapely.intersects(mouths, crate):
                    pieces.append(_Piece("crate", crate, LOW_COVER_HEIGHT_M))
                    placed = shapely.union(placed, crate)
                    break
    room_area = shapely.union_all([_rect(*r) for r in rooms.values()])
    spawns = _spread_spawns(rng, pieces, bounds, 24, region=room_area, step=0.5)
    return _finish("corridors", bounds, pieces, spawns)


# ----------------------------------------------------------------------------------- city

_CITY_MARGIN: Final = 8.0
_CITY_BLOCK: Final = 28.0
_CITY_STREET: Final = 11.0
_CITY_BLOCKS: Final = 5


def _block_span(k: int) -> tuple[float, float]:
    start = _CITY_MARGIN + k * (_CITY_BLOCK + _CITY_STREET)
    return start, start + _CITY_BLOCK


def _openings(rng: np.random.Generator, length: float, want_door: bool) -> list[tuple[float, float, str]]:
    """Openings (start, end, 'door' | 'window') along a building side of ``length`` meters, each
    at least 0.8 m from the corners and from each other."""
    kinds = (["door"] if want_door else []) + ["window"] * int(rng.integers(0, 3))
    if not want_door and rng.uniform() < 0.35:
        kinds.append("door")
    result: list[tuple[float, float, str]] = []
    for kind in kinds:
        size = 1.4 if kind == "door" else 1.2
        for _ in range(30):
            s = _r(rng.uniform(0.8, length - 0.8 - size), 0.05)
            if all(s + size + 0.8 <= a or s >= b + 0.8 for a, b, _ in result):
                result.append((s, s + size, kind))
                break
    return sorted(result)


def _hollow_building(rng: np.random.Generator, x0: float, y0: float, x1: float, y1: float) -> list[_Piece]:
    """A building with 0.4 m walls, doors (gaps) and windows (low sills) on its sides, and maybe
    an inner wall with a door."""
    t = 0.4
    pieces: list[_Piece] = []
    door_side = int(rng.integers(4))
    # (start point, unit direction along the side, length, inward normal)
    sides = [
        ((x0, y0), (1.0, 0.0), x1 - x0, (0.0, 1.0)),
        ((x0, y1 - t), (1.0, 0.0), x1 - x0, (0.0, 1.0)),
        ((x0, y0 + t), (0.0, 1.0), y1 - y0 - 2 * t, (1.0, 0.0)),
        ((x1 - t, y0 + t), (0.0, 1.0), y1 - y0 - 2 * t, (1.0, 0.0)),
    ]
    for side, ((sx, sy), (ux, uy), length, (nx, ny)) in enumerate(sides):
        cuts = _openings(rng, length, want_door=side == door_side)
        pos = 0.0
        spans: list[tuple[float, float, float]] = []
        for a, b, kind in cuts:
            spans.append((pos, a, FULL_WALL_HEIGHT_M))
            if kind == "window":
                spans.append((a, b, LOW_COVER_HEIGHT_M))
            pos = b
        spans.append((pos, length, FULL_WALL_HEIGHT_M))
        for a, b, height in spans:
            if b - a < 1e-6:
                continue
            p0 = (sx + ux * a, sy + uy * a)
            p1 = (sx + ux * b + nx * t, sy + uy * b + ny * t)
            pieces.append(_Piece("bw" if height == FULL_WALL_HEIGHT_M else "sill", _rect(*p0, *p1), height))
    if rng.uniform() < 0.5 and min(x1 - x0, y1 - y0) > 7.0:
        vertical = bool(rng.uniform() < 0.5)
        if vertical:
            pos = _r(rng.uniform(x0 + 3.0, x1 - 3.0), 0.05)
            door = _r(rng.uniform(y0 + t + 0.8, y1 - t - 2.2), 0.05)
            inner = [_rect(pos - 0.1, y0 + t, pos + 0.1, door), _rect(pos - 0.1, door + 1.4, pos + 0.1, y1 - t)]
        else:
            pos = _r(rng.uniform(y0 + 3.0, y1 - 3.0), 0.05)
            door = _r(rng.uniform(x0 + t + 0.8, x1 - t - 2.2), 0.05)
            inner = [_rect(x0 + t, pos - 0.1, door, pos + 0.1), _rect(door + 1.4, pos - 0.1, x1 - t, pos + 0.1)]
        pieces.extend(_Piece("iw", r, FULL_WALL_HEIGHT_M) for r in inner)
    return pieces


def _solid_building(rng: np.random.Generator, x0: float, y0: float, x1: float, y1: float) -> list[_Piece]:
    """A closed building: a rectangle, an L shape or a rotated box that fits the lot."""
    roll = rng.uniform()
    if roll < 0.4:
        return [_Piece("blk", _rect(x0, y0, x1, y1), FULL_WALL_HEIGHT_M)]
    if roll < 0.7:
        cx = _r(rng.uniform(x0 + 0.4 * (x1 - x0), x0 + 0.6 * (x1 - x0)), 0.25)
        cy = _r(rng.uniform(y0 + 0.4 * (y1 - y0), y0 + 0.6 * (y1 - y0)), 0.25)
        corner = int(rng.integers(4))
        cut = [_rect(cx, cy, x1, y1), _rect(x0, cy, cx, y1), _rect(x0, y0, cx, cy), _rect(cx, y0, x1, cy)][corner]
        return [_Piece("blk", shapely.difference(_rect(x0, y0, x1, y1), cut), FULL_WALL_HEIGHT_M)]
    angle = float(rng.choice([-1.0, 1.0]) * rng.uniform(8.0, 25.0))
    a = math.radians(abs(angle))
    w, h = x1 - x0, y1 - y0
    # Largest box of the lot's aspect that still fits once rotated.
    scale = min(w / (w * math.cos(a) + h * math.sin(a)), h / (w * math.sin(a) + h * math.cos(a))) * 0.97
    return [_Piece("rot", _rotated_rect((x0 + x1) / 2, (y0 + y1) / 2, w * scale, h * scale, angle), FULL_WALL_HEIGHT_M)]


def _courtyard(rng: np.random.Generator, x0: float, y0: float, x1: float, y1: float) -> list[_Piece]:
    """An open lot: a kiosk and some low planters/benches."""
    pieces = [
        _Piece(
            "kiosk",
            _rotated_rect(_r(rng.uniform(x0 + 3, x1 - 3)), _r(rng.uniform(y0 + 3, y1 - 3)), 2.5, 2.0, rng.uniform(0, 90)),
            FULL_WALL_HEIGHT_M,
        )
    ]
    placed = pieces[0].polygon
    for _ in range(int(rng.integers(2, 5))):
        for _attempt in range(30):
            p = _rotated_rect(_r(rng.uniform(x0 + 1.5, x1 - 1.5)), _r(rng.uniform(y0 + 1.5, y1 - 1.5)), rng.uniform(1.5, 3.0), 0.8, rng.uniform(0, 180))
            if _free_of(placed, p, 1.8):
                pieces.append(_Piece("planter", p, LOW_COVER_HEIGHT_M))
                placed = shapely.union(placed, p)
                break
    return pieces


def _plaza(rng: np.random.Generator, x0: float, y0: float, x1: float, y1: float) -> list[_Piece]:
    """A whole-block square: a low fountain, a monument and scattered benches."""
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    pieces = [
        _Piece("fountain", _rock(rng, cx, cy, 3.5), LOW_COVER_HEIGHT_M),
        _Piece("monument", _rotated_rect(cx + 8.0, cy - 8.0, 2.0, 2.0, 45.0), FULL_WALL_HEIGHT_M),
    ]
    placed = shapely.union_all([p.polygon for p in pieces])
    for _ in range(10):
        for _attempt in range(30):
            p = _rotated_rect(_r(rng.uniform(x0 + 2, x1 - 2)), _r(rng.uniform(y0 + 2, y1 - 2)), 2.0, 0.6, rng.uniform(0, 180))
            if _free_of(placed, p, 2.0):
                pieces.append(_Piece("bench", p, LOW_COVER_HEIGHT_M))
                placed = shapely.union(placed, p)
                break
    return pieces


def generate_city(seed: int = SEED) -> GameMap:
    """200 x 200 m city: a 5 x 5 grid of 28 m blocks between 11 m streets. Blocks hold four lots
    of hollow buildings (walls with doors and window sills), solid, L-shaped or rotated buildings
    and courtyards; two blocks are plazas; cars and barriers (low cover) line the streets."""
    rng = np.random.default_rng([seed, 3])
    bounds = (0.0, 0.0, 200.0, 200.0)
    pieces: list[_Piece] = []
    plazas = {(1, 3), (3, 1)}
    alley = 2.0
    for bi in range(_CITY_BLOCKS):
        for bj in range(_CITY_BLOCKS):
            bx0, bx1 = _block_span(bi)
            by0, by1 = _block_span(bj)
            if (bi, bj) in plazas:
                pieces.extend(_plaza(rng, bx0, by0, bx1, by1))
                continue
            half = (_CITY_BLOCK - alley) / 2
            for li in range(2):
                for lj in range(2):
                    lx0 = bx0 + li * (half + alley)
                    ly0 = by0 + lj * (half + alley)
                    inset = _r(rng.uniform(0.3, 1.2), 0.05)
                    lot = (lx0 + inset, ly0 + inset, lx0 + half - inset, ly0 + half - inset)
                    roll = rng.uniform()
                    if roll < 0.55:
                        pieces.extend(_hollow_building(rng, *lot))
                    elif roll < 0.9:
                        pieces.extend(_solid_building(rng, *lot))
                    else:
                        pieces.extend(_courtyard(rng, *lot))

    placed = shapely.union_all([p.polygon for p in pieces])
    # Street centre lines: (fixed coordinate, is the street horizontal, half width).
    streets: list[tuple[float, bool, float]] = []
    for k in range(_CITY_BLOCKS + 1):
        if k == 0:
            c, half_w = _CITY_MARGIN / 2, _CITY_MARGIN / 2
        elif k == _CITY_BLOCKS:
            c, half_w = 200.0 - _CITY_MARGIN / 2, _CITY_MARGIN / 2
        else:
            c, half_w = _block_span(k)[0] - _CITY_STREET / 2, _CITY_STREET / 2
        streets.extend([(c, True, half_w), (c, False, half_w)])
    cars = 0
    for _ in range(3000):
        if cars >= 130:
            break
        c, horizontal, half_w = streets[int(rng.integers(len(streets)))]
        span = _block_span(int(rng.integers(_CITY_BLOCKS)))
        along = rng.uniform(span[0] + 2.5, span[1] - 2.5)
        crashed = rng.uniform() < 0.12
        side = float(rng.choice([-1.0, 1.0]))
        across = c + (rng.uniform(-1.5, 1.5) if crashed else side * (half_w - 1.4))
        angle = rng.uniform(0, 180) if crashed else rng.normal(0.0, 3.0)
        x, y = (along, across) if horizontal else (across, along)
        car = _rotated_rect(x, y, 4.4, 1.9, angle if horizontal else angle + 90.0)
        if not shapely.within(car, shapely.box(0.3, 0.3, 199.7, 199.7)) or not _free_of(placed, car, 1.6):
            continue
        pieces.append(_Piece("car", car, LOW_COVER_HEIGHT_M))
        placed = shapely.union(placed, car)
        cars += 1
    barriers = 0
    for _ in range(1000):
        if barriers >= 30:
            break
        x, y = rng.uniform(3.0, 197.0, 2)
        barrier = _rotated_rect(float(x), float(y), 2.4, 0.5, rng.uniform(0, 180))
        if not _free_of(placed, barrier, 2.0):
            continue
        pieces.append(_Piece("barrier", barrier, LOW_COVER_HEIGHT_M))
        placed = shapely.union(placed, barrier)
        barriers += 1

    spans = [_block_span(k) for k in range(_CITY_BLOCKS)]
    blocks = shapely.union_all([shapely.box(x0, y0, x1, y1) for x0, x1 in spans for y0, y1 in spans])
    streets_area = shapely.difference(shapely.box(*bounds), blocks)
    spawns = _spread_spawns(rng, pieces, bounds, 40, region=streets_area)
    return _finish("city", bounds, pieces, spawns)


GENERATORS: Final[dict[str, Callable[[int], GameMap]]] = {
    "open": generate_open,
    "corridors": generate_corridors,
    "city": generate_city,
}


def default_maps_dir() -> Path:
    """The package folder holding the built-in maps."""
    return Path(str(resources.files("world").joinpath("maps")))


def main(argv: list[str] | None = None) -> int:
    """CLI: regenerate (or ``--check``) the built-in maps; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m world.mapgen", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the package's world/maps)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--check", action="store_true", help="compare with the files instead of writing them")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"maps to generate (default all: {', '.join(GENERATORS)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in GENERATORS]
    if unknown:
        parser.error(f"unknown map(s) {', '.join(unknown)}; choose from {', '.join(GENERATORS)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = args.out or default_maps_dir()
    status = 0
    for name in args.names or list(GENERATORS):
        text = dump_map(GENERATORS[name](args.seed))
        path = out / f"{name}.json"
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            log.info("%s: %s", path, "up to date" if same else "DIFFERS from the generator")
            status |= 0 if same else 1
        else:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            log.info("wrote %s", path)
    return status


if __name__ == "__main__":
    sys.exit(main())
