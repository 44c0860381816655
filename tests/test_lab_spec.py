"""Corpus specs: parsing, errors, and a deterministic expansion into labelled matches."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from testbed.lab.spec import SpecError, builtin_spec_names, load_spec, parse_spec

SPEC = """
name = "t"
duration_s = 60.0
maps = ["corridors", "city"]
seed = 500
honest_per_match = 4
cheaters_per_match = 2
honest_player_hours = 0.2
cheater_engagements = 5
skills = ["low", "pro"]

[[links]]
name = "lan"
ping_ms = 20.0

[[links]]
name = "bad"
ping_ms = 300.0
loss = 0.05
jitter_ms = 30.0

[[cheats]]
profile = "smooth_aimbot"
[cheats.params]
strength = [0.2, 0.8]
noise_deg = { min = 0.0, max = 0.2, bins = 2 }

[[cheats]]
profile = "speedhack"
"""


def spec(text: str = SPEC):
    return parse_spec(tomllib.loads(text), "<test>")


def test_match_count_covers_both_targets() -> None:
    s = spec()
    # 0.2 h of honest play at 4 bots x 60 s = 3 matches; 5 engagements at 2 a match = 3 matches.
    assert s.match_count == 3
    assert len(s.cheats) == 3  # two strengths of the aimbot, and the speedhack
    assert s.player_hours == pytest.approx(3 * 6 * 60 / 3600)


def test_expansion_is_deterministic_and_labelled() -> None:
    a, b = spec().jobs(), spec().jobs()
    assert [j.scenario for j in a] == [j.scenario for j in b]
    assert [dict(j.labels) for j in a] == [dict(j.labels) for j in b]
    j0 = a[0]
    assert j0.scenario.seed == 500 and a[2].scenario.seed == 502
    assert [j.scenario.map for j in a] == ["corridors", "city", "corridors"]
    bots = j0.scenario.players()
    assert [b.profile for b in bots] == ["honest"] * 4 + ["smooth_aimbot", "smooth_aimbot"]
    # Honest bots cycle links first, then skills: every (link, skill) pair turns up.
    assert {(j.labels[b.name]["link"], b.skill) for j in a for b in j.scenario.players() if b.profile == "honest"} == {
        ("lan", "low"), ("bad", "low"), ("lan", "pro"), ("bad", "pro")}
    cheat = bots[4]
    assert cheat.params["strength"] == 0.2 and 0.0 <= cheat.params["noise_deg"] <= 0.2
    assert j0.labels[cheat.name]["param_bin"].startswith("strength=0.2 noise_deg=[")
    # Names say nothing about ground truth beyond h/c, and are unique.
    assert len({b.name for b in bots}) == len(bots)


def test_other_seeds_make_a_disjoint_corpus() -> None:
    s = spec()
    held = s.with_seed(10_000)
    assert {j.scenario.seed for j in s.jobs()}.isdisjoint({j.scenario.seed for j in held.jobs()})
    assert held.digest() != s.digest()


@pytest.mark.parametrize(("change", "message"), [
    ('duration_s = 60.0', "duration_s = 4000.0"),
    ('profile = "speedhack"', 'profile = "honest"'),
    ('ping_ms = 20.0', 'ping_ms = "fast"'),
    ('strength = [0.2, 0.8]', 'strength = []'),
    ('skills = ["low", "pro"]', 'skills = ["low", "pro"]\nwhatever = 1'),
])
def test_bad_specs_name_the_item(change: str, message: str) -> None:
    with pytest.raises(SpecError, match="<test>"):
        spec(SPEC.replace(change, message))


def test_unknown_profile_is_refused_with_a_registry() -> None:
    with pytest.raises(SpecError, match="no_such_cheat"):
        parse_spec(tomllib.loads(SPEC.replace('"speedhack"', '"no_such_cheat"')), "<test>", profiles={"honest", "smooth_aimbot"})


def test_builtin_specs_load_and_cover_every_profile_and_link_class() -> None:
    from bots.profiles import PROFILES

    assert {"standard", "smoke"} <= set(builtin_spec_names())
    std = load_spec("standard")
    played = {s.profile for s in std.cheats}
    assert played == {p for p in PROFILES if p != "honest"}
    pings = sorted(link.ping_ms for link in std.links)
    assert pings[0] <= 20 and pings[-1] >= 300 and max(link.loss for link in std.links) >= 0.05
    assert max(link.jitter_ms for link in std.links) >= 30
    assert set(std.skills) == {"low", "average", "high", "pro"}
    # Every setting is played at least twice.
    per_setting = std.match_count * std.cheaters_per_match / len(std.cheats)
    assert per_setting >= 2


def test_a_spec_file_with_a_map_path(tmp_path: Path) -> None:
    from world.mapfile import builtin_map, dump_map

    (tmp_path / "m.json").write_text(dump_map(builtin_map("corridors")))
    (tmp_path / "s.toml").write_text(SPEC.replace('maps = ["corridors", "city"]', 'maps = ["m.json"]'))
    s = load_spec(tmp_path / "s.toml")
    assert Path(s.job(0).scenario.map) == tmp_path / "m.json"
    assert s.job(0).scenario.load_map().name


def test_the_sessions_spec_plays_whole_honest_sessions_on_the_standard_links() -> None:
    sessions, std = load_spec("sessions"), load_spec("standard")
    assert sessions.cheaters_per_match == 0 and sessions.duration_s >= 1200  # real sessions: 20-60 min
    assert [(link.name, link.ping_ms, link.loss) for link in sessions.links] == [
        (link.name, link.ping_ms, link.loss) for link in std.links]
    assert set(sessions.skills) == set(std.skills)
    assert sessions.match_count * sessions.honest_per_match * sessions.duration_s / 3600 >= 300
