"""The map file format (``referee-map/1``): loading, strict validation and serialisation.

A map is a JSON object with walls (vertical prisms standing on the floor at z = 0) and spawn
points; MAPS.md documents every key. Units: meters for positions and heights, degrees for yaw.

Validation is strict because a map is trusted by every other layer: a malformed map fails at load
time with a :class:`MapError` naming the file, the item and the problem, never later as a silent
geometry bug in the middle of a match.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final

import numpy as np
import shapely

from world.constants import PLAYER_RADIUS_M

log = logging.getLogger(__name__)

FORMAT_ID: Final = "referee-map/1"
"""Value of the ``format`` key this loader understands."""

MIN_WALL_AREA_M2: Final = 1e-6
"""Walls with a smaller footprint (m²) are rejected as degenerate: they block nothing reliably."""

_TOP_KEYS: Final = frozenset({"format", "name", "bounds", "walls", "spawns"})
_WALL_KEYS: Final = frozenset({"id", "polygon", "height"})
_SPAWN_KEYS: Final = frozenset({"id", "pos", "yaw"})

_BUILTIN_PACKAGE: Final = "world"
_BUILTIN_DIR: Final = "maps"


class MapError(ValueError):
    """A map file is malformed; the message names the file, the item and the problem."""


@dataclass(frozen=True, slots=True)
class Wall:
    """A vertical prism from the floor (z = 0) up to ``height`` meters.

    ``polygon`` is the footprint: at least 3 distinct (x, y) vertices in meters, without the
    closing vertex, simple (no self-intersection), in the file's order (either orientation).
    """

    id: str
    polygon: tuple[tuple[float, float], ...]
    height: float


@dataclass(frozen=True, slots=True)
class Spawn:
    """A spawn point: feet position (x, y) in meters and initial yaw in degrees.

    Yaw convention: 0 degrees looks along +x, 90 degrees along +y (counter-clockwise seen
    from above).
    """

    id: str
    x: float
    y: float
    yaw_deg: float


@dataclass(frozen=True, slots=True)
class GameMap:
    """A validated map. ``bounds`` is (xmin, ymin, xmax, ymax) in meters; ``source`` names where
    it was loaded from (a path, ``builtin:<name>`` or a caller-chosen label) and is not part of
    equality."""

    name: str
    bounds: tuple[float, float, float, float]
    walls: tuple[Wall, ...]
    spawns: tuple[Spawn, ...]
    source: str = field(default="<memory>", compare=False)


class _Reporter:
    """Builds error messages of the form ``<source>: <item>: <problem>``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> MapError:
        where_part = f"{where}: " if where else ""
        return MapError(f"{self.source}: {where_part}{problem}")


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_keys(rep: _Reporter, where: str, obj: object, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise rep.fail(where, f"must be a JSON object, got {type(obj).__name__}")
    for key in obj:
        if key not in allowed:
            raise rep.fail(where, f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(allowed):
        if key not in obj:
            raise rep.fail(where, f"missing key {key!r}")
    return obj


def _number(rep: _Reporter, where: str, value: object) -> float:
    # bool is a subclass of int in Python; `true` in a map file is a typo, not the number 1.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise rep.fail(where, f"must be a number, got {type(value).__name__} {_describe(value)}")
    result = float(value)
    if not math.isfinite(result):
        raise rep.fail(where, f"must be a finite number, got {value!r}")
    return result


def _string(rep: _Reporter, where: str, value: object) -> str:
    if not isinstance(value, str):
        raise rep.fail(where, f"must be a string, got {type(value).__name__} {_describe(value)}")
    if not value.strip():
        raise rep.fail(where, "must be a non-empty string")
    return value


def _list(rep: _Reporter, where: str, value: object) -> Sequence[Any]:
    # A JSON string is a sequence too; only real lists are accepted.
    if not isinstance(value, (list, tuple)):
        raise rep.fail(where, f"must be a JSON array, got {type(value).__name__} {_describe(value)}")
    return value


def _point(rep: _Reporter, where: str, value: object) -> tuple[float, float]:
    items = _list(rep, where, value)
    if len(items) != 2:
        raise rep.fail(where, f"must be an [x, y] pair, got {len(items)} values")
    return (_number(rep, f"{where}[0]", items[0]), _number(rep, f"{where}[1]", items[1]))


def _parse_bounds(rep: _Reporter, value: object) -> tuple[float, float, float, float]:
    items = _list(rep, "bounds", value)
    if len(items) != 4:
        raise rep.fail("bounds", f"must be [xmin, ymin, xmax, ymax], got {len(items)} values")
    xmin, ymin, xmax, ymax = (_number(rep, f"bounds[{i}]", v) for i, v in enumerate(items))
    if not (xmin < xmax and ymin < ymax):
        raise rep.fail("bounds", f"must satisfy xmin < xmax and ymin < ymax, got {list(items)!r}")
    return (xmin, ymin, xmax, ymax)


def _item_label(kind: str, index: int, obj: object) -> str:
    """``walls[3] (id 'w3')`` when the id is readable, else ``walls[3]``."""
    if isinstance(obj, Mapping):
        ident = obj.get("id")
        if isinstance(ident, str) and ident.strip():
            return f"{kind}[{index}] (id {ident!r})"
    return f"{kind}[{index}]"


def _collinear(points: Sequence[tuple[float, float]]) -> bool:
    pts = np.asarray(points, dtype=float)
    rel = pts - pts[0]
    span = float(np.max(np.abs(rel))) or 1.0
    # Cross products against the farthest point; relative tolerance so the test is scale-free.
    far = rel[int(np.argmax(np.hypot(rel[:, 0], rel[:, 1])))]
    cross = rel[:, 0] * far[1] - rel[:, 1] * far[0]
    return bool(np.all(np.abs(cross) <= 1e-12 * span * span))


def _parse_polygon(rep: _Reporter, where: str, value: object) -> tuple[tuple[float, float], ...]:
    items = _list(rep, where, value)
    points = [_point(rep, f"{where}[{i}]", p) for i, p in enumerate(items)]
    if len(points) >= 2 and points[0] == points[-1]:
        points.pop()  # the closing vertex is optional
    cleaned: list[tuple[float, float]] = []
    for p in points:
        if not cleaned or cleaned[-1] != p:
            cleaned.append(p)
    if len(cleaned) >= 2 and cleaned[0] == cleaned[-1]:
        cleaned.pop()
    if len(set(cleaned)) < 3:
        raise rep.fail(where, f"needs at least 3 distinct points, got {len(set(cleaned))}")
    if _collinear(cleaned):
        raise rep.fail(where, "is degenerate: all its points are collinear (zero area)")
    poly = shapely.Polygon(cleaned)
    if not shapely.is_valid(poly):
        raise rep.fail(where, f"is self-intersecting or otherwise invalid ({shapely.is_valid_reason(poly)})")
    if poly.area < MIN_WALL_AREA_M2:
        raise rep.fail(where, f"is degenerate: area {poly.area:.3g} m² is below {MIN_WALL_AREA_M2:g} m²")
    return tuple(cleaned)


def _parse_wall(rep: _Reporter, label: str, obj: object, bounds: tuple[float, float, float, float]) -> Wall:
    data = _check_keys(rep, label, obj, _WALL_KEYS)
    ident = _string(rep, f"{label}.id", data["id"])
    polygon = _parse_polygon(rep, f"{label}.polygon", data["polygon"])
    height = _number(rep, f"{label}.height", data["height"])
    if height <= 0.0:
        raise rep.fail(f"{label}.height", f"must be positive (meters), got {height!r}")
    xmin, ymin, xmax, ymax = bounds
    for i, (x, y) in enumerate(polygon):
        if not (xmin <= x <= xmax and ymin <= y <= ymax):
            raise rep.fail(f"{label}.polygon", f"point {i} ({x}, {y}) lies outside the map bounds {list(bounds)}")
    return Wall(id=ident, polygon=polygon, height=height)


def _parse_spawn(rep: _Reporter, label: str, obj: object, bounds: tuple[float, float, float, float]) -> Spawn:
    data = _check_keys(rep, label, obj, _SPAWN_KEYS)
    ident = _string(rep, f"{label}.id", data["id"])
    x, y = _point(rep, f"{label}.pos", data["pos"])
    yaw = _number(rep, f"{label}.yaw", data["yaw"])
    xmin, ymin, xmax, ymax = bounds
    if not (xmin <= x <= xmax and ymin <= y <= ymax):
        raise rep.fail(f"{label}.pos", f"({x}, {y}) lies outside the map bounds {list(bounds)}")
    clearance = min(x - xmin, xmax - x, y - ymin, ymax - y)
    if clearance <= PLAYER_RADIUS_M:
        raise rep.fail(
            f"{label}.pos",
            f"({x}, {y}) is {clearance:.3f} m from the map bounds, within the player radius {PLAYER_RADIUS_M} m",
        )
    return Spawn(id=ident, x=x, y=y, yaw_deg=yaw)


def _check_unique(rep: _Reporter, kind: str, labels: Sequence[str], ids: Sequence[str]) -> None:
    first: dict[str, int] = {}
    for i, ident in enumerate(ids):
        if ident in first:
            raise rep.fail(labels[i], f"duplicate id {ident!r} (first used by {kind}[{first[ident]}])")
        first[ident] = i


def _check_spawn_clearance(
    rep: _Reporter, walls: Sequence[Wall], spawns: Sequence[Spawn], spawn_labels: Sequence[str]
) -> None:
    if not walls:
        return
    geoms = np.array([shapely.Polygon(w.polygon) for w in walls], dtype=object)
    tree = shapely.STRtree(geoms)
    points = shapely.points([(s.x, s.y) for s in spawns])
    # Only walls whose box is within reach can be too close; STRtree keeps this linear-ish.
    pairs = tree.query(points, predicate="dwithin", distance=PLAYER_RADIUS_M)
    if pairs.shape[1] == 0:
        return
    dist = shapely.distance(points[pairs[0]], geoms[pairs[1]])
    # Touching counts as blocked, as in MapGeometry.circle_blocked: a spawn must be strictly clear.
    bad = np.flatnonzero(dist <= PLAYER_RADIUS_M)
    if bad.size == 0:
        return
    # Report the first offending spawn in file order so messages are stable.
    k = bad[np.argmin(pairs[0][bad])]
    si, wi = int(pairs[0][k]), int(pairs[1][k])
    spawn, wall = spawns[si], walls[wi]
    if shapely.intersects_xy(geoms[wi], spawn.x, spawn.y):
        problem = f"({spawn.x}, {spawn.y}) is inside wall {wall.id!r}"
    else:
        problem = (
            f"({spawn.x}, {spawn.y}) is {float(dist[k]):.3f} m from wall {wall.id!r}, "
            f"within the player radius {PLAYER_RADIUS_M} m"
        )
    raise rep.fail(f"{spawn_labels[si]}.pos", problem)


def parse_map(obj: object, source: str = "<map>") -> GameMap:
    """Validate a decoded JSON object as a ``referee-map/1`` map and build a :class:`GameMap`.

    ``source`` names the map in error messages (a file path or a label). Raises :class:`MapError`
    naming the offending item for any unknown/missing key, wrong type, non-finite number,
    degenerate or self-intersecting polygon, non-positive height, item outside the bounds,
    duplicate id, or spawn inside / within PLAYER_RADIUS_M (meters) of a wall or the bounds.
    """
    rep = _Reporter(source)
    top = _check_keys(rep, "", obj, _TOP_KEYS)
    fmt = top["format"]
    if fmt != FORMAT_ID:
        raise rep.fail("format", f"must be {FORMAT_ID!r}, got {_describe(fmt)}")
    name = _string(rep, "name", top["name"])
    bounds = _parse_bounds(rep, top["bounds"])

    raw_walls = _list(rep, "walls", top["walls"])
    wall_labels = [_item_label("walls", i, w) for i, w in enumerate(raw_walls)]
    walls = tuple(_parse_wall(rep, wall_labels[i], w, bounds) for i, w in enumerate(raw_walls))
    _check_unique(rep, "walls", wall_labels, [w.id for w in walls])

    raw_spawns = _list(rep, "spawns", top["spawns"])
    if not raw_spawns:
        raise rep.fail("spawns", "must contain at least one spawn point")
    spawn_labels = [_item_label("spawns", i, s) for i, s in enumerate(raw_spawns)]
    spawns = tuple(_parse_spawn(rep, spawn_labels[i], s, bounds) for i, s in enumerate(raw_spawns))
    _check_unique(rep, "spawns", spawn_labels, [s.id for s in spawns])
    _check_spawn_clearance(rep, walls, spawns, spawn_labels)

    return GameMap(name=name, bounds=bounds, walls=walls, spawns=spawns, source=source)


def _no_duplicate_keys(source: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise MapError(f"{source}: duplicate key {key!r} in a JSON object")
            result[key] = value
        return result

    return hook


def parse_map_text(text: str, source: str = "<map>") -> GameMap:
    """Decode JSON text (rejecting duplicate keys) and validate it with :func:`parse_map`."""
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys(source))
    except json.JSONDecodeError as exc:
        raise MapError(f"{source}: not valid JSON: {exc}") from exc
    return parse_map(obj, source=source)


def load_map(path: str | os.PathLike[str]) -> GameMap:
    """Load and validate a map file (UTF-8 JSON). Raises MapError for a malformed map and
    OSError when the file cannot be read."""
    source = os.fspath(path)
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    game_map = parse_map_text(text, source=source)
    log.debug("loaded map %r from %s: %d walls, %d spawns", game_map.name, source, len(game_map.walls), len(game_map.spawns))
    return game_map


def builtin_map_names() -> tuple[str, ...]:
    """Names of the maps shipped in ``world/maps`` (sorted)."""
    folder = resources.files(_BUILTIN_PACKAGE).joinpath(_BUILTIN_DIR)
    return tuple(sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json")))


def builtin_map(name: str) -> GameMap:
    """Load the built-in map ``name`` (see :func:`builtin_map_names`); its source is ``builtin:<name>``."""
    names = builtin_map_names()
    if name not in names:
        raise KeyError(f"no built-in map {name!r}; available: {', '.join(names)}")
    text = resources.files(_BUILTIN_PACKAGE).joinpath(_BUILTIN_DIR, f"{name}.json").read_text(encoding="utf-8")
    return parse_map_text(text, source=f"builtin:{name}")


def _num(value: float) -> float | int:
    # Integral values are written without ".0" so generated files stay short and diffable.
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def map_to_json_obj(game_map: GameMap) -> dict[str, Any]:
    """The JSON object for ``game_map`` (round-trips through :func:`parse_map`)."""
    return {
        "format": FORMAT_ID,
        "name": game_map.name,
        "bounds": [_num(v) for v in game_map.bounds],
        "walls": [
            {"id": w.id, "polygon": [[_num(x), _num(y)] for x, y in w.polygon], "height": _num(w.height)}
            for w in game_map.walls
        ],
        "spawns": [{"id": s.id, "pos": [_num(s.x), _num(s.y)], "yaw": _num(s.yaw_deg)} for s in game_map.spawns],
    }


def dump_map(game_map: GameMap) -> str:
    """Serialise ``game_map`` as JSON text: one wall or spawn per line, so diffs stay readable."""
    obj = map_to_json_obj(game_map)
    head = {k: obj[k] for k in ("format", "name", "bounds")}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    for key in ("walls", "spawns"):
        items = obj[key]
        lines.append(f"  {json.dumps(key)}: [")
        for i, item in enumerate(items):
            sep = "," if i < len(items) - 1 else ""
            lines.append(f"    {json.dumps(item, separators=(', ', ': '))}{sep}")
        lines.append("  ]," if key == "walls" else "  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"
