"""Statistical aim analysis (AimStats) and population z-scores on synthetic streams."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anticheat.detectors.aimstats import AimStatsConfig, AimStatsDetector, angular_step_compiled, angular_step_deg, score
from anticheat.events import AimSample, Buttons, ConnectionSample, Detection, ShotClaim, ShotResult, SpawnEvent
from anticheat.detectors.population import PopulationConfig, PopulationDetector, leave_one_out_z
from anticheat.skip import SkipBook, SkipConfig, SkipReason
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


@pytest.mark.parametrize("step", [angular_step_deg, angular_step_compiled])
def test_angular_step(step) -> None:
    assert step(179.0, 0.0, -179.0, 0.0) == pytest.approx(2.0)
    assert step(0.0, 0.0, 0.0, 30.0) == pytest.approx(30.0)
    assert step(0.0, 89.0, 180.0, 89.0) == pytest.approx(2.0, abs=1e-6)
    assert step(10.0, 5.0, 10.0, 5.0) == 0.0


def test_compiled_angular_step_is_the_python_one() -> None:
    rng = np.random.default_rng(3)
    for yaw0, pitch0, yaw1, pitch1 in rng.uniform(-180.0, 180.0, (2000, 4)) * [1.0, 0.5, 1.0, 0.5]:
        want = angular_step_deg(yaw0, pitch0, yaw1, pitch1)
        assert angular_step_compiled(yaw0, pitch0, yaw1, pitch1) == pytest.approx(want, rel=1e-12, abs=1e-12)


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


def _ratios(det: PopulationDetector, heads: dict[int, float], hits_of_60: int = 40) -> None:
    """Feed each player 60 rays, ``hits_of_60`` of them hits, ``heads[p]`` of the hits on the head."""
    players = sorted(heads)
    book = good_book(*players, *(100 + p for p in players))
    for p in players:
        n_heads = round(heads[p] * hits_of_60)
        hit_i = 0
        for i in range(60):
            hit = i < hits_of_60
            bone = (2 if hit_i < n_heads else 4) if hit else 0
            hit_i += hit
            det.on_shot(_shot(p, i, 100 + p if hit else None, bone), book)


def test_population_z_is_against_the_others() -> None:
    rng = np.random.default_rng(11)
    heads = {p: float(v) for p, v in enumerate(rng.uniform(0.15, 0.30, size=10))} | {99: 0.75}
    det = PopulationDetector()
    _ratios(det, heads)
    ratio = {p: m["headshot_ratio"] for p, m in det.metrics().items()}
    others = np.array([v for p, v in ratio.items() if p != 99])
    z = (ratio[99] - others.mean()) / others.std(ddof=1)
    assert det.scores(99)["headshot_ratio"] == pytest.approx(z / 3.0) and z > 3.0
    # Including the cheater in his own baseline would have hidden him: max z of 11 values < 3.02.
    vals = np.array(list(ratio.values()))
    assert (vals.max() - vals.mean()) / vals.std(ddof=1) < 3.02


def test_small_populations_and_zero_spread_score_nothing() -> None:
    four = PopulationDetector()
    _ratios(four, {0: 0.2, 1: 0.2, 2: 0.25, 3: 0.9})
    assert four.scores(3) == {"hit_ratio": 0.0, "headshot_ratio": 0.0}
    flat = {p: 0.2 for p in range(8)} | {8: 0.3}
    det = PopulationDetector()
    _ratios(det, flat)
    assert det.scores(8)["headshot_ratio"] == 0.0
    floored = PopulationDetector(PopulationConfig(sd_floor=(("headshot_ratio", 0.02),)))
    _ratios(floored, flat)
    assert floored.scores(8)["headshot_ratio"] == pytest.approx((0.3 - 0.2) / 0.02 / 3.0)


def _shot(shooter: int, i: int, victim: int | None, bone: int, weapon: int = 2, pellet: int = 0) -> ShotResult:
    return ShotResult(
        shooter=shooter, tick=i, time_s=i * DT, weapon=weapon, pellet=pellet, origin=(0.0, 0.0, 1.6),
        direction=(1.0, 0.0, 0.0), rewind_time_s=i * DT, rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False, victim=victim, victim_generation=0, bone=bone, hit_point=(10.0, 0.0, 1.6),
        distance_m=10.0, blocked_by_wall=False, victim_pos=None, victim_speed_m_s=0.0,
        damage=30.0 if victim is not None else 0.0,
        claim=ShotClaim(shooter=shooter, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0),
    )


def test_population_detector_counts_and_never_detects() -> None:
    players = list(range(8))
    book = good_book(*players, *(100 + p for p in players))
    det = PopulationDetector()
    rng = np.random.default_rng(9)
    found = []
    for p in players:
        heads = 0.9 if p == 7 else float(rng.uniform(0.15, 0.3))
        for i in range(60):
            hit = i % 3 != 0
            bone = 2 if hit and rng.random() < heads else (4 if hit else 0)
            found += det.on_shot(_shot(p, i, 100 + p if hit else None, bone), book)
    m = det.metrics()
    assert m[0]["hit_ratio"] == pytest.approx(40 / 60)
    assert found == [] and det.scores(7)["headshot_ratio"] > 1.0
    det.reset_player(7)
    assert det.scores(7) == {} and 7 not in det.metrics()


# --- batched evaluation: same detections as a sample-by-sample analysis --------------------------


class _Reference:
    """The sample-by-sample definition of AimStats (flags per command, window totals, emission),
    written plainly and slowly, to check the batched detector against."""

    def __init__(self, cfg: AimStatsConfig) -> None:
        self.cfg = cfg
        self.rows: dict[int, list[tuple[bool, bool, float, bool, bool]]] = {}
        self.micro: dict[int, list[float]] = {}
        self.state: dict[int, dict] = {}
        self.skipped: dict[str, int] = {}

    def _st(self, p: int) -> dict:
        return self.state.setdefault(p, {"prev": None, "pv": None, "pstep": 0.0, "since": 1 << 30, "emit": -math.inf})

    def brk(self, p: int) -> None:
        st = self._st(p)
        st["prev"], st["pv"], st["since"] = None, None, 1 << 30

    def on_aim(self, s: AimSample, book: SkipBook) -> list[tuple[int, int, float, str]]:
        cfg, st = self.cfg, self._st(s.player)
        reason = book.player_reason(s.player)
        if reason is not None:
            self.skipped[reason.value] = self.skipped.get(reason.value, 0) + 1
            self.brk(s.player)
            return []
        prev, vis = st["prev"], s.target is not None
        snap = track = on = False
        jit = math.nan
        if prev is not None and 0.0 <= s.time_s - prev.time_s <= cfg.max_gap_s:
            to_frame = cfg.frame_s / max(s.time_s - prev.time_s, cfg.min_dt_s)
            step = angular_step_deg(prev.yaw_deg, prev.pitch_deg, s.yaw_deg, s.pitch_deg)
            speed = step * to_frame
            cos_p = math.cos(math.radians(0.5 * (prev.pitch_deg + s.pitch_deg)))
            vel = (((s.yaw_deg - prev.yaw_deg + 180.0) % 360.0 - 180.0) * cos_p * to_frame,
                   (s.pitch_deg - prev.pitch_deg) * to_frame)
            snap = vis and speed >= cfg.snap_deg_per_frame and s.target_angle_deg <= cfg.snap_on_target_deg
            if speed < cfg.flick_deg_per_frame:
                if st["pv"] is not None and max(step, st["pstep"]) > cfg.still_deg:
                    jit = math.hypot(vel[0] - st["pv"][0], vel[1] - st["pv"][1])
                if (vis and prev.target == s.target and prev.target_angle_deg <= cfg.engage_cone_deg
                        and speed >= cfg.track_min_deg_per_frame):
                    track = True
                    cone = max(cfg.min_cone_deg, math.degrees(math.atan2(cfg.target_radius_m, max(s.target_distance_m, 1e-3))))
                    on = s.target_angle_deg <= cone
            if st["since"] < cfg.micro_after_shot_samples and cfg.still_deg < speed < cfg.micro_max_deg_per_frame:
                self.micro.setdefault(s.player, []).append(speed)
            st["pv"] = vel if speed < cfg.flick_deg_per_frame else None
            st["pstep"] = step
        else:
            st["pv"] = None
        st["since"] = 0 if s.buttons & Buttons.FIRE else st["since"] + 1
        st["prev"] = s
        rows = self.rows.setdefault(s.player, [])
        rows.append((vis, snap, jit, track, on))
        r = self.result(s.player)
        if r["insufficient"] or s.time_s - st["emit"] < cfg.cooldown_s or r["score"] <= cfg.suspicious_score:
            return []
        st["emit"] = s.time_s
        return [(s.player, s.tick, s.time_s, f"AimStats-{r['score']:.2f}@{r['samples']}")]

    def result(self, p: int) -> dict:
        cfg = self.cfg
        window = self.rows.get(p, [])[-cfg.window_samples :]
        vis = sum(r[0] for r in window)
        snaps = sum(r[1] for r in window)
        jits = [r[2] for r in window if not math.isnan(r[2])]
        tracks = sum(r[3] for r in window)
        ons = sum(r[4] for r in window)
        rate = snaps / vis if vis else 0.0
        jit = math.fsum(jits) / len(jits) if len(jits) >= cfg.min_jitter_samples and jits else math.nan
        eff = ons / tracks if tracks >= cfg.min_tracking_samples and tracks else math.nan
        insufficient = len(window) < cfg.min_samples
        parts = (0.0, 0.0, 0.0) if insufficient else score(rate, jit, eff, cfg)
        micro = self.micro.get(p, [])[-cfg.micro_ring :]
        return {"samples": len(window), "insufficient": insufficient, "score": sum(parts), "snaps": snaps,
                "visible": vis, "jitter": jit, "n_jitter": len(jits), "tracks": tracks, "eff": eff,
                "micro_n": len(micro), "micro_mean": math.fsum(micro) / len(micro) if micro else math.nan}


def mixed_stream(seed: int, n: int, players: int) -> list[tuple[str, object]]:
    """Aimbot, smooth-bot, shaky and idle spells of several players, interleaved, with shots, gaps,
    bunched and out-of-order commands, respawns, lag spells and a few malformed angles."""
    rng = np.random.default_rng(seed)
    st = {p: {"t": 0.0, "yaw": 0.0, "pitch": 0.0, "mode": int(rng.integers(4))} for p in range(players)}
    out: list[tuple[str, object]] = []
    for i in range(n):
        p = int(rng.integers(players))
        s = st[p]
        r = rng.random()
        if r < 0.004:
            out.append(("spawn", SpawnEvent(player=p, tick=i, time_s=s["t"])))
            continue
        if r < 0.009:
            out.append(("conn", (p, float(rng.choice([60.0, 60.0, 900.0])))))
            continue
        if r < 0.012:
            out.append(("result", p))
            continue
        if r < 0.03:
            s["mode"] = int(rng.integers(4))
        s["t"] += float(rng.choice([DT, DT, DT, DT, 0.0, 0.05, 0.4, -0.01], p=[0.8, 0.05, 0.05, 0.02, 0.03, 0.02, 0.02, 0.01]))
        if s["mode"] == 0:  # aimbot
            s["yaw"] += float(rng.choice([-60.0, 60.0])) if rng.random() < 0.1 else 0.3
            target, angle = int(rng.integers(2, 4)), float(rng.uniform(0.0, 0.4))
        elif s["mode"] == 1:  # smooth bot
            s["yaw"] += 0.25
            target, angle = 2, 0.1
        elif s["mode"] == 2:  # shaky hand
            s["yaw"] += float(rng.normal(0.3, 0.8))
            s["pitch"] = float(np.clip(s["pitch"] + rng.normal(0.0, 0.3), -89.0, 89.0))
            target, angle = (2 if rng.random() < 0.8 else None), float(abs(rng.normal(2.0, 3.0)))
        else:  # idle
            target, angle = None, float(rng.uniform(0.0, 20.0))
        yaw = (s["yaw"] + 180.0) % 360.0 - 180.0
        if rng.random() < 0.002:
            yaw = math.nan
        buttons = int(Buttons.FIRE) if rng.random() < 0.08 else 0
        out.append(("aim", AimSample(
            player=p, tick=i, time_s=s["t"], seq=i, yaw_deg=yaw, pitch_deg=s["pitch"], recoil_pitch_deg=0.0,
            recoil_yaw_deg=0.0, server_punch_pitch_deg=0.0, server_punch_yaw_deg=0.0, buttons=buttons, weapon=2,
            weapon_switch=0, stance=0, on_ground=True, speed_m_s=0.0, target=target, target_angle_deg=angle,
            target_distance_m=float(rng.uniform(1.0, 40.0)))))
    return out


def run_both(cfg: AimStatsConfig, events: list[tuple[str, object]]) -> tuple[list, list, AimStatsDetector, _Reference]:
    det, ref = AimStatsDetector(cfg), _Reference(cfg)
    book = good_book(*range(8))
    got: list[Detection] = []
    want: list[tuple[int, int, float, str]] = []
    for kind, e in events:
        if kind == "aim":
            got.extend(det.on_aim(e, book))  # type: ignore[arg-type]
            want.extend(ref.on_aim(e, book))  # type: ignore[arg-type]
        elif kind == "spawn":
            det.on_spawn(e, book)  # type: ignore[arg-type]
            if e.player in ref.state:  # type: ignore[attr-defined]
                ref.brk(e.player)  # type: ignore[attr-defined]
        elif kind == "conn":
            p, rtt = e  # type: ignore[misc]
            book.record(ConnectionSample(player=p, time_s=0.0, rtt_ms=rtt, jitter_ms=1.0, loss=0.0, since_update_s=0.0))
        else:
            det.result(e)  # type: ignore[arg-type]  # evaluates pending samples mid-batch
    got.extend(det.flush())
    return got, want, det, ref


def assert_same_analysis(det: AimStatsDetector, ref: _Reference, players: int) -> None:
    for p in range(players):
        r, w = det.result(p), ref.result(p)
        assert (r.samples, r.insufficient, r.snaps, r.visible, r.jitter_samples, r.tracking_samples) == (
            w["samples"], w["insufficient"], w["snaps"], w["visible"], w["n_jitter"], w["tracks"])
        assert r.score == pytest.approx(w["score"], abs=1e-9)
        assert r.jitter_deg == pytest.approx(w["jitter"], abs=1e-9, nan_ok=True)  # stored to 2**-30 deg
        assert r.tracking_efficiency == pytest.approx(w["eff"], nan_ok=True)
        assert r.micro_mean_deg == pytest.approx(w["micro_mean"], nan_ok=True)
    assert det.skip_counts() == ref.skipped


@pytest.mark.parametrize("batch", [1, 7, 64, 256])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batched_analysis_matches_sample_by_sample(seed: int, batch: int) -> None:
    # A low threshold and short cooldown make many detections to compare.
    cfg = AimStatsConfig(window_samples=200, min_samples=50, cooldown_s=1.0, suspicious_score=0.3,
                         micro_ring=16, batch_samples=batch)
    events = mixed_stream(seed, 4000, 3)
    got, want, det, ref = run_both(cfg, events)
    assert len(want) > 10
    # Same detections (same sample, same figures); delivery order may differ across players.
    assert sorted((d.player, d.tick, d.time_s, d.reason) for d in got) == sorted(want)
    assert_same_analysis(det, ref, 3)


def test_batched_analysis_matches_with_default_tolerances_and_a_tiny_window() -> None:
    events = mixed_stream(7, 6000, 2)
    for cfg in (AimStatsConfig(), AimStatsConfig(window_samples=8, min_samples=2, cooldown_s=0.2, micro_ring=3,
                                                 micro_after_shot_samples=2, batch_samples=100)):
        got, want, det, ref = run_both(cfg, events)
        assert sorted((d.player, d.tick, d.time_s, d.reason) for d in got) == sorted(want)
        assert_same_analysis(det, ref, 2)


def test_detection_keeps_its_sample_and_is_delivered_at_the_batch_end() -> None:
    det = AimStatsDetector()  # K = 256
    book = good_book(1)
    returned_at = [i for i, s in enumerate(aimbot_stream(640)) for _ in det.on_aim(s, book)]
    k = AimStatsConfig().batch_samples
    first_batch = k - (1 * 97) % k  # player 1's staggered first batch
    assert returned_at == [first_batch - 1]
    det1 = AimStatsDetector(AimStatsConfig(batch_samples=1))
    found = feed(det1, good_book(1), aimbot_stream(640))
    # K = 1 delivers on the very sample; any K reports the same sample and figures.
    assert [d.tick for d in found] == [AimStatsConfig().min_samples - 1]
    again = feed(AimStatsDetector(), good_book(1), aimbot_stream(640))
    assert [(d.tick, d.time_s, d.value, d.evidence) for d in again] == [(d.tick, d.time_s, d.value, d.evidence) for d in found]


def test_players_who_join_together_fill_their_batches_on_different_commands() -> None:
    """The first batch is cut short by a slot-dependent amount, every later one is K long: 64
    players joining on the same tick never analyse on the same command, and what each is found
    to do is what an unstaggered (K = 1) analysis finds."""
    k = AimStatsConfig().batch_samples
    det = AimStatsDetector()
    book = good_book(*range(64))
    analysed: dict[int, list[int]] = {p: [] for p in range(64)}
    for i in range(3 * k):
        for p in range(64):
            det.on_aim(aim(i, 0.3 * i, player=p), book)
            if det._players[p].m == 0:
                analysed[p].append(i)
    firsts = [analysed[p][0] for p in range(64)]
    assert len(set(firsts)) == 64 and max(firsts) == k - 1
    assert all(b - a == k for p in range(64) for a, b in zip(analysed[p], analysed[p][1:]))
    stream = aimbot_stream(640)
    for p in (0, 5, 63):
        moved = [dataclasses.replace(s, player=p) for s in stream]
        got = feed(AimStatsDetector(), good_book(p), moved)
        want = feed(AimStatsDetector(AimStatsConfig(batch_samples=1)), good_book(p), moved)
        assert [(d.tick, d.value, d.evidence) for d in got] == [(d.tick, d.value, d.evidence) for d in want] != []


def test_result_evaluates_pending_samples_and_the_next_aim_delivers() -> None:
    det = AimStatsDetector()
    book = good_book(1)
    stream = aimbot_stream(200)
    assert feed(det, book, stream[:150]) == []  # not a full batch yet
    assert det.result(1).suspicious
    found = det.on_aim(stream[150], book)
    assert [d.tick for d in found] == [99]
    assert feed(det, book, stream[151:]) == [] and det.flush() == []


def test_flush_returns_the_tail_of_a_stream() -> None:
    det = AimStatsDetector()
    book = good_book(1, 2)
    assert feed(det, book, aimbot_stream(150)) == []
    tail = det.flush()
    assert [(d.player, d.tick) for d in tail] == [(1, 99)]
    assert det.flush() == [] and det.flush(5) == []


def test_skip_decision_follows_the_latest_connection_sample() -> None:
    det = AimStatsDetector(AimStatsConfig(batch_samples=16))
    book = good_book(1)
    samples = aimbot_stream(90)
    feed(det, book, samples[:30])
    book.record(ConnectionSample(player=1, time_s=0.5, rtt_ms=900.0, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    feed(det, book, samples[30:40])
    book.record(ConnectionSample(player=1, time_s=0.6, rtt_ms=60.0, jitter_ms=2.0, loss=0.3, since_update_s=0.0))
    feed(det, book, samples[40:50])
    other = good_book(1)  # another book (and config) is asked afresh
    feed(det, other, samples[50:70])
    strict = SkipBook(SkipConfig(exempt_players=frozenset({1})))
    strict.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=60.0, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    feed(det, strict, samples[70:80])
    other.config = SkipConfig(max_ping_ms=30.0)  # same book and sample, new config
    feed(det, other, samples[80:90])
    assert det.skip_counts() == {"high_ping": 20, "high_loss": 10, "exempt": 10}
    assert det.result(1).samples == 50


def test_state_stays_bounded() -> None:
    cfg = AimStatsConfig(window_samples=200, min_samples=100, micro_ring=8, batch_samples=64)
    det = AimStatsDetector(cfg)
    book = good_book(1)
    stream = honest_stream(5000, np.random.default_rng(1))
    for s in stream:
        det.on_aim(s, book)
        w = det._players[1]
        assert w.m < cfg.batch_samples
        assert w.hist.shape[1] <= cfg.window_samples + 2 * cfg.batch_samples
        assert w.micro.size <= cfg.micro_ring + 2 * cfg.batch_samples
    assert det.result(1).samples == 200


def test_malformed_angles_warn_nothing_and_measure_nothing() -> None:
    import warnings

    det = AimStatsDetector(AimStatsConfig(batch_samples=8))
    book = good_book(1)
    stream = aimbot_stream(40)
    stream[5] = aim(5, math.inf)
    stream[6] = aim(6, math.nan, pitch=math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        feed(det, book, stream)
        r = det.result(1)
    assert r.samples == 40 and not math.isnan(r.snap_rate)


@pytest.mark.parametrize("batch", [0, 4097])
def test_batch_size_is_validated(batch: int) -> None:
    with pytest.raises(ValueError):
        AimStatsConfig(batch_samples=batch)


def test_every_detector_warms_its_kernels_whatever_its_window() -> None:
    """Each detector runs the throwaway warm-up analysis with its own configuration, after the
    whole configuration is read (a small window needs the snap test: once crashed on warming)."""
    det = AimStatsDetector(AimStatsConfig(window_samples=8, min_samples=2))
    assert det.result(1).samples == 0
