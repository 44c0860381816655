"""C-bug suspicion score: variants and weights, decay, idle reset, cooldown, ping windows, enabling."""

from __future__ import annotations

import pytest

from anticheat.detectors.cbug import CbugConfig, CbugDetector
from anticheat.events import (
    AimSample,
    Buttons,
    ConnectionSample,
    FireEvidence,
    FireKind,
    RewindDecision,
    ShotClaim,
    ShotResult,
)
from anticheat.skip import SkipBook
from world.weapons import WeaponId

P = 3
PISTOL = int(WeaponId.PISTOL)
SNIPER = int(WeaponId.SNIPER)
C, J, S, LL = int(Buttons.CROUCH), int(Buttons.JUMP), int(Buttons.SPRINT), int(Buttons.LEAN_LEFT)

ORIGINAL = CbugConfig(threshold=10.0)
"""The include's own threshold (ours is 20, measured on honest play): the scores these tests build
are the original's."""


def book(rtt_ms: float = 40.0) -> SkipBook:
    sk = SkipBook()
    sk.record(ConnectionSample(player=P, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=1.0, loss=0.0, since_update_s=0.0))
    return sk


class Feed:
    """Drives one player's commands and shots in time order; collects detections."""

    def __init__(self, det: CbugDetector, sk: SkipBook | None = None) -> None:
        self.det = det
        self.sk = sk or book()
        self.seq = 0
        self.detections: list = []

    def cmd(
        self,
        t: float,
        buttons: int = 0,
        *,
        weapon: int = PISTOL,
        switch: int = 0,
        on_ground: bool = True,
    ) -> None:
        self.seq += 1
        s = AimSample(
            player=P, tick=round(t * 64), time_s=t, seq=self.seq, yaw_deg=0.0, pitch_deg=0.0,
            recoil_pitch_deg=0.0, recoil_yaw_deg=0.0, server_punch_pitch_deg=0.0, server_punch_yaw_deg=0.0,
            buttons=buttons, weapon=weapon, weapon_switch=switch, stance=1 if buttons & C else 0,
            on_ground=on_ground, speed_m_s=0.0, target=None, target_angle_deg=0.0, target_distance_m=0.0,
        )
        self.detections.extend(self.det.on_aim(s, self.sk))

    def fire(self, t: float, *, weapon: int = PISTOL, pellets: int = 1) -> None:
        self.cmd(t, int(Buttons.FIRE), weapon=weapon)
        for i in range(pellets):
            r = ShotResult(
                shooter=P, tick=round(t * 64), time_s=t, weapon=weapon, pellet=i, origin=(0.0, 0.0, 1.64),
                direction=(1.0, 0.0, 0.0), rewind_time_s=t, rewind_decision=RewindDecision.CLAIMED,
                rewind_clamped=False, victim=None, victim_generation=0, bone=0, hit_point=(10.0, 0.0, 1.64),
                distance_m=10.0, blocked_by_wall=False, victim_pos=None, victim_speed_m_s=0.0, damage=0.0,
                claim=ShotClaim(shooter=P, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0, seq=self.seq),
            )
            self.detections.extend(self.det.on_shot(r, self.sk))

    def classic_cycle(self, t: float, weapon: int = PISTOL) -> None:
        """Shoot at t, crouch at t+0.05, stand at t+0.15 (a scripted crouch-cancel)."""
        self.fire(t, weapon=weapon)
        self.cmd(t + 0.05, C, weapon=weapon)
        self.cmd(t + 0.15, 0, weapon=weapon)


def test_classic_cbug_is_detected_after_three_sequences() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    for i in range(3):
        feed.classic_cycle(0.3 * i)
    assert len(feed.detections) == 1
    d = feed.detections[0]
    assert (d.detector, d.kind) == ("cbug", "classic")
    assert d.value >= 10.0
    assert d.evidence["classic"] == pytest.approx(12.0)
    assert feed.det.score(P) == 0.0  # reset after the detection


