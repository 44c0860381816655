"""Wallhack: the crosshair finds enemies the player cannot see.

The server knows what it sent each player and what that player could see: every ``AimSample``
carries the nearest enemy, by angle, that was sent (the culler sends a player about to come round
a corner before he can be seen) but is not in the player's line of sight (``hidden_target``,
``hidden_angle_deg``). A human cannot see that enemy; a client that draws every entity it
receives can. The evidence is what any such client's user does with it, whatever the cheat:

* **arrival**: the crosshair arrives on a hidden enemy by the player's own turn and stays: the
  angle to it falls to ``on_deg`` or less, by at least ``close_deg``, while the view turns at
  least ``own_turn`` times that fall (so an enemy walking into a held crosshair, the human pre-aim
  of a static corner, is not an arrival), and stays within ``on_deg`` for ``settle_samples``
  samples (a turn that sweeps across him is not one);
* **tracking**: the crosshair stays on a hidden enemy (within ``on_deg``) for ``min_samples``
  samples or more while the view turns ``track_turn_deg`` or more (it follows him through the wall).

An **episode** is a run of one player's samples with the same hidden enemy (no gap over
``max_gap_s``; a respawn ends it). Episodes of at least ``min_samples`` samples that start with
the enemy within ``engage_deg`` of the view are judged, positive when they hold an arrival or
tracking, and the verdicts go into Page's CUSUM (``anticheat.detectors.cusum``) whose threshold
gives one false alarm per ``false_alarm_player_hours`` of honest play at ``episodes_per_hour``
judged episodes an hour. Every alarm is a ``hidden_tracking`` Detection.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.detectors.cusum import BernoulliCusum, average_run_length, threshold_for_arl
from anticheat.events import AimSample, Detection, SpawnEvent
from anticheat.skip import SkipBook
from anticheat.tolerances import searched

log = logging.getLogger(__name__)

__all__ = ["WallhackConfig", "WallhackDetector"]


@dataclass(frozen=True, slots=True)
class WallhackConfig:
    """Wallhack (hidden tracking) tolerances.

    Attributes:
        false_alarm_player_hours: the CUSUM's in-control average run length in player-hours: an
            honest player raises one false alarm per this many hours of play, on average (5,000).
        episodes_per_hour: judged episodes per player-hour that turn those hours into episodes
            (1,200: measured 722 an hour on the corridors map, honest bots of every skill on 25 to
            300 ms links; assuming more only makes the threshold stricter).
        theta0: an honest episode's probability of being positive. MEASURED, not assumed: 40 of
            1,563 judged episodes (0.026; 95 % Clopper-Pearson upper bound 0.035) of 2.17 honest
            player-hours: honest bots of low, average, high and
            pro skill on 25-300 ms links, corridors map, ``referee match
            testbed/scenarios/cheat_wallhack.toml --virtual --duration 300 --seed 113`` and
            a 12-bot scenario of every skill (seeds 501, 502), each replay's samples fed to this
            detector. Set to 0.05, above the upper bound. Re-measure when the verdict's fields or
            the culler's horizon change.
        theta1: the rate the test is designed to detect (0.35: a player whose crosshair finds
            about one hidden enemy in three).
        engage_deg: an episode is judged only when the hidden enemy starts within this angle of
            the view (deg): far outside it, the player has no reason to turn that way either way.
        on_deg: the crosshair is "on" a hidden enemy within this angle of its chest (deg).
        close_deg: an arrival closes the angle by at least this much (deg).
        own_turn: ... while the view turns at least this multiple of the closing (unitless).
        settle_samples: an arrival stays on the enemy for this many samples in a row.
        track_turn_deg: tracking: the view turns at least this far (deg) while on the enemy.
        min_samples: samples an episode needs to be judged (and tracking needs on the enemy).
        max_gap_s: a longer gap between samples ends the episode (s).
        severity: of the Detection.
    """

    false_alarm_player_hours: float = searched(5000.0, 50.0, 1e5)
    episodes_per_hour: float = 1200.0
    theta0: float = 0.05
    theta1: float = searched(0.35, 0.1, 0.9)
    engage_deg: float = 45.0
    on_deg: float = searched(4.0, 1.0, 10.0)
    close_deg: float = 6.0
    own_turn: float = 0.7
    settle_samples: int = 4
    track_turn_deg: float = 5.0
    min_samples: int = 6
    max_gap_s: float = 0.1
    severity: float = 0.6

    def __post_init__(self) -> None:
        if not 0.0 < self.theta0 < self.theta1 < 1.0:
            raise ValueError("wallhack: need 0 < theta0 < theta1 < 1")
        if not self.false_alarm_player_hours > 0.0 or not self.episodes_per_hour > 0.0:
            raise ValueError("wallhack: false_alarm_player_hours and episodes_per_hour must be positive")
        if self.false_alarm_player_hours * self.episodes_per_hour <= 1.0:
            raise ValueError("wallhack: false_alarm_player_hours * episodes_per_hour must exceed one episode")
        if self.min_samples < 2 or not self.on_deg > 0.0 or self.max_gap_s <= 0.0:
            raise ValueError("wallhack: min_samples >= 2, on_deg > 0, max_gap_s > 0")

    @property
    def arl_episodes(self) -> float:
        """The in-control average run length in judged episodes."""
        return self.false_alarm_player_hours * self.episodes_per_hour


@dataclass(slots=True)
class _Episode:
    """One player's run of samples with the same hidden enemy (angles in deg)."""

    target: int
    first_deg: float
    last_deg: float
    last_s: float
    last_view: tuple[float, float, float]
    samples: int = 1
    turn_deg: float = 0.0
    on_samples: int = 0
    on_turn_deg: float = 0.0
    on_run: int = 0
    closed: bool = False
    arrived: bool = False


