"""AimDetect: per-kill SVM verdicts accumulated by a Threshold Random Walk, plus bait targets.

(REFERENCES section 5.) Every kill is turned into eight features (``features``) and classified
by the trained SVM (``model``). The verdicts feed the killer's walk (``anticheat.detectors.trw``)
with theta1 = the model's measured held-out TPR and theta0 = its FPR. When the walk
reaches CHEATER an ``aimbot`` Detection is emitted once; the walk then stays CHEATER until the
player is reset. When it reaches HONEST it restarts from LR = 1, so a player who turns the aimbot
on later is still caught; each restarted walk again has a false-positive rate below
alpha / (1 - beta), so over k walks an honest player's risk grows to about k * alpha, which is why
the default alpha is the paper's smallest.

Choice of alpha = beta = 0.001 (the paper's last row: TPR 97.6 %, FPR 0.7 %). It is the row that
best protects innocents. With the paper's per-kill rates (0.836 / 0.058) the exact per-walk false
positive rate is 0.033 % at 0.001 against 0.39 % at 0.005 or 0.01 (the lattice of a walk with two
fixed steps makes 0.005 and 0.01 nearly equivalent), and the cost is small: a cheater needs 4.2
kills on average instead of 2.9.

Bait targets: the server places an invisible target just above a victim after each kill; an honest
player's inertial shots land around the victim, an aimbot's snap onto the bait. A ray through a
bait is strong evidence. Shots, not pellets, are counted (a shotgun blast is one), and a
``bait_hit`` Detection is emitted when ``bait_hits_to_detect`` bait shots fall within
``bait_window_s``. The default is 2: one stray spray-climb through the bait right after a kill can
happen to an honest player holding the trigger, two in two minutes is a pattern.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anticheat.detectors.aimdetect.features import FEATURE_NAMES, FeatureConfig, FeatureExtractor, KillFeatures
from anticheat.detectors.aimdetect.model import TrainedModel, load_shipped_model
from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import AimSample, Detection, KillEvent, ShotResult, SpawnEvent
from anticheat.skip import SkipBook
from anticheat.tolerances import searched
from anticheat.detectors.trw import Decision, ThresholdRandomWalk, wald_thresholds

log = logging.getLogger(__name__)

__all__ = ["AimDetectConfig", "AimDetectDetector"]


@dataclass(frozen=True, slots=True)
class AimDetectConfig:
    """AimDetect tolerances.

    Attributes:
        alpha, beta: the TRW's tolerated false-positive and false-negative rates (0.001 each, see
            the module doc).
        restart_on_honest: restart a walk that decided HONEST (True) instead of leaving the player
            cleared for the rest of the session.
        severity: of the ``aimbot`` Detection.
        bait_hits_to_detect: bait shots needed for a ``bait_hit`` Detection (2).
        bait_window_s: ... within this many seconds (120 s).
        bait_severity: of the ``bait_hit`` Detection (0.9: the paper uses bait hits as ground truth).
        features: feature-extraction constants.
    """

    alpha: float = searched(0.001, 1e-5, 0.02)
    beta: float = searched(0.001, 1e-4, 0.1)
    restart_on_honest: bool = True
    severity: float = 0.8
    bait_hits_to_detect: int = searched(2, 1, 4)
    bait_window_s: float = 120.0
    bait_severity: float = 0.9
    features: FeatureConfig = field(default_factory=FeatureConfig)

    def __post_init__(self) -> None:
        if self.bait_hits_to_detect < 1:
            raise ValueError("bait_hits_to_detect must be >= 1")
        # The walk's thresholds need them (0 < alpha, beta and alpha + beta < 1): a tolerance file
        # is refused here, not by the first detector built from it.
        wald_thresholds(self.alpha, self.beta)


class AimDetectDetector(Detector):
    """Inline AimDetect. Needs a trained model (``from_shipped`` loads the packaged one)."""

    name = "aimdetect"

    def __init__(self, model: TrainedModel, config: AimDetectConfig | None = None) -> None:
        if tuple(model.feature_names) != FEATURE_NAMES:
            raise ValueError(f"model features {model.feature_names!r} are not AimDetect's {FEATURE_NAMES!r}")
        self.config = config or AimDetectConfig()
        self.model = model
        self.theta0 = model.fpr
        self.theta1 = model.tpr
        # Fails here, not on the first kill, when the model is no better than chance.
        ThresholdRandomWalk(self.theta0, self.theta1, self.config.alpha, self.config.beta)
        # Compile (or load) the classifier's kernel for this model's arrays now, not on the first kill.
        model.predict(np.zeros(len(FEATURE_NAMES)))
        self.features = FeatureExtractor(self.config.features)
        self._walks: dict[int, ThresholdRandomWalk] = {}
        self._reported: set[int] = set()
        self._bait: dict[int, deque[float]] = {}
        # The most bait shots one window ever held, per player (a detection clears the ring).
        self._bait_peak: dict[int, int] = {}
        self._bait_tick: dict[int, int] = {}
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

    def walk(self, player: int) -> ThresholdRandomWalk:
        """The player's current walk (created on first use)."""
        w = self._walks.get(player)
        if w is None:
            cfg = self.config
            w = ThresholdRandomWalk(self.theta0, self.theta1, cfg.alpha, cfg.beta)
            self._walks[player] = w
        return w

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
        feats = self.features.on_kill(kill)
        if kill.killer == kill.victim:
            return NO_DETECTIONS  # a self-kill says nothing about aim
        reason = skip.shot_reason(kill.killer, kill.victim, kill.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        return self.judge(kill, feats)

    def judge(self, kill: KillEvent, feats: KillFeatures) -> Sequence[Detection]:
        """Classify one kill's features and advance the killer's walk."""
        positive = bool(self.model.predict(feats.as_array())[0])
        self.kills_classified += 1
        self.kills_positive += positive
        walk = self.walk(kill.killer)
        decision = walk.observe(positive)
        if decision is Decision.HONEST and self.config.restart_on_honest:
            walk.reset()
            return NO_DETECTIONS
        if decision is not Decision.CHEATER or kill.killer in self._reported:
            return NO_DETECTIONS
        self._reported.add(kill.killer)
        log.info("aimdetect: player %d decided cheater after %d kills", kill.killer, walk.observations)
        return (Detection(
            player=kill.killer, tick=kill.tick, time_s=kill.time_s, detector=self.name, kind="aimbot",
            value=walk.log_lr, severity=self.config.severity,
            reason=f"AimDetect-{walk.positives}/{walk.observations}",
            evidence={"kills": walk.observations, "positive_kills": walk.positives, "log_lr": walk.log_lr,
                      "log_threshold": walk.thresholds.log_upper, "theta0": self.theta0,
                      "theta1": self.theta1, "alpha": walk.alpha, "beta": walk.beta},
        ),)

    def reset_player(self, player: int) -> None:
        self.features.reset_player(player)
        self._walks.pop(player, None)
        self._reported.discard(player)
        self._bait.pop(player, None)
        self._bait_peak.pop(player, None)
        self._bait_tick.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """Unitless:

        - ``llr``: the TRW's log likelihood ratio against its upper threshold ln A (1.0 decides
          "cheater"). A walk that decides HONEST restarts, so the value is the highest log LR
          any of the player's walks reached (0 before a positive kill); CHEATER is kept, and so
          is its value.
        - ``bait_hit``: the most bait shots one ``bait_window_s`` ever held, against
          ``bait_hits_to_detect`` (a detection clears the ring; the value is kept).
        """
        walk = self._walks.get(player)
        peak = self._bait_peak.get(player)
        if walk is None and peak is None:
            return NO_SCORES
        return {
            "llr": 0.0 if walk is None else over_limit(walk.peak_log_lr, walk.thresholds.log_upper),
            "bait_hit": (peak or 0) / self.config.bait_hits_to_detect,
        }
