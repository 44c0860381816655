"""``referee lab fidelity``: each statistic on hand-made data, then the command on a tiny corpus."""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from anticheat.detectors.iw4m.thresholds import IW4MConfig
from anticheat.events import (
    ConnectionSample,
    KillEvent,
    SessionEvent,
    ShotClaim,
    SpawnEvent,
)
from testbed.cli import main
from testbed.lab.corpus import build_corpus
from testbed.lab.fidelity import (
    ACQUIRE_RADIUS_M,
    FIGURES,
    _Player,
    approaches,
    collect_stream,
    fitts_fit,
    flicks,
    group_figures,
    lognormal_fit,
    reaction_times,
)
from testbed.lab.spec import parse_spec
from testbed.lab.store import open_store
from tests.synthetic import make_aim, make_shot

# --- log-normal offsets -----------------------------------------------------------------------


def test_lognormal_fit_by_hand_and_on_a_known_sample() -> None:
    mu, sigma, n, zero = lognormal_fit(np.array([1.0, math.e, math.e**2, 0.0]))
    assert (mu, n, zero) == (pytest.approx(1.0), 3, 0.25)
    assert sigma == pytest.approx(math.sqrt(2.0 / 3.0))  # ln values 0, 1, 2: ddof-0 sd
    sample = np.random.default_rng(7).lognormal(-2.32, 0.585, 50_000)
    mu, sigma, n, zero = lognormal_fit(np.r_[sample, np.zeros(10_000), 1e-12])
    assert mu == pytest.approx(-2.32, abs=0.01) and sigma == pytest.approx(0.585, abs=0.01)
    # Float rounding of a zero detour (1e-12 deg) counts as a zero, not as ln = -27.
    assert n == 50_000 and zero == pytest.approx(10_001 / 60_001)


# --- Fitts' law ---------------------------------------------------------------------------------


def test_fitts_fit_recovers_a_line_on_bin_means_and_drops_thin_bins() -> None:
    ids = np.concatenate([np.linspace(c - 0.2, c + 0.2, 6) for c in (1.25, 1.75, 2.25, 2.75, 3.25)])
    mts = 0.12 + 0.15 * ids
    # Two flicks alone in a bin (below min_per_bin): wildly off the line, and ignored.
    fit = fitts_fit(np.r_[ids, 5.1, 5.2], np.r_[mts, 3.0, 0.0], bin_bits=0.5, min_per_bin=5)
    assert fit.a_s == pytest.approx(0.12) and fit.b_s_per_bit == pytest.approx(0.15)
    assert fit.r2 == pytest.approx(1.0) and (fit.bins, fit.flicks) == (5, 30)
    # Scatter within a bin averages out; between bins it lowers R^2 of the means.
    noisy = mts + np.tile([-0.05, 0.05], 15)
    assert fitts_fit(ids, noisy).r2 == pytest.approx(1.0)
    assert math.isnan(fitts_fit(ids[:12], mts[:12]).r2)  # two bins: no line to judge


# --- reaction time and flicks ------------------------------------------------------------------

HZ = 64.0


def _aim_track(onset_angle: float, delay: int, speed_deg_s: float = 200.0, distance_m: float = 10.0,
               quiet: int = 64, turning_before: bool = False) -> np.ndarray:
    """A session at 64 Hz: ``quiet`` commands with no enemy, then enemy 3 appears ``onset_angle``
    deg to the left (yaw) and the view turns onto it after ``delay`` commands."""
    rows = []
    yaw = 0.0
    step = speed_deg_s / HZ
    for k in range(quiet + 120):
        t = k / HZ
        if k < quiet:
            rows.append((t, k + 1, yaw, 0.0, -1, 180.0, 0.0))
            continue
        angle = max(0.0, onset_angle - yaw)
        rows.append((t, k + 1, yaw, 0.0, 3, angle, distance_m))
        if (turning_before or k >= quiet + delay) and yaw < onset_angle:
            yaw = min(onset_angle, yaw + step)
    return np.array(rows, dtype=np.float64)


