"""IW4MAdmin detections: thresholds, sample-size rules, reasons, each type positive and negative."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from anticheat.events import (
    AimSample,
    Buttons,
    ConnectionSample,
    KillEvent,
    RewindDecision,
    ShotClaim,
    ShotResult,
)
from anticheat.detectors.iw4m.detector import IW4MDetector
from anticheat.detectors.iw4m.angles import StrainMeter, abs_angle_diff, snap_distance, view_angle_offset
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.cusum import threshold_for_arl
from anticheat.detectors.iw4m.chest import chest_limits
from anticheat.detectors.iw4m.headshot import headshot_limits
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.ratios import bone_finding, chest_thresholds, headshot_thresholds, max_bone_thresholds
from anticheat.detectors.iw4m.thresholds import IW4MConfig, max_offset_deg
from anticheat.skip import SkipBook
from world.hitbox import Bone
from world.weapons import WeaponId

P = 0
HEAD, NECK, UPPER, LOWER = int(Bone.HEAD), int(Bone.NECK), int(Bone.UPPER_TORSO), int(Bone.LOWER_TORSO)
LEFT_FOOT = int(Bone.LEFT_FOOT)
PISTOL = int(WeaponId.PISTOL)
DT = 1.0 / 64.0


def book(rtt_ms: float = 50.0) -> SkipBook:
    sk = SkipBook()
    for p in range(0, 40):
        sk.record(
            ConnectionSample(player=p, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=1.0, loss=0.0, since_update_s=0.0)
        )
    return sk


class Sim:
    """One shooter's command stream at 64 Hz with hits; collects detections."""

    def __init__(self, det: IW4MDetector | None = None, sk: SkipBook | None = None) -> None:
        self.det = det or IW4MDetector()
        self.sk = sk or book()
        self.seq = 0
        self.t = 0.0
        self.out: list = []

    def cmd(
        self,
        pitch: float,
        yaw: float,
        buttons: int = 0,
        *,
        weapon: int = PISTOL,
        recoil: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        self.seq += 1
        self.t += DT
        s = AimSample(
            player=P, tick=self.seq, time_s=self.t, seq=self.seq, yaw_deg=yaw, pitch_deg=pitch,
            recoil_pitch_deg=recoil[0], recoil_yaw_deg=recoil[1], server_punch_pitch_deg=recoil[0],
            server_punch_yaw_deg=recoil[1], buttons=buttons, weapon=weapon, weapon_switch=0, stance=0,
            on_ground=True, speed_m_s=0.0, target=None, target_angle_deg=0.0, target_distance_m=0.0,
        )
        self.out.extend(self.det.on_aim(s, self.sk))

    def hit(
        self,
        bone: int,
        pitch: float = 0.0,
        yaw: float = 0.0,
        *,
        victim: int = 1,
        distance: float = 20.0,
        weapon: int = PISTOL,
        recoil: tuple[float, float] = (0.0, 0.0),
        seq: int | None = None,
        pellet: int = 0,
        exposed: int | None = None,
    ) -> None:
        r = ShotResult(
            shooter=P, tick=self.seq, time_s=self.t, weapon=weapon, pellet=pellet, origin=(0.0, 0.0, 1.64),
            direction=(1.0, 0.0, 0.0), rewind_time_s=self.t, rewind_decision=RewindDecision.CLAIMED,
            rewind_clamped=False, victim=victim, victim_generation=0, bone=bone, hit_point=(distance, 0.0, 1.3),
            distance_m=distance, blocked_by_wall=False, victim_pos=(distance, 0.0, 0.0), victim_speed_m_s=0.0,
            damage=30.0,
            claim=ShotClaim(
                shooter=P, weapon=weapon, yaw_deg=yaw, pitch_deg=pitch, recoil_pitch_deg=recoil[0],
                recoil_yaw_deg=recoil[1], seq=self.seq if seq is None else seq,
            ),
            exposed=exposed,
        )
        self.out.extend(self.det.on_shot(r, self.sk))

    def kill(self, victim: int = 1) -> None:
        k = KillEvent(killer=P, victim=victim, tick=self.seq, time_s=self.t, weapon=PISTOL, bone=UPPER,
                      distance_m=20.0, killer_stance=0, headshot=False)
        self.out.extend(self.det.on_kill(k, self.sk))

    def plain_hit(self, bone: int, *, gap_cmds: int = 64, victim: int = 1, **kw: object) -> None:
        """Still aim at (0, 0): a few commands, the firing command, the hit, the command after (which
        reports the pistol's kick, as an honest client does)."""
        for _ in range(gap_cmds):
            self.cmd(0.0, 0.0)
        self.cmd(0.0, 0.0, int(Buttons.FIRE))
        self.hit(bone, victim=victim, **kw)  # type: ignore[arg-type]
        self.cmd(0.0, 0.0, recoil=(2.0, 0.2))

    def found(self, kind: str, level: str | None = None, scope: str | None = None) -> list:
        return [
            d for d in self.out
            if d.kind == kind
            and (level is None or d.evidence["level"] == level)
            and (scope is None or d.evidence["scope"] == scope)
        ]


# ---------------------------------------------------------------------- thresholds and formats


def test_headshot_flag_threshold_falls_from_0576_to_0300() -> None:
    cfg = IW4MConfig()
    assert headshot_thresholds(15, cfg, with_margin=False)[0] == pytest.approx(0.576, abs=5e-4)
    assert headshot_thresholds(60, cfg, with_margin=False)[0] == pytest.approx(0.300, abs=1e-3)
    assert headshot_thresholds(500, cfg, with_margin=False)[0] == pytest.approx(0.300, abs=1e-3)
    # With IW4MAdmin's margin of error 1.6455 / sqrt(hits) on top.
    assert headshot_thresholds(15, cfg)[0] == pytest.approx(0.576 + 1.6455 / math.sqrt(15), abs=5e-4)
    assert headshot_thresholds(60, cfg)[0] == pytest.approx(0.300 + 1.6455 / math.sqrt(60), abs=1e-3)
    # Ban sits at 3.5 sd, the max-bone limits at 2.25 / 3.25 sd.
    assert headshot_thresholds(15, cfg, False)[1] == pytest.approx(0.222 + 3.5 * 0.1769994181)
    expect = (0.4593 + 2.25 * 0.05158, 0.4593 + 3.25 * 0.05158)
    assert max_bone_thresholds(60, cfg, False) == pytest.approx(expect, abs=1e-3)
    assert chest_thresholds(30, cfg, False) == pytest.approx((0.4435 + 3 * 0.2859, 0.4435 + 4 * 0.2859), abs=1e-3)


def test_bone_limits_stop_tightening_at_the_cap() -> None:
    cfg = IW4MConfig()
    assert cfg.bone_cap_hits == 250
    at_cap = 0.222 + 2 * 0.03924263235 + 1.6455 / math.sqrt(250)
    assert headshot_thresholds(250, cfg)[0] == pytest.approx(at_cap)
    assert headshot_thresholds(250, cfg)[0] == pytest.approx(0.405, abs=1e-3)
    assert headshot_thresholds(5000, cfg) == headshot_thresholds(250, cfg)
    assert max_bone_thresholds(5000, cfg) == max_bone_thresholds(250, cfg)
    assert max_bone_thresholds(5000, cfg)[0] == pytest.approx(0.679, abs=1e-3)
    # Below the cap nothing changes; 0 restores IW4MAdmin's limits, which keep falling.
    uncapped = IW4MConfig(bone_cap_hits=0)
    assert headshot_thresholds(200, cfg) == headshot_thresholds(200, uncapped)
    assert headshot_thresholds(5000, uncapped)[0] == pytest.approx(0.222 + 2 * 0.03924263235 + 1.6455 / math.sqrt(5000))
    with pytest.raises(ValueError, match="bone_cap_hits"):
        IW4MConfig(bone_cap_hits=-1)


RATIO_BONE = IW4MConfig(bone_statistic="ratio")
RATIO_BONE_UNCAPPED = IW4MConfig(bone_statistic="ratio", bone_cap_hits=0)


def _first_bone_finding(heads_per_20: int, hits: int, cfg: IW4MConfig) -> int | None:
    """The hit at which a lifetime profile whose headshots come evenly, ``heads_per_20`` in every
    20 hits (the rest upper arm, so no single other bone leads), is first found by Bone."""
    stats = HitStats()
    stats.kills = 1000
    for i in range(hits):
        head = (i % 20) * heads_per_20 // 20 != ((i % 20) + 1) * heads_per_20 // 20
        stats.add_hit(int(Bone.HEAD) if head else int(Bone.UPPER_RIGHT_ARM) + i % 2)
        if bone_finding(stats, cfg, Scope.LIFETIME) is not None:
            return i + 1
    return None


def test_bone_cap_leaves_a_steady_high_honest_ratio_alone_but_not_a_cheat() -> None:
    # A headshot ratio of 0.35, 3 population sd above IW4MAdmin's mean: its limits, falling
    # towards 0.30, catch it once the margin of error is below 0.05 (~1,100 hits, 2-3 h of play).
    assert 1000 < _first_bone_finding(7, 4000, RATIO_BONE_UNCAPPED) < 1300
    assert _first_bone_finding(7, 4000, RATIO_BONE) is None
    # A head-aiming cheat at 0.6 is found at the same hit either way.
    cheat = _first_bone_finding(12, 400, RATIO_BONE)
    assert cheat is not None and cheat == _first_bone_finding(12, 400, RATIO_BONE_UNCAPPED)
    assert cheat < 100


def test_max_offset_figures() -> None:
    assert max_offset_deg(60) == pytest.approx(1.372, abs=1e-3)
    assert max_offset_deg(100) == pytest.approx(1.282, abs=1e-3)


def test_reason_strings() -> None:
    assert Finding("Strain", Level.FLAG, Scope.SESSION, 1.3899, 0.36, 136).reason == "Strain-1.39@136"
    assert Finding("Bone", Level.BAN, Scope.SESSION, 0.6249, 0.5, 40, HEAD).reason == "Bone-head-0.62@40"
    assert Finding("Bone", Level.FLAG, Scope.SESSION, 1.0, 0.5, 20, int(Bone.LOWER_LEFT_LEG)).reason == (
        "Bone-left_leg_lower-1.00@20"
    )
    assert Finding("Recoil", Level.BAN, Scope.SESSION, 0.0, 0.0, 15).reason == "Recoil-0.00@15"


def test_angle_measures() -> None:
    assert abs_angle_diff(179.0, -179.0) == pytest.approx(2.0)
    # Smooth motion (c between a and b): no offset; a flick away and back: the detour.
    assert view_angle_offset((0.0, 10.0), (0.0, 12.0), (0.0, 11.0)) == pytest.approx(0.0)
    assert view_angle_offset((0.0, 10.0), (0.0, 10.5), (0.0, 15.5)) == pytest.approx(5.0)
    assert view_angle_offset((0.0, 179.0), (0.0, -179.0), (0.0, 180.0)) == pytest.approx(0.0)
    assert snap_distance((0.0, 0.0), (0.0, 1.0), (0.0, 2.0)) == pytest.approx(0.0)
    assert snap_distance((0.0, 0.0), (0.0, 0.0), (3.0, 4.0)) == pytest.approx(5.0)


@given(
    st.floats(-180.0, 180.0),
    st.floats(-80.0, 80.0),
    st.floats(-170.0, 170.0),
    st.floats(-30.0, 30.0),
    st.floats(0.0, 1.0),
)
def test_offset_is_zero_between_the_neighbours_across_the_wrap(
    yaw: float, pitch: float, dyaw: float, dpitch: float, frac: float
) -> None:
    def wrap(x: float) -> float:
        return (x + 180.0) % 360.0 - 180.0

    a = (pitch, wrap(yaw))
    b = (pitch + dpitch, wrap(yaw + dyaw))
    c = (pitch + frac * dpitch, wrap(yaw + frac * dyaw))
    assert view_angle_offset(a, b, c) == pytest.approx(0.0, abs=1e-6)
    flick = (c[0], wrap(c[1] + 5.0 if dyaw <= 0 else c[1] - 5.0))
    assert view_angle_offset(a, b, flick) >= 0.0


def test_strain_formula() -> None:
    m = StrainMeter()
    assert m.update(0.0, (0.0, 0.0), 30.0) == 0.0  # first hit: nothing to compare with
    value = m.update(0.1, (0.0, 45.0), 30.0)
    assert value == pytest.approx(45.0**0.99 / 100.0 * (30.0 / 0.0254) / 1000.0)
    decayed = m.update(0.1 + 3.0, (0.0, 45.0), 30.0)  # same angles: decay only
    assert decayed == pytest.approx(value * 0.9 ** (2 ** (3000 / 250) / 1000))
    assert m.update(1e6, (0.0, 0.0), 30.0) >= 0.0  # a huge gap must not overflow


# ---------------------------------------------------------------------- Bone


def test_no_bone_detection_below_15_kills() -> None:
    sim = Sim(IW4MDetector(RATIO_BONE))
    for i in range(40):
        sim.plain_hit(HEAD)
        if i < 14:
            sim.kill()
    assert sim.found("Bone") == []
    sim.kill()  # the 15th kill
    sim.plain_hit(HEAD)
    bans = sim.found("Bone", "ban", "session")
    assert len(bans) == 1
    assert bans[0].reason == "Bone-head-1.00@41"
    assert bans[0].severity == pytest.approx(0.95)


def test_bone_max_single_bone_share() -> None:
    sim = Sim()
    for _ in range(20):
        sim.kill()
    for _ in range(60):
        sim.plain_hit(LEFT_FOOT, gap_cmds=3)
    # The margin of error 1.6455 / sqrt(hits) keeps even a 100 % share below the limits at first.
    found = sim.found("Bone")
    assert found[0].reason == "Bone-left_foot-1.00@30"
    assert found[0].evidence["level"] == "flag"
    assert any(d.evidence["level"] == "ban" for d in found)


def test_honest_hit_distribution_raises_nothing() -> None:
    sim = Sim()
    pattern = [HEAD, UPPER, LOWER, 6, 7, 12, 13, LOWER, UPPER, 8, 14, 15, LOWER, 9, 17, 10, 11, 16, NECK, 13]
    for i in range(120):
        sim.plain_hit(pattern[i % len(pattern)], gap_cmds=40)
        if i % 2 == 0:
            sim.kill()
    assert sim.out == []


# ---------------------------------------------------------------------- Chest


RATIO_CHEST = IW4MConfig(chest_statistic="ratio")
"""IW4MAdmin's own Chest test (the default is the CUSUM below)."""


def test_chest_needs_30_upper_torso_hits_and_60_to_ban() -> None:
    sim = Sim(IW4MDetector(RATIO_CHEST))
    for _ in range(29):
        sim.plain_hit(UPPER)
    assert sim.found("Chest") == []
    sim.plain_hit(UPPER)
    flags = sim.found("Chest", "flag")
    assert [d.reason for d in flags] == ["Chest-30.00@30"]
    for _ in range(29):
        sim.plain_hit(UPPER)
    assert sim.found("Chest", "ban") == []
    sim.plain_hit(UPPER)
    assert [d.reason for d in sim.found("Chest", "ban")] == ["Chest-60.00@60"]


@pytest.mark.parametrize("cfg", [RATIO_CHEST, IW4MConfig()], ids=["ratio", "cusum"])
def test_balanced_torso_hits_do_not_raise_chest(cfg: IW4MConfig) -> None:
    sim = Sim(IW4MDetector(cfg))
    for _ in range(60):
        sim.plain_hit(UPPER, gap_cmds=20)
        sim.plain_hit(LOWER, gap_cmds=20)
    assert sim.found("Chest") == []


def test_chest_cusum_steps_are_the_log_likelihood_ratios_of_the_two_shares() -> None:
    limits = chest_limits(IW4MConfig())
    # theta0 0.6 (honest ceiling), theta1 0.85 (chest aim), by hand:
    assert limits.up == pytest.approx(math.log(0.85 / 0.6))  # 0.3483
    assert limits.down == pytest.approx(math.log(0.15 / 0.4))  # -0.9808
    assert limits.flag == pytest.approx(threshold_for_arl(0.6, 0.85, 5e6))
    assert 12.0 < limits.flag < limits.ban  # ~13.3 and ~16.0 log-LR units


def test_chest_cusum_flags_a_chest_lock_after_h_over_the_step_upper_hits_then_bans() -> None:
    sim = Sim()
    limits = chest_limits(sim.det.config)
    to_flag = math.ceil(limits.flag / limits.up)  # 39 upper-torso hits in a row
    to_ban = math.ceil(limits.ban / limits.up)  # 47
    for _ in range(to_flag - 1):
        sim.plain_hit(UPPER, gap_cmds=3)
    assert sim.found("Chest") == []
    assert sim.det.scores(P)["chest"] == pytest.approx((to_flag - 1) * limits.up / limits.flag)
    sim.plain_hit(UPPER, gap_cmds=3)
    flags = sim.found("Chest", "flag", "lifetime")
    assert [d.reason for d in flags] == [f"Chest-{to_flag * limits.up:.2f}@{to_flag}"]
    for _ in range(to_ban - to_flag):
        sim.plain_hit(UPPER, gap_cmds=3)
    assert [d.evidence["hits"] for d in sim.found("Chest", "ban")] == [to_ban]


def test_chest_cusum_drains_on_lower_torso_hits_and_never_goes_below_zero() -> None:
    sim = Sim()
    limits = chest_limits(sim.det.config)
    for _ in range(3):
        sim.plain_hit(UPPER, gap_cmds=3)
    sim.plain_hit(LOWER, gap_cmds=3)
    assert sim.det.lifetime_stats(P)["chest_cusum"] == pytest.approx(3 * limits.up + limits.down)
    for _ in range(5):
        sim.plain_hit(LOWER, gap_cmds=3)
    assert sim.det.lifetime_stats(P)["chest_cusum"] == 0.0
    sim.plain_hit(HEAD, gap_cmds=3)  # off the torso: no verdict
    assert sim.det.lifetime_stats(P)["chest_cusum"] == 0.0


def test_chest_cusum_ignores_hits_on_a_target_whose_lower_torso_was_hidden() -> None:
    behind_cover = (1 << HEAD) | (1 << UPPER)
    in_the_open = behind_cover | (1 << LOWER)
    sim = Sim()
    for _ in range(80):
        sim.plain_hit(UPPER, gap_cmds=3, exposed=behind_cover)
    assert sim.found("Chest") == [] and sim.det.lifetime_stats(P)["chest_cusum"] == 0.0
    for _ in range(80):
        sim.plain_hit(UPPER, gap_cmds=3, exposed=in_the_open)
    assert sim.found("Chest", "flag") != []
    # The ratio test is IW4MAdmin's and counts every hit.
    ratio = Sim(IW4MDetector(RATIO_CHEST))
    for _ in range(30):
        ratio.plain_hit(UPPER, gap_cmds=3, exposed=behind_cover)
    assert ratio.found("Chest", "flag") != []


def test_chest_cusum_is_carried_by_the_lifetime_profile() -> None:
    sim = Sim()
    for _ in range(20):
        sim.plain_hit(UPPER, gap_cmds=3)
    profile = sim.det.export_profile(P)
    assert profile["chest_cusum"] == pytest.approx(20 * chest_limits(sim.det.config).up)
    sim.det.reset_session(P)
    assert sim.det.lifetime_stats(P)["chest_cusum"] == profile["chest_cusum"]
    fresh = IW4MDetector()
    fresh.import_profile(P, profile)
    assert fresh.lifetime_stats(P)["chest_cusum"] == profile["chest_cusum"]
    older = {k: v for k, v in profile.items() if k != "chest_cusum"}  # a profile from before the field
    fresh.import_profile(P, older)
    assert fresh.lifetime_stats(P)["chest_cusum"] == 0.0


# ---------------------------------------------------------------------- Bone's headshot CUSUM


def test_headshot_cusum_steps_are_the_log_likelihood_ratios_of_the_two_shares() -> None:
    limits = headshot_limits(IW4MConfig())
    # theta0 0.40 (honest ceiling), theta1 0.65 (head aim), by hand:
    assert limits.up == pytest.approx(math.log(0.65 / 0.40))  # 0.4855
    assert limits.down == pytest.approx(math.log(0.35 / 0.60))  # -0.5390
    assert limits.flag == pytest.approx(threshold_for_arl(0.40, 0.65, 6e6))
    assert 13.0 < limits.flag < limits.ban < 16.5  # ~13.2 and ~16.05 log-LR units


def test_headshot_cusum_flags_a_head_lock_after_h_over_the_step_hits_without_kills() -> None:
    sim = Sim()
    limits = headshot_limits(sim.det.config)
    to_flag = math.ceil(limits.flag / limits.up)  # 28 head hits in a row
    to_ban = math.ceil(limits.ban / limits.up)  # 34
    for i in range(to_flag - 1):
        sim.plain_hit(NECK if i % 2 else HEAD, gap_cmds=3)  # the neck counts as IW4MAdmin's does
    assert sim.found("Bone") == []
    assert sim.det.scores(P)["bone"] == pytest.approx((to_flag - 1) * limits.up / limits.flag)
    sim.plain_hit(HEAD, gap_cmds=3)
    assert [d.reason for d in sim.found("Bone", "flag", "lifetime")] == [f"Bone-head-{to_flag * limits.up:.2f}@{to_flag}"]
    for _ in range(to_ban - to_flag):
        sim.plain_hit(HEAD, gap_cmds=3)
    assert [d.evidence["hits"] for d in sim.found("Bone", "ban", "lifetime")] == [to_ban]


def test_headshot_cusum_drains_on_other_hits_and_is_carried_by_the_profile() -> None:
    sim = Sim()
    limits = headshot_limits(sim.det.config)
    for bone in (HEAD, HEAD, UPPER):
        sim.plain_hit(bone, gap_cmds=3)
    assert sim.det.lifetime_stats(P)["headshot_cusum"] == pytest.approx(2 * limits.up + limits.down)
    for _ in range(3):
        sim.plain_hit(LOWER, gap_cmds=3)
    assert sim.det.lifetime_stats(P)["headshot_cusum"] == 0.0
    for _ in range(10):
        sim.plain_hit(HEAD, gap_cmds=3)
    profile = sim.det.export_profile(P)
    assert profile["headshot_cusum"] == pytest.approx(10 * limits.up)
    fresh = IW4MDetector()
    fresh.import_profile(P, profile)
    assert fresh.lifetime_stats(P)["headshot_cusum"] == profile["headshot_cusum"]
    older = {k: v for k, v in profile.items() if k != "headshot_cusum"}  # a profile from before the field
    fresh.import_profile(P, older)
    assert fresh.lifetime_stats(P)["headshot_cusum"] == 0.0


def _spread_heads(sim: Sim, heads: int, hits: int) -> None:
    """``hits`` hits with ``heads`` head hits spread evenly among them (the rest upper arms)."""
    for i in range(hits):
        head = i * heads // hits != (i + 1) * heads // hits
        sim.plain_hit(HEAD if head else int(Bone.UPPER_RIGHT_ARM) + i % 2, gap_cmds=3)


def test_a_hot_start_of_an_honest_session_flags_the_ratio_test_not_the_cusum() -> None:
    # A held-out honest player (sessions6, match 15) had 31 headshots in its first 59 hits:
    # IW4MAdmin's limit there is 0.521, its ratio 0.525.
    ratio = Sim(IW4MDetector(RATIO_BONE))
    cusum = Sim()
    for sim in (ratio, cusum):
        for _ in range(15):
            sim.kill()
        _spread_heads(sim, 31, 59)
    assert [d.evidence["hits"] for d in ratio.found("Bone", "flag", "session")] == [59]
    assert cusum.found("Bone") == []
    assert cusum.det.lifetime_stats(P)["headshot_cusum"] < 0.25 * headshot_limits(cusum.det.config).flag
    assert cusum.det.scores(P)["bone"] < 0.7  # the largest-bone ratio test (head 0.525 against 0.79)
    # A smooth aimbot's share (0.8) is found by the CUSUM within 50 hits.
    aimbot = Sim()
    _spread_heads(aimbot, 40, 50)
    assert aimbot.found("Bone", "flag", "lifetime") != []


# ---------------------------------------------------------------------- Offset


def _tracking_hit(sim: Sim, yaw0: float, silent: float, bone: int = UPPER, victim: int = 1) -> float:
    """Smooth tracking at 0.2 deg per command; the firing command's claim is ``silent`` deg off."""
    yaw = yaw0
    for _ in range(6):
        yaw += 0.2
        sim.cmd(1.0, yaw)
    yaw += 0.2
    sim.cmd(1.0, yaw + silent, int(Buttons.FIRE))
    sim.hit(bone, 1.0, yaw + silent, victim=victim)
    yaw += 0.2
    sim.cmd(1.0, yaw)
    sim.t += 1.0  # one second between engagements keeps Strain quiet
    return yaw


def test_offset_flags_after_30_hits_and_bans_only_from_60() -> None:
    sim = Sim()
    yaw = 0.0
    for i in range(1, 60):
        yaw = _tracking_hit(sim, yaw, silent=4.0, victim=i % 7 + 1)
    assert sim.found("Offset", "ban") == []
    assert sim.found("Offset", "flag")[0].evidence["hits"] == 30
    _tracking_hit(sim, yaw, silent=4.0)
    bans = sim.found("Offset", "ban")
    assert len(bans) == 1
    assert bans[0].reason.startswith("Offset-") and bans[0].reason.endswith("@60")
    assert bans[0].value == pytest.approx(3.8, abs=0.25)


def test_smooth_aim_has_no_offset() -> None:
    sim = Sim()
    yaw = 0.0
    for i in range(120):
        yaw = _tracking_hit(sim, yaw, silent=0.0, victim=i % 5 + 1)
    assert sim.found("Offset") == []
    assert sim.det.session_stats(P)["offsets"][str(UPPER)][1] == pytest.approx(0.0, abs=1e-9)


def test_offset_waits_for_the_command_after_the_hit() -> None:
    # The hit arrives before the sample after it: the decision is made one command later.
    sim = Sim(IW4MDetector(IW4MConfig(offset_flag_min_hits=1)))
    sim.cmd(0.0, 0.0)
    sim.cmd(0.0, 20.0, int(Buttons.FIRE))
    sim.hit(UPPER, 0.0, 20.0)
    assert sim.det.session_stats(P)["offsets"] == {}
    sim.cmd(0.0, 0.0)
    assert sim.det.session_stats(P)["offsets"][str(UPPER)] == [1, pytest.approx(20.0)]
    assert len(sim.found("Offset", "flag")) == 1


def test_an_offset_limit_past_the_largest_float_flags_nothing() -> None:
    # The same 20-degree offset as above: with a limit that overflows a float, it is measured and
    # never flagged (the limit used to raise OverflowError inside the detector).
    sim = Sim(IW4MDetector(IW4MConfig(offset_flag_min_hits=1, offset_sigmas=1e9)))
    sim.cmd(0.0, 0.0)
    sim.cmd(0.0, 20.0, int(Buttons.FIRE))
    sim.hit(UPPER, 0.0, 20.0)
    sim.cmd(0.0, 0.0)
    assert sim.det.session_stats(P)["offsets"][str(UPPER)] == [1, pytest.approx(20.0)]
    assert sim.found("Offset") == []


# ---------------------------------------------------------------------- Strain


def test_rage_switching_raises_strain_but_bans_only_from_five_hits() -> None:
    sim = Sim()
    for i in range(8):
        for _ in range(3):
            sim.cmd(0.0, 0.0)
        yaw = 90.0 * (i % 2)
        sim.cmd(0.0, yaw, int(Buttons.FIRE))
        sim.hit(UPPER, 0.0, yaw, distance=30.0, victim=i + 1)
    flags = sim.found("Strain", "flag")
    bans = sim.found("Strain", "ban")
    assert flags and flags[0].evidence["hits"] == 2
    assert [d.evidence["hits"] for d in bans] == [5]
    assert sim.det.current_strain(P) > 0.9


def test_honest_bursts_keep_strain_low() -> None:
    sim = Sim()
    yaw = 0.0
    for _ in range(20):
        for _ in range(5):
            for _ in range(9):
                sim.cmd(0.0, yaw)
            yaw += 1.0
            sim.cmd(0.0, yaw, int(Buttons.FIRE))
            sim.hit(UPPER, 0.0, yaw)
        sim.t += 4.0
    assert sim.found("Strain") == []
    assert sim.det.session_stats(P)["max_strain"] < 0.36


# ---------------------------------------------------------------------- Snap


def _snap_hit(sim: Sim, victim: int, jump: float) -> None:
    for _ in range(10):
        sim.cmd(0.0, 0.0)
    sim.cmd(0.0, jump, int(Buttons.FIRE))
    sim.hit(UPPER, 0.0, jump, victim=victim)
    sim.cmd(0.0, jump)
    sim.t += 1.5


def test_snap_bans_after_30_snap_hits() -> None:
    sim = Sim()
    for i in range(29):
        _snap_hit(sim, victim=i % 2 + 1, jump=25.0)
        sim.cmd(0.0, 0.0)  # look back
    assert sim.found("Snap") == []
    _snap_hit(sim, victim=1, jump=25.0)
    bans = sim.found("Snap", "ban", "session")
    assert [d.reason for d in bans] == ["Snap-25.00@30"]


def test_smooth_tracking_does_not_snap() -> None:
    sim = Sim()
    yaw = 0.0
    for i in range(60):
        yaw = _tracking_hit(sim, yaw, silent=0.0, victim=i % 3 + 1)
    assert sim.found("Snap") == []
    stats = sim.det.session_stats(P)
    assert stats["snap_hits"] == 60
    assert stats["snap_mean"] == pytest.approx(0.0, abs=1e-6)


def test_a_spray_on_one_victim_is_one_snap_hit() -> None:
    sim = Sim()
    for _ in range(10):
        for _ in range(6):
            sim.cmd(0.0, 0.0)
        sim.cmd(0.0, 0.0, int(Buttons.FIRE))
        sim.hit(UPPER, 0.0, 0.0, victim=4)
    sim.cmd(0.0, 0.0)
    assert sim.det.session_stats(P)["snap_hits"] <= 1


# ---------------------------------------------------------------------- Recoil


def _recoil_hits(sim: Sim, n: int, kick: float, weapon: int = PISTOL) -> None:
    for _ in range(n):
        for _ in range(8):
            sim.cmd(0.0, 0.0, weapon=weapon)
        sim.cmd(0.0, 0.0, int(Buttons.FIRE), weapon=weapon)
        sim.hit(UPPER, weapon=weapon)
        sim.cmd(0.0, 0.0, weapon=weapon, recoil=(kick, 0.1 * kick))
        sim.t += 1.0


def test_no_recoil_is_banned_after_15_hits_and_more_than_5_kills() -> None:
    sim = Sim()
    for _ in range(6):
        sim.kill()
    _recoil_hits(sim, 14, kick=0.0)
    assert sim.found("Recoil") == []
    _recoil_hits(sim, 1, kick=0.0)
    assert [d.reason for d in sim.found("Recoil", "ban")] == ["Recoil-0.00@15"]


def test_no_recoil_needs_more_than_five_kills() -> None:
    sim = Sim()
    for _ in range(5):
        sim.kill()
    _recoil_hits(sim, 30, kick=0.0)
    assert sim.found("Recoil") == []


def test_honest_recoil_reports_are_never_zero() -> None:
    sim = Sim()
    for _ in range(10):
        sim.kill()
    _recoil_hits(sim, 40, kick=2.0)
    assert sim.found("Recoil") == []


def test_weapons_without_recoil_are_excluded() -> None:
    sim = Sim()
    for _ in range(10):
        sim.kill()
    _recoil_hits(sim, 20, kick=0.0, weapon=99)  # an id with no recoil pattern
    assert sim.found("Recoil") == []
    assert sim.det.session_stats(P)["recoil_hits"] == 0


# ---------------------------------------------------------------------- Button


def _button_hit(sim: Sim, fire: bool) -> None:
    for _ in range(8):
        sim.cmd(0.0, 0.0)
    sim.cmd(0.0, 0.0, int(Buttons.FIRE) if fire else 0)
    sim.hit(UPPER)
    sim.cmd(0.0, 0.0)
    sim.t += 1.0


def test_hits_without_fire_press_flag_at_three_and_ban_at_five() -> None:
    sim = Sim()
    _button_hit(sim, fire=False)
    _button_hit(sim, fire=False)
    assert sim.found("Button") == []
    _button_hit(sim, fire=False)
    assert len(sim.found("Button", "flag")) == 1
    _button_hit(sim, fire=False)
    _button_hit(sim, fire=False)
    assert len(sim.found("Button", "ban")) == 1


def test_hits_with_fire_press_are_fine() -> None:
    sim = Sim()
    for _ in range(20):
        _button_hit(sim, fire=True)
    assert sim.found("Button") == []


# ---------------------------------------------------------------------- plumbing


def test_shotgun_pellets_count_once() -> None:
    sim = Sim()
    sim.cmd(0.0, 0.0, int(Buttons.FIRE), weapon=int(WeaponId.SHOTGUN))
    for i in range(8):
        sim.hit(UPPER, weapon=int(WeaponId.SHOTGUN), pellet=i)
    assert sim.det.session_stats(P)["hits"] == 1
    assert sim.det.stats["extra_pellet"] == 7


def test_skipped_hits_are_not_analysed() -> None:
    sim = Sim(sk=book(rtt_ms=900.0))
    for _ in range(5):
        sim.plain_hit(HEAD)
    assert sim.det.session_stats(P)["hits"] == 0
    assert sim.det.stats["skip_high_ping"] == 5


def test_profile_export_import_and_sessions() -> None:
    sim = Sim()
    for _ in range(3):
        sim.kill()
    for bone in (HEAD, UPPER, UPPER, LOWER):
        sim.plain_hit(bone, gap_cmds=5)
    exported = sim.det.export_profile(P)
    assert json.loads(json.dumps(exported)) == exported
    assert exported["hits"] == 4 and exported["kills"] == 3 and exported["bones"][str(UPPER)] == 2

    other = IW4MDetector()
    other.import_profile(7, exported)
    assert other.export_profile(7) == exported
    assert other.session_stats(7)["hits"] == 0

    sim.det.reset_session(P)
    assert sim.det.session_stats(P)["hits"] == 0
    assert sim.det.export_profile(P) == exported
    sim.det.reset_player(P)
    assert sim.det.export_profile(P)["hits"] == 0


def test_import_rejects_malformed_profiles() -> None:
    det = IW4MDetector()
    good = det.export_profile(1)
    for bad in (
        {**good, "version": 99},
        {**good, "hits": -1},
        {**good, "bones": {"1": 3}},
        {**good, "hits": 5},  # bones do not add up
        {**good, "snap_mean": float("nan")},
        "not a mapping",
    ):
        with pytest.raises(ValueError):
            det.import_profile(1, bad)  # type: ignore[arg-type]
    assert det.export_profile(1) == good


def test_lifetime_bone_uses_the_imported_profile() -> None:
    sim = Sim()
    profile = sim.det.export_profile(P)
    profile.update(hits=150, kills=150, bones={str(HEAD): 120, str(UPPER): 30})
    sim.det.import_profile(P, profile)
    sim.plain_hit(HEAD)
    assert sim.found("Bone", scope="session") == []  # no session kills yet
    lifetime = sim.found("Bone", "ban", "lifetime")
    assert [d.reason for d in lifetime] == ["Bone-head-0.80@151"]


def test_repeated_findings_are_throttled() -> None:
    sim = Sim(IW4MDetector(RATIO_BONE))
    for _ in range(15):
        sim.kill()
    for _ in range(50):
        sim.plain_hit(HEAD, gap_cmds=3)
    bans = sim.found("Bone", "ban", "session")
    assert [d.reason.split("@")[1] for d in bans] == ["29", "39", "49"]


def test_per_player_state_stays_bounded() -> None:
    det = IW4MDetector()
    sk = book()
    sim = Sim(det, sk)
    for _ in range(5000):
        sim.cmd(0.0, 0.0)
    for _ in range(50):
        sim.hit(UPPER, seq=10**9)  # the command after never comes
        sim.seq += 1
    st = det._players[P]
    assert len(st.samples) == det.config.aim_ring_size
    assert len(st.pending) <= det.config.pending_max


def test_first_command_of_a_new_shooter_is_remembered() -> None:
    # on_aim creates the shooter's state itself: a hit right after sees that command as "before".
    sim = Sim(IW4MDetector(IW4MConfig(offset_flag_min_hits=1)))
    assert IW4MDetector().session_stats(P)["hits"] == 0
    sim.cmd(0.0, 0.0, int(Buttons.FIRE))
    sim.cmd(0.0, 0.0, int(Buttons.FIRE))
    sim.hit(UPPER, 0.0, 0.0)
    sim.cmd(0.0, 0.0)
    assert "offset_unmeasured" not in sim.det.stats
    assert sim.det.session_stats(P)["offsets"][str(UPPER)][0] == 1
    # Forgotten, then remembered afresh on the next command.
    sim.det.reset_player(P)
    sim.cmd(0.0, 0.0, int(Buttons.FIRE))
    assert len(sim.det._players[P].samples) == 1


@pytest.mark.parametrize("test", ["chest", "headshot"])
def test_cusum_in_control_run_length_matches_its_average_run_length(test: str) -> None:
    from anticheat.detectors.cusum import average_run_length
    from anticheat.detectors.iw4m.chest import chest_observe
    from anticheat.detectors.iw4m.headshot import headshot_observe

    # A short ARL so a few thousand runs fit in a test; an honest player exactly at theta0.
    cfg = IW4MConfig(**{f"{test}_flag_arl_hits": 300.0, f"{test}_ban_arl_hits": 300.0})
    limits, observe, seed = {"chest": (chest_limits(cfg), chest_observe, 11),
                             "headshot": (headshot_limits(cfg), headshot_observe, 12)}[test]
    positive, negative = (UPPER, LOWER) if test == "chest" else (HEAD, UPPER)
    theta0, theta1 = getattr(cfg, f"{test}_theta0"), getattr(cfg, f"{test}_theta1")
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(3000):
        stats, n = HitStats(), 0
        while getattr(stats, f"{test}_cusum") < limits.flag:
            n += 1
            observe(stats, positive if rng.random() < theta0 else negative, limits)
        runs.append(n)
    expected = average_run_length(theta0, theta0, theta1, limits.flag)
    # The smallest threshold whose ARL reaches 300: the steps are discrete, so a little over.
    assert 300.0 <= expected < 330.0
    # Run lengths are roughly geometric: sd ~ mean, so 3000 runs put the mean within ~2 %.
    assert np.mean(runs) == pytest.approx(expected, rel=4 * np.std(runs) / np.sqrt(len(runs)) / expected)
