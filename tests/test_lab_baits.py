"""``referee lab baits``: AimDetect's bait shots per group, counted or aimed before the kill.

The stream walk is checked on a hand-built stream (the kill clock, one row per shot not per
pellet, a reconnect forgetting the kills); the command end to end on a one-match corpus where a
lock aimbot kills and snaps onto its baits.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from anticheat.detectors.aimdetect.bait import KillClock, aimed_before_kill
from anticheat.events import KillEvent, SessionEvent
from testbed.cli import main
from testbed.lab.baits import BaitShot, corpus_bait_shots, groups, stream_bait_shots
from testbed.lab.store import open_store
from tests.lab_corpora import build_tiny_corpus, one_cheat_spec
from tests.synthetic import make_shot


def bait_shot(t: float, view_s: float, *, tick: int, pellet: int = 0, weapon: int = 6):  # type: ignore[no-untyped-def]
    return dataclasses.replace(make_shot(victim=None, t=t, tick=tick, weapon=weapon), bait_hit=True,
                               rewind_time_s=view_s, pellet=pellet)


def kill(t: float, killer: int = 1) -> KillEvent:
    return KillEvent(killer, 2, int(t * 64), t, 6, 2, 10.0, 0, False)


def test_the_kill_clock_names_the_latest_kill_before_a_time() -> None:
    clock = KillClock()
    assert clock.latest_before(1, 5.0) == float("-inf")
    clock.on_kill(1, 2.0)
    clock.on_kill(1, 3.0)
    assert clock.latest_before(1, 3.5) == 3.0
    # Strictly before: a kill in the shot's own tick does not count for it.
    assert clock.latest_before(1, 3.0) == 2.0
    assert aimed_before_kill(clock, 1, 3.5, 2.9) and not aimed_before_kill(clock, 1, 3.5, 3.0)
    assert not aimed_before_kill(clock, 2, 3.5, 0.0)  # player 2 never killed
    clock.forget(1)
    assert clock.latest_before(1, 3.5) == float("-inf")


def test_stream_rows_one_per_shot_with_the_view_against_the_kill() -> None:
    events = [
        SessionEvent(1, 0, 0.0, "connect", "alice"),
        bait_shot(1.0, 0.9, tick=64),  # no kill yet: counted, nothing to compare with
        kill(10.0),
        # A spray through the kill: its two pellets are one shot, aimed 0.1 s before the kill.
        bait_shot(10.1, 9.9, tick=646), bait_shot(10.1, 9.9, tick=646, pellet=1),
        bait_shot(10.5, 10.2, tick=672),  # aimed 0.2 s after the kill: counted
        SessionEvent(1, 700, 11.0, "connect", "bob"),  # the slot's new player has killed nobody
        bait_shot(11.5, 9.5, tick=736),
    ]
    rows = list(stream_bait_shots(events))
    assert rows == [
        ("alice", 1.0, 6, None, None, True),
        ("alice", 10.1, 6, pytest.approx(0.1), pytest.approx(-0.1), False),
        ("alice", 10.5, 6, pytest.approx(0.5), pytest.approx(0.2), True),
        ("bob", 11.5, 6, None, None, True),
    ]


def test_groups_count_per_truth_with_hours_and_weapons() -> None:
    shots = [
        BaitShot("honest", 0, "h", 10.1, 6, 0.1, -0.1, False),
        BaitShot("honest", 0, "h", 30.1, 3, 0.2, -0.3, False),
        BaitShot("lock_aimbot", 0, "c", 12.0, 2, 0.6, 0.4, True),
    ]
    got = {g.group: g for g in groups(shots, {"honest": 10.0, "lock_aimbot": 0.5, "wallhack": 0.5})}
    assert list(got) == ["honest", "lock_aimbot", "wallhack"]
    h = got["honest"]
    assert (h.hours, h.shots, h.counted, h.aimed_before_kill, h.weapons) == (10.0, 2, 0, 2, {3: 1, 6: 1})
    assert h.before_kill_view_s == (-0.3, -0.1)
    assert (got["lock_aimbot"].counted, got["lock_aimbot"].before_kill_view_s) == (1, None)
    assert got["wallhack"].shots == 0


SPEC = one_cheat_spec("baits-tiny", 32100, "lock_aimbot")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("baits"), SPEC, "<baits-tiny>")


def test_the_command_tabulates_the_corpus(corpus: Path) -> None:
    out = io.StringIO()
    assert main(["lab", "baits", str(corpus), "--json"], stdout=out, stderr=io.StringIO()) == 0
    got = {g["group"]: g for g in json.loads(out.getvalue())["groups"]}
    store = open_store(corpus, read_only=True)
    try:
        shots = corpus_bait_shots(store)
        aimbot_hours = store.con.execute("SELECT sum(play_s) / 3600 FROM players WHERE cheat").fetchall()[0][0]
    finally:
        store.close()
    assert set(got) == {"honest", "lock_aimbot"}
    # The lock aimbot snaps onto the baits it is shown, after its kills: counted.
    aimbot = got["lock_aimbot"]
    assert aimbot["player_hours"] == pytest.approx(aimbot_hours)
    assert aimbot["counted"] >= 1 and aimbot["shots"] == sum(s.group == "lock_aimbot" for s in shots)
    assert aimbot["counted"] + aimbot["aimed_before_kill"] == aimbot["shots"]
    # Pooling a corpus with itself doubles every count.
    out = io.StringIO()
    assert main(["lab", "baits", str(corpus), str(corpus), "--json"], stdout=out, stderr=io.StringIO()) == 0
    twice = {g["group"]: g for g in json.loads(out.getvalue())["groups"]}
    assert twice["lock_aimbot"]["shots"] == 2 * aimbot["shots"]
    # The text report fits 80 columns.
    out = io.StringIO()
    assert main(["lab", "baits", str(corpus)], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert "lock_aimbot" in text and max(len(line) for line in text.splitlines()) <= 80


def test_a_missing_corpus_is_a_one_line_error(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["lab", "baits", str(tmp_path / "none")], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue().count("\n") == 1
