"""Statistical aim analysis over a player's recent view angles (REFERENCES section 4).

The server-authoritative article scores a player's last >= 100 aim samples on three signs of a
machine holding the mouse, and reports a fourth:

- snap rate: how often the view turns faster than a hand can (> 50 deg in one 60 fps frame) and
  lands on an enemy; above 5 % it adds 0.4 * min(rate / 0.05, 1);
- jitter: human hands shake, 0.3-3.0 deg per frame; below 0.3 it adds 0.3 * (1 - jitter / 0.3);
- tracking efficiency: staying on a moving target more than 92 % of the time adds
  0.3 * min((eff - 0.92) / 0.08, 1);
- micro-corrections: the small steps right after a shot (mean and sd are reported, not scored).

The score is suspicious above 0.7. Our definitions (the article leaves them open) are in
``AimStatsConfig`` and ``_SampleFlags``. All per-sample work is O(1): each sample's contribution is
stored in a fixed-size ring and running totals are updated as samples enter and leave.

Normalisation. An AimSample is one client command. Angular steps are converted to "degrees per
60 fps frame" by ``step * frame_s / dt`` where dt is the server-time gap between the two commands,
floored at ``min_dt_s`` (one nominal command interval): commands applied in the same tick were
bunched by the network, not turned faster by the hand, and flooring under-states speeds, which
errs on the innocent side. Steps across a gap longer than ``max_gap_s`` (loss, pause, respawn)
are not measured at all.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, Detector
from anticheat.events import AimSample, Buttons, Detection, SpawnEvent
from anticheat.skip import SkipBook

log = logging.getLogger(__name__)

__all__ = ["AimStatsConfig", "AimStatsDetector", "AimStatsResult", "angular_step_deg", "score"]


@dataclass(frozen=True, slots=True)
class AimStatsConfig:
    """Tolerances of the statistical aim analysis (article defaults, our units: deg, s, m).

    Attributes:
        window_samples: ring size (commands). 640 = 10 s at 64 Hz; must be >= ``min_samples``.
        min_samples: below this many samples there is no score (article: 100).
        frame_s: the frame the article's per-frame figures refer to (1/60 s).
        min_dt_s: floor of a command gap (one 64 Hz command interval), see the module doc.
        max_gap_s: a larger gap between two commands breaks continuity (no step measured).
        snap_deg_per_frame: a turn at least this fast is a snap (article: 50 deg in one frame,
            i.e. 3000 deg/s, which is 46.9 deg in one 64 Hz command).
        snap_on_target_deg: ... if it ends with the nearest visible enemy's chest within this
            angle (3 deg: inside a torso at 5 m, inside a player at 15 m).
        snap_rate_threshold, snap_weight: 5 % and 0.4 (article). The rate is snaps per sample
            that had a visible enemy (a frame with no one to snap to cannot show a snap).
        still_deg: a step smaller than this is no input at all (mouse untouched); such samples
            say nothing about hand jitter and are left out of it.
        flick_deg_per_frame: steps at least this fast are deliberate flicks, not jitter or
            tracking (20 deg/frame = 1200 deg/s).
        human_jitter_deg: 0.3 deg/frame, the low end of the article's human range 0.3-3.0.
        jitter_weight: 0.3 (article).
        min_jitter_samples: fewer valid jitter samples in the window: no jitter component.
        engage_cone_deg: a sample is engaged with its target within this angle (10 deg).
        track_min_deg_per_frame: the view must turn at least this much (0.05 deg/frame = 3 deg/s)
            for the sample to count as tracking, so holding still on a still enemy does not count.
        target_radius_m, min_cone_deg: the tight cone is the angle a 0.2 m chest half-width spans
            at the target's distance, never narrower than 0.5 deg.
        tracking_threshold, tracking_weight: 92 % and 0.3 (article).
        min_tracking_samples: fewer tracking samples in the window: no tracking component.
        micro_after_shot_samples: steps within this many commands after a fired command are
            corrective (4 commands ~ 60 ms).
        micro_max_deg_per_frame: ... and smaller than this (2 deg/frame).
        micro_ring: how many correction magnitudes are kept for mean/sd.
        suspicious_score: 0.7 (article); a Detection is emitted above it.
        cooldown_s: at most one Detection per player per this many seconds.
        severity: severity of the Detection (a statistical hint, never proof on its own).
    """

    window_samples: int = 640
    min_samples: int = 100
    frame_s: float = 1.0 / 60.0
    min_dt_s: float = 1.0 / 64.0
    max_gap_s: float = 0.25
    snap_deg_per_frame: float = 50.0
    snap_on_target_deg: float = 3.0
    snap_rate_threshold: float = 0.05
    snap_weight: float = 0.4
    still_deg: float = 1e-3
    flick_deg_per_frame: float = 20.0
    human_jitter_deg: float = 0.3
    jitter_weight: float = 0.3
    min_jitter_samples: int = 30
    engage_cone_deg: float = 10.0
    track_min_deg_per_frame: float = 0.05
    target_radius_m: float = 0.2
    min_cone_deg: float = 0.5
    tracking_threshold: float = 0.92
    tracking_weight: float = 0.3
    min_tracking_samples: int = 30
    micro_after_shot_samples: int = 4
    micro_max_deg_per_frame: float = 2.0
    micro_ring: int = 256
    suspicious_score: float = 0.7
    cooldown_s: float = 30.0
    severity: float = 0.5

    def __post_init__(self) -> None:
        if self.window_samples < self.min_samples or self.min_samples < 1:
            raise ValueError("window_samples must be >= min_samples >= 1")
        if self.min_dt_s <= 0.0 or self.frame_s <= 0.0:
            raise ValueError("frame_s and min_dt_s must be positive")


@dataclass(frozen=True, slots=True)
class AimStatsResult:
    """The analysis of one player's window.

    Attributes:
        samples: samples in the window; insufficient: fewer than ``min_samples`` (score is 0).
        score: 0..1; suspicious: score > ``suspicious_score``.
        snap_rate: snaps per visible-target sample; snaps, visible: the counts behind it.
        jitter_deg: mean jitter (deg per 60 fps frame) or nan when too few samples.
        tracking_efficiency: on-target fraction of tracking samples, or nan when too few.
        micro_mean_deg, micro_sd_deg: corrective steps after shots (deg/frame), nan when none.
        snap_part, jitter_part, tracking_part: the three contributions to ``score``.
    """

    samples: int
    insufficient: bool
    score: float
    suspicious: bool
    snap_rate: float
    snaps: int
    visible: int
    jitter_deg: float
    jitter_samples: int
    tracking_efficiency: float
    tracking_samples: int
    micro_mean_deg: float
    micro_sd_deg: float
    snap_part: float
    jitter_part: float
    tracking_part: float


def angular_step_deg(yaw0: float, pitch0: float, yaw1: float, pitch1: float) -> float:
    """Great-circle angle (deg) between two view directions given as yaw/pitch in degrees."""
    p0 = math.radians(pitch0)
    p1 = math.radians(pitch1)
    dy = math.radians(yaw1 - yaw0)
    # Haversine form: accurate for the tiny steps jitter is made of, where acos loses digits.
    h = math.sin((p1 - p0) / 2.0) ** 2 + math.cos(p0) * math.cos(p1) * math.sin(dy / 2.0) ** 2
    return math.degrees(2.0 * math.asin(math.sqrt(min(1.0, max(0.0, h)))))


def _wrap180(deg: float) -> float:
    return (deg + 180.0) % 360.0 - 180.0


def score(snap_rate: float, jitter_deg: float, tracking_efficiency: float,
          config: AimStatsConfig) -> tuple[float, float, float]:
    """The article's three contributions (snap, jitter, tracking); nan inputs contribute 0."""
    snap = 0.0
    if snap_rate > config.snap_rate_threshold:
        snap = config.snap_weight * min(snap_rate / config.snap_rate_threshold, 1.0)
    jitter = 0.0
    if not math.isnan(jitter_deg) and jitter_deg < config.human_jitter_deg:
        jitter = config.jitter_weight * (1.0 - max(jitter_deg, 0.0) / config.human_jitter_deg)
    tracking = 0.0
    if not math.isnan(tracking_efficiency) and tracking_efficiency > config.tracking_threshold:
        span = 1.0 - config.tracking_threshold
        tracking = config.tracking_weight * min((tracking_efficiency - config.tracking_threshold) / span, 1.0)
    return snap, jitter, tracking


