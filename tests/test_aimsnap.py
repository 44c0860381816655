"""Locked flicks: one-command view jumps that land on an enemy."""

from __future__ import annotations

import pytest

from anticheat.detectors.aimsnap import (
    AimSnapConfig,
    AimSnapDetector,
    honest_false_alarms_per_hour,
)
from anticheat.detectors.aimstats import angular_step_deg
from anticheat.events import AimSample, ConnectionSample, SpawnEvent
from anticheat.skip import SkipBook

DT = 1.0 / 64.0


def _sample(seq: int, yaw: float, target_deg: float, *, pitch: float = 0.0, player: int = 0,
            target: int | None = 5) -> AimSample:
    t = seq * DT
    return AimSample(player, seq, t, seq, yaw, pitch, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0, True, 0.0, target, target_deg,
                     20.0)


def _book(exempt: bool = False) -> SkipBook:
    book = SkipBook()
    # A satellite link over BustAim's loss limit: this detector judges it all the same.
    book.record(ConnectionSample(player=0, time_s=0.0, rtt_ms=300.0, jitter_ms=20.0, loss=0.09,
                                 since_update_s=0.0, exempt=exempt))
    return book


def _feed(det: AimSnapDetector, samples: list[AimSample], book: SkipBook) -> list:
    return [d for s in samples for d in det.on_aim(s, book)]


def _snap(seq: int, from_yaw: float, to_yaw: float, on_deg: float = 1.0) -> list[AimSample]:
    """A still view at ``from_yaw``, then one command onto an enemy at ``to_yaw``."""
    return [_sample(seq, from_yaw, 60.0), _sample(seq + 1, to_yaw, on_deg)]


def test_two_locked_flicks_within_the_window_are_one_detection() -> None:
    det, book = AimSnapDetector(), _book()
    assert _feed(det, _snap(200, 0.0, 90.0), book) == []
    assert det.scores(0) == {"locked_flick": 0.5}
    found = _feed(det, _snap(200 + 64 * 30, 90.0, -150.0), book)  # 30 s later, across the yaw wrap
    assert len(found) == 1
    d = found[0]
    assert (d.detector, d.kind) == ("aimsnap", "locked_flick")
    assert d.evidence["turn_deg"] == pytest.approx(120.0)
    assert d.evidence["window_span_s"] == pytest.approx(30.0)
    assert det.scores(0) == {"locked_flick": 0.0}  # the count starts again


def test_flicks_further_apart_than_the_window_never_add_up() -> None:
    det, book = AimSnapDetector(), _book()
    found = _feed(det, _snap(200, 0.0, 90.0) + _snap(200 + 64 * 61, 90.0, 0.0) + _snap(200 + 64 * 122, 0.0, 90.0), book)
    assert found == []


def test_a_human_flick_decelerates_onto_the_target_and_is_never_a_locked_flick() -> None:
    # A 150 ms minimum-jerk flick of 120 deg (peak 1,500 deg/s, 23 deg a command mid-way).
    det, book = AimSnapDetector(), _book()
    samples, seq = [], 300
    for _ in range(5):
        steps = round(0.15 / DT)
        for i in range(steps + 1):
            tau = i / steps
            yaw = 120.0 * (10 * tau**3 - 15 * tau**4 + 6 * tau**5)
            samples.append(_sample(seq, yaw, max(0.5, 120.0 - yaw)))
            seq += 1
        seq += 64  # a second later, the next flick from the same start
        samples.append(_sample(seq, 0.0, 120.0))
        seq += 1
    steps_deg = [angular_step_deg(a.yaw_deg, a.pitch_deg, b.yaw_deg, b.pitch_deg)
                 for a, b in zip(samples, samples[1:]) if b.seq == a.seq + 1]
    assert max(steps_deg) > AimSnapConfig().min_turn_deg  # fast mid-way, yet never landing
    assert _feed(det, samples, book) == []


