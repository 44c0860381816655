"""Fire intervals are judged on the player's command clock, not on when the shots arrived.

A client whose process falls behind sends its commands late, then catches up with several a
tick. Its shots, 100 ms apart on its own clock (which the weapon state and the timer check hold
to real time), then arrive 20-30 ms apart. Judged on arrival, three such intervals made
``fire:rapid_fire`` on an honest assault-rifle player in the README's UDP match.
"""

from __future__ import annotations

from anticheat.detectors.fire import FireDetector
from anticheat.events import ConnectionSample, Detection, RewindDecision, ShotClaim, ShotResult
from anticheat.pipeline import DetectionPipeline
from anticheat.skip import SkipBook
import pytest

from physics.buttons import Buttons
from server import protocol as proto
from tests.server_harness import joined, make_core, place, weapon_ready
from world.weapons import WeaponId

DT = 1.0 / 64
_FIRE = int(Buttons.FIRE)


class _Recording(FireDetector):
    """The fire detector, keeping what it found."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Detection] = []
        self.arrivals: list[float] = []

    def on_shot(self, shot, skip):  # type: ignore[no-untyped-def]
        if shot.pellet == 0:
            self.arrivals.append(shot.time_s)
        out = super().on_shot(shot, skip)
        self.found += out
        return out

    def on_fire(self, evidence, skip):  # type: ignore[no-untyped-def]
        out = super().on_fire(evidence, skip)
        self.found += out
        return out


def _lag_s(t: float) -> float:
    """How far behind (s) the client's sending runs at server time ``t``: 3.4 s of falling
    behind to 0.765 s, then a catch-up over 9 ticks, again and again (as traced in a UDP match)."""
    cycle = 3.4 + 9 * DT
    phase = (t - 1.0) % cycle if t > 1.0 else -1.0
    if phase < 0.0:
        return 0.0
    if phase < 3.4:
        return 0.765 * phase / 3.4
    return 0.765 * (1.0 - (phase - 3.4) / (9 * DT))


def _play(lagging: bool, every: int = 7) -> tuple[_Recording, int, int]:
    """An assault rifle fired every ``every`` commands for 12 s; returns the fire detector with
    what it found, the shots the server accepted and those it refused as too soon."""
    core = make_core()
    fire = _Recording()
    core.pipeline = DetectionPipeline([fire], SkipBook())
    client = joined(core, "sprayer", 5003)
    place(core, client.slot, (10.0, 30.0), 0.0, client)
    sent = 0  # commands sent, one INPUT each
    while core.time_s < 12.0:
        now = core.next_tick_s()
        due = int((now - (_lag_s(now) if lagging else 0.0)) / DT)
        while sent < due:
            sent += 1
            if sent % 600 == 1:
                weapon_ready(core, client.slot, int(WeaponId.ASSAULT_RIFLE))
            firing = sent % every == 0
            shots = (proto.Shot(0, int(WeaponId.ASSAULT_RIFLE), 0.0, 0.0, now - 0.05),) if firing else ()
            # The command's frame is the one its shot was aimed in (a shot claiming an older view
            # than its own command's is backtrack).
            core.receive(client.address, client.command(now, buttons=_FIRE if firing else 0, shots=shots,
                                                        view_time_s=now - 0.05), now - 0.001)
        client.deliver(core.step(now))
    return fire, int(core.by_slot[client.slot].shots_fired), int(core.rejections.get("shot_too_soon", 0))


def test_a_client_that_falls_behind_and_catches_up_is_no_rapid_fire() -> None:
    steady, steady_shots, steady_refused = _play(lagging=False)
    lagging, shots, refused = _play(lagging=True)
    assert steady.found == [] and steady_refused == 0 and steady_shots >= 80
    # The catch-ups squeeze shots 109 ms apart on the client's clock to a tick or two apart on
    # arrival (judged on arrival, that was rapid fire at 8.0 s)...
    gaps = [b - a for a, b in zip(lagging.arrivals, lagging.arrivals[1:])]
    assert sum(g < 0.04 for g in gaps) >= 6
    # ...but every shot was legal on its clock, and nothing is found.
    assert refused == 0 and shots >= steady_shots - 2
    assert lagging.found == []


def test_firing_faster_than_the_weapon_is_still_rapid_fire() -> None:
    """Every second command (31 ms) with a 100 ms assault rifle: the weapon state refuses the shots
    that come too soon on the command clock, and the refusals are the evidence."""
    fire, shots, refused = _play(lagging=False, every=2)
    assert refused > 100 and shots < 130
    assert [(d.kind, d.evidence["source"]) for d in fire.found][:1] == [("rapid_fire", "too_soon")]


def _shot(time_s: float, clock_s: float | None) -> ShotResult:
    return ShotResult(
        shooter=1, tick=round(time_s * 64), time_s=time_s, weapon=int(WeaponId.ASSAULT_RIFLE), pellet=0,
        origin=(5.0, 5.0, 1.64), direction=(1.0, 0.0, 0.0), rewind_time_s=time_s - 0.1,
        rewind_decision=RewindDecision.CLAIMED, rewind_clamped=False, victim=None, victim_generation=0, bone=0,
        hit_point=(15.0, 5.0, 1.64), distance_m=10.0, blocked_by_wall=False, victim_pos=None,
        victim_speed_m_s=0.0, damage=0.0,
        claim=ShotClaim(shooter=1, weapon=int(WeaponId.ASSAULT_RIFLE), yaw_deg=0.0, pitch_deg=0.0, clock_s=clock_s),
    )


def _judge(shots: list[ShotResult]) -> list[Detection]:
    det, skip = FireDetector(), SkipBook()
    skip.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=60.0, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    return [d for s in shots for d in det.on_shot(s, skip)]


def test_intervals_are_measured_on_the_command_clock() -> None:
    # 100 ms apart on the clock, 20 ms apart on arrival: legal.
    assert _judge([_shot(1.0 + 0.02 * i, 10.0 + 0.1 * i) for i in range(6)]) == []
    # 60 ms apart on the clock (under 100 ms less a 15.6 ms tick), whatever the arrival: rapid fire.
    found = _judge([_shot(1.0 + 0.1 * i, 10.0 + 0.06 * i) for i in range(6)])
    assert [(d.kind, d.evidence["clock"]) for d in found] == [("rapid_fire", "command")]
    assert found[0].value == pytest.approx(0.06)
    # A recording without the clock falls back on arrival times.
    found = _judge([_shot(1.0 + 0.02 * i, None) for i in range(6)])
    assert [(d.kind, d.evidence["clock"]) for d in found] == [("rapid_fire", "server")]
