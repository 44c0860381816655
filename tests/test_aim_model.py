"""The honest aim model behaves like the motor-control literature says a human hand does."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from bots.aim import (
    MIN_JERK_PEAK_FACTOR,
    AimController,
    AimPhase,
    AimPoint,
    AimTarget,
    RecoilCompensator,
    SubMovement,
    Tremor,
    TriggerControl,
    aim_point_world,
    angular_size_deg,
    body_height_m,
    direction_angles,
    fitts_time_s,
    min_jerk,
    min_jerk_rate,
    raised_aim_points,
    sample_aim_point,
    sample_reaction_s,
)
from bots.skill import PRESETS, Skill, SkillLevel, preset, sample_skill
from physics.weapon_state import WeaponState
from world.hitbox import BONE_IDS, Bone, ray_capsule, world_capsules
from world.weapons import WEAPONS, WeaponId

DT = 1.0 / 64.0
EYE = (0.0, 0.0, 1.64)


def quiet(skill: Skill, **changes: float) -> Skill:
    """``skill`` without tremor, drift, motor noise or mouse quantisation (for exact kinematics)."""
    base = {"tremor_amp_deg": 0.0, "drift_sd_deg": 0.0, "motor_noise_deg": 0.0, "mouse_count_deg": 1e-6}
    base.update(changes)
    return dataclasses.replace(skill, **base)


def target_at(yaw_deg: float, pitch_deg: float = 0.0, distance_m: float = 10.0, slot: int = 1) -> AimTarget:
    """A target whose aim point lies in direction (yaw, pitch) from EYE at ``distance_m``."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    point = (EYE[0] + distance_m * math.cos(p) * math.cos(y), EYE[1] + distance_m * math.cos(p) * math.sin(y),
             EYE[2] + distance_m * math.sin(p))
    return AimTarget(slot=slot, point_m=point, eye_m=EYE, width_deg=angular_size_deg(0.45, distance_m))


def test_reaction_time_is_lognormal_with_the_configured_median() -> None:
    rng = np.random.default_rng(1)
    sk = preset("average")
    rts = np.array([sample_reaction_s(rng, sk) for _ in range(20000)])
    assert abs(np.median(rts) - 0.220) < 0.005
    assert rts.min() >= sk.reaction_min_s
    # Log-space spread as configured (the floor barely truncates at sigma 0.25).
    assert abs(np.std(np.log(rts)) - sk.reaction_sigma) < 0.02
    # Right-skewed like real reaction times.
    assert np.mean(rts) > np.median(rts)


@pytest.mark.parametrize("level", list(SkillLevel))
def test_reaction_medians_order_by_skill(level: SkillLevel) -> None:
    sk = preset(level)
    assert 0.15 <= sk.reaction_median_s <= 0.30


def test_fitts_law_is_linear_in_the_index_of_difficulty() -> None:
    a, b = 0.15, 0.16
    ids = []
    times = []
    for d, w in [(5.0, 2.0), (10.0, 2.0), (30.0, 2.0), (60.0, 1.0), (90.0, 0.5)]:
        ids.append(math.log2(d / w + 1.0))
        times.append(fitts_time_s(d, w, a, b))
    slope, intercept = np.polyfit(ids, times, 1)
    assert slope == pytest.approx(b)
    assert intercept == pytest.approx(a)


def test_planned_flicks_follow_fitts_law() -> None:
    """The controller's primary movements take a + b log2(D/W + 1) (D from the hand to its goal)."""
    sk = quiet(preset("average"), min_flick_s=0.01)
    rng = np.random.default_rng(2)
    ids, durations = [], []
    for i, dist in enumerate([4.0, 8.0, 16.0, 32.0, 64.0, 120.0]):
        aim = AimController(sk)
        aim.reset(0.0, 0.0)
        tgt = target_at(dist, 0.0, 10.0, slot=i)
        t = 0.0
        while aim.flick is None:
            aim.step(t, DT, tgt, rng)
            t += DT
        ids.append(math.log2(dist / tgt.width_deg + 1.0))
        durations.append(aim.flick.duration_s)
    slope, intercept = np.polyfit(ids, durations, 1)
    assert slope == pytest.approx(sk.fitts_b_s_per_bit, rel=0.02)
    assert intercept == pytest.approx(sk.fitts_a_s, abs=0.01)
    assert all(np.diff(durations) > 0)