def test_a_reaction_is_the_movement_start_after_the_onset_minus_the_round_trip() -> None:
    aim = _aim_track(20.0, delay=16)
    found = approaches(aim)
    assert [(a.status, a.clean) for a in found] == [("measured", True)]
    a = found[0]
    assert a.onset_s == pytest.approx(1.0) and a.start_s == pytest.approx(1.25)
    # 20 deg at 200 deg/s in steps of 3.125: within atan(0.45 / 10) = 2.58 deg after 6 steps.
    half = math.degrees(math.atan(ACQUIRE_RADIUS_M / 10.0))
    assert 20.0 - 5 * 3.125 > half >= 20.0 - 6 * 3.125
    assert a.end_s - a.start_s == pytest.approx(6 / HZ)
    rtt = np.array([[0.5, 50.0], [2.0, 400.0]])  # the sample at 0.5 s holds at the 1.0 s onset
    assert reaction_times(found, rtt, ping_ms=999.0) == pytest.approx([0.25 - 0.050])
    assert reaction_times(found, np.zeros((0, 2)), ping_ms=80.0) == pytest.approx([0.25 - 0.080])
    ids, mts = flicks(found)
    assert ids == pytest.approx([math.log2(1.0 + 20.0 / (2.0 * half))]) and mts == pytest.approx([6 / HZ])


def test_approaches_that_time_no_reaction_are_said_so() -> None:
    assert approaches(_aim_track(20.0, 0, turning_before=True))[0].status == "moving"
    assert approaches(_aim_track(60.0, 5))[0].status == "out_of_view"
    assert approaches(_aim_track(2.0, 5))[0].status == "pre_aimed"
    assert approaches(_aim_track(20.0, 100))[0].status == "not_acquired"  # 1.56 s: past the 1.5 s window
    # Below 30 deg/s the view reaches the target in 0.95 s, but as drift, not a movement.
    assert approaches(_aim_track(20.0, 5, speed_deg_s=20.0))[0].status == "no_movement"
    # Another enemy was visible just before: the onset is not clean, so it times no reaction.
    aim = _aim_track(20.0, 16)
    aim[60:64, 4] = 5.0
    aim[60:64, 5] = 40.0
    found = {a.onset_s: a for a in approaches(aim)}
    assert found[1.0].clean is False and found[1.0].status == "measured"
    assert len(reaction_times(list(found.values()), np.zeros((0, 2)), 0.0)) == 0
    assert len(flicks(list(found.values()))[0]) == 1  # still a flick for Fitts' law


# --- one stream ---------------------------------------------------------------------------------


def _shot(seq: int, yaw: float, *, victim: int | None, bone: int, pellet: int = 0, shooter: int = 0):  # type: ignore[no-untyped-def]
    base = make_shot(shooter=shooter, victim=victim, t=seq / HZ, tick=seq)
    return dataclasses.replace(base, pellet=pellet, bone=bone if victim is not None else 0,
                               claim=ShotClaim(shooter=shooter, weapon=1, yaw_deg=yaw, pitch_deg=0.0, seq=seq))


def test_collect_stream_counts_an_honest_players_shots_hits_bones_offsets_and_kills() -> None:
    events: list[object] = [
        SessionEvent(0, 0, 0.0, "connect", "h1"), SessionEvent(1, 0, 0.0, "connect", "c1"),
        SpawnEvent(0, 0, 0.0), SpawnEvent(1, 0, 0.0), ConnectionSample(0, 0.01, 40.0, 1.0, 0.0, 0.01),
    ]
    for seq in range(1, 11):
        events += [make_aim(seq, player=0, yaw=float(seq - 1)), make_aim(seq, player=1, yaw=0.0)]
        if seq == 5:
            # Fired at yaw 7 between commands at yaw 3 and 5: a 2 deg detour. Two pellets, one hit.
            events += [_shot(5, 7.0, victim=1, bone=2), _shot(5, 7.0, victim=1, bone=4, pellet=1)]
            events += [_shot(5, 0.0, victim=0, bone=2, shooter=1)]  # the cheater's: not counted
        if seq == 7:
            events.append(_shot(7, 6.0, victim=None, bone=0))
        if seq == 8:
            events.append(_shot(8, 7.0, victim=1, bone=4))  # on the way from 6 to 8: no detour
    events.append(KillEvent(0, 1, 8, 8 / HZ, 1, 4, 10.0, 0, False))
    (p,) = collect_stream(events, {"h1": ("pro", 35.0)}, match_id=4)
    assert (p.match_id, p.name, p.skill, p.ping_ms) == (4, "h1", "pro", 35.0)
    assert p.aim.shape == (10, 7) and p.aim[4, 2] == 4.0 and p.rtt.tolist() == [[0.01, 40.0]]
    assert (p.shots, p.hits, p.bones, p.kills) == (3, 2, [2, 4], 1)
    assert p.offsets == pytest.approx([2.0, 0.0])
    assert p.attempts == [3]  # AimDetect's attempts: every shot since the spawn, the killing one included


# --- figures -------------------------------------------------------------------------------------


