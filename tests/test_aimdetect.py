"""AimDetect: feature extraction and the detector (the model itself: test_aimdetect_model.py)."""

from __future__ import annotations

import dataclasses

import math
from collections.abc import Sequence

import numpy as np
import pytest

from anticheat.detectors.aimdetect.detector import AimDetectConfig, AimDetectDetector
from anticheat.detectors.aimdetect.features import FEATURE_NAMES, FeatureExtractor
from anticheat.detectors.aimdetect.model import TrainedModel, train
from anticheat.events import AimSample, ConnectionSample, Detection, KillEvent, ShotClaim, ShotResult, SpawnEvent
from anticheat.skip import SkipBook
from lagcomp.shot import RewindDecision

TICK = 1.0 / 64.0


def book(*players: int, rtt_ms: float = 60.0) -> SkipBook:
    b = SkipBook()
    for p in players:
        b.record(ConnectionSample(player=p, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    return b


def aim(player: int, tick: int, yaw: float, *, target: int | None = None, angle: float = 5.0, stance: int = 0,
        on_ground: bool = True, speed: float = 0.0, distance: float = 10.0) -> AimSample:
    return AimSample(
        player=player, tick=tick, time_s=tick * TICK, seq=tick, yaw_deg=yaw, pitch_deg=0.0,
        recoil_pitch_deg=0.0, recoil_yaw_deg=0.0, server_punch_pitch_deg=0.0, server_punch_yaw_deg=0.0,
        buttons=0, weapon=2, weapon_switch=0, stance=stance, on_ground=on_ground, speed_m_s=speed,
        target=target, target_angle_deg=angle, target_distance_m=distance,
    )


def shot(shooter: int, tick: int, victim: int | None, *, bone: int = 0, pellet: int = 0, weapon: int = 2,
         bait: bool = False) -> ShotResult:
    return ShotResult(
        shooter=shooter, tick=tick, time_s=tick * TICK, weapon=weapon, pellet=pellet, origin=(0.0, 0.0, 1.64),
        direction=(1.0, 0.0, 0.0), rewind_time_s=tick * TICK - 0.1, rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False, victim=victim, victim_generation=0, bone=bone, hit_point=(10.0, 0.0, 1.6),
        distance_m=10.0, blocked_by_wall=False, victim_pos=None, victim_speed_m_s=0.0,
        damage=40.0 if victim is not None else 0.0,
        claim=ShotClaim(shooter=shooter, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0), bait_hit=bait,
    )


def kill(killer: int, victim: int, tick: int, *, headshot: bool = False, distance: float = 10.0) -> KillEvent:
    return KillEvent(killer=killer, victim=victim, tick=tick, time_s=tick * TICK, weapon=2,
                     bone=2 if headshot else 4, distance_m=distance, killer_stance=0, headshot=headshot)


# --- feature extraction on a hand-built sequence ----------------------------------------------


def test_features_of_a_hand_built_kill() -> None:
    fx = FeatureExtractor()
    fx.on_kill(kill(3, 1, 32))  # player 1 dies once before
    fx.on_spawn(SpawnEvent(player=1, tick=64, time_s=1.0))
    for t in range(64, 142):
        yaw = 20.0 if t >= 135 else 0.0  # a 20-degree flick in one command at tick 135
        fx.on_aim(aim(1, t, yaw, target=2 if t >= 96 else None, stance=1 if t >= 120 else 0,
                      on_ground=t != 141))
        if t == 80:
            fx.on_shot(shot(1, t, None))  # at no one
        elif t == 102:
            fx.on_shot(shot(1, t, None))  # at player 2 (nearest target), 6 ticks after it appeared: hard
        elif t == 122:
            fx.on_shot(shot(1, t, 2, bone=4))  # crouched hit
        elif t == 141:
            fx.on_shot(shot(1, t, 2, bone=2))  # crouched, airborne: hard hit
    f = fx.on_kill(kill(1, 2, 141, headshot=True, distance=10.0))
    assert f.attempts == 4
    assert f.deaths == 1
    assert f.time_to_kill_s == pytest.approx((141 - 102) * TICK)
    assert f.cursor_accel_deg_s2 == pytest.approx(20.0 * 64 * 64)
    assert f.crouch_hit_ratio == pytest.approx(1.0)
    assert f.hard_hits == 1
    assert f.hard_hit_ratio == pytest.approx(0.5)
    width = math.degrees(math.atan2(0.10, 10.0))
    assert f.headshot_suspicion == pytest.approx(math.log2(1.0 + 20.0 / width))
    assert f.as_array().shape == (len(FEATURE_NAMES),)

    # The next kill counts from this one: 2 attempts, no deaths; not a headshot.
    fx.on_aim(aim(1, 150, 20.0, target=3))
    fx.on_shot(shot(1, 150, None))
    fx.on_shot(shot(1, 160, 3, bone=5))
    g = fx.on_kill(kill(1, 3, 160))
    assert (g.attempts, g.deaths, g.headshot_suspicion) == (2, 0, 0.0)
    assert g.time_to_kill_s == pytest.approx(10 * TICK)


def _view_features_by_hand(ring: list[tuple[float, float, float]], end_s: float) -> tuple[float, float]:
    """F4 and F8's view travel as KillFeatures defines them, one Python step per pair."""
    from anticheat.detectors.aimdetect.features import FeatureConfig
    from anticheat.detectors.aimstats import angular_step_deg

    cfg = FeatureConfig()
    pts = [a for a in ring if end_s - cfg.accel_window_s <= a[0] <= end_s]
    peak, prev = 0.0, None
    for (t0, y0, p0), (t1, y1, p1) in zip(pts, pts[1:]):
        if not 0.0 <= t1 - t0 <= cfg.max_gap_s:
            prev = None
            continue
        dt = max(t1 - t0, cfg.min_dt_s)
        v = (((y1 - y0 + 180.0) % 360.0 - 180.0) * math.cos(math.radians(0.5 * (p0 + p1))) / dt, (p1 - p0) / dt)
        if prev is not None:
            peak = max(peak, math.hypot(v[0] - prev[0], v[1] - prev[1]) / dt)
        prev = v
    pts = [a for a in ring if end_s - cfg.flick_window_s <= a[0] <= end_s]
    return peak, sum(angular_step_deg(y0, p0, y1, p1) for (_, y0, p0), (_, y1, p1) in zip(pts, pts[1:]))


def test_view_features_follow_their_definition_on_random_rings() -> None:
    """The compiled pass over the view ring against the definition: windows ending before the
    ring does, gaps that break the velocity (too long, backwards), bunched commands, yaw wraps.
    libm and CPython may round a hypot or a square differently in the last place: 1e-12."""
    from anticheat.detectors.aimdetect.features import FeatureConfig, _view_kernel

    cfg = FeatureConfig()
    rng = np.random.default_rng(7)
    for trial in range(3000):
        n = int(rng.integers(2, cfg.aim_ring + 1))
        t = np.cumsum(rng.choice([0.0, 1 / 128, 1 / 64, 0.3, -0.01], size=n, p=[0.05, 0.6, 0.25, 0.05, 0.05]))
        yaw = rng.uniform(-180.0, 180.0, n) if trial % 3 == 0 else np.cumsum(rng.normal(0.0, 3.0, n)) + 170.0
        pitch = np.clip(np.cumsum(rng.normal(0.0, 2.0, n)), -89.0, 89.0)
        ring = [(float(a), float(b), float(c)) for a, b, c in zip(t, yaw, pitch, strict=True)]
        end_s = float(t[-1]) - (0.0 if trial % 2 else float(rng.uniform(0.0, 0.3)))
        want = _view_features_by_hand(ring, end_s)
        got = _view_kernel(np.array(ring), end_s, cfg.accel_window_s, cfg.flick_window_s, cfg.max_gap_s,
                           cfg.min_dt_s)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-9), trial


def test_shotgun_pellets_count_as_one_attempt_and_any_pellet_hit_is_a_hit() -> None:
    fx = FeatureExtractor()
    fx.on_aim(aim(1, 10, 0.0, target=2, stance=1))
    fx.on_shot(shot(1, 10, None, weapon=4, pellet=0))
    for k in range(1, 8):
        fx.on_shot(shot(1, 10, 2 if k == 5 else None, weapon=4, pellet=k, bone=4))
    f = fx.on_kill(kill(1, 2, 10))
    assert f.attempts == 1
    assert f.crouch_hit_ratio == 1.0


def test_shot_departure_is_the_largest_excess_over_the_crosshairs_motion_since_the_last_kill() -> None:
    fx = FeatureExtractor()

    def claimed(tick: int, yaw: float, view: tuple[float, float] | None, prev: tuple[float, float] | None,
                pellet: int = 0) -> ShotResult:
        base = shot(1, tick, None, pellet=pellet)
        return dataclasses.replace(base, claim=dataclasses.replace(base.claim, yaw_deg=yaw, view=view, prev_view=prev))

    fx.on_spawn(SpawnEvent(player=1, tick=0, time_s=0.0))
    fx.on_shot(claimed(1, 10.0, (10.0, 0.0), (0.0, 0.0)))   # along the view: 0
    fx.on_shot(claimed(2, 25.0, (10.0, 0.0), (0.0, 0.0)))   # 15 off, view moved 10: 5 beyond
    fx.on_shot(claimed(3, 14.0, (10.0, 0.0), (10.0, 0.0)))  # 4 off a still view: 4
    fx.on_shot(claimed(3, 90.0, (10.0, 0.0), (10.0, 0.0), pellet=1))  # pellets share pellet 0's angles
    first = fx.on_kill(kill(1, 2, 4))
    assert first.shot_departure_deg == pytest.approx(5.0)
    fx.on_shot(claimed(5, 3.0, None, None))  # no view claimed: no evidence
    assert fx.on_kill(kill(1, 3, 6)).shot_departure_deg == 0.0
    fx.on_shot(claimed(7, 40.0, (10.0, 0.0), (10.0, 0.0)))
    fx.on_spawn(SpawnEvent(player=1, tick=8, time_s=8 * TICK))  # a new life forgets the last one's shots
    assert fx.on_kill(kill(1, 4, 9)).shot_departure_deg == 0.0


# --- synthetic labelled features ---------------------------------------------------------------


def synthetic_kills(rng: np.random.Generator, n: int, cheater: bool) -> np.ndarray:
    """Plausible per-kill features for honest players and aimbots (FEATURE_NAMES order)."""
    attempts = 1 + rng.poisson(0.6 if cheater else 5.0, n)
    deaths = rng.poisson(0.3 if cheater else 1.2, n)
    ttk = rng.exponential(0.12 if cheater else 0.9, n)
    accel = np.exp(rng.normal(math.log(80_000.0 if cheater else 4_000.0), 0.8, n))
    crouch = rng.beta(2.0, 3.0, n)
    hard_hits = rng.poisson(4.0 if cheater else 1.0, n)
    hard_ratio = rng.beta(6.0, 2.0, n) if cheater else rng.beta(2.0, 5.0, n)
    head = rng.random(n) < (0.7 if cheater else 0.25)
    suspicion = np.where(head, np.clip(rng.normal(5.5 if cheater else 2.0, 1.0, n), 0.0, None), 0.0)
    # The trajectory: an aimbot locks on and its pull is fastest at the start of the approach.
    lock = rng.beta(8.0, 2.0, n) if cheater else rng.beta(2.0, 4.0, n)
    track = rng.exponential(0.3 if cheater else 1.5, n)
    amplitude = rng.exponential(12.0, n)
    duration = rng.exponential(0.08 if cheater else 0.2, n)
    peak_at = rng.beta(1.0, 6.0, n) if cheater else rng.beta(4.0, 4.0, n)
    peak_mean = 1.0 + rng.exponential(1.2 if cheater else 0.8, n)
    corr = rng.uniform(0.6, 1.0, n) if cheater else rng.uniform(-0.5, 0.5, n)
    segment = rng.exponential(0.6, n)
    at_kill = rng.exponential(0.5 if cheater else 1.5, n)
    # A hand's shots fly along its crosshair; some aimbots (silent aim) send other angles.
    departure = np.where(rng.random(n) < (0.2 if cheater else 0.0), rng.exponential(8.0, n), 0.0)
    return np.column_stack([attempts, deaths, ttk, accel, crouch, hard_hits, hard_ratio, suspicion, lock, track,
                            amplitude, duration, peak_at, peak_mean, corr, segment, at_kill, departure]).astype(float)


def synthetic_model(seed: int = 1) -> TrainedModel:
    rng = np.random.default_rng(seed)
    x = np.vstack([synthetic_kills(rng, 500, False), synthetic_kills(rng, 500, True)])
    y = np.r_[np.zeros(500), np.ones(500)]
    return train(x, y, seed=seed, feature_names=FEATURE_NAMES)


# The model's own tests (training, rates, persistence) are in test_aimdetect_model.py.


# --- the detector on event streams ---------------------------------------------------------------


Event = AimSample | ShotResult | KillEvent | SpawnEvent


def aimbot_kill(killer: int, victim: int, t0: int) -> list[Event]:
    """The victim appears, 5 commands later the view snaps 30 deg onto its head, one shot kills."""
    events: list[Event] = [aim(killer, t0 + i, 0.0, target=victim if i >= 35 else None, angle=30.0) for i in range(40)]
    events.append(aim(killer, t0 + 40, 30.0, target=victim, angle=0.1))
    events.append(shot(killer, t0 + 40, victim, bone=2))
    events.append(kill(killer, victim, t0 + 40, headshot=True, distance=15.0))
    events += [aim(killer, t0 + 41 + i, 30.0, target=None) for i in range(4)]
    return events


def honest_kill(killer: int, victim: int, t0: int, rng: np.random.Generator) -> list[Event]:
    """Turn onto the victim over 20 commands, track with tremor, six shots, every other one hits."""
    events: list[Event] = []
    yaw = 0.0
    for i in range(80):
        yaw = min(30.0, yaw + 1.5) + rng.normal(0.0, 0.2)
        events.append(aim(killer, t0 + i, yaw, target=victim, angle=abs(30.0 - yaw) + 0.5, speed=1.0))
        if i >= 25 and (i - 25) % 10 == 0:
            k = (i - 25) // 10
            hit = k % 2 == 1
            events.append(shot(killer, t0 + i, victim if hit else None, bone=4))
            if k == 5:
                events.append(kill(killer, victim, t0 + i, distance=15.0))
                break
    return events


def run(det: AimDetectDetector, skip: SkipBook, events: Sequence[Event]) -> list[Detection]:
    out: list[Detection] = []
    for e in events:
        if isinstance(e, AimSample):
            out += det.on_aim(e, skip)
        elif isinstance(e, ShotResult):
            out += det.on_shot(e, skip)
        elif isinstance(e, KillEvent):
            out += det.on_kill(e, skip)
        elif isinstance(e, SpawnEvent):
            out += det.on_spawn(e, skip)
    return out


@pytest.fixture(scope="module")
def model() -> TrainedModel:
    return synthetic_model()


def test_aimbot_alarms_after_the_kills_its_threshold_needs_and_then_starts_afresh(model: TrainedModel) -> None:
    det = AimDetectDetector(model)
    up = math.log(det.theta1 / det.theta0)
    needed = math.ceil(det.h / up - 1e-12)  # positive kills in a row that reach h from 0
    skip = book(1, *range(10, 20))
    events: list[Event] = []
    for k in range(2 * needed):
        events += aimbot_kill(1, 10 + k, 100 * k)
    found = run(det, skip, events)
    assert det.kills_positive == det.kills_classified == 2 * needed
    # Every positive kill adds ln(theta1/theta0); an alarm restarts the sum from zero.
    assert [d.kind for d in found] == ["aimbot", "aimbot"]
    d = found[0]
    assert d.player == 1 and d.detector == "aimdetect" and d.value >= det.h
    assert d.evidence["kills"] == d.evidence["positive_kills"] == needed
    assert d.evidence["theta1"] == pytest.approx(model.tpr) and d.evidence["theta0"] == pytest.approx(model.fpr_worst)
    assert det.cusum(1).alarms == 2
    det.reset_player(1)
    assert det.cusum(1).alarms == 0 and det.cusum(1).statistic == 0.0


def test_threshold_follows_the_promised_player_hours(model: TrainedModel) -> None:
    from anticheat.detectors.aimdetect.detector import AimDetectConfig

    strict = AimDetectDetector(model, AimDetectConfig(false_alarm_player_hours=10_000.0))
    loose = AimDetectDetector(model, AimDetectConfig(false_alarm_player_hours=10.0))
    assert loose.h < strict.h
    for det in (strict, loose):
        hours = det.expected_kills(det.theta0) / det.config.kills_per_hour
        assert hours >= det.config.false_alarm_player_hours


def test_honest_player_is_never_decided_cheater(model: TrainedModel) -> None:
    det = AimDetectDetector(model)
    skip = book(1, *range(10, 40))
    rng = np.random.default_rng(8)
    events: list[Event] = []
    for k in range(30):
        events += honest_kill(1, 10 + k, 100 * k, rng)
    assert run(det, skip, events) == []
    assert det.kills_classified == 30
    # A few kills judged positive do not add up: negative verdicts pull the sum back to its floor.
    assert det.kills_positive < 10
    assert det.cusum(1).alarms == 0 and det.cusum(1).peak < det.h


def test_kills_of_lagging_players_are_skipped(model: TrainedModel) -> None:
    det = AimDetectDetector(model)
    skip = book(*range(10, 20))
    skip.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=800.0, jitter_ms=5.0, loss=0.0, since_update_s=0.0))
    events: list[Event] = []
    for k in range(8):
        events += aimbot_kill(1, 10 + k, 100 * k)
    assert run(det, skip, events) == []
    assert det.skip_counts() == {"high_ping": 8}