def test_honest_shooting_is_never_detected() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    t = 0.0
    for _ in range(30):
        feed.fire(t)
        feed.cmd(t + 0.1)
        t += 0.7
    # Crouching long after a shot (outside the 1.5 s window) does not count either.
    for _ in range(10):
        feed.fire(t)
        feed.cmd(t + 1.7, C)
        feed.cmd(t + 1.8)
        t += 2.0
    assert feed.detections == []
    assert feed.det.score(P) == 0.0


def test_cooldown_blocks_a_second_detection_within_1500_ms() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    for i in range(14):
        feed.classic_cycle(0.3 * i)
    times = [d.time_s for d in feed.detections]
    assert len(times) >= 2
    assert all(b - a > 1.5 for a, b in zip(times, times[1:]))
    assert feed.det.stats["cooldown"] >= 1


def test_score_decays_half_a_point_per_second() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.classic_cycle(0.0)
    assert feed.det.score(P) == pytest.approx(4.0)
    feed.classic_cycle(1.0)
    assert feed.det.score(P) == pytest.approx(4.0 - 0.5 * 1.0 + 4.0)


def test_idle_reset_after_two_seconds_without_a_suspicious_action() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.classic_cycle(0.0)
    feed.classic_cycle(2.5)  # 2.45 s after the last crouch: the old score is gone, not just decayed
    assert feed.det.score(P) == pytest.approx(4.0)
    assert feed.det.contributions(P) == {"classic": 4.0}


@pytest.mark.parametrize(("rtt", "rapid"), [(0.0, False), (500.0, True)])
def test_ping_widens_the_rapid_shot_window(rtt: float, rapid: bool) -> None:
    # 200 ms + 500 ms * 0.01 = 205 ms: a 203 ms interval is rapid only for the high-ping player.
    feed = Feed(CbugDetector(ORIGINAL), book(rtt))
    feed.fire(0.0)
    feed.fire(0.203)
    assert ("rapid_shots" in feed.det.contributions(P)) is rapid


@pytest.mark.parametrize(("rtt", "counted"), [(0.0, False), (500.0, True)])
def test_ping_widens_the_sequence_window(rtt: float, counted: bool) -> None:
    feed = Feed(CbugDetector(ORIGINAL), book(rtt))
    feed.fire(0.0)
    feed.cmd(1.503, C)
    assert (feed.det.score(P) > 0.0) is counted


def test_jumpbug_and_run_bug_weights_reach_the_score() -> None:
    # Jumpbug: crouch pressed while airborne.
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.05, J | C, on_ground=False)
    assert feed.det.contributions(P) == {"jumpbug": 3.5}
    assert feed.det.score(P) == pytest.approx(3.5)
    heavy = Feed(CbugDetector(CbugConfig(weight_jumpbug=7.0)))
    heavy.fire(0.0)
    heavy.cmd(0.05, J | C, on_ground=False)
    assert heavy.det.score(P) == pytest.approx(7.0)
    # Run bug: crouch pressed while sprint is already held.
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.02, S)
    feed.cmd(0.05, S | C)
    assert feed.det.contributions(P) == {"run_bug": 3.0}
    heavy = Feed(CbugDetector(CbugConfig(weight_run_bug=6.0)))
    heavy.fire(0.0)
    heavy.cmd(0.02, S)
    heavy.cmd(0.05, S | C)
    assert heavy.det.contributions(P) == {"run_bug": 6.0}


def test_jumpbugs_alone_are_detected() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    for i in range(4):
        t = 0.3 * i
        feed.fire(t)
        feed.cmd(t + 0.05, J | C, on_ground=False)
        feed.cmd(t + 0.15, 0)
    assert [d.kind for d in feed.detections] == ["jumpbug"]


def test_slide_rollbug_and_quick_cswitch_weights() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.05, S | C)  # sprint and crouch pressed together
    assert feed.det.contributions(P) == {"slide": 2.0}

    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.03, LL)
    feed.cmd(0.05, LL | C)
    assert feed.det.contributions(P) == {"rollbug": 4.5}

    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.03, 0, switch=int(WeaponId.RIFLE))
    feed.cmd(0.05, C)
    assert feed.det.contributions(P) == {"switch_after_shot": 3.0, "quick_cswitch": 4.5}


