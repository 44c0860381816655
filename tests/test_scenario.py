"""Scenario files: loading, defaults, expansion into bots, and errors that name file, item, problem."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testbed.scenario import (
    ScenarioError,
    builtin_scenario_names,
    default_scenario,
    load_scenario,
    parse_scenario_text,
)

MINIMAL = """
map = "open"
duration_s = 30
tick_rate_hz = 64
seed = 9

[[bots]]
count = 2
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_scenario_gets_documented_defaults(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, MINIMAL, "duel.toml"))
    assert s.name == "duel"
    assert s.map == "open" and s.duration_s == 30.0 and s.tick_rate_hz == 64 and s.seed == 9
    (group,) = s.bots
    assert (group.profile, group.skill, group.ping_ms, group.loss) == ("honest", "average", 50.0, 0.0)
    bots = s.players()
    assert [b.name for b in bots] == ["honest-1", "honest-2"]
    assert bots[0].path.uplink.latency_ms == 25.0 and bots[0].path.downlink.latency_ms == 25.0


def test_groups_expand_in_order_with_link_and_params(tmp_path: Path) -> None:
    text = MINIMAL + """
[[bots]]
count = 1
profile = "smooth_aimbot"
ping_ms = 120
jitter_ms = 8
loss = 0.03
name_prefix = "sus"
[bots.params]
strength = 0.5
"""
    s = load_scenario(write(tmp_path, text), profiles={"honest", "smooth_aimbot"})
    bots = s.players()
    assert [b.index for b in bots] == [0, 1, 2]
    sus = bots[2]
    assert sus.name == "sus-1" and sus.profile == "smooth_aimbot" and dict(sus.params) == {"strength": 0.5}
    assert sus.path.uplink.latency_ms == 60.0 and sus.path.uplink.jitter_ms == 8.0 and sus.path.uplink.loss == 0.03
    assert sus.label()["params"] == {"strength": 0.5}
    with pytest.raises(TypeError):
        sus.params["strength"] = 1.0  # type: ignore[index]


def test_map_file_path_is_resolved_against_the_scenario_folder(tmp_path: Path) -> None:
    from world.mapfile import builtin_map, dump_map

    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "mine.json").write_text(dump_map(builtin_map("open")), encoding="utf-8")
    s = load_scenario(write(tmp_path, MINIMAL.replace('"open"', '"maps/mine.json"')))
    assert Path(s.map) == tmp_path / "maps" / "mine.json"
    assert s.load_map().name == "open"


def test_default_scenario_is_packaged_and_mixed() -> None:
    assert "default" in builtin_scenario_names()
    s = default_scenario()
    bots = s.players()
    assert 10 <= sum(b.profile == "honest" for b in bots) <= 16
    cheaters = {b.profile for b in bots if b.profile != "honest"}
    assert len(cheaters) >= 3
    pings = [b.ping_ms for b in bots if b.profile == "honest"]
    assert min(pings) <= 20 and max(pings) >= 300
    assert any(b.loss >= 0.02 and b.jitter_ms > 0 for b in bots)
    assert s.duration_s == 120.0 and s.source == "builtin:default"


def test_replace_and_tolerances_merge() -> None:
    s = default_scenario().replace(duration_s=5.0, seed=42)
    assert (s.duration_s, s.seed) == (5.0, 42)
    merged = s.with_tolerances({"bustaim": {"random_aim_probes": 9}})
    assert dict(merged.tolerances["bustaim"]) == {"random_aim_probes": 9}
    with pytest.raises(ScenarioError, match="duration_s"):
        s.replace(duration_s=0.0)


@pytest.mark.parametrize(
    ("text", "item", "problem"),
    [
        ("colour = 1\n" + MINIMAL, "", "unknown key(s) 'colour'"),
        (MINIMAL.replace("seed = 9", ""), "seed", "missing required key"),
        (MINIMAL.replace("duration_s = 30", 'duration_s = "long"'), "duration_s", "expected a number, got str"),
        (MINIMAL.replace("tick_rate_hz = 64", "tick_rate_hz = 60"), "tick_rate_hz", "must be one of 64, 128"),
        (MINIMAL.replace('"open"', '"atlantis"'), "map", "neither a built-in map"),
        (MINIMAL + "colour = 2\n", "bots[0]", "unknown key(s) 'colour'"),
        (MINIMAL.replace("count = 2", "count = 0"), "bots[0].count", "expected an integer in [1, 200]"),
        (MINIMAL.replace("count = 2", "count = 2.0"), "bots[0].count", "expected an integer, got float"),
        (MINIMAL + "ping_ms = -5\n", "bots[0].ping_ms", "expected a finite number >= 0"),
        (MINIMAL + "loss = 1.5\n", "bots[0].loss", "expected a fraction in [0, 1]"),
        (MINIMAL + 'skill = "godlike"\n', "bots[0].skill", "unknown skill 'godlike'"),
        (MINIMAL + 'profile = "wallhack"\n', "bots[0].profile", "unknown profile 'wallhack'; known profiles: honest"),
        (MINIMAL + "params = 3\n", "bots[0].params", "expected a table"),
        (MINIMAL + 'name_prefix = "' + "x" * 40 + '"\n', "bots[0].name_prefix", "exceed 32 UTF-8 bytes"),
        (MINIMAL + "[[bots]]\ncount = 1\n", "bots[1].name_prefix", "already used by bots[0]"),
        (MINIMAL.replace("[[bots]]\ncount = 2\n", "bots = 3\n"), "bots", "expected an array of tables"),
        ("tolerances = 3\n" + MINIMAL, "tolerances", "expected a table"),
        (MINIMAL.replace("[[bots]]", "[tolerances]\nbustaim = 1\n[[bots]]"), "tolerances.bustaim", "expected a table"),
        ("map = [", "", "invalid TOML"),
    ],
)
def test_errors_name_the_file_the_item_and_the_problem(tmp_path: Path, text: str, item: str, problem: str) -> None:
    path = write(tmp_path, text, "bad.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, profiles=("honest",))
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    if item:
        assert f": {item}: " in message
    assert problem in message


def test_profile_lookup_may_be_a_predicate() -> None:
    text = MINIMAL.replace("count = 2", 'count = 2\nprofile = "triggerbot"')
    assert parse_scenario_text(text, "x.toml", profiles=lambda name: name.endswith("bot")).bots[0].profile == "triggerbot"
    with pytest.raises(ScenarioError, match=re.escape("x.toml: bots[0].profile: unknown profile 'triggerbot'")):
        parse_scenario_text(text, "x.toml", profiles=lambda name: False)


def test_unreadable_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.toml")
