"""AimDetect's per-kill features from the event stream: the paper's eight (REFERENCES section 5),
the aim trajectory's nine and the shots' own angles.

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
from itertools import chain

import numba
import numpy as np

from anticheat.detectors.aimstats import angular_step_compiled
from anticheat.detectors.aimdetect.trajectory import TRAJECTORY_NAMES, trajectory_features
from anticheat.detectors.fire import shot_departure_deg
from anticheat.events import AimSample, KillEvent, ShotResult, SpawnEvent

__all__ = ["FEATURE_NAMES", "FeatureConfig", "FeatureExtractor", "KillFeatures"]

OUTCOME_NAMES: tuple[str, ...] = (
    "attempts",
    "deaths",
    "time_to_kill_s",
    "cursor_accel_deg_s2",
    "crouch_hit_ratio",
    "hard_hits",
    "hard_hit_ratio",
    "headshot_suspicion",
)
"""The paper's eight features."""

SHOT_NAMES: tuple[str, ...] = ("shot_departure_deg",)
"""What the shots' own angles say (``KillFeatures.shot_departure_deg``)."""

FEATURE_NAMES: tuple[str, ...] = OUTCOME_NAMES + TRAJECTORY_NAMES + SHOT_NAMES
"""The paper's eight, then the aim trajectory's nine (``trajectory``), then the shots' one."""


@dataclass(frozen=True, slots=True)
class FeatureConfig:
    """Feature-extraction constants.

    Attributes:
        aim_ring: view samples kept per player (96 = 1.5 s at 64 Hz): the windows below, and the
            whole approach of most flicks for the trajectory features.
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

    aim_ring: int = 96
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
        lock_fraction ... angle_at_kill_deg: the aim trajectory onto the victim (``trajectory``).
        shot_departure_deg: the largest departure (deg) of a shot's angles from the path its
            crosshair took, among the shots counted in ``attempts``: how far the shot's angles
            lie from its command's view beyond how far that view moved since the command before
            (``fire.shot_departure_deg``). A hand's shot flies along its crosshair; silent aim's
            angles jump onto the target while the reported view stays human, which the view
            features above cannot see. 0 when the claims carry no view.
    """

    attempts: float
    deaths: float
    time_to_kill_s: float
    cursor_accel_deg_s2: float
    crouch_hit_ratio: float
    hard_hits: float
    hard_hit_ratio: float
    headshot_suspicion: float
    lock_fraction: float = 0.0
    tracking_error_deg: float = 0.0
    flick_amplitude_deg: float = 0.0
    flick_duration_s: float = 0.0
    peak_speed_fraction: float = 0.0
    peak_to_mean_speed: float = 0.0
    speed_angle_correlation: float = 0.0
    segment_s: float = 0.0
    angle_at_kill_deg: float = 0.0
    shot_departure_deg: float = 0.0

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
                 "engage_start_s", "engage_last_s", "shots", "departure")

    def __init__(self, cfg: FeatureConfig) -> None:
        self.aim: deque[tuple[float, float, float, float, float]] = deque(maxlen=cfg.aim_ring)
        self.last: AimSample | None = None
        self.target_changed_s = -math.inf
        self.attempts = 0
        self.deaths = 0
        self.engage_victim: int | None = None
        self.engage_start_s = 0.0
        self.engage_last_s = -math.inf
        self.shots: deque[_ShotRecord] = deque(maxlen=cfg.shot_ring)
        self.departure = 0.0

    def new_life(self) -> None:
        self.aim.clear()
        self.last = None
        self.target_changed_s = -math.inf
        self.attempts = 0
        self.departure = 0.0
        self.engage_victim = None
        self.engage_last_s = -math.inf


