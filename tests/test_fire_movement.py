"""Fire-rate, shot-geometry, backtrack and movement detectors on synthetic event streams."""

from __future__ import annotations

import math

import pytest

from anticheat.detectors.fire import FireConfig, FireDetector
from anticheat.detectors.movement import KindRule, MovementConfig, MovementDetector
from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    FireKind,
    MovementEvidence,
    MovementKind,
    ShotClaim,
    ShotResult,
    SpawnEvent,
)
from anticheat.skip import SkipBook
from lagcomp.shot import RewindDecision
from world.weapons import WeaponId

PISTOL = int(WeaponId.PISTOL)
SHOTGUN = int(WeaponId.SHOTGUN)
SMG = int(WeaponId.SMG)
ORIGIN = (5.0, 5.0, 1.64)


def book(player: int = 1, *, rtt_ms: float = 60.0, jitter_ms: float = 2.0, loss: float = 0.0,
         since_update_s: float = 0.0, time_s: float = 0.0) -> SkipBook:
    b = SkipBook()
    b.record(ConnectionSample(player=player, time_s=time_s, rtt_ms=rtt_ms, jitter_ms=jitter_ms, loss=loss,
                              since_update_s=since_update_s))
    return b


def shot(t: float, *, weapon: int = PISTOL, pellet: int = 0, hit: tuple[float, float, float] | None = None,
         claimed_origin: tuple[float, float, float] | None = None, view_time_s: float | None = None,
         decision: RewindDecision = RewindDecision.CLAIMED, rewind_time_s: float | None = None,
         seq: int = 0) -> ShotResult:
    return ShotResult(
        shooter=1, tick=round(t * 64), time_s=t, weapon=weapon, pellet=pellet, origin=ORIGIN,
        direction=(1.0, 0.0, 0.0), rewind_time_s=t - 0.13 if rewind_time_s is None else rewind_time_s,
        rewind_decision=decision, rewind_clamped=False, victim=None, victim_generation=0, bone=0,
        hit_point=(15.0, 5.0, 1.64), distance_m=10.0, blocked_by_wall=False, victim_pos=None,
        victim_speed_m_s=0.0, damage=0.0,
        claim=ShotClaim(shooter=1, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0, view_time_s=view_time_s,
                        claimed_hit_point=hit, claimed_origin=claimed_origin, seq=seq),
    )


def fire_all(det: FireDetector, skip: SkipBook, shots: list[ShotResult]) -> list[Detection]:
    out: list[Detection] = []
    for s in shots:
        out += det.on_shot(s, skip)
    return out


# --- timing ----------------------------------------------------------------------------------


def test_scripted_crouch_cancel_is_auto_c() -> None:
    det = FireDetector()
    # Pistol crouch-cancel interval 0.20 s: judged 0.20 + 1/64 + 2 * 2 ms = 0.22 < 0.24.
    found = fire_all(det, book(), [shot(1.0 + 0.2 * i) for i in range(4)])
    assert [d.kind for d in found] == ["auto_c"]
    assert found[0].value == pytest.approx(0.2)
    assert found[0].evidence["limit_s"] == 0.240


def test_honest_fire_rates_are_clean() -> None:
    det = FireDetector()
    assert fire_all(det, book(), [shot(1.0 + 0.6 * i) for i in range(20)]) == []
    # A human crouch-cancel at 0.26 s over a 10 ms-jitter link stays above the limit.
    det2 = FireDetector()
    assert fire_all(det2, book(jitter_ms=10.0), [shot(1.0 + 0.26 * i) for i in range(20)]) == []
    # Two cancels are not yet a pattern.
    det3 = FireDetector()
    assert fire_all(det3, book(), [shot(1.0 + 0.2 * i) for i in range(3)]) == []
    # Automatic fire at its interval, and quantised a tick short, is fine.
    det4 = FireDetector()
    assert fire_all(det4, book(), [shot(1.0 + 0.075 * i, weapon=SMG) for i in range(30)]) == []
    assert fire_all(det4, book(), [shot(10.0 + 0.0625 * i, weapon=SMG) for i in range(30)]) == []


def test_auto_c_pattern_spread_over_time_is_not_detected() -> None:
    det = FireDetector()
    shots = []
    for k in range(3):  # one scripted pair every 8 s: 3 fast intervals span 16 s > 10 s
        shots += [shot(8.0 * k), shot(8.0 * k + 0.2)]
    assert fire_all(det, book(), shots) == []


