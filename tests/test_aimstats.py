"""Statistical aim analysis (AimStats) and population outliers on synthetic streams."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anticheat.aimstats import AimStatsConfig, AimStatsDetector, angular_step_deg, score
from anticheat.events import AimSample, Buttons, ConnectionSample, Detection, ShotClaim, ShotResult, SpawnEvent
from anticheat.population import PopulationConfig, PopulationDetector, leave_one_out_z, outliers
from anticheat.skip import SkipBook, SkipReason
from lagcomp.shot import RewindDecision

DT = 1.0 / 64.0


def good_book(*players: int, rtt_ms: float = 60.0) -> SkipBook:
    book = SkipBook()
    for p in players:
        book.record(ConnectionSample(player=p, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    return book


def aim(i: int, yaw: float, *, player: int = 1, pitch: float = 0.0, target: int | None = 2,
        target_angle: float = 1.0, distance: float = 10.0, buttons: int = 0, dt: float = DT) -> AimSample:
    return AimSample(
        player=player, tick=i, time_s=i * dt, seq=i, yaw_deg=yaw, pitch_deg=pitch,
        recoil_pitch_deg=0.0, recoil_yaw_deg=0.0, server_punch_pitch_deg=0.0, server_punch_yaw_deg=0.0,
        buttons=buttons, weapon=2, weapon_switch=0, stance=0, on_ground=True, speed_m_s=0.0,
        target=target, target_angle_deg=target_angle, target_distance_m=distance,
    )


def aimbot_stream(n: int) -> list[AimSample]:
    """Every 10th command snaps 60 deg onto a new target; in between, perfectly smooth tracking."""
    out = []
    yaw = 0.0
    for i in range(n):
        if i % 10 == 0:
            yaw += 60.0 if (i // 10) % 2 == 0 else -60.0
            out.append(aim(i, yaw, target=2 + (i // 10) % 2, target_angle=0.2))
        else:
            yaw += 0.3
            out.append(aim(i, yaw, target=2 + (i // 10) % 2, target_angle=0.1))
    return out


def honest_stream(n: int, rng: np.random.Generator) -> list[AimSample]:
    """Tracking a strafing target with a shaky hand, a 30-degree flick over 4 commands every 2 s."""
    out = []
    bearing = 0.0
    error = 0.0
    yaw = 0.0
    for i in range(n):
        bearing += 0.3
        if i % 128 == 64:
            bearing += 30.0
        # The hand closes 40 % of the gap each command, plus tremor.
        yaw += 0.4 * (bearing - yaw) + rng.normal(0.0, 0.6)
        error = abs(bearing - yaw)
        out.append(aim(i, yaw, target=2, target_angle=error, buttons=int(Buttons.FIRE) if i % 20 == 0 else 0))
    return out


def feed(det: AimStatsDetector, book: SkipBook, samples: list[AimSample]) -> list[Detection]:
    found: list[Detection] = []
    for s in samples:
        found.extend(det.on_aim(s, book))
    return found


def test_angular_step() -> None:
    assert angular_step_deg(179.0, 0.0, -179.0, 0.0) == pytest.approx(2.0)
    assert angular_step_deg(0.0, 0.0, 0.0, 30.0) == pytest.approx(30.0)
    assert angular_step_deg(0.0, 89.0, 180.0, 89.0) == pytest.approx(2.0, abs=1e-6)
    assert angular_step_deg(10.0, 5.0, 10.0, 5.0) == 0.0


def test_score_contributions_follow_the_article() -> None:
    cfg = AimStatsConfig()
    assert score(0.10, 1.0, 0.5, cfg) == pytest.approx((0.4, 0.0, 0.0))
    assert score(0.05, 1.0, 0.5, cfg) == pytest.approx((0.0, 0.0, 0.0))  # strictly above 5 %
    assert score(0.0, 0.15, 0.5, cfg) == pytest.approx((0.0, 0.15, 0.0))
    assert score(0.0, 1.0, 0.96, cfg) == pytest.approx((0.0, 0.0, 0.15))
    assert score(0.0, math.nan, math.nan, cfg) == (0.0, 0.0, 0.0)


def test_aimbot_stream_is_suspicious_once_per_cooldown() -> None:
    det = AimStatsDetector()
    book = good_book(1)
    found = feed(det, book, aimbot_stream(640))
    r = det.result(1)
    # Command 0 has no predecessor, so its turn is not measured: 63 snaps in 640 commands.
    assert r.snap_rate == pytest.approx(63 / 640)
    assert r.jitter_deg == pytest.approx(0.0, abs=1e-9)
    assert r.tracking_efficiency == pytest.approx(1.0)
    assert r.score == pytest.approx(1.0)
    assert r.suspicious
    # 10 s of samples, 30 s cooldown: exactly one Detection, at the first scorable sample.
    assert len(found) == 1
    d = found[0]
    assert (d.detector, d.kind, d.player) == ("aimstats", "aim_stats", 1)
    assert d.tick == AimStatsConfig().min_samples - 1
    assert d.value > 0.7
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in d.evidence.values())


def test_honest_stream_is_not_suspicious() -> None:
    det = AimStatsDetector()
    book = good_book(1)
    found = feed(det, book, honest_stream(1280, np.random.default_rng(3)))
    r = det.result(1)
    assert found == []
    assert not r.suspicious
    assert r.snaps == 0
    assert r.jitter_deg > 0.3
    assert r.tracking_efficiency < 0.92
    assert r.micro_mean_deg > 0.0 and r.micro_sd_deg > 0.0


def test_insufficient_samples_give_no_score() -> None:
    det = AimStatsDetector()
    found = feed(det, good_book(1), aimbot_stream(99))
    r = det.result(1)
    assert found == [] and r.insufficient and r.score == 0.0 and not r.suspicious
    assert det.result(7).insufficient


def test_snap_speed_is_normalised_to_a_60fps_frame() -> None:
    cfg = AimStatsConfig(min_samples=2, window_samples=8)
    det = AimStatsDetector(cfg)
    book = good_book(1)
    # 60 deg in one 20 Hz command is 1200 deg/s = 20 deg per 60 fps frame: a fast human flick.
    det.on_aim(aim(0, 0.0, dt=0.05), book)
    det.on_aim(aim(1, 60.0, dt=0.05, target_angle=0.5), book)
    assert det.result(1).snaps == 0
    # The same turn in one 64 Hz command is 3840 deg/s: a snap.
    det2 = AimStatsDetector(cfg)
    det2.on_aim(aim(0, 0.0), book)
    det2.on_aim(aim(1, 60.0, target_angle=0.5), book)
    assert det2.result(1).snaps == 1
    # Bunched commands (same server time) are floored to one command interval, not divided by 0.
    det3 = AimStatsDetector(cfg)
    det3.on_aim(aim(0, 0.0, dt=0.0), book)
    det3.on_aim(aim(1, 45.0, dt=0.0, target_angle=0.5), book)
    assert det3.result(1).snaps == 0  # 45 deg over 1/64 s = 42 deg/frame < 50


def test_snap_must_end_on_target() -> None:
    cfg = AimStatsConfig(min_samples=2, window_samples=8)
    det = AimStatsDetector(cfg)
    book = good_book(1)
    det.on_aim(aim(0, 0.0), book)
    det.on_aim(aim(1, 60.0, target_angle=8.0), book)
    assert det.result(1).snaps == 0


def test_idle_mouse_is_not_low_jitter() -> None:
    det = AimStatsDetector()
    book = good_book(1)
    feed(det, book, [aim(i, 10.0, target_angle=0.2) for i in range(300)])
    r = det.result(1)
    assert math.isnan(r.jitter_deg) and r.jitter_part == 0.0
    assert math.isnan(r.tracking_efficiency)  # not turning: holding still is not tracking
    assert r.score == 0.0


def test_respawn_turn_is_not_a_snap_and_skips_are_counted() -> None:
    cfg = AimStatsConfig(min_samples=2, window_samples=8)
    det = AimStatsDetector(cfg)
    book = good_book(1)
    det.on_aim(aim(0, 0.0), book)
    det.on_spawn(SpawnEvent(player=1, tick=1, time_s=DT), book)
    det.on_aim(aim(1, 120.0, target_angle=0.1), book)
    assert det.result(1).snaps == 0
    lag = SkipBook()
    lag.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=900.0, jitter_ms=5.0, loss=0.0, since_update_s=0.0))
    found = feed(det, lag, aimbot_stream(300))
    assert found == []
    assert det.skip_counts() == {SkipReason.HIGH_PING.value: 300}


def test_ring_is_bounded_and_totals_follow_evictions() -> None:
    cfg = AimStatsConfig(min_samples=100, window_samples=200)
    det = AimStatsDetector(cfg)
    book = good_book(1)
    feed(det, book, aimbot_stream(200))
    assert det.result(1).snaps == 19
    # Then 200 idle samples push every snap out of the window.
    feed(det, book, [aim(200 + i, 0.0, target_angle=5.0) for i in range(200)])
    r = det.result(1)
    assert r.samples == 200 and r.snaps == 0 and r.tracking_samples == 0


def test_reset_player_forgets() -> None:
    det = AimStatsDetector()
    feed(det, good_book(1), aimbot_stream(150))
    det.reset_player(1)
    assert det.result(1).samples == 0


# --- population outliers ---------------------------------------------------------------------


def test_leave_one_out_matches_brute_force() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(0.3, 0.05, size=12)
    x[4] = 0.9
    z, mean, sd = leave_one_out_z(x)
    for i in range(x.size):
        others = np.delete(x, i)
        assert mean[i] == pytest.approx(others.mean())
        assert sd[i] == pytest.approx(others.std(ddof=1))
        assert z[i] == pytest.approx((x[i] - others.mean()) / others.std(ddof=1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=3, max_size=20))
def test_leave_one_out_property(values: list[float]) -> None:
    x = np.array(values)
    z, mean, sd = leave_one_out_z(x)
    for i in range(x.size):
        others = np.delete(x, i)
        assert mean[i] == pytest.approx(others.mean(), abs=1e-9)
        ref_sd = others.std(ddof=1)
        if sd[i] == 0.0:
            assert ref_sd <= 1e-9 * max(abs(others.mean()), 1.0) and math.isnan(z[i])
        else:
            assert sd[i] == pytest.approx(ref_sd, rel=1e-9)
            assert z[i] == pytest.approx((x[i] - others.mean()) / ref_sd, rel=1e-6, abs=1e-9)


def test_outlier_flagged_against_the_others() -> None:
    rng = np.random.default_rng(11)
    metrics = {p: {"headshot_ratio": float(v)} for p, v in enumerate(rng.normal(0.22, 0.04, size=10))}
    metrics[99] = {"headshot_ratio": 0.75}
    found = outliers(metrics)
    assert [o.player for o in found] == [99]
    assert found[0].z > 3.0 and found[0].others == 10
    # Including the cheater in his own baseline would have hidden him: max z of 11 values < 3.02.
    vals = np.array([m["headshot_ratio"] for m in metrics.values()])
    assert (vals.max() - vals.mean()) / vals.std(ddof=1) < 3.02


def test_small_populations_and_zero_spread_give_no_verdict() -> None:
    four = {p: {"hit_ratio": 0.2} for p in range(3)} | {3: {"hit_ratio": 0.9}}
    assert outliers(four) == []
    flat = {p: {"hit_ratio": 0.2} for p in range(8)} | {8: {"hit_ratio": 0.3}}
    assert outliers(flat) == []
    floored = outliers(flat, PopulationConfig(sd_floor=(("hit_ratio", 0.02),)))
    assert [o.player for o in floored] == [8] and floored[0].z == pytest.approx(5.0)


def test_low_time_to_kill_is_the_suspicious_side() -> None:
    rng = np.random.default_rng(2)
    metrics = {p: {"time_to_kill_s": float(v)} for p, v in enumerate(rng.normal(0.8, 0.1, size=9))}
    metrics[50] = {"time_to_kill_s": 0.1}
    assert [o.player for o in outliers(metrics)] == [50]
    del metrics[50]
    metrics[51] = {"time_to_kill_s": 1.8}  # slow killers are not suspicious
    assert outliers(metrics) == []


def _shot(shooter: int, i: int, victim: int | None, bone: int, weapon: int = 2, pellet: int = 0) -> ShotResult:
    return ShotResult(
        shooter=shooter, tick=i, time_s=i * DT, weapon=weapon, pellet=pellet, origin=(0.0, 0.0, 1.6),
        direction=(1.0, 0.0, 0.0), rewind_time_s=i * DT, rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False, victim=victim, victim_generation=0, bone=bone, hit_point=(10.0, 0.0, 1.6),
        distance_m=10.0, blocked_by_wall=False, victim_pos=None, victim_speed_m_s=0.0,
        damage=30.0 if victim is not None else 0.0,
        claim=ShotClaim(shooter=shooter, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0),
    )


def test_population_detector_counts_and_flags() -> None:
    players = list(range(8))
    book = good_book(*players, *(100 + p for p in players))
    det = PopulationDetector()
    rng = np.random.default_rng(9)
    for p in players:
        heads = 0.9 if p == 7 else float(rng.uniform(0.15, 0.3))
        for i in range(60):
            hit = i % 3 != 0
            bone = 2 if hit and rng.random() < heads else (4 if hit else 0)
            det.on_shot(_shot(p, i, 100 + p if hit else None, bone), book)
    m = det.metrics()
    assert m[0]["hit_ratio"] == pytest.approx(40 / 60)
    found = det.evaluate(tick=1000, time_s=20.0)
    assert [(d.player, d.kind) for d in found] == [(7, "outlier_headshot_ratio")]
    assert found[0].detector == "population" and found[0].value > 3.0
    # Extra metrics from other detectors join the table.
    extra = {p: {"aim_score": 0.1 + 0.01 * p} for p in range(7)} | {7: {"aim_score": 0.95}}
    kinds = {d.kind for d in det.evaluate(1000, 20.0, extra) if d.player == 7}
    assert kinds == {"outlier_headshot_ratio", "outlier_aim_score"}