def test_min_jerk_profile_has_zero_velocity_and_acceleration_at_both_ends() -> None:
    assert min_jerk(0.0) == 0.0 and min_jerk(1.0) == 1.0
    h = 1e-4
    for tau in (0.0, 1.0):
        vel = (min_jerk(tau + h) - min_jerk(tau - h)) / (2 * h)
        acc = (min_jerk(tau + h) - 2 * min_jerk(tau) + min_jerk(tau - h)) / (h * h)
        assert abs(vel) < 1e-6
        assert abs(acc) < 1e-2
    tau = np.linspace(0.0, 1.0, 10001)
    assert np.max(min_jerk_rate(tau)) == pytest.approx(MIN_JERK_PEAK_FACTOR, rel=1e-6)
    assert np.all(np.diff(min_jerk(tau)) >= 0.0)


def test_sub_movement_peak_speed_is_1_875_d_over_t() -> None:
    move = SubMovement(start_s=1.0, duration_s=0.4, dyaw_deg=30.0, dpitch_deg=-40.0)
    ts = np.linspace(1.0, 1.4, 4001)
    pos = np.array([move.offset(t) for t in ts])
    speed = np.hypot(*np.gradient(pos, ts, axis=0).T)
    assert np.max(speed) == pytest.approx(1.875 * 50.0 / 0.4, rel=1e-3)
    assert move.peak_speed_deg_s() == pytest.approx(1.875 * 50.0 / 0.4)
    assert speed[0] < 1e-3 and speed[-1] < 1e-3
    assert move.offset(1.4) == pytest.approx((30.0, -40.0))


def _flick_trial(seed: int, sk: Skill, dist: float = 30.0) -> tuple[float, float, int, float]:
    """(primary endpoint along the movement / D, error after the primary (deg), corrections,
    error once tracking (deg)) for one flick at a static target."""
    rng = np.random.default_rng(seed)
    aim = AimController(sk)
    aim.reset(0.0, 0.0)
    tgt = target_at(dist, 0.0, 20.0)
    t = 0.0
    primary_err = math.nan
    ratio = math.nan
    while aim.phase is not AimPhase.TRACK and t < 3.0:
        out = aim.step(t, DT, tgt, rng)
        if aim.flick is not None and math.isnan(ratio) and t >= aim.flick.end_s:
            ratio = aim.flick.dyaw_deg / dist
            primary_err = abs(aim.hand(t)[0] - dist)
        t += DT
    final = abs(aim.hand(t)[0] - dist)
    assert out.target == 1
    return ratio, primary_err, aim.corrections, final


def test_flicks_undershoot_or_overshoot_then_correct() -> None:
    sk = quiet(preset("average"))
    trials = [_flick_trial(seed, sk) for seed in range(300)]
    ratio = np.array([t[0] for t in trials])
    primary = np.array([t[1] for t in trials])
    corrections = np.array([t[2] for t in trials])
    final = np.array([t[3] for t in trials])
    # Primary endpoints scatter around 1 - undershoot with the configured amplitude sd.
    assert np.mean(ratio) == pytest.approx(1.0 - sk.undershoot, abs=0.015)
    assert np.std(ratio) == pytest.approx(sk.amplitude_sd, rel=0.2)
    assert np.mean(ratio < 1.0) > 0.6 and np.mean(ratio > 1.0) > 0.1  # mostly short, some long
    # One or two corrections bring the hand much closer.
    assert np.all(corrections <= sk.max_corrections)
    assert np.mean(corrections >= 1) > 0.8
    assert np.median(final) < 0.4 * np.median(primary)
    width = angular_size_deg(0.45, 20.0)
    assert np.median(final) < 0.5 * width


