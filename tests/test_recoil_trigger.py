"""The per-command recoil-report check, the triggerbot SPRT and the silent-aim angle check."""

from __future__ import annotations

import dataclasses
import math

import pytest

from anticheat.detectors.fire import FireDetector
from anticheat.detectors.recoil import RecoilConfig, RecoilDetector
from anticheat.detectors.trigger import (
    LOG_LR,
    TAIL_SLOPE,
    TriggerConfig,
    TriggerDetector,
    range_band,
    shot_category,
)
from anticheat.events import ConnectionSample, Detection, SpawnEvent
from anticheat.skip import SkipBook
from tests.synthetic import make_aim, make_shot
from world.weapons import WeaponId

SMG = int(WeaponId.SMG)


def book(rtt_ms: float = 60.0, loss: float = 0.0) -> SkipBook:
    b = SkipBook()
    b.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=2.0, loss=loss, since_update_s=0.0))
    return b


# --- recoil report ------------------------------------------------------------------------------


def spray(det: RecoilDetector, skip: SkipBook, n: int, *, report_scale: float, start: int = 1) -> list[Detection]:
    """``n`` commands under a decaying kick, a shot every 20; the client reports ``report_scale``
    times the truth (and, when firing, the kick before its shot: the server's is after it)."""
    out: list[Detection] = []
    for i in range(n):
        punch = (2.0 * math.exp(-0.05 * (i % 20)), 0.3)
        reported = (punch[0] * report_scale, punch[1] * report_scale)
        firing = i % 20 == 0
        if firing:
            reported = (0.0, 0.0)
        out += det.on_aim(make_aim(start + i, reported=reported, server=punch, weapon=SMG, buttons=int(firing)), skip)
    return out


def test_zero_recoil_report_under_a_kick_is_detected() -> None:
    found = spray(RecoilDetector(), book(), 40, report_scale=0.0)
    assert [(d.detector, d.kind) for d in found] == [("recoil", "recoil_report")]
    assert found[0].evidence["mismatched"] >= RecoilConfig().min_mismatch and found[0].evidence["reported_deg"] == 0.0


def test_honest_reports_and_small_disagreements_are_clean() -> None:
    assert spray(RecoilDetector(), book(), 400, report_scale=1.0) == []
    # Prediction a little off (10 %) stays inside the relative tolerance.
    assert spray(RecoilDetector(), book(), 400, report_scale=0.9) == []


def test_no_kick_no_judgement_and_spawn_clears() -> None:
    det = RecoilDetector()
    skip = book()
    # Under the minimum punch nothing is judged, whatever is reported.
    quiet = [det.on_aim(make_aim(i, reported=(0.0, 0.0), server=(0.3, 0.0), weapon=SMG), skip) for i in range(100)]
    assert all(not d for d in quiet)
    # 10 commands (9 judged, one fires), a spawn, 10 more: never a full ring of 12 in one life.
    assert spray(det, skip, 10, report_scale=0.0) == []
    det.on_spawn(SpawnEvent(player=1, tick=500, time_s=8.0), skip)
    assert spray(det, skip, 10, report_scale=0.0, start=600) == []
    assert spray(det, skip, 4, report_scale=0.0, start=610) != []  # the same life goes on to 12


