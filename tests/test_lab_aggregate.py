"""testbed.lab.aggregate on a small synthetic corpus whose numbers are worked out by hand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.lab.aggregate import LINK_NOTICES, deadline_key, run_match_ids, summarize
from testbed.lab.store import LabStore, MatchRows

H = 3600.0
LAN = {"link": "lan", "ping_ms": 10.0, "jitter_ms": 1.0, "loss": 0.0}
DSL = {"link": "dsl", "ping_ms": 60.0, "jitter_ms": 5.0, "loss": 0.01}


def _player(match_id: int, name: str, profile: str, play_s: float, *, skill: str = "average", param_bin: str = "",
            blatant: bool = False, link: dict[str, Any] = LAN) -> dict[str, Any]:
    return {"match_id": match_id, "name": name, "slot": 0, "profile": profile, "cheat": profile != "honest",
            "blatant": blatant, "skill": skill, **link, "params": {}, "param_bin": param_bin, "join_s": 0.0,
            "leave_s": play_s, "play_s": play_s, "shots": 0, "hits": 0, "kills": 0, "deaths": 0}


def _det(match_id: int, name: str, play_s: float, detector: str, kind: str, run: str = "base") -> tuple[Any, ...]:
    return (match_id, run, name, play_s + 5.0, play_s, detector, kind, 1.0, 0.5, "test", "{}")


def _dec(match_id: int, name: str, play_s: float, level: str, run: str = "base") -> tuple[Any, ...]:
    return (match_id, run, name, play_s + 5.0, play_s, level, 0.6)


def _tr(match_id: int, name: str, stat: str, play_s: float, value: float, run: str = "base") -> tuple[Any, ...]:
    return (match_id, run, name, stat, play_s, value)


def _match(match_id: int, wall_s: float, players: list[dict[str, Any]], detections: list[tuple[Any, ...]],
           decisions: list[tuple[Any, ...]], traces: list[tuple[Any, ...]]) -> MatchRows:
    return MatchRows(match={"match_id": match_id, "seed": match_id, "map": "city", "duration_s": 3600.0,
                            "tick_rate_hz": 64, "scenario": {}, "wall_s": wall_s, "runner": "test"},
                     players=players, stream=None, detections=detections, decisions=decisions, traces=traces)


SNAP = "aimstats:snap_rate"
STRAIN = "iw4m:strain"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LabStore]:
    """Two matches. Honest: h1 (0.5 h, LAN), h2 (0.5 h, DSL, high skill), h3 (1 h, LAN). Cheats:
    lock_aimbot c1, c3; smooth_aimbot strength=0.5 c2 (left after 90 s), c4; strength=0.25 c5."""
    with LabStore(tmp_path / "corpus.duckdb") as s:
        s.add_match(_match(
            1, 10.0,
            [_player(1, "h1", "honest", 1800.0), _player(1, "h2", "honest", 1800.0, skill="high", link=DSL),
             _player(1, "c1", "lock_aimbot", 600.0, blatant=True),
             _player(1, "c2", "smooth_aimbot", 90.0, param_bin="strength=0.5")],
            [_det(1, "h1", 50.0, "net", "desync"), _det(1, "h1", 100.0, "aimstats", "aim_stats"),
             _det(1, "h2", 10.0, "net", "unplayable_link"),
             _det(1, "c1", 20.0, "iw4m", "snap"), _det(1, "c1", 45.0, "aimstats", "aim_stats"),
             _det(1, "h2", 30.0, "iw4m", "snap", run="tuned")],
            [_dec(1, "h1", 120.0, "monitor"), _dec(1, "h2", 10.0, "log"),
             _dec(1, "c1", 25.0, "monitor"), _dec(1, "c1", 50.0, "kick")],
            [_tr(1, "h1", SNAP, 10.0, 0.2), _tr(1, "h1", SNAP, 100.0, 0.6), _tr(1, "h1", SNAP, 130.0, 5.0),
             _tr(1, "c1", SNAP, 10.0, 0.5), _tr(1, "c1", SNAP, 20.0, 1.5), _tr(1, "c1", STRAIN, 5.0, 2.0),
             _tr(1, "h2", SNAP, 10.0, 9.0, run="tuned")],
        ))
        s.add_match(_match(
            2, 12.0,
            [_player(2, "h3", "honest", 3600.0), _player(2, "c3", "lock_aimbot", 600.0, blatant=True),
             _player(2, "c4", "smooth_aimbot", 400.0, param_bin="strength=0.5"),
             _player(2, "c5", "smooth_aimbot", 300.0, param_bin="strength=0.25")],
            [_det(2, "h3", 200.0, "aimstats", "aim_stats"), _det(2, "h3", 900.0, "aimstats", "aim_stats"),
             _det(2, "h3", 1000.0, "iw4m", "bone"),
             _det(2, "c3", 70.0, "iw4m", "snap"), _det(2, "c4", 150.0, "aimstats", "aim_stats")],
            [_dec(2, "h3", 1000.0, "MONITOR"), _dec(2, "c3", 80.0, "1")],
            [_tr(2, "h3", SNAP, 50.0, 0.3), _tr(2, "c3", SNAP, 100.0, 0.9), _tr(2, "c4", SNAP, 119.5, 1.0),
             _tr(2, "c5", SNAP, 200.0, 3.0)],
        ))
        yield s


def _pk(p: dict[str, Any]) -> tuple[int, int]:
    return p["k"], p["n"]


def test_link_notices_follow_the_sanction_policy() -> None:
    assert LINK_NOTICES == frozenset({"desync", "unplayable_link"})
    assert (deadline_key(30), deadline_key(30.0), deadline_key(7.5)) == ("30", "30", "7.5")


def test_corpus_block(store: LabStore) -> None:
    s = summarize(store.con)
    assert json.loads(json.dumps(s, allow_nan=False)) == s
    assert s["run"] == "base" and s["deadlines_s"] == [30, 60, 120, 300]
    assert s["corpus"] == {
        "matches": 2, "players": 8, "player_hours": pytest.approx((1800 * 2 + 600 + 90 + 3600 + 600 + 400 + 300) / H),
        "honest_player_hours": 2.0, "honest_player_matches": 3, "cheater_engagements": 5, "build_wall_s": 22.0,
    }


def test_profiles_detection_within_deadlines_and_time_to_detect(store: LabStore) -> None:
    profiles = summarize(store.con)["profiles"]
    assert [(p["profile"], p["param_bin"]) for p in profiles] == [
        ("lock_aimbot", ""), ("smooth_aimbot", "strength=0.25"), ("smooth_aimbot", "strength=0.5")]
    lock, weak, strong = profiles
    assert (lock["blatant"], lock["engagements"], lock["play_h"]) == (True, 2, pytest.approx(1200 / H))
    # c1 first detected at 20 s, c3 at 70 s; both played 600 s.
    assert {d: _pk(p) for d, p in lock["any"]["within"].items()} == {"30": (1, 2), "60": (1, 2), "120": (2, 2), "300": (2, 2)}
    ttd = lock["any"]["ttd"]
    assert (ttd["median_s"], ttd["p90_s"], ttd["times_s"], ttd["fraction"]) == (20.0, 70.0, [20.0, 70.0, 600.0], [0.5, 1.0, 1.0])
    assert lock["any"]["detectors"] == {"iw4m:snap": 2, "aimstats:aim_stats": 1}
    assert list(lock["any"]["detectors"]) == ["iw4m:snap", "aimstats:aim_stats"]  # most engagements first
    # Monitor reached at 25 s (c1, by name) and 80 s (c3, as the number "1"); by then only iw4m had flagged.
    assert {d: _pk(p) for d, p in lock["monitor"]["within"].items()} == {"30": (1, 2), "60": (1, 2), "120": (2, 2), "300": (2, 2)}
    assert lock["monitor"]["ttd"]["median_s"] == 25.0
    assert lock["monitor"]["detectors"] == {"iw4m:snap": 2}
    # strength=0.25: c5 never detected in 300 s of play (its trace does not count as a detection).
    assert {d: _pk(p) for d, p in weak["any"]["within"].items()} == {"30": (0, 1), "60": (0, 1), "120": (0, 1), "300": (0, 1)}
    assert (weak["any"]["ttd"]["median_s"], weak["any"]["ttd"]["times_s"], weak["any"]["detectors"]) == (None, [300.0], {})
    # strength=0.5: c2 left undetected at 90 s (excluded from 120 s and 300 s), c4 detected at 150 s.
    assert strong["blatant"] is False
    assert {d: _pk(p) for d, p in strong["any"]["within"].items()} == {"30": (0, 2), "60": (0, 2), "120": (0, 1), "300": (1, 1)}
    # KM: c2 censored at 90 s, then c4 alone at risk detected at 150 s.
    assert (strong["any"]["ttd"]["median_s"], strong["any"]["ttd"]["fraction"][0]) == (150.0, 1.0)
    assert {d: _pk(p) for d, p in strong["monitor"]["within"].items()} == {"30": (0, 2), "60": (0, 2), "120": (0, 1), "300": (0, 1)}
    assert strong["monitor"]["detectors"] == {}


def test_honest_false_alarms(store: LabStore) -> None:
    h = summarize(store.con)["honest"]
    assert (h["player_matches"], h["player_hours"]) == (3, 2.0)
    # Flagged: h1 (aim_stats at 100 s; its desync does not count) and h3; h2 only had a link notice.
    assert _pk(h["flagged"]) == (2, 3)
    assert _pk(h["monitor"]) == (2, 3) and _pk(h["above_log"]) == (2, 3) and _pk(h["kick"]) == (0, 3)
    assert (h["alarms"]["count"], h["alarms"]["exposure_h"], h["alarms"]["per_hour"]) == (4, 2.0, 2.0)
    assert (h["first_alarms"]["count"], h["first_alarms"]["per_hour"]) == (2, 1.0)
    assert [(r["link"], r["ping_ms"], r["loss"], r["jitter_ms"], r["player_matches"], r["player_hours"],
             _pk(r["flagged"]), r["alarms"]["count"]) for r in h["by_link"]] == [
        ("lan", 10.0, 0.0, 1.0, 2, 1.5, (2, 2), 4), ("dsl", 60.0, 0.01, 5.0, 1, 0.5, (0, 1), 0)]
    assert [(r["skill"], r["player_matches"], _pk(r["flagged"]), r["alarms"]["count"]) for r in h["by_skill"]] == [
        ("average", 2, (2, 2), 4), ("high", 1, (0, 1), 0)]
    assert [(r["label"], r["detections"], r["player_matches"], r["rate"]["per_hour"]) for r in h["by_detector"]] == [
        ("aimstats:aim_stats", 3, 2, 1.5), ("iw4m:bone", 1, 1, 0.5)]


def test_link_notices_count_when_not_excluded(store: LabStore) -> None:
    h = summarize(store.con, exclude_kinds=frozenset())["honest"]
    assert _pk(h["flagged"]) == (3, 3) and h["alarms"]["count"] == 6
    assert {r["label"] for r in h["by_detector"]} == {"aimstats:aim_stats", "iw4m:bone", "net:desync", "net:unplayable_link"}


def test_detector_roc_from_traces(store: LabStore) -> None:
    dets = summarize(store.con)["detectors"]
    assert [d["stat"] for d in dets] == [SNAP, STRAIN]
    snap, strain = dets
    # Max within 120 s. Positives c1..c5: 1.5, 0 (no rows), 0.9, 1.0 (at 119.5 s), 0 (its row is at 200 s).
    # Negatives h1, h2, h3: 0.6 (5.0 comes at 130 s), 0, 0.3. Pairs won: 3 + 0.5 + 3 + 3 + 0.5 = 10 of 15.
    assert snap["roc"]["auc"] == pytest.approx(10 / 15)
    assert (snap["roc"]["n_pos"], snap["roc"]["n_neg"]) == (5, 3)
    assert snap["at_threshold_1"] == {"tpr": pytest.approx(2 / 5), "fpr": 0.0}
    assert snap["tpr_at_fpr_0.01"] == pytest.approx(3 / 5)  # threshold above 0.6: 1.5, 1.0, 0.9
    # lock_aimbot [1.5, 0.9] beats every negative; smooth_aimbot [0, 1.0, 0]: (0.5 + 3 + 0.5) / 9.
    assert snap["by_profile_auc"] == {"lock_aimbot": 1.0, "smooth_aimbot": pytest.approx(4 / 9)}
    # Only c1 has a strain trace: 2.0 beats three zeros, four zeros tie them: (3 + 4 * 1.5) / 15.
    assert strain["roc"]["auc"] == pytest.approx(9 / 15)
    assert strain["roc"]["fpr"][0] == 0.0 and strain["roc"]["thresholds"][0] is None


def test_runs_are_separate_and_matches_can_be_selected(store: LabStore) -> None:
    assert run_match_ids(store.con, "tuned") == [1]
    assert run_match_ids(store.con, "base") == [1, 2]
    tuned = summarize(store.con, run="tuned", match_ids=run_match_ids(store.con, "tuned"))
    assert tuned["corpus"]["matches"] == 1 and tuned["corpus"]["players"] == 4
    assert _pk(tuned["honest"]["flagged"]) == (1, 2)  # h2's iw4m:snap, tuned run only
    assert [d["stat"] for d in tuned["detectors"]] == [SNAP]
    only2 = summarize(store.con, match_ids=[2])
    assert only2["corpus"]["matches"] == 1 and only2["honest"]["player_matches"] == 1
    assert _pk(only2["honest"]["flagged"]) == (1, 1)


def test_empty_corpus_and_custom_deadlines(tmp_path: Path) -> None:
    with LabStore(tmp_path / "corpus.duckdb") as s:
        out = summarize(s.con, deadlines_s=(7.5, 45))
        assert out["corpus"]["matches"] == 0 and out["profiles"] == [] and out["detectors"] == []
        assert out["deadlines_s"] == [7.5, 45]
        assert out["honest"]["flagged"]["estimate"] is None and out["honest"]["alarms"]["per_hour"] is None
        assert json.dumps(out, allow_nan=False)


def test_detection_after_the_end_of_play_is_reported(tmp_path: Path) -> None:
    with LabStore(tmp_path / "corpus.duckdb") as s:
        s.add_match(_match(1, 1.0, [_player(1, "c", "lock_aimbot", 60.0)], [_det(1, "c", 61.0, "iw4m", "snap")], [], []))
        with pytest.raises(ValueError, match="after the end"):
            summarize(s.con)
