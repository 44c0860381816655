"""A human aim model whose flicks overshoot the target, then come back (``bots.aim.AimModel``).

Fast aimed movements often pass the target and return in a second, smaller movement. This model
keeps Referee's Fitts' law timing and endpoint scatter (it wraps ``bots.aim.MinimumJerkFitts``)
and changes only the path of the flick: the hand travels ``1 + o`` of the way in a minimum-jerk
stroke, stops, and returns ``o`` in a second one, ``o`` drawn per flick. Corrections, catch-ups
and look turns are the built-in ones. Units: seconds and degrees; fractions where named.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from bots.aim import MinimumJerkFitts, MovementKind, MovementRequest, SubMovement, min_jerk
from bots.skill import Skill

__all__ = ["Overshoot", "OvershootParams", "OvershootProfile"]


@dataclass(frozen=True, slots=True)
class OvershootProfile:
    """Position profile tau -> completed fraction of a flick that overshoots by ``overshoot`` (a
    fraction of the displacement): out to ``1 + overshoot`` over the first ``split`` of the time,
    back to 1 over the rest, each stroke minimum-jerk (so the hand stops at the turn)."""

    overshoot: float
    split: float

    def __call__(self, tau: float) -> float:
        if tau < self.split:
            return (1.0 + self.overshoot) * float(min_jerk(tau / self.split))
        back = float(min_jerk((tau - self.split) / (1.0 - self.split)))
        return 1.0 + self.overshoot * (1.0 - back)


@dataclass(frozen=True, slots=True)
class OvershootParams:
    """Profile parameters of ``honest_overshoot`` (a scenario's ``[bots.params]``).

    Attributes:
        overshoot_mean, overshoot_sd: the overshoot of each flick (fraction of its amplitude),
            normal, clipped to [0, 0.5].
        return_fraction: share of the flick's time spent coming back (0..0.9); the flick lasts
            Fitts' time / (1 - return_fraction).
    """

    overshoot_mean: float = 0.15
    overshoot_sd: float = 0.05
    return_fraction: float = 0.3

    def __post_init__(self) -> None:
        if not 0.0 <= self.overshoot_mean <= 0.5 or self.overshoot_sd < 0.0:
            raise ValueError("overshoot_mean must be in [0, 0.5] and overshoot_sd >= 0")
        if not 0.0 < self.return_fraction <= 0.9:
            raise ValueError(f"return_fraction must be in (0, 0.9], got {self.return_fraction!r}")


@dataclass(frozen=True, slots=True)
class Overshoot:
    """The aim model: built-in planning, then an overshooting path for flicks (one more normal
    drawn per flick)."""

    params: OvershootParams = field(default_factory=OvershootParams)
    base: MinimumJerkFitts = field(default_factory=MinimumJerkFitts)

    def plan(self, request: MovementRequest, skill: Skill, rng: np.random.Generator) -> SubMovement | None:
        move = self.base.plan(request, skill, rng)
        if move is None or request.kind is not MovementKind.FLICK:
            return move
        prm = self.params
        o = min(max(prm.overshoot_mean + prm.overshoot_sd * float(rng.standard_normal()), 0.0), 0.5)
        split = 1.0 - prm.return_fraction
        return replace(move, duration_s=move.duration_s / split, profile=OvershootProfile(o, split))