class _PlayerWindow:
    """Fixed-size rings of per-sample flags plus running totals (bounded state of one player)."""

    __slots__ = ("n", "head", "count", "visible", "snap", "jitter", "track", "on_track",
                 "sum_visible", "sum_snap", "sum_jitter", "n_jitter", "sum_track", "sum_on_track",
                 "micro", "micro_head", "micro_count", "prev", "prev_vel", "prev_step", "since_fire",
                 "last_emit_s")

    def __init__(self, n: int, micro_ring: int) -> None:
        self.n = n
        self.head = 0
        self.count = 0
        self.visible = [False] * n
        self.snap = [False] * n
        self.jitter = [math.nan] * n
        self.track = [False] * n
        self.on_track = [False] * n
        self.sum_visible = 0
        self.sum_snap = 0
        self.sum_jitter = 0.0
        self.n_jitter = 0
        self.sum_track = 0
        self.sum_on_track = 0
        self.micro = [0.0] * micro_ring
        self.micro_head = 0
        self.micro_count = 0
        self.prev: AimSample | None = None
        self.prev_vel: tuple[float, float] | None = None
        self.prev_step = 0.0
        self.since_fire = 1 << 30
        self.last_emit_s = -math.inf

    def push(self, visible: bool, snap: bool, jitter: float, track: bool, on_track: bool) -> None:
        i = self.head
        if self.count == self.n:
            self.sum_visible -= self.visible[i]
            self.sum_snap -= self.snap[i]
            self.sum_track -= self.track[i]
            self.sum_on_track -= self.on_track[i]
            old = self.jitter[i]
            if not math.isnan(old):
                self.sum_jitter -= old
                self.n_jitter -= 1
        else:
            self.count += 1
        self.visible[i] = visible
        self.snap[i] = snap
        self.jitter[i] = jitter
        self.track[i] = track
        self.on_track[i] = on_track
        self.sum_visible += visible
        self.sum_snap += snap
        self.sum_track += track
        self.sum_on_track += on_track
        if not math.isnan(jitter):
            self.sum_jitter += jitter
            self.n_jitter += 1
        self.head = (i + 1) % self.n
        if self.head == 0:
            # Re-add the float total from the ring once per lap so rounding never accumulates.
            self.sum_jitter = math.fsum(j for j in self.jitter if not math.isnan(j))

    def push_micro(self, value: float) -> None:
        self.micro[self.micro_head] = value
        self.micro_head = (self.micro_head + 1) % len(self.micro)
        self.micro_count = min(self.micro_count + 1, len(self.micro))

    def break_continuity(self) -> None:
        self.prev = None
        self.prev_vel = None
        self.since_fire = 1 << 30


