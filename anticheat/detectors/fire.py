"""Fire-timing, shot-geometry and backtrack checks on registered shots (REFERENCES 2, 6, 7).

Kinds (detector ``fire``):

- ``auto_c``: consecutive accepted shots of one weapon faster than Nex-AC's crouch-cancel limits
  (pistol/"deagle" 240 ms, shotgun 480 ms, rifle and sniper 380 ms). Our crouch-cancel intervals
  (world/weapons.py) sit below them on purpose: only a scripted, perfectly timed cancel gets there.
- ``rapid_fire``: an interval under 40 ms for a non-automatic weapon (Nex-AC: 30-50 ms), under the
  fire interval for an automatic one; or repeated TOO_SOON refusals from weapon mechanics.
- ``silent_aim_geometry``: the claimed hit point is (0, 0, 0) or equals the shot origin within
  1 cm (Nex-AC): a forged bullet, not one that flew.
- ``silent_aim_angles``: the shot's angles leave the path the crosshair took: the shot and the
  view angles of the command that fired it differ by more than the view moved since the command
  before (the shot may fall anywhere along that motion, as with sub-tick input) plus 0.5 deg. The
  server sees both angle sets, so the "view only jumps in the shot" of silent aim is direct.
- ``forged_hit``: the claimed hit point is more than 15 m (BustAim's bullet-to-victim limit) from
  where the claimed victim really was at the shot's rewind time (``claimed_victim_pos``, chest
  height), whether or not the server's own ray hit anyone: proaim "teleports" its victim in
  front of the bullet. BustAim checks the same distance, but only on server-registered hits and
  in unbroken streaks; this check judges every claim.
- ``afk_ghost``: the claimed origin is >= 15 m from the shooter's authoritative eye (Nex-AC), or,
  for protocols that do not send an origin, the claimed hit point is farther from the real eye
  than the weapon reaches plus 15 m: either way the client shoots from where it is not.
- ``backtrack``: claimed view times older than the measured latency allows, consistently; or
  older than the client's own view clock. Each command carries the view time its frame rendered
  (``AimSample.view_time_s``), and that clock never runs backwards on an honest client; a shot
  claims the view time it was aimed at. A shot claiming a time more than ``view_clock_slack_s``
  before the newest frame its client had rendered by the shot's command contradicts the client's
  own clock: that is backtrack whatever the link does (a stalled client makes up commands with
  the view time it had, which is never behind itself). ``backtrack_clock_min`` such shots among
  the last ``backtrack_ring`` detect. In 308.6 held-out honest player-hours no shot was behind its
  client's clock at all, and every shot of the backtrack bots was, by 0.15-0.40 s.

Timing. An interval is measured on the shooter's command clock (``claim.clock_s``): the clock
the server's weapon state judged the shot on, held to real time by the timer check. Arrival
times are no measure of it: a client that falls behind and catches up delivers shots 100 ms
apart on its clock 20-30 ms apart on the server's (three such intervals flagged an honest
assault-rifle player in a UDP match). A command-clock interval is judged as
``measured + tick_allowance_s``. Recordings made before the clock was carried time shots on
``time_s``, distorted by the network: jitter can squeeze two shots closer and tick
quantisation can shave up to a tick, so those are judged as ``measured + tick_allowance_s +
jitter_factor * jitter`` (jitter from the SkipBook's latest connection sample). Either way a
detection needs the pattern repeatedly (``*_count`` in ``*_window_s``). Only pellet 0 of a shot
is timed, and only between shots of the same weapon on the same clock.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector
from anticheat.detectors.aimstats import angular_step_deg
from anticheat.events import AimSample, Detection, FireEvidence, FireKind, RewindDecision, ShotClaim, ShotResult, SpawnEvent
from anticheat.skip import SkipBook
from world.constants import STANDING_CHEST_M
from world.weapons import WeaponId, weapon

log = logging.getLogger(__name__)

__all__ = ["FireConfig", "FireDetector", "shot_departure_deg"]

Vec3 = tuple[float, float, float]


def shot_departure_deg(claim: ShotClaim) -> tuple[float, float]:
    """(how far the shot's angles are from its command's view, how far the view moved since the
    command before), both in degrees; (0, 0) when the claim carries no view. A shot may fall
    anywhere along the crosshair's motion (sub-tick input), so only the part of the first beyond
    the second is evidence of angles the crosshair never took (silent aim)."""
    cmd = claim.view
    if cmd is None or (claim.yaw_deg == cmd[0] and claim.pitch_deg == cmd[1]):
        return 0.0, 0.0  # unknown, or the usual case: the shot flew along its command's view
    off = angular_step_deg(cmd[0], cmd[1], claim.yaw_deg, claim.pitch_deg)
    prev = claim.prev_view
    moved = angular_step_deg(prev[0], prev[1], cmd[0], cmd[1]) if prev is not None else 0.0
    return off, moved


@dataclass(frozen=True, slots=True)
class FireConfig:
    """Fire/geometry/backtrack tolerances (Nex-AC defaults in seconds and meters).

    Every field is a scalar so that an operator's TOML file can override any of them.

    Attributes:
        auto_c_pistol_s, auto_c_shotgun_s, auto_c_rifle_s, auto_c_sniper_s: the shortest human
            crouch-cancel interval per weapon (Nex-AC: deagle 240 ms, shotgun 480 ms, rifle and
            sniper 380 ms); other weapons have no crouch-cancel.
        rapid_fire_interval_s: any interval below this is rapid fire for a non-automatic weapon
            (40 ms, the middle of Nex-AC's 30-50 ms).
        tick_allowance_s: added to every measured interval for tick quantisation (one 64 Hz tick).
        jitter_factor: ... plus, for an interval timed on arrival (a recording without the
            command clock), this many times the shooter's measured jitter (RFC 3550's, which
            is about 1.1 sd of the delay; two delays differ by up to ~3.5 of it). On the lab's
            training corpus the factor 2 left 6 honest wifi players (35 ms jitter) at two of the
            three rapid intervals a detection needs, and flagged 2 on held-out seeds; 4 leaves
            none above one, and no cheat profile's first detection moved (a rapid-fire cheat on a
            jittery link is still refused shot after shot: ``too_soon``).
        backtrack_jitter_factor: the jitter's share of a claimed view time's expected age (2):
            kept apart from the interval factor, since fake lag inflates its own measured jitter
            and a larger allowance let it age its claims unseen.
        auto_c_count, auto_c_window_s: auto-C intervals needed within the window (3 in 10 s).
        rapid_fire_count, rapid_fire_window_s: rapid intervals needed (3 in 10 s).
        too_soon_count, too_soon_window_s: TOO_SOON refusals needed (5 in 10 s): a refusal can be
            an honest double-click whose packets arrived squeezed, a stream of them cannot.
        geometry_tolerance_m: "equals the origin" within this distance (1 cm, Nex-AC).
        silent_aim_count, silent_aim_window_s: forged geometries needed (2 in 30 s; a single
            (0,0,0) could be a client bug).
        angle_tolerance_deg: a shot may leave its command's crosshair path by this much (deg)
            before it counts as a forged angle (float rounding, sub-tick aim).
        silent_aim_angles_count, silent_aim_angles_window_s: forged angles needed (3 in 30 s).
        forged_hit_m: a claimed hit point farther than this from the claimed victim's rewound chest
            is forged (15 m, BustAim's max_b2v_deviation_m).
        forged_hit_count, forged_hit_window_s: forged hits needed (2 in 30 s).
        ghost_distance_m: claimed origin this far from the authoritative eye (15 m, Nex-AC).
        ghost_range_margin_m: claimed hit point beyond weapon range plus this (15 m).
        ghost_count, ghost_window_s: ghost shots needed (2 in 30 s).
        interp_s: the client's interpolation delay assumed for expected view-time age (100 ms,
            Source's default cl_interp).
        stale_margin_s: a claim older than rtt + interp + allowances by more than this is stale
            (the client renders one downstream trip late and its command takes an upstream trip).
        loss_allowance_s: added to the expected age per unit of measured loss (0..1): a lost
            packet delays its command until a re-send arrives, and losses come in bursts
            (1 s per unit: 50 ms at 5 % loss).
        backtrack_ring, backtrack_min: of the last ``backtrack_ring`` shots with a claimed view
            time (fewer early on), at least ``backtrack_min`` must be stale ("consistently": 5 of
            8; honest claims sit well inside the allowances, see the scenario tests).
        backtrack_span_s: ... and those stale shots must span this much server time (s). A client
            that hitches makes up its missed commands at once, each with the view time it had,
            and a burst of fire in them is stale from one cause: an idle UDP match's honest
            dsl-1 had 5 of 8 stale shots within one catch-up after its process stalled. A
            backtrack cheat keeps its claims old from burst to burst.
        view_clock_slack_s: a shot may claim a view time up to this much (s) older than the newest
            frame its client had rendered by the shot's command: a sub-tick client stamps a shot
            inside its frame (a 64 Hz command spans 15.6 ms); this project's client claims the
            command's own frame exactly. The backtrack bots claim 0.15-0.40 s older.
        backtrack_clock_min: of the last ``backtrack_ring`` shots, this many behind the client's
            own view clock detect (no span needed: a stall never puts a claim behind its clock).
        cooldown_s: at most one Detection per player and kind per this many seconds.
        *_severity: severity of each kind's Detection.
    """

    auto_c_pistol_s: float = 0.240
    auto_c_shotgun_s: float = 0.480
    auto_c_rifle_s: float = 0.380
    auto_c_sniper_s: float = 0.380
    rapid_fire_interval_s: float = 0.040
    tick_allowance_s: float = 1.0 / 64.0
    jitter_factor: float = 4.0
    backtrack_jitter_factor: float = 2.0
    auto_c_count: int = 3
    auto_c_window_s: float = 10.0
    rapid_fire_count: int = 3
    rapid_fire_window_s: float = 10.0
    too_soon_count: int = 5
    too_soon_window_s: float = 10.0
    geometry_tolerance_m: float = 0.01
    silent_aim_count: int = 2
    silent_aim_window_s: float = 30.0
    angle_tolerance_deg: float = 0.5
    silent_aim_angles_count: int = 3
    silent_aim_angles_window_s: float = 30.0
    forged_hit_m: float = 15.0
    forged_hit_count: int = 2
    forged_hit_window_s: float = 30.0
    ghost_distance_m: float = 15.0
    ghost_range_margin_m: float = 15.0
    ghost_count: int = 2
    ghost_window_s: float = 30.0
    interp_s: float = 0.100
    stale_margin_s: float = 0.100
    loss_allowance_s: float = 1.0
    backtrack_ring: int = 8
    backtrack_min: int = 5
    backtrack_span_s: float = 1.0
    view_clock_slack_s: float = 0.05
    backtrack_clock_min: int = 2
    cooldown_s: float = 10.0
    auto_c_severity: float = 0.6
    rapid_fire_severity: float = 0.7
    silent_aim_geometry_severity: float = 0.9
    silent_aim_angles_severity: float = 0.9
    forged_hit_severity: float = 0.8
    afk_ghost_severity: float = 0.8
    backtrack_severity: float = 0.6

    def __post_init__(self) -> None:
        counts = (self.auto_c_count, self.rapid_fire_count, self.too_soon_count, self.silent_aim_count,
                  self.ghost_count, self.backtrack_min, self.silent_aim_angles_count, self.forged_hit_count,
                  self.backtrack_clock_min)
        if min(counts) < 1 or max(self.backtrack_min, self.backtrack_clock_min) > self.backtrack_ring:
            raise ValueError("counts must be >= 1 and backtrack_min, backtrack_clock_min <= backtrack_ring")
        if not (math.isfinite(self.view_clock_slack_s) and self.view_clock_slack_s >= 0.0):
            raise ValueError("view_clock_slack_s must be finite and >= 0")
        if not (math.isfinite(self.backtrack_span_s) and self.backtrack_span_s >= 0.0):
            raise ValueError("backtrack_span_s must be finite and >= 0")

    def auto_c_limit_s(self, weapon_id: int) -> float | None:
        """The auto-C interval limit of ``weapon_id``, or None when it has no crouch-cancel."""
        return {
            int(WeaponId.PISTOL): self.auto_c_pistol_s,
            int(WeaponId.SHOTGUN): self.auto_c_shotgun_s,
            int(WeaponId.RIFLE): self.auto_c_rifle_s,
            int(WeaponId.SNIPER): self.auto_c_sniper_s,
        }.get(weapon_id)

    def severity(self, kind: str) -> float:
        """Severity of a Detection of ``kind``."""
        return float(getattr(self, f"{kind}_severity", 0.5))


class _Burst:
    """Whether ``count`` events fell within ``window_s``: a ring of the last ``count`` times.

    ``peak`` is the most events ever found within ``window_s`` of one (the newest), ``count``
    exactly when a burst was complete.
    """

    __slots__ = ("count", "times", "window_s", "peak")

    def __init__(self, count: int, window_s: float) -> None:
        self.count = max(count, 1)
        self.times: deque[float] = deque(maxlen=self.count)
        self.window_s = window_s
        self.peak = 0

    def add(self, time_s: float) -> bool:
        times = self.times
        times.append(time_s)
        complete = len(times) == self.count and time_s - times[0] <= self.window_s
        # Only suspicious events get here (rare), so the count may cost a pass over the ring.
        held = len(times) if complete else sum(1 for t in times if time_s - t <= self.window_s)
        if held > self.peak:
            self.peak = held
        return complete

    def score(self) -> float:
        """The most events one window held, against the count that makes a burst (unitless)."""
        return self.peak / self.count


def _dist(a: Vec3, b: Vec3) -> float:
    return math.dist(a, b)


class _PlayerFire:
    __slots__ = ("last_weapon", "last_time_s", "last_on_clock", "bursts", "stale", "stale_peak", "behind",
                 "behind_peak", "view_clock", "frames", "last_emit")

    def __init__(self) -> None:
        self.last_weapon: int | None = None
        # The previous timed shot: on the command clock when known (last_on_clock), else server time.
        self.last_time_s = -math.inf
        self.last_on_clock = False
        self.bursts: dict[str, _Burst] = {}
        # Per recent shot with a claimed view time: its server time (s) when stale, else None.
        self.stale: deque[float | None] = deque()
        # The most stale claims the ring ever held (it is cleared by each detection).
        self.stale_peak = 0
        # Per recent shot with a claimed view time: True when behind the client's own view clock.
        self.behind: deque[bool] = deque()
        self.behind_peak = 0
        # The newest view time the client's commands carried (s), and per recent command that
        # value as of it: (seq, view clock s).
        self.view_clock = -math.inf
        self.frames: deque[tuple[int, float]] = deque(maxlen=16)
        self.last_emit: dict[str, float] = {}


class FireDetector(Detector):
    """Inline fire-rate, shot-geometry and backtrack checks."""

    name = "fire"

    def __init__(self, config: FireConfig | None = None) -> None:
        self.config = config or FireConfig()
        self._players: dict[int, _PlayerFire] = {}
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Shots and refusals not judged, per skip reason."""
        return dict(self.skipped)

    def _state(self, player: int) -> _PlayerFire:
        st = self._players.get(player)
        if st is None:
            cfg = self.config
            st = _PlayerFire()
            st.bursts = {
                "auto_c": _Burst(cfg.auto_c_count, cfg.auto_c_window_s),
                "rapid_fire": _Burst(cfg.rapid_fire_count, cfg.rapid_fire_window_s),
                "too_soon": _Burst(cfg.too_soon_count, cfg.too_soon_window_s),
                "silent_aim_geometry": _Burst(cfg.silent_aim_count, cfg.silent_aim_window_s),
                "silent_aim_angles": _Burst(cfg.silent_aim_angles_count, cfg.silent_aim_angles_window_s),
                "forged_hit": _Burst(cfg.forged_hit_count, cfg.forged_hit_window_s),
                "afk_ghost": _Burst(cfg.ghost_count, cfg.ghost_window_s),
            }
            st.stale = deque(maxlen=cfg.backtrack_ring)
            st.behind = deque(maxlen=cfg.backtrack_ring)
            self._players[player] = st
        return st

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """Per detection kind, the most pieces of its evidence one window ever held, against the
        count that detects (unitless; the windows slide and ``backtrack``'s ring is cleared by a
        detection, so each value is the maximum since the player's state began).

        Keys: ``auto_c``, ``rapid_fire`` (the larger of fast intervals and TOO_SOON refusals,
        each against its own count), ``silent_aim_geometry``, ``silent_aim_angles``,
        ``forged_hit``, ``afk_ghost`` (pieces within the kind's window over its count) and
        ``backtrack`` (stale claims among the last ``backtrack_ring`` over ``backtrack_min``, or
        claims behind the client's view clock over ``backtrack_clock_min``, the larger).
        """
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        b = st.bursts
        return {
            "auto_c": b["auto_c"].score(),
            "rapid_fire": max(b["rapid_fire"].score(), b["too_soon"].score()),
            "silent_aim_geometry": b["silent_aim_geometry"].score(),
            "silent_aim_angles": b["silent_aim_angles"].score(),
            "forged_hit": b["forged_hit"].score(),
            "afk_ghost": b["afk_ghost"].score(),
            "backtrack": max(st.stale_peak / self.config.backtrack_min,
                             st.behind_peak / self.config.backtrack_clock_min),
        }

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        view = sample.view_time_s
        if view is None:
            return NO_DETECTIONS
        st = self._state(sample.player)
        if view > st.view_clock:
            st.view_clock = view
        st.frames.append((sample.seq, st.view_clock))
        return NO_DETECTIONS

    def _view_clock(self, st: _PlayerFire, seq: int) -> float | None:
        """The client's view clock (s) as of its command ``seq``, None when that command's sample
        is not at hand (recordings without view times)."""
        for s, clock in reversed(st.frames):
            if s == seq:
                return clock
        return None

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        st = self._players.get(spawn.player)
        if st is not None:
            # A new life starts with a fresh weapon state: no interval spans a death.
            st.last_weapon = None
            st.last_time_s = -math.inf
        return NO_DETECTIONS

    def _allowance_s(self, player: int, skip: SkipBook) -> tuple[float, float, float | None, float]:
        """(interval allowance s, backtrack allowance s, rtt s or None, loss 0..1) from the latest
        connection sample."""
        conn = skip.connection(player)
        jitter = conn.jitter_ms / 1000.0 if conn is not None else 0.0
        rtt = conn.rtt_ms / 1000.0 if conn is not None else None
        loss = min(max(conn.loss, 0.0), 1.0) if conn is not None else 0.0
        cfg, jit = self.config, max(jitter, 0.0)
        return (cfg.tick_allowance_s + cfg.jitter_factor * jit, cfg.tick_allowance_s + cfg.backtrack_jitter_factor * jit,
                rtt, loss)

    def _emit(self, st: _PlayerFire, player: int, tick: int, time_s: float, kind: str, value: float,
              reason: str, evidence: dict[str, float | int | str]) -> list[Detection]:
        if time_s - st.last_emit.get(kind, -math.inf) < self.config.cooldown_s:
            return []
        st.last_emit[kind] = time_s
        log.info("fire: player %d %s (%s)", player, kind, reason)
        return [Detection(player=player, tick=tick, time_s=time_s, detector=self.name, kind=kind, value=value,
                          severity=self.config.severity(kind), reason=reason, evidence=evidence)]

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        if shot.pellet != 0:
            return NO_DETECTIONS
        st = self._state(shot.shooter)
        reason = skip.shot_reason(shot.shooter, None, shot.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            # Break the timing chain: no interval that spans a skipped period is judged.
            st.last_weapon = None
            return NO_DETECTIONS
        allowance, back_allowance, rtt, loss = self._allowance_s(shot.shooter, skip)
        out: list[Detection] = []
        out += self._timing(st, shot, allowance)
        out += self._geometry(st, shot)
        out += self._angles(st, shot)
        out += self._backtrack(st, shot, back_allowance + self.config.loss_allowance_s * loss, rtt)
        return out

    def _timing(self, st: _PlayerFire, shot: ShotResult, allowance: float) -> list[Detection]:
        cfg = self.config
        clock = shot.claim.clock_s
        on_clock = clock is not None
        now = clock if clock is not None else shot.time_s
        prev_weapon, prev_time, prev_on_clock = st.last_weapon, st.last_time_s, st.last_on_clock
        st.last_weapon, st.last_time_s, st.last_on_clock = shot.weapon, now, on_clock
        if prev_weapon != shot.weapon or prev_on_clock != on_clock:
            return []
        measured = now - prev_time
        # The command clock carries no network jitter: only the server-time fallback is allowed it.
        judged = measured + (cfg.tick_allowance_s if on_clock else allowance)
        try:
            spec = weapon(shot.weapon)
        except KeyError:
            self.skipped["unknown_weapon"] += 1
            return []
        out: list[Detection] = []
        rapid_limit = spec.fire_interval_s if spec.automatic else cfg.rapid_fire_interval_s
        if judged < rapid_limit and st.bursts["rapid_fire"].add(shot.time_s):
            out += self._emit(st, shot.shooter, shot.tick, shot.time_s, "rapid_fire", measured,
                              f"RapidFire-{measured * 1000:.0f}ms@{spec.name}",
                              {"interval_s": measured, "judged_s": judged, "limit_s": rapid_limit,
                               "weapon": shot.weapon, "source": "interval", "count": cfg.rapid_fire_count,
                               "clock": "command" if on_clock else "server"})
        limit = cfg.auto_c_limit_s(shot.weapon)
        if limit is not None and rapid_limit <= judged < limit and st.bursts["auto_c"].add(shot.time_s):
            out += self._emit(st, shot.shooter, shot.tick, shot.time_s, "auto_c", measured,
                              f"AutoC-{measured * 1000:.0f}ms@{spec.name}",
                              {"interval_s": measured, "judged_s": judged, "limit_s": limit,
                               "weapon": shot.weapon, "count": cfg.auto_c_count,
                               "clock": "command" if on_clock else "server"})
        return out

    def _angles(self, st: _PlayerFire, shot: ShotResult) -> list[Detection]:
        off, moved = shot_departure_deg(shot.claim)
        tolerance = self.config.angle_tolerance_deg
        if off <= moved + tolerance or not st.bursts["silent_aim_angles"].add(shot.time_s):
            return []
        return self._emit(st, shot.shooter, shot.tick, shot.time_s, "silent_aim_angles", off,
                          f"SilentAim-angles-{off:.1f}deg",
                          {"off_deg": off, "view_moved_deg": moved, "victim": -1 if shot.victim is None else shot.victim})

    def _geometry(self, st: _PlayerFire, shot: ShotResult) -> list[Detection]:
        cfg = self.config
        claim = shot.claim
        out: list[Detection] = []
        hit = claim.claimed_hit_point
        origin = claim.claimed_origin if claim.claimed_origin is not None else shot.origin
        if hit is not None:
            forged = all(c == 0.0 for c in hit) or _dist(hit, origin) <= cfg.geometry_tolerance_m
            if forged and st.bursts["silent_aim_geometry"].add(shot.time_s):
                out += self._emit(st, shot.shooter, shot.tick, shot.time_s, "silent_aim_geometry",
                                  _dist(hit, origin), "SilentAim-geometry",
                                  {"hit_x": hit[0], "hit_y": hit[1], "hit_z": hit[2],
                                   "origin_claimed": int(claim.claimed_origin is not None)})
        victim = shot.claimed_victim_pos
        if hit is not None and victim is not None:
            chest = (victim[0], victim[1], victim[2] + STANDING_CHEST_M)
            off = _dist(hit, chest)
            if off > cfg.forged_hit_m and st.bursts["forged_hit"].add(shot.time_s):
                victim_slot = -1 if claim.claimed_victim is None else claim.claimed_victim
                out += self._emit(st, shot.shooter, shot.tick, shot.time_s, "forged_hit", off,
                                  f"ForgedHit-{off:.0f}m", {"distance_m": off, "victim": victim_slot})
        ghost = 0.0
        check = ""
        if claim.claimed_origin is not None:
            off = _dist(claim.claimed_origin, shot.origin)
            if off >= cfg.ghost_distance_m:
                ghost, check = off, "origin_offset"
        if not check and hit is not None:
            try:
                reach = weapon(shot.weapon).max_range_m + cfg.ghost_range_margin_m
            except KeyError:
                reach = math.inf
            far = _dist(hit, shot.origin)
            if far > reach:
                ghost, check = far, "hit_beyond_range"
        if check and st.bursts["afk_ghost"].add(shot.time_s):
            out += self._emit(st, shot.shooter, shot.tick, shot.time_s, "afk_ghost", ghost,
                              f"AfkGhost-{check}-{ghost:.1f}m", {"check": check, "distance_m": ghost})
        return out

    def _backtrack(self, st: _PlayerFire, shot: ShotResult, allowance: float, rtt: float | None) -> list[Detection]:
        cfg = self.config
        view = shot.claim.view_time_s
        if view is None:
            return []
        age = shot.time_s - view
        overruled = (shot.rewind_decision in (RewindDecision.ESTIMATE, RewindDecision.MAX_UNLAG)
                     and view < shot.rewind_time_s)
        expected = math.inf if rtt is None else rtt + cfg.interp_s + allowance
        stale = overruled or age > expected + cfg.stale_margin_s
        clock = self._view_clock(st, shot.claim.seq)
        behind_s = 0.0 if clock is None else clock - view
        behind = behind_s > cfg.view_clock_slack_s
        st.stale.append(shot.time_s if stale or behind else None)
        st.behind.append(behind)
        times = [t for t in st.stale if t is not None]
        count = len(times)
        if count and times[-1] - times[0] < cfg.backtrack_span_s:
            # One burst's worth is not yet "consistently": it scores just under the alarm.
            count = min(count, cfg.backtrack_min - 1)
        if count > st.stale_peak:
            st.stale_peak = count
        behind_count = sum(st.behind)
        if behind_count > st.behind_peak:
            st.behind_peak = behind_count
        if count < cfg.backtrack_min and behind_count < cfg.backtrack_clock_min:
            return []
        st.stale.clear()
        st.behind.clear()
        rule, of_count = ("view_clock", behind_count) if behind_count >= cfg.backtrack_clock_min else ("latency", count)
        return self._emit(st, shot.shooter, shot.tick, shot.time_s, "backtrack", age,
                          f"Backtrack-{rule}-{of_count}/{cfg.backtrack_ring}",
                          {"stale": count, "behind_clock": behind_count, "of": cfg.backtrack_ring, "age_s": age,
                           "behind_s": behind_s, "rule": rule,
                           "expected_s": expected if math.isfinite(expected) else -1.0,
                           "decision": shot.rewind_decision.value})

    def on_fire(self, evidence: FireEvidence, skip: SkipBook) -> Sequence[Detection]:
        if evidence.kind is not FireKind.TOO_SOON:
            return NO_DETECTIONS
        reason = skip.player_reason(evidence.player)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        st = self._state(evidence.player)
        if not st.bursts["too_soon"].add(evidence.time_s):
            return NO_DETECTIONS
        return self._emit(st, evidence.player, evidence.tick, evidence.time_s, "rapid_fire", evidence.interval_s,
                          f"RapidFire-refused-{self.config.too_soon_count}",
                          {"interval_s": evidence.interval_s, "allowed_s": evidence.allowed_s,
                           "weapon": evidence.weapon, "source": "too_soon", "count": self.config.too_soon_count})