def test_rapid_fire() -> None:
    det = FireDetector()
    shots = []
    for k in range(3):
        shots += [shot(1.0 + k, weapon=SHOTGUN), shot(1.0 + k + 0.01, weapon=SHOTGUN)]
    found = fire_all(det, book(), shots)
    assert [d.kind for d in found] == ["rapid_fire"]
    det2 = FireDetector()
    found2 = fire_all(det2, book(), [shot(1.0 + 0.04 * i, weapon=SMG) for i in range(5)])
    assert [d.kind for d in found2] == ["rapid_fire"]


def test_pellets_and_weapon_switches_are_not_intervals() -> None:
    det = FireDetector()
    shots = []
    for k in range(5):
        shots += [shot(1.0 + k, weapon=SHOTGUN, pellet=p) for p in range(8)]
        shots.append(shot(1.0 + k + 0.05, weapon=PISTOL))  # switch, then another weapon fires
    assert fire_all(det, book(), shots) == []


def test_too_soon_refusals() -> None:
    det = FireDetector()
    skip = book()

    def refused(t: float) -> FireEvidence:
        return FireEvidence(player=1, tick=round(t * 64), time_s=t, weapon=PISTOL, kind=FireKind.TOO_SOON,
                            interval_s=0.1, allowed_s=0.6)

    assert [d for i in range(4) for d in det.on_fire(refused(1.0 + i), skip)] == []
    found = det.on_fire(refused(5.0), skip)
    assert [(d.kind, d.evidence["source"]) for d in found] == [("rapid_fire", "too_soon")]
    empty = FireEvidence(player=1, tick=1, time_s=6.0, weapon=PISTOL, kind=FireKind.EMPTY,
                         interval_s=1.0, allowed_s=0.6)
    assert det.on_fire(empty, skip) == ()


def test_lagging_shooter_is_skipped() -> None:
    det = FireDetector()
    skip = book(loss=0.2)
    assert fire_all(det, skip, [shot(1.0 + 0.2 * i) for i in range(10)]) == []
    assert det.skip_counts() == {"high_loss": 10}


# --- geometry ----------------------------------------------------------------------------------


def test_silent_aim_geometry() -> None:
    det = FireDetector()
    skip = book()
    assert fire_all(det, skip, [shot(1.0, hit=(0.0, 0.0, 0.0))]) == []
    found = fire_all(det, skip, [shot(2.0, hit=(ORIGIN[0] + 0.005, ORIGIN[1], ORIGIN[2]))])
    assert [d.kind for d in found] == ["silent_aim_geometry"]
    det2 = FireDetector()
    honest = [shot(1.0 + i, hit=(15.0, 5.0, 1.5)) for i in range(10)]
    assert fire_all(det2, skip, honest) == []


def test_afk_ghost_from_claimed_origin_or_unreachable_hit() -> None:
    skip = book()
    det = FireDetector()
    far = (ORIGIN[0] + 20.0, ORIGIN[1], ORIGIN[2])
    found = fire_all(det, skip, [shot(1.0, claimed_origin=far, hit=(40.0, 5.0, 1.6)),
                                 shot(2.0, claimed_origin=far, hit=(40.0, 5.0, 1.6))])
    assert [(d.kind, d.evidence["check"]) for d in found] == [("afk_ghost", "origin_offset")]
    det2 = FireDetector()
    near = (ORIGIN[0] + 5.0, ORIGIN[1], ORIGIN[2])
    assert fire_all(det2, skip, [shot(1.0 + i, claimed_origin=near, hit=(20.0, 5.0, 1.6)) for i in range(5)]) == []
    # Without a claimed origin: a pistol (35 m) hit claimed 60 m away is out of reach (+15 m).
    det3 = FireDetector()
    beyond = (ORIGIN[0] + 60.0, ORIGIN[1], ORIGIN[2])
    found3 = fire_all(det3, skip, [shot(1.0, hit=beyond), shot(2.0, hit=beyond)])
    assert [(d.kind, d.evidence["check"]) for d in found3] == [("afk_ghost", "hit_beyond_range")]
    det4 = FireDetector()
    edge = (ORIGIN[0] + 45.0, ORIGIN[1], ORIGIN[2])
    assert fire_all(det4, skip, [shot(1.0 + i, hit=edge) for i in range(5)]) == []


# --- backtrack -----------------------------------------------------------------------------------


