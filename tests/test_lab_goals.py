"""The goal table of one corpus, worked out by hand, and several corpora pooled into one sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.lab.goals import goal_rows, goals, pool_goals
from testbed.lab.metrics import proportion, rate
from testbed.lab.store import LabStore, MatchRows, open_store

H = 3600.0


def _player(match_id: int, name: str, profile: str, play_s: float, *, param_bin: str = "",
            blatant: bool = False) -> dict[str, Any]:
    return {"match_id": match_id, "name": name, "slot": 0, "profile": profile, "cheat": profile != "honest",
            "blatant": blatant, "skill": "average", "link": "lan", "ping_ms": 10.0, "jitter_ms": 1.0,
            "loss": 0.0, "params": {}, "param_bin": param_bin, "join_s": 0.0, "leave_s": play_s,
            "play_s": play_s, "shots": 0, "hits": 0, "kills": 0, "deaths": 0}


def _det(match_id: int, name: str, play_s: float, detector: str, kind: str, run: str = "base") -> tuple[Any, ...]:
    return (match_id, run, name, play_s + 5.0, play_s, detector, kind, 1.0, 0.5, "test", "{}")


def _dec(match_id: int, name: str, play_s: float, level: str, run: str = "base") -> tuple[Any, ...]:
    return (match_id, run, name, play_s + 5.0, play_s, level, 0.6)


def _match_one() -> MatchRows:
    """Honest h1 (1 h, one cheating detection at MONITOR), h2 (1 h, a link notice only); smooth
    aimbot s1 (strength 0.5, found at 100 s); triggerbot t1 (found at 200 s); lock aimbot b1
    (found at 10 s, KICK at 40 s)."""
    players = [_player(1, "h1", "honest", H), _player(1, "h2", "honest", H),
               _player(1, "s1", "smooth_aimbot", 600.0, param_bin="strength=0.5"),
               _player(1, "t1", "triggerbot", 600.0),
               _player(1, "b1", "lock_aimbot", 600.0, blatant=True)]
    detections = [_det(1, "h1", 900.0, "iw4m", "Bone"), _det(1, "h2", 50.0, "net", "desync"),
                  _det(1, "s1", 100.0, "aimdetect", "aimbot"), _det(1, "t1", 200.0, "trigger", "on_target"),
                  _det(1, "b1", 10.0, "aimsnap", "locked_flick")]
    decisions = [_dec(1, "h1", 900.0, "monitor"), _dec(1, "b1", 40.0, "kick")]
    return _rows(1, players, detections, decisions)


def _match_two() -> MatchRows:
    """Honest h3 (2 h, nothing); smooth aimbot s2 (strength 0.5, found at 50 s), s3 (strength
    0.25, never found); wallhack w1 (labelled wallhack_radar, found at 90 s); speed hack b2 (found at 45 s, KICK at 70 s)."""
    players = [_player(2, "h3", "honest", 2 * H),
               _player(2, "s2", "smooth_aimbot", 600.0, param_bin="strength=0.5"),
               _player(2, "s3", "smooth_aimbot", 600.0, param_bin="strength=0.25"),
               _player(2, "w1", "wallhack_radar", 600.0),  # a labelled variant still counts for goal 3
               _player(2, "b2", "speedhack", 600.0, blatant=True)]
    detections = [_det(2, "s2", 50.0, "aimdetect", "aimbot"), _det(2, "w1", 90.0, "wallhack", "phantom"),
                  _det(2, "b2", 45.0, "movement", "speed")]
    decisions = [_dec(2, "b2", 70.0, "kick")]
    return _rows(2, players, detections, decisions)


def _rows(match_id: int, players: list[dict[str, Any]], detections: list[tuple[Any, ...]],
          decisions: list[tuple[Any, ...]]) -> MatchRows:
    return MatchRows(match={"match_id": match_id, "seed": match_id, "map": "city", "duration_s": 2 * H,
                            "tick_rate_hz": 64, "scenario": {}, "wall_s": 1.0, "runner": "test"},
                     players=players, stream=None, detections=detections, decisions=decisions, traces=[])


def _corpus(directory: Path, *matches: MatchRows) -> Path:
    directory.mkdir(parents=True)
    with LabStore(directory / "corpus.duckdb") as store:
        for m in matches:
            store.add_match(m)
    return directory


def _goals(directory: Path) -> dict[str, Any]:
    store = open_store(directory, read_only=True)
    try:
        return goals(store, "base")
    finally:
        store.close()


def _rounded(x: Any) -> Any:
    """``x`` with every float rounded to 9 places (the intervals are recomputed, not copied)."""
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return round(x, 9) if isinstance(x, float) else x


def _kn(p: dict[str, Any]) -> tuple[int, int]:
    return p["k"], p["n"]


def test_goals_of_one_corpus(tmp_path: Path) -> None:
    g = _goals(_corpus(tmp_path / "a", _match_one()))
    honest = g["1_honest"]
    assert honest["player_hours"] == pytest.approx(2.0)
    # The desync is a link notice; the Bone is the one cheating detection in 2 h.
    assert honest["cheating_detections"] == rate(1, 2.0).to_json()
    assert _kn(honest["flagged_players"]) == (1, 2)
    assert _kn(g["6_honest_above_log"]) == (1, 2)
    strong = g["2_smooth_aim_strength_ge_0.5"]
    assert (_kn(strong["60"]), _kn(strong["120"]), _kn(strong["300"])) == ((0, 1), (1, 1), (1, 1))
    assert _kn(g["3_trigger_wallhack_120"]["triggerbot"]) == (0, 1)
    assert _kn(g["4_blatant_30"]["pooled"]) == (1, 1)
    assert _kn(g["6_blatant_kick_60"]["pooled"]) == (1, 1)


def test_pooling_two_corpora_equals_one_corpus_of_both(tmp_path: Path) -> None:
    a = _goals(_corpus(tmp_path / "a", _match_one()))
    b = _goals(_corpus(tmp_path / "b", _match_two()))
    both = _goals(_corpus(tmp_path / "both", _match_one(), _match_two()))
    pooled = pool_goals([a, b])
    for key in ("1_honest", "2_smooth_aim_strength_ge_0.5", "2_smooth_aim_weaker", "3_trigger_wallhack_120",
                "4_blatant_30", "6_blatant_kick_60", "6_honest_above_log"):
        assert _rounded(pooled[key]) == _rounded(both[key]), key
    assert pooled["corpus"]["matches"] == 2 and pooled["corpus"]["honest_player_hours"] == pytest.approx(4.0)
    # The figures behind it, by hand: 1 cheating detection in 4 honest hours; smooth >= 0.5: 1 of 2
    # within 60 s, 2 of 2 within 120 s; triggerbot and wallhack: 1 of 2 within 120 s.
    assert pooled["1_honest"]["cheating_detections"] == rate(1, 4.0).to_json()
    assert pooled["2_smooth_aim_strength_ge_0.5"]["60"] == proportion(1, 2).to_json()
    assert _kn(pooled["2_smooth_aim_strength_ge_0.5"]["120"]) == (2, 2)
    assert _kn(pooled["3_trigger_wallhack_120"]["pooled"]) == (1, 2)
    assert _kn(pooled["4_blatant_30"]["pooled"]) == (1, 2)  # the speed hack took 45 s
    assert _kn(pooled["6_blatant_kick_60"]["pooled"]) == (1, 2)  # and its KICK 70 s
    assert [w["bin"] for w in pooled["2_smooth_aim_weaker"]] == ["strength=0.25"]
    assert dict(goal_rows(pooled))["1 honest players flagged"] == "1/3 = 33% [0.8-91]"
    # Under 1 %, one decimal: an upper bound is never shown as 0.
    many = dict(pooled, **{"1_honest": dict(pooled["1_honest"], flagged_players=proportion(0, 844).to_json())})
    assert dict(goal_rows(many))["1 honest players flagged"] == "0/844 = 0% [0-0.4]"
    with pytest.raises(ValueError):
        pool_goals([])


def test_cli_pools_corpora_and_names_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _corpus(tmp_path / "a", _match_one())
    b = _corpus(tmp_path / "b", _match_two())
    assert main(["lab", "goals", str(a), f"{b}:base", "--json"]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [c["dir"] for c in body["corpora"]] == [str(a), str(b)]
    assert body["runs"][0]["1_honest"]["cheating_detections"]["count"] == 1
    assert _kn(body["runs"][0]["3_trigger_wallhack_120"]["pooled"]) == (1, 2)
    assert main(["lab", "goals", str(a), str(b)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "2 corpora pooled" in text and "1 honest players flagged" in text
    assert f"{a} (run base): 2.0 honest h, 1 honest cheating detections" in text
    # A run one corpus lacks is a clear error, not a half-pooled table.
    assert main(["lab", "goals", str(a), f"{b}:tuned"]) == 1
    assert "has no run 'tuned'" in capsys.readouterr().err
