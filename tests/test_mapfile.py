"""Map file format: validation errors name the file, the item and the problem; built-ins load."""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import shapely

from world.constants import FULL_WALL_HEIGHT_M, LOW_COVER_HEIGHT_M, PLAYER_RADIUS_M
from world.mapfile import (
    FORMAT_ID,
    GameMap,
    MapError,
    Spawn,
    Wall,
    builtin_map,
    builtin_map_names,
    dump_map,
    load_map,
    map_to_json_obj,
    parse_map,
    parse_map_text,
)
from world.mapgen import GENERATORS, SEED, default_maps_dir

SOURCE = "maps/test.json"


def valid_obj() -> dict[str, Any]:
    return {
        "format": FORMAT_ID,
        "name": "test",
        "bounds": [0, 0, 40, 30],
        "walls": [
            {"id": "w1", "polygon": [[10, 10], [12, 10], [12, 20], [10, 20]], "height": 4.0},
            {"id": "w2", "polygon": [[20, 10], [21, 10], [21, 20], [20, 20]], "height": 1.2},
        ],
        "spawns": [{"id": "s1", "pos": [5, 5], "yaw": 90}, {"id": "s2", "pos": [30, 25], "yaw": -45.5}],
    }


def expect_error(obj: object, *fragments: str) -> str:
    with pytest.raises(MapError) as info:
        parse_map(obj, source=SOURCE)
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: "), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def mutated(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = copy.deepcopy(valid_obj())
    fn(obj)
    return obj


def test_valid_map_parses_into_frozen_records() -> None:
    game_map = parse_map(valid_obj(), source=SOURCE)
    assert game_map.name == "test"
    assert game_map.bounds == (0.0, 0.0, 40.0, 30.0)
    assert game_map.walls[0] == Wall(id="w1", polygon=((10.0, 10.0), (12.0, 10.0), (12.0, 20.0), (10.0, 20.0)), height=4.0)
    assert game_map.spawns[1] == Spawn(id="s2", x=30.0, y=25.0, yaw_deg=-45.5)
    assert game_map.source == SOURCE
    with pytest.raises(AttributeError):
        game_map.name = "other"  # type: ignore[misc]


def test_closing_vertex_and_repeated_vertices_are_dropped() -> None:
    obj = mutated(lambda o: o["walls"][0].update(polygon=[[10, 10], [12, 10], [12, 10], [12, 20], [10, 20], [10, 10]]))
    assert parse_map(obj).walls[0].polygon == ((10.0, 10.0), (12.0, 10.0), (12.0, 20.0), (10.0, 20.0))