def test_bait_hits(model: TrainedModel) -> None:
    det = AimDetectDetector(model)
    skip = book(1)
    # One shotgun blast through the bait is one bait shot, whatever its pellets.
    blast = [shot(1, 100, None, weapon=4, pellet=k, bait=True) for k in range(8)]
    assert run(det, skip, blast) == []
    found = run(det, skip, [shot(1, 200, None, bait=True)])
    assert [(d.kind, d.severity) for d in found] == [("bait_hit", 0.9)]
    # Two bait shots too far apart are not a pattern.
    det2 = AimDetectDetector(model)
    assert run(det2, skip, [shot(1, 0, None, bait=True), shot(1, 64 * 200, None, bait=True)]) == []
    # A config of one bait shot detects at once.
    det3 = AimDetectDetector(model, AimDetectConfig(bait_hits_to_detect=1))
    assert [d.kind for d in run(det3, skip, [shot(1, 5, None, bait=True)])] == ["bait_hit"]


def test_bait_shots_aimed_at_a_view_from_before_the_kill_do_not_count(model: TrainedModel) -> None:
    skip = book(1, 2, 3)

    def at_view(tick: int, view_s: float) -> ShotResult:
        return dataclasses.replace(shot(1, tick, None, weapon=6, bait=True), rewind_time_s=view_s)

    # Player 1 kills at tick 640 (10 s). A spray still held through it, aimed at views of 9.9 s and
    # 9.99 s (the victim alive on the shooter's screen), climbs through the bait twice: no pattern.
    det = AimDetectDetector(model)
    inertial = [kill(1, 2, 640), at_view(646, 9.9), at_view(652, 9.99)]
    assert run(det, skip, inertial) == []
    assert det.skip_counts() == {"bait_before_kill": 2}
    assert det.scores(1).get("bait_hit", 0.0) == 0.0
    # The same two shots aimed at views from after the kill are an aimbot going for the bait.
    det2 = AimDetectDetector(model)
    found = run(det2, skip, [kill(1, 2, 640), at_view(660, 10.05), at_view(670, 10.2)])
    assert [d.kind for d in found] == ["bait_hit"]
    # A kill in the shot's own tick placed its bait after the tick's rays: the earlier kill rules.
    det3 = AimDetectDetector(model)
    found = run(det3, skip, [kill(1, 2, 640), at_view(660, 10.05), kill(1, 3, 670), at_view(670, 10.2)])
    assert [d.kind for d in found] == ["bait_hit"]


def test_model_with_wrong_features_is_refused(model: TrainedModel) -> None:
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(0, 1, (40, 3)), rng.normal(2, 1, (40, 3))])
    small = train(x, np.r_[np.zeros(40), np.ones(40)], seed=0, feature_names=("a", "b", "c"),
                  params={"max_iter": 10})
    with pytest.raises(ValueError):
        AimDetectDetector(small)
