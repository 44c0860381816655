"""Triggerbot: shots that are all fired with the crosshair already on a player.

A triggerbot pulls the trigger only when the crosshair ray meets an enemy's hitbox, so, seen by the
server, every one of its shots leaves with the spread-free crosshair on a player (the server casts
that ray at the shot's rewind time: ``ShotResult.first_contact`` is not None exactly then). Humans
fire while still correcting, spray through misses and pre-fire corners: in our honest population
(recorded matches, every skill and link) about a third to a half of the shots leave with the
crosshair on a player, but in streaks: at long range a flick lands exactly when the shot goes,
so the honest rate overlaps a triggerbot's for dozens of shots and this test is slow by design. ``first_contact`` (the crosshair reached that player on this very command)
is kept as evidence: a triggerbot that waits for its weapon often fires a command or two later.

Kind (detector ``trigger``):

- ``on_target``: a Threshold Random Walk (Wald's SPRT, ``anticheat.detectors.trw``) over each player's
  shots with observation "crosshair on a player", theta0 = ``honest_rate`` and theta1 =
  ``cheat_rate``, with ``alpha`` the tolerated false-alarm rate per walk and ``beta`` the miss
  rate. An "honest" verdict restarts the walk, so a player who starts landing every shot later is
  still judged; a "cheater" verdict emits a detection and restarts too.

Only pellet 0 is judged; shots of weapons on the skip list, or by players whose link is bad,
are not observed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.detectors.trw import Decision, ThresholdRandomWalk, wald_thresholds
from anticheat.events import Detection, ShotResult
from anticheat.skip import SkipBook
from anticheat.tolerances import searched

log = logging.getLogger(__name__)

__all__ = ["TriggerConfig", "TriggerDetector"]


@dataclass(frozen=True, slots=True)
class TriggerConfig:
    """Triggerbot test parameters (rates are fractions of shots, 0..1).

    Attributes:
        honest_rate: theta0, the on-target rate an honest player is assumed not to exceed (0.7:
            honest bots measured 0.3-0.6 over a match, with streaks well above that at long range
            on open maps, where a flick lands exactly when the shot goes).
        cheat_rate: theta1, a triggerbot's on-target rate (0.97: it fires only on target, and
            client/server interpolation differ by a few cm now and then).
        alpha, beta: Wald's error rates (0.001, 0.01): with these, 21 on-target shots in a row
            decide "cheater", about 2 off-target shots decide "honest". A triggerbot is therefore
            a slow catch (minutes, not seconds); faster settings flagged honest bots.
        severity: of the Detection.
    """

    honest_rate: float = searched(0.7, 0.5, 0.9)
    cheat_rate: float = 0.97
    alpha: float = searched(0.001, 1e-5, 0.02)
    beta: float = searched(0.01, 1e-3, 0.1)
    severity: float = 0.7

    def __post_init__(self) -> None:
        if not 0.0 < self.honest_rate < self.cheat_rate < 1.0:
            raise ValueError("need 0 < honest_rate < cheat_rate < 1")
        wald_thresholds(self.alpha, self.beta)


class TriggerDetector(Detector):
    """Per-player SPRT on the crosshair being on a player at every shot."""

    name = "trigger"

    def __init__(self, config: TriggerConfig | None = None) -> None:
        self.config = config or TriggerConfig()
        self._walks: dict[int, ThresholdRandomWalk] = {}
        self._first_contact: Counter[int] = Counter()
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Shots not judged, per skip reason."""
        return dict(self.skipped)

    def reset_player(self, player: int) -> None:
        self._walks.pop(player, None)
        self._first_contact.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``llr``: the SPRT's log likelihood ratio against its upper boundary ln A (unitless;
        1.0 decides "triggerbot"). The walk restarts after every verdict, so the value is the
        highest log LR any of the player's walks reached (0 before a shot on target)."""
        walk = self._walks.get(player)
        if walk is None:
            return NO_SCORES
        return {"llr": over_limit(walk.peak_log_lr, walk.thresholds.log_upper)}

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        if shot.pellet != 0:
            return NO_DETECTIONS
        reason = skip.shot_reason(shot.shooter, None, shot.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        cfg = self.config
        walk = self._walks.get(shot.shooter)
        if walk is None:
            walk = self._walks[shot.shooter] = ThresholdRandomWalk(cfg.honest_rate, cfg.cheat_rate, cfg.alpha, cfg.beta)
        on_target = shot.first_contact is not None
        if shot.first_contact:
            self._first_contact[shot.shooter] += 1
        decision = walk.observe(on_target)
        if decision is Decision.PENDING:
            return NO_DETECTIONS
        shots, positives, lr = walk.observations, walk.positives, walk.likelihood_ratio
        walk.reset()
        if decision is Decision.HONEST:
            return NO_DETECTIONS
        first = self._first_contact.pop(shot.shooter, 0)
        log.info("trigger: player %d on target at %d of %d shots", shot.shooter, positives, shots)
        return [Detection(player=shot.shooter, tick=shot.tick, time_s=shot.time_s, detector=self.name,
                          kind="on_target", value=positives / shots, severity=cfg.severity,
                          reason=f"OnTarget-{positives}/{shots}",
                          evidence={"on_target": positives, "shots": shots, "first_contact": first,
                                    "likelihood_ratio": lr})]