def test_backtrack_consistently_stale_claims() -> None:
    skip = book(rtt_ms=60.0)
    det = FireDetector()
    # Expected age: rtt 0.06 + interp 0.1 + allowances 0.02 = 0.18 s, plus the 0.1 s margin;
    # claims 0.4 s old (inside lagcomp's tolerance or not). The 5th stale shot is detected, then
    # at most one detection per 10 s cooldown.
    stale = [shot(1.0 + i, view_time_s=1.0 + i - 0.4) for i in range(20)]
    found = fire_all(det, skip, stale)
    assert [d.kind for d in found] == ["backtrack", "backtrack"]
    assert found[0].time_s == 5.0 and found[1].time_s - found[0].time_s >= 10.0
    assert found[0].value == pytest.approx(0.4)
    # A 300 ms link with jitter and 5 % loss: honest claims rtt + interp old are fine.
    far = book(rtt_ms=300.0, jitter_ms=15.0, loss=0.05)
    assert fire_all(FireDetector(), far, [shot(1.0 + i, view_time_s=1.0 + i - 0.46) for i in range(40)]) == []
    assert fire_all(FireDetector(), far, [shot(1.0 + i, view_time_s=1.0 + i - 0.75) for i in range(8)])
    det2 = FireDetector()
    honest = [shot(1.0 + i, view_time_s=1.0 + i - 0.14) for i in range(40)]
    assert fire_all(det2, skip, honest) == []
    # Occasional stale claims (a hitch) are not "consistently".
    det3 = FireDetector()
    mixed = [shot(1.0 + i, view_time_s=1.0 + i - (0.4 if i % 3 == 0 else 0.14)) for i in range(60)]
    assert fire_all(det3, skip, mixed) == []


def test_backtrack_needs_stale_claims_beyond_one_catch_up_burst() -> None:
    """A client whose process stalled for 0.8 s makes up its commands at once, each with the view
    time it had, and fires a burst in them: eight stale shots within 0.2 s are one cause, not
    "consistently" (an honest dsl player in an idle UDP match). The same staleness a second
    later is."""
    skip = book(rtt_ms=60.0)
    det = FireDetector()
    burst = [shot(10.0 + 0.025 * i, view_time_s=9.2 + 0.1 * i) for i in range(8)]
    # (So fast a pistol's bursts are rapid fire too: only backtrack is judged here.)
    assert [d for d in fire_all(det, skip, burst) if d.kind == "backtrack"] == []
    assert det.scores(1)["backtrack"] == pytest.approx(4 / 5)
    again = [shot(11.2 + 0.025 * i, view_time_s=10.4 + 0.1 * i) for i in range(2)]
    assert [d.kind for d in fire_all(det, skip, again) if d.kind == "backtrack"] == ["backtrack"]
    with pytest.raises(ValueError):
        FireConfig(backtrack_span_s=-1.0)


def test_backtrack_from_overruled_claims_without_connection_figures() -> None:
    skip = book(rtt_ms=60.0)
    det = FireDetector(FireConfig(stale_margin_s=10.0))  # only the lagcomp verdict can count
    overruled = [shot(1.0 + i, view_time_s=0.5 + i, decision=RewindDecision.ESTIMATE, rewind_time_s=0.87 + i)
                 for i in range(20)]
    assert {d.kind for d in fire_all(det, skip, overruled)} == {"backtrack"}
    det2 = FireDetector(FireConfig(stale_margin_s=10.0))
    ahead = [shot(1.0 + i, view_time_s=1.0 + i, decision=RewindDecision.ESTIMATE, rewind_time_s=0.87 + i)
             for i in range(20)]  # claims *newer* than the estimate are not backtracking
    assert fire_all(det2, skip, ahead) == []


def _command(seq: int, view_time_s: float) -> AimSample:
    """Player 1's command ``seq`` (64 Hz) whose frame rendered server time ``view_time_s``."""
    t = seq / 64.0
    return AimSample(1, seq, t, seq, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, PISTOL, 0, 0, True, 0.0, None, 180.0, 0.0,
                     view_time_s=view_time_s)


def _play(det: FireDetector, skip: SkipBook, commands: list[tuple[int, float]],
          shots: dict[int, float]) -> list[Detection]:
    """Commands ``(seq, view time s)`` in order; after command seq, its shot claiming view time
    ``shots[seq]`` (s) when listed. Only backtrack detections are returned."""
    out: list[Detection] = []
    for seq, view in commands:
        out += det.on_aim(_command(seq, view), skip)
        if seq in shots:
            out += det.on_shot(shot(seq / 64.0, view_time_s=shots[seq], seq=seq, rewind_time_s=shots[seq]), skip)
    return [d for d in out if d.kind == "backtrack"]


