"""BustAim: per-hit aimbot warnings (continuous hits, out of range, proaim teleport, random aim).

A re-implementation of the checks of the SA-MP include BustAim 1.2.8.3 (REFERENCES section 1) for our
world. SA-MP distances ("SA units") are ~1 m, so BustAim's distances carry over as meters unchanged.

Every shot is seen: a hit is judged, a miss resets every streak counter (BustAim: "if a player misses a
shot all the warning counters are reset"). A shotgun shot arrives as one ``ShotResult`` per pellet; a
shot is one shot here: it is a hit when any pellet hit a player (the first hitting pellet is judged)
and a miss only when all its pellets missed.

Per hit, after the shared skip conditions (``SkipBook.shot_reason``: ping, loss, paused or exempt
players, skipped weapons), BustAim counts:

- continuous shots: hits on a moving victim; warns at every multiple of ``max_continuous_shots``;
- out of range: shooter-to-victim distance above the weapon's BustAim range (normal range + 10 m);
  warns when the streak exceeds ``out_of_range_probes``;
- proaim teleport: the client claims a hit on the victim the server registered, at a point farther
  than ``max_b2v_deviation_m`` from that victim's server position; warns when the streak exceeds
  ``proaim_teleport_probes``. A claim naming no victim (or another one) says where the client's
  own bullet went, not where this victim was: the server draws its own spread and rewinds by its
  own clock, so its ray can hit a player the client's missed. It is not checkable and neither
  counts nor resets the streak (on two held-out corpora, honest low-skill players sprayed four such
  "misses" that the server registered as hits, 24-52 m from the claimed wall points, and were
  flagged);
- random aim: beyond ``min_dist_for_aim_checks_m``, the victim lies at least ``player_sphere_radius_m``
  off the claimed aim ray; warns when the streak exceeds ``random_aim_probes``. We measure the true
  perpendicular distance from the victim's chest point to the ray; BustAim took the distance to the
  point on the ray at the victim's range, which is the same to first order (2 r sin(a/2) instead of
  r sin(a): 3 % apart at 30 degrees off).

Streak counters are reset only by a miss (not by a hit that passes a check), as in BustAim: "how many
times a player can shoot another player continuously who is out of the weapon's range".

Each warning calls every function in :attr:`BustAim.on_suspected` with
``(shooter, victim, weapon, warnings_bitmask)`` and returns one :class:`Detection` per warning bit.
BustAim's own guidance applies: these are warnings for a human to confirm, never a ban on their own,
which is why the default severities are modest.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntFlag

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector
from anticheat.events import Detection, ShotResult
from anticheat.skip import SkipBook
from anticheat.tolerances import searched
from world.constants import STANDING_CHEST_M
from world.weapons import WEAPONS, WeaponId
from world.weapons import weapon as weapon_spec

log = logging.getLogger(__name__)

__all__ = [
    "ALL_CHECKS",
    "BustAim",
    "BustAimConfig",
    "BustAimFlag",
    "BustAimWarning",
    "SuspectCallback",
    "WeaponProfile",
    "aim_ray_offset",
    "default_weapon_ranges",
]


class BustAimWarning(IntFlag):
    """BustAim's warning bitmask (values are BustAim's, spelling of CONTINOUS included)."""

    NONE = 0
    OUT_OF_RANGE = 1
    PROAIM_TELEPORT = 2
    RANDOM_AIM = 4
    CONTINOUS_SHOTS = 8


class BustAimFlag(IntFlag):
    """Per-player check flags (BustAim's SetPlayerFlags)."""

    NONE = 0
    CHECK_OUT_OF_RANGE = 1
    CHECK_PROAIM_TELEPORT = 2
    CHECK_RANDOM_AIM = 4
    CHECK_CONTINUOUS = 8
    IGNORE_PLAYER = 16


ALL_CHECKS = (
    BustAimFlag.CHECK_OUT_OF_RANGE
    | BustAimFlag.CHECK_PROAIM_TELEPORT
    | BustAimFlag.CHECK_RANDOM_AIM
    | BustAimFlag.CHECK_CONTINUOUS
)

SuspectCallback = Callable[[int, int, int, int], None]
"""``(shooter, victim, weapon, warnings)``: BustAim's OnPlayerSuspectedForAimbot."""

KIND_OF_WARNING: dict[BustAimWarning, str] = {
    BustAimWarning.OUT_OF_RANGE: "out_of_range",
    BustAimWarning.PROAIM_TELEPORT: "proaim_teleport",
    BustAimWarning.RANDOM_AIM: "random_aim",
    BustAimWarning.CONTINOUS_SHOTS: "continuous_shots",
}


def default_weapon_ranges(margin_m: float = 10.0) -> tuple[tuple[int, float], ...]:
    """BustAim range per weapon id (m) as (id, range) pairs: our normal range plus ``margin_m``.

    BustAim raised every weapon's range "10 units above normal" to stop false range warnings; SA units
    are ~1 m, so the margin is 10 m. Pairs rather than a dict so a TOML file can override them as an
    array of ``[id, range]`` arrays.
    """
    return tuple((int(wid), spec.max_range_m + margin_m) for wid, spec in WEAPONS.items())


@dataclass(frozen=True, slots=True)
class BustAimConfig:
    """BustAim tolerances, converted to meters and seconds (SA units ~ 1 m).

    Attributes:
        max_continuous_shots: warn at every multiple of this many consecutive hits on a moving victim
            (20; BUSTAIM_MAX_CONTINOUS_SHOTS is 10). Measured on the lab's training corpus (26.7
            honest player-hours, every skill and link): honest streaks reached 11, and 10 flagged 5
            honest players in 47 h; the tail falls ~0.4x per 3 hits, so 20 extrapolates to about
            0.5 false alarms per 100 player-hours. Only rage and proaim aimbots (16-17) ever
            passed 10: every cheat profile is caught sooner by other checks.
        out_of_range_probes: warn when consecutive out-of-range hits exceed this (2).
        proaim_teleport_probes: warn when consecutive teleport hits exceed this (3).
        random_aim_probes: warn when consecutive random-aim hits exceed this (5).
        min_dist_for_aim_checks_m: random aim is only judged beyond this distance (MIN_DIST_FOR_AIM_CHECKS
            10 SA units = 10 m): close up, a body fills the view and the ray test means nothing.
        max_b2v_deviation_m: claimed hit point farther than this from the victim is a teleport (15 m).
        player_sphere_radius_m: radius of the sphere a hit must be aimed into (3 m).
        wstats_shots: values kept per warning type for the WSTATS getters (3).
        moving_speed_sq_m2_s2: victim speed squared above which it counts as moving. BustAim's 0.01 is
            in SA-MP velocity units (~50 m/s each, which would make it 25 m^2/s^2 and only count running
            targets); we keep its intent, "the victim was moving", at 0.01 m^2/s^2 (0.1 m/s).
        weapon_ranges_m: (weapon id, BustAim range in m) pairs; defaults to normal range + 10 m.
        range_margin_m: added to ``max_range_m`` for weapons missing from ``weapon_ranges_m``.
        victim_ref_height_m: BustAim treats the victim as a point at its position (SA-MP positions are
            the body's center). Ours are feet positions, so the point is lifted to chest height (a
            standing player's upper torso, 1.26 m): fairer for the ray test than the feet, which sit
            ~1.3 m below where honest players aim.
        aim_includes_claimed_recoil: the aim ray is the claimed view angles plus the recoil kick the
            client claimed (pitch up, yaw to the right): bullets leave along view + kick, so an honest
            spray would otherwise drift off the ray and look random.
        default_flags: BustAimFlag bits a player starts with, as an int (BUSTAIM_DEFAULT_PLAYER_FLAGS:
            every check, 15).
        severity_*: Detection severity per warning (modest: BustAim warnings are for human review).
    """

    max_continuous_shots: int = searched(20, 4, 30)
    out_of_range_probes: int = 2
    proaim_teleport_probes: int = 3
    random_aim_probes: int = searched(5, 2, 12)
    min_dist_for_aim_checks_m: float = 10.0
    max_b2v_deviation_m: float = 15.0
    player_sphere_radius_m: float = 3.0
    wstats_shots: int = 3
    moving_speed_sq_m2_s2: float = 0.01
    weapon_ranges_m: tuple[tuple[int, float], ...] = field(default_factory=default_weapon_ranges)
    range_margin_m: float = 10.0
    victim_ref_height_m: float = STANDING_CHEST_M
    aim_includes_claimed_recoil: bool = True
    default_flags: int = int(ALL_CHECKS)
    severity_out_of_range: float = 0.4
    severity_proaim_teleport: float = 0.5
    severity_random_aim: float = 0.4
    severity_continuous: float = 0.15
    _ranges: dict[int, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ranges = {int(k): float(v) for k, v in self.weapon_ranges_m}
        if any(not math.isfinite(v) or v <= 0 for v in ranges.values()):
            raise ValueError("weapon_ranges_m must hold finite positive ranges")
        object.__setattr__(self, "_ranges", ranges)
        if not 0 <= int(self.default_flags) <= 0x1F:
            raise ValueError("default_flags must be a combination of BustAimFlag bits (0..31)")
        for name in ("max_continuous_shots", "wstats_shots"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("out_of_range_probes", "proaim_teleport_probes", "random_aim_probes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def range_for(self, weapon: int) -> float | None:
        """BustAim range (m) of ``weapon``, or None for a weapon we know nothing about."""
        rng = self._ranges.get(int(weapon))
        if rng is not None:
            return rng
        try:
            return weapon_spec(weapon).max_range_m + self.range_margin_m
        except KeyError:
            return None

    def severity_of(self, warning: BustAimWarning) -> float:
        """Detection severity of one warning bit."""
        return {
            BustAimWarning.OUT_OF_RANGE: self.severity_out_of_range,
            BustAimWarning.PROAIM_TELEPORT: self.severity_proaim_teleport,
            BustAimWarning.RANDOM_AIM: self.severity_random_aim,
            BustAimWarning.CONTINOUS_SHOTS: self.severity_continuous,
        }[warning]


@dataclass(frozen=True, slots=True)
class WeaponProfile:
    """Shot statistics of one player (one weapon, or all weapons combined).

    Attributes: shots fired (one per shot, not per pellet), hits (shots that hit a player),
        max_continuous (best streak of hits on moving victims), and the number of warnings issued of
        each type.
    """

    shots: int = 0
    hits: int = 0
    max_continuous: int = 0
    out_of_range_warns: int = 0
    proaim_teleport_warns: int = 0
    random_aim_warns: int = 0
    continuous_warns: int = 0

    def merged(self, other: WeaponProfile) -> WeaponProfile:
        """Both profiles combined (counts add, the best streak is the larger one)."""
        return WeaponProfile(
            shots=self.shots + other.shots,
            hits=self.hits + other.hits,
            max_continuous=max(self.max_continuous, other.max_continuous),
            out_of_range_warns=self.out_of_range_warns + other.out_of_range_warns,
            proaim_teleport_warns=self.proaim_teleport_warns + other.proaim_teleport_warns,
            random_aim_warns=self.random_aim_warns + other.random_aim_warns,
            continuous_warns=self.continuous_warns + other.continuous_warns,
        )


_PROFILE_FIELDS = tuple(f.name for f in fields(WeaponProfile))
_PROFILE_INDEX = {name: i for i, name in enumerate(_PROFILE_FIELDS)}


_WARN_FIELD: dict[BustAimWarning, str] = {
    BustAimWarning.OUT_OF_RANGE: "out_of_range_warns",
    BustAimWarning.PROAIM_TELEPORT: "proaim_teleport_warns",
    BustAimWarning.RANDOM_AIM: "random_aim_warns",
    BustAimWarning.CONTINOUS_SHOTS: "continuous_warns",
}

_KNOWN_WEAPONS = frozenset(int(w) for w in WeaponId)


class _PlayerState:
    """Streaks, flags, profiles and WSTATS of one shooter (all bounded)."""

    __slots__ = (
        "flags",
        "continuous",
        "out_of_range",
        "teleport",
        "random_aim",
        "peak_continuous",
        "peak_out_of_range",
        "peak_teleport",
        "peak_random_aim",
        "profiles",
        "aim_stats",
        "teleport_stats",
        "range_stats",
        "shot_key",
        "shot_done",
    )

    def __init__(self, flags: int, wstats: int) -> None:
        self.flags = BustAimFlag(flags)
        self.continuous = 0
        self.out_of_range = 0
        self.teleport = 0
        self.random_aim = 0
        # The longest streak of each kind that a miss has ended (the scores' running maxima).
        self.peak_continuous = 0
        self.peak_out_of_range = 0
        self.peak_teleport = 0
        self.peak_random_aim = 0
        # One entry per known weapon id at most: bounded by the weapon table.
        # Mutable counters in WeaponProfile's field order (the hot path adds to them); the
        # operator API hands out frozen WeaponProfile snapshots.
        self.profiles: dict[int, list[int]] = {}
        self.aim_stats: deque[float] = deque(maxlen=wstats)
        self.teleport_stats: deque[float] = deque(maxlen=wstats)
        self.range_stats: deque[float] = deque(maxlen=wstats)
        # The shot whose pellets are arriving: its key and whether it is already decided.
        self.shot_key: tuple[int, int, int] | None = None
        self.shot_done = True

    def reset_streaks(self) -> None:
        # A streak only grows until a miss ends it, so its value here is its maximum: keeping it
        # costs the hot path of hits nothing.
        if self.continuous > self.peak_continuous:
            self.peak_continuous = self.continuous
        if self.out_of_range > self.peak_out_of_range:
            self.peak_out_of_range = self.out_of_range
        if self.teleport > self.peak_teleport:
            self.peak_teleport = self.teleport
        if self.random_aim > self.peak_random_aim:
            self.peak_random_aim = self.random_aim
        self.continuous = 0
        self.out_of_range = 0
        self.teleport = 0
        self.random_aim = 0

    def bump(self, weapon: int, **changes: int) -> None:
        if weapon not in _KNOWN_WEAPONS:
            return
        counts = self.profiles.get(weapon)
        if counts is None:
            counts = self.profiles[weapon] = [0] * len(_PROFILE_FIELDS)
        for name, delta in changes.items():
            counts[_PROFILE_INDEX[name]] += delta

    def note_streak(self, weapon: int) -> None:
        # The best streak is kept up to date on every hit, not only at the miss that ends it, so the
        # profile is never stale while a streak is running.
        if weapon not in _KNOWN_WEAPONS:
            return
        counts = self.profiles.get(weapon)
        if counts is None:
            counts = self.profiles[weapon] = [0] * len(_PROFILE_FIELDS)
        i = _PROFILE_INDEX["max_continuous"]
        counts[i] = max(counts[i], self.continuous)


def aim_ray_offset(
    origin: tuple[float, float, float], yaw_deg: float, pitch_deg: float, point: tuple[float, float, float]
) -> float:
    """Perpendicular distance (m) from ``point`` to the ray from ``origin`` along (yaw, pitch).

    Yaw 0 = +x, 90 = +y, pitch positive up (the convention of ``world.state.view_direction``). A
    point behind the shooter is measured to the origin (the ray does not extend backwards).
    """
    yaw = math.radians(yaw_deg)
    pitch = math.radians(pitch_deg)
    cp = math.cos(pitch)
    dx, dy, dz = cp * math.cos(yaw), cp * math.sin(yaw), math.sin(pitch)
    vx, vy, vz = point[0] - origin[0], point[1] - origin[1], point[2] - origin[2]
    along = max(0.0, vx * dx + vy * dy + vz * dz)
    px, py, pz = vx - along * dx, vy - along * dy, vz - along * dz
    return math.sqrt(px * px + py * py + pz * pz)


def _dist(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    return math.sqrt((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2 + (a[2] - b[2]) ** 2)


class BustAim(Detector):
    """BustAim's four per-hit warnings, with its flags, weapon profiles, WSTATS and callback.

    Args:
        config: tolerances (BustAim defaults converted to meters).

    Attributes:
        on_suspected: functions called as ``fn(shooter, victim, weapon, warnings)`` whenever a hit
            raises warnings (the operator API appends to this list).
    """

    name = "bustaim"

    def __init__(self, config: BustAimConfig | None = None) -> None:
        self.config = config or BustAimConfig()
        self.on_suspected: list[SuspectCallback] = []
        self._players: dict[int, _PlayerState] = {}
        self._stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ events

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        """Judge a hit or reset the streaks on a miss (pellets of one shot count as one shot)."""
        st = self._state(shot.shooter)
        key = (shot.tick, shot.claim.seq, shot.weapon)
        out: Sequence[Detection] = NO_DETECTIONS
        if key != st.shot_key:
            if not st.shot_done:
                # The previous shot never got its last pellet and nothing hit: it was a miss.
                self._miss(st)
            st.shot_key = key
            st.shot_done = False
            st.bump(shot.weapon, shots=1)
        elif st.shot_done:
            return NO_DETECTIONS
        if shot.victim is not None and shot.victim != shot.shooter:
            st.shot_done = True
            st.bump(shot.weapon, hits=1)
            out = self._judge_hit(st, shot, skip)
        elif shot.pellet >= self._pellets(shot.weapon) - 1:
            st.shot_done = True
            self._miss(st)
        return out

    def reset_player(self, player: int) -> None:
        """Forget streaks, flags, profiles and WSTATS of ``player``."""
        self._players.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """The longest streak of each warning's hits, against the streak that warns.

        Keys are the warning kinds: ``continuous_shots`` (streak / ``max_continuous_shots``; it
        warns at every multiple), ``out_of_range``, ``proaim_teleport`` and ``random_aim`` (streak
        / (probes + 1): they warn once the streak exceeds the probes). A miss resets the streaks,
        so each value is the longest streak since the player's state began, whether a miss
        ended it or it is still running. Unitless.
        """
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        cfg = self.config
        return {
            "continuous_shots": max(st.continuous, st.peak_continuous) / cfg.max_continuous_shots,
            "out_of_range": max(st.out_of_range, st.peak_out_of_range) / (cfg.out_of_range_probes + 1),
            "proaim_teleport": max(st.teleport, st.peak_teleport) / (cfg.proaim_teleport_probes + 1),
            "random_aim": max(st.random_aim, st.peak_random_aim) / (cfg.random_aim_probes + 1),
        }

    # ------------------------------------------------------------------ operator API

    def get_flags(self, player: int) -> BustAimFlag:
        """The check flags of ``player``."""
        st = self._players.get(player)
        return st.flags if st is not None else BustAimFlag(self.config.default_flags)

    def set_flags(self, player: int, flags: int) -> None:
        """Set the check flags of ``player`` (BustAimFlag bits)."""
        self._state(player).flags = BustAimFlag(int(flags) & 0x1F)

    def reset_flags(self, player: int) -> None:
        """Give ``player`` the default flags again."""
        self._state(player).flags = BustAimFlag(self.config.default_flags)

    def get_weapon_profile(self, player: int, weapon: int) -> WeaponProfile:
        """Statistics of ``player`` with one weapon."""
        st = self._players.get(player)
        if st is None:
            return WeaponProfile()
        counts = st.profiles.get(int(weapon))
        return WeaponProfile() if counts is None else WeaponProfile(*counts)

    def reset_weapon_profile(self, player: int, weapon: int) -> None:
        """Clear the statistics of ``player`` with one weapon."""
        st = self._players.get(player)
        if st is not None:
            st.profiles.pop(int(weapon), None)

    def get_profile(self, player: int) -> WeaponProfile:
        """Statistics of ``player`` over all weapons combined."""
        total = WeaponProfile()
        st = self._players.get(player)
        if st is not None:
            for counts in st.profiles.values():
                total = total.merged(WeaponProfile(*counts))
        return total

    def reset_profile(self, player: int) -> None:
        """Clear every weapon profile of ``player``."""
        st = self._players.get(player)
        if st is not None:
            st.profiles.clear()

    def get_aim_stats(self, player: int) -> tuple[float, ...]:
        """The last ``wstats_shots`` random-aim offsets (m) of ``player``, oldest first."""
        st = self._players.get(player)
        return tuple(st.aim_stats) if st is not None else ()

    def get_teleport_stats(self, player: int) -> tuple[float, ...]:
        """The last ``wstats_shots`` bullet-to-victim distances (m) that counted as teleports."""
        st = self._players.get(player)
        return tuple(st.teleport_stats) if st is not None else ()

    def get_range_stats(self, player: int) -> tuple[float, ...]:
        """The last ``wstats_shots`` shooter-to-victim distances (m) that were out of range."""
        st = self._players.get(player)
        return tuple(st.range_stats) if st is not None else ()

    def continuous_shots(self, player: int) -> int:
        """The current streak of hits on moving victims of ``player``."""
        st = self._players.get(player)
        return st.continuous if st is not None else 0

    @property
    def stats(self) -> dict[str, int]:
        """Counters: skipped hits per skip reason (``skip_<reason>``) and judged hits."""
        return dict(self._stats)

    # ------------------------------------------------------------------ internals

    def _state(self, player: int) -> _PlayerState:
        st = self._players.get(player)
        if st is None:
            st = _PlayerState(self.config.default_flags, self.config.wstats_shots)
            self._players[player] = st
        return st

    @staticmethod
    def _pellets(weapon: int) -> int:
        try:
            return weapon_spec(weapon).pellets
        except KeyError:
            return 1

    def _miss(self, st: _PlayerState) -> None:
        st.reset_streaks()
        self._stats["misses"] += 1

    def _judge_hit(self, st: _PlayerState, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        cfg = self.config
        flags = st.flags
        if flags & BustAimFlag.IGNORE_PLAYER:
            self._stats["skip_ignored_player"] += 1
            return NO_DETECTIONS
        reason = skip.shot_reason(shot.shooter, shot.victim, shot.weapon)
        if reason is not None:
            self._stats[f"skip_{reason.value}"] += 1
            return NO_DETECTIONS
        self._stats["judged"] += 1
        victim = shot.victim
        assert victim is not None
        warnings = BustAimWarning.NONE
        values: dict[BustAimWarning, float] = {}
        limits: dict[BustAimWarning, float] = {}

        if flags & BustAimFlag.CHECK_CONTINUOUS and shot.victim_speed_m_s**2 > cfg.moving_speed_sq_m2_s2:
            st.continuous += 1
            st.note_streak(shot.weapon)
            if st.continuous % cfg.max_continuous_shots == 0:
                warnings |= BustAimWarning.CONTINOUS_SHOTS
                values[BustAimWarning.CONTINOUS_SHOTS] = float(st.continuous)
                limits[BustAimWarning.CONTINOUS_SHOTS] = float(cfg.max_continuous_shots)

        if shot.victim_pos is None:
            # Without the victim's server position no geometric check can be made.
            self._stats["no_victim_pos"] += 1
        else:
            vp = shot.victim_pos
            ref = (vp[0], vp[1], vp[2] + cfg.victim_ref_height_m)
            distance = _dist(shot.origin, ref)
            rng = cfg.range_for(shot.weapon)
            if flags & BustAimFlag.CHECK_OUT_OF_RANGE and rng is not None and distance > rng:
                st.out_of_range += 1
                st.range_stats.append(distance)
                if st.out_of_range > cfg.out_of_range_probes:
                    warnings |= BustAimWarning.OUT_OF_RANGE
                    values[BustAimWarning.OUT_OF_RANGE] = distance
                    limits[BustAimWarning.OUT_OF_RANGE] = rng
            claimed = shot.claim.claimed_hit_point
            if flags & BustAimFlag.CHECK_PROAIM_TELEPORT and claimed is not None and shot.claim.claimed_victim == victim:
                b2v = _dist(claimed, ref)
                if b2v > cfg.max_b2v_deviation_m:
                    st.teleport += 1
                    st.teleport_stats.append(b2v)
                    if st.teleport > cfg.proaim_teleport_probes:
                        warnings |= BustAimWarning.PROAIM_TELEPORT
                        values[BustAimWarning.PROAIM_TELEPORT] = b2v
                        limits[BustAimWarning.PROAIM_TELEPORT] = cfg.max_b2v_deviation_m
            if flags & BustAimFlag.CHECK_RANDOM_AIM and distance > cfg.min_dist_for_aim_checks_m:
                yaw, pitch = shot.claim.yaw_deg, shot.claim.pitch_deg
                if cfg.aim_includes_claimed_recoil:
                    # Kick yaw is "to the right"; our yaw grows to the left (counter-clockwise).
                    yaw -= shot.claim.recoil_yaw_deg
                    pitch += shot.claim.recoil_pitch_deg
                offset = aim_ray_offset(shot.origin, yaw, pitch, ref)
                if offset >= cfg.player_sphere_radius_m:
                    st.random_aim += 1
                    st.aim_stats.append(offset)
                    if st.random_aim > cfg.random_aim_probes:
                        warnings |= BustAimWarning.RANDOM_AIM
                        values[BustAimWarning.RANDOM_AIM] = offset
                        limits[BustAimWarning.RANDOM_AIM] = cfg.player_sphere_radius_m

        if not warnings:
            return NO_DETECTIONS
        for bit in _WARN_FIELD:
            if warnings & bit:
                st.bump(shot.weapon, **{_WARN_FIELD[bit]: 1})
        for fn in tuple(self.on_suspected):
            try:
                fn(shot.shooter, victim, shot.weapon, int(warnings))
            except Exception:  # an operator hook must never break detection
                log.exception("bustaim on_suspected callback failed")
        counts = {
            BustAimWarning.OUT_OF_RANGE: st.out_of_range,
            BustAimWarning.PROAIM_TELEPORT: st.teleport,
            BustAimWarning.RANDOM_AIM: st.random_aim,
            BustAimWarning.CONTINOUS_SHOTS: st.continuous,
        }
        out: list[Detection] = []
        for bit, kind in KIND_OF_WARNING.items():
            if not warnings & bit:
                continue
            value = values[bit]
            out.append(
                Detection(
                    player=shot.shooter,
                    tick=shot.tick,
                    time_s=shot.time_s,
                    detector=self.name,
                    kind=kind,
                    value=value,
                    severity=cfg.severity_of(bit),
                    reason=f"{kind} {value:.2f} (limit {limits[bit]:.2f}, {counts[bit]} in a row)",
                    evidence={
                        "victim": victim,
                        "weapon": shot.weapon,
                        "warnings": int(warnings),
                        "streak": counts[bit],
                        "limit": limits[bit],
                    },
                )
            )
        return out
