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

**Phantom.** The culler sends a hidden enemy only a fraction of a second before he appears, too
little to track. The server therefore also sends each player a *phantom* (``server.phantoms``):
a record exactly like an enemy player's that walks the map always out of the player's line of
sight, whose angle each sample carries (``phantom``, ``phantom_angle_deg``). A phantom's life (a
few seconds) is an episode of its own channel, judged when it lasted ``phantom_min_samples``
samples; it is positive when the crosshair stayed on it (``on_deg``) for at least
``phantom_on_fraction`` of its samples and ``phantom_min_on_samples``, while the view turned
``phantom_track_turn_deg`` or more on it: the user of a wallhack follows it through the walls.
Arrivals alone are not enough here: an honest view sweeping the map crosses and briefly rests
on a phantom behind a wall by chance (arrivals in 79 of 896 honest phantom episodes). The verdicts go into a
second CUSUM with its own rates; an alarm is a ``phantom`` Detection. Phantom lives are judged
on every link (a bad link skips only hidden targets): lag and loss delay and thin the samples
but cannot aim at something the viewer never sees.
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
from anticheat.skip import SkipBook, SkipReason
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
        phantom_false_alarm_player_hours, phantom_episodes_per_hour, phantom_theta0,
            phantom_theta1, phantom_severity: the phantom channel's CUSUM and Detection, as above.
            phantom_theta0 is MEASURED, not assumed: 62 of 28,129 judged honest phantom
            episodes positive (0.0022; 95 % Clopper-Pearson upper bound 0.0028) over the 72
            honest player-hours of ``lab/sessions3`` (30-minute sessions, every skill on every
            link class, the three built-in maps; 390 judged an hour), no honest player-match
            above 3 positives; set to 0.01, above the bound with room for a player unlike these.
            phantom_episodes_per_hour: 500 assumed (more only makes the threshold stricter).
            phantom_theta1: designed for a wallhack's user who follows a quarter of his phantoms
            (0.25): where every enemy is often in sight (the ``open`` map) such a player mostly
            fights the visible ones, and follows 17-27 % of his phantoms (4-6 of 16-23 judged
            in 300 s on 60-300 ms links, ``referee match
            testbed/scenarios/cheat_phantom_open.toml --virtual``); on the walled maps it
            follows 75-90 % (the same on ``corridors``: 32-38 of 41-44). At 0.7 (designed for
            the walled maps) a player at 25 % never alarmed: each negative episode took back a
            third of a positive's step (drift ~0 per episode). With 0.25 the ARL is 20 judged
            episodes at 25 % and 5.0 at 80 % (5.2 before).
            phantom_false_alarm_player_hours is 2,500: h = 11.51 gives an ARL of 1.34e6 episodes
            at theta0 (2,690 player-hours at 500 an hour); at the measured honest rate (0.0022)
            it is 9.8e8 episodes.
        phantom_engage_deg: judge a phantom episode only when it starts this close to the view
            (deg; 180: always, the player has no reason to look at a phantom either way).
        phantom_min_samples: samples a phantom episode needs to be judged (2 s at 64 Hz: a
            wallhack's user needs time to find it).
        phantom_on_fraction, phantom_min_on_samples, phantom_track_turn_deg: a positive phantom
            episode (module doc).
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
    phantom_false_alarm_player_hours: float = searched(2500.0, 50.0, 1e5)
    phantom_episodes_per_hour: float = 500.0
    phantom_theta0: float = 0.01
    phantom_theta1: float = searched(0.25, 0.05, 0.9)
    phantom_engage_deg: float = 180.0
    phantom_min_samples: int = 128
    phantom_on_fraction: float = searched(0.3, 0.1, 0.8)
    phantom_min_on_samples: int = 32
    phantom_track_turn_deg: float = 20.0
    phantom_severity: float = 0.7

    def __post_init__(self) -> None:
        if not 0.0 < self.theta0 < self.theta1 < 1.0 or not 0.0 < self.phantom_theta0 < self.phantom_theta1 < 1.0:
            raise ValueError("wallhack: need 0 < theta0 < theta1 < 1 (and for the phantom's)")
        if not self.phantom_false_alarm_player_hours * self.phantom_episodes_per_hour > 1.0:
            raise ValueError("wallhack: phantom_false_alarm_player_hours * phantom_episodes_per_hour must exceed one")
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

    @property
    def phantom_arl_episodes(self) -> float:
        """The phantom channel's in-control average run length in judged episodes."""
        return self.phantom_false_alarm_player_hours * self.phantom_episodes_per_hour


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


class _Channel:
    """One kind's episodes and CUSUMs: which enemy a sample names and the angle to him."""

    def __init__(self, kind: str, theta0: float, theta1: float, arl_episodes: float, engage_deg: float) -> None:
        self.kind = kind
        self.engage_deg = engage_deg
        self.theta0, self.theta1 = theta0, theta1
        self.h = _threshold(theta0, theta1, arl_episodes)
        self.episodes: dict[int, _Episode] = {}
        self.sums: dict[int, BernoulliCusum] = {}
        self.judged = 0
        self.positive = 0

    def cusum(self, player: int) -> BernoulliCusum:
        c = self.sums.get(player)
        if c is None:
            c = self.sums[player] = BernoulliCusum(self.theta0, self.theta1, self.h)
        return c


class WallhackDetector(Detector):
    """Per episode with an enemy the player cannot see (a hidden one the culler sent, or the
    player's phantom), did the crosshair find or follow him."""

    name = "wallhack"

    def __init__(self, config: WallhackConfig | None = None) -> None:
        self.config = cfg = config or WallhackConfig()
        self._hidden = _Channel("hidden_tracking", cfg.theta0, cfg.theta1, cfg.arl_episodes, cfg.engage_deg)
        self._phantom = _Channel("phantom", cfg.phantom_theta0, cfg.phantom_theta1, cfg.phantom_arl_episodes,
                                 cfg.phantom_engage_deg)
        self.h = self._hidden.h
        self.phantom_h = self._phantom.h
        self._views: dict[int, tuple[float, float, float]] = {}

    @property
    def episodes_judged(self) -> int:
        """Hidden-target episodes judged (the phantom's: ``phantom_episodes_judged``)."""
        return self._hidden.judged

    @property
    def episodes_positive(self) -> int:
        return self._hidden.positive

    @property
    def phantom_episodes_judged(self) -> int:
        return self._phantom.judged

    @property
    def phantom_episodes_positive(self) -> int:
        return self._phantom.positive

    def cusum(self, player: int) -> BernoulliCusum:
        """The player's hidden-target CUSUM (created on first use)."""
        return self._hidden.cusum(player)

    def phantom_cusum(self, player: int) -> BernoulliCusum:
        """The player's phantom CUSUM (created on first use)."""
        return self._phantom.cusum(player)

    def expected_episodes(self, theta: float, *, phantom: bool = False) -> float:
        """Average judged episodes to an alarm when each is positive with probability ``theta``."""
        ch = self._phantom if phantom else self._hidden
        return average_run_length(theta, ch.theta0, ch.theta1, ch.h)

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        self._views.pop(spawn.player, None)
        out: list[Detection] = []
        for ch in (self._hidden, self._phantom):
            ep = ch.episodes.pop(spawn.player, None)
            if ep is not None:
                out.extend(self._judge(ch, spawn.player, ep, spawn.tick, spawn.time_s, skip))
        return out or NO_DETECTIONS

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        player = sample.player
        view = _view(sample.yaw_deg, sample.pitch_deg)
        before = self._views.get(player)
        self._views[player] = view
        turn = 0.0 if before is None else _between_deg(before, view)
        out = self._step(self._hidden, sample, sample.hidden_target, sample.hidden_angle_deg, view, turn, skip)
        if sample.phantom is None and player not in self._phantom.episodes:
            return out
        more = self._step(self._phantom, sample, sample.phantom, sample.phantom_angle_deg, view, turn, skip)
        if not more:
            return out
        return (*out, *more)

    def _step(self, ch: _Channel, sample: AimSample, target: int | None, angle: float,
              view: tuple[float, float, float], turn: float, skip: SkipBook) -> Sequence[Detection]:
        player = sample.player
        ep = ch.episodes.get(player)
        out: Sequence[Detection] = NO_DETECTIONS
        cfg = self.config
        if ep is not None and (target != ep.target or sample.time_s - ep.last_s > cfg.max_gap_s):
            del ch.episodes[player]
            out = self._judge(ch, player, ep, sample.tick, sample.time_s, skip)
            ep = None
        if target is None:
            return out
        if ep is None:
            on = int(angle <= cfg.on_deg)
            ch.episodes[player] = _Episode(target, angle, angle, sample.time_s, view, on_samples=on, on_run=on)
            return out
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

    def _judge(self, ch: _Channel, player: int, ep: _Episode, tick: int, time_s: float,
               skip: SkipBook) -> Sequence[Detection]:
        cfg = self.config
        phantom = ch is self._phantom
        if ep.samples < (cfg.phantom_min_samples if phantom else cfg.min_samples) or ep.first_deg > ch.engage_deg:
            return NO_DETECTIONS
        reason = skip.player_reason(player)
        # Lag and loss can make a real enemy look hidden (the viewer's picture is older than the
        # server's), so hidden targets are not judged on a bad link. They cannot put a crosshair
        # on a phantom that is behind walls from every eye the viewer could have: phantom lives
        # are judged on every link, as locked flicks are; only exempt players are skipped.
        if reason is SkipReason.EXEMPT or (reason is not None and not phantom):
            return NO_DETECTIONS
        if phantom:
            # A phantom lives seconds, long enough for an honest view to cross it and even
            # settle on it by chance (measured: honest arrivals on 8 % of phantoms); what only
            # an ESP user does is keep the crosshair on it, following it through the walls.
            positive = (ep.on_samples >= max(cfg.phantom_min_on_samples, cfg.phantom_on_fraction * ep.samples)
                        and ep.on_turn_deg >= cfg.phantom_track_turn_deg)
        else:
            tracked = ep.on_samples >= cfg.min_samples and ep.on_turn_deg >= cfg.track_turn_deg
            positive = ep.arrived or tracked
        ch.judged += 1
        ch.positive += positive
        c = ch.cusum(player)
        if not c.observe(positive):
            return NO_DETECTIONS
        episodes, positives = c.observations, c.positives
        c.restart()
        log.info("wallhack: player %d alarmed (%s) after %d episodes (%d positive)", player, ch.kind, episodes,
                 positives)
        evidence = {"episodes": episodes, "positive_episodes": positives, "cusum": c.peak, "threshold": ch.h,
                    "theta0": ch.theta0, "theta1": ch.theta1,
                    "false_alarm_player_hours": cfg.phantom_false_alarm_player_hours if phantom
                    else cfg.false_alarm_player_hours,
                    "episodes_per_hour": cfg.phantom_episodes_per_hour if phantom else cfg.episodes_per_hour,
                    "alarm": c.alarms}
        evidence["phantom" if phantom else "hidden_target"] = ep.target
        return (Detection(
            player=player, tick=tick, time_s=time_s, detector=self.name, kind=ch.kind,
            value=c.peak, severity=cfg.phantom_severity if phantom else cfg.severity,
            reason=f"{'Phantom' if phantom else 'Hidden'}-{positives}/{episodes}", evidence=evidence,
        ),)

    def reset_player(self, player: int) -> None:
        self._views.pop(player, None)
        for ch in (self._hidden, self._phantom):
            ch.episodes.pop(player, None)
            ch.sums.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """Unitless: ``llr`` (hidden targets) and ``phantom_llr``, the highest CUSUM statistic
        the player reached against its threshold h (1.0 raises an alarm; the statistic restarts
        after one, the peak is kept); each only once the player has one."""
        out = {}
        c = self._hidden.sums.get(player)
        if c is not None:
            out["llr"] = over_limit(c.peak, self._hidden.h)
        c = self._phantom.sums.get(player)
        if c is not None:
            out["phantom_llr"] = over_limit(c.peak, self._phantom.h)
        return out or NO_SCORES


@functools.lru_cache(maxsize=64)
def _threshold(theta0: float, theta1: float, arl_episodes: float) -> float:
    # Pure and a few ms: every pipeline (one per re-run match in the lab) would redo it.
    return threshold_for_arl(theta0, theta1, arl_episodes)