def test_a_refused_shot_suspends_judgement_until_the_kick_has_recovered() -> None:
    """An honest client fires on the tick it dies: the server refuses the shot, the client's punch
    carries that shot's kick on top of the server's until the server's punch has recovered, and
    those reports are not held against it. A no-recoil report after the recovery still is."""
    from anticheat.events import FireEvidence, FireKind

    def after_refusal(det: RecoilDetector, skip: SkipBook, start: int, extra: float) -> list[Detection]:
        det.on_fire(FireEvidence(player=1, tick=start, time_s=start / 64.0, weapon=SMG, kind=FireKind.DEAD,
                                 interval_s=0.11, allowed_s=0.1), skip)
        out: list[Detection] = []
        # The server's punch recovers from 3 deg by 0.1 deg a command; the client's runs 1.5 deg ahead.
        for i in range(40):
            server = max(3.0 - 0.1 * i, 0.0)
            out += det.on_aim(make_aim(start + i, reported=(server + extra, 0.0), server=(server, 0.0), weapon=SMG), skip)
        return out

    det = RecoilDetector()
    skip = book()
    assert after_refusal(det, skip, 1, 1.5) == []
    assert det.skip_counts()["refused_shot"] == 26  # 3.0 down to 0.5 deg
    assert spray(det, skip, 40, report_scale=1.0, start=100) == []
    assert det.scores(1)["recoil_report"] == 0.0
    # Without the grace the 26 surplus reports are mismatches that fill the ring: a detection of an
    # honest player.
    fresh = RecoilDetector(dataclasses.replace(RecoilConfig(), refusal_grace_s=0.0))
    assert [d.kind for d in after_refusal(fresh, skip, 1, 1.5)] == ["recoil_report"]
    # The grace lasts at most refusal_grace_s: a client that keeps the kick up (spraying) is
    # judged again after it, and a no-recoil report then is detected.
    det2 = RecoilDetector()
    det2.on_fire(FireEvidence(player=1, tick=1, time_s=1 / 64.0, weapon=SMG, kind=FireKind.RELOADING,
                              interval_s=0.0, allowed_s=0.1), skip)
    found = spray(det2, skip, 200, report_scale=0.0)
    assert found and found[0].time_s > 1.0
    with pytest.raises(ValueError):
        RecoilConfig(refusal_grace_s=-1.0)


def test_bad_link_is_skipped() -> None:
    det = RecoilDetector()
    assert spray(det, book(rtt_ms=900.0), 64, report_scale=0.0) == []
    assert sum(det.skip_counts().values()) == 64 - 4  # the 4 firing commands are not judged at all


# --- triggerbot -----------------------------------------------------------------------------------


def shots(pattern: str, start_s: float = 1.0) -> list:
    """One pellet-0 shot per character: ``T`` crosshair on a player (first contact), ``o`` on a
    player already before, ``.`` on nobody."""
    out = []
    for i, c in enumerate(pattern):
        s = make_shot(victim=2 if c != "." else None, t=start_s + 0.5 * i)
        out.append(dataclasses.replace(s, first_contact={"T": True, "o": False, ".": None}[c]))
    return out


def run(det: TriggerDetector, skip: SkipBook, pattern: str) -> list[Detection]:
    out: list[Detection] = []
    for s in shots(pattern):
        out += det.on_shot(s, skip)
    return out


def trigger_need(cfg: TriggerConfig | None = None, *, after_shots: bool = False) -> int:
    """Shots of ``"T" * n`` (first contact every 0.5 s, a pistol: each prompt and following an
    on-target shot, no aim samples: the last range band) the CUSUM needs to reach its threshold;
    ``after_shots``: the first of them is prompt too (it follows off-target shots)."""
    cfg = cfg or TriggerConfig()
    row = LOG_LR[range_band(None)]
    n, s = 1, row[shot_category(True, True, after_shots, False)]
    while s < cfg.threshold:
        n, s = n + 1, s + row[shot_category(True, True, True, True)]
    return n


def test_triggerbot_is_flagged_when_the_cusum_reaches_its_threshold() -> None:
    need = trigger_need()
    assert 8 <= need <= 30  # seconds of a triggerbot's shooting, not minutes
    assert run(TriggerDetector(), book(), "T" * (need - 1)) == []
    found = run(TriggerDetector(), book(), "T" * need)
    assert [d.kind for d in found] == ["on_target"]
    assert found[0].evidence["shots"] == need and found[0].evidence["first_contact"] == need
    assert found[0].evidence["cusum"] >= found[0].evidence["threshold"] == TriggerConfig().threshold
    # The statistic restarts after an alarm: a second one needs evidence of its own.
    det = TriggerDetector()
    assert len(run(det, book(), "T" * (2 * need - 2))) == 1


def test_honest_shooting_is_never_flagged() -> None:
    # Half the shots on target, first contact among them (the best honest bots measured).
    assert run(TriggerDetector(), book(), "oT.." * 100) == []
    assert run(TriggerDetector(), book(), ("TT..o." * 60)) == []
    # A long-range streak of eight first-contact taps, each prompt and following a hit, then a
    # run of misses, twenty times over. Such taps are 0.9 % of an honest pro's long-range shots
    # (lab/train5); ten in a row every 22 shots would drift up under the measured table, as a
    # triggerbot's shooting does.
    assert run(TriggerDetector(), book(), ("T" * 8 + "." * 12) * 20) == []