def test_flick_peak_speed_is_human() -> None:
    """A 120 deg turn onto a target: peak speed comes from the min-jerk profile and stays far below
    the 3000 deg/s snap of an aimbot."""
    sk = preset("pro")
    rng = np.random.default_rng(3)
    aim = AimController(sk)
    aim.reset(0.0, 0.0)
    tgt = target_at(120.0, 0.0, 10.0)
    t, prev, peak = 0.0, 0.0, 0.0
    for _ in range(200):
        out = aim.step(t, DT, tgt, rng)
        step = abs((out.yaw_deg - prev + 180.0) % 360.0 - 180.0)
        peak = max(peak, step / DT)
        prev = out.yaw_deg
        t += DT
    assert aim.flick is not None
    assert peak <= 1.05 * aim.flick.peak_speed_deg_s() + 0.5 / DT
    assert peak < 1500.0


def test_tremor_amplitude_and_frequency() -> None:
    sk = dataclasses.replace(preset("average"), drift_sd_deg=0.0, motor_noise_deg=0.0)
    tremor = Tremor(sk)
    rng = np.random.default_rng(4)
    xs = np.array([tremor.step(DT, rng) for _ in range(64 * 30)])
    assert np.max(np.abs(xs[:, 0])) <= tremor.bound_deg + 1e-9
    amp = np.sqrt(2.0) * np.std(xs[:, 0])
    assert 0.5 * sk.tremor_amp_deg < amp < 1.5 * sk.tremor_amp_deg
    spectrum = np.abs(np.fft.rfft(xs[:, 0])) ** 2
    freqs = np.fft.rfftfreq(len(xs), DT)
    peak = freqs[np.argmax(spectrum[1:]) + 1]
    assert 8.0 <= peak <= 12.0


def test_motor_noise_gives_frame_to_frame_jitter_in_the_human_band() -> None:
    """The server-authoritative article's human range of frame-to-frame velocity change is
    0.3-3 deg per 60 fps frame; a still hand of every preset lands in it (aimstats' definition:
    the change of angular velocity between consecutive frames)."""
    for level in ("low", "average", "high", "pro"):
        tremor = Tremor(preset(level))
        rng = np.random.default_rng(17)
        xs = np.array([tremor.step(DT, rng) for _ in range(64 * 20)])
        vel = np.diff(xs, axis=0) * (1.0 / 60.0) / DT  # deg per 60 fps frame
        jitter = np.mean(np.hypot(*np.diff(vel, axis=0).T))
        assert 0.3 <= jitter <= 3.0, level


def test_tremor_with_drift_stays_within_its_bound() -> None:
    sk = preset("low")
    tremor = Tremor(sk)
    rng = np.random.default_rng(5)
    xs = np.array([tremor.step(DT, rng) for _ in range(64 * 60)])
    assert np.all(np.abs(xs) <= tremor.bound_deg + 1e-9)
    # The drift is slow: it moves the mean of a second-long window, the tremor does not.
    windows = xs[: 64 * 60, 0].reshape(60, 64).mean(axis=1)
    assert np.std(windows) > 0.3 * sk.drift_sd_deg


def test_pursuit_lags_a_moving_target_by_a_roughly_steady_error() -> None:
    """A target crossing at constant speed: the view trails it (error > 0 in the lag direction),
    with an error that stays about the same from second to second."""
    sk = quiet(preset("average"))
    rng = np.random.default_rng(6)
    aim = AimController(sk)
    aim.reset(0.0, 0.0)
    speed_deg_s = 15.0
    t = 0.0
    errors = []
    while t < 6.5:
        yaw = 5.0 + speed_deg_s * t
        out = aim.step(t, DT, target_at(yaw, 0.0, 15.0), rng)
        if t >= 2.5:
            assert out.phase is AimPhase.TRACK
            errors.append(yaw - out.yaw_deg)
        t += DT
    err = np.array(errors[: 4 * 64])
    per_second = err.reshape(4, -1).mean(axis=1)
    assert np.all(per_second > 0.2)  # trails the target
    # Steady state of delayed, partly predictive pursuit with velocity gain g and position gain k:
    # error = speed x (lag x (1 - prediction) + (1 - g) / k).
    expected = speed_deg_s * (sk.pursuit_lag_s * (1.0 - sk.pursuit_prediction)
                              + (1.0 - sk.pursuit_gain) / sk.pursuit_position_gain_hz)
    assert 0.6 * expected < err.mean() < 1.6 * expected
    assert np.max(per_second) - np.min(per_second) < 0.3 * err.mean()
    assert np.max(np.abs(err)) < 4.0  # still tracking, not lost