def test_weapon_switch_after_shot_and_back() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.1, switch=int(WeaponId.RIFLE))
    feed.cmd(0.2, weapon=int(WeaponId.RIFLE))
    feed.cmd(0.3, weapon=int(WeaponId.RIFLE), switch=PISTOL)
    assert feed.det.contributions(P) == {"switch_after_shot": 3.0, "switch_back": 3.5}
    # A switch long after the shot (beyond the 500 ms buffer) is not suspicious.
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.8, switch=int(WeaponId.RIFLE))
    assert feed.det.contributions(P) == {}


def test_rapid_shots_add_three() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.fire(0.15)
    assert feed.det.contributions(P) == {"rapid_shots": 3.0}


def test_shotgun_pellets_are_one_shot() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0, weapon=int(WeaponId.SHOTGUN), pellets=8)
    assert feed.det.contributions(P) == {}


def test_unmonitored_weapon_is_ignored() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    for i in range(6):
        feed.classic_cycle(0.3 * i, weapon=int(WeaponId.SMG))
    assert feed.detections == []
    assert feed.det.score(P) == 0.0


def test_disabled_player_is_never_detected() -> None:
    det = CbugDetector(ORIGINAL)
    det.set_enabled(P, False)
    assert not det.is_enabled(P)
    feed = Feed(det)
    for i in range(20):
        feed.classic_cycle(0.3 * i)
    assert feed.detections == []
    # Off by default when configured like the original, until enabled.
    det = CbugDetector(CbugConfig(threshold=10.0, enabled_by_default=False))
    feed = Feed(det)
    for i in range(5):
        feed.classic_cycle(0.3 * i)
    assert feed.detections == []
    det.set_enabled(P, True)
    for i in range(5, 10):
        feed.classic_cycle(0.3 * i)
    assert len(feed.detections) == 1


def test_reload_or_empty_magazine_closes_the_sequence() -> None:
    feed = Feed(CbugDetector(ORIGINAL))
    feed.fire(0.0)
    feed.cmd(0.03, int(Buttons.RELOAD))
    feed.cmd(0.05, int(Buttons.RELOAD) | C)
    assert feed.det.score(P) == 0.0
    feed.fire(1.0)
    ev = FireEvidence(
        player=P, tick=70, time_s=1.02, weapon=PISTOL, kind=FireKind.EMPTY, interval_s=0.02, allowed_s=0.6
    )
    feed.det.on_fire(ev, feed.sk)
    feed.cmd(1.05, C)
    assert feed.det.score(P) == 0.0


def test_skipped_players_are_counted_not_judged() -> None:
    feed = Feed(CbugDetector(ORIGINAL), SkipBook())  # no connection sample: unknown
    for i in range(5):
        feed.classic_cycle(0.3 * i)
    assert feed.detections == []
    assert feed.det.stats["skip_unknown_connection"] > 0


def test_tolerances_are_overridable() -> None:
    feed = Feed(CbugDetector(CbugConfig(threshold=5.0)))
    feed.classic_cycle(0.0)
    feed.classic_cycle(0.3)
    assert len(feed.detections) == 1
    with pytest.raises(ValueError):
        CbugConfig(decay_per_s=-1.0)


def test_reset_player_forgets_score_and_switch() -> None:
    det = CbugDetector(ORIGINAL)
    det.set_enabled(P, False)
    det.reset_player(P)
    assert det.is_enabled(P)
    feed = Feed(det)
    feed.classic_cycle(0.0)
    det.reset_player(P)
    assert det.score(P) == 0.0


def test_config_loads_from_toml_overrides() -> None:
    from anticheat.tolerances import apply_overrides, load_overrides

    tables = load_overrides("[cbug]\nmonitored_weapons = [6]\nweight_classic = 6.0\ncooldown_s = 3.0\n")
    cfg = apply_overrides(CbugConfig(), tables["cbug"], "cbug")
    assert cfg.monitored_weapons == frozenset({int(WeaponId.ASSAULT_RIFLE)})
    feed = Feed(CbugDetector(cfg))
    rifle = int(WeaponId.ASSAULT_RIFLE)
    feed.fire(0.0, weapon=rifle)
    feed.cmd(0.05, C, weapon=rifle)
    assert feed.det.contributions(P) == {"classic": 6.0}