def test_off_target_shots_bank_no_credit() -> None:
    # A player who starts firing only on first contact after many misses is caught as fast as
    # one who never missed: the misses' negative steps are not stored up against him.
    det = TriggerDetector()
    need = trigger_need(after_shots=True)
    assert run(det, book(), "." * 200 + "T" * (need - 1)) == []
    assert run(TriggerDetector(), book(), "." * 200 + "T" * need)


def test_the_range_band_weighs_a_first_contact_streak() -> None:
    # At close range (< 15 m) a streak of first-contact shots is rarer for honest players than
    # at long range: the same streak reaches the threshold sooner.
    def flagged_after(distance_m: float) -> int:
        det, skip = TriggerDetector(), book()
        for i, s in enumerate(shots("T" * 60)):
            s = dataclasses.replace(s, claim=dataclasses.replace(s.claim, seq=100 + i))
            det.on_aim(dataclasses.replace(make_aim(i), seq=100 + i, target=2, target_distance_m=distance_m), skip)
            if det.on_shot(s, skip):
                return i + 1
        raise AssertionError("never flagged")

    assert flagged_after(10.0) < flagged_after(80.0) == trigger_need()


def test_the_threshold_reads_as_false_alarms_per_player_hour() -> None:
    one, ten = TriggerConfig(false_alarm_player_hours=1000.0), TriggerConfig(false_alarm_player_hours=10000.0)
    assert 20.0 < one.threshold < 30.0
    assert ten.threshold - one.threshold == pytest.approx(math.log(10.0) / TAIL_SLOPE)
    with pytest.raises(ValueError):
        TriggerConfig(false_alarm_player_hours=0.0)


# --- silent aim: shot angles off the command's crosshair path ----------------------------------


def test_shot_angles_away_from_the_view_are_silent_aim() -> None:
    det = FireDetector()
    skip = book()
    found: list[Detection] = []
    for k in range(4):
        s = make_shot(t=1.0 + 1.0 * k)
        s = dataclasses.replace(s, claim=dataclasses.replace(s.claim, yaw_deg=31.0, pitch_deg=-3.0,
                                                             view=(10.2, 0.0), prev_view=(10.0, 0.0)))
        found += det.on_shot(s, skip)
    assert [d.kind for d in found] == ["silent_aim_angles"]
    assert found[0].value == pytest.approx(21.0, abs=0.3)


def test_shots_along_a_fast_flick_are_not_silent_aim() -> None:
    det = FireDetector()
    skip = book()
    found: list[Detection] = []
    for k in range(10):
        # A 20 deg flick in one command, the shot fired part-way through it (sub-tick); then
        # shots with no view known (not judged) and shots exactly along the view.
        s = make_shot(t=1.0 + k)
        flick = dataclasses.replace(s.claim, yaw_deg=12.0, pitch_deg=0.0, view=(20.0, 0.0), prev_view=(0.0, 0.0))
        found += det.on_shot(dataclasses.replace(s, claim=flick), skip)
        s = make_shot(t=1.3 + k)
        found += det.on_shot(dataclasses.replace(s, claim=dataclasses.replace(s.claim, yaw_deg=50.0)), skip)
        s = make_shot(t=1.6 + k)
        along = dataclasses.replace(s.claim, yaw_deg=33.0, pitch_deg=2.0, view=(33.0, 2.0), prev_view=None)
        found += det.on_shot(dataclasses.replace(s, claim=along), skip)
    assert found == []


def test_shots_at_a_bait_are_not_read_as_misses() -> None:
    # A triggerbot that fires at AimDetect's bait: those shots hit no player, but they are not the
    # honest kind of miss that pulls the statistic down.
    need = trigger_need()
    pattern = "T" * need
    det, out = TriggerDetector(), []
    for i, s in enumerate(shots(pattern)):
        out += det.on_shot(s, book())
        if i == need // 2:
            bait = dataclasses.replace(make_shot(victim=None, t=s.time_s + 0.25), first_contact=None, bait_hit=True)
            out += det.on_shot(bait, book())
    assert [d.kind for d in out] == ["on_target"] and det.skip_counts()["bait"] == 1
    # The same shot without the bait is a miss, and it delays the alarm.
    det, out = TriggerDetector(), []
    for i, s in enumerate(shots(pattern)):
        out += det.on_shot(s, book())
        if i == need // 2:
            out += det.on_shot(dataclasses.replace(make_shot(victim=None, t=s.time_s + 0.25), first_contact=None), book())
    assert out == []
