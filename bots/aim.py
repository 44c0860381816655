"""The honest human aim model: reaction, flicks, corrections, tremor, pursuit, recoil control,
aim point and the decision to fire. Everything works in view-angle space (yaw/pitch, degrees) and
advances once per client tick (dt ~ 1/64 s) with bounded internal state.

Motor model (parameters and their literature basis: ``bots/skill.py``):

* a newly noticed target is acted on after a log-normal reaction time;
* the flick is one minimum-jerk sub-movement s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 (Flash &
  Hogan 1985) whose duration follows Fitts' law MT = a + b log2(D/W + 1); its endpoint undershoots
  on average and scatters along and across the movement in proportion to the amplitude;
* one or two corrective sub-movements follow after a visual feedback delay, each planned from the
  error the eye then sees (delayed) and each again minimum-jerk and imperfect;
* then smooth pursuit: the hand follows the target's perceived motion (delayed, gain < 1,
  partial prediction) with proportional position correction and catch-up sub-movements when
  the error grows;
* an 8-12 Hz physiological tremor and a slow drift ride on top; the view moves in whole mouse
  counts;
* while spraying the player pulls down a fraction of the accumulated recoil kick, late and
  noisily.

Peak angular speeds come only from the minimum-jerk profile (1.875 D / MT), so they stay in the
human range; nothing here ever jumps the view.

Sign conventions (``world.state`` and ``physics.weapon_state``): yaw counter-clockwise, pitch up;
a shot flies along yaw - punch_yaw, pitch + punch_pitch.

Replacing the motor model. Every sub-movement (flick, correction, catch-up, look-around turn) is
planned by the controller's :class:`AimModel`; the built-in one is :class:`MinimumJerkFitts`.
A human model of your own is any object with the method
``plan(request: MovementRequest, skill: Skill, rng) -> SubMovement | None``: ``request`` says what
kind of movement is wanted, at what time (s), from where the hand will rest (deg) to which goal
(deg) and how wide the target is (deg); return the movement (start time, duration, displacement,
and optionally a ``profile`` tau -> completed fraction, which may leave [0, 1] in between for an
overshoot but must start at 0 and end at 1), or None to make no movement. Hand it to
``AimController(skill, model=...)``, to a profile's brain (``bots.profiles.AimModelBrain``), or
register it under a name (entry point group ``referee.aim_models``, or ``"module:callable"``) and
select it with a profile's ``aim_model`` parameter (see ``bots.aim_models``). All randomness must
come from ``rng``, so a bot stays reproducible for its seed.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from bots.skill import Skill
from world.constants import STANCE_CROUCHING, STANCE_STANDING, STANDING_EYE_M
from world.hitbox import BONE_IDS, LOCAL_A, LOCAL_B, Bone, ray_capsule, world_capsules
from world.weapons import WeaponSpec

MIN_JERK_PEAK_FACTOR = 1.875
"""Peak speed of a minimum-jerk movement in units of mean speed D / T (at tau = 0.5)."""

PITCH_LIMIT_DEG = 89.0
"""Pitch is kept inside [-89, 89] deg, the world's limit."""

_TWO_PI = 2.0 * math.pi
_SAMPLE_TIME = operator.itemgetter(0)
"""Time (s) of a target sample ``(t, x, y, z)`` in the aim controller's buffer."""


# ----------------------------------------------------------------------------- motor primitives


def min_jerk(tau: float | np.ndarray) -> float | np.ndarray:
    """Minimum-jerk position profile s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5, tau clipped to [0, 1]."""
    if isinstance(tau, float | int):
        t = 0.0 if tau < 0.0 else 1.0 if tau > 1.0 else float(tau)
        return t * t * t * (10.0 + t * (-15.0 + 6.0 * t))
    ta = np.clip(tau, 0.0, 1.0)
    return ta * ta * ta * (10.0 + ta * (-15.0 + 6.0 * ta))


def min_jerk_rate(tau: float | np.ndarray) -> float | np.ndarray:
    """ds/dtau = 30 tau^2 (1 - tau)^2 (dimensionless; speed = D / T times this); 0 outside [0, 1]."""
    t = np.asarray(tau, dtype=np.float64)
    inside = (t >= 0.0) & (t <= 1.0)
    out = np.where(inside, 30.0 * t * t * (1.0 - t) ** 2, 0.0)
    return float(out) if out.ndim == 0 else out


def _wrap(angle: float) -> float:
    """Wrap a scalar angle (deg) to [-180, 180) (pure Python: this runs every tick)."""
    return (angle + 180.0) % 360.0 - 180.0


def _clip(x: float, lo: float, hi: float) -> float:
    # Conditional expressions, not min/max calls: this runs many times per bot per tick.
    return lo if x < lo else hi if x > hi else x  # noqa: FURB136


def fitts_time_s(distance_deg: float, width_deg: float, a_s: float, b_s_per_bit: float) -> float:
    """Fitts' law (Shannon form): movement time (s) = a + b log2(D / W + 1); D, W in degrees."""
    if width_deg <= 0.0:
        raise ValueError(f"target width must be positive, got {width_deg!r} deg")
    return a_s + b_s_per_bit * math.log2(max(distance_deg, 0.0) / width_deg + 1.0)


def angular_size_deg(size_m: float, distance_m: float) -> float:
    """Angle (deg) subtended by an object of ``size_m`` meters at ``distance_m`` meters."""
    return math.degrees(2.0 * math.atan2(0.5 * size_m, max(distance_m, 1e-3)))


def sample_reaction_s(rng: np.random.Generator, skill: Skill) -> float:
    """One reaction time (s): log-normal with the skill's median and log-space sigma, never
    below the physiological floor ``reaction_min_s``."""
    rt = skill.reaction_median_s * math.exp(skill.reaction_sigma * float(rng.standard_normal()))
    return max(skill.reaction_min_s, rt)


def angle_error_deg(dyaw_deg: float, dpitch_deg: float, pitch_deg: float) -> float:
    """Angular size (deg) of a small view offset: yaw differences shrink by cos(pitch)."""
    return math.hypot(dyaw_deg * math.cos(math.radians(pitch_deg)), dpitch_deg)


MovementProfile = Callable[[float], float]
"""Position profile of a sub-movement: normalised time tau in (0, 1) -> completed fraction of the
displacement (dimensionless). It is only called inside (0, 1): the movement is at fraction 0
before it starts and at 1 once it ends, so the profile should tend to 0 and 1 at the ends; in
between it may leave [0, 1] (an overshoot and its return)."""

_PEAK_SAMPLES = 512
"""Steps of the numerical peak-speed estimate of a movement with a custom profile."""