def test_static_target_tracking_has_no_lag() -> None:
    sk = quiet(preset("average"))
    rng = np.random.default_rng(7)
    aim = AimController(sk)
    aim.reset(0.0, 0.0)
    t = 0.0
    while t < 3.0:
        out = aim.step(t, DT, target_at(10.0, -3.0, 15.0), rng)
        t += DT
    assert abs(out.yaw_deg - 10.0) < 0.3 and abs(out.pitch_deg + 3.0) < 0.3


def test_recoil_compensation_is_partial_and_late() -> None:
    sk = dataclasses.replace(preset("average"), recoil_noise=0.0)
    comp = RecoilCompensator(sk)
    comp.new_spray(np.random.default_rng(0))
    # A punch that jumps to 3 deg up and 0.5 deg right and stays.
    first = comp.step(DT, 3.0, 0.5)
    assert abs(first[1]) < 0.5 * sk.recoil_control * 3.0  # late: the hand has not caught up yet
    for _ in range(64):
        yaw, pitch = comp.step(DT, 3.0, 0.5)
    assert pitch == pytest.approx(-sk.recoil_control * 3.0, rel=0.02)  # pulls down a fraction
    assert yaw == pytest.approx(sk.recoil_control * 0.5, rel=0.02)
    assert 0.0 < -pitch < 3.0


def test_spray_with_compensation_leaves_a_residual_climb() -> None:
    """Spraying a static target with the real weapon mechanics: the effective aim (view + punch)
    climbs less than the uncompensated punch, but still climbs."""
    spec = WEAPONS[WeaponId.ASSAULT_RIFLE]
    results = {}
    for control in (0.0, preset("average").recoil_control):
        sk = quiet(preset("average"), recoil_control=control, recoil_noise=0.0)
        rng = np.random.default_rng(8)
        aim = AimController(sk)
        aim.reset(10.0, 0.0)
        ws = WeaponState(1)
        ws.spawn(0, [int(spec.id)], 0.0)
        t = 0.0
        tgt = target_at(10.0, 0.0, 15.0)
        while t < 1.5:  # settle on the target
            aim.step(t, DT, tgt, rng)
            t += DT
        aim.recoil.new_spray(rng)
        shots = 0
        eff = []
        while shots < 12:
            ws.advance(t)
            out = aim.step(t, DT, tgt, rng, punch=(float(ws.punch_pitch_deg[0]), float(ws.punch_yaw_deg[0])))
            if ws.try_fire(0, int(spec.id), t).accepted:
                shots += 1
                eff.append(out.pitch_deg + float(ws.punch_pitch_deg[0]))
            t += DT
        results[control] = eff[-1]
    assert results[0.0] > 3.0
    assert 0.0 < results[preset("average").recoil_control] < 0.8 * results[0.0]


def test_trigger_never_fires_faster_than_the_weapon() -> None:
    rng = np.random.default_rng(9)
    for wid, spec in WEAPONS.items():
        trig = TriggerControl(preset("pro"))
        aim = AimController(quiet(preset("pro")))
        aim.reset(0.0, 0.0)
        t = 0.0
        times = []
        tgt = target_at(0.5, 0.0, 8.0)
        while t < 8.0:
            out = aim.step(t, DT, tgt, rng)
            if trig.decide(t, spec, 30, False, out, 8.0, rng):
                times.append(t)
            t += DT
        assert len(times) > 3, wid
        assert np.min(np.diff(times)) >= spec.fire_interval_s, wid


