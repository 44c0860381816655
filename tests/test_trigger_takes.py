"""Crosshair-entry opportunities from AimSamples, on hand-made command sequences."""

from __future__ import annotations

import dataclasses
import math

from anticheat.detectors.trigger_takes import Opportunity, TakeTracker
from anticheat.events import AimSample
from tests.synthetic import contact_samples, make_aim


def _cmd(seq: int, on: int | None, *, fire: bool = False, ready: bool = True) -> AimSample:
    return dataclasses.replace(make_aim(seq, buttons=int(fire)), crosshair_target=on, fire_ready=ready,
                               target_distance_m=20.0)


def _run(commands: list[AimSample]) -> list[tuple[int, int, bool]]:
    """(entry seq, target, taken) of every opportunity, in the order resolved."""
    tracker = TakeTracker()
    out: list[Opportunity] = []
    for c in commands:
        out.extend(tracker.feed(c))
    return [(round(o.time_s * 64), o.target, o.taken) for o in out]


def test_an_entry_is_taken_by_fire_on_its_command_or_the_next() -> None:
    assert _run([_cmd(1, None), _cmd(2, 5, fire=True), _cmd(3, 5)]) == [(2, 5, True)]
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5, fire=True)]) == [(2, 5, True)]
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5), _cmd(4, 5, fire=True)]) == [(2, 5, False)]
    # Sliding off the target before the next command still resolves the entry.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, None)]) == [(2, 5, False)]


def test_what_is_not_an_opportunity() -> None:
    # Already on that player: no entry.
    assert _run([_cmd(1, 5), _cmd(2, 5, fire=True)]) == []
    # The trigger held through the contact (a spray sweeping onto a target): no decision.
    assert _run([_cmd(1, None, fire=True), _cmd(2, 5, fire=True)]) == []
    # The weapon not ready (reloading, between shots): nothing to take.
    assert _run([_cmd(1, None), _cmd(2, 5, ready=False), _cmd(3, 5, fire=True)]) == []
    # A gap in the sequence: the previous command is unknown, so is the entry.
    assert _run([_cmd(1, None), _cmd(3, 5, fire=True)]) == []
    # A pending entry is not resolved across a gap either.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(4, 5, fire=True)]) == []


def test_moving_from_one_player_onto_another_resolves_both() -> None:
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 6, fire=True)]) == [(2, 5, True), (3, 6, True)]
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 6), _cmd(4, 6)]) == [(2, 5, False), (3, 6, False)]


def test_taking_every_contact_raises_takes_and_honest_rates_do_not() -> None:
    from anticheat.detectors.trigger import TAKE_LLR, TriggerDetector
    from tests.test_recoil_trigger import book

    det = TriggerDetector()
    found = [d for s in contact_samples("T" * 30) for d in det.on_aim(s, book())]
    need = math.ceil(det.config.takes_threshold / TAKE_LLR[0][1])
    assert [d.kind for d in found] == ["takes"] * (30 // need)
    assert found[0].evidence["taken"] == need and found[0].evidence["opportunities"] == need
    assert det.scores(1)["takes"] >= 1.0
    # One contact in five taken, the most an honest skill takes: never, however long.
    honest = TriggerDetector()
    assert [d for s in contact_samples("T...." * 400) for d in honest.on_aim(s, book())] == []
    assert honest.scores(1)["takes"] < 0.5
    # A skipped link is not judged; samples recorded before the probe carry no opportunities.
    far = TriggerDetector()
    assert [d for s in contact_samples("T" * 30) for d in far.on_aim(s, book(rtt_ms=900.0))] == []
    assert far.skip_counts()["high_ping"] == 60  # each contact: an opportunity and a first shot
    old = TriggerDetector()
    assert [d for s in contact_samples("T" * 30) for d in old.on_aim(dataclasses.replace(s, fire_ready=None), book())] == []