@dataclass(frozen=True, slots=True)
class SubMovement:
    """One sub-movement of the hand in view-angle space, minimum-jerk unless given a profile.

    It starts at offset (0, 0) from where the movements before it leave the hand and ends at
    offset (dyaw_deg, dpitch_deg); in between the offset is the displacement times the profile's
    completed fraction, along a straight line in (yaw, pitch).

    Attributes: start_s (s), duration_s (s, > 0), dyaw_deg, dpitch_deg: the displacement it adds
    (deg); profile: tau -> completed fraction (:data:`MovementProfile`), None for the
    minimum-jerk profile s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5.
    """

    start_s: float
    duration_s: float
    dyaw_deg: float
    dpitch_deg: float
    profile: MovementProfile | None = None

    @property
    def end_s(self) -> float:
        """Time (s) the movement stops."""
        return self.start_s + self.duration_s

    def fraction(self, t_s: float) -> float:
        """Completed fraction at time ``t_s``: 0 before the start, 1 after the end, the profile in
        between (in [0, 1] for the minimum-jerk profile)."""
        tau = (t_s - self.start_s) / self.duration_s
        if tau <= 0.0:
            return 0.0
        if tau >= 1.0:
            return 1.0
        if self.profile is not None:
            return float(self.profile(tau))
        return tau * tau * tau * (10.0 + tau * (-15.0 + 6.0 * tau))

    def offset(self, t_s: float) -> tuple[float, float]:
        """Displacement (yaw, pitch) in degrees added so far at ``t_s``."""
        s = self.fraction(t_s)
        return self.dyaw_deg * s, self.dpitch_deg * s

    def peak_speed_deg_s(self, pitch_deg: float = 0.0) -> float:
        """Peak angular speed (deg/s): 1.875 D / T for the minimum-jerk profile; for a custom
        profile, the largest finite-difference slope over 512 steps of tau, times D / T."""
        size = angle_error_deg(self.dyaw_deg, self.dpitch_deg, pitch_deg)
        if self.profile is None:
            return MIN_JERK_PEAK_FACTOR * size / self.duration_s
        taus = np.linspace(0.0, 1.0, _PEAK_SAMPLES + 1)
        frac = np.array([0.0, *(float(self.profile(float(t))) for t in taus[1:-1]), 1.0])
        slope = float(np.max(np.abs(np.diff(frac)))) * _PEAK_SAMPLES
        return slope * size / self.duration_s


# ------------------------------------------------------------------------- the motor model hook


class MovementKind(str, Enum):
    """Why the hand moves."""

    FLICK = "flick"
    """The primary movement onto a newly engaged target, after the reaction time."""
    CORRECTION = "correction"
    """A corrective sub-movement after the flick, planned from the error the eye sees."""
    CATCHUP = "catchup"
    """A catch-up movement during smooth pursuit, when the tracking error grows too large."""
    LOOK = "look"
    """A look-around turn with no target (path heading, a noise, the last known threat)."""


@dataclass(frozen=True, slots=True)
class MovementRequest:
    """What the aim controller asks its :class:`AimModel` to plan.

    Attributes:
        kind: why the hand moves.
        t_s: the time (s, client clock) the movement starts.
        hand_yaw_deg, hand_pitch_deg: where the eye sees the hand once the movements still in
            progress end (deg; yaw unwrapped, so compare it with the goal through a wrap to
            [-180, 180)). A new movement superimposes on those (Flash & Henis 1991), so it is
            planned from there; its displacement is added to theirs.
        goal_yaw_deg, goal_pitch_deg: where the player wants the crosshair (deg): the perceived
            target plus the part of its motion the player predicts, or the look direction.
        width_deg: Fitts' W (deg): the target's angular width, or a loose width for a look turn.
    """

    kind: MovementKind
    t_s: float
    hand_yaw_deg: float
    hand_pitch_deg: float
    goal_yaw_deg: float
    goal_pitch_deg: float
    width_deg: float


@runtime_checkable
class AimModel(Protocol):
    """The human motor model of the aim: plans each sub-movement of the hand.

    ``plan`` is called once per flick, correction, catch-up and look turn (not every tick). It
    may keep state (one model per bot: the registry builds a new one for every bot) and must
    draw all its randomness from ``rng`` (the bot's own generator), so a bot stays reproducible
    for its seed. Return None for no movement (the goal is closer than the hand can resolve).
    """

    def plan(self, request: MovementRequest, skill: Skill, rng: np.random.Generator) -> SubMovement | None:
        """The sub-movement answering ``request`` for a player of ``skill``, or None."""
        ...


class EndpointScatter(NamedTuple):
    """How :class:`MinimumJerkFitts` times and scatters one kind of movement.

    Attributes: a_s: Fitts' intercept (s); undershoot: mean shortfall of the endpoint (fraction of
    the amplitude); along_sd, across_sd: sd of the endpoint along and across the movement
    (fractions of the amplitude); min_duration_s: shortest movement (s).
    """

    a_s: float
    undershoot: float
    along_sd: float
    across_sd: float
    min_duration_s: float


@dataclass(frozen=True, slots=True)
class MinimumJerkFitts:
    """The built-in motor model: one minimum-jerk sub-movement per request, its duration by Fitts'
    law MT = a + b log2(D / W + 1) (never below the skill's minimum), its endpoint undershooting on
    average and scattered along and across the movement in proportion to the amplitude D.

    Flicks use the skill's flick constants, corrections and catch-ups the smaller correction
    intercept and error, look turns no undershoot (:meth:`scatter`). Draws exactly 2 normals per
    request, movement or not.
    """

    def scatter(self, kind: MovementKind, skill: Skill) -> EndpointScatter:
        """The timing and endpoint scatter of a movement of ``kind`` for ``skill``."""
        sk = skill
        if kind is MovementKind.CORRECTION or kind is MovementKind.CATCHUP:
            return EndpointScatter(sk.correction_a_s, sk.undershoot, sk.correction_error_sd,
                                   0.5 * sk.correction_error_sd, 0.5 * sk.min_flick_s)
        if kind is MovementKind.LOOK:
            return EndpointScatter(sk.fitts_a_s, 0.0, sk.amplitude_sd, sk.direction_sd, sk.min_flick_s)
        return EndpointScatter(sk.fitts_a_s, sk.undershoot, sk.amplitude_sd, sk.direction_sd, sk.min_flick_s)

    def plan(self, request: MovementRequest, skill: Skill, rng: np.random.Generator) -> SubMovement | None:
        """A minimum-jerk movement towards the goal with Fitts' duration and a scattered endpoint;
        None when the goal is within one mouse count of the hand."""
        sc = self.scatter(request.kind, skill)
        hy, hp = request.hand_yaw_deg, request.hand_pitch_deg
        # The yaw error shrinks with cos(pitch) on the view sphere; floored so that looking
        # straight up or down never divides by zero.
        cosp = max(math.cos(math.radians(hp)), 0.05)
        dx = _wrap(request.goal_yaw_deg - hy) * cosp
        dy = request.goal_pitch_deg - hp
        dist = math.hypot(dx, dy)
        # Drawn before the early return: the number of draws must not depend on the distance.
        z0, z1 = rng.standard_normal(2).tolist()
        if dist < skill.mouse_count_deg:
            return None
        ux, uy = dx / dist, dy / dist
        along = dist * (1.0 - sc.undershoot + sc.along_sd * z0)
        across = dist * sc.across_sd * z1
        ex, ey = ux * along - uy * across, uy * along + ux * across
        duration = max(sc.min_duration_s, fitts_time_s(dist, request.width_deg, sc.a_s, skill.fitts_b_s_per_bit))
        return SubMovement(start_s=request.t_s, duration_s=duration, dyaw_deg=ex / cosp, dpitch_deg=ey)