def test_trigger_waits_for_the_aim_and_for_ammo() -> None:
    rng = np.random.default_rng(10)
    spec = WEAPONS[WeaponId.RIFLE]
    trig = TriggerControl(dataclasses.replace(preset("average"), premature_prob=0.0))
    aim = AimController(quiet(preset("average")))
    aim.reset(0.0, 0.0)
    t = 0.0
    tgt = target_at(40.0, 0.0, 10.0)
    fired_during = set()
    while t < 3.0:
        out = aim.step(t, DT, tgt, rng)
        if trig.decide(t, spec, 5, False, out, 10.0, rng):
            fired_during.add(out.phase)
            assert out.perceived_error_deg <= trig.skill.fire_tolerance * 0.5 * out.width_deg * 2.5
        t += DT
    assert AimPhase.REACT not in fired_during and AimPhase.IDLE not in fired_during
    assert fired_during
    assert not trig.decide(t, spec, 0, False, out, 10.0, rng)
    assert not trig.decide(t + 5.0, spec, 5, True, out, 10.0, rng)


def test_aim_points_produce_a_vertical_spread_around_chest_and_head() -> None:
    rng = np.random.default_rng(11)
    sk = preset("average")
    heights = np.array([body_height_m(sample_aim_point(rng, sk).u, False)[1] for _ in range(5000)])
    head_z = body_height_m(1.0, False)[1]
    assert 1.6 < head_z < 1.75
    # Mostly torso height, some head line, not the exact head centre.
    assert 0.9 < np.median(heights) < 1.45
    assert 0.1 < np.mean(np.abs(heights - head_z) < 0.12) < 0.5
    crouch_head = body_height_m(1.0, True)[1]
    assert 0.95 < crouch_head < 1.1


def test_aim_point_world_offsets_sideways_across_the_line_of_sight() -> None:
    eye = (0.0, 0.0, 1.64)
    p = aim_point_world((10.0, 0.0, 0.0), 180.0, False, AimPoint(0.5, 0.2), eye)
    assert p[1] == pytest.approx(-0.2)  # to the shooter's right (looking along +x, right is -y)
    yaw, pitch, dist = direction_angles(eye, p)
    assert dist == pytest.approx(math.dist(eye, p))
    assert yaw == pytest.approx(math.degrees(math.atan2(p[1], p[0])))
    assert pitch < 0.0  # the upper torso of a standing body is below a standing eye


def test_sample_skill_varies_per_bot_and_is_deterministic() -> None:
    a = sample_skill(np.random.default_rng(12), "high")
    b = sample_skill(np.random.default_rng(12), "high")
    c = sample_skill(np.random.default_rng(13), "high")
    assert a == b
    assert a != c
    assert 90.0 <= a.fov_deg <= 106.0
    assert 8.5 <= a.tremor_freq_hz <= 11.5
    for f in ("reaction_median_s", "fitts_b_s_per_bit", "tremor_amp_deg"):
        ratio = getattr(a, f) / getattr(PRESETS[SkillLevel.HIGH], f)
        assert 0.5 < ratio < 2.0
    assert a.reaction_min_s == PRESETS[SkillLevel.HIGH].reaction_min_s


def test_presets_order_by_skill() -> None:
    order = [preset(level) for level in ("low", "average", "high", "pro")]
    for worse, better in itertools.pairwise(order):
        assert better.reaction_median_s < worse.reaction_median_s
        assert better.fitts_b_s_per_bit < worse.fitts_b_s_per_bit
        assert better.amplitude_sd < worse.amplitude_sd
        assert better.tremor_amp_deg < worse.tremor_amp_deg
        assert better.pursuit_lag_s < worse.pursuit_lag_s
        assert better.recoil_control > worse.recoil_control
    assert 0.3 <= order[0].recoil_control and order[-1].recoil_control <= 0.8


def test_controller_is_deterministic_for_a_seed() -> None:
    def run(seed: int) -> list[tuple[float, float]]:
        rng = np.random.default_rng(seed)
        aim = AimController(preset("average"))
        aim.reset(0.0, 0.0)
        out = []
        for i in range(200):
            o = aim.step(i * DT, DT, target_at(30.0 + 0.1 * i, 2.0, 12.0), rng)
            out.append((o.yaw_deg, o.pitch_deg))
        return out

    assert run(14) == run(14)
    assert run(14) != run(15)


