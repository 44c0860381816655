"""Bone's headshot test as Page's CUSUM over hits (``IW4MConfig.bone_statistic = "cusum"``).

IW4MAdmin's Bone re-tests the cumulative headshot ratio ((head + neck) / hits) at every hit
against limits that hold for one look. At a few dozen hits they sit about 2.5 binomial sd above a
high but human habit, and a session looks at every hit, so a player whose habit is 0.35 crosses
them in about one session in twelve (simulated; one held-out honest player did at 31 of 59
hits). Here every hit is one Bernoulli verdict (head or neck: positive) and Page's CUSUM
accumulates the log likelihood ratio of "a head-aiming cheat" (share ``headshot_theta1``) against
"the highest honest share" (``headshot_theta0``). Its thresholds come from an in-control average
run length in hits (:func:`anticheat.detectors.cusum.threshold_for_arl`), which with a player's
hit rate reads as one false alarm per N player-hours.

The largest-single-bone test stays IW4MAdmin's ratio test (:mod:`anticheat.detectors.iw4m.ratios`):
its limits are high enough (0.79 at 60 hits) that an honest head habit never reaches them, and
it still flags a head lock within a few dozen hits.

The statistic lives in the lifetime :class:`~anticheat.detectors.iw4m.profile.HitStats`, persisted
with the profile, as Chest's does (the recursion is monotone in its start, so no session copy).
"""

from __future__ import annotations

from anticheat.detectors.cusum import CusumLimits, cusum_limits
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.thresholds import IW4MConfig
from world.hitbox import Bone

__all__ = ["headshot_cusum_finding", "headshot_cusum_score", "headshot_limits", "headshot_observe"]

_HEAD = int(Bone.HEAD)
_NECK = int(Bone.NECK)


def headshot_limits(cfg: IW4MConfig) -> CusumLimits:
    """The limits of ``cfg``'s headshot CUSUM (``up`` per head or neck hit, ``down`` per other)."""
    return cusum_limits(cfg.headshot_theta0, cfg.headshot_theta1, cfg.headshot_flag_arl_hits,
                        cfg.headshot_ban_arl_hits)


def headshot_observe(stats: HitStats, bone: int, limits: CusumLimits) -> None:
    """Fold one hit on ``bone`` into the statistic."""
    if bone == _HEAD or bone == _NECK:
        stats.headshot_cusum += limits.up
    else:
        stats.headshot_cusum = max(0.0, stats.headshot_cusum + limits.down)


def headshot_cusum_finding(stats: HitStats, limits: CusumLimits) -> Finding | None:
    """A lifetime Bone finding on the head when the statistic is at a threshold (ban above flag);
    its value is the statistic, its hits the lifetime hits."""
    s = stats.headshot_cusum
    if s >= limits.ban:
        return Finding("Bone", Level.BAN, Scope.LIFETIME, s, limits.ban, stats.hits, _HEAD)
    if s >= limits.flag:
        return Finding("Bone", Level.FLAG, Scope.LIFETIME, s, limits.flag, stats.hits, _HEAD)
    return None


def headshot_cusum_score(stats: HitStats, limits: CusumLimits) -> float:
    """The statistic over the flag threshold (>= 1.0 exactly when :func:`headshot_cusum_finding` finds)."""
    return stats.headshot_cusum / limits.flag