# ------------------------------------------------------------------------------- tremor, recoil


class Tremor:
    """Physiological tremor plus slow drift, as view offsets (deg).

    The tremor is an oscillation at the skill's frequency (8-12 Hz) whose amplitude and frequency
    wander slowly (Ornstein-Uhlenbeck modulation, clipped so the amplitude stays within
    [0.3, 1.7] x ``tremor_amp_deg``); pitch shakes at 0.8 x the yaw amplitude. The drift is an
    Ornstein-Uhlenbeck process per axis (sd ``drift_sd_deg``, time constant ``drift_tau_s``),
    clipped at 3 sd. A broadband motor/sensor noise (sd ``motor_noise_deg``, independent per tick,
    clipped at 3 sd) rides on top. So |offset| <= 1.7 amplitude + 3 drift sd + 3 noise sd per
    axis, always.
    """

    MOD_TAU_S = 0.3
    """Time constant (s) of the amplitude/frequency modulation."""
    MOD_SD = 0.3
    """Relative sd of the amplitude modulation."""
    FREQ_SD = 0.05
    """Relative sd of the frequency modulation."""
    PITCH_FACTOR = 0.8
    """Pitch tremor amplitude relative to yaw (forearm rotation shakes yaw more)."""

    def __init__(self, skill: Skill) -> None:
        self.skill = skill
        self._ph0 = self._ph1 = 0.0
        self._m0 = self._m1 = self._m2 = 0.0  # yaw amplitude, pitch amplitude, frequency
        self._d0 = self._d1 = 0.0
        self._started = False
        # Per-step constants of the last dt (s): dt, mod decay, mod kick, drift decay, drift kick.
        # A client steps at a constant rate, so they are computed once, not every tick.
        self._consts = (math.nan, 0.0, 0.0, 0.0, 0.0)

    def step(self, dt_s: float, rng: np.random.Generator) -> tuple[float, float]:
        """Advance by ``dt_s`` seconds; returns the (yaw, pitch) offset in degrees. Draws exactly
        7 normals per call (plus 2 uniforms on the first call)."""
        sk = self.skill
        if not self._started:
            self._ph0, self._ph1 = rng.uniform(0.0, 2.0 * math.pi, 2).tolist()
            self._started = True
        z0, z1, z2, z3, z4, z5, z6 = rng.standard_normal(7).tolist()
        last_dt, decay, kick, d_decay, d_kick = self._consts
        if dt_s != last_dt:
            decay = math.exp(-dt_s / self.MOD_TAU_S)
            kick = math.sqrt(1.0 - decay * decay)
            d_decay = math.exp(-dt_s / sk.drift_tau_s)
            d_kick = sk.drift_sd_deg * math.sqrt(1.0 - d_decay * d_decay)
            self._consts = (dt_s, decay, kick, d_decay, d_kick)
        # _clip(x, lo, hi) spelled out inline (this runs for every bot every tick).
        m0 = self._m0 * decay + kick * z0
        m1 = self._m1 * decay + kick * z1
        m2 = self._m2 * decay + kick * z2
        self._m0, self._m1, self._m2 = m0, m1, m2
        c = -3.0 if m2 < -3.0 else 3.0 if m2 > 3.0 else m2  # noqa: FURB136
        freq = sk.tremor_freq_hz * (1.0 + self.FREQ_SD * c)
        turn = _TWO_PI * freq * dt_s
        ph0 = (self._ph0 + turn) % _TWO_PI
        ph1 = (self._ph1 + turn) % _TWO_PI
        self._ph0, self._ph1 = ph0, ph1
        c = 1.0 + self.MOD_SD * m0
        amp_y = sk.tremor_amp_deg * (0.3 if c < 0.3 else 1.7 if c > 1.7 else c)  # noqa: FURB136
        c = 1.0 + self.MOD_SD * m1
        amp_p = sk.tremor_amp_deg * (0.3 if c < 0.3 else 1.7 if c > 1.7 else c)  # noqa: FURB136
        lim = 3.0 * sk.drift_sd_deg
        d0 = self._d0 * d_decay + d_kick * z3
        d0 = -lim if d0 < -lim else lim if d0 > lim else d0  # noqa: FURB136
        d1 = self._d1 * d_decay + d_kick * z4
        d1 = -lim if d1 < -lim else lim if d1 > lim else d1  # noqa: FURB136
        self._d0, self._d1 = d0, d1
        jitter = sk.motor_noise_deg
        z5 = -3.0 if z5 < -3.0 else 3.0 if z5 > 3.0 else z5  # noqa: FURB136
        z6 = -3.0 if z6 < -3.0 else 3.0 if z6 > 3.0 else z6  # noqa: FURB136
        yaw = amp_y * math.sin(ph0) + d0 + jitter * z5
        pitch = self.PITCH_FACTOR * amp_p * math.sin(ph1) + d1 + self.PITCH_FACTOR * jitter * z6
        return yaw, pitch

    @property
    def drift(self) -> tuple[float, float]:
        """Current slow drift (yaw, pitch) in degrees."""
        return self._d0, self._d1

    @property
    def bound_deg(self) -> float:
        """Largest possible offset (deg) on the yaw axis."""
        sk = self.skill
        return 1.7 * sk.tremor_amp_deg + 3.0 * sk.drift_sd_deg + 3.0 * sk.motor_noise_deg


class RecoilCompensator:
    """Pulls the view against a fraction of the recoil punch, late and noisily.

    The pull follows ``gain x punch`` with first-order lag ``recoil_lag_s``; ``gain`` is redrawn
    at the start of every spray as ``recoil_control x (1 + recoil_noise x N(0, 1))`` clipped to
    [0, 1]. As the punch recovers after the spray the pull relaxes with it.
    """

    def __init__(self, skill: Skill) -> None:
        self.skill = skill
        self.gain = skill.recoil_control
        self.pull_pitch_deg = 0.0
        self.pull_yaw_deg = 0.0
        self._k = (math.nan, 0.0)  # (dt, pull fraction per step of that dt): dt is constant

    def reset(self) -> None:
        """Forget the current pull (respawn, weapon switch)."""
        self.pull_pitch_deg = 0.0
        self.pull_yaw_deg = 0.0

    def new_spray(self, rng: np.random.Generator) -> None:
        """Draw this spray's compensation gain (one normal)."""
        sk = self.skill
        self.gain = _clip(sk.recoil_control * (1.0 + sk.recoil_noise * float(rng.standard_normal())), 0.0, 1.0)

    def step(self, dt_s: float, punch_pitch_deg: float, punch_yaw_deg: float) -> tuple[float, float]:
        """Advance by ``dt_s``; returns the view offset (yaw, pitch) in degrees to add: pitch down
        against the upward kick, yaw towards the kick (the shot flies at yaw - punch_yaw)."""
        last_dt, k = self._k
        if dt_s != last_dt:
            k = 1.0 - math.exp(-dt_s / self.skill.recoil_lag_s)
            self._k = (dt_s, k)
        self.pull_pitch_deg += (self.gain * punch_pitch_deg - self.pull_pitch_deg) * k
        self.pull_yaw_deg += (self.gain * punch_yaw_deg - self.pull_yaw_deg) * k
        return self.pull_yaw_deg, -self.pull_pitch_deg


