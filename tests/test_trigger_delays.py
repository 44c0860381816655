"""Contact-to-shot delays from AimSamples, and the trigger detector's bank of delay CUSUMs, on
hand-made command sequences."""

from __future__ import annotations

import dataclasses
import math

from anticheat.detectors.trigger import DELAY_LLR, TriggerDetector
from anticheat.detectors.trigger_delays import DELAY_RANGES, MAX_DELAY_COMMANDS, DelayTracker, in_ranges
from anticheat.events import AimSample
from tests.synthetic import delayed_contact_samples, make_aim
from tests.test_recoil_trigger import book


def _cmd(seq: int, on: int | None, *, fire: bool = False, ready: bool = True) -> AimSample:
    return dataclasses.replace(make_aim(seq, buttons=int(fire)), crosshair_target=on, fire_ready=ready,
                               target_distance_m=20.0)


def _run(commands: list[AimSample]) -> list[tuple[int, int | None, int | None]]:
    """(entry seq, target, delay) of every trigger pull, in order."""
    tracker = DelayTracker()
    out = []
    for c in commands:
        first = tracker.feed(c)
        if first is not None:
            out.append((round(first.time_s * 64), first.target, first.delay_commands))
    return out


def test_the_first_fire_while_the_crosshair_stays_on_gives_the_delay() -> None:
    assert _run([_cmd(1, None), _cmd(2, 5, fire=True)]) == [(2, 5, 0)]
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5), _cmd(4, 5), _cmd(5, 5, fire=True)]) == [(2, 5, 3)]
    # Only the first shot of a contact: the rest of a burst is not a decision.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5, fire=True), _cmd(4, 5), _cmd(5, 5, fire=True)]) == [(2, 5, 1)]
    # FIRE on the command right after the entry counts even if the crosshair has slid off (as a take).
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, None, fire=True)]) == [(2, 5, 1)]


def test_contacts_left_unshot_broken_or_too_long_give_nothing() -> None:
    # Left without a shot, then a shot off the target: a pull off target, no delay.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5), _cmd(4, None), _cmd(5, None, fire=True)]) == [(5, None, None)]
    # But not with the trigger held from the command before, or the weapon not ready.
    assert _run([_cmd(1, None), _cmd(2, None, fire=True), _cmd(3, None, fire=True)]) == [(2, None, None)]
    assert _run([_cmd(1, None), _cmd(2, None, fire=True, ready=False)]) == []
    # A gap in the sequence.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 5), _cmd(5, 5, fire=True)]) == []
    # Not an entry: weapon not ready, trigger held before, or already on that player.
    assert _run([_cmd(1, None), _cmd(2, 5, ready=False), _cmd(3, 5, fire=True)]) == []
    assert _run([_cmd(1, None, fire=True), _cmd(2, 5), _cmd(3, 5, fire=True)]) == []
    # Longer than MAX_DELAY_COMMANDS: given up.
    held = [_cmd(1, None)] + [_cmd(2 + k, 5) for k in range(MAX_DELAY_COMMANDS + 1)]  # ages 0..MAX
    assert _run([*held, _cmd(3 + MAX_DELAY_COMMANDS, 5, fire=True)]) == []
    assert _run([*held[:-1], _cmd(2 + MAX_DELAY_COMMANDS, 5, fire=True)]) == [(2, 5, MAX_DELAY_COMMANDS)]
    # Moving onto another player starts a new contact.
    assert _run([_cmd(1, None), _cmd(2, 5), _cmd(3, 6), _cmd(4, 6), _cmd(5, 6, fire=True)]) == [(3, 6, 2)]


def test_ranges_may_overlap() -> None:
    assert in_ranges(6) == tuple(lo <= 6 <= hi for lo, hi in DELAY_RANGES)
    assert in_ranges(6, ((5, 7), (5, 10), (8, 16))) == (True, True, False)
    assert in_ranges(None, ((5, 7), (5, 10))) == (False, False)
    assert not any(in_ranges(1)) and not any(in_ranges(17))


def test_a_fixed_delay_raises_delay_and_an_honest_spread_does_not() -> None:
    det = TriggerDetector()
    h = det.config.delay_threshold
    # Every contact shot 6 commands in (94 ms): the 5-7, 5-10 ranges climb; 5-7 has the larger step.
    found = [d for s in delayed_contact_samples([6] * 20) for d in det.on_aim(s, book())]
    r57 = DELAY_RANGES.index((5, 7))
    need = math.ceil(h / DELAY_LLR[0][r57][1])
    assert found and found[0].kind == "delay"
    assert found[0].evidence["in_range"] == need == found[0].evidence["pulls"]
    assert found[0].evidence["range_commands"] == [5, 7] and found[0].reason == f"Delay-5-7-{need}/{need}"
    assert det.scores(1)["delay"] >= 1.0
    # An honest spread (half on arrival, a quarter a command later, the rest spread to 16 commands),
    # with three contacts in four left unshot (as takes expect of an honest player): never.
    honest = TriggerDetector()
    shot = [0, 1, 0, 3, 0, 1, 0, 6, 0, 1, 0, 2, 0, 1, 0, 9, 0, 1, 0, 13]
    spread = [d for delay in shot for d in (delay, None, None, None)] * 20
    assert [d for s in delayed_contact_samples(spread) for d in honest.on_aim(s, book())] == []
    assert honest.scores(1)["delay"] < 0.5
    # Holding fire lends no evidence either way.
    idle = TriggerDetector()
    assert [d for s in delayed_contact_samples([None] * 200) for d in idle.on_aim(s, book())] == []
    assert idle.scores(1) == {} or idle.scores(1)["delay"] == 0.0
