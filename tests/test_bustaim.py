"""BustAim: the four warnings, streak resets, skip conditions, flags, profiles and WSTATS."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from anticheat.detectors.bustaim import (
    ALL_CHECKS,
    BustAim,
    BustAimConfig,
    BustAimFlag,
    BustAimWarning,
    WeaponProfile,
    aim_ray_offset,
    default_weapon_ranges,
)
from anticheat.events import ConnectionSample, RewindDecision, ShotClaim, ShotResult
from anticheat.skip import SkipBook
from world.state import view_direction
from world.weapons import WeaponId

SHOOTER, VICTIM = 0, 1
EYE = (0.0, 0.0, 1.64)
CHEST = 1.26


def book(**overrides: dict[str, float]) -> SkipBook:
    """A SkipBook with healthy connections for both players; ``overrides[player] = {field: value}``."""
    sk = SkipBook()
    for p in (SHOOTER, VICTIM):
        fields = {"rtt_ms": 50.0, "jitter_ms": 2.0, "loss": 0.0, "since_update_s": 0.0}
        fields.update(overrides.get(str(p), {}))
        sk.record(ConnectionSample(player=p, time_s=0.0, **fields))
    return sk


def aim_at(point: tuple[float, float, float], origin: tuple[float, float, float] = EYE) -> tuple[float, float]:
    dx, dy, dz = (point[i] - origin[i] for i in range(3))
    return math.degrees(math.atan2(dy, dx)), math.degrees(math.atan2(dz, math.hypot(dx, dy)))


def shot(
    tick: int,
    *,
    victim: int | None = VICTIM,
    dist: float = 20.0,
    speed: float = 3.0,
    weapon: int = WeaponId.PISTOL,
    yaw_off: float = 0.0,
    claimed: tuple[float, float, float] | None = "auto",  # type: ignore[assignment]
    pellet: int = 0,
) -> ShotResult:
    victim_pos = (dist, 0.0, 0.0)
    chest = (dist, 0.0, CHEST)
    yaw, pitch = aim_at(chest)
    if claimed == "auto":
        claimed = chest if victim is not None else None
    return ShotResult(
        shooter=SHOOTER,
        tick=tick,
        time_s=tick / 64.0,
        weapon=int(weapon),
        pellet=pellet,
        origin=EYE,
        direction=(1.0, 0.0, 0.0),
        rewind_time_s=tick / 64.0 - 0.1,
        rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False,
        victim=victim,
        victim_generation=0,
        bone=4 if victim is not None else 0,
        hit_point=chest,
        distance_m=dist,
        blocked_by_wall=False,
        victim_pos=victim_pos if victim is not None else None,
        victim_speed_m_s=speed,
        damage=30.0 if victim is not None else 0.0,
        claim=ShotClaim(
            shooter=SHOOTER,
            weapon=int(weapon),
            yaw_deg=yaw + yaw_off,
            pitch_deg=pitch,
            claimed_victim=victim,
            claimed_hit_point=claimed,
            seq=tick,
        ),
    )


def run(det: BustAim, shots: list[ShotResult], sk: SkipBook | None = None) -> list:
    sk = sk or book()
    out = []
    for s in shots:
        out.extend(det.on_shot(s, sk))
    return out


def test_warning_bitmask_values() -> None:
    assert int(BustAimWarning.OUT_OF_RANGE) == 1
    assert int(BustAimWarning.PROAIM_TELEPORT) == 2
    assert int(BustAimWarning.RANDOM_AIM) == 4
    assert int(BustAimWarning.CONTINOUS_SHOTS) == 8


def test_default_ranges_are_normal_plus_ten() -> None:
    r = dict(default_weapon_ranges())
    assert r[WeaponId.PISTOL] == 45.0
    assert r[WeaponId.SHOTGUN] == 50.0
    assert r[WeaponId.SMG] == 45.0
    assert r[WeaponId.RIFLE] == 110.0
    assert r[WeaponId.SNIPER] == 310.0


def test_continuous_shots_warn_at_every_multiple_of_ten() -> None:
    det = BustAim(BustAimConfig(max_continuous_shots=10))
    calls: list[tuple[int, int, int, int]] = []
    det.on_suspected.append(lambda *a: calls.append(a))
    dets = run(det, [shot(t) for t in range(1, 21)])
    assert [d.kind for d in dets] == ["continuous_shots", "continuous_shots"]
    assert [d.value for d in dets] == [10.0, 20.0]
    assert calls == [(SHOOTER, VICTIM, int(WeaponId.PISTOL), 8)] * 2
    assert det.get_profile(SHOOTER).max_continuous == 20
    assert det.get_profile(SHOOTER).continuous_warns == 2


def test_hits_on_a_still_victim_do_not_count_as_continuous() -> None:
    det = BustAim()
    assert run(det, [shot(t, speed=0.05) for t in range(1, 30)]) == []
    assert det.continuous_shots(SHOOTER) == 0


def test_a_miss_resets_every_streak_and_keeps_the_best() -> None:
    det = BustAim()
    shots = [shot(t) for t in range(1, 10)] + [shot(10, victim=None)] + [shot(t) for t in range(11, 20)]
    assert run(det, shots) == []
    assert det.continuous_shots(SHOOTER) == 9
    assert det.get_profile(SHOOTER).max_continuous == 9
    # Out-of-range streak: two probes, a miss, two more probes: never above 2 in a row.
    det = BustAim()
    far = [shot(1, dist=60), shot(2, dist=60), shot(3, victim=None), shot(4, dist=60), shot(5, dist=60)]
    assert [d for d in run(det, far) if d.kind == "out_of_range"] == []


def test_out_of_range_warns_after_two_probes() -> None:
    det = BustAim()
    dets = run(det, [shot(t, dist=60.0, speed=0.0) for t in range(1, 5)])
    oor = [d for d in dets if d.kind == "out_of_range"]
    assert len(oor) == 2  # third and fourth hit
    assert oor[0].tick == 3
    assert oor[0].value == pytest.approx(math.dist(EYE, (60.0, 0.0, CHEST)))
    assert oor[0].evidence["warnings"] & BustAimWarning.OUT_OF_RANGE
    assert len(det.get_range_stats(SHOOTER)) == 3
    # In range: never.
    det = BustAim()
    assert run(det, [shot(t, dist=40.0, speed=0.0) for t in range(1, 10)]) == []


def test_proaim_teleport_warns_after_three_probes_and_needs_a_claimed_point() -> None:
    det = BustAim()
    far_point = (20.0, 30.0, 1.0)
    dets = run(det, [shot(t, speed=0.0, claimed=far_point) for t in range(1, 5)])
    tele = [d for d in dets if d.kind == "proaim_teleport"]
    assert [d.tick for d in tele] == [4]
    assert tele[0].value > 15.0
    assert det.get_teleport_stats(SHOOTER)[-1] == pytest.approx(tele[0].value)
    # A missing claimed hit point is not checkable: it neither counts nor resets.
    det = BustAim()
    shots = [shot(1, speed=0, claimed=far_point), shot(2, speed=0, claimed=None)] + [
        shot(t, speed=0, claimed=far_point) for t in (3, 4, 5)
    ]
    tele = [d for d in run(det, shots) if d.kind == "proaim_teleport"]
    assert [d.tick for d in tele] == [5]
    # Honest claims (at the chest): never.
    det = BustAim()
    assert run(det, [shot(t, speed=0.0) for t in range(1, 10)]) == []
    # A client whose own ray missed claims no victim and the wall point its bullet reached; the
    # server's ray (its own spread and rewind) hit. Not a teleported victim: never.
    det = BustAim()
    honest_misses = [replace(s, claim=replace(s.claim, claimed_victim=None))
                     for s in (shot(t, speed=0.0, claimed=far_point) for t in range(1, 10))]
    assert [d.kind for d in run(det, honest_misses)] == []
    # Nor does a claim on another player than the one the server's ray hit count.
    det = BustAim()
    others = [replace(s, claim=replace(s.claim, claimed_victim=VICTIM + 1))
              for s in (shot(t, speed=0.0, claimed=far_point) for t in range(1, 10))]
    assert [d.kind for d in run(det, others)] == []


def test_random_aim_warns_after_five_probes_beyond_ten_meters() -> None:
    det = BustAim()
    dets = run(det, [shot(t, speed=0.0, yaw_off=30.0) for t in range(1, 8)])
    rnd = [d for d in dets if d.kind == "random_aim"]
    assert [d.tick for d in rnd] == [6, 7]
    assert rnd[0].value == pytest.approx(20.0 * math.sin(math.radians(30.0)), rel=0.05)
    assert len(det.get_aim_stats(SHOOTER)) == 3
    # Within 10 m the check is not made.
    det = BustAim()
    assert run(det, [shot(t, dist=8.0, speed=0.0, yaw_off=30.0) for t in range(1, 10)]) == []
    # A small aim error (< 3 m at 20 m) is a normal hit.
    det = BustAim()
    assert run(det, [shot(t, speed=0.0, yaw_off=4.0) for t in range(1, 10)]) == []


def test_claimed_recoil_is_part_of_the_aim_ray() -> None:
    # An honest spray: the crosshair sits 5 deg under the target because the kick lifts the barrel.
    def kicked(t: int) -> ShotResult:
        s = shot(t, dist=40.0, speed=0.0)
        claim = replace(
            s.claim, yaw_deg=s.claim.yaw_deg + 1.0, pitch_deg=s.claim.pitch_deg - 5.0,
            recoil_pitch_deg=5.0, recoil_yaw_deg=1.0,
        )
        return replace(s, claim=claim)

    assert run(BustAim(), [kicked(t) for t in range(1, 12)]) == []
    no_kick = BustAim(BustAimConfig(aim_includes_claimed_recoil=False))
    assert [d.kind for d in run(no_kick, [kicked(t) for t in range(1, 7)])] == ["random_aim"]


def test_aim_ray_offset_matches_world_view_direction() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        yaw, pitch = rng.uniform(-180, 180), rng.uniform(-80, 80)
        point = tuple(rng.uniform(-30, 30, 3))
        d = view_direction(yaw, pitch)
        v = np.asarray(point) - np.asarray(EYE)
        along = max(0.0, float(v @ d))
        expect = float(np.linalg.norm(v - along * d))
        assert aim_ray_offset(EYE, yaw, pitch, point) == pytest.approx(expect, abs=1e-9)


def test_several_warnings_on_one_hit_share_one_callback_bitmask() -> None:
    det = BustAim()
    calls: list[int] = []
    det.on_suspected.append(lambda s, v, w, warnings: calls.append(warnings))
    shots = [shot(t, dist=80.0, speed=0.0, yaw_off=45.0, claimed=(0.0, 0.0, 0.0)) for t in range(1, 7)]
    dets = run(det, shots)
    last = [d for d in dets if d.tick == 6]
    assert calls[-1] == 1 | 2 | 4
    assert sorted(d.kind for d in last) == ["out_of_range", "proaim_teleport", "random_aim"]
    assert all(d.detector == "bustaim" and 0 < d.severity <= 1 for d in dets)


@pytest.mark.parametrize(
    ("overrides", "weapon", "reason"),
    [
        ({"0": {"rtt_ms": 700.0}}, WeaponId.PISTOL, "skip_high_ping"),
        ({"1": {"loss": 0.2}}, WeaponId.PISTOL, "skip_high_loss"),
        ({"1": {"since_update_s": 2.0}}, WeaponId.PISTOL, "skip_paused"),
        ({}, WeaponId.MINIGUN, "skip_weapon"),
    ],
)
def test_skip_conditions_suppress_warnings(overrides: dict, weapon: WeaponId, reason: str) -> None:
    det = BustAim()
    shots = [shot(t, dist=60.0, yaw_off=40.0, weapon=weapon, claimed=(0.0, 0.0, 0.0)) for t in range(1, 25)]
    assert run(det, shots, book(**overrides)) == []
    assert det.stats[reason] == 24
    assert det.get_weapon_profile(SHOOTER, weapon).hits == 24  # still profiled


def test_unknown_connection_is_skipped() -> None:
    det = BustAim()
    assert run(det, [shot(t) for t in range(1, 12)], SkipBook()) == []
    assert det.stats["skip_unknown_connection"] == 11


def test_flags_select_checks_and_ignore_player() -> None:
    det = BustAim()
    assert det.get_flags(SHOOTER) == ALL_CHECKS
    det.set_flags(SHOOTER, ALL_CHECKS & ~BustAimFlag.CHECK_RANDOM_AIM)
    dets = run(det, [shot(t, speed=0.0, yaw_off=30.0) for t in range(1, 8)])
    assert dets == []
    det.reset_flags(SHOOTER)
    assert det.get_flags(SHOOTER) == ALL_CHECKS
    det.set_flags(SHOOTER, BustAimFlag.IGNORE_PLAYER | ALL_CHECKS)
    assert run(det, [shot(t) for t in range(100, 130)]) == []
    assert det.stats["skip_ignored_player"] == 30


def test_weapon_profiles_and_aggregate() -> None:
    det = BustAim()
    run(det, [shot(1), shot(2, victim=None), shot(3, weapon=WeaponId.RIFLE), shot(4, weapon=WeaponId.RIFLE)])
    assert det.get_weapon_profile(SHOOTER, WeaponId.PISTOL) == WeaponProfile(shots=2, hits=1, max_continuous=1)
    assert det.get_weapon_profile(SHOOTER, WeaponId.RIFLE) == WeaponProfile(shots=2, hits=2, max_continuous=2)
    total = det.get_profile(SHOOTER)
    assert (total.shots, total.hits, total.max_continuous) == (4, 3, 2)
    det.reset_weapon_profile(SHOOTER, WeaponId.RIFLE)
    assert det.get_profile(SHOOTER).shots == 2
    det.reset_profile(SHOOTER)
    assert det.get_profile(SHOOTER) == WeaponProfile()


def test_shotgun_pellets_form_one_shot() -> None:
    det = BustAim()
    pellets = 8
    # Seven pellets miss, the last one hits: one shot, one hit, the streak survives.
    run(det, [shot(t) for t in range(1, 4)])
    run(det, [shot(10, victim=None, weapon=WeaponId.SHOTGUN, pellet=i) for i in range(pellets - 1)])
    run(det, [shot(10, weapon=WeaponId.SHOTGUN, pellet=pellets - 1)])
    assert det.continuous_shots(SHOOTER) == 4
    prof = det.get_weapon_profile(SHOOTER, WeaponId.SHOTGUN)
    assert (prof.shots, prof.hits) == (1, 1)
    # Every pellet of the next shot misses: that is a miss and resets the streak.
    run(det, [shot(20, victim=None, weapon=WeaponId.SHOTGUN, pellet=i) for i in range(pellets)])
    assert det.continuous_shots(SHOOTER) == 0
    # Several pellets hitting count once.
    run(det, [shot(30, weapon=WeaponId.SHOTGUN, pellet=i) for i in range(pellets)])
    prof = det.get_weapon_profile(SHOOTER, WeaponId.SHOTGUN)
    assert (prof.shots, prof.hits) == (3, 2)
    assert det.continuous_shots(SHOOTER) == 1


def test_wstats_ring_keeps_the_last_three() -> None:
    det = BustAim()
    run(det, [shot(t, dist=50.0 + t, speed=0.0) for t in range(1, 8)])
    stats = det.get_range_stats(SHOOTER)
    assert len(stats) == 3
    assert stats[-1] == pytest.approx(math.dist(EYE, (57.0, 0.0, CHEST)))


def test_failing_callback_does_not_break_detection() -> None:
    det = BustAim(BustAimConfig(max_continuous_shots=10))

    def boom(*_: int) -> None:
        raise RuntimeError("operator hook bug")

    det.on_suspected.append(boom)
    assert len(run(det, [shot(t) for t in range(1, 11)])) == 1


def test_reset_player_forgets_everything() -> None:
    det = BustAim()
    run(det, [shot(t) for t in range(1, 6)])
    det.set_flags(SHOOTER, BustAimFlag.NONE)
    det.reset_player(SHOOTER)
    assert det.continuous_shots(SHOOTER) == 0
    assert det.get_profile(SHOOTER) == WeaponProfile()
    assert det.get_flags(SHOOTER) == ALL_CHECKS


def test_config_overrides_thresholds() -> None:
    det = BustAim(BustAimConfig(max_continuous_shots=3, weapon_ranges_m=((int(WeaponId.PISTOL), 15.0),)))
    dets = run(det, [shot(t) for t in range(1, 4)])
    assert sorted(d.kind for d in dets) == ["continuous_shots", "out_of_range"]
    with pytest.raises(ValueError):
        BustAimConfig(max_continuous_shots=0)
    with pytest.raises(ValueError):
        BustAimConfig(weapon_ranges_m=((1, -5.0),))


def test_configs_load_from_toml_overrides() -> None:
    from anticheat.tolerances import apply_overrides, load_overrides

    tables = load_overrides("[bustaim]\nweapon_ranges_m = [[1, 20.0]]\ndefault_flags = 8\nrandom_aim_probes = 1\n")
    cfg = apply_overrides(BustAimConfig(), tables["bustaim"], "bustaim")
    assert cfg.range_for(WeaponId.PISTOL) == 20.0
    assert cfg.range_for(WeaponId.RIFLE) == 110.0  # not listed: normal range + margin
    assert BustAim(cfg).get_flags(SHOOTER) == BustAimFlag.CHECK_CONTINUOUS