# ------------------------------------------------------------------------------------ aim point

# Anchor bones of the body coordinate u: -1 thighs, 0 lower torso, 0.5 upper torso, 0.8 neck, 1 head.
_ANCHOR_U = (-1.0, 0.0, 0.5, 0.8, 1.0)
_ANCHOR_BONES = (Bone.UPPER_RIGHT_LEG, Bone.LOWER_TORSO, Bone.UPPER_TORSO, Bone.NECK, Bone.HEAD)
U_MIN = -1.5
"""Lowest body coordinate an aim point may take (below the thighs' centre)."""
U_MAX = 1.15
"""Highest body coordinate (the top of the head)."""
EXPOSED_VIEW_YAWS_DEG = (0.0, -30.0, 30.0)
"""Directions (deg, from straight in front of the body) a body is seen from when its anchors'
heights are measured (:func:`exposed_height_m`): facing the shooter, as in a fight, give or take."""
EXPOSED_LATERAL_M = (-0.03, 0.0, 0.03)
"""Sideways offsets (m) of the measuring lines from the body's axis."""
EXPOSED_EYE_M = (10.0, STANDING_EYE_M)
"""The measuring eye: this far (m) in front of the body and this high (m) above its feet."""


def exposed_height_m(stance: int, bone: Bone, step_m: float = 0.005) -> float:
    """Height (m above the feet) on the body's axis at which aiming hits ``bone``: the middle of
    the widest band of heights (every ``step_m``) at which (nearly) every line from a standing eye
    in front (``EXPOSED_EYE_M``, views ``EXPOSED_VIEW_YAWS_DEG``, sideways offsets
    ``EXPOSED_LATERAL_M``) first meets the bone.

    Where bones overlap this is where aiming hits the bone, not where its capsule's segment is:
    the upper torso's capsule covers the top of the lower torso's, the forearms cover the chest,
    and a crouched body's thighs reach forward under a line looking down at its belly."""
    zs = np.arange(0.0, 2.2, step_m)
    dist, height = EXPOSED_EYE_M
    seen: list[np.ndarray] = []
    for view in EXPOSED_VIEW_YAWS_DEG:
        # The body at the origin faces the eye at -x, turned by ``view``.
        a, b, r = world_capsules(np.zeros((1, 3)), np.array([180.0 + view]), np.array([stance]))
        for lat in EXPOSED_LATERAL_M:
            d = np.stack([np.full_like(zs, dist), np.full_like(zs, lat), zs - height], axis=1)
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            t = ray_capsule(np.array([[[-dist, 0.0, height]]]), d[:, None, :], a, b, r)
            first = np.argmin(t, axis=1)
            hit = np.isfinite(t[np.arange(len(zs)), first]) & (BONE_IDS[first] == int(bone))
            seen.append(hit)
    share = np.mean(seen, axis=0)
    best = float(share.max())
    if best == 0.0:  # pragma: no cover - every anchor bone shows from the front
        raise AssertionError(f"{bone.name} is hidden from the front in stance {stance}")
    # The middle of the widest run of heights at which (nearly) every line meets the bone.
    good = np.r_[False, share >= 0.9 * best, False].astype(np.int8)
    edges = np.flatnonzero(np.diff(good))
    starts, ends = edges[0::2], edges[1::2]
    k = int(np.argmax(ends - starts))
    return float(0.5 * (zs[starts[k]] + zs[ends[k] - 1]))


def _anchors(stance: int) -> tuple[tuple[float, float], ...]:
    """Local (forward x, height z) of the anchor bones for a stance (m): x the capsule's centre
    (the body's axis), z the mean height at which the bone shows from the front
    (:func:`exposed_height_m`)."""
    cols = [int(np.flatnonzero(BONE_IDS == int(b))[0]) for b in _ANCHOR_BONES]
    mid = 0.5 * (LOCAL_A[stance, cols] + LOCAL_B[stance, cols])
    return tuple((float(x), exposed_height_m(stance, b)) for x, b in zip(mid[:, 0], _ANCHOR_BONES))


_ANCHOR_XZ = (_anchors(STANCE_STANDING), _anchors(STANCE_CROUCHING))


@dataclass(frozen=True, slots=True)
class AimPoint:
    """Where on a body a player aims: body coordinate ``u`` (see ``Skill``) and a sideways offset
    ``lateral_m`` (m, to the shooter's right) from the body's axis."""

    u: float
    lateral_m: float


def sample_aim_point(rng: np.random.Generator, skill: Skill) -> AimPoint:
    """Draw an engagement's aim point: the head line with probability ``head_aim_prob``, else centre
    mass; each with its own vertical scatter. Draws 3 numbers."""
    head = float(rng.random()) < skill.head_aim_prob
    z0, z1 = rng.standard_normal(2).tolist()
    if head:
        u = skill.head_aim_u + skill.head_aim_sd * z0
    else:
        u = skill.body_aim_u + skill.body_aim_sd * z0
    return AimPoint(u=_clip(u, U_MIN, U_MAX), lateral_m=skill.aim_lateral_sd_m * z1)


COVER_STEP_U = 0.125
"""Spacing (body coordinate) of the lines a player tries, upwards from its aim point, when cover
hides the point (:func:`raised_aim_points`)."""


def raised_aim_points(point: AimPoint, step_u: float = COVER_STEP_U) -> tuple[AimPoint, ...]:
    """``point`` and the body lines above it, lowest first, every ``step_u`` up to the head centre
    (u = 1), same sideways offset: what a player whose aim point is behind cover tries instead,
    in order; it aims at the first one it sees, the part that shows just above the cover's edge
    (the lower torso's top when it shows, not straight up at the chest)."""
    out = [point]
    u = point.u + step_u
    while u < 1.0 - 1e-9:
        out.append(AimPoint(u, point.lateral_m))
        u += step_u
    if point.u < 1.0:
        out.append(AimPoint(1.0, point.lateral_m))
    return tuple(out)