def test_view_moves_in_whole_mouse_counts() -> None:
    sk = preset("average")
    rng = np.random.default_rng(16)
    aim = AimController(sk)
    aim.reset(0.0, 0.0)
    prev = (0.0, 0.0)
    for i in range(300):
        o = aim.step(i * DT, DT, target_at(25.0, 1.0, 12.0), rng)
        for now, before in ((o.yaw_deg, prev[0]), (o.pitch_deg, prev[1])):
            counts = ((now - before + 180.0) % 360.0 - 180.0) / sk.mouse_count_deg
            assert abs(counts - round(counts)) < 1e-6
        prev = (o.yaw_deg, o.pitch_deg)


def test_target_memory_interpolates_between_samples() -> None:
    """The remembered aim point at a past time: the oldest sample before the memory starts, the
    newest after it ends, exact at a sample and linear between two (here 64 uneven samples)."""
    aim = AimController(preset(SkillLevel.AVERAGE))
    times = np.cumsum(np.random.default_rng(4).uniform(0.005, 0.03, 80)).tolist()
    for i, t in enumerate(times):
        aim._push(t, AimTarget(slot=1, point_m=(float(i), 2.0 * i, -0.5 * i), eye_m=(0.0, 0.0, 1.6), width_deg=2.0))
    kept = times[-64:]  # the buffer keeps the newest 64
    first = len(times) - 64
    assert aim._point_at(kept[0] - 1.0) == (float(first), 2.0 * first, -0.5 * first)
    assert aim._point_at(kept[-1] + 1.0) == (79.0, 158.0, -39.5)
    for j in (0, 10, 63):
        assert aim._point_at(kept[j]) == (float(first + j), 2.0 * (first + j), -0.5 * (first + j))
    for j in (0, 31, 62):
        w = 0.25
        x = aim._point_at(kept[j] + w * (kept[j + 1] - kept[j]))
        np.testing.assert_allclose(x, np.array([1.0, 2.0, -0.5]) * (first + j + w), rtol=1e-12)


@pytest.mark.parametrize("crouching", [False, True])
@pytest.mark.parametrize(("u", "bone"), [(0.0, Bone.LOWER_TORSO), (0.5, Bone.UPPER_TORSO), (1.0, Bone.HEAD)])
def test_body_coordinate_lines_hit_their_bone_in_both_stances(crouching: bool, u: float, bone: Bone) -> None:
    """Aiming at the belt (u = 0), chest (0.5) or head (1) line of a body facing a standing shooter
    10 m away hits that bone, standing or crouched, give or take a few cm sideways and a turn of
    the body: the lines sit where the bone shows, not at its capsule's centre (the chest centre
    is behind the forearms)."""
    eye = np.array([-10.0, 0.0, 1.64])
    hits = []
    for yaw in (150.0, 165.0, 180.0, 195.0, 210.0):
        a, b, r = world_capsules(np.zeros((1, 3)), np.array([yaw]), np.array([int(crouching)]))
        for lateral in np.linspace(-0.03, 0.03, 7):
            p = np.asarray(aim_point_world((0.0, 0.0, 0.0), yaw, crouching, AimPoint(u, float(lateral)), eye))
            d = (p - eye) / np.linalg.norm(p - eye)
            t = ray_capsule(eye[None, None, :], d[None, None, :], a, b, r)[0]
            hits.append(int(BONE_IDS[int(np.argmin(t))]) if np.isfinite(t.min()) else 0)
    assert np.mean(np.asarray(hits) == int(bone)) >= 0.95


def test_raised_aim_points_climb_in_small_steps_to_the_head() -> None:
    pts = raised_aim_points(AimPoint(0.0, 0.02))
    assert pts[0] == AimPoint(0.0, 0.02)
    us = [p.u for p in pts]
    assert us == sorted(us) and us[-1] == 1.0
    assert max(np.diff(us)) <= 0.125 + 1e-9
    assert all(p.lateral_m == 0.02 for p in pts)
    assert raised_aim_points(AimPoint(1.05, 0.0)) == (AimPoint(1.05, 0.0),)