def test_round_trip_through_json() -> None:
    game_map = parse_map(valid_obj(), source=SOURCE)
    again = parse_map_text(dump_map(game_map), source="again")
    assert again == game_map  # source is not part of equality
    assert map_to_json_obj(again) == map_to_json_obj(game_map)


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda o: o.update(extra=1), ["unknown key 'extra'"]),
        (lambda o: o["walls"][1].update(color="red"), ["walls[1] (id 'w2')", "unknown key 'color'"]),
        (lambda o: o["spawns"][0].update(team=1), ["spawns[0] (id 's1')", "unknown key 'team'"]),
        (lambda o: o.pop("bounds"), ["missing key 'bounds'"]),
        (lambda o: o["walls"][0].pop("height"), ["walls[0] (id 'w1')", "missing key 'height'"]),
        (lambda o: o["spawns"][1].pop("yaw"), ["spawns[1] (id 's2')", "missing key 'yaw'"]),
        (lambda o: o["walls"][0].pop("id"), ["walls[0]", "missing key 'id'"]),
        (lambda o: o.update(format="referee-map/2"), ["format", "referee-map/1"]),
        (lambda o: o.update(name=7), ["name", "must be a string"]),
        (lambda o: o.update(walls={"w1": {}}), ["walls", "must be a JSON array"]),
        (lambda o: o["walls"].append("w3"), ["walls[2]", "must be a JSON object"]),
        (lambda o: o["walls"][0].update(height="4"), ["walls[0] (id 'w1').height", "must be a number"]),
        (lambda o: o["walls"][0].update(height=True), ["walls[0] (id 'w1').height", "must be a number", "bool"]),
        (lambda o: o["walls"][0]["polygon"][2].__setitem__(0, False), ["walls[0] (id 'w1').polygon[2][0]", "bool"]),
        (lambda o: o["spawns"][0].update(pos=[5, True]), ["spawns[0] (id 's1').pos[1]", "bool"]),
        (lambda o: o["walls"][0]["polygon"].__setitem__(1, [12, 10, 0]), ["walls[0] (id 'w1').polygon[1]", "[x, y] pair"]),
        (lambda o: o["walls"][1].update(id=""), ["walls[1].id", "non-empty"]),
        (lambda o: o["walls"][0].update(height=math.nan), ["walls[0] (id 'w1').height", "finite"]),
        (lambda o: o["walls"][0].update(height=math.inf), ["walls[0] (id 'w1').height", "finite"]),
        (lambda o: o["walls"][1]["polygon"].__setitem__(0, [math.inf, 10]), ["walls[1] (id 'w2').polygon[0][0]", "finite"]),
        (lambda o: o["spawns"][1].update(yaw=math.nan), ["spawns[1] (id 's2').yaw", "finite"]),
        (lambda o: o.update(bounds=[0, 0, math.inf, 30]), ["bounds[2]", "finite"]),
        (lambda o: o["walls"][0].update(polygon=[[10, 10], [12, 10], [10, 10], [12, 10]]), ["walls[0] (id 'w1').polygon", "at least 3 distinct"]),
        (lambda o: o["walls"][0].update(polygon=[[10, 10], [12, 10]]), ["walls[0] (id 'w1').polygon", "at least 3 distinct"]),
        (lambda o: o["walls"][0].update(polygon=[[10, 10], [12, 12], [12, 10], [10, 12]]), ["walls[0] (id 'w1').polygon", "self-intersecting"]),
        (lambda o: o["walls"][1].update(polygon=[[10, 10], [11, 10], [13, 10]]), ["walls[1] (id 'w2').polygon", "degenerate"]),
        (lambda o: o["walls"][1].update(polygon=[[10, 10], [11, 10], [11, 10.0000001], [10, 10.0000001]]), ["walls[1] (id 'w2').polygon", "degenerate", "area"]),
        (lambda o: o["walls"][0].update(height=0), ["walls[0] (id 'w1').height", "must be positive"]),
        (lambda o: o["walls"][0].update(height=-1.5), ["walls[0] (id 'w1').height", "must be positive"]),
        (lambda o: o["walls"][1]["polygon"].__setitem__(1, [41, 10]), ["walls[1] (id 'w2').polygon", "outside the map bounds"]),
        (lambda o: o["walls"][1].update(id="w1"), ["walls[1] (id 'w1')", "duplicate id 'w1'", "walls[0]"]),
        (lambda o: o["spawns"][1].update(id="s1"), ["spawns[1] (id 's1')", "duplicate id 's1'"]),
        (lambda o: o.update(bounds=[0, 0, 40]), ["bounds", "xmin, ymin, xmax, ymax"]),
        (lambda o: o.update(bounds=[40, 0, 0, 30]), ["bounds", "xmin < xmax"]),
        (lambda o: o.update(bounds=[0, 30, 40, 30]), ["bounds", "ymin < ymax"]),
        (lambda o: o["spawns"][0].update(pos=[-3, 5]), ["spawns[0] (id 's1').pos", "outside the map bounds"]),
        (lambda o: o["spawns"][0].update(pos=[0.2, 5]), ["spawns[0] (id 's1').pos", "from the map bounds", "player radius"]),
        (lambda o: o["spawns"][1].update(pos=[11, 15]), ["spawns[1] (id 's2').pos", "inside wall 'w1'"]),
        (lambda o: o["spawns"][1].update(pos=[21.3, 15]), ["spawns[1] (id 's2').pos", "from wall 'w2'", "player radius"]),
        (lambda o: o.update(spawns=[]), ["spawns", "at least one spawn"]),
    ],
)
def test_invalid_maps_are_rejected_naming_the_item(mutate: Callable[[dict[str, Any]], None], fragments: list[str]) -> None:
    expect_error(mutated(mutate), *fragments)