def body_height_m(u: float, crouching: bool) -> tuple[float, float]:
    """(forward offset, height above the feet) in meters of body coordinate ``u`` for a stance.

    Piecewise linear between the anchor bones; beyond the outer anchors the nearest segment's
    slope continues (hips below the thighs' centre, the top of the head above its centre)."""
    xz = _ANCHOR_XZ[1 if crouching else 0]
    uu = _clip(u, U_MIN, U_MAX)
    i = bisect.bisect_right(_ANCHOR_U, uu) - 1
    i = max(0, min(i, len(_ANCHOR_U) - 2))
    w = (uu - _ANCHOR_U[i]) / (_ANCHOR_U[i + 1] - _ANCHOR_U[i])
    (x0, z0), (x1, z1) = xz[i], xz[i + 1]
    x = x0 + _clip(w, 0.0, 1.0) * (x1 - x0)
    return x, z0 + w * (z1 - z0)


def aim_point_world(
    target_pos: tuple[float, float, float] | np.ndarray,
    target_yaw_deg: float,
    crouching: bool,
    point: AimPoint,
    shooter_eye: tuple[float, float, float] | np.ndarray,
) -> tuple[float, float, float]:
    """World position (m) of ``point`` on a body at ``target_pos`` (feet) facing ``target_yaw_deg``:
    height and forward offset from the stance's bone layout, the lateral offset taken across the
    shooter's line of sight (it is the shooter's aiming error, not a body feature)."""
    tx, ty, tz = float(target_pos[0]), float(target_pos[1]), float(target_pos[2])
    fwd, height = body_height_m(point.u, crouching)
    yaw = math.radians(target_yaw_deg)
    px, py, pz = tx + fwd * math.cos(yaw), ty + fwd * math.sin(yaw), tz + height
    lx, ly = px - float(shooter_eye[0]), py - float(shooter_eye[1])
    n = math.hypot(lx, ly)
    if n > 1e-6 and point.lateral_m:
        px += point.lateral_m * ly / n
        py -= point.lateral_m * lx / n
    return px, py, pz


def direction_angles(
    eye: tuple[float, float, float] | np.ndarray, point: tuple[float, float, float] | np.ndarray
) -> tuple[float, float, float]:
    """(yaw deg, pitch deg, distance m) of the line from ``eye`` to ``point``."""
    dx = float(point[0]) - float(eye[0])
    dy = float(point[1]) - float(eye[1])
    dz = float(point[2]) - float(eye[2])
    horiz = math.hypot(dx, dy)
    return math.degrees(math.atan2(dy, dx)), math.degrees(math.atan2(dz, horiz)), math.hypot(horiz, dz)


# ---------------------------------------------------------------------------- aim controller


class AimPhase(str, Enum):
    """What the aim controller is doing."""

    IDLE = "idle"
    REACT = "react"
    FLICK = "flick"
    CORRECT = "correct"
    TRACK = "track"


class AimTarget(NamedTuple):
    """The target as the player sees it this tick.

    Attributes: slot; point_m: the chosen aim point on the body (m, world); eye_m: the own eye
    (m, world); width_deg: angular width (deg) of the body (Fitts' W; its half is the fire
    tolerance unit).

    The controller perceives the *target's* motion with the visual delay, but its own motion
    without it (the brain predicts the consequences of its own movement), which is why it gets
    world points rather than angles.
    """

    slot: int
    point_m: tuple[float, float, float]
    eye_m: tuple[float, float, float]
    width_deg: float

    @property
    def angles(self) -> tuple[float, float, float]:
        """(yaw deg, pitch deg, distance m) from the eye to the aim point now."""
        return direction_angles(self.eye_m, self.point_m)


class AimOutput(NamedTuple):
    """The view to send and what the player believes about its aim.

    Attributes: yaw_deg in [-180, 180), pitch_deg (deg): the view; phase; target (slot or None);
    perceived_error_deg: angle (deg) between where the shot would go (view + punch) and where the
    player believes the target is (seen with the visual delay, partly extrapolated), inf without
    a target; width_deg of the target (deg, 0 none).
    """

    yaw_deg: float
    pitch_deg: float
    phase: AimPhase
    target: int | None
    perceived_error_deg: float
    width_deg: float


@dataclass(frozen=True, slots=True)
class AimConfig:
    """Constants of the controller that are not personal skill.

    Attributes:
        reacquire_s: a target missing for less than this (s) and seen again is still the same
            engagement (no new reaction); longer and it must be noticed again.
        velocity_window_s: span (s) of the finite difference that estimates the perceived target
            velocity.
        look_width_deg: Fitts' W (deg) of a look-around turn (no target: a loose, slow movement).
        look_threshold_deg: look requests closer than this (deg) to the current view are ignored.
        buffer_len: samples kept of the target's recent positions (bounded memory; 64 ~ 1 s at 64 Hz).
        max_position_rate_deg_s: cap (deg/s) on the proportional pursuit correction.
        pursuit_onset_s: smooth pursuit ramps up to its gain over this time (s) after a flick.
    """

    reacquire_s: float = 0.35
    velocity_window_s: float = 0.06
    look_width_deg: float = 12.0
    look_threshold_deg: float = 4.0
    buffer_len: int = 64
    max_position_rate_deg_s: float = 60.0
    pursuit_onset_s: float = 0.15


