"""AimDetect's eight per-kill features, extracted from the event stream (REFERENCES section 5).

The paper names the features (attack attempts, deaths before the kill, time to kill, cursor
acceleration, hit ratio while crouching, state-aware hits, state-aware hit ratio, headshot
suspiciousness) but not their exact formulas; ``KillFeatures`` documents ours. The extractor
keeps a bounded state per player: a ring of recent view angles, a ring of recent shot outcomes,
and a handful of counters.

Event order is the server's: within a tick, aim samples, then shots (one per pellet), then kills.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from anticheat.aimstats import angular_step_deg
from anticheat.events import AimSample, KillEvent, ShotResult, SpawnEvent

__all__ = ["FEATURE_NAMES", "FeatureConfig", "FeatureExtractor", "KillFeatures"]

FEATURE_NAMES: tuple[str, ...] = (
    "attempts",
    "deaths",
    "time_to_kill_s",
    "cursor_accel_deg_s2",
    "crouch_hit_ratio",
    "hard_hits",
    "hard_hit_ratio",
    "headshot_suspicion",
)


@dataclass(frozen=True, slots=True)
class FeatureConfig:
    """Feature-extraction constants.

    Attributes:
        aim_ring: view samples kept per player (64 = 1 s at 64 Hz), enough for the windows below.
        accel_window_s: F4 looks at the view in this long a window ending at the kill (0.5 s).
        flick_window_s: F8 measures the view travel in this window ending at the kill (0.25 s).
        min_dt_s: floor of a command gap (one 64 Hz interval; bunched commands are not fast hands).
        max_gap_s: no velocity is measured across a longer gap between two commands.
        shot_ring: F5-F7 are computed over the player's last this many shots (32).
        engagement_gap_s: F3's engagement ends after this long without a shot (3 s).
        hard_speed_m_s: F6 hard state: horizontal speed at least this (3 m/s, ~55 % of a rifle's
            5.46 m/s run speed, where running inaccuracy dominates).
        target_switch_s: F6 hard state: the nearest visible enemy changed (or appeared) less than
            this long before the shot (0.3 s, about a human reaction time).
        head_radius_m: F8: the head hitbox radius (0.10 m, world/hitbox.py) sets the target width.
    """

    aim_ring: int = 64
    accel_window_s: float = 0.5
    flick_window_s: float = 0.25
    min_dt_s: float = 1.0 / 64.0
    max_gap_s: float = 0.25
    shot_ring: int = 32
    engagement_gap_s: float = 3.0
    hard_speed_m_s: float = 3.0
    target_switch_s: float = 0.3
    head_radius_m: float = 0.10


@dataclass(frozen=True, slots=True)
class KillFeatures:
    """One kill's features, in ``FEATURE_NAMES`` order.

    Attributes:
        attempts (F1): shots (pellet 0 of each) the killer fired since the later of its previous
            kill and its latest spawn, the killing shot included.
        deaths (F2): times the killer died since its previous kill (since connect for the first).
        time_to_kill_s (F3): seconds from the first shot of the engagement that ended in this kill
            to the kill. An engagement of a victim starts with a shot that hit that victim, or a
            shot fired while that victim was the nearest visible enemy, and ends when a shot goes
            to someone else or after ``engagement_gap_s`` without a shot. 0 when no shot of the
            engagement was seen (a replay that lost events).
        cursor_accel_deg_s2 (F4): peak angular acceleration of the view (deg/s^2) over the
            ``accel_window_s`` before the kill: |v_i - v_(i-1)| / dt_i with v the view's angular
            velocity vector (deg/s) between consecutive commands.
        crouch_hit_ratio (F5): hits / shots among the last ``shot_ring`` shots fired while
            crouching (0 when none). A shotgun shot is a hit when any pellet hits.
        hard_hits (F6): hits among the last ``shot_ring`` shots fired in a hard state: moving at
            >= ``hard_speed_m_s``, airborne, or within ``target_switch_s`` of a target change.
        hard_hit_ratio (F7): hard_hits / hard-state shots in that ring (0 when none).
        headshot_suspicion (F8): for a headshot kill, Fitts's index of difficulty of the flick
            that landed it, log2(1 + travel / w): travel is the view's path length (deg) in the
            ``flick_window_s`` before the kill and w the head's angular radius at the kill
            distance, atan(head_radius_m / distance). A headshot at the end of a long flick onto
            a far head is hard for a hand and trivial for an aimbot. 0 for other kills.
    """

    attempts: float
    deaths: float
    time_to_kill_s: float
    cursor_accel_deg_s2: float
    crouch_hit_ratio: float
    hard_hits: float
    hard_hit_ratio: float
    headshot_suspicion: float

    def as_array(self) -> np.ndarray:
        """The features as a float64 vector in ``FEATURE_NAMES`` order."""
        return np.array([getattr(self, n) for n in FEATURE_NAMES], dtype=np.float64)


class _ShotRecord:
    __slots__ = ("tick", "crouched", "hard", "hit")

    def __init__(self, tick: int, crouched: bool, hard: bool, hit: bool) -> None:
        self.tick = tick
        self.crouched = crouched
        self.hard = hard
        self.hit = hit


class _PlayerFeatures:
    """Bounded per-player extraction state."""

    __slots__ = ("aim", "last", "target_changed_s", "attempts", "deaths", "engage_victim",
                 "engage_start_s", "engage_last_s", "shots")

    def __init__(self, cfg: FeatureConfig) -> None:
        self.aim: deque[tuple[float, float, float]] = deque(maxlen=cfg.aim_ring)
        self.last: AimSample | None = None
        self.target_changed_s = -math.inf
        self.attempts = 0
        self.deaths = 0
        self.engage_victim: int | None = None
        self.engage_start_s = 0.0
        self.engage_last_s = -math.inf
        self.shots: deque[_ShotRecord] = deque(maxlen=cfg.shot_ring)

    def new_life(self) -> None:
        self.aim.clear()
        self.last = None
        self.target_changed_s = -math.inf
        self.attempts = 0
        self.engage_victim = None
        self.engage_last_s = -math.inf


class FeatureExtractor:
    """Feeds on events; ``on_kill`` returns the killer's features for that kill."""

    def __init__(self, config: FeatureConfig | None = None) -> None:
        self.config = config or FeatureConfig()
        self._players: dict[int, _PlayerFeatures] = {}

    def _state(self, player: int) -> _PlayerFeatures:
        st = self._players.get(player)
        if st is None:
            st = _PlayerFeatures(self.config)
            self._players[player] = st
        return st

    def reset_player(self, player: int) -> None:
        """Forget ``player``."""
        self._players.pop(player, None)

    def on_aim(self, s: AimSample) -> None:
        """Record the view and the shooter's state for the shots of this tick."""
        st = self._state(s.player)
        prev = st.last
        if s.target is not None and (prev is None or prev.target != s.target):
            st.target_changed_s = s.time_s
        st.aim.append((s.time_s, s.yaw_deg, s.pitch_deg))
        st.last = s

    def on_spawn(self, spawn: SpawnEvent) -> None:
        """A new life: view history and per-life counters restart; deaths carry over."""
        self._state(spawn.player).new_life()

    def on_shot(self, shot: ShotResult) -> None:
        """Count attempts, track the engagement and the shot's outcome and state."""
        cfg = self.config
        st = self._state(shot.shooter)
        hit = shot.victim is not None
        if shot.pellet > 0:
            # Pellets of a shot already recorded: only a hit can change the record.
            if hit and st.shots and st.shots[-1].tick == shot.tick:
                st.shots[-1].hit = True
                self._engage(st, shot.victim, shot.time_s)
            return
        st.attempts += 1
        s = st.last
        crouched = s is not None and s.stance == 1
        hard = s is not None and (
            s.speed_m_s >= cfg.hard_speed_m_s
            or not s.on_ground
            or shot.time_s - st.target_changed_s < cfg.target_switch_s
        )
        st.shots.append(_ShotRecord(shot.tick, crouched, hard, hit))
        aimed = shot.victim if hit else (s.target if s is not None else None)
        self._engage(st, aimed, shot.time_s)

    def _engage(self, st: _PlayerFeatures, victim: int | None, time_s: float) -> None:
        if victim is None:
            # A shot at no one neither starts nor breaks an engagement, but keeps it alive.
            if st.engage_victim is not None and time_s - st.engage_last_s <= self.config.engagement_gap_s:
                st.engage_last_s = time_s
            return
        if st.engage_victim != victim or time_s - st.engage_last_s > self.config.engagement_gap_s:
            st.engage_victim = victim
            st.engage_start_s = time_s
        st.engage_last_s = time_s

    def on_kill(self, kill: KillEvent) -> KillFeatures:
        """The killer's features for ``kill``; also counts the victim's death."""
        cfg = self.config
        st = self._state(kill.killer)
        ttk = 0.0
        if st.engage_victim == kill.victim and kill.time_s - st.engage_last_s <= cfg.engagement_gap_s:
            ttk = max(kill.time_s - st.engage_start_s, 0.0)
        crouch_shots = [r for r in st.shots if r.crouched]
        hard_shots = [r for r in st.shots if r.hard]
        hard_hits = sum(r.hit for r in hard_shots)
        features = KillFeatures(
            attempts=float(st.attempts),
            deaths=float(st.deaths),
            time_to_kill_s=ttk,
            cursor_accel_deg_s2=self._peak_accel(st, kill.time_s),
            crouch_hit_ratio=(sum(r.hit for r in crouch_shots) / len(crouch_shots)) if crouch_shots else 0.0,
            hard_hits=float(hard_hits),
            hard_hit_ratio=(hard_hits / len(hard_shots)) if hard_shots else 0.0,
            headshot_suspicion=self._headshot_suspicion(st, kill) if kill.headshot else 0.0,
        )
        st.attempts = 0
        st.deaths = 0
        st.engage_victim = None
        if kill.victim != kill.killer:
            vs = self._state(kill.victim)
            vs.deaths += 1
            vs.engage_victim = None
        return features

    def _window(self, st: _PlayerFeatures, end_s: float, length_s: float) -> list[tuple[float, float, float]]:
        return [a for a in st.aim if end_s - length_s <= a[0] <= end_s]

    def _peak_accel(self, st: _PlayerFeatures, end_s: float) -> float:
        cfg = self.config
        pts = self._window(st, end_s, cfg.accel_window_s)
        peak = 0.0
        prev_v: tuple[float, float] | None = None
        for (t0, y0, p0), (t1, y1, p1) in pairwise(pts):
            gap = t1 - t0
            if gap > cfg.max_gap_s or gap < 0.0:
                prev_v = None
                continue
            dt = max(gap, cfg.min_dt_s)
            cos_p = math.cos(math.radians(0.5 * (p0 + p1)))
            dyaw = (y1 - y0 + 180.0) % 360.0 - 180.0
            v = (dyaw * cos_p / dt, (p1 - p0) / dt)
            if prev_v is not None:
                peak = max(peak, math.hypot(v[0] - prev_v[0], v[1] - prev_v[1]) / dt)
            prev_v = v
        return peak

    def _headshot_suspicion(self, st: _PlayerFeatures, kill: KillEvent) -> float:
        cfg = self.config
        pts = self._window(st, kill.time_s, cfg.flick_window_s)
        travel = sum(angular_step_deg(y0, p0, y1, p1) for (_, y0, p0), (_, y1, p1) in pairwise(pts))
        width = math.degrees(math.atan2(cfg.head_radius_m, max(kill.distance_m, 1e-3)))
        return math.log2(1.0 + travel / width)