class FeatureExtractor:
    """Feeds on events; ``on_kill`` returns the killer's features for that kill."""

    def __init__(self, config: FeatureConfig | None = None) -> None:
        self.config = config or FeatureConfig()
        self._players: dict[int, _PlayerFeatures] = {}
        # Compile (or load from numba's cache) now, not inside the tick of the first kill.
        _view_kernel(np.zeros((2, 3)), 0.0, 1.0, 1.0, 1.0, 1.0)
        warm = np.zeros((2, 5))
        trajectory_features(warm[:, 0], warm[:, 3], warm[:, 4], 0.0, 0)

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
        st.aim.append((s.time_s, s.yaw_deg, s.pitch_deg, -1.0 if s.target is None else float(s.target),
                       s.target_angle_deg))
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
        off, moved = shot_departure_deg(shot.claim)
        if off - moved > st.departure:
            st.departure = off - moved
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
        ring = np.fromiter(chain.from_iterable(st.aim), np.float64, 5 * len(st.aim)).reshape(-1, 5)
        peak, flick = self._view_features(ring, kill)
        path = trajectory_features(ring[:, 0], ring[:, 3], ring[:, 4], kill.time_s, kill.victim)
        features = KillFeatures(
            attempts=float(st.attempts),
            deaths=float(st.deaths),
            time_to_kill_s=ttk,
            cursor_accel_deg_s2=peak,
            crouch_hit_ratio=(sum(r.hit for r in crouch_shots) / len(crouch_shots)) if crouch_shots else 0.0,
            hard_hits=float(hard_hits),
            hard_hit_ratio=(hard_hits / len(hard_shots)) if hard_shots else 0.0,
            headshot_suspicion=flick,
            **dict(zip(TRAJECTORY_NAMES, path.tolist())),
            shot_departure_deg=st.departure,
        )
        st.attempts = 0
        st.departure = 0.0
        st.deaths = 0
        st.engage_victim = None
        if kill.victim != kill.killer:
            vs = self._state(kill.victim)
            vs.deaths += 1
            vs.engage_victim = None
        return features

    def _view_features(self, ring: np.ndarray, kill: KillEvent) -> tuple[float, float]:
        """(F4, F8) of ``kill`` from the killer's view ring (rows: time, yaw, pitch, target,
        angle); one compiled pass over the ring (the per-pair Python loops cost ~0.15 ms a kill,
        on the tick that registers it)."""
        if len(ring) < 2:
            travel = peak = 0.0
        else:
            cfg = self.config
            peak, travel = _view_kernel(np.ascontiguousarray(ring[:, :3]), kill.time_s, cfg.accel_window_s, cfg.flick_window_s, cfg.max_gap_s,
                                        cfg.min_dt_s)
        if not kill.headshot:
            return peak, 0.0
        width = math.degrees(math.atan2(self.config.head_radius_m, max(kill.distance_m, 1e-3)))
        return peak, math.log2(1.0 + travel / width)


@numba.njit(cache=True, nogil=True)
def _view_kernel(
    aim: np.ndarray, end_s: float, accel_window_s: float, flick_window_s: float, max_gap_s: float, min_dt_s: float
) -> tuple[float, float]:  # pragma: no cover - compiled
    """(peak angular acceleration, deg/s^2, over the samples in [end_s - accel_window_s, end_s];
    view travel, deg, over those in [end_s - flick_window_s, end_s]) of ``aim`` rows (time s, yaw
    deg, pitch deg), each between consecutive samples of its window (see ``KillFeatures``).

    The same operations in the same order as a Python loop with ``math`` (libm; Python's float
    modulo): the features do not depend on where they are computed."""
    peak = 0.0
    have_v = False
    vx0 = vy0 = 0.0
    travel = 0.0
    a_last = f_last = -1
    for i in range(aim.shape[0]):
        t1, y1, p1 = aim[i, 0], aim[i, 1], aim[i, 2]
        if end_s - accel_window_s <= t1 <= end_s:
            if a_last >= 0:
                t0, y0, p0 = aim[a_last, 0], aim[a_last, 1], aim[a_last, 2]
                gap = t1 - t0
                if gap > max_gap_s or gap < 0.0:
                    have_v = False
                else:
                    dt = gap if gap > min_dt_s else min_dt_s
                    cos_p = math.cos(math.radians(0.5 * (p0 + p1)))
                    dyaw = (y1 - y0 + 180.0) % 360.0 - 180.0
                    vx, vy = dyaw * cos_p / dt, (p1 - p0) / dt
                    if have_v:
                        accel = math.hypot(vx - vx0, vy - vy0) / dt
                        if accel > peak:
                            peak = accel
                    vx0, vy0 = vx, vy
                    have_v = True
            a_last = i
        if end_s - flick_window_s <= t1 <= end_s:
            if f_last >= 0:
                travel += angular_step_compiled(aim[f_last, 1], aim[f_last, 2], y1, p1)
            f_last = i
    return peak, travel