def test_backtrack_behind_the_clients_own_view_clock() -> None:
    """A shot claiming a view time older than the frame its own command rendered contradicts the
    client's clock: two such shots detect, on a 300 ms link where their age alone is allowed."""
    far = book(rtt_ms=300.0, jitter_ms=15.0, loss=0.05)
    commands = [(seq, seq / 64.0 - 0.4) for seq in range(1, 64 * 6)]
    firing = range(64, 64 * 6, 64)  # a shot a second
    # Latency alone allows 0.3 + 0.1 + ~0.1 s: a claim 0.15 s behind a 0.4 s-old frame is 0.55 s
    # old, inside it. Against the client's own clock it is 0.15 s behind.
    det = FireDetector()
    found = _play(det, far, commands, {seq: seq / 64.0 - 0.4 - 0.15 for seq in firing})
    assert [d.time_s for d in found] == [2.0]
    assert found[0].evidence["rule"] == "view_clock" and found[0].evidence["behind_s"] == pytest.approx(0.15)
    assert found[0].reason == "Backtrack-view_clock-2/8"
    # The same shots claiming their own frame: nothing. So are claims inside a sub-tick's slack.
    assert _play(FireDetector(), far, commands, {seq: seq / 64.0 - 0.4 for seq in firing}) == []
    assert _play(FireDetector(), far, commands, {seq: seq / 64.0 - 0.4 - 0.04 for seq in firing}) == []
    # A cheat that sets the shot's whole command back too: the clock had already passed that frame.
    rewound = [(seq, view - 0.2 if seq in firing else view) for seq, view in commands]
    found = _play(FireDetector(), far, rewound, {seq: seq / 64.0 - 0.6 for seq in firing})
    assert [d.time_s for d in found] == [2.0]
    # A stalled client: its frame froze for 0.8 s and the made-up commands (with a burst of fire)
    # all carry that frame's time, the newest it had. Never behind its clock.
    # (The latency rule is switched off to show the clock rule saw nothing: those claims are old.)
    stalled = [(seq, 2.1 if 160 <= seq < 200 else view) for seq, view in commands]
    det = FireDetector(FireConfig(stale_margin_s=10.0))
    assert _play(det, far, stalled, {seq: 2.1 for seq in range(160, 200, 4)}) == []
    assert det.scores(1)["backtrack"] == 0.0
    # Without the commands' view times (older recordings) only the latency rule judges.
    det = FireDetector()
    assert fire_all(det, far, [shot(seq / 64.0, view_time_s=seq / 64.0 - 0.55, seq=seq) for seq in firing]) == []
    with pytest.raises(ValueError):
        FireConfig(view_clock_slack_s=math.nan)
    with pytest.raises(ValueError):
        FireConfig(backtrack_clock_min=9)


# --- movement ------------------------------------------------------------------------------------


def ev(kind: MovementKind, t: float, value: float = 9.0, limit: float = 6.0) -> MovementEvidence:
    return MovementEvidence(player=1, tick=round(t * 64), time_s=t, kind=kind, value=value, limit=limit,
                            claimed=(1.0, 1.0, 0.0), authoritative=(0.0, 0.0, 0.0), setback=True)


def move_all(det: MovementDetector, skip: SkipBook, evidence: list[MovementEvidence]) -> list[Detection]:
    out: list[Detection] = []
    for e in evidence:
        out += det.on_movement(e, skip)
    return out


def test_movement_counts_in_windows() -> None:
    skip = book()
    det = MovementDetector()
    found = move_all(det, skip, [ev(MovementKind.SPEED, t) for t in (10.0, 12.0, 14.0)])
    assert [(d.kind, d.detector) for d in found] == [("speed", "movement")]
    assert move_all(MovementDetector(), skip, [ev(MovementKind.SPEED, t) for t in (10.0, 16.0, 22.0)]) == []
    def kinds(evidence: list[MovementEvidence]) -> list[str]:
        return [d.kind for d in move_all(MovementDetector(), skip, evidence)]

    assert kinds([ev(MovementKind.TELEPORT, 5.0, 60.0, 40.0)]) == ["teleport"]
    assert kinds([ev(MovementKind.WALL_CLIP, 5.0)]) == []
    assert kinds([ev(MovementKind.WALL_CLIP, t) for t in (5.0, 6.0)]) == ["wall_clip"]
    assert kinds([ev(MovementKind.TIMER, t) for t in (5.0, 6.0, 7.0)]) == ["timer"]
    custom = MovementDetector(MovementConfig(teleport=KindRule(2, 5.0, 0.9)))
    assert move_all(custom, skip, [ev(MovementKind.TELEPORT, 5.0)]) == []
    assert [d.severity for d in move_all(custom, skip, [ev(MovementKind.TELEPORT, 6.0)])] == [0.9]


