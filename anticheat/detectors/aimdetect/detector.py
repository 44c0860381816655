"""AimDetect: per-kill classifier verdicts accumulated by Page's CUSUM, plus bait targets.

(REFERENCES section 5.) Every kill is turned into features (``features``: the paper's eight and
the aim trajectory's nine) and classified by the trained model (``model``). The paper feeds the
verdicts to a Threshold Random Walk that restarts after every "honest" decision; each restarted
walk carries its own false-positive probability, so an honest player's risk grows with the length
of the session. Here the verdicts feed the killer's CUSUM (``anticheat.detectors.cusum``) instead,
with theta1 = the model's measured held-out TPR and theta0 = its held-out FPR on the honest group
it flags most (so no group of honest players runs hotter than the design). The alarm threshold h
is set from the in-control average run length, stated in player-hours: ``false_alarm_player_hours``
of honest play at ``kills_per_hour`` kills an hour. Every alarm is an ``aimbot`` Detection; the
sum then restarts, so the next alarm needs evidence of its own.

Bait targets: the server places an invisible target just above a victim after each kill; an honest
player's inertial shots land around the victim, an aimbot's snap onto the bait. A ray through a
bait is strong evidence. Shots, not pellets, are counted (a shotgun blast is one), and a
``bait_hit`` Detection is emitted when ``bait_hits_to_detect`` bait shots fall within
``bait_window_s``. The default is 2: one stray spray-climb through the bait can happen to an
honest player holding the trigger, two in two minutes is a pattern.

A bait shot counts only if it was aimed at a world in which the bait existed (``bait``): its
lag-compensated ``rewind_time_s`` must not precede the shooter's latest kill before the shot. A
shot aimed at an older view is the inertial fire the bait exists to tell apart; it is counted
under the skip reason ``bait_before_kill``. ``referee lab baits lab/sessions5 lab/heldout3
lab/subtle7 lab/wallhack8 lab/sessions7`` (308.6 held-out honest player-hours): 22 honest shots
touched a bait, every one an automatic weapon's spray continuing through a kill; 20 were aimed
0.01-0.34 s before the kill, and the two others were single shots in their two-minute windows.
Of the cheaters' 1,163 bait shots there, 6 (0.5 %) were aimed before the kill.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anticheat.detectors.aimdetect.bait import KillClock, aimed_before_kill
from anticheat.detectors.aimdetect.features import FEATURE_NAMES, FeatureConfig, FeatureExtractor, KillFeatures
from anticheat.detectors.aimdetect.model import TrainedModel, load_shipped_model
from anticheat.detectors.cusum import BernoulliCusum, average_run_length, threshold_for_arl
from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import AimSample, Detection, KillEvent, ShotResult, SpawnEvent
from anticheat.skip import SkipBook
from anticheat.tolerances import searched

log = logging.getLogger(__name__)

__all__ = ["AimDetectConfig", "AimDetectDetector"]


@dataclass(frozen=True, slots=True)
class AimDetectConfig:
    """AimDetect tolerances.

    Attributes:
        false_alarm_player_hours: the CUSUM's in-control average run length in player-hours: an
            honest player of the group the model flags most raises one false alarm per this many
            hours of play, on average (2,000).
        kills_per_hour: the honest kill rate (kills per player-hour) that turns those hours into
            kills (240: our honest corpus averages 128 and its pros 167; assuming more only makes
            the threshold stricter).
        severity: of the ``aimbot`` Detection.
        bait_hits_to_detect: bait shots needed for a ``bait_hit`` Detection (2).
        bait_window_s: ... within this many seconds (120 s).
        bait_severity: of the ``bait_hit`` Detection (0.9: the paper uses bait hits as ground truth).
        features: feature-extraction constants.
    """

    false_alarm_player_hours: float = searched(2000.0, 50.0, 1e5)
    kills_per_hour: float = 240.0
    severity: float = 0.8
    bait_hits_to_detect: int = searched(2, 1, 4)
    bait_window_s: float = 120.0
    bait_severity: float = 0.9
    features: FeatureConfig = field(default_factory=FeatureConfig)

    def __post_init__(self) -> None:
        if self.bait_hits_to_detect < 1:
            raise ValueError("bait_hits_to_detect must be >= 1")
        if not self.false_alarm_player_hours > 0.0 or not self.kills_per_hour > 0.0:
            raise ValueError("false_alarm_player_hours and kills_per_hour must be positive")
        if self.false_alarm_player_hours * self.kills_per_hour <= 1.0:
            raise ValueError("false_alarm_player_hours * kills_per_hour must exceed one kill")

    @property
    def arl_kills(self) -> float:
        """The in-control average run length in kills."""
        return self.false_alarm_player_hours * self.kills_per_hour


class AimDetectDetector(Detector):
    """Inline AimDetect. Needs a trained model (``from_shipped`` loads the packaged one)."""

    name = "aimdetect"

    def __init__(self, model: TrainedModel, config: AimDetectConfig | None = None) -> None:
        if tuple(model.feature_names) != FEATURE_NAMES:
            raise ValueError(f"model features {model.feature_names!r} are not AimDetect's {FEATURE_NAMES!r}")
        self.config = config or AimDetectConfig()
        self.model = model
        self.theta0 = model.fpr_worst
        self.theta1 = model.tpr
        # Fails here, not on the first kill, when the model is no better than chance.
        self.h = _threshold(self.theta0, self.theta1, self.config.arl_kills)
        # Compile (or load) the classifier's kernel for this model's arrays now, not on the first kill.
        model.predict(np.zeros(len(FEATURE_NAMES)))
        self.features = FeatureExtractor(self.config.features)
        self._sums: dict[int, BernoulliCusum] = {}
        self._bait: dict[int, deque[float]] = {}
        # The most bait shots one window ever held, per player (a detection clears the ring).
        self._bait_peak: dict[int, int] = {}
        self._bait_tick: dict[int, int] = {}
        self.kill_clock = KillClock()
        self.skipped: Counter[str] = Counter()
        self.kills_classified = 0
        self.kills_positive = 0

    @classmethod
    def from_shipped(cls, config: AimDetectConfig | None = None) -> AimDetectDetector:
        """With the model shipped in ``anticheat/models`` (ModelMissingError when absent)."""
        return cls(load_shipped_model(), config)

    def skip_counts(self) -> Mapping[str, int]:
        """Kills and bait shots not judged, per skip reason."""
        return dict(self.skipped)

    def cusum(self, player: int) -> BernoulliCusum:
        """The player's CUSUM (created on first use)."""
        c = self._sums.get(player)
        if c is None:
            c = BernoulliCusum(self.theta0, self.theta1, self.h)
            self._sums[player] = c
        return c

    def expected_kills(self, theta: float) -> float:
        """Average kills to an alarm for a player whose kills are judged positive with
        probability ``theta`` (theta1: a cheater like the training's; theta0: an honest player)."""
        return average_run_length(theta, self.theta0, self.theta1, self.h)

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        self.features.on_aim(sample)
        return NO_DETECTIONS

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        self.features.on_spawn(spawn)
        return NO_DETECTIONS

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        self.features.on_shot(shot)
        if not shot.bait_hit or self._bait_tick.get(shot.shooter) == shot.tick:
            return NO_DETECTIONS
        reason = skip.shot_reason(shot.shooter, None, shot.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        if aimed_before_kill(self.kill_clock, shot.shooter, shot.time_s, shot.rewind_time_s):
            self.skipped["bait_before_kill"] += 1
            return NO_DETECTIONS
        self._bait_tick[shot.shooter] = shot.tick
        cfg = self.config
        ring = self._bait.get(shot.shooter)
        if ring is None:
            ring = deque(maxlen=cfg.bait_hits_to_detect)
            self._bait[shot.shooter] = ring
        now = shot.time_s
        ring.append(now)
        complete = len(ring) == cfg.bait_hits_to_detect and now - ring[0] <= cfg.bait_window_s
        # Bait shots are rare: counting the ring for the peak costs nothing that matters.
        held = len(ring) if complete else sum(1 for t in ring if now - t <= cfg.bait_window_s)
        if held > self._bait_peak.get(shot.shooter, 0):
            self._bait_peak[shot.shooter] = held
        if not complete:
            return NO_DETECTIONS
        span = ring[-1] - ring[0]
        ring.clear()
        log.info("aimdetect: player %d hit bait targets %d times", shot.shooter, cfg.bait_hits_to_detect)
        return (Detection(
            player=shot.shooter, tick=shot.tick, time_s=shot.time_s, detector=self.name, kind="bait_hit",
            value=float(cfg.bait_hits_to_detect), severity=cfg.bait_severity,
            reason=f"Bait-{cfg.bait_hits_to_detect}@{span:.1f}s",
            evidence={"bait_shots": cfg.bait_hits_to_detect, "span_s": span, "weapon": shot.weapon},
        ),)

    def on_kill(self, kill: KillEvent, skip: SkipBook) -> Sequence[Detection]:
        self.kill_clock.on_kill(kill.killer, kill.time_s)
        feats = self.features.on_kill(kill)
        if kill.killer == kill.victim:
            return NO_DETECTIONS  # a self-kill says nothing about aim
        reason = skip.shot_reason(kill.killer, kill.victim, kill.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        return self.judge(kill, feats)

    def judge(self, kill: KillEvent, feats: KillFeatures) -> Sequence[Detection]:
        """Classify one kill's features and add the verdict to the killer's CUSUM."""
        positive = bool(self.model.predict(feats.as_array())[0])
        self.kills_classified += 1
        self.kills_positive += positive
        c = self.cusum(kill.killer)
        if not c.observe(positive):
            return NO_DETECTIONS
        kills, positives = c.observations, c.positives
        c.restart()
        cfg = self.config
        log.info("aimdetect: player %d alarmed after %d kills (%d judged aim-assisted)", kill.killer, kills, positives)
        return (Detection(
            player=kill.killer, tick=kill.tick, time_s=kill.time_s, detector=self.name, kind="aimbot",
            value=c.peak, severity=cfg.severity,
            reason=f"AimDetect-{positives}/{kills}",
            evidence={"kills": kills, "positive_kills": positives, "cusum": c.peak, "threshold": self.h,
                      "theta0": self.theta0, "theta1": self.theta1,
                      "false_alarm_player_hours": cfg.false_alarm_player_hours,
                      "kills_per_hour": cfg.kills_per_hour, "alarm": c.alarms},
        ),)

    def reset_player(self, player: int) -> None:
        self.features.reset_player(player)
        self._sums.pop(player, None)
        self._bait.pop(player, None)
        self._bait_peak.pop(player, None)
        self._bait_tick.pop(player, None)
        self.kill_clock.forget(player)

    def scores(self, player: int) -> Mapping[str, float]:
        """Unitless:

        - ``llr``: the highest CUSUM statistic the player reached against its threshold h (1.0
          raises an alarm; the statistic restarts after one, the peak is kept).
        - ``bait_hit``: the most bait shots one ``bait_window_s`` ever held, against
          ``bait_hits_to_detect`` (a detection clears the ring; the value is kept).
        """
        c = self._sums.get(player)
        peak = self._bait_peak.get(player)
        if c is None and peak is None:
            return NO_SCORES
        return {
            "llr": 0.0 if c is None else over_limit(c.peak, self.h),
            "bait_hit": (peak or 0) / self.config.bait_hits_to_detect,
        }


@functools.lru_cache(maxsize=64)
def _threshold(theta0: float, theta1: float, arl_kills: float) -> float:
    # Pure and a few ms: every pipeline (one per re-run match in the lab) would redo it.
    return threshold_for_arl(theta0, theta1, arl_kills)
