"""Skill levels of the honest human aim model: named parameters, presets and per-bot variation.

Every number is a parameter of a motor-control or behaviour model in ``bots/aim.py`` and
``bots/honest.py``; the presets span the range the literature reports for mouse aiming and
visually guided tracking, from a casual player (``low``) to a professional (``pro``):

* reaction time, log-normal (median, sigma in log space): simple visual reaction times of
  young adults lie around 180-250 ms and are right-skewed, well fitted by a log-normal
  (Luce 1986, *Response Times*); trained gamers sit at the fast end (~180 ms).
* Fitts' law MT = a + b log2(D/W + 1) (Fitts 1954; Shannon form, MacKenzie 1992): mouse pointing
  has a ~0.1-0.2 s and b ~0.1-0.2 s/bit (throughput 5-10 bits/s), faster for practised players.
* primary sub-movements undershoot and their endpoint scatter grows with amplitude (Meyer et
  al. 1988, optimized sub-movement model; Elliott, Helsen & Chua 2001 review of the two-component
  model: undershoot of a few %, endpoint sd ~5-10 % of the amplitude, then corrective
  sub-movements after a ~60-120 ms visual feedback delay).
* physiological tremor: 8-12 Hz, small amplitude (Elble & Koller 1990); at usual FPS
  sensitivities (~25-50 cm per 360 deg) it is 0.05-0.2 deg of view.
* manual pursuit: visuomotor delay 100-200 ms, velocity gain below 1, partial prediction of a
  steadily moving target, catch-up saccades when the position error grows (Lisberger et al.
  1987; de Brouwer et al. 2002; McRuer's crossover model for manual tracking).
* recoil control: players compensate only part of the spray pattern, late and noisily.
* aim point: per engagement a player aims at the head line ("crosshair placement") or at centre
  mass, scattered vertically and sideways. The body coordinate's lines sit where each bone shows
  to a standing eye in front (``bots.aim.exposed_height_m``), not at its capsule's centre: with
  ``world/hitbox.py`` the upper torso's capsule covers the top of the lower torso's, forearms and
  hands cover the chest centre, and a crouched body's thighs reach forward. Centre mass is the
  belt line (u = 0-0.05, the lower torso), which reproduces IW4MAdmin's real-player hit mix
  (REFERENCES section 3: headshot ratio (head + neck) / hits 0.222, largest bone 0.459, upper /
  lower torso 0.44) best; aiming at the chest gives an upper / lower torso ratio above 1.5, which
  the Chest detector flags in honest players. Cover hides the point: the player aims at the
  lowest line above it that shows, only while it is hidden (``bots.aim.raised_aim_points``).
  Measured in real matches (``referee lab corpus``/``lab fidelity``, figures in ``PRESETS``'
  docstring), not only in ``tests/duel_sim.py``, whose one always-facing, uncovered target at
  5-20 m hid three match effects that pushed the ratio to 0.9 (2-3 per crouched or covered
  victim): a raise to the chest kept for the whole engagement once cover had hidden the belt,
  chest lines that hit forearms, and longer ranges.
* motor noise: frame-to-frame velocity jitter of hand and sensor, 0.3-3 deg per 60 fps frame
  for humans per the server-authoritative article (REFERENCES section 4).

Units are in each field's name or docstring: seconds, degrees, meters, fractions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

import numpy as np


class SkillLevel(str, Enum):
    """Preset names."""

    LOW = "low"
    AVERAGE = "average"
    HIGH = "high"
    PRO = "pro"


@dataclass(frozen=True, slots=True)
class Skill:
    """Parameters of one human's aim and fighting habits.

    Reaction:
        reaction_median_s: median reaction time (s) from a target being noticed to the start of
            the flick. reaction_sigma: sd of ln(reaction time). reaction_min_s: physiological
            floor (s); faster "reactions" would be anticipations, never produced.
    Flick (primary sub-movement):
        fitts_a_s (s), fitts_b_s_per_bit (s/bit): Fitts' law intercept and slope.
        target_width_m: body width (m) used as Fitts' W (shoulders of a player facing us).
        undershoot: mean fractional shortfall of a primary movement (0.06 = stops at 94 % of D).
        amplitude_sd: sd of the primary endpoint along the movement, as a fraction of D.
        direction_sd: sd of the primary endpoint across the movement, as a fraction of D.
        min_flick_s: shortest primary movement (s); Fitts' law with tiny D/W would go below what
            a hand does.
    Corrections:
        correction_gap_s: mean dwell (s) between the end of one sub-movement and the start of the
            correction planned from what the eye then sees (visual feedback delay).
        correction_a_s: Fitts intercept (s) of corrective sub-movements (smaller than a flick's).
        correction_error_sd: sd of a correction's endpoint as a fraction of its amplitude.
        max_corrections: corrective sub-movements after a flick before switching to pursuit.
        settle_fraction: no correction when the perceived error is below this fraction of the
            target's angular half-width.
    Tremor and drift:
        tremor_amp_deg: amplitude (deg) of the 8-12 Hz physiological tremor in yaw (pitch 0.8 x).
        tremor_freq_hz: its centre frequency (Hz).
        drift_sd_deg: stationary sd (deg) of the slow hand drift; drift_tau_s: its time constant (s).
        motor_noise_deg: sd (deg) of the broadband, tick-to-tick jitter of hand and sensor on top
            of the tremor (uncorrelated from one tick to the next). It puts the frame-to-frame
            velocity jitter in the 0.3-3 deg/frame band the server-authoritative article reports for
            humans (REFERENCES section 4), which the 10 Hz tremor alone stays below.
        mouse_count_deg: view change (deg) of one mouse count (m_yaw x sensitivity); view angles
            move in whole counts, as with a real mouse.
    Pursuit:
        pursuit_lag_s: visuomotor delay (s): the hand follows where the target was this long ago.
        pursuit_gain: smooth-pursuit velocity gain (< 1).
        pursuit_prediction: fraction of the delay the player makes up by extrapolating the
            target's perceived motion (0 none, 1 perfect lead).
        pursuit_position_gain_hz: proportional correction of position error (1/s) between
            catch-up movements.
        catchup_threshold_deg: perceived error (deg) that triggers a catch-up sub-movement,
            never less than the target's angular half-width.
        catchup_refractory_s: shortest time (s) between two catch-up movements.
    Recoil:
        recoil_control: fraction of the accumulated kick pulled down (0.3 casual .. 0.8 pro).
        recoil_lag_s: time constant (s) of the pull-down following the kick.
        recoil_noise: relative sd of the pull-down gain from one spray to the next.
    Aim point (per engagement; "body coordinate" u: 0 = lower torso, 0.5 = upper torso, 0.8 =
    neck, 1 = head, each where the bone shows from the front (``bots.aim.exposed_height_m``),
    negative values run down to the hips and thighs):
        head_aim_prob: probability that an engagement aims at the head line.
        head_aim_u: mean u of head-line aim; head_aim_sd: its sd.
        body_aim_u: mean u of centre-mass aim; body_aim_sd: its sd.
        aim_lateral_sd_m: sd (m) of the aim point sideways from the body's axis.
    Fire decision:
        fire_tolerance: fire when the perceived error is below this many target half-widths.
        premature_prob: probability that an engagement opens fire early (a miss-prone shot).
        premature_factor: the tolerance multiplier of such early shots.
        click_extra_s: median extra time (s) a human adds to a semi-automatic weapon's fire
            interval between clicks (log-normal, sigma 0.4).
        burst_scale: multiplier on automatic burst lengths (casual players spray longer).
        stop_to_shoot_prob: probability of stopping (releasing the movement keys) to shoot.
    Perception:
        fov_deg: horizontal field of view (deg); targets outside it are noticed only when they
            shoot or hurt the player.
    """

    name: str
    reaction_median_s: float
    reaction_sigma: float
    reaction_min_s: float
    fitts_a_s: float
    fitts_b_s_per_bit: float
    target_width_m: float
    undershoot: float
    amplitude_sd: float
    direction_sd: float
    min_flick_s: float
    correction_gap_s: float
    correction_a_s: float
    correction_error_sd: float
    max_corrections: int
    settle_fraction: float
    tremor_amp_deg: float
    tremor_freq_hz: float
    drift_sd_deg: float
    drift_tau_s: float
    motor_noise_deg: float
    mouse_count_deg: float
    pursuit_lag_s: float
    pursuit_gain: float
    pursuit_prediction: float
    pursuit_position_gain_hz: float
    catchup_threshold_deg: float
    catchup_refractory_s: float
    recoil_control: float
    recoil_lag_s: float
    recoil_noise: float
    head_aim_prob: float
    head_aim_u: float
    head_aim_sd: float
    body_aim_u: float
    body_aim_sd: float
    aim_lateral_sd_m: float
    fire_tolerance: float
    premature_prob: float
    premature_factor: float
    click_extra_s: float
    burst_scale: float
    stop_to_shoot_prob: float
    fov_deg: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not np.isfinite(value):
                raise ValueError(f"Skill.{f.name} must be finite, got {value!r}")
        positive = (
            "reaction_median_s", "reaction_min_s", "fitts_a_s", "fitts_b_s_per_bit", "target_width_m",
            "min_flick_s", "correction_gap_s", "correction_a_s", "tremor_freq_hz", "drift_tau_s",
            "mouse_count_deg", "pursuit_lag_s", "recoil_lag_s", "premature_factor", "fire_tolerance",
            "burst_scale", "fov_deg", "catchup_refractory_s",
        )
        for name in positive:
            if getattr(self, name) <= 0.0:
                raise ValueError(f"Skill.{name} must be positive, got {getattr(self, name)!r}")
        for name in ("head_aim_prob", "premature_prob", "stop_to_shoot_prob", "recoil_control",
                     "pursuit_gain", "pursuit_prediction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"Skill.{name} must lie in [0, 1], got {getattr(self, name)!r}")
        if self.max_corrections < 0:
            raise ValueError("Skill.max_corrections must be >= 0")


def _preset(name: str, **values: float) -> Skill:
    common: dict[str, float | int] = {
        "reaction_min_s": 0.12,
        "target_width_m": 0.45,
        "min_flick_s": 0.12,
        "max_corrections": 2,
        "settle_fraction": 0.35,
        "tremor_freq_hz": 10.0,
        "drift_tau_s": 1.0,
        "catchup_refractory_s": 0.25,
        "head_aim_u": 1.0,
        "premature_factor": 3.0,
        "fov_deg": 90.0,
    }
    common.update(values)
    return Skill(name=name, **common)  # type: ignore[arg-type]


PRESETS: dict[SkillLevel, Skill] = {
    SkillLevel.LOW: _preset(
        "low", reaction_median_s=0.27, reaction_sigma=0.30, fitts_a_s=0.17, fitts_b_s_per_bit=0.18,
        undershoot=0.08, amplitude_sd=0.10, direction_sd=0.04, correction_gap_s=0.11, correction_a_s=0.12,
        correction_error_sd=0.25, tremor_amp_deg=0.20, drift_sd_deg=0.35, motor_noise_deg=0.13, mouse_count_deg=0.044,
        pursuit_lag_s=0.20, pursuit_gain=0.80, pursuit_prediction=0.30, pursuit_position_gain_hz=3.0,
        catchup_threshold_deg=1.6, recoil_control=0.30, recoil_lag_s=0.20, recoil_noise=0.25,
        head_aim_prob=0.36, head_aim_sd=0.15, body_aim_u=-0.25, body_aim_sd=0.12, aim_lateral_sd_m=0.05,
        fire_tolerance=1.0, premature_prob=0.25, click_extra_s=0.14, burst_scale=1.5,
        stop_to_shoot_prob=0.6,
    ),
    SkillLevel.AVERAGE: _preset(
        "average", reaction_median_s=0.22, reaction_sigma=0.25, fitts_a_s=0.13, fitts_b_s_per_bit=0.14,
        undershoot=0.06, amplitude_sd=0.08, direction_sd=0.03, correction_gap_s=0.09, correction_a_s=0.10,
        correction_error_sd=0.20, tremor_amp_deg=0.15, drift_sd_deg=0.25, motor_noise_deg=0.11, mouse_count_deg=0.040,
        pursuit_lag_s=0.16, pursuit_gain=0.88, pursuit_prediction=0.50, pursuit_position_gain_hz=4.0,
        catchup_threshold_deg=1.3, recoil_control=0.50, recoil_lag_s=0.15, recoil_noise=0.20,
        head_aim_prob=0.42, head_aim_sd=0.12, body_aim_u=-0.25, body_aim_sd=0.08, aim_lateral_sd_m=0.03,
        fire_tolerance=0.7, premature_prob=0.15, click_extra_s=0.10, burst_scale=1.0,
        stop_to_shoot_prob=0.85,
    ),
    SkillLevel.HIGH: _preset(
        "high", reaction_median_s=0.20, reaction_sigma=0.22, fitts_a_s=0.11, fitts_b_s_per_bit=0.12,
        undershoot=0.05, amplitude_sd=0.065, direction_sd=0.025, correction_gap_s=0.08, correction_a_s=0.09,
        correction_error_sd=0.16, tremor_amp_deg=0.11, drift_sd_deg=0.18, motor_noise_deg=0.105, mouse_count_deg=0.035,
        pursuit_lag_s=0.13, pursuit_gain=0.93, pursuit_prediction=0.65, pursuit_position_gain_hz=5.0,
        catchup_threshold_deg=1.1, recoil_control=0.65, recoil_lag_s=0.12, recoil_noise=0.15,
        head_aim_prob=0.40, head_aim_sd=0.1, body_aim_u=-0.25, body_aim_sd=0.07, aim_lateral_sd_m=0.025,
        fire_tolerance=0.6, premature_prob=0.10, click_extra_s=0.08, burst_scale=0.8,
        stop_to_shoot_prob=0.92,
    ),
    SkillLevel.PRO: _preset(
        "pro", reaction_median_s=0.18, reaction_sigma=0.20, fitts_a_s=0.1, fitts_b_s_per_bit=0.1,
        undershoot=0.04, amplitude_sd=0.05, direction_sd=0.02, correction_gap_s=0.07, correction_a_s=0.08,
        correction_error_sd=0.13, tremor_amp_deg=0.08, drift_sd_deg=0.12, motor_noise_deg=0.10, mouse_count_deg=0.030,
        pursuit_lag_s=0.10, pursuit_gain=0.96, pursuit_prediction=0.80, pursuit_position_gain_hz=6.0,
        catchup_threshold_deg=0.9, recoil_control=0.80, recoil_lag_s=0.10, recoil_noise=0.10,
        head_aim_prob=0.38, head_aim_sd=0.08, body_aim_u=-0.25, body_aim_sd=0.06, aim_lateral_sd_m=0.02,
        fire_tolerance=0.5, premature_prob=0.06, click_extra_s=0.06, burst_scale=0.7,
        stop_to_shoot_prob=0.95,
    ),
}
"""The four presets (the typical player of each level, before per-bot variation).

The aim point was fitted on matches, not duels: ``referee lab fidelity`` on three 300 s
honest-only matches (one per map, 12 players of every skill on LAN, DSL and intercontinental
links, seeds 7000-7002; IW4MAdmin's real-player means with 1 sd in brackets):

body_aim_u  head_aim_prob  headshot [0.222±0.085]  largest bone [0.459±0.079]  pooled chest [0.444±0.286]
+0.00/0.05  0.30-0.40      0.179                   0.321                       0.88  (the subtle corpus)
-0.25       0.36-0.48      0.237                   0.380                       0.455 (body aim kept)
-0.45       0.36-0.48      0.193                   0.327                       0.479

Aiming lower than the belt line spreads hits over hips and thighs instead of concentrating them
on the lower torso, so -0.25 is where the largest-bone share peaks; it stays at the reference's
lower edge because this hitbox puts forearms and hands in front of the torso. The pooled chest
ratio falls with skill (low 0.87, average 0.67, high 0.29, pro 0.30): weak recoil control lets
sprays climb onto the upper torso.

The head-aim probability is then nearly flat across skill (low 0.36, average 0.42, high 0.40,
pro 0.38), so that skill moves the headshot ratio little: IW4MAdmin's sd across real players with
many hits is only 0.039. Refitted over 30-minute honest sessions (``referee lab corpus sessions``,
seeds 9300-9305, 72 players, 54-320 hits each), where a rising probability shows its tail:

==========================  ========  =====  =====================  ===============================
head_aim_prob, low .. pro   seeds     all    low, avg, high, pro    IW4MAdmin detections in 36 h
==========================  ========  =====  =====================  ===============================
0.36, 0.41, 0.44, 0.48      9100-05   -      -                      12 Bone: 2 pros, corridors
0.55, 0.49, 0.48, 0.44      9200-05   0.236  .205 .239 .259 .240    7 Bone, 8 Chest: 5 players
0.36, 0.42, 0.40, 0.38      9300-05   0.192  .168 .211 .197 .192    9 Chest: 1 average player
==========================  ========  =====  =====================  ===============================

(headshot ratio of all players and per level; the sd across players of the last row is 0.050)

A weak player's head aim lands on the upper torso more often than a strong one's, so raising its
head aim to lift its headshot ratio raised its upper / lower torso ratio to IW4MAdmin's Chest
limit instead.

The duel (``tests/duel_sim.hit_mix``) always shows one facing target 5-20 m away with no cover;
use it for quick comparisons, never for fitting.
"""


@dataclass(frozen=True, slots=True)
class SkillVariation:
    """How much one bot differs from its level's preset.

    Attributes:
        relative_sd: sd of the log-normal factor applied to every continuous parameter (0.12 =
            about +/-12 %), so two bots of one level never share a fingerprint.
        fov_range_deg: the horizontal field of view is drawn uniformly from this range (deg):
            players set 90-106 deg.
        tremor_freq_range_hz: the tremor centre frequency is drawn uniformly from this range (Hz).
    """

    relative_sd: float = 0.12
    fov_range_deg: tuple[float, float] = (90.0, 106.0)
    tremor_freq_range_hz: tuple[float, float] = (8.5, 11.5)


# Physical facts and the reaction floor are not personal; aim-point means shift additively.
_FIXED = frozenset(
    {"name", "max_corrections", "fov_deg", "tremor_freq_hz", "head_aim_u", "body_aim_u", "target_width_m", "reaction_min_s"}
)
_UNIT_INTERVAL = frozenset(
    {"head_aim_prob", "premature_prob", "stop_to_shoot_prob", "recoil_control", "pursuit_gain", "pursuit_prediction"}
)


def preset(level: SkillLevel | str) -> Skill:
    """The preset of ``level`` ("low", "average", "high", "pro")."""
    return PRESETS[SkillLevel(level)]


def sample_skill(
    rng: np.random.Generator, level: SkillLevel | str, variation: SkillVariation = SkillVariation()
) -> Skill:
    """A bot of ``level``: the preset with every continuous parameter scaled by its own log-normal
    factor (``variation.relative_sd``), probabilities and gains kept in [0, 0.99], physical
    constants (reaction floor, body width) kept, and the field of view and tremor frequency
    drawn from their ranges. Aim-point means (``head_aim_u``, ``body_aim_u``) are shifted
    additively (sd 0.1) instead of scaled."""
    base = preset(level)
    changes: dict[str, float] = {}
    for f in dataclasses.fields(base):
        if f.name in _FIXED:
            continue
        value = getattr(base, f.name)
        if not isinstance(value, float):
            continue
        scaled = value * float(np.exp(variation.relative_sd * rng.standard_normal()))
        if f.name in _UNIT_INTERVAL:
            scaled = float(np.clip(scaled, 0.0, 0.99))
        changes[f.name] = scaled
    changes["head_aim_u"] = base.head_aim_u + 0.1 * float(rng.standard_normal())
    changes["body_aim_u"] = base.body_aim_u + 0.1 * float(rng.standard_normal())
    changes["fov_deg"] = float(rng.uniform(*variation.fov_range_deg))
    changes["tremor_freq_hz"] = float(rng.uniform(*variation.tremor_freq_range_hz))
    return dataclasses.replace(base, name=f"{base.name}*", **changes)