class _FullAnalysis(CbugDetector):
    """Every command through the full key-change analysis (no fast path for unchanged commands)."""

    def on_aim(self, sample: AimSample, skip: SkipBook):  # type: ignore[no-untyped-def]
        return self._key_changes(sample, skip)


@pytest.mark.parametrize("seed", range(6))
def test_unchanged_commands_fast_path_changes_nothing(seed: int) -> None:
    import random

    rng = random.Random(seed)
    weapons = [PISTOL, int(WeaponId.SHOTGUN), int(WeaponId.RIFLE), int(WeaponId.MINIGUN)]
    keys = [int(b) for b in Buttons]
    fast, full = Feed(CbugDetector(ORIGINAL)), Feed(_FullAnalysis(ORIGINAL))
    if seed % 3 == 0:
        for f in (fast, full):
            f.det.set_enabled(P, False)
    t, buttons, weapon, switch = 0.0, 0, PISTOL, 0
    for i in range(3000):
        t += rng.choice([1 / 64, 1 / 64, 0.0, 0.1])
        if rng.random() < 0.1:
            buttons ^= rng.choice(keys)
        if rng.random() < 0.02:
            switch = rng.choice([0, 0, *weapons])
        if rng.random() < 0.02:
            weapon = rng.choice(weapons)
        if i == 1500 and seed % 3 == 0:
            for f in (fast, full):
                f.det.set_enabled(P, True)
        for f in (fast, full):
            if buttons & int(Buttons.FIRE) and i % 3 == 0:
                f.fire(t, weapon=weapon)
            else:
                f.cmd(t, buttons, weapon=weapon, switch=switch, on_ground=i % 7 != 0)
    assert fast.detections == full.detections
    assert fast.det.stats == full.det.stats
    assert fast.det.score(P) == full.det.score(P) and fast.det.contributions(P) == full.det.contributions(P)
    if seed % 3 != 0:
        assert fast.detections  # the stream does exercise the analysis


def _crouch_taps_after_each_shot(feed: Feed, shots: int, taps: int) -> None:
    """A sniper shot every 1.6 s and ``taps`` crouch taps 0.25 s apart after each, from 0.45 s on
    (an honest player dodging between shots, as seen on a satellite link in the lab)."""
    t = 0.0
    for _ in range(shots):
        feed.fire(t, weapon=SNIPER)
        for k in range(taps):
            feed.cmd(t + 0.45 + 0.25 * k, C, weapon=SNIPER)
            feed.cmd(t + 0.55 + 0.25 * k, 0, weapon=SNIPER)
        t += 1.6


def test_one_crouch_counts_per_shot_so_crouch_taps_between_shots_are_one_cancel() -> None:
    feed = Feed(CbugDetector())
    _crouch_taps_after_each_shot(feed, shots=3, taps=4)
    # 3 shots x one counted crouch each, less the decay between them: not 3 x 4 x 4 = 48.
    assert feed.det.score(P) == pytest.approx(12.0 - 0.5 * (2 * 1.6 + 0.0), abs=0.5)
    assert feed.detections == []
    every = Feed(CbugDetector(CbugConfig(crouches_per_shot=0)))  # the original counts each press
    _crouch_taps_after_each_shot(every, shots=3, taps=4)
    assert [d.kind for d in every.detections] == ["classic"]


def test_the_cheat_still_counts_one_cancel_after_every_shot() -> None:
    feed = Feed(CbugDetector())
    for i in range(6):
        feed.classic_cycle(0.45 * i)
    assert [d.kind for d in feed.detections] == ["classic"]


def test_crouches_per_shot_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="crouches_per_shot"):
        CbugConfig(crouches_per_shot=-1)
