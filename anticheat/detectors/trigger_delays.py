"""Contact-to-shot delays: where a triggerbot with a reaction delay shows.

A triggerbot set to wait a reaction delay after its crosshair meets an enemy (what cheat menus sell
as a "humanised" trigger) fires only on contacts that last that long, each at that delay; it never
fires as the crosshair arrives, and never off target. A human's first shot on a contact spreads
over a wide range instead: most come on arrival, planned into the flick (within a command: the
contacts ``trigger_takes`` counts), the rest with a reaction time that varies from contact to
contact.

``DelayTracker`` follows each contact from its entry (the same entry as an opportunity of
``trigger_takes``: crosshair newly on a player, weapon ready, trigger not held on the command
before) while the probed crosshair stays on that player, and resolves it at the first FIRE: a
``FirstFire`` with the delay in commands. FIRE on the command right after the entry counts as
delay 1 even if the crosshair has left (as for a take). Contacts left without a shot, broken by a
missing command, or longer than ``MAX_DELAY_COMMANDS`` resolve to nothing. A trigger pull with
the crosshair on nobody (FIRE pressed, not held on the command before, weapon ready) is a
``FirstFire`` too, with no target and no delay: a human's misses, which a triggerbot never makes.
The statistic is the distribution of the player's trigger pulls over these outcomes, so a player
who holds fire is not evidence of anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from anticheat.events import AimSample
from physics.buttons import Buttons

__all__ = ["DELAY_RANGES", "MAX_DELAY_COMMANDS", "DelayTracker", "FirstFire", "in_ranges"]

_FIRE = int(Buttons.FIRE)

DELAY_RANGES: tuple[tuple[int, int], ...] = ((2, 4), (5, 7), (8, 10), (11, 13), (14, 16), (5, 10), (8, 16))
"""The delay ranges (commands, inclusive; 1/64 s each on the reference client) a delayed triggerbot
is tested for, one CUSUM each. Narrow ones for a fixed delay (the server sees nearly all of such a
bot's first shots within a command of it), wide ones for a delay drawn per contact; together they
cover 31-250 ms. A delay of 0-1 commands is a take (``trigger_takes``). Narrow ranges are what tell
a bot from a human who also waits to see the crosshair on the target: a human's reaction time
varies by several commands from one contact to the next."""

MAX_DELAY_COMMANDS = 32
"""A contact is followed at most this many commands (0.5 s at 64 Hz)."""


@dataclass(frozen=True, slots=True)
class FirstFire:
    """The first shot on a contact.

    Attributes:
        player, time_s: who, and the server time of the contact's entry command (s).
        target: the player the crosshair came onto (slot).
        distance_m: the distance of the nearest visible enemy at the entry command (m).
        delay_commands: commands from the entry to the first FIRE (0: on the entry command).
    """

    player: int
    time_s: float
    target: int
    distance_m: float
    delay_commands: int


class DelayTracker:
    """One player's first shots on contacts, from its AimSamples in sequence order."""

    __slots__ = ("_prev", "_entry", "_age")

    def __init__(self) -> None:
        self._prev: AimSample | None = None
        self._entry: AimSample | None = None  # the open contact's entry command
        self._age = 0  # commands since the entry

    def feed(self, sample: AimSample) -> FirstFire | None:
        """The trigger pull this command resolves, if any: a contact's first shot, or a pull off
        target."""
        prev, entry = self._prev, self._entry
        self._prev = sample
        consecutive = prev is not None and sample.seq == prev.seq + 1
        fire = bool(sample.buttons & _FIRE)
        if entry is not None:
            self._entry = None
            if consecutive:
                age = self._age + 1
                if fire and (age == 1 or sample.crosshair_target == entry.crosshair_target):
                    return _first_fire(entry, age)
                if sample.crosshair_target == entry.crosshair_target and age < MAX_DELAY_COMMANDS:
                    self._entry, self._age = entry, age
                    return None
        target = sample.crosshair_target
        if not sample.fire_ready or not consecutive or prev is None or prev.buttons & _FIRE:
            return None
        if target is None:
            if fire:
                return FirstFire(sample.player, sample.time_s, None, sample.target_distance_m, None)
            return None
        if prev.crosshair_target == target:
            return None
        if fire:
            return _first_fire(sample, 0)
        self._entry, self._age = sample, 0
        return None


def _first_fire(entry: AimSample, delay: int) -> FirstFire:
    assert entry.crosshair_target is not None
    return FirstFire(entry.player, entry.time_s, entry.crosshair_target, entry.target_distance_m, delay)


def in_ranges(delay_commands: int | None, ranges: tuple[tuple[int, int], ...] = DELAY_RANGES) -> tuple[bool, ...]:
    """For each range (they may overlap), whether it holds the delay (commands; None: none does)."""
    if delay_commands is None:
        return (False,) * len(ranges)
    return tuple(lo <= delay_commands <= hi for lo, hi in ranges)