def test_movement_respawn_and_lag_spikes_protect_honest_players() -> None:
    skip = book()
    det = MovementDetector()
    det.on_spawn(SpawnEvent(player=1, tick=640, time_s=10.0), skip)
    assert move_all(det, skip, [ev(MovementKind.TELEPORT, 10.2, 50.0, 40.0)]) == []
    # Two speed flags before the spawn do not carry over into the new life.
    det2 = MovementDetector()
    move_all(det2, skip, [ev(MovementKind.SPEED, 9.0), ev(MovementKind.SPEED, 9.5)])
    det2.on_spawn(SpawnEvent(player=1, tick=640, time_s=10.0), skip)
    assert move_all(det2, skip, [ev(MovementKind.SPEED, 11.5)]) == []
    # A lag spike: the player is paused, then the queued commands arrive as a burst.
    det3 = MovementDetector()
    spike = book(since_update_s=1.5, time_s=20.0)
    det3.on_connection(spike.connection(1), spike)  # type: ignore[arg-type]
    burst = [ev(MovementKind.TIMER, 20.2), ev(MovementKind.TIMER, 20.4), ev(MovementKind.TIMER, 20.6)]
    assert move_all(det3, skip, burst) == []
    assert det3.skip_counts() == {"lag_grace": 3}
    move_all(det3, spike, [ev(MovementKind.SPEED, 25.0)])
    assert det3.skip_counts()["paused"] == 1
    # After the grace, a real timer hack is still caught.
    later = [ev(MovementKind.TIMER, t) for t in (30.0, 31.0, 32.0)]
    assert [d.kind for d in move_all(det3, skip, later)] == ["timer"]


def test_every_config_field_can_be_overridden_from_toml() -> None:
    tolerances = pytest.importorskip("anticheat.tolerances")
    from anticheat.detectors.aimdetect.detector import AimDetectConfig
    from anticheat.detectors.aimstats import AimStatsConfig
    from anticheat.detectors.population import PopulationConfig
    from anticheat.skip import SkipConfig

    text = """
    [fire]
    auto_c_pistol_s = 0.25
    backtrack_min = 7
    [movement]
    lag_grace_s = 2
    [movement.teleport]
    count = 2
    [aimstats]
    window_samples = 1024
    [population]
    sd_floor = [["hit_ratio", 0.02]]
    [skip]
    exempt_players = [3, 5]
    [aimdetect]
    false_alarm_player_hours = 500
    [aimdetect.features]
    shot_ring = 16
    """
    configs = {"fire": FireConfig(), "movement": MovementConfig(), "aimstats": AimStatsConfig(),
               "population": PopulationConfig(), "aimdetect": AimDetectConfig(), "skip": SkipConfig()}
    out = tolerances.apply_all(configs, tolerances.load_overrides(text))
    assert out["fire"].auto_c_limit_s(PISTOL) == 0.25 and out["fire"].backtrack_min == 7
    assert out["movement"].teleport.count == 2 and out["movement"].lag_grace_s == 2.0
    assert out["aimstats"].window_samples == 1024
    assert out["population"].sd_floor == (("hit_ratio", 0.02),)
    assert out["skip"].exempt_players == frozenset({3, 5})
    assert out["aimdetect"].false_alarm_player_hours == 500.0 and out["aimdetect"].features.shot_ring == 16
    with pytest.raises(tolerances.ToleranceError):
        tolerances.apply_all(configs, tolerances.load_overrides("[fire]\nbacktrack_min = 30\n"))


def test_forged_hit_far_from_the_claimed_victim() -> None:
    import dataclasses

    skip = book()

    def claimed(t: float, hit: tuple[float, float, float], victim_feet: tuple[float, float, float] | None) -> ShotResult:
        s = shot(t, hit=hit)
        return dataclasses.replace(s, claimed_victim_pos=victim_feet,
                                   claim=dataclasses.replace(s.claim, claimed_victim=2))

    # Proaim: the victim stands at (20, 5), the claims put the hit 25 m further along the shot.
    forged = [claimed(1.0 + i, (45.0, 5.0, 1.3), (20.0, 5.0, 0.0)) for i in range(3)]
    found = fire_all(FireDetector(), skip, forged)
    assert [d.kind for d in found] == ["forged_hit"] and found[0].value == pytest.approx(25.0, abs=0.1)
    # Honest claims land on (or within a body of) the rewound victim; no victim position, no check.
    honest = [claimed(1.0 + i, (20.2, 5.1, 1.6), (20.0, 5.0, 0.0)) for i in range(20)]
    assert fire_all(FireDetector(), skip, honest) == []
    unknown = [claimed(1.0 + i, (45.0, 5.0, 1.3), None) for i in range(20)]
    assert fire_all(FireDetector(), skip, unknown) == []