class AimStatsDetector(Detector):
    """Inline statistical aim analysis; emits ``aimstats``/``aim_stats`` Detections."""

    name = "aimstats"

    def __init__(self, config: AimStatsConfig | None = None) -> None:
        self.config = config or AimStatsConfig()
        self._players: dict[int, _PlayerWindow] = {}
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Samples not analysed, per skip reason."""
        return dict(self.skipped)

    def _window(self, player: int) -> _PlayerWindow:
        w = self._players.get(player)
        if w is None:
            w = _PlayerWindow(self.config.window_samples, self.config.micro_ring)
            self._players[player] = w
        return w

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        reason = skip.player_reason(sample.player)
        w = self._window(sample.player)
        if reason is not None:
            self.skipped[reason.value] += 1
            # A lagging player's commands arrive in bursts: do not measure steps across it.
            w.break_continuity()
            return NO_DETECTIONS
        self._ingest(w, sample)
        if w.count < self.config.min_samples:
            return NO_DETECTIONS
        if sample.time_s - w.last_emit_s < self.config.cooldown_s:
            return NO_DETECTIONS
        # The full result (micro-correction statistics included) is only built when it is needed.
        if sum(score(*self._rates(w), self.config)) <= self.config.suspicious_score:
            return NO_DETECTIONS
        w.last_emit_s = sample.time_s
        return (self._detection(sample, self._result(w)),)

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        w = self._players.get(spawn.player)
        if w is not None:
            # The respawn sets a new view: that turn is not the player's hand.
            w.break_continuity()
        return NO_DETECTIONS

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)

    def result(self, player: int) -> AimStatsResult:
        """The current analysis of ``player`` (insufficient when unknown)."""
        w = self._players.get(player)
        if w is None:
            w = _PlayerWindow(1, 1)
        return self._result(w)

    def _ingest(self, w: _PlayerWindow, s: AimSample) -> None:
        cfg = self.config
        prev = w.prev
        visible = s.target is not None
        snap = False
        jitter = math.nan
        track = False
        on_track = False
        fired = bool(s.buttons & Buttons.FIRE)
        if prev is not None and 0.0 <= s.time_s - prev.time_s <= cfg.max_gap_s:
            dt = max(s.time_s - prev.time_s, cfg.min_dt_s)
            to_frame = cfg.frame_s / dt
            step = angular_step_deg(prev.yaw_deg, prev.pitch_deg, s.yaw_deg, s.pitch_deg)
            speed = step * to_frame
            cos_p = math.cos(math.radians(0.5 * (prev.pitch_deg + s.pitch_deg)))
            vel = (_wrap180(s.yaw_deg - prev.yaw_deg) * cos_p * to_frame, (s.pitch_deg - prev.pitch_deg) * to_frame)
            if visible and speed >= cfg.snap_deg_per_frame and s.target_angle_deg <= cfg.snap_on_target_deg:
                snap = True
            if speed < cfg.flick_deg_per_frame:
                pv = w.prev_vel
                if pv is not None and max(step, w.prev_step) > cfg.still_deg:
                    # Jitter is the unsteady part of the motion: the change of angular velocity
                    # between two frames. The velocity itself follows the target and says nothing
                    # about whose hand it is.
                    jitter = math.hypot(vel[0] - pv[0], vel[1] - pv[1])
                engaged = (visible and prev.target == s.target
                           and prev.target_angle_deg <= cfg.engage_cone_deg)
                if engaged and speed >= cfg.track_min_deg_per_frame:
                    track = True
                    cone = max(cfg.min_cone_deg,
                               math.degrees(math.atan2(cfg.target_radius_m, max(s.target_distance_m, 1e-3))))
                    on_track = s.target_angle_deg <= cone
            if w.since_fire < cfg.micro_after_shot_samples and cfg.still_deg < speed < cfg.micro_max_deg_per_frame:
                w.push_micro(speed)
            w.prev_vel = vel if speed < cfg.flick_deg_per_frame else None
            w.prev_step = step
        else:
            w.prev_vel = None
        w.since_fire = 0 if fired else w.since_fire + 1
        w.prev = s
        w.push(visible, snap, jitter, track, on_track)

    def _rates(self, w: _PlayerWindow) -> tuple[float, float, float]:
        """(snap rate, jitter or nan, tracking efficiency or nan) from the running totals."""
        cfg = self.config
        snap_rate = w.sum_snap / w.sum_visible if w.sum_visible else 0.0
        jitter = w.sum_jitter / w.n_jitter if w.n_jitter >= cfg.min_jitter_samples else math.nan
        eff = w.sum_on_track / w.sum_track if w.sum_track >= cfg.min_tracking_samples else math.nan
        return snap_rate, jitter, eff

    def _result(self, w: _PlayerWindow) -> AimStatsResult:
        cfg = self.config
        snap_rate, jitter, eff = self._rates(w)
        if w.micro_count:
            vals = w.micro[: w.micro_count] if w.micro_count < len(w.micro) else w.micro
            m = math.fsum(vals) / len(vals)
            sd = math.sqrt(math.fsum((v - m) ** 2 for v in vals) / len(vals))
        else:
            m = sd = math.nan
        insufficient = w.count < cfg.min_samples
        parts = (0.0, 0.0, 0.0) if insufficient else score(snap_rate, jitter, eff, cfg)
        total = sum(parts)
        return AimStatsResult(
            samples=w.count, insufficient=insufficient, score=total,
            suspicious=not insufficient and total > cfg.suspicious_score,
            snap_rate=snap_rate, snaps=w.sum_snap, visible=w.sum_visible,
            jitter_deg=jitter, jitter_samples=w.n_jitter,
            tracking_efficiency=eff, tracking_samples=w.sum_track,
            micro_mean_deg=m, micro_sd_deg=sd,
            snap_part=parts[0], jitter_part=parts[1], tracking_part=parts[2],
        )

    def _detection(self, s: AimSample, r: AimStatsResult) -> Detection:
        log.info("aimstats: player %d score %.2f", s.player, r.score)
        figures: dict[str, float | int] = {
            "samples": r.samples, "snap_rate": r.snap_rate, "snaps": r.snaps, "visible": r.visible,
            "jitter_deg": r.jitter_deg, "jitter_samples": r.jitter_samples,
            "tracking_efficiency": r.tracking_efficiency, "tracking_samples": r.tracking_samples,
            "micro_mean_deg": r.micro_mean_deg, "micro_sd_deg": r.micro_sd_deg,
            "snap_part": r.snap_part, "jitter_part": r.jitter_part, "tracking_part": r.tracking_part,
        }
        # nan marks "not measured"; leaving it out keeps the evidence valid JSON.
        evidence: dict[str, float | int | str] = {k: v for k, v in figures.items() if not math.isnan(v)}
        return Detection(
            player=s.player, tick=s.tick, time_s=s.time_s, detector=self.name, kind="aim_stats",
            value=r.score, severity=self.config.severity,
            reason=f"AimStats-{r.score:.2f}@{r.samples}", evidence=evidence,
        )