def test_spawn_clearance_threshold_is_the_player_radius() -> None:
    expect_error(mutated(lambda o: o["spawns"][1].update(pos=[21 + PLAYER_RADIUS_M - 1e-9, 15])), "from wall 'w2'")
    parse_map(mutated(lambda o: o["spawns"][1].update(pos=[21 + PLAYER_RADIUS_M + 1e-6, 15])))


def test_json_text_errors_name_the_source() -> None:
    with pytest.raises(MapError, match=r"^inline: not valid JSON"):
        parse_map_text("{", source="inline")
    with pytest.raises(MapError, match=r"^inline: duplicate key 'name'"):
        parse_map_text('{"name": "a", "name": "b"}', source="inline")
    text = json.dumps(valid_obj()).replace('"height": 4.0', '"height": NaN')
    with pytest.raises(MapError, match=r"walls\[0\] \(id 'w1'\)\.height: must be a finite number"):
        parse_map_text(text, source="inline")


def test_load_map_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_obj()), encoding="utf-8")
    assert load_map(good).source == str(good)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(mutated(lambda o: o["walls"][1].update(height=0))), encoding="utf-8")
    with pytest.raises(MapError) as info:
        load_map(bad)
    assert str(info.value).startswith(f"{bad}: walls[1] (id 'w2').height: must be positive")
    with pytest.raises(OSError):
        load_map(tmp_path / "missing.json")


def test_map_error_is_a_value_error() -> None:
    assert issubclass(MapError, ValueError)


# ------------------------------------------------------------------------------ built-ins


@pytest.fixture(scope="module")
def builtins() -> dict[str, GameMap]:
    return {name: builtin_map(name) for name in builtin_map_names()}


def test_builtin_names() -> None:
    assert builtin_map_names() == ("city", "corridors", "open")
    with pytest.raises(KeyError):
        builtin_map("nowhere")


@pytest.mark.parametrize(
    ("name", "size", "min_walls", "min_spawns"),
    [("open", 120.0, 24, 16), ("corridors", 60.0, 40, 16), ("city", 200.0, 500, 32)],
)
def test_builtin_maps_load(builtins: dict[str, GameMap], name: str, size: float, min_walls: int, min_spawns: int) -> None:
    game_map = builtins[name]
    assert game_map.name == name
    assert game_map.source == f"builtin:{name}"
    xmin, ymin, xmax, ymax = game_map.bounds
    assert (xmax - xmin, ymax - ymin) == (size, size)
    assert len(game_map.walls) >= min_walls
    assert len(game_map.spawns) >= min_spawns
    # Both kinds of wall: full walls and low cover.
    assert {w.height for w in game_map.walls} == {LOW_COVER_HEIGHT_M, FULL_WALL_HEIGHT_M}


def test_city_is_dense(builtins: dict[str, GameMap]) -> None:
    assert len(builtins["city"].walls) >= 500


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_builtin_spawns_are_clear_and_spread(builtins: dict[str, GameMap], name: str) -> None:
    game_map = builtins[name]
    walls = shapely.union_all([shapely.Polygon(w.polygon) for w in game_map.walls])
    pts = np.array([(s.x, s.y) for s in game_map.spawns])
    dist = shapely.distance(walls, shapely.points(pts))
    assert dist.min() > PLAYER_RADIUS_M
    closest = min(math.dist(a, b) for a, b in itertools.combinations(pts.tolist(), 2))
    assert closest >= 5.0


@pytest.mark.parametrize("name", ["open", "corridors", "city"])
def test_committed_maps_match_the_generator(name: str) -> None:
    committed = (default_maps_dir() / f"{name}.json").read_text(encoding="utf-8")
    assert dump_map(GENERATORS[name](SEED)) == committed