def _view(yaw_deg: float, pitch_deg: float) -> tuple[float, float, float]:
    """Unit view vector of ``world.state.view_direction``'s convention."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    cp = math.cos(p)
    return cp * math.cos(y), cp * math.sin(y), math.sin(p)


def _between_deg(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """Angle between two unit vectors (deg)."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    return math.degrees(math.acos(max(-1.0, min(1.0, d))))


class WallhackDetector(Detector):
    """Hidden tracking: per episode with a hidden enemy, did the crosshair find or follow him."""

    name = "wallhack"

    def __init__(self, config: WallhackConfig | None = None) -> None:
        self.config = cfg = config or WallhackConfig()
        self.h = _threshold(cfg.theta0, cfg.theta1, cfg.arl_episodes)
        self._episodes: dict[int, _Episode] = {}
        self._views: dict[int, tuple[float, float, float]] = {}
        self._sums: dict[int, BernoulliCusum] = {}
        self.episodes_judged = 0
        self.episodes_positive = 0

    def cusum(self, player: int) -> BernoulliCusum:
        """The player's CUSUM (created on first use)."""
        c = self._sums.get(player)
        if c is None:
            c = self._sums[player] = BernoulliCusum(self.config.theta0, self.config.theta1, self.h)
        return c

    def expected_episodes(self, theta: float) -> float:
        """Average judged episodes to an alarm when each is positive with probability ``theta``."""
        return average_run_length(theta, self.config.theta0, self.config.theta1, self.h)

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        self._views.pop(spawn.player, None)
        ep = self._episodes.pop(spawn.player, None)
        return NO_DETECTIONS if ep is None else self._judge(spawn.player, ep, spawn.tick, spawn.time_s, skip)

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        player = sample.player
        view = _view(sample.yaw_deg, sample.pitch_deg)
        before = self._views.get(player)
        self._views[player] = view
        ep = self._episodes.get(player)
        out: Sequence[Detection] = NO_DETECTIONS
        hidden = sample.hidden_target
        if ep is not None and (hidden != ep.target or sample.time_s - ep.last_s > self.config.max_gap_s):
            del self._episodes[player]
            out = self._judge(player, ep, sample.tick, sample.time_s, skip)
            ep = None
        if hidden is None:
            return out
        angle = sample.hidden_angle_deg
        if ep is None:
            on = int(angle <= self.config.on_deg)
            self._episodes[player] = _Episode(hidden, angle, angle, sample.time_s, view, on_samples=on, on_run=on)
            return out
        cfg = self.config
        turn = 0.0 if before is None else _between_deg(before, view)
        ep.samples += 1
        ep.turn_deg += turn
        ep.last_deg = angle
        ep.last_s = sample.time_s
        if angle <= cfg.on_deg:
            ep.on_samples += 1
            ep.on_turn_deg += turn
            ep.on_run += 1
            if ep.on_run == 1:
                closing = ep.first_deg - angle
                ep.closed = closing >= cfg.close_deg and ep.turn_deg >= cfg.own_turn * closing
            if ep.closed and ep.on_run >= cfg.settle_samples:
                ep.arrived = True
        else:
            ep.on_run = 0
        return out

    def _judge(self, player: int, ep: _Episode, tick: int, time_s: float, skip: SkipBook) -> Sequence[Detection]:
        cfg = self.config
        if ep.samples < cfg.min_samples or ep.first_deg > cfg.engage_deg:
            return NO_DETECTIONS
        if skip.player_reason(player) is not None:
            return NO_DETECTIONS
        tracked = ep.on_samples >= cfg.min_samples and ep.on_turn_deg >= cfg.track_turn_deg
        positive = ep.arrived or tracked
        self.episodes_judged += 1
        self.episodes_positive += positive
        c = self.cusum(player)
        if not c.observe(positive):
            return NO_DETECTIONS
        episodes, positives = c.observations, c.positives
        c.restart()
        log.info("wallhack: player %d alarmed after %d episodes (%d positive)", player, episodes, positives)
        return (Detection(
            player=player, tick=tick, time_s=time_s, detector=self.name, kind="hidden_tracking",
            value=c.peak, severity=cfg.severity, reason=f"Hidden-{positives}/{episodes}",
            evidence={"episodes": episodes, "positive_episodes": positives, "cusum": c.peak, "threshold": self.h,
                      "theta0": cfg.theta0, "theta1": cfg.theta1, "hidden_target": ep.target,
                      "false_alarm_player_hours": cfg.false_alarm_player_hours,
                      "episodes_per_hour": cfg.episodes_per_hour, "alarm": c.alarms},
        ),)

    def reset_player(self, player: int) -> None:
        self._episodes.pop(player, None)
        self._views.pop(player, None)
        self._sums.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """Unitless: ``llr``, the highest CUSUM statistic the player reached against its
        threshold h (1.0 raises an alarm; the statistic restarts after one, the peak is kept)."""
        c = self._sums.get(player)
        if c is None:
            return NO_SCORES
        return {"llr": over_limit(c.peak, self.h)}


@functools.lru_cache(maxsize=64)
def _threshold(theta0: float, theta1: float, arl_episodes: float) -> float:
    # Pure and a few ms: every pipeline (one per re-run match in the lab) would redo it.
    return threshold_for_arl(theta0, theta1, arl_episodes)