class AimController:
    """The honest hand on the mouse: turns a target (or a look request) into view angles.

    Args: skill; config: constants that are not skill; model: plans every sub-movement (default
    :class:`MinimumJerkFitts`; see :class:`AimModel`).

    Call :meth:`reset` with the current view at spawn, then :meth:`step` once per client tick.
    Yaw is kept unwrapped internally so turns never jump at +/-180. Angles are plain floats
    (this runs for every bot every tick; small numpy arrays would cost more than the maths).
    """

    def __init__(self, skill: Skill, config: AimConfig = AimConfig(), model: AimModel | None = None) -> None:
        self.skill = skill
        self.config = config
        self.model: AimModel = model if model is not None else MinimumJerkFitts()
        self.tremor = Tremor(skill)
        self.recoil = RecoilCompensator(skill)
        self._base_yaw = 0.0
        self._base_pitch = 0.0
        self._moves: list[SubMovement] = []
        self._out_yaw = 0.0
        self._out_pitch = 0.0
        self.phase = AimPhase.IDLE
        self.target: int | None = None
        self._react_until = 0.0
        self._corrections = 0
        self._next_correction_s = 0.0
        self._last_catchup_s = -math.inf
        self._pursuit_start_s = 0.0
        self._lost_since: float | None = None
        self._buffer: deque[tuple[float, float, float, float]] = deque(maxlen=config.buffer_len)
        self._eye: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self._offset = (0.0, 0.0)  # last tremor + recoil pull added to the hand (deg)
        self._width = 0.0
        self.reaction_s = 0.0
        self.flick: SubMovement | None = None
        self.flick_goal: tuple[float, float] | None = None

    # -- state ------------------------------------------------------------------------------

    def reset(self, yaw_deg: float, pitch_deg: float) -> None:
        """Put the view at the given angles (deg) and forget any engagement. The shake and pull
        riding on the hand carry on, so the next output continues from this view without a jump."""
        self._base_yaw = float(yaw_deg) - self._offset[0]
        self._base_pitch = float(pitch_deg) - self._offset[1]
        self._out_yaw, self._out_pitch = float(yaw_deg), float(pitch_deg)
        self._moves.clear()
        self._buffer.clear()
        self.recoil.reset()
        self.phase = AimPhase.IDLE
        self.target = None
        self._lost_since = None
        self.flick = None
        self.flick_goal = None

    def hand(self, t_s: float) -> tuple[float, float]:
        """Hand position (unwrapped yaw, pitch) in degrees at ``t_s``, without tremor or recoil pull."""
        y, p = self._base_yaw, self._base_pitch
        for m in self._moves:
            s = m.fraction(t_s)
            y += m.dyaw_deg * s
            p += m.dpitch_deg * s
        return y, p

    def hand_end(self) -> tuple[float, float]:
        """Where the hand will stop when the sub-movements in progress end (unwrapped yaw, pitch)."""
        y, p = self._base_yaw, self._base_pitch
        for m in self._moves:
            y += m.dyaw_deg
            p += m.dpitch_deg
        return y, p

    @property
    def corrections(self) -> int:
        """Corrective sub-movements made since the current engagement's flick."""
        return self._corrections

    @property
    def moves(self) -> tuple[SubMovement, ...]:
        """Sub-movements in progress."""
        return tuple(self._moves)

    def _fold(self, t_s: float) -> None:
        if not self._moves:
            return
        keep = []
        for m in self._moves:
            if t_s >= m.end_s:
                self._base_yaw += m.dyaw_deg
                self._base_pitch += m.dpitch_deg
            else:
                keep.append(m)
        self._moves = keep

    # -- perception of the target ----------------------------------------------------------

    def _push(self, t_s: float, target: AimTarget) -> None:
        self._eye = target.eye_m
        self._buffer.append((t_s, *target.point_m))

    def shift_target(self, delta_m: tuple[float, float, float]) -> None:
        """The player changed *where* on the target it aims (by ``delta_m``, m): its memory of the
        target moves with it, so the change is an ordinary aiming error to correct, not a
        perceived jump of the target."""
        dx, dy, dz = delta_m
        self._buffer = deque(((t, x + dx, y + dy, z + dz) for t, x, y, z in self._buffer), maxlen=self._buffer.maxlen)

    def _point_at(self, t_s: float) -> tuple[float, float, float]:
        """The aim point (m) as it was at ``t_s``, from the buffer (linear interpolation; the
        oldest sample when ``t_s`` is older, the newest when newer)."""
        buf = self._buffer
        if t_s <= buf[0][0]:
            return buf[0][1], buf[0][2], buf[0][3]
        # The newest sample at or before t_s (the samples are in time order).
        i = bisect.bisect_right(buf, t_s, key=_SAMPLE_TIME) - 1
        t0, x0, y0, z0 = buf[i]
        if i == len(buf) - 1:
            return x0, y0, z0
        t1, x1, y1, z1 = buf[i + 1]
        w = (t_s - t0) / (t1 - t0) if t1 > t0 else 1.0
        return x0 + w * (x1 - x0), y0 + w * (y1 - y0), z0 + w * (z1 - z0)

    def _angles_of(self, point: tuple[float, float, float], ref_yaw: float) -> tuple[float, float]:
        yaw, pitch, _ = direction_angles(self._eye, point)
        return ref_yaw + _wrap(yaw - ref_yaw), pitch

    def perceived(self, t_s: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """((yaw, pitch), (yaw rate, pitch rate)) of the target as the player perceives it at
        ``t_s``: the aim point where it was ``pursuit_lag_s`` ago, seen from the current eye, and
        its angular velocity from a finite difference (deg, deg/s). Yaw is unwrapped near the hand."""
        lag = self.skill.pursuit_lag_s
        w = self.config.velocity_window_s
        ref = self.hand(t_s)[0]
        now = self._angles_of(self._point_at(t_s - lag), ref)
        span = min(w, max(0.0, (t_s - lag) - self._buffer[0][0]))
        if span <= 1e-6:
            return now, (0.0, 0.0)
        before = self._angles_of(self._point_at(t_s - lag - span), now[0])
        return now, ((now[0] - before[0]) / span, (now[1] - before[1]) / span)

    def _seen_hand(self, t_s: float) -> tuple[float, float]:
        """Where the eye sees the crosshair: the hand plus the slow drift (the eye corrects the
        drift like any other error; the 10 Hz tremor is too fast to correct)."""
        hy, hp = self.hand(t_s)
        dy, dp = self.tremor.drift
        return hy + dy, hp + dp

    def _error_to(self, t_s: float, goal: tuple[float, float]) -> float:
        hy, hp = self._seen_hand(t_s)
        return angle_error_deg(_wrap(goal[0] - hy), goal[1] - hp, hp)

    # -- planning ----------------------------------------------------------------------------

    def _plan(
        self, t_s: float, kind: MovementKind, goal: tuple[float, float], width_deg: float, rng: np.random.Generator
    ) -> SubMovement | None:
        """Has the model plan a movement towards ``goal`` (deg) and starts it. It superimposes on
        movements still in progress, so it is planned from where those will end (Flash & Henis
        1991), as the eye sees the hand there (plus the slow drift)."""
        hy, hp = self.hand_end()
        dy, dp = self.tremor.drift
        request = MovementRequest(kind, t_s, hy + dy, hp + dp, goal[0], goal[1], width_deg)
        move = self.model.plan(request, self.skill, rng)
        if move is None:
            return None
        if not (math.isfinite(move.duration_s) and move.duration_s > 0.0):
            raise ValueError(f"aim model {type(self.model).__name__} planned a movement of duration {move.duration_s!r} s")
        self._moves.append(move)
        return move

    def _lead_goal(self, t_s: float, extra_s: float) -> tuple[float, float]:
        """Perceived target plus the part of its motion the player predicts over the visual delay
        and ``extra_s`` more seconds (the planned movement's duration)."""
        (sy, sp), (vy, vp) = self.perceived(t_s)
        k = self.skill.pursuit_prediction * (self.skill.pursuit_lag_s + extra_s)
        return sy + vy * k, sp + vp * k

    def _towards_target(self, t_s: float, kind: MovementKind, rng: np.random.Generator) -> SubMovement | None:
        """A flick, correction or catch-up towards the target: the goal is planned here (what the
        player perceives and predicts), the movement by the model."""
        width = max(self._width, 1e-3)
        if kind is MovementKind.FLICK:
            # The player leads a moving target by about the time the flick will take; it guesses
            # that time by Fitts' law whatever the model then plans.
            sk = self.skill
            seen, _ = self.perceived(t_s)
            mt_guess = fitts_time_s(self._error_to(t_s, seen), width, sk.fitts_a_s, sk.fitts_b_s_per_bit)
            goal = self._lead_goal(t_s, mt_guess)
            self.flick_goal = goal
            return self._plan(t_s, kind, goal, width, rng)
        # Smooth pursuit runs during corrections and carries the hand along with the target, so a
        # correction only makes up the position error (plus the predicted part of the delay).
        return self._plan(t_s, kind, self._lead_goal(t_s, 0.0), width, rng)

    # -- the tick ------------------------------------------------------------------------------

    def step(
        self,
        now_s: float,
        dt_s: float,
        target: AimTarget | None,
        rng: np.random.Generator,
        look: tuple[float, float] | None = None,
        punch: tuple[float, float] = (0.0, 0.0),
    ) -> AimOutput:
        """Advance one client tick.

        Args:
            now_s: client clock (s). dt_s: time since the previous step (s).
            target: the target this tick (None when none is visible).
            rng: the bot's generator. look: (yaw, pitch) deg to turn to when there is no target
                (path heading, a noise...), or None to hold. punch: own recoil punch (pitch up,
                yaw right) in degrees.
        Returns:
            The view to send and the player's belief about the aim.
        """
        sk = self.skill
        cfg = self.config
        t = now_s
        if self._moves:
            self._fold(t)

        if target is None:
            if self.target is not None:
                if self._lost_since is None:
                    self._lost_since = t
                if t - self._lost_since > cfg.reacquire_s:
                    self.target = None
                    self.phase = AimPhase.IDLE
                    self._buffer.clear()
        else:
            if target.slot != self.target or self.phase is AimPhase.IDLE:
                self.target = target.slot
                self._buffer.clear()
                self.reaction_s = sample_reaction_s(rng, sk)
                self._react_until = t + self.reaction_s
                self._corrections = 0
                self.phase = AimPhase.REACT
                self.flick = None
            self._lost_since = None
            self._push(t, target)
            self._width = target.width_deg

        visible = target is not None
        if self.phase is AimPhase.REACT and visible and t >= self._react_until:
            self.flick = self._towards_target(t, MovementKind.FLICK, rng)
            self.phase = AimPhase.FLICK
        elif self.phase is AimPhase.FLICK and not self._moves:
            self.phase = AimPhase.CORRECT
            self._pursuit_start_s = t
            self._next_correction_s = t + self._gap(rng)
        elif self.phase is AimPhase.CORRECT and visible and t >= self._next_correction_s and not self._moves:
            seen, _ = self.perceived(t)
            if self._corrections < sk.max_corrections and self._error_to(t, seen) > sk.settle_fraction * 0.5 * self._width:
                move = self._towards_target(t, MovementKind.CORRECTION, rng)
                self._corrections += 1
                self._next_correction_s = (move.end_s if move is not None else t) + self._gap(rng)
            else:
                self.phase = AimPhase.TRACK
        if self.phase is AimPhase.CORRECT and visible:
            self._follow_motion(t, dt_s)
        if self.phase is AimPhase.TRACK and visible:
            self._pursue(t, dt_s, rng)
        if self.phase is AimPhase.IDLE and look is not None and not self._moves:
            self._look(t, look, rng)
        if self._moves:
            self._fold(t)
            hy, hp = self.hand(t)
        else:
            hy, hp = self._base_yaw, self._base_pitch

        ty, tp = self.tremor.step(dt_s, rng)
        ry, rp = self.recoil.step(dt_s, punch[0], punch[1])
        self._offset = (ty + ry, tp + rp)
        # Whole mouse counts: the view moves by integer multiples of one count.
        q = sk.mouse_count_deg
        out_yaw = self._out_yaw
        out_yaw += round((hy + ty + ry - out_yaw) / q) * q
        out_pitch = self._out_pitch
        out_pitch += round((hp + tp + rp - out_pitch) / q) * q
        lim = PITCH_LIMIT_DEG
        out_pitch = -lim if out_pitch < -lim else lim if out_pitch > lim else out_pitch  # noqa: FURB136
        self._out_yaw = out_yaw
        self._out_pitch = out_pitch

        err = math.inf
        if self.target is not None and self._buffer:
            # The player judges the aim against where it believes the target is: the perceived
            # position plus the part of the delay it predicts (the same goal its pursuit tracks).
            (sy, sp), (vy, vp) = self.perceived(t)
            k = sk.pursuit_prediction * sk.pursuit_lag_s
            sy, sp = sy + vy * k, sp + vp * k
            shot_yaw = out_yaw - punch[1]
            shot_pitch = out_pitch + punch[0]
            err = angle_error_deg(_wrap(sy - shot_yaw), sp - shot_pitch, shot_pitch)
        # Positional, in field order (yaw, pitch, phase, target, perceived error, width).
        return AimOutput(_wrap(out_yaw), out_pitch, self.phase, self.target, err,
                         self._width if self.target is not None else 0.0)

    def _gap(self, rng: np.random.Generator) -> float:
        """Dwell (s) before a correction: the feedback delay, log-normal with sigma 0.3."""
        return self.skill.correction_gap_s * math.exp(0.3 * float(rng.standard_normal()))

    def _follow_motion(self, t_s: float, dt_s: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """The smooth-pursuit velocity component: the hand moves with the perceived target motion
        times the gain, ramping up over ``pursuit_onset_s`` after the flick (pursuit onset is
        gradual). Returns the perception it used."""
        sk = self.skill
        seen, (vy, vp) = self.perceived(t_s)
        ramp = min(1.0, max(0.0, (t_s - self._pursuit_start_s) / self.config.pursuit_onset_s))
        self._base_yaw += ramp * sk.pursuit_gain * vy * dt_s
        self._base_pitch += ramp * sk.pursuit_gain * vp * dt_s
        return seen, (vy, vp)

    def _pursue(self, t_s: float, dt_s: float, rng: np.random.Generator) -> None:
        sk = self.skill
        (sy, sp), (vy, vp) = self._follow_motion(t_s, dt_s)
        if self._moves:
            return
        k = sk.pursuit_prediction * sk.pursuit_lag_s
        hy, hp = self._seen_hand(t_s)
        ey, ep = _wrap(sy + vy * k - hy), sp + vp * k - hp
        size = angle_error_deg(ey, ep, hp)
        threshold = max(sk.catchup_threshold_deg, 0.5 * self._width)
        if size > threshold and t_s - self._last_catchup_s >= sk.catchup_refractory_s:
            self._towards_target(t_s, MovementKind.CATCHUP, rng)
            self._last_catchup_s = t_s
            return
        gain = min(1.0, sk.pursuit_position_gain_hz * dt_s)
        sy_, sp_ = ey * gain, ep * gain
        cap = self.config.max_position_rate_deg_s * dt_s
        n = math.hypot(sy_, sp_)
        if n > cap:
            sy_, sp_ = sy_ * cap / n, sp_ * cap / n
        self._base_yaw += sy_
        self._base_pitch += sp_

    def _look(self, t_s: float, look: tuple[float, float], rng: np.random.Generator) -> None:
        hy, hp = self.hand(t_s)
        goal = (hy + _wrap(look[0] - hy), float(look[1]))
        # self._error_to(t_s, goal), inlined (a look request comes nearly every idle tick).
        dy, dp = self.tremor.drift
        sy, sp = hy + dy, hp + dp
        if math.hypot(_wrap(goal[0] - sy) * math.cos(math.radians(sp)), goal[1] - sp) < self.config.look_threshold_deg:
            return
        self._plan(t_s, MovementKind.LOOK, goal, self.config.look_width_deg, rng)


# ------------------------------------------------------------------------------ fire decision


@dataclass(frozen=True, slots=True)
class TriggerConfig:
    """Fire-decision constants that are not personal skill.

    Attributes:
        fire_margin_s: FIRE commands are spaced by at least fire_interval_s plus this (s), so
            clock rounding never makes two shots closer than the weapon allows.
        close_range_m, far_range_m: range bands (m) for burst lengths.
        burst_close, burst_mid, burst_far: (min, max) rounds of an automatic burst per band,
            before the skill's ``burst_scale``; far shots are taps.
        spray_tolerance_factor: a burst continues while the perceived error stays below this many
            times the normal fire tolerance (players commit to a spray).
        burst_pause_s: (min, max) pause (s) after a burst before the next one, on top of the time
            the recoil needs to settle.
        settle_fraction: ... the next burst waits until this fraction of the burst's kick has
            recovered (s = fraction x kick / recovery rate).
        premature_window_s: early shots happen only within this time (s) after the flick started.
        click_sigma: log-space sd of the extra click delay of semi-automatic weapons.
    """

    fire_margin_s: float = 0.005
    close_range_m: float = 10.0
    far_range_m: float = 25.0
    burst_close: tuple[int, int] = (4, 10)
    burst_mid: tuple[int, int] = (2, 5)
    burst_far: tuple[int, int] = (1, 2)
    spray_tolerance_factor: float = 2.5
    burst_pause_s: tuple[float, float] = (0.12, 0.40)
    settle_fraction: float = 0.6
    premature_window_s: float = 0.6
    click_sigma: float = 0.4


class TriggerControl:
    """Decides each tick whether to fire one shot; never faster than the weapon allows."""

    def __init__(self, skill: Skill, config: TriggerConfig = TriggerConfig()) -> None:
        self.skill = skill
        self.config = config
        self.last_shot_s = -math.inf
        self._next_allowed_s = -math.inf
        self._burst_left = 0
        self._pause_until_s = -math.inf
        self._premature = False
        self._engagement: int | None = None
        self._engaged_at_s = 0.0
        self._shots_in_burst = 0
        self.spray_started = False

    def reset(self) -> None:
        """Forget bursts and engagements (respawn, weapon switch keeps the shot clock)."""
        self._burst_left = 0
        self._pause_until_s = -math.inf
        self._engagement = None

    def decide(
        self,
        now_s: float,
        spec: WeaponSpec,
        ammo: int,
        reloading: bool,
        aim: AimOutput,
        distance_m: float,
        rng: np.random.Generator,
        hold: bool = False,
    ) -> bool:
        """True to fire a shot in this command.

        Fires only at a target the aim controller is engaging (flick started), with ammo, not
        reloading, at least ``fire_interval_s + fire_margin_s`` after the previous shot, and when the
        perceived error is within the tolerance (``fire_tolerance`` target half-widths; wider once
        a burst is running, and for an occasional premature shot). ``spray_started`` tells whether
        this shot opens a new burst (the recoil compensator redraws its gain then). ``hold``: the
        player waits (e.g. for its body to stop) and opens no new burst this tick.
        """
        sk = self.skill
        cfg = self.config
        self.spray_started = False
        if aim.target != self._engagement:
            self._engagement = aim.target
            self._engaged_at_s = now_s
            self._premature = aim.target is not None and float(rng.random()) < sk.premature_prob
            self._burst_left = 0
        phase = aim.phase
        engaged = aim.target is not None and (
            phase is AimPhase.FLICK or phase is AimPhase.CORRECT or phase is AimPhase.TRACK
        )
        if not engaged or ammo <= 0 or reloading or distance_m > spec.max_range_m:
            self._burst_left = 0
            return False
        if now_s < self._next_allowed_s:
            return False
        half = 0.5 * aim.width_deg
        tolerance = sk.fire_tolerance * half
        if self._burst_left > 0:
            if aim.perceived_error_deg <= cfg.spray_tolerance_factor * tolerance:
                self._shot(now_s, spec, rng)
                return True
            self._end_burst(now_s, spec, rng)
            return False
        if now_s < self._pause_until_s or hold:
            return False
        early = self._premature and aim.phase is not AimPhase.TRACK and now_s - self._engaged_at_s < cfg.premature_window_s + sk.reaction_median_s
        if early:
            tolerance *= sk.premature_factor
        if aim.perceived_error_deg > tolerance:
            return False
        self._premature = False
        self._burst_left = self._burst_length(spec, distance_m, rng)
        self._shots_in_burst = 0
        self.spray_started = True
        self._shot(now_s, spec, rng)
        return True

    def _burst_length(self, spec: WeaponSpec, distance_m: float, rng: np.random.Generator) -> int:
        cfg = self.config
        if distance_m <= cfg.close_range_m:
            lo, hi = cfg.burst_close
        elif distance_m <= cfg.far_range_m:
            lo, hi = cfg.burst_mid
        else:
            lo, hi = cfg.burst_far
        n = int(rng.integers(lo, hi + 1))
        if not spec.automatic:
            # Semi-automatic: a "burst" is a run of clicks; fewer at range, where players re-aim.
            n = max(1, (n + 1) // 2)
        return max(1, round(n * self.skill.burst_scale))

    def _shot(self, now_s: float, spec: WeaponSpec, rng: np.random.Generator) -> None:
        cfg = self.config
        self.last_shot_s = now_s
        self._burst_left -= 1
        self._shots_in_burst += 1
        interval = spec.fire_interval_s + cfg.fire_margin_s
        if not spec.automatic:
            interval += self.skill.click_extra_s * math.exp(cfg.click_sigma * float(rng.standard_normal()))
        self._next_allowed_s = now_s + interval
        if self._burst_left <= 0:
            self._end_burst(now_s, spec, rng)

    def _end_burst(self, now_s: float, spec: WeaponSpec, rng: np.random.Generator) -> None:
        cfg = self.config
        shots = max(1, self._shots_in_burst)
        kick = sum(spec.recoil_kick(i)[0] for i in range(shots))
        settle = cfg.settle_fraction * kick / spec.recoil_recovery_deg_s if spec.recoil_recovery_deg_s > 0 else 0.0
        self._pause_until_s = now_s + settle + float(rng.uniform(*cfg.burst_pause_s))
        self._burst_left = 0
        self._shots_in_burst = 0
