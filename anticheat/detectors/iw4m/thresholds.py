"""IW4MAdmin's thresholds: the configuration and the population statistics behind every limit.

The figures are IW4MAdmin's fit to real players (REFERENCES section 3): ratios are unitless, angles in
degrees, times in seconds. Our hitboxes, tick rate and weapons differ from IW4x's, so every figure is a
config field that the testbed can re-fit on honest bots.

Sample-size interpolation: a standard deviation falls from its low-sample value to its high-sample value
as hits grow, ``sd(n) = lerp(sd_low, sd_high, clamp((n - n_low) / (n_high - n_low), 0, 1))``, and a
margin of error ``margin_z / sqrt(n)`` is added on top of ``mean + k * sd(n)``.

Reading of the quoted figures: the headshot flag threshold "falls from ~0.576 at 15 hits to ~0.300 at
60+" is ``mean + 2 * sd(n)`` *before* the margin of error: 0.222 + 2 * 0.177 = 0.576 and
0.222 + 2 * 0.0392 = 0.300. With the margin the effective thresholds are 1.001 (15 hits: no headshot
ratio can exceed it) and 0.513 (60 hits). IW4MAdmin compares against the thresholds with the margin;
so do we, and ``margin_z = 0`` gives the quoted curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from anticheat.tolerances import searched

__all__ = ["IW4MConfig", "lerp", "max_offset_deg", "ratio_threshold", "margin_of_error"]


@dataclass(frozen=True, slots=True)
class IW4MConfig:
    """IW4MAdmin detection tolerances.

    Attributes (session unless "lifetime" is in the name):
        flag_severity, ban_severity: Detection severity of the two levels (Flag: human review; Ban).
        margin_z: margin of error numerator, ``margin_z / sqrt(hits)`` (IW4MAdmin 1.6455).
        reemit_every_hits: after a detection of one type, scope and level, the same one is raised again
            only once this many more hits have been analysed (IW4MAdmin re-raises on every hit, which
            floods the sanction pipeline with copies).

        bone_min_kills: Bone needs this many session kills (15).
        bone_lerp_low_hits, bone_lerp_high_hits: sd interpolation range in hits (15 to 60).
        headshot_mean, headshot_sd_low, headshot_sd_high: (head + neck) / hits population
            (0.222; 0.1769994181 to 0.03924263235).
        headshot_flag_sd, headshot_ban_sd: 2.0 and 3.5 deviations.
        max_bone_mean, max_bone_sd_low, max_bone_sd_high: largest single-bone share
            (0.4593110238; 0.1324612879 to 0.0515753935).
        max_bone_flag_sd, max_bone_ban_sd: 2.25 and 3.25 deviations.
        lifetime_bone_min_kills: lifetime Bone needs this many lifetime kills (IW4MAdmin's high sample 100).
        bone_cap_hits: the Bone limits stop tightening at this many hits (250; 0: never, as
            IW4MAdmin). IW4MAdmin's limits fall with the margin of error towards mean + k sd, a
            headshot ratio of 0.30, so every player whose habit lies above it (2.3 % of IW4MAdmin's
            own population) is flagged in the end: in a simulation a player at 0.345 is flagged
            within 1 h with probability 0.14, 3 h 0.60, 10 h 1.00. Frozen at 250 hits the headshot
            limit stays at 0.405 (4.7 population sd above the mean) and the largest-bone one at
            0.679; that player's chance stays 0.08 however long it plays, and cheats whose share is
            above the frozen limit are still flagged, at the same hit as before up to 250 hits.

        bone_statistic: "cusum" (the default) or "ratio" (IW4MAdmin's headshot ratio test). With
            "cusum" the headshot half of Bone is Page's test over the lifetime's hits
            (:mod:`anticheat.detectors.iw4m.headshot`), one Bernoulli verdict each (head or neck:
            positive), and only the largest-single-bone half stays a ratio test. IW4MAdmin's
            limits at a few dozen hits sit ~2.5 binomial sd above a high but human habit, looked at
            every hit: a player at 0.35 crosses them in about one session in twelve.
        headshot_theta0: the highest honest headshot share (0.40: IW4MAdmin's mean plus 4.6 of its
            high-sample sd; our honest players' session shares reach 0.345); in control at or below it.
        headshot_theta1: the share of a head-aiming cheat (0.65; our smooth aimbots hit 0.54 to
            0.86).
        headshot_flag_arl_hits, headshot_ban_arl_hits: in-control average run length, in hits, to a
            flag (6e6: at 600 hits per player-hour, a pro's rate, one per 10,000 player-hours for a
            player exactly at theta0; ~2e9 hits for one at 0.345) and to a ban (1e8). A share of 0.86
            flags after ~39 hits on average, 0.65 after ~102, 0.54 after ~500.

        chest_min_hits: Chest needs this many upper-torso hits (30); chest_ban_min_hits: ban needs 60.
        chest_mean, chest_sd_low, chest_sd_high: upper / lower torso hit ratio (0.4435; 0.2859234644 to
            0.2195212861). The ratio is upper-torso hits divided by lower-torso hits, IW4MAdmin's own
            ratio: a share bounded by 1 (upper / (upper + lower), or upper / all hits) could never
            exceed the 3-sd flag threshold (0.4435 + 3 * 0.286 = 1.30), so only the unbounded ratio
            makes the thresholds reachable. A mean of 0.4435 says IW4x players hit the lower torso
            about 2.25 times as often as the upper one; our hitboxes will give another mean, which is
            why these are configuration. With no lower-torso hit the ratio is taken as upper / 1.
        chest_flag_sd, chest_ban_sd: 3 and 4 deviations.
        chest_lerp_low_hits, chest_lerp_high_hits: sd interpolation range (30 to 100 upper-torso hits).
        lifetime_chest_min_hits: lifetime Chest needs this many lifetime upper-torso hits (100).
        chest_statistic: "cusum" (the default) or "ratio" (IW4MAdmin's test, every field above from
            ``chest_min_hits`` on). IW4MAdmin re-tests the cumulative ratio at every hit against
            limits fitted to IW4x's hitboxes, so an honest player whose habit puts the ratio near a
            limit crosses it sooner or later, and the longer the session the likelier. "cusum" asks
            the question as Page's test over the torso hits, one Bernoulli verdict each (upper:
            positive), whose false-alarm rate is set per hit and so per player-hour. Only hits on a
            target whose upper and lower torso were both in view count (``ShotResult.exposed``;
            hits without it count too): a target behind low cover shows only its upper torso, and
            every hit on it there says nothing about where the shooter aims.
        chest_theta0: the upper-torso share of torso hits an honest player can have (0.6, a ratio of
            1.5: IW4MAdmin's 4-sd ban line at low sample is 1.59); in control at or below it.
        chest_theta1: the share of a cheat that aims at the chest (0.85, a ratio of 5.7: our
            hitboxes put most misses of a chest aim point on the arms and upper torso).
        chest_flag_arl_hits, chest_ban_arl_hits: in-control average run length, in torso hits, to a
            flag (5e6: at ~400 torso hits per player-hour, one per 12,000 player-hours for a player
            exactly at theta0, and far rarer below it) and to a ban (1e8). A share of 0.95 flags
            after ~48 torso hits on average, 0.85 after ~87.

        offset_mu, offset_sigma: log-normal fit of per-hit offsets (-2.3243889, 0.5851351).
        offset_sigmas: deviations above the mean in log space (4).
        offset_ban_min_hits: session ban needs this many hits with an offset (60).
        offset_flag_min_hits: session flag needs this many (30; IW4MAdmin has no Offset flag: ours is
            the same limit judged earlier, for human review).
        lifetime_offset_min_location_hits: lifetime ban needs more than this many lifetime hits at the
            hit's location (100).

        strain_flag, strain_ban: 0.36 and 0.9; strain_ban_min_hits: 5.
        strain_min_dt_s: the time between hits is at least this (50 ms).
        strain_decay_base, strain_decay_halving_s: ``strain *= base ** (2 ** (dt / halving) / 1000)``
            with dt in ms (0.9 and 250 ms).
        strain_distance_unit_m: distance is converted to this unit (IW4x inches: 0.0254 m).

        snap_flag, snap_ban: session average snap (deg) limits (7.6 and 11.7).
        snap_min_hits: session snap hits needed (30); lifetime_snap_min_hits: 60.
        snap_step_s: spacing of the view-angle samples the snap is measured on (50 ms, IW4x's 20 Hz
            snapshots, so the deg-per-step figures keep their meaning at our 64 Hz command rate).
        snap_reengage_s: a hit counts as a snap hit when it is the first on a new victim or at least this
            long after the last snap hit (1 s).

        recoil_min_hits: Recoil needs this many hits with a recoil weapon (15).
        recoil_min_kills: and more than this many session kills (5).
        recoil_zero_tolerance_deg: the mean reported recoil counts as zero at or below this (IW4MAdmin
            compares with exactly 0; a tiny tolerance only absorbs float noise).
        recoil_samples_before: samples before the shot command included in a hit's recoil average (2).

        button_flag_hits, button_ban_hits: hits whose command carried no FIRE press needed to flag (3)
            and to ban (5). One such hit is already impossible for an honest client, but a dropped or
            reordered command must not ban anybody on its own.

        aim_ring_size: AimSamples kept per player (32 = 0.5 s at 64 Hz) to find the angles around hits.
        pending_max: hits kept waiting for the command after them (8).
        pending_timeout_s: a waiting hit is judged without the after-sample after this long (0.5 s).
    """

    flag_severity: float = 0.6
    ban_severity: float = 0.95
    margin_z: float = 1.6455
    reemit_every_hits: int = 10

    bone_min_kills: int = 15
    bone_lerp_low_hits: int = 15
    bone_lerp_high_hits: int = 60
    headshot_mean: float = 0.222
    headshot_sd_low: float = 0.1769994181
    headshot_sd_high: float = 0.03924263235
    headshot_flag_sd: float = 2.0
    headshot_ban_sd: float = 3.5
    max_bone_mean: float = 0.4593110238
    max_bone_sd_low: float = 0.1324612879
    max_bone_sd_high: float = 0.0515753935
    max_bone_flag_sd: float = 2.25
    max_bone_ban_sd: float = 3.25
    lifetime_bone_min_kills: int = 100
    bone_cap_hits: int = 250
    bone_statistic: str = "cusum"
    headshot_theta0: float = 0.40
    headshot_theta1: float = 0.65
    headshot_flag_arl_hits: float = 6e6
    headshot_ban_arl_hits: float = 1e8

    chest_min_hits: int = 30
    chest_ban_min_hits: int = 60
    chest_mean: float = 0.4435
    chest_sd_low: float = 0.2859234644
    chest_sd_high: float = 0.2195212861
    chest_flag_sd: float = 3.0
    chest_ban_sd: float = 4.0
    chest_lerp_low_hits: int = 30
    chest_lerp_high_hits: int = 100
    lifetime_chest_min_hits: int = 100
    chest_statistic: str = "cusum"
    chest_theta0: float = 0.6
    chest_theta1: float = 0.85
    chest_flag_arl_hits: float = 5e6
    chest_ban_arl_hits: float = 1e8

    offset_mu: float = -2.3243889
    offset_sigma: float = 0.5851351
    offset_sigmas: float = searched(4.0, 2.0, 8.0)
    offset_ban_min_hits: int = 60
    offset_flag_min_hits: int = 30
    lifetime_offset_min_location_hits: int = 100

    strain_flag: float = searched(0.36, 0.15, 0.9)
    strain_ban: float = 0.9
    strain_ban_min_hits: int = 5
    strain_min_dt_s: float = 0.05
    strain_decay_base: float = 0.9
    strain_decay_halving_s: float = 0.25
    strain_distance_unit_m: float = 0.0254

    snap_flag: float = searched(7.6, 3.0, 11.7)
    snap_ban: float = 11.7
    snap_min_hits: int = 30
    lifetime_snap_min_hits: int = 60
    snap_step_s: float = 0.05
    snap_reengage_s: float = 1.0

    recoil_min_hits: int = 15
    recoil_min_kills: int = 5
    recoil_zero_tolerance_deg: float = 1e-9
    recoil_samples_before: int = 2

    button_flag_hits: int = 3
    button_ban_hits: int = 5

    aim_ring_size: int = 32
    pending_max: int = 8
    pending_timeout_s: float = 0.5

    def __post_init__(self) -> None:
        if self.bone_lerp_high_hits <= self.bone_lerp_low_hits:
            raise ValueError("bone_lerp_high_hits must exceed bone_lerp_low_hits")
        if self.bone_cap_hits < 0:
            raise ValueError(f"bone_cap_hits must be >= 0, got {self.bone_cap_hits}")
        if self.chest_lerp_high_hits <= self.chest_lerp_low_hits:
            raise ValueError("chest_lerp_high_hits must exceed chest_lerp_low_hits")
        if self.bone_statistic not in ("cusum", "ratio"):
            raise ValueError(f"bone_statistic must be 'cusum' or 'ratio', got {self.bone_statistic!r}")
        if not 0.0 < self.headshot_theta0 < self.headshot_theta1 < 1.0:
            raise ValueError("headshot_theta0 and headshot_theta1 need 0 < theta0 < theta1 < 1")
        if not 1.0 < self.headshot_flag_arl_hits <= self.headshot_ban_arl_hits:
            raise ValueError("headshot_flag_arl_hits must exceed 1 and not exceed headshot_ban_arl_hits")
        if self.chest_statistic not in ("cusum", "ratio"):
            raise ValueError(f"chest_statistic must be 'cusum' or 'ratio', got {self.chest_statistic!r}")
        if not 0.0 < self.chest_theta0 < self.chest_theta1 < 1.0:
            raise ValueError("chest_theta0 and chest_theta1 need 0 < theta0 < theta1 < 1")
        if not 1.0 < self.chest_flag_arl_hits <= self.chest_ban_arl_hits:
            raise ValueError("chest_flag_arl_hits must exceed 1 and not exceed chest_ban_arl_hits")
        if self.aim_ring_size < 4 or self.pending_max < 1 or self.reemit_every_hits < 1:
            raise ValueError("aim_ring_size >= 4, pending_max >= 1 and reemit_every_hits >= 1 required")
        # The strain meter divides by these and raises the base to powers: a base above 1 grows
        # the strain instead of decaying it (and overflows), one at or below 0 has no real powers.
        if not 0.0 < self.strain_decay_base <= 1.0:
            raise ValueError(f"strain_decay_base must be in (0, 1], got {self.strain_decay_base}")
        if min(self.strain_decay_halving_s, self.strain_distance_unit_m, self.strain_min_dt_s) <= 0.0:
            raise ValueError("strain_decay_halving_s, strain_distance_unit_m and strain_min_dt_s must be > 0")


def lerp(low: float, high: float, amount: float) -> float:
    """``low`` at amount 0, ``high`` at 1."""
    return low + (high - low) * amount


def margin_of_error(hits: int, z: float) -> float:
    """IW4MAdmin's margin of error ``z / sqrt(hits)`` (0 for no hits: nothing is judged then)."""
    return z / math.sqrt(hits) if hits > 0 else 0.0


def ratio_threshold(
    hits: int,
    mean: float,
    sd_low: float,
    sd_high: float,
    deviations: float,
    lerp_low_hits: int,
    lerp_high_hits: int,
    margin_z: float,
) -> float:
    """``mean + deviations * sd(hits) + margin_z / sqrt(hits)`` with ``sd`` interpolated by sample size."""
    amount = min(1.0, max(0.0, (hits - lerp_low_hits) / (lerp_high_hits - lerp_low_hits)))
    base = mean + deviations * lerp(sd_low, sd_high, amount)
    return base + margin_of_error(hits, margin_z)


def max_offset_deg(hits: int, mu: float = -2.3243889, sigma: float = 0.5851351, sigmas: float = 4.0) -> float:
    """Largest acceptable mean offset (deg) over ``hits`` hits.

    ``exp(max(mu + mu / sqrt(n), mu - mu / sqrt(n)) + sigmas * sigma)``: the log-normal's upper
    ``sigmas``-sigma point with the log-mean widened by its own magnitude over sqrt(n) (60 hits:
    1.372 deg, 100 hits: 1.282 deg). A limit past the largest float is infinite: no offset
    exceeds it.
    """
    n = max(1, hits)
    widen = mu / math.sqrt(n)
    try:
        return math.exp(max(mu + widen, mu - widen) + sigmas * sigma)
    except OverflowError:
        return math.inf
