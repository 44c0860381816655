"""Crosshair-entry opportunities: the moments a triggerbot fires every time.

The server probes every command's crosshair with lag compensation (``AimSample.crosshair_target``,
``server.crosshair_probe``) and knows whether the weapon could fire then
(``AimSample.fire_ready``). An **opportunity** is a command whose crosshair has just come onto a
player (the command before it, the one just before by sequence number, was on nobody or on
someone else) with the weapon ready and the trigger not already held (FIRE not pressed on that
previous command: a spray running through a target is not a decision). The opportunity is
**taken** when FIRE is pressed on that command or the next one: a triggerbot presses it within a
command of the contact, as seen by the server (its own ray uses the client's interpolated view,
which can differ from the server's rewind by a command), a human needs a reaction time or a
flick planned onto the target; and a human's crosshair also slides onto players in passing
(wobbling over a hitbox's edge, sweeping past a target, a target stepping under it), which a
human lets pass and a triggerbot does not.

``TakeTracker`` turns a player's AimSamples into resolved opportunities; the trigger detector
weighs them (``anticheat.detectors.trigger``). Commands missing from the sequence (lost or
dropped) break the chain: no opportunity is judged across a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from anticheat.events import AimSample
from physics.buttons import Buttons

__all__ = ["Opportunity", "TakeTracker"]

_FIRE = int(Buttons.FIRE)


@dataclass(frozen=True, slots=True)
class Opportunity:
    """One resolved crosshair-entry opportunity.

    Attributes:
        player, time_s: who, and the server time of the entry command (s).
        target: the player the crosshair came onto (slot).
        distance_m: the distance of the nearest visible enemy at the entry command (m).
        taken: FIRE was pressed on the entry command or the next one.
    """

    player: int
    time_s: float
    target: int
    distance_m: float
    taken: bool


class TakeTracker:
    """One player's opportunities from its AimSamples, in sequence order."""

    __slots__ = ("_prev", "_pending")

    def __init__(self) -> None:
        self._prev: AimSample | None = None
        # An entry without FIRE on its own command, waiting for the next command.
        self._pending: AimSample | None = None

    def feed(self, sample: AimSample) -> tuple[Opportunity, ...]:
        """The opportunities this command resolves (the previous command's entry, taken or not,
        and its own entry when taken at once): none, one or two."""
        prev, pending = self._prev, self._pending
        self._prev, self._pending = sample, None
        consecutive = prev is not None and sample.seq == prev.seq + 1
        fire = bool(sample.buttons & _FIRE)
        out: tuple[Opportunity, ...] = ()
        if pending is not None and consecutive:
            out = (_resolved(pending, fire),)
        target = sample.crosshair_target
        if (target is None or not sample.fire_ready or not consecutive or prev is None
                or prev.crosshair_target == target or prev.buttons & _FIRE):
            return out
        if fire:
            return (*out, _resolved(sample, True))
        self._pending = sample
        return out


def _resolved(entry: AimSample, taken: bool) -> Opportunity:
    assert entry.crosshair_target is not None
    return Opportunity(entry.player, entry.time_s, entry.crosshair_target, entry.target_distance_m, taken)