def _player(head: int, hits: int, upper: int, lower: int, kills: int = 20, shots: int = 100) -> _Player:
    return _Player(skill="average", hits=hits, kills=kills, shots=shots, head=head, max_bone=max(upper, lower, head),
                   upper=upper, lower=lower, log_offsets=np.log(np.full(10, math.exp(-2.3))), zero_offsets=10,
                   offsets=20, reactions=np.array([0.2, 0.3]), raw_reactions=np.array([0.3, 0.4]), clean_onsets=4,
                   fitts=np.zeros((0, 2)), ttk_s=1.0)


def test_group_figures_follow_iw4madmins_definitions_and_verdicts() -> None:
    players = [_player(12, 60, 10, 20), _player(18, 60, 20, 20), _player(6, 60, 30, 20),
               _player(50, 60, 40, 1, kills=3)]  # too few kills for Bone; Chest counts it
    figs = {f.key: f for f in group_figures(players, IW4MConfig(), np.random.default_rng(0), reps=200)}
    assert [k for k, _ in FIGURES] == list(figs)
    hs = figs["headshot"]
    assert (hs.estimate, hs.n) == (pytest.approx(0.2), 3)
    # sd at 60 hits is the high-sample 0.0392: |0.2 - 0.222| is within it.
    assert hs.reference is not None and hs.reference.low == pytest.approx(0.222 - 0.03924263235)
    assert hs.verdict == "within"
    assert figs["headshot_sd"].estimate == pytest.approx(0.1)
    assert figs["max_bone"].estimate == pytest.approx((20 + 20 + 30) / 180)
    assert figs["max_bone"].verdict == "outside"
    chest = figs["chest"]  # players with >= 30 upper-torso hits: 30/20 and 40/1
    assert (chest.estimate, chest.n) == (pytest.approx((1.5 + 40.0) / 2), 2)
    assert figs["chest_pooled"].estimate == pytest.approx(100 / 61) and figs["chest_pooled"].verdict == "outside"
    assert figs["offset_mu"].estimate == pytest.approx(-2.3) and figs["offset_mu"].verdict == "within"
    assert figs["offset_zero"].estimate == pytest.approx(0.5)
    assert figs["reaction"].estimate == pytest.approx(0.25) and figs["reaction"].verdict == "within"
    assert figs["reaction_unmeasured"].estimate == pytest.approx(0.5)
    assert figs["var_hit_ratio"].estimate == pytest.approx(0.6)
    assert figs["var_shots_per_kill"].estimate == pytest.approx(5.0)
    assert figs["fitts_r2"].verdict == "-"  # no flicks: nothing to judge


# --- the command ---------------------------------------------------------------------------------

SPEC = """
name = "fidelity-tiny"
duration_s = 12.0
maps = ["corridors"]
seed = 52000
honest_per_match = 4
cheaters_per_match = 1
honest_player_hours = 0.0
cheater_engagements = 1
skills = ["average", "pro"]

[[links]]
name = "lan"
ping_ms = 20.0

[[cheats]]
profile = "lock_aimbot"
"""


def test_the_command_reports_every_figure_of_the_honest_players(tmp_path: Path) -> None:
    spec = parse_spec(tomllib.loads(SPEC), "<fidelity-tiny>")
    store = open_store(tmp_path)
    try:
        build_corpus(spec, store, workers=1)
    finally:
        store.close()
    out = tmp_path / "out.json"
    with out.open("w") as fh:
        assert main(["lab", "fidelity", str(tmp_path), "--json"], stdout=fh) == 0
    report = json.loads(out.read_text())
    assert (report["matches"], report["players"]) == (1, 4)
    assert set(report["groups"]) == {"honest", "average", "pro"}
    honest = report["groups"]["honest"]
    assert list(honest) == [k for k, _ in FIGURES]
    assert honest["headshot"]["reference"]["text"].startswith("0.222±")
    assert honest["offset_mu"]["reference"]["low"] == pytest.approx(-2.3243889 - 0.5851351)
    # The stream's shots and kills agree with the players table the match runner wrote.
    store = open_store(tmp_path, read_only=True)
    try:
        shooters, killers = store.con.execute(
            "SELECT count(*) FILTER (WHERE shots >= 20), count(*) FILTER (WHERE kills >= 1) FROM players "
            "WHERE NOT cheat").fetchone()
    finally:
        store.close()
    assert honest["var_hit_ratio"]["n"] == shooters and honest["var_shots_per_kill"]["n"] == killers
    text = tmp_path / "out.txt"
    with text.open("w") as fh:
        assert main(["lab", "fidelity", str(tmp_path)], stdout=fh) == 0
    table = text.read_text()
    assert "headshot ratio" in table and "0.200-0.260" in table and "0.222±" in table and "Fitts R2" in table
    assert max(len(line) for line in table.splitlines()) <= 100