def test_lost_commands_spawns_and_exempt_players_are_not_judged() -> None:
    det, book = AimSnapDetector(), _book()
    # A gap in the sequence: two commands' turn read as one is not evidence.
    gap = [_sample(100, 0.0, 60.0), _sample(102, 90.0, 1.0), _sample(400, 0.0, 60.0), _sample(402, 90.0, 1.0)]
    assert _feed(det, gap, book) == []
    # The client adopting the spawn view a round trip after the spawn.
    det.on_spawn(SpawnEvent(player=0, tick=600, time_s=600 * DT), book)
    det.on_spawn(SpawnEvent(player=0, tick=700, time_s=700 * DT), book)
    assert _feed(det, _snap(620, 0.0, 90.0) + _snap(720, 90.0, 0.0), book) == []
    exempt = AimSnapDetector()
    assert _feed(exempt, _snap(200, 0.0, 90.0) + _snap(300, 90.0, 0.0), _book(exempt=True)) == []
    # A jump that ends off the target (a quick turn) is not one either.
    assert _feed(AimSnapDetector(), _snap(200, 0.0, 90.0, on_deg=8.0) + _snap(300, 90.0, 0.0, on_deg=8.0), book) == []


def test_false_alarm_rate_by_hand() -> None:
    cfg = AimSnapConfig()
    # 0.138 an hour, 2 in 60 s: 0.138 * 0.138 / 60 = 3.17e-4 an hour.
    assert honest_false_alarms_per_hour(0.138, cfg) == pytest.approx(0.138 * 0.138 / 60.0)
    three = AimSnapConfig(min_events=3)
    assert honest_false_alarms_per_hour(0.138, three) == pytest.approx(0.138 * (0.138 / 60.0) ** 2 / 2)
    with pytest.raises(ValueError):
        AimSnapConfig(on_deg=30.0)


def test_after_a_spawn_the_adoption_of_the_spawn_view_is_no_flick_but_a_snap_from_it_is() -> None:
    book = _book()
    det = AimSnapDetector()
    # The server set yaw 90; the client adopts it a round trip later (0.2 s), with a couple of
    # degrees of its own mouse movement, and an enemy happens to stand there.
    det.on_spawn(SpawnEvent(player=0, tick=600, time_s=600 * DT, yaw_deg=90.0, pitch_deg=0.0), book)
    assert _feed(det, _snap(613, -40.0, 92.0), book) == []
    assert det.scores(0) == {"locked_flick": 0.0}
    # Two commands later it snaps 45 deg onto an enemy from the spawn view: judged, though 0.25 s
    # into the life; a second snap straight from the last life's view after the next spawn too.
    assert _feed(det, [_sample(615, 92.0, 60.0), _sample(616, 137.0, 0.2)], book) == []
    assert det.scores(0) == {"locked_flick": 0.5}
    det.on_spawn(SpawnEvent(player=0, tick=1600, time_s=1600 * DT, yaw_deg=-90.0, pitch_deg=0.0), book)
    found = _feed(det, _snap(1610, 10.0, 60.0, on_deg=0.3), book)
    assert [d.kind for d in found] == ["locked_flick"]
    # A recording without the spawn view judges nothing in the grace, as before.
    old = AimSnapDetector()
    old.on_spawn(SpawnEvent(player=0, tick=600, time_s=600 * DT), book)
    assert _feed(old, [_sample(615, 92.0, 60.0), _sample(616, 137.0, 0.2)], book) == []
    assert old.scores(0) == {"locked_flick": 0.0}


def test_a_lock_after_a_client_hitch_is_not_judged() -> None:
    """The client rendered 0.1 s (then 0.3 s) later in its next command than in the one before: a
    frozen frame, whose mouse movement all lands in one command. Two such locks make nothing; the
    same locks over a steadily advancing view time are a detection."""
    from dataclasses import replace

    def snap(seq: int, from_yaw: float, to_yaw: float, frame_s: float) -> list[AimSample]:
        before, after = _snap(seq, from_yaw, to_yaw)
        return [replace(before, view_time_s=before.time_s - 0.1), replace(after, view_time_s=before.time_s - 0.1 + frame_s)]

    det, book = AimSnapDetector(), _book()
    assert _feed(det, snap(200, 0.0, 90.0, 0.1) + snap(200 + 64 * 30, 90.0, -150.0, 0.3), book) == []
    assert det.skip_counts() == {"client_hitch": 2}
    assert len(_feed(det, snap(200 + 64 * 40, 0.0, 90.0, DT) + snap(200 + 64 * 50, 90.0, 0.0, DT), book)) == 1
    with pytest.raises(ValueError):
        AimSnapConfig(hitch_s=0.0)
